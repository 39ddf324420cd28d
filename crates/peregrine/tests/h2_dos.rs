//! Every published HTTP/2 denial-of-service pattern, sent as raw frames
//! over a real socket. Each test checks that the attack is bounded (the
//! connection is refused, reset or closed, or the work it causes is
//! capped) and that the server stays up: another client is served during
//! or right after it.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Client;
use peregrine::{Config, Content, Response, Router, Server, ServerHandle};

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

const CANCEL: u32 = 0x8;
const REFUSED_STREAM: u32 = 0x7;
const ENHANCE_YOUR_CALM: u32 = 0xb;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn start(started: Arc<AtomicUsize>) -> ServerHandle {
    let config = Config { io_timeout: Duration::from_secs(1), ..common::config() };
    Server::with_config(config)
        .spawn("127.0.0.1:0", move |_| {
            let started = Rc::new(Arc::clone(&started));
            async move {
                Router::new()
                    .get("/plaintext", || Content("text/plain", "Hello, World!"))
                    .post("/echo", |body: Vec<u8>| Content("application/octet-stream", body))
                    .post_stream("/upload", |body: peregrine::Body| async move {
                        body.count().await.map(|n| n.to_string())
                    })
                    .get("/large", || Content("application/octet-stream", vec![1u8; 4 * 1024 * 1024]))
                    .get_async("/work", move || {
                        started.fetch_add(1, Ordering::SeqCst);
                        async {
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            Response::text("done")
                        }
                    })
            }
        })
        .expect("test server starts")
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK string literal without Huffman coding.
fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0x00, 7, s.len());
    out.extend_from_slice(s);
}

/// An HPACK integer with an `n`-bit prefix after `first`'s flag bits.
fn integer(out: &mut Vec<u8>, first: u8, n: u32, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128 + 128) as u8);
        value /= 128;
    }
    out.push(value as u8);
}

/// A request header block: method (static index 2 GET, 3 POST), scheme
/// http, `:path` and `:authority` as literals.
fn request_block(post: bool, path: &str) -> Vec<u8> {
    let mut b = vec![if post { 0x83 } else { 0x82 }, 0x86];
    b.push(0x04); // literal without indexing, name :path (static 4)
    string(&mut b, path.as_bytes());
    b.push(0x01); // literal without indexing, name :authority (static 1)
    string(&mut b, b"localhost");
    b
}

struct Frame {
    kind: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Frame {
    fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        Some(u32::from_be_bytes(self.payload.get(at..at + 4)?.try_into().ok()?))
    }
}

/// A raw HTTP/2 client connection.
struct Raw {
    s: TcpStream,
}

impl Raw {
    /// Connects and sends the preface and `settings` (pairs of id, value).
    fn connect(addr: SocketAddr, settings: &[(u16, u32)]) -> Raw {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut raw = Raw { s };
        let mut payload = Vec::new();
        for (id, value) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &payload));
        raw.send(&hello);
        raw
    }

    /// Writes; `false` once the server stopped taking bytes or closed.
    fn send(&mut self, bytes: &[u8]) -> bool {
        self.s.write_all(bytes).is_ok()
    }

    /// The next frame; `None` at the end of the connection (or a reset).
    fn read_frame(&mut self) -> Option<Frame> {
        let mut head = [0u8; 9];
        self.s.read_exact(&mut head).ok()?;
        let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
        let mut payload = vec![0u8; len];
        self.s.read_exact(&mut payload).ok()?;
        let stream = u32::from_be_bytes([head[5] & 0x7f, head[6], head[7], head[8]]);
        if head[3] == SETTINGS && head[4] & 1 == 0 {
            // Acknowledge the server's settings, as a client must.
            let _ = self.s.write_all(&frame(SETTINGS, 1, 0, &[]));
        }
        Some(Frame { kind: head[3], stream, payload })
    }

    /// Sends `frame` 5 times a second, at most 100 times, until the server
    /// stops taking bytes or closes: whether it did, and after how long.
    fn repeat_until_closed(&mut self, frame: &[u8]) -> (bool, Duration) {
        let started = Instant::now();
        for _ in 0..100 {
            if !self.send(frame) || self.until_closed(Duration::from_millis(200)).1 {
                return (true, started.elapsed());
            }
        }
        (false, started.elapsed())
    }

    /// Reads frames until the connection ends, at most `within`; returns
    /// them and whether it ended.
    fn until_closed(&mut self, within: Duration) -> (Vec<Frame>, bool) {
        let deadline = Instant::now() + within;
        let mut frames = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return (frames, false);
            }
            self.s.set_read_timeout(Some(left)).unwrap();
            let mut head = [0u8; 9];
            match self.s.read_exact(&mut head) {
                Ok(()) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return (frames, false)
                }
                Err(_) => return (frames, true),
            }
            let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
            let mut payload = vec![0u8; len];
            if self.s.read_exact(&mut payload).is_err() {
                return (frames, true);
            }
            let stream = u32::from_be_bytes([head[5] & 0x7f, head[6], head[7], head[8]]);
            frames.push(Frame { kind: head[3], stream, payload });
        }
    }
}

