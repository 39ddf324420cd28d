//! Strictness and slow clients over real sockets: the shared corpus of
//! malformed and smuggling requests (`http_probe::corpus`), the path rule
//! as `ServeDir` sees it, and the minimum data rates for request bodies and
//! for reading responses.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use common::{config, get, post, start, Client};
use http_probe::corpus::{self, Expect};
use peregrine::fs::ServeDir;
use peregrine::{Body, Config, Content, MinDataRate, Router, Server};

#[test]
fn corpus_gets_the_answers_the_rfcs_call_for() {
    let server = start(config());
    let addr = server.local_addr();
    let mut good = Client::connect(addr);
    let routes = corpus::Routes { host: "localhost", get: "/plaintext", post: Some("/echo") };
    let cases = corpus::cases(&routes);
    assert!(cases.len() >= 60, "{} cases", cases.len());
    for case in cases {
        let what = format!("{} ({})", case.name, case.source);
        let mut c = Client::connect(addr);
        c.send(&case.request);
        let r = c.response();
        match case.expect {
            Expect::Refused(status) => {
                assert_eq!(r.status, status, "{what}: {:?}", r.text());
                assert!(r.says_close(), "{what}: the error must say Connection: close");
                c.expect_closed();
            }
            Expect::Served | Expect::Kept(_) => {
                let status = if let Expect::Kept(s) = case.expect { s } else { 200 };
                assert_eq!(r.status, status, "{what}: {:?}", r.text());
                assert!(!r.says_close(), "{what}");
                assert_eq!(c.roundtrip(&get("/id/7")).text(), "id 7", "{what}: connection stays usable");
            }
        }
        assert_eq!(good.roundtrip(&get("/id/1")).text(), "id 1", "after {what}");
    }
    server.shutdown();
}

