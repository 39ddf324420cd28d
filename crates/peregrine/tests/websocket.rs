//! WebSocket over real sockets: the handshake and its refusals, echo,
//! fragmentation with control frames between, the protocol errors and
//! their close codes, permessage-deflate, keepalive, backpressure,
//! shutdown, and Python's `websockets` library as a client someone else
//! wrote (`tests/websocket/client.py`).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::ws::{echo, frame};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use peregrine::ws::{CloseCode, Message, WebSocketConfig, WebSocketUpgrade};
use peregrine::{Config, Error, IntoResponse, Router, Server, ServerHandle, StatusCode};

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

fn router(sent: Arc<AtomicUsize>) -> Router {
    let small =
        WebSocketConfig { max_message_bytes: 1000, max_frame_bytes: 800, ..WebSocketConfig::default() };
    let keepalive = WebSocketConfig {
        ping_interval: Some(Duration::from_secs(1)),
        ping_timeout: Duration::from_secs(1),
        ..WebSocketConfig::default()
    };
    let idle = WebSocketConfig { idle_timeout: Some(Duration::from_secs(1)), ..WebSocketConfig::default() };
    let manual = WebSocketConfig { auto_pong: false, ..WebSocketConfig::default() };
    let deflate =
        WebSocketConfig { permessage_deflate: true, compress_min_bytes: 0, ..WebSocketConfig::default() };
    // Behind middleware the 101 is an owned response the middleware sees,
    // and still hands the connection over.
    let guarded = Router::new()
        .get("/guarded", echo)
        .layer(peregrine::middleware::bearer_auth("ws", |t: &str| (t == "tok").then_some(())));
    Router::new()
        .merge(guarded)
        .get("/echo", echo)
        .get("/deflate", move |ws: WebSocketUpgrade| {
            let config = deflate.clone();
            echo(ws.config(config))
        })
        .get("/small", move |ws: WebSocketUpgrade| echo(ws.config(small.clone())))
        .get("/keepalive", move |ws: WebSocketUpgrade| echo(ws.config(keepalive.clone())))
        .get("/idle", move |ws: WebSocketUpgrade| echo(ws.config(idle.clone())))
        // Pings reach the handler, which reports them as text.
        .get("/manual", move |ws: WebSocketUpgrade| {
            ws.config(manual.clone()).on_upgrade(|mut socket| async move {
                while let Some(Ok(message)) = socket.recv().await {
                    if let Message::Ping(p) = message {
                        let _ = socket.send(format!("ping {}", String::from_utf8_lossy(&p))).await;
                    }
                }
            })
        })
        // Extractors run first: no token, no upgrade.
        .get(
            "/private",
            |q: peregrine::Query<std::collections::HashMap<String, String>>, ws: WebSocketUpgrade| {
                if q.0.get("token").map(String::as_str) != Some("s3cret") {
                    return Error::new(StatusCode::UNAUTHORIZED, "no token").into_response();
                }
                let origin = ws.origin().unwrap_or("none").to_owned();
                ws.protocols(["v2.chat", "v1.chat"]).on_upgrade(move |mut socket| async move {
                    let protocol = socket.protocol().unwrap_or("none").to_owned();
                    let _ = socket.send(format!("origin={origin} protocol={protocol}")).await;
                    while socket.recv().await.is_some() {}
                })
            },
        )
        // Sends 64 KiB messages as fast as the client takes them.
        .get("/flood", move |ws: WebSocketUpgrade| {
            let sent = Arc::clone(&sent);
            ws.on_upgrade(move |mut socket| async move {
                let chunk = vec![7u8; 64 << 10];
                for _ in 0..1000 {
                    if socket.feed(chunk.clone()).await.is_err() {
                        return;
                    }
                    sent.fetch_add(1, Ordering::SeqCst);
                }
                let _ = socket.flush().await;
            })
        })
}

