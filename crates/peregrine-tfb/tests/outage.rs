//! A database outage, end to end: the real `peregrine-tfb` process on the
//! private PostgreSQL cluster of `scripts/pg`. While the cluster is stopped,
//! database requests are answered `503` with a short JSON error within the
//! call timeout and no worker hangs (plaintext keeps working); once the
//! cluster is back, the same process serves database requests again.
//!
//! Needs `DATABASE_URL` pointing at the `scripts/pg` cluster (`scripts/test`
//! starts it and sets the variable) and fails with instructions otherwise.
//! It stops and restarts that cluster, so it lives in a test binary of its
//! own (cargo runs test binaries one at a time).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_peregrine-tfb");

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pg(action: &str) {
    let status = Command::new(repo_root().join("scripts/pg"))
        .arg(action)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot run scripts/pg {action}: {e}"));
    assert!(status.success(), "scripts/pg {action} failed with {status}");
}

/// Kills the server and makes sure the cluster is running again, even if
/// an assertion failed half-way.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        pg("start");
    }
}

/// One request on a fresh connection; returns (status, body, elapsed).
fn get(addr: &str, path: &str) -> (u16, String, Duration) {
    let start = Instant::now();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response (a hang here is the bug)");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body, start.elapsed())
}

#[test]
fn database_outage_gives_503_then_service_returns_without_restart() {
    let url = std::env::var("DATABASE_URL").expect(
        "DATABASE_URL is not set: run scripts/test, or `scripts/pg start` and export the URL it prints",
    );
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(BIN)
        .args(["--addr", &addr, "--workers", "2"])
        .env("DATABASE_URL", &url)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start peregrine-tfb");
    let _guard = Guard(child);

    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "peregrine-tfb never listened");
        thread::sleep(Duration::from_millis(50));
    }
    let (status, body, _) = get(&addr, "/db");
    assert_eq!(status, 200, "before the outage: {body}");

    pg("stop");
    // Every database endpoint answers 503 quickly, repeatedly: no request
    // waits on a dead connection past the call timeout (2 s).
    for path in ["/db", "/queries?queries=5", "/fortunes", "/updates?queries=3", "/db"] {
        let (status, body, took) = get(&addr, path);
        assert_eq!(status, 503, "{path} during the outage: {body}");
        assert!(body.contains("\"error\""), "{path}: 503 body should be a JSON error, got {body}");
        assert!(took < Duration::from_secs(3), "{path} took {took:?} during the outage");
    }
    // Workers are not stuck: non-database requests are served meanwhile.
    let (status, body, took) = get(&addr, "/plaintext");
    assert_eq!((status, body.as_str()), (200, "Hello, World!"));
    assert!(took < Duration::from_millis(500), "/plaintext took {took:?} during the outage");

    pg("start");
    // The pools reconnect with backoff (capped at 2 s); give them a while.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut served = 0;
    while served < 10 {
        let (status, body, _) = get(&addr, "/queries?queries=3");
        if status == 200 {
            assert!(body.starts_with('[') && body.matches("randomNumber").count() == 3, "{body}");
            served += 1;
        } else {
            assert_eq!(status, 503, "while recovering: {body}");
            assert!(Instant::now() < deadline, "service did not return within 20 s of the database");
            thread::sleep(Duration::from_millis(100));
        }
    }
    let (status, body, _) = get(&addr, "/updates?queries=2");
    assert_eq!(status, 200, "after recovery: {body}");
}
