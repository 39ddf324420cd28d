//! What the real-socket tests of the `peregrine-tfb` binary share: starting
//! the real process on a free port (killed on drop) and a minimal raw
//! HTTP/1.1 client (one request per connection, `Connection: close`).

#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_peregrine-tfb");

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A port free on 127.0.0.1 for TCP and UDP (a TLS port also serves
/// HTTP/3), and never one this process was given before: the kernel hands
/// a released port out again, and a test asking for three ports in a row
/// once got the same one twice (CI, 2026-11-29: "cannot listen on
/// 127.0.0.1:36099: the address is already in use").
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().expect("ports given");
    loop {
        let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        if !given.contains(&port) && std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
}

/// An environment variable the test cannot run without: fails (never
/// skips) with instructions when it is missing.
pub fn required_env(name: &str, how: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{name} is not set: run scripts/test, or {how}"),
    }
}

/// A running `peregrine-tfb`; killed (and its scratch directory removed)
/// on drop.
pub struct Server {
    child: Child,
    pub addr: String,
    log: Arc<Mutex<String>>,
    data_dir: PathBuf,
}

impl Server {
    /// Starts the binary with `env` on a free port and waits until it
    /// accepts connections. `DATABASE_URL` and `REDIS_URL` are removed from
    /// the inherited environment unless `env` sets them.
    pub fn start(name: &str, env: &[(&str, &str)]) -> Server {
        Server::start_with_args(name, env, &[])
    }

    /// [`Server::start`] with more command-line arguments.
    pub fn start_with_args(name: &str, env: &[(&str, &str)], args: &[&str]) -> Server {
        let addr = format!("127.0.0.1:{}", free_port());
        let data_dir = repo_root().join("target/test-scratch/tfb-bin").join(format!(
            "{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&data_dir);
        let mut cmd = Command::new(BIN);
        cmd.args(["--addr", &addr, "--workers", "2", "--data-dir"])
            .arg(&data_dir)
            .args(args)
            .env_remove("DATABASE_URL")
            .env_remove("REDIS_URL")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start peregrine-tfb");
        // The log goes to stdout, start-up errors to stderr: keep both.
        let log = Arc::new(Mutex::new(String::new()));
        let outputs: [Box<dyn Read + Send>; 2] =
            [Box::new(child.stdout.take().expect("stdout")), Box::new(child.stderr.take().expect("stderr"))];
        for output in outputs {
            let sink = Arc::clone(&log);
            thread::spawn(move || {
                for line in BufReader::new(output).lines().map_while(Result::ok) {
                    let mut log = sink.lock().expect("log");
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        let mut server = Server { child, addr, log, data_dir };
        server.wait_up();
        server
    }

    fn wait_up(&mut self) {
        // Generous: the first start creates and seeds the database.
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if TcpStream::connect(&self.addr).is_ok() {
                return;
            }
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("peregrine-tfb exited during start-up with {status}:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "peregrine-tfb never listened:\n{}", self.log());
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until both of a worker's PostgreSQL pools answer (reads and
    /// the write connections of `/updates`): a debug build takes a few
    /// seconds to open them all, and requests before then may get `503`.
    pub fn wait_db_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut ok = 0;
        // Several in a row, so both workers' pools have answered.
        while ok < 8 {
            let reply = self.get("/updates?queries=1");
            if reply.status == 200 {
                ok += 1;
            } else {
                ok = 0;
                assert!(Instant::now() < deadline, "database never ready: {reply:?}\n{}", self.log());
                thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// What the process wrote (log and errors) so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], b"")
    }

    pub fn send_json(&self, method: &str, path: &str, body: &str) -> Reply {
        self.request(method, path, &["Content-Type: application/json"], body.as_bytes())
    }

    /// One request on a fresh connection with `Connection: close`.
    pub fn request(&self, method: &str, path: &str, headers: &[&str], body: &[u8]) -> Reply {
        let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
        for h in headers {
            raw.push_str(h);
            raw.push_str("\r\n");
        }
        if !body.is_empty() || method == "POST" || method == "PUT" {
            raw.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        raw.push_str("\r\n");
        let mut bytes = raw.into_bytes();
        bytes.extend_from_slice(body);
        // No answer (a timeout or a close) is status 0, for the caller to
        // assert on with context.
        self.raw(&bytes).into_iter().next().unwrap_or(Reply {
            status: 0,
            headers: Vec::new(),
            body: String::new(),
        })
    }

    /// Writes `bytes` in one write and reads every response until the
    /// server closes the connection.
    pub fn raw(&self, bytes: &[u8]) -> Vec<Reply> {
        let mut stream = TcpStream::connect(&self.addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        stream.write_all(bytes).expect("write");
        let mut buf = Vec::new();
        let _ = stream.read_to_end(&mut buf);
        parse_all(&buf)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// Splits a byte stream into `Content-Length`-framed responses.
fn parse_all(mut buf: &[u8]) -> Vec<Reply> {
    let mut replies = Vec::new();
    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines.next().and_then(|l| l.get(9..12)).and_then(|s| s.parse().ok()).unwrap_or(0);
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let body_end = (end + 4 + len).min(buf.len());
        let body = String::from_utf8_lossy(&buf[end + 4..body_end]).into_owned();
        replies.push(Reply { status, headers, body });
        buf = &buf[body_end..];
    }
    replies
}

pub mod checks;