#[test]
fn http_1_2_is_answered_as_http_1_1() {
    let server = start(config());
    let mut stream = TcpStream::connect(server.local_addr()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(b"GET /plaintext HTTP/1.2\r\nHost: a\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = Vec::new();
    stream.read_to_end(&mut out).unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text:?}");
    assert!(text.ends_with("Hello, World!"), "{text:?}");
    server.shutdown();
}

/// The server refuses dot segments and escaped unreserved characters
/// before routing, and `ServeDir` (reached without the HTTP/1 parser, as
/// through the test client) applies the same rule; traversal through
/// escapes of reserved characters stays a `404`.
#[test]
fn serve_dir_agrees_with_the_path_rule() {
    let dir = std::env::temp_dir().join(format!("peregrine-strict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "file a").unwrap();
    let root = dir.clone();
    let server = Server::with_config(config())
        .spawn("127.0.0.1:0", move |_| {
            let root = root.clone();
            async move { Router::new().get("/static/{*file}", ServeDir::new(root)) }
        })
        .unwrap();
    let client =
        peregrine::testing::TestClient::new(Router::new().get("/static/{*file}", ServeDir::new(&dir)));
    let addr = server.local_addr();
    for (path, status) in [
        ("/static/a.txt", 200),
        ("/static/%61.txt", 400),
        ("/static/./a.txt", 400),
        ("/static/x/../a.txt", 400),
        ("/static/%2e%2e/a.txt", 400),
        ("/static/%zz", 400),
        ("/static/..%2fa.txt", 404),
        ("/static/x%2f..%2fa.txt", 404),
    ] {
        let mut c = Client::connect(addr);
        c.send(&get(path));
        let wire = c.response().status;
        assert_eq!(wire, status, "{path} over HTTP/1.1");
        assert_eq!(client.get(path).status().as_u16(), status, "{path} through ServeDir alone");
    }
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Minimum rates with a one-second grace: 200 bytes a second for bodies;
/// 2,000 for responses, since a client that never reads still takes what
/// fits in its receive buffer (4 KiB here) and that counts as read.
fn slow_rates() -> Config {
    let grace = Duration::from_secs(1);
    Config {
        min_request_body_rate: Some(MinDataRate { bytes_per_second: 200, grace }),
        min_response_rate: Some(MinDataRate { bytes_per_second: 2000, grace }),
        ..config()
    }
}

/// Sends `head`, then one body byte every 200 ms (5 bytes a second, far
/// below the 200 required) until the server answers or closes. Returns the
/// status answered (if any) and how long it took.
fn trickle_body(addr: std::net::SocketAddr, head: &[u8]) -> (Option<u16>, Duration) {
    let mut c = Client::connect(addr);
    c.send(head);
    let mut writer = c.stream.try_clone().unwrap();
    let started = Instant::now();
    let trickler = thread::spawn(move || {
        for _ in 0..200 {
            if writer.write_all(b"x").is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(200));
        }
    });
    let status = match c.read_response(false) {
        Ok(Some(r)) => {
            assert!(r.says_close());
            Some(r.status)
        }
        Ok(None) => None,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
        Err(e) => panic!("trickling client was not cut: {e}"),
    };
    let took = started.elapsed();
    drop(c);
    trickler.join().unwrap();
    (status, took)
}

#[test]
fn request_bodies_below_the_minimum_rate_are_cut() {
    let server = start(slow_rates());
    let addr = server.local_addr();
    // Buffered route: the server answers 408 itself.
    let (status, took) =
        trickle_body(addr, b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n");
    assert_eq!(status, Some(408), "buffered body");
    assert!(took < Duration::from_secs(5), "buffered body cut after {took:?}");
    // Chunked, so no length is known in advance.
    let (status, took) =
        trickle_body(addr, b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n");
    assert_eq!(status, Some(408), "chunked body");
    assert!(took < Duration::from_secs(5), "chunked body cut after {took:?}");
    // Streaming route: the handler's read fails; the connection ends.
    let (_, took) = trickle_body(addr, b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n");
    assert!(took < Duration::from_secs(5), "streamed body cut after {took:?}");
    // A body arriving at a good pace over several seconds is not cut.
    let mut c = Client::connect(addr);
    let body = vec![b'y'; 4000];
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4000\r\n\r\n");
    for part in body.chunks(400) {
        c.send(part);
        thread::sleep(Duration::from_millis(300));
    }
    let r = c.response();
    assert_eq!((r.status, r.body.len()), (200, 4000));
    assert_eq!(c.roundtrip(&post("/echo", b"after")).text(), "after");
    server.shutdown();
}

#[test]
fn clients_reading_responses_below_the_minimum_rate_are_cut() {
    const BIG: usize = 16 * 1024 * 1024;
    const MEDIUM: usize = 300 * 1024;
    let server = Server::with_config(slow_rates())
        .spawn("127.0.0.1:0", |_| async {
            Router::new()
                .get("/big", || Content("application/octet-stream", vec![b'z'; BIG]))
                .get("/medium", || Content("application/octet-stream", vec![b'm'; MEDIUM]))
                .get("/small", || "small")
        })
        .unwrap();
    let addr = server.local_addr();

    // A response the kernel's send buffer takes whole: `write` is done at
    // once, yet the client has read next to nothing. The connection must
    // still be held to the rate, not left idle for the idle timeout.
    let mut drained = small_window_client(addr, b"GET /medium HTTP/1.1\r\nHost: a\r\n\r\n");
    thread::sleep(Duration::from_secs(6));
    // Cut by now: a second request gets no answer (what was queued may
    // still arrive, or a reset).
    let _ = drained.write_all(b"GET /small HTTP/1.1\r\nHost: a\r\n\r\n");
    drained.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = drained.read(&mut buf) {
        if n == 0 {
            break;
        }
        received.extend_from_slice(&buf[..n]);
    }
    assert!(
        common::find(&received, b"small").is_none(),
        "a client that read nothing for 6 s was still served ({} bytes)",
        received.len()
    );

    // A client that never reads: once the socket buffers fill, nothing
    // moves, and the sweep cuts it.
    let mut stalled = small_window_client(addr, b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
    let started = Instant::now();

    // Meanwhile other clients are served at once, from the moment the
    // stalled response is being written. Until then the one worker is
    // building and encoding the 16 MiB body (133 and 145 ms in a debug
    // build on an idle machine, once past 200 ms under `scripts/test`),
    // which is not what is timed here. A peek waits for the first byte
    // without taking it, so the client's window stays shut.
    stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(stalled.peek(&mut [0u8; 1]).unwrap() > 0, "the stalled client's response never began");
    let mut other = Client::connect(addr);
    for i in 0..20 {
        let t = Instant::now();
        assert_eq!(other.roundtrip(b"GET /small HTTP/1.1\r\nHost: a\r\n\r\n").text(), "small");
        let took = t.elapsed();
        assert!(took < Duration::from_millis(200), "answer {i} beside the stalled client took {took:?}");
        thread::sleep(Duration::from_millis(50));
    }

    // Wait for the cut: the server resets or closes, so reading what was
    // sent ends (or fails) well before the whole body arrives.
    thread::sleep(Duration::from_secs(5));
    stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stalled.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(got < BIG, "the stalled client got the whole response ({got} bytes)");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(16), "stalled reader cut only after {took:?}");

    // A client reading normally gets all of it.
    let mut reader = Client::connect(addr);
    let r = reader.roundtrip(b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(r.body.len(), BIG);
    server.shutdown();
}

/// Streaming handlers see a slow body as an error of their own reads; the
/// rest of the worker keeps going.
#[test]
fn streaming_handler_sees_a_slow_body_as_an_error() {
    let server = Server::with_config(slow_rates())
        .spawn("127.0.0.1:0", |_| async {
            Router::new().post_stream("/count", |body: Body| async move {
                match body.count().await {
                    Ok(n) => Ok(n.to_string()),
                    Err(e) => Err(e),
                }
            })
        })
        .unwrap();
    let (status, took) = trickle_body(
        server.local_addr(),
        b"POST /count HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n",
    );
    assert!(took < Duration::from_secs(5), "cut after {took:?}");
    assert!(matches!(status, None | Some(408)), "{status:?}");
    server.shutdown();
}

/// A slow reader that is cut is reset, not closed: the kernel then drops
/// the response bytes it still held for it instead of feeding them on at
/// the client's pace from an orphaned socket. The client sees the reset
/// after what it had already received, short of the whole response.
#[test]
fn a_slow_reader_that_is_cut_is_reset() {
    const BIG: usize = 16 * 1024 * 1024;
    let server = Server::with_config(slow_rates())
        .spawn("127.0.0.1:0", |_| async {
            Router::new().get("/big", || Content("application/octet-stream", vec![b'z'; BIG]))
        })
        .unwrap();
    let mut reader = small_window_client(server.local_addr(), b"GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
    let started = Instant::now();
    // 64 bytes every 100 ms: 640 bytes a second, below the 2,000 required.
    reader.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    let mut got = 0usize;
    let ended = loop {
        match reader.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => got += n,
            Err(e) => break Err(e),
        }
        thread::sleep(Duration::from_millis(100));
        assert!(started.elapsed() < Duration::from_secs(30), "slow reader still served after 30 s");
    };
    assert!(got < BIG, "the slow reader got the whole response");
    match ended {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        Ok(()) => panic!("the slow reader saw a clean end after {got} bytes, not a reset"),
    }
    // It was cut at the rate (1 s grace, then the sweep's slack), and read
    // what its buffer held at a few hundred bytes a second meanwhile.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "slow reader cut only after {took:?}");
    server.shutdown();
}

/// A client with a 4 KiB receive buffer that has sent `request` to `addr`.
fn small_window_client(addr: std::net::SocketAddr, request: &[u8]) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    stream.write_all(request).unwrap();
    stream
}

/// Response bytes a handler streamed to a client that reads nothing, with
/// a 4 KiB receive buffer, after a second, under `config`.
fn streamed_to_a_reader_that_never_reads(config: Config) -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let produced = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&produced);
    let server = Server::with_config(config)
        .spawn("127.0.0.1:0", move |_| {
            let counter = Arc::clone(&counter);
            async move { common::endless_router(counter) }
        })
        .unwrap();
    let stalled = small_window_client(server.local_addr(), b"GET /endless HTTP/1.1\r\nHost: a\r\n\r\n");
    thread::sleep(Duration::from_secs(1));
    let streamed = produced.load(Ordering::SeqCst);
    drop(stalled);
    server.shutdown();
    streamed
}

/// `Config::tcp_notsent_lowat` bounds what the kernel queues for a reader
/// whose window is closed; without it, Linux grows the send buffer and
/// takes far more (2.7 MiB here on loopback, against 144 KiB with the
/// default 128 KiB).
#[test]
fn unsent_response_bytes_are_capped_for_a_reader_that_does_not_read() {
    let capped = streamed_to_a_reader_that_never_reads(config());
    assert!(
        capped <= 320 * 1024,
        "{capped} bytes taken for a client that reads nothing (limit 128 KiB unsent)"
    );
    let uncapped = streamed_to_a_reader_that_never_reads(Config { tcp_notsent_lowat: None, ..config() });
    assert!(
        uncapped >= 2 * capped && uncapped > 512 * 1024,
        "without the cap: {uncapped} bytes; with it: {capped}"
    );
}