fn goaway_code(frames: &[Frame]) -> Option<u32> {
    frames.iter().find(|f| f.kind == GOAWAY).and_then(Frame::error_code)
}

/// Another client is served, over HTTP/1.1 and over HTTP/2.
fn assert_served(addr: SocketAddr) {
    let mut http1 = Client::connect(addr);
    assert_eq!(http1.roundtrip(&common::get("/plaintext")).text(), "Hello, World!");
    let mut h2 = Raw::connect(addr, &[]);
    h2.send(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &request_block(false, "/plaintext")));
    loop {
        let f = h2.read_frame().expect("an HTTP/2 answer");
        if f.kind == HEADERS && f.stream == 1 {
            // `:status: 200` is static table entry 8.
            assert_eq!(f.payload.first(), Some(&0x88), "HTTP/2 status is not 200");
            return;
        }
    }
}

#[test]
fn rapid_reset_is_cut_off_and_cancels_the_work_it_started() {
    let started = Arc::new(AtomicUsize::new(0));
    let server = start(Arc::clone(&started));
    let mut attacker = Raw::connect(server.local_addr(), &[]);
    let mut burst = Vec::new();
    for i in 0..5000u32 {
        let id = 2 * i + 1;
        burst.extend(frame(HEADERS, END_STREAM | END_HEADERS, id, &request_block(false, "/work")));
        burst.extend(frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
    }
    attacker.send(&burst);
    let (frames, closed) = attacker.until_closed(Duration::from_secs(5));
    assert!(closed, "the attacking connection was not closed");
    assert_eq!(goaway_code(&frames), Some(ENHANCE_YOUR_CALM));
    let work = started.load(Ordering::SeqCst);
    assert!(work < 500, "{work} handlers started for 5000 reset streams");
    assert_served(server.local_addr());
}

#[test]
fn a_continuation_flood_ends_the_connection() {
    let server = start(Arc::default());
    let mut attacker = Raw::connect(server.local_addr(), &[]);
    attacker.send(&frame(HEADERS, 0, 1, &request_block(false, "/plaintext")));
    // Header fields of 100 bytes, 16 KiB a frame, without END_HEADERS.
    let mut block = Vec::new();
    while block.len() < 16 * 1024 - 110 {
        block.push(0x00);
        string(&mut block, b"x-flood");
        string(&mut block, &[b'a'; 90]);
    }
    let flood = frame(CONTINUATION, 0, 1, &block);
    let writer = {
        let mut s = attacker.s.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut sent = 0usize;
            // Up to 64 MiB, or until the server stops reading.
            while sent < 64 * 1024 * 1024 && s.write_all(&flood).is_ok() {
                sent += flood.len();
            }
            sent
        })
    };
    let (frames, closed) = attacker.until_closed(Duration::from_secs(10));
    assert!(closed, "the flooding connection was not closed");
    assert!(frames.iter().any(|f| f.kind == GOAWAY), "no GOAWAY before the close");
    let sent = writer.join().unwrap();
    assert!(sent < 64 * 1024 * 1024, "the server read the whole 64 MiB flood");
    assert_served(server.local_addr());
}

