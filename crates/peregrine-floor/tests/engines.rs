//! Both engines over real sockets: every request head gets exactly one
//! response, in order, however the bytes are split, with many connections at
//! once and a burst larger than one receive buffer; and a connection the
//! client ends is closed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

const RESPONSE_LEN: usize = 134;
const REQ: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n";

struct Floor(Child, u16);

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a floor on a port the kernel picks and returns once it listens.
///
/// The floor names its bound address itself. Picking a free port here first
/// (bind to 0, drop, pass it on) raced: the two tests run at once, and a
/// port freed here can be taken before the floor binds it, leaving a test
/// talking to the wrong server.
fn start(engine: &str) -> Floor {
    let mut child = Command::new(env!("CARGO_BIN_EXE_peregrine-floor"))
        .args(["--addr", "127.0.0.1:0", "--engine", engine])
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the floor");
    let mut stderr = BufReader::new(child.stderr.take().expect("the floor's stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("the floor's first line");
    let port = line
        .strip_prefix("peregrine-floor listening on ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|addr| addr.parse::<SocketAddr>().ok())
        .map(|addr| addr.port())
        .unwrap_or_else(|| panic!("the {engine} floor did not listen: {line:?}"));
    // Keep reading what else it says, so that a full pipe never blocks it.
    thread::spawn(move || {
        let mut rest = String::new();
        while matches!(stderr.read_line(&mut rest), Ok(n) if n > 0) {
            eprint!("{rest}");
            rest.clear();
        }
    });
    Floor(child, port)
}

fn read_exactly(stream: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut got = vec![0u8; len];
    stream.read_exact(&mut got).expect("all the responses");
    got
}

fn check(engine: &str) {
    let floor = start(engine);
    let one = {
        let mut s = TcpStream::connect(("127.0.0.1", floor.1)).expect("connect");
        s.write_all(REQ).expect("write");
        read_exactly(&mut s, RESPONSE_LEN)
    };
    assert!(one.starts_with(b"HTTP/1.1 200 OK\r\n") && one.ends_with(b"Hello, World!"));

    // A head split byte by byte, with a pause, is still one request.
    let mut s = TcpStream::connect(("127.0.0.1", floor.1)).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    for b in REQ {
        s.write_all(&[*b]).expect("write");
        thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(read_exactly(&mut s, RESPONSE_LEN), one);

    // 2,000 pipelined heads (72 KB, many receive buffers), from 32
    // connections at once: exactly 2,000 responses each, nothing more.
    let workers: Vec<_> = (0..32)
        .map(|_| {
            let port = floor.1;
            let one = one.clone();
            thread::spawn(move || {
                let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                s.write_all(&REQ.repeat(2000)).expect("write");
                assert_eq!(read_exactly(&mut s, RESPONSE_LEN * 2000), one.repeat(2000));
                s.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
                let mut extra = [0u8; 1];
                assert!(!matches!(s.read(&mut extra), Ok(n) if n > 0), "no answer beyond the requests");
            })
        })
        .collect();
    for w in workers {
        w.join().expect("a connection's check");
    }

    // A client that stops sending is answered and then sees the floor
    // close the socket (on io_uring the socket is also in the ring's file
    // table, whose reference would keep it open if it were not taken out),
    // 300 times over, so slots and descriptors are reused.
    for _ in 0..300 {
        let mut s = TcpStream::connect(("127.0.0.1", floor.1)).expect("connect");
        s.write_all(REQ).expect("write");
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        let mut all = Vec::new();
        s.read_to_end(&mut all).expect("the answer, then the floor's close");
        assert_eq!(all, one);
    }
}

#[test]
fn the_epoll_engine_answers_every_head_once() {
    check("epoll");
}

#[test]
fn the_io_uring_engine_answers_every_head_once() {
    check("uring");
}