fn start() -> (ServerHandle, Arc<AtomicUsize>) {
    let sent = Arc::new(AtomicUsize::new(0));
    let shared = Arc::clone(&sent);
    let handle = Server::with_config(common::config())
        .spawn("127.0.0.1:0", move |_| {
            let sent = Arc::clone(&shared);
            async move { router(sent) }
        })
        .expect("server starts");
    (handle, sent)
}

/// A raw client: writes exactly the bytes a test wants.
struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn connect(handle: &ServerHandle) -> Client {
        let s = TcpStream::connect(handle.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Client { s, buf: Vec::new() }
    }

    /// Sends a handshake for `path` with `extra` header lines; returns the
    /// response head (and keeps what follows it buffered).
    fn handshake(&mut self, path: &str, extra: &str) -> String {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
        );
        self.s.write_all(req.as_bytes()).unwrap();
        self.read_head()
    }

    fn open(handle: &ServerHandle, path: &str) -> Client {
        let mut c = Client::connect(handle);
        let head = c.handshake(path, "");
        assert!(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{head}");
        c
    }

    fn read_head(&mut self) -> String {
        loop {
            if let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8(self.buf[..end + 4].to_vec()).unwrap();
                self.buf.drain(..end + 4);
                return head;
            }
            self.fill();
        }
    }

    fn fill(&mut self) -> usize {
        let mut chunk = [0u8; 65536];
        let n = self.s.read(&mut chunk).expect("read");
        self.buf.extend_from_slice(&chunk[..n]);
        n
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    fn send(&mut self, b0: u8, payload: &[u8]) {
        self.send_raw(&frame(b0, payload));
    }

    /// The next frame: (first byte, payload). Panics at end of stream.
    fn recv(&mut self) -> (u8, Vec<u8>) {
        self.try_recv().expect("a frame, not the end of the connection")
    }

    fn try_recv(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 2 {
                assert_eq!(self.buf[1] & 0x80, 0, "server frames are not masked");
                let (len, at) = match self.buf[1] & 0x7f {
                    126 if self.buf.len() >= 4 => {
                        (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4)
                    }
                    127 if self.buf.len() >= 10 => {
                        (u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize, 10)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && self.buf.len() >= at + len {
                    let b0 = self.buf[0];
                    let payload = self.buf[at..at + len].to_vec();
                    self.buf.drain(..at + len);
                    return Some((b0, payload));
                }
            }
            if self.fill() == 0 {
                return None;
            }
        }
    }

    /// Expects a close frame with `code`, then the end of the connection.
    fn expect_close(&mut self, code: u16) {
        let (b0, payload) = self.recv();
        assert_eq!(b0, 0x88, "expected a close frame, got {b0:#x} {payload:?}");
        assert_eq!(
            u16::from_be_bytes([payload[0], payload[1]]),
            code,
            "{:?}",
            String::from_utf8_lossy(&payload[2..])
        );
        // Answer it, as a client must; the server then closes TCP.
        self.send(0x88, &payload[..2]);
        assert_eq!(self.try_recv(), None, "the server closes after the close handshake");
    }
}

/// A masked client frame.
#[test]
fn handshake_answers_and_refusals() {
    let (handle, _) = start();
    let mut c = Client::connect(&handle);
    let head = c.handshake("/echo", "");
    assert!(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("\r\nupgrade: websocket\r\n"), "{head}");
    assert!(lower.contains("\r\nconnection: upgrade\r\n"), "{head}");
    assert!(head.contains(&format!("\r\nSec-WebSocket-Accept: {ACCEPT}\r\n")), "{head}");
    assert!(!lower.contains("content-length"), "{head}");

    let refusals = [
        ("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", "426", true),
        (
            "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
            "426",
            true,
        ),
        (
            "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: short\r\nSec-WebSocket-Version: 13\r\n\r\n",
            "400",
            false,
        ),
        (
            "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
            "400",
            false,
        ),
        (
            "GET /echo HTTP/1.0\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            "400",
            false,
        ),
    ];
    for (req, status, names_version) in refusals {
        let mut c = Client::connect(&handle);
        c.send_raw(req.as_bytes());
        let head = c.read_head();
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{req:?} -> {head}");
        if names_version {
            assert!(head.contains("\r\nSec-WebSocket-Version: 13\r\n"), "{head}");
            assert!(head.contains("\r\nUpgrade: websocket\r\n"), "{head}");
        }
    }

    // Middleware first, then the upgrade through it.
    let mut c = Client::connect(&handle);
    let head = c.handshake("/guarded", "");
    assert!(head.starts_with("HTTP/1.1 401 "), "{head}");
    let mut c = Client::connect(&handle);
    let head = c.handshake("/guarded", "Authorization: Bearer tok\r\n");
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    c.send(0x81, b"through middleware");
    assert_eq!(c.recv(), (0x81, b"through middleware".to_vec()));

    // Extractors first: the handler refuses before any upgrade.
    let mut c = Client::connect(&handle);
    let head = c.handshake("/private", "");
    assert!(head.starts_with("HTTP/1.1 401 "), "{head}");
    // Origin and subprotocol reach the handler; ours is chosen in our order.
    let mut c = Client::connect(&handle);
    let head = c.handshake(
        "/private?token=s3cret",
        "Origin: https://app.example\r\nSec-WebSocket-Protocol: v1.chat, v2.chat\r\n",
    );
    assert!(head.contains("\r\nSec-WebSocket-Protocol: v2.chat\r\n"), "{head}");
    let (b0, text) = c.recv();
    assert_eq!(
        (b0, String::from_utf8(text).unwrap()),
        (0x81, "origin=https://app.example protocol=v2.chat".into())
    );
    handle.shutdown();
}

#[test]
fn echoes_in_order_with_fragments_and_control_frames_between() {
    let (handle, _) = start();
    let mut c = Client::open(&handle, "/echo");
    // Sent in one write, with the handshake's bytes already consumed.
    let mut burst = frame(0x81, b"one");
    burst.extend(frame(0x82, &[1, 2, 3]));
    burst.extend(frame(0x01, b"fra"));
    burst.extend(frame(0x89, b"are you there"));
    burst.extend(frame(0x00, b"gmen"));
    burst.extend(frame(0x80, b"ted"));
    burst.extend(frame(0x81, b""));
    c.send_raw(&burst);
    assert_eq!(c.recv(), (0x81, b"one".to_vec()));
    assert_eq!(c.recv(), (0x82, vec![1, 2, 3]));
    assert_eq!(c.recv(), (0x8A, b"are you there".to_vec()), "the pong comes first, mid-message");
    assert_eq!(c.recv(), (0x81, b"fragmented".to_vec()));
    assert_eq!(c.recv(), (0x81, b"".to_vec()));
    // A 1 MiB message, larger than any buffer, arriving in pieces.
    let big: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    c.send(0x82, &big);
    assert_eq!(c.recv(), (0x82, big));
    // Close 1000 is answered with 1000.
    c.send(0x88, &1000u16.to_be_bytes());
    let (b0, payload) = c.recv();
    assert_eq!((b0, &payload[..2]), (0x88, &1000u16.to_be_bytes()[..]));
    assert_eq!(c.try_recv(), None);
    handle.shutdown();
}

#[test]
fn protocol_errors_close_with_the_right_code() {
    let (handle, _) = start();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("unmasked", vec![0x81, 0x02, b'h', b'i'], 1002),
        ("reserved bits", frame(0xC1, b"x"), 1002),
        ("reserved opcode 3", frame(0x83, b""), 1002),
        ("reserved control opcode 11", frame(0x8B, b""), 1002),
        ("continuation first", frame(0x80, b"x"), 1002),
        ("fragmented ping", frame(0x09, b""), 1002),
        ("ping over 125 bytes", frame(0x89, &[0; 126]), 1002),
        ("close of one byte", frame(0x88, &[3]), 1002),
        ("close code 1005", frame(0x88, &1005u16.to_be_bytes()), 1002),
        ("close code 999", frame(0x88, &999u16.to_be_bytes()), 1002),
        ("close reason not UTF-8", frame(0x88, &[0x03, 0xe8, 0xff]), 1007),
        ("text not UTF-8", frame(0x81, &[0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xed, 0xa0, 0x80]), 1007),
        ("new message mid-message", [frame(0x01, b"a"), frame(0x81, b"b")].concat(), 1002),
    ];
    for (what, bytes, code) in cases {
        let mut c = Client::open(&handle, "/echo");
        c.send_raw(&bytes);
        let (b0, payload) = c.recv();
        assert_eq!(b0, 0x88, "{what}");
        assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), code, "{what}");
    }
    // Invalid UTF-8 fails at the fragment that carries it: the final
    // fragment is never sent.
    let mut c = Client::open(&handle, "/echo");
    c.send(0x01, b"valid so far ");
    c.send(0x00, &[0xf4, 0x90, 0x80, 0x80]);
    c.expect_close(1007);
    // Limits: a frame or message over them closes with 1009 at the header.
    let mut c = Client::open(&handle, "/small");
    c.send_raw(&frame(0x82, &[0; 900])[..10]);
    c.expect_close(1009);
    let mut c = Client::open(&handle, "/small");
    c.send(0x02, &[0; 600]);
    c.send(0x80, &[0; 600]);
    c.expect_close(1009);
    handle.shutdown();
}

