//! The real `peregrine-tfb` process shuts down gracefully on SIGTERM: a
//! request in flight when the signal arrives still gets its complete
//! response, and the process exits with status 0 within 5 s. A second
//! signal ends it at once.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_peregrine-tfb");

fn free_port() -> u16 {
    // Bind port 0 and release it; a race with another process grabbing it
    // in between is possible but shows up as a clear start-up failure.
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Collects the child's output, stdout (where its log goes) and stderr, on
/// threads (so the pipes never fill), for failure messages and log checks.
fn capture(child: &mut Child) -> Arc<Mutex<String>> {
    let log = Arc::new(Mutex::new(String::new()));
    let stdout: Box<dyn Read + Send> = Box::new(child.stdout.take().unwrap());
    let stderr: Box<dyn Read + Send> = Box::new(child.stderr.take().unwrap());
    for stream in [stdout, stderr] {
        let sink = Arc::clone(&log);
        thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
    }
    log
}

/// Whether the log has a line containing `text`, waiting up to a second
/// for the reader threads to catch up with a process that has exited.
fn logged(log: &Mutex<String>, text: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        if log.lock().unwrap().contains(text) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn connect_when_up(child: &mut Child, addr: &str, log: &Mutex<String>) -> TcpStream {
    // Generous: the first start creates and seeds the embedded database.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(stream) = TcpStream::connect(addr) {
            return stream;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("peregrine-tfb exited during start-up with {status}:\n{}", log.lock().unwrap());
        }
        assert!(Instant::now() < deadline, "peregrine-tfb never listened:\n{}", log.lock().unwrap());
        thread::sleep(Duration::from_millis(50));
    }
}

/// Reads one response with a `Content-Length` body; returns (head, body).
fn read_response(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut tmp).expect("read response");
        assert!(n > 0, "connection closed before a response: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap_or_else(|| panic!("no Content-Length in {head:?}"))
        .parse()
        .unwrap();
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut tmp).expect("read body");
        assert!(n > 0, "connection closed mid-body");
        body.extend_from_slice(&tmp[..n]);
    }
    assert_eq!(body.len(), length, "bytes beyond Content-Length");
    (head, body)
}

/// Starts `peregrine-tfb` on a free port with the embedded database (kept
/// out of the source tree, in `data`); returns it, its log and address.
fn spawn_server(data: &str) -> (Child, Arc<Mutex<String>>, String) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut cmd = Command::new(BIN);
    cmd.args(["--addr", &addr, "--workers", "2"])
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let help = Command::new(BIN).arg("--help").output().expect("run peregrine-tfb --help");
    if String::from_utf8_lossy(&help.stdout).contains("--data-dir") {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(data);
        cmd.arg("--data-dir").arg(dir);
    }
    let mut child = cmd.spawn().expect("start peregrine-tfb");
    let log = capture(&mut child);
    (child, log, addr)
}

fn signal(child: &Child, signo: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: plain kill(2) on our own child, which has not been reaped.
    assert_eq!(unsafe { libc::kill(pid, signo) }, 0, "kill failed");
}

/// Bytes of the upload the tests leave half sent when the signal comes.
const UPLOAD_LEN: usize = 200_000;

/// Sends the head of a `POST /upload` and the first half of its body.
fn send_half_an_upload(stream: &mut TcpStream) {
    stream
        .write_all(
            format!("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {UPLOAD_LEN}\r\n\r\n").as_bytes(),
        )
        .unwrap();
    stream.write_all(&[b'a'; UPLOAD_LEN / 2]).unwrap();
}

/// Waits up to `within` after `signalled` for the process to exit; kills
/// it and fails, saying `after`, if it does not.
fn exit_status(
    child: &mut Child,
    signalled: Instant,
    within: Duration,
    after: &str,
    log: &Mutex<String>,
) -> ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if signalled.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("peregrine-tfb still running {within:?} after {after}:\n{}", log.lock().unwrap());
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_finishes_the_request_in_flight_and_exits_zero() {
    let (mut child, log, addr) = spawn_server("tfb-shutdown-data");

    let mut stream = connect_when_up(&mut child, &addr, &log);
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.set_nodelay(true).unwrap();

    // The server answers normally first.
    stream.write_all(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (head, body) = read_response(&mut stream);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(body, b"Hello, World!");

    // An upload is in flight (half its body sent) when SIGTERM arrives;
    // the rest follows after the signal.
    send_half_an_upload(&mut stream);
    thread::sleep(Duration::from_millis(200));
    signal(&child, libc::SIGTERM);
    let signalled = Instant::now();
    thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the process exited with a request in flight:\n{}",
        log.lock().unwrap()
    );
    stream.write_all(&[b'b'; UPLOAD_LEN - UPLOAD_LEN / 2]).unwrap();

    let (head, body) = read_response(&mut stream);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(body, UPLOAD_LEN.to_string().as_bytes(), "upload counted exactly");

    let status = exit_status(&mut child, signalled, Duration::from_secs(5), "SIGTERM", &log);
    assert!(status.success(), "exit status {status} after SIGTERM:\n{}", log.lock().unwrap());
    assert_eq!(status.code(), Some(0));
    // And it no longer listens.
    assert!(TcpStream::connect(&addr).is_err(), "still accepting after exit");
}

/// A second signal does not wait for the request in flight (an upload
/// half sent, which would hold a graceful shutdown for its whole timeout):
/// the process ends at once with the shell's status for SIGINT.
#[test]
fn a_second_signal_exits_at_once() {
    let (mut child, log, addr) = spawn_server("tfb-shutdown-twice-data");
    let mut stream = connect_when_up(&mut child, &addr, &log);
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (head, _) = read_response(&mut stream);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");

    send_half_an_upload(&mut stream);
    thread::sleep(Duration::from_millis(200));
    signal(&child, libc::SIGINT);
    thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first signal ended the process with a request in flight:\n{}",
        log.lock().unwrap()
    );
    signal(&child, libc::SIGINT);
    let signalled = Instant::now();
    let status = exit_status(&mut child, signalled, Duration::from_secs(2), "a second signal", &log);
    assert_eq!(status.code(), Some(130), "exit status after a second SIGINT:\n{}", log.lock().unwrap());
    assert!(logged(&log, "second signal"), "no log line for it:\n{}", log.lock().unwrap());
}