#[test]
fn an_hpack_bomb_and_an_oversized_header_list_are_refused() {
    let server = start(Arc::default());
    // One 4000-byte field enters the dynamic table, then 2000 one-byte
    // references to it would decode to 8 MB of headers.
    let mut bomb = request_block(false, "/plaintext");
    bomb.push(0x40); // literal with incremental indexing, new name
    string(&mut bomb, b"x-bomb");
    string(&mut bomb, &[b'b'; 4000]);
    bomb.extend(std::iter::repeat(0xbe).take(2000)); // index 62: that field
    let mut attacker = Raw::connect(server.local_addr(), &[]);
    attacker.send(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &bomb));
    let (frames, _) = attacker.until_closed(Duration::from_secs(3));
    let refused = frames.iter().any(|f| {
        // `431` as a literal status (static name 8), a reset, or GOAWAY.
        (f.kind == HEADERS && f.stream == 1 && f.payload.windows(3).any(|w| w == b"431"))
            || f.kind == RST_STREAM
            || f.kind == GOAWAY
    });
    assert!(refused, "the HPACK bomb was not refused");
    assert!(
        !frames.iter().any(|f| f.kind == HEADERS && f.payload.first() == Some(&0x88)),
        "the bomb was answered 200"
    );

    // 20 KiB of plain header fields, over the 16 KiB list limit.
    let mut big = request_block(false, "/plaintext");
    for i in 0..20 {
        big.push(0x00);
        string(&mut big, format!("x-big-{i}").as_bytes());
        string(&mut big, &[b'v'; 1000]);
    }
    let mut client = Raw::connect(server.local_addr(), &[]);
    client.send(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &big));
    let (frames, _) = client.until_closed(Duration::from_secs(3));
    let refused = frames.iter().any(|f| {
        (f.kind == HEADERS && f.stream == 1 && f.payload.windows(3).any(|w| w == b"431"))
            || (f.kind == RST_STREAM && f.stream == 1)
            || f.kind == GOAWAY
    });
    assert!(refused, "an oversized header list was not refused");
    assert_served(server.local_addr());
}

/// Floods of control frames the server must answer or ignore: the
/// attacker writes without reading, so the server must stop reading
/// rather than queue answers without bound.
fn control_flood(unit: Vec<u8>) {
    let server = start(Arc::default());
    let addr = server.local_addr();
    let attacker = Raw::connect(addr, &[]);
    let mut s = attacker.s.try_clone().unwrap();
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let batch: Vec<u8> = unit.iter().copied().cycle().take(unit.len() * 4096).collect();
    let rss_before = rss_bytes();
    let writer = std::thread::spawn(move || {
        let started = Instant::now();
        let mut sent = 0usize;
        while started.elapsed() < Duration::from_secs(3) && s.write_all(&batch).is_ok() {
            sent += batch.len();
        }
        eprintln!("flood: {sent} bytes written");
        sent
    });
    // Served while the flood runs.
    std::thread::sleep(Duration::from_millis(300));
    assert_served(addr);
    let sent = writer.join().unwrap();
    assert!(sent > 0);
    assert_served(addr);
    // The server (in this process) queued no answers for what it read.
    let grown = rss_bytes().saturating_sub(rss_before);
    assert!(grown < 32 << 20, "memory grew {grown} bytes during a flood of {sent} bytes");
    drop(attacker);
}