#[test]
fn permessage_deflate_round_trip() {
    let (handle, _) = start();
    let mut c = Client::connect(&handle);
    let head =
        c.handshake("/deflate", "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n");
    assert!(head.contains("\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"), "{head}");
    let mut tx = Compress::new(Compression::default(), false);
    let mut rx = Decompress::new(false);
    let text = "a message that repeats, a message that repeats, a message that repeats".repeat(20);
    for _ in 0..3 {
        // Context taken over across messages, both ways.
        let mut wire = Vec::with_capacity(text.len() + 64);
        tx.compress_vec(text.as_bytes(), &mut wire, FlushCompress::Sync).unwrap();
        assert_eq!(&wire[wire.len() - 4..], &[0, 0, 0xff, 0xff]);
        wire.truncate(wire.len() - 4);
        // Fragmented: RSV1 on the first frame only.
        let half = wire.len() / 2;
        c.send(0x41, &wire[..half]);
        c.send(0x80, &wire[half..]);
        let (b0, mut payload) = c.recv();
        assert_eq!(b0, 0xC1, "compressed text");
        payload.extend_from_slice(&[0, 0, 0xff, 0xff]);
        let mut out = Vec::with_capacity(text.len() + 16);
        rx.decompress_vec(&payload, &mut out, FlushDecompress::Sync).unwrap();
        assert_eq!(out, text.as_bytes());
    }
    // RSV1 on a control frame is refused.
    c.send(0xC9, b"");
    let (b0, payload) = c.recv();
    assert_eq!((b0, u16::from_be_bytes([payload[0], payload[1]])), (0x88, 1002));

    // Not offered (or on a route without it): RSV1 is a protocol error.
    let mut c = Client::connect(&handle);
    let head = c.handshake("/echo", "Sec-WebSocket-Extensions: permessage-deflate\r\n");
    assert!(!head.contains("Sec-WebSocket-Extensions"), "{head}");
    c.send(0xC1, b"x");
    let (b0, payload) = c.recv();
    assert_eq!((b0, u16::from_be_bytes([payload[0], payload[1]])), (0x88, 1002));
    handle.shutdown();
}

