//! Both engines over real sockets: every request head gets exactly one
//! response, in order, however the bytes are split, with many connections at
//! once and a burst larger than one receive buffer.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const RESPONSE_LEN: usize = 134;
const REQ: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n";

struct Floor(Child, u16);

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(engine: &str) -> Floor {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let child = Command::new(env!("CARGO_BIN_EXE_peregrine-floor"))
        .args(["--addr", &format!("127.0.0.1:{port}"), "--engine", engine])
        .stderr(Stdio::null())
        .spawn()
        .expect("start the floor");
    let floor = Floor(child, port);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the {engine} floor did not listen");
        thread::sleep(Duration::from_millis(20));
    }
    floor
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
}

#[test]
fn the_epoll_engine_answers_every_head_once() {
    check("epoll");
}

#[test]
fn the_io_uring_engine_answers_every_head_once() {
    check("uring");
}