/// This process's resident memory (the server runs in it).
fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok());
    kib.unwrap_or(0) * 1024
}

#[test]
fn a_settings_flood_is_bounded() {
    control_flood(frame(SETTINGS, 0, 0, &[0x00, 0x01, 0x00, 0x00, 0x10, 0x00]));
}

#[test]
fn a_ping_flood_is_bounded() {
    control_flood(frame(PING, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]));
}

#[test]
fn a_priority_flood_is_bounded() {
    let mut unit = Vec::new();
    for id in (1..200u32).step_by(2) {
        unit.extend(frame(PRIORITY, 0, id, &[0, 0, 0, 0, 16]));
    }
    control_flood(unit);
}

#[test]
fn an_empty_data_flood_ends_the_connection() {
    let server = start(Arc::default());
    let mut attacker = Raw::connect(server.local_addr(), &[]);
    attacker.send(&frame(HEADERS, END_HEADERS, 1, &request_block(true, "/upload")));
    let empty = frame(DATA, 0, 1, &[]);
    let batch: Vec<u8> = empty.iter().copied().cycle().take(empty.len() * 10_000).collect();
    let writer = {
        let mut s = attacker.s.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut sent = 0usize;
            while sent < 100 && s.write_all(&batch).is_ok() {
                sent += 1;
            }
        })
    };
    let (frames, closed) = attacker.until_closed(Duration::from_secs(5));
    assert!(closed, "the connection flooding empty DATA frames was not closed");
    assert_eq!(goaway_code(&frames), Some(ENHANCE_YOUR_CALM));
    writer.join().unwrap();
    assert_served(server.local_addr());
}

#[test]
fn a_client_that_never_opens_its_window_is_dropped() {
    let server = start(Arc::default());
    // SETTINGS_INITIAL_WINDOW_SIZE 0: the server may send no DATA at all.
    let mut reader = Raw::connect(server.local_addr(), &[(0x4, 0)]);
    for id in [1u32, 3, 5] {
        reader.send(&frame(HEADERS, END_STREAM | END_HEADERS, id, &request_block(false, "/large")));
    }
    let started = Instant::now();
    let (frames, closed) = reader.until_closed(Duration::from_secs(8));
    assert!(closed, "a connection whose window never opened was kept");
    // The I/O timeout is 1 s; the sweep acts within 3 s after it.
    assert!(started.elapsed() >= Duration::from_millis(900), "dropped too early: {:?}", started.elapsed());
    assert!(frames.iter().all(|f| f.kind != DATA || f.payload.is_empty()), "DATA sent into a closed window");
    assert_served(server.local_addr());
}

#[test]
fn streams_beyond_the_concurrency_limit_are_refused() {
    let server = start(Arc::default());
    let mut attacker = Raw::connect(server.local_addr(), &[]);
    // Let the server's SETTINGS (with its limit of 128) arrive first.
    let _ = attacker.read_frame();
    let mut burst = Vec::new();
    for i in 0..200u32 {
        // Bodies never sent: each stream stays open.
        burst.extend(frame(HEADERS, END_HEADERS, 2 * i + 1, &request_block(true, "/echo")));
    }
    attacker.send(&burst);
    let (frames, _) = attacker.until_closed(Duration::from_millis(800));
    let refused = frames
        .iter()
        .filter(|f| f.kind == RST_STREAM && f.error_code() == Some(REFUSED_STREAM))
        .map(|f| f.stream)
        .collect::<Vec<_>>();
    let goaway = goaway_code(&frames);
    assert!(
        refused.len() >= 72 || goaway.is_some(),
        "only {} of 72 streams over the limit refused ({goaway:?})",
        refused.len()
    );
    assert!(refused.iter().all(|&id| id > 2 * 128), "a stream within the limit was refused: {refused:?}");
    assert_served(server.local_addr());
}