#[test]
fn pings_reach_handlers_that_opt_out_of_automatic_pongs() {
    let (handle, _) = start();
    let mut c = Client::open(&handle, "/manual");
    c.send(0x89, b"hi");
    assert_eq!(c.recv(), (0x81, b"ping hi".to_vec()));
    handle.shutdown();
}

#[test]
fn keepalive_pings_then_closes_a_silent_client_and_idle_sockets_close() {
    let (handle, _) = start();
    let started = Instant::now();
    let mut c = Client::open(&handle, "/keepalive");
    assert_eq!(c.recv().0, 0x89, "a keepalive ping after a second of silence");
    // Never answered: closed with 1011 about a second later.
    let (b0, payload) = c.recv();
    assert_eq!((b0, u16::from_be_bytes([payload[0], payload[1]])), (0x88, 1011));
    assert!(started.elapsed() < Duration::from_secs(6), "{:?}", started.elapsed());

    // A client that answers pings stays; only data counts against idleness.
    let mut c = Client::open(&handle, "/keepalive");
    for _ in 0..2 {
        let (b0, payload) = c.recv();
        assert_eq!(b0, 0x89);
        c.send(0x8A, &payload);
    }
    c.send(0x81, b"still here");
    assert_eq!(c.recv(), (0x81, b"still here".to_vec()));

    let mut c = Client::open(&handle, "/idle");
    let started = Instant::now();
    c.expect_close(1001);
    assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
    handle.shutdown();
}

#[test]
fn sending_waits_for_a_slow_client_instead_of_queueing() {
    let (handle, sent) = start();
    let mut c = Client::open(&handle, "/flood");
    std::thread::sleep(Duration::from_millis(500));
    let queued = sent.load(Ordering::SeqCst);
    // 1000 messages of 64 KiB (62.5 MiB) were offered; what was accepted
    // is bounded by the write buffer plus the kernel's socket buffers.
    assert!(queued < 200, "{queued} messages of 64 KiB accepted by a client reading nothing");
    let mut received = 0;
    while received < 1000 {
        let (b0, payload) = c.recv();
        assert_eq!((b0, payload.len()), (0x82, 64 << 10));
        received += 1;
    }
    assert_eq!(sent.load(Ordering::SeqCst), 1000);
    handle.shutdown();
}

#[test]
fn shutdown_says_going_away() {
    let (handle, _) = start();
    let mut c = Client::open(&handle, "/echo");
    c.send(0x81, b"hi");
    assert_eq!(c.recv(), (0x81, b"hi".to_vec()));
    let stopper = std::thread::spawn(move || handle.shutdown());
    c.expect_close(1001);
    stopper.join().unwrap();
}

#[test]
fn python_websockets_client() {
    let (handle, _) = start();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/websocket/client.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(format!("ws://{}", handle.local_addr()))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client.py failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("all checks passed"), "{stdout}");
    handle.shutdown();
}

// Keeps `Rc` and `CloseCode` in use for handlers that need them.
#[allow(dead_code)]
fn _types(_: Rc<()>, _: CloseCode) {}

/// The fuzz target's property on a few thousand mutated inputs, on stable:
/// what the reader decodes does not depend on how the bytes were split.
#[test]
fn decoding_does_not_depend_on_how_input_is_split() {
    use peregrine::fuzzing::ws_read;
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(13);
    let seeds: Vec<Vec<u8>> = vec![
        [frame(0x81, b"hello"), frame(0x82, &[0, 1]), frame(0x88, &[0x03, 0xe8])].concat(),
        [frame(0x01, b"fra"), frame(0x89, b"p"), frame(0x80, "g\u{e9}".as_bytes())].concat(),
        [frame(0x02, &[7; 300]), frame(0x80, &[8; 70_000])].concat(),
        [frame(0xC1, &[0x4a, 0xce, 0xcf, 0x2d, 0x28, 0x4a, 0x2d, 0x2e, 0x06, 0x00])].concat(),
    ];
    for i in 0..3000 {
        let mut input = seeds[i % seeds.len()].clone();
        for _ in 0..rng.gen_range(0..4) {
            let at = rng.gen_range(0..input.len());
            input[at] = rng.gen();
        }
        let deflate = i % 2 == 0;
        let whole = ws_read(&input, input.len(), deflate);
        for step in [1, 7, 133] {
            assert_eq!(ws_read(&input, step, deflate), whole, "input {i}, reads of {step}");
        }
    }
}