#[test]
fn an_idle_connection_with_open_streams_is_dropped() {
    let server = start(Arc::default());
    let mut idle = Raw::connect(server.local_addr(), &[]);
    // Streams waiting for bodies that never come.
    for id in [1u32, 3, 5] {
        idle.send(&frame(HEADERS, END_HEADERS, id, &request_block(true, "/echo")));
    }
    let started = Instant::now();
    let (_, closed) = idle.until_closed(Duration::from_secs(8));
    assert!(closed, "an idle connection with open streams was kept");
    assert!(started.elapsed() >= Duration::from_millis(900), "dropped too early: {:?}", started.elapsed());
    assert_served(server.local_addr());
}

const WINDOW_UPDATE: u8 = 0x8;

/// A server whose I/O and idle timeouts are far off (30 s, 60 s), so only
/// the header timeout (1 s) and the minimum rates (200 bytes a second after
/// 1 s) can cut a slow client within the tests' bounds.
fn start_with_rates() -> ServerHandle {
    let rate = Some(peregrine::MinDataRate { bytes_per_second: 200, grace: Duration::from_secs(1) });
    let config = Config {
        header_timeout: Duration::from_secs(1),
        io_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(60),
        min_request_body_rate: rate,
        min_response_rate: rate,
        ..common::config()
    };
    Server::with_config(config)
        .spawn("127.0.0.1:0", |_| async {
            Router::new()
                .get("/plaintext", || Content("text/plain", "Hello, World!"))
                .post("/echo", |body: Vec<u8>| Content("application/octet-stream", body))
                .post_stream("/count", |body: peregrine::Body| async move {
                    body.count().await.map(|n| n.to_string())
                })
                .get("/large", || Content("application/octet-stream", vec![1u8; 4 * 1024 * 1024]))
        })
        .expect("test server starts")
}

/// Sends `bytes` one at a time, `gap` apart, until the server stops taking
/// them or closes; returns how long the connection lasted.
fn dribble(s: &mut TcpStream, bytes: &[u8], gap: Duration) -> Duration {
    let started = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    let mut sink = [0u8; 4096];
    for b in bytes {
        if s.write_all(std::slice::from_ref(b)).is_err() {
            return started.elapsed();
        }
        std::thread::sleep(gap);
        // Whatever the server sent (its SETTINGS) is read and dropped; the
        // end of the connection shows here first.
        match s.read(&mut sink) {
            Ok(0) => return started.elapsed(),
            Err(e) if !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return started.elapsed()
            }
            _ => {}
        }
    }
    panic!("the server took all {} bytes, {:?} apart, without cutting", bytes.len(), gap);
}

#[test]
fn a_slow_preface_or_first_request_head_is_cut_at_the_header_timeout() {
    let server = start_with_rates();
    // The preface, SETTINGS and a HEADERS frame, a byte every 150 ms: about
    // 12 s for all of it, against a 1 s header timeout.
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    hello.extend(frame(HEADERS, END_STREAM | END_HEADERS, 1, &request_block(false, "/plaintext")));
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    let took = dribble(&mut s, &hello, Duration::from_millis(150));
    assert!(took >= Duration::from_millis(900), "cut before the header timeout: {took:?}");
    assert!(took < Duration::from_secs(5), "slow head held {took:?} (header timeout 1 s)");

    // The preface at once, then the first HEADERS frame a byte at a time.
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    let mut preface = PREFACE.to_vec();
    preface.extend(frame(SETTINGS, 0, 0, &[]));
    s.write_all(&preface).unwrap();
    let headers = frame(HEADERS, END_STREAM | END_HEADERS, 1, &request_block(false, "/plaintext"));
    let took = dribble(&mut s, &headers.repeat(4), Duration::from_millis(150));
    assert!(took < Duration::from_secs(5), "slow first HEADERS held {took:?} (header timeout 1 s)");
    assert_served(server.local_addr());
}

#[test]
fn a_later_request_head_sent_slowly_is_cut_at_the_header_timeout() {
    let server = start_with_rates();
    let mut c = Raw::connect(server.local_addr(), &[]);
    c.send(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &request_block(false, "/plaintext")));
    while !c.read_frame().is_some_and(|f| f.kind == DATA && f.stream == 1) {}
    // Idle for longer than the header timeout: that alone is no reason to
    // cut (idle timeout 60 s).
    std::thread::sleep(Duration::from_millis(2500));
    // Then HEADERS frames a byte every 150 ms: about 4 s each.
    let heads: Vec<u8> = [3, 5, 7, 9]
        .iter()
        .flat_map(|&id| frame(HEADERS, END_STREAM | END_HEADERS, id, &request_block(false, "/plaintext")))
        .collect();
    let took = dribble(&mut c.s, &heads, Duration::from_millis(150));
    assert!(took >= Duration::from_millis(900), "cut {took:?} into the head: the idle connection was cut");
    assert!(took < Duration::from_secs(5), "a slow later HEADERS held {took:?} (header timeout 1 s)");
    assert_served(server.local_addr());
}

#[test]
fn a_trickled_request_body_is_cut_at_the_minimum_rate() {
    let server = start_with_rates();
    // A buffered route, and a streaming one whose handler reads each byte
    // as it comes (and so runs between reads).
    for path in ["/echo", "/count"] {
        trickle_is_cut(server.local_addr(), path);
    }

    // A body at a good pace over several seconds is taken whole.
    let mut c = Raw::connect(server.local_addr(), &[]);
    c.send(&frame(HEADERS, END_HEADERS, 1, &request_block(true, "/echo")));
    for _ in 0..10 {
        assert!(c.send(&frame(DATA, 0, 1, &[b'y'; 400])), "a body at 1,300 bytes a second was cut");
        std::thread::sleep(Duration::from_millis(300));
    }
    c.send(&frame(DATA, END_STREAM, 1, b""));
    let mut got = 0;
    loop {
        let f = c.read_frame().expect("the echo arrives");
        if f.kind == DATA && f.stream == 1 {
            got += f.payload.len();
            if got >= 4000 {
                break;
            }
        }
        assert!(f.kind != GOAWAY && f.kind != RST_STREAM, "paced body refused");
    }
    assert_served(server.local_addr());
}

/// One-byte DATA frames to `path`, 5 a second, are cut within 6 s.
fn trickle_is_cut(addr: SocketAddr, path: &str) {
    let mut c = Raw::connect(addr, &[]);
    c.send(&frame(HEADERS, END_HEADERS, 1, &request_block(true, path)));
    // One-byte DATA frames, 5 a second: each is progress for the 30 s I/O
    // timeout, but far below 200 bytes a second.
    let (cut, took) = c.repeat_until_closed(&frame(DATA, 0, 1, b"x"));
    assert!(cut, "a body trickled at 5 bytes a second to {path} was held {took:?}");
    assert!(took < Duration::from_secs(6), "trickled body to {path} cut only after {took:?}");
}

#[test]
fn a_window_opened_a_few_bytes_at_a_time_is_cut_at_the_minimum_rate() {
    let server = start_with_rates();
    // SETTINGS_INITIAL_WINDOW_SIZE 0, then 20 bytes of window 5 times a
    // second (100 bytes a second): always some progress for the I/O
    // timeout, never enough for the rate.
    let mut c = Raw::connect(server.local_addr(), &[(0x4, 0)]);
    c.send(&frame(HEADERS, END_STREAM | END_HEADERS, 1, &request_block(false, "/large")));
    let (cut, took) = c.repeat_until_closed(&frame(WINDOW_UPDATE, 0, 1, &20u32.to_be_bytes()));
    assert!(cut, "a reader opening 100 bytes of window a second was held {took:?}");
    assert!(took < Duration::from_secs(6), "slow window cut only after {took:?}");
    assert_served(server.local_addr());
}