/// A client that opens a WebSocket and never reads what the server sends
/// is cut at the minimum response rate, and reset: the server does not
/// keep its send queue, nor the kernel its socket buffer, for it.
#[test]
fn a_client_that_never_reads_is_cut_and_reset() {
    let sent = Arc::new(AtomicUsize::new(0));
    let shared = Arc::clone(&sent);
    let rate = peregrine::MinDataRate { bytes_per_second: 2000, grace: Duration::from_secs(1) };
    let config = Config { min_response_rate: Some(rate), ..common::config() };
    let handle = Server::with_config(config)
        .spawn("127.0.0.1:0", move |_| {
            let sent = Arc::clone(&shared);
            async move { router(sent) }
        })
        .expect("server starts");
    // A small receive buffer, so what the client's kernel takes on its
    // behalf stays small next to the rate.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&handle.local_addr().into()).unwrap();
    let mut c = Client { s: socket.into(), buf: Vec::new() };
    c.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = c.handshake("/flood", "");
    assert!(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{head}");
    let started = Instant::now();
    // Read nothing for 8 s: 1 s of grace, then the sweep's few seconds.
    std::thread::sleep(Duration::from_secs(8));
    let queued = sent.load(Ordering::SeqCst);
    assert!(queued < 200, "{queued} messages of 64 KiB accepted by a client reading nothing");
    c.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 << 10];
    let ended = loop {
        match c.s.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => got += n,
            Err(e) => break Err(e),
        }
    };
    assert!(got < 1000 * (64 << 10), "the client that never read got everything");
    match ended {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "after {got} bytes: {e}"),
        Ok(()) => panic!("a clean end after {got} bytes, not a reset"),
    }
    assert!(started.elapsed() < Duration::from_secs(14), "cut only after {:?}", started.elapsed());
    handle.shutdown();
}

/// A message whose bytes trickle in below the minimum request-body rate is
/// cut with close `1008`, however steadily the bytes come (each is input,
/// so no keepalive or read deadline would ever fire); one sent at a fair
/// pace over several seconds arrives whole.
#[test]
fn a_message_trickled_below_the_minimum_rate_is_cut_with_1008() {
    let rate = peregrine::MinDataRate { bytes_per_second: 200, grace: Duration::from_secs(1) };
    let config = Config { min_request_body_rate: Some(rate), ..common::config() };
    let sent = Arc::new(AtomicUsize::new(0));
    let handle = Server::with_config(config)
        .spawn("127.0.0.1:0", move |_| {
            let sent = Arc::clone(&sent);
            async move { router(sent) }
        })
        .expect("server starts");

    // 400 bytes of text, a byte every 200 ms (5 bytes a second).
    let mut c = Client::open(&handle, "/echo");
    c.s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    for &b in &frame(0x81, &[b'a'; 400]) {
        if c.s.write_all(&[b]).is_err() {
            break;
        }
        let mut chunk = [0u8; 256];
        match c.s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&chunk[..n]);
                if got.len() >= 4 {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("{e} after {:?}", started.elapsed()),
        }
    }
    let took = started.elapsed();
    assert!(got.len() >= 4, "a message trickled at 5 bytes a second was held {took:?}");
    assert_eq!((got[0], u16::from_be_bytes([got[2], got[3]])), (0x88, 1008), "{got:?}");
    assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(6), "cut after {took:?}");

    // 4,000 bytes in 400-byte pieces every 300 ms: 1,333 bytes a second.
    let mut c = Client::open(&handle, "/echo");
    let message = vec![b'b'; 4000];
    for piece in frame(0x82, &message).chunks(400) {
        c.send_raw(piece);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(c.recv(), (0x82, message));
    handle.shutdown();
}
