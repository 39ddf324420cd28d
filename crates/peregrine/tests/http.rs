//! The server over real TCP: pipelining, split reads, keep-alive, bodies,
//! every kind of bad input, timeouts, connection limits and graceful
//! shutdown. Requests are raw bytes and responses are parsed and checked by
//! hand (see `common`), so framing mistakes cannot hide behind a client
//! library.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{config, fnv1a, get, post, start, Client, FNV_OFFSET};
use peregrine::{Config, Server};

// ---------------------------------------------------------------------------
// Pipelining and split input

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let batch: Vec<u8> = (0..16).flat_map(|i| get(&format!("/id/{i}"))).collect();
    c.send(&batch);
    for i in 0..16 {
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), format!("id {i}"), "response {i} out of order");
    }
    // The connection is still in a clean state for the next request.
    assert_eq!(c.roundtrip(&get("/plaintext")).text(), "Hello, World!");
    server.shutdown();
}

#[test]
fn pipelined_sync_and_async_requests_keep_order() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    // Later async requests sleep less than earlier ones, so any handler
    // running out of turn would answer first.
    let mut batch = Vec::new();
    let mut expected = Vec::new();
    for i in 0..16u64 {
        if i % 2 == 0 {
            batch.extend(get(&format!("/id/{i}")));
            expected.push(format!("id {i}"));
        } else {
            let ms = 40 - 2 * i;
            batch.extend(get(&format!("/sleep/{ms}")));
            expected.push(format!("slept {ms}"));
        }
    }
    c.send(&batch);
    for (i, want) in expected.iter().enumerate() {
        let r = c.response();
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), want, "response {i} out of order");
    }
    server.shutdown();
}

#[test]
fn request_split_at_every_byte_boundary_gets_one_response() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let template = get("/id/00");
    for cut in 1..template.len() {
        // A distinct id per iteration, same length, so a duplicated or
        // stale response cannot pass as the right one.
        let req = get(&format!("/id/{:02}", cut % 100));
        c.send(&req[..cut]);
        thread::sleep(Duration::from_millis(3));
        c.send(&req[cut..]);
        let r = c.response();
        assert_eq!(r.status, 200, "split at {cut}");
        assert_eq!(r.text(), format!("id {}", cut % 100), "split at {cut}");
    }
    // Nothing extra was produced along the way.
    c.send(b"GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(c.response().text(), "Hello, World!");
    c.expect_closed();
    server.shutdown();
}

/// On io_uring a connection's input arrives in receives, and the one
/// after an answer is parsed where it was received. While a handler runs,
/// the next request can arrive cut over two receives (two writes, both in
/// before the handler ends): whole only once both are read. A driver that
/// waited for more input after the first would hang until the idle
/// timeout.
#[test]
fn request_cut_over_two_writes_while_a_handler_runs_is_answered() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    for cut in [1, 9, 17, get("/id/7").len() - 1] {
        let next = get("/id/7");
        c.send(&get("/sleep/100"));
        thread::sleep(Duration::from_millis(20));
        c.send(&next[..cut]);
        thread::sleep(Duration::from_millis(20));
        c.send(&next[cut..]);
        let started = Instant::now();
        assert_eq!(c.response().text(), "slept 100", "cut at {cut}");
        assert_eq!(c.response().text(), "id 7", "cut at {cut}");
        assert!(started.elapsed() < Duration::from_secs(2), "cut at {cut}: {:?}", started.elapsed());
    }
    server.shutdown();
}

#[test]
fn request_sent_one_byte_per_write_gets_one_response() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let req = post("/echo", b"dribbled body");
    for byte in &req {
        c.send(std::slice::from_ref(byte));
        thread::sleep(Duration::from_millis(1));
    }
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"dribbled body");
    assert_eq!(c.roundtrip(&get("/id/1")).text(), "id 1");
    server.shutdown();
}

// ---------------------------------------------------------------------------
// Keep-alive and connection management

#[test]
fn keep_alive_serves_sequential_requests() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    for i in 0..10 {
        let r = c.roundtrip(&get(&format!("/id/{i}")));
        assert_eq!(r.text(), format!("id {i}"));
        assert!(r.header("connection").is_none(), "HTTP/1.1 keep-alive needs no Connection header");
    }
    let r = c.roundtrip(&get("/json"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.text(), r#"{"message":"Hello, World!"}"#);
    server.shutdown();
}

#[test]
fn http10_without_keep_alive_closes_after_the_response() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(b"GET /plaintext HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "Hello, World!");
    assert!(r.says_close());
    c.expect_closed();
    server.shutdown();
}

#[test]
fn http10_with_keep_alive_stays_open() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    for i in 0..3 {
        let r = c.roundtrip(format!("GET /id/{i} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").as_bytes());
        assert_eq!(r.text(), format!("id {i}"));
        assert_eq!(r.header("connection"), Some("keep-alive"));
    }
    server.shutdown();
}

#[test]
fn connection_close_is_honoured() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.roundtrip(&get("/id/1")).text(), "id 1");
    // Pipelined after the closing request: must never be answered.
    c.send(
        b"GET /id/2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /id/3 HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let r = c.response();
    assert_eq!(r.text(), "id 2");
    assert!(r.says_close());
    c.expect_closed();
    server.shutdown();
}

#[test]
fn head_gets_content_length_but_no_body() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    // A GET right behind each HEAD in the same write: if the server sent
    // any body bytes, they would show up in front of the GET's response.
    c.send(b"HEAD /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
    c.send(&get("/id/1"));
    let r = c.head_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("13"));
    assert_eq!(c.response().text(), "id 1");

    // JSON is serialized in place and its length back-filled: same rule.
    c.send(b"HEAD /json HTTP/1.1\r\nHost: x\r\n\r\n");
    c.send(&get("/id/2"));
    let r = c.head_response();
    assert_eq!(r.header("content-length"), Some("27"));
    assert_eq!(c.response().text(), "id 2");
    server.shutdown();
}

// ---------------------------------------------------------------------------
// Request bodies

#[test]
fn content_length_body_is_echoed() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let r = c.roundtrip(&post("/echo", &body));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
    assert_eq!(c.roundtrip(&post("/echo", b"")).body, b"");
    server.shutdown();
}

const CHUNKED_HEAD: &[u8] = b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
/// "hello world" in three chunks, with extensions and a trailer section.
const CHUNKED_BODY: &[u8] =
    b"5;ext=1\r\nhello\r\n1;a=\"q\";b\r\n \r\nA\r\nworld, too\r\n0;last\r\nX-Trailer: t\r\nX-Other: u\r\n\r\n";

#[test]
fn chunked_body_with_extensions_and_trailers_is_decoded() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let mut req = CHUNKED_HEAD.to_vec();
    req.extend_from_slice(CHUNKED_BODY);
    // The next request right behind the trailers proves the decoder
    // consumed exactly the body.
    req.extend(get("/id/9"));
    c.send(&req);
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello world, too");
    assert_eq!(c.response().text(), "id 9");
    server.shutdown();
}

#[test]
fn chunked_body_split_across_writes_is_decoded() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let mut req = CHUNKED_HEAD.to_vec();
    req.extend_from_slice(CHUNKED_BODY);
    // Every cut inside the body: size lines, extensions, data, CRLFs and
    // trailers all arrive split at some point.
    for cut in CHUNKED_HEAD.len()..req.len() {
        c.send(&req[..cut]);
        thread::sleep(Duration::from_millis(2));
        c.send(&req[cut..]);
        let r = c.response();
        assert_eq!(r.status, 200, "split at {cut}");
        assert_eq!(r.text(), "hello world, too", "split at {cut}");
    }
    assert_eq!(c.roundtrip(&get("/id/5")).text(), "id 5");
    server.shutdown();
}

#[test]
fn expect_100_continue_gets_interim_response_first() {
    let server = start(config());
    for path in ["/echo", "/upload"] {
        let mut c = Client::connect(server.local_addr());
        c.send(
            format!("POST {path} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
                .as_bytes(),
        );
        // The client waits for permission before sending the body.
        let interim = c.response();
        assert_eq!(interim.status, 100, "{path}");
        c.send(b"abcde");
        let r = c.response();
        assert_eq!(r.status, 200, "{path}");
        let want = if path == "/echo" { "abcde" } else { "5" };
        assert_eq!(r.text(), want, "{path}");
        // No second interim response on the next request without Expect.
        assert_eq!(c.roundtrip(&post("/echo", b"xy")).text(), "xy");
    }
    server.shutdown();
}

const UPLOAD_BYTES: usize = 5 * 1024 * 1024;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 253) as u8).collect()
}

#[test]
fn streamed_upload_by_content_length_is_counted_exactly() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let mut req = post("/upload", &pattern(UPLOAD_BYTES));
    req.extend(get("/id/1"));
    c.send(&req);
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), UPLOAD_BYTES.to_string());
    assert_eq!(c.response().text(), "id 1", "request after the upload");
    server.shutdown();
}

/// The handler must see the very bytes sent, in order, whether they came
/// through the connection's buffer or straight from the socket, sent in
/// one write or dribbled, and the request after the body must still parse.
#[test]
fn streamed_upload_bytes_arrive_intact() {
    let server = start(config());
    let data = pattern(UPLOAD_BYTES + 12_345);
    let want = format!("{} {:016x}", data.len(), fnv1a(FNV_OFFSET, &data));
    let mut c = Client::connect(server.local_addr());
    let mut req = post("/checksum", &data);
    req.extend(get("/id/1"));
    c.send(&req);
    assert_eq!(c.response().text(), want, "one write");
    assert_eq!(c.response().text(), "id 1", "request after the upload");
    // The head and the start of the body together, then pieces of odd
    // sizes with pauses, so reads end mid-body at many offsets.
    let req = post("/checksum", &data);
    let mut at = 0;
    for (i, size) in [100usize, 70_001, 3, 300_000, 65_536].into_iter().cycle().enumerate() {
        if at == req.len() {
            break;
        }
        let end = (at + size).min(req.len());
        c.send(&req[at..end]);
        at = end;
        if i % 7 == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert_eq!(c.response().text(), want, "dribbled");
    c.send(&get("/id/2"));
    assert_eq!(c.response().text(), "id 2", "request after the dribbled upload");
    server.shutdown();
}

#[test]
fn streamed_upload_chunked_is_counted_exactly() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let data = pattern(UPLOAD_BYTES);
    let mut req = b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    // Chunk sizes from 1 byte to larger than any read, so chunk
    // boundaries fall everywhere relative to the server's reads.
    let sizes = [1usize, 7, 4096, 65_536, 100_000, 3, 16_384];
    let (mut at, mut i) = (0, 0);
    while at < data.len() {
        let n = sizes[i % sizes.len()].min(data.len() - at);
        let ext = if i % 5 == 0 { ";x=y" } else { "" };
        req.extend(format!("{n:x}{ext}\r\n").into_bytes());
        req.extend_from_slice(&data[at..at + n]);
        req.extend_from_slice(b"\r\n");
        at += n;
        i += 1;
    }
    req.extend_from_slice(b"0\r\nX-Checksum: none\r\n\r\n");
    req.extend(get("/id/2"));
    c.send(&req);
    let r = c.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), UPLOAD_BYTES.to_string());
    assert_eq!(c.response().text(), "id 2", "request after the upload");
    server.shutdown();
}

/// Bodies that are themselves valid requests: parsed as requests they
/// would produce extra responses (and `/panic` a 500).
#[test]
fn body_bytes_are_never_parsed_as_requests() {
    let server = start(config());
    let smuggled = b"GET /panic HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut chunked = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        smuggled.len()
    )
    .into_bytes();
    chunked.extend_from_slice(smuggled);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let counted = smuggled.len().to_string();
    let cases: [(&str, Vec<u8>, &[u8]); 3] = [
        ("content-length", post("/echo", smuggled), smuggled),
        ("chunked", chunked, smuggled),
        ("streamed", post("/upload", smuggled), counted.as_bytes()),
    ];
    for (name, mut req, want) in cases {
        let mut c = Client::connect(server.local_addr());
        req.extend_from_slice(b"GET /id/7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        c.send(&req);
        let r = c.response();
        assert_eq!(r.status, 200, "{name}");
        assert_eq!(r.body, want, "{name}");
        let r = c.response();
        assert_eq!(r.text(), "id 7", "{name}: the request after the body");
        // Exactly two responses, then the close the last request asked for.
        c.expect_closed();
    }
    server.shutdown();
}

// ---------------------------------------------------------------------------
// Bad input

/// One bad request on a fresh connection: the status, and whether the
/// server must close afterwards.
struct BadCase {
    name: &'static str,
    request: Vec<u8>,
    status: u16,
    closes: bool,
}

fn bad_cases() -> Vec<BadCase> {
    let case =
        |name, request: &[u8], status, closes| BadCase { name, request: request.to_vec(), status, closes };
    let mut big_head = b"GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    big_head.extend_from_slice(&[b'a'; 17 * 1024]);
    big_head.extend_from_slice(b"\r\n\r\n");
    let mut many_headers = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..101 {
        many_headers.extend(format!("X-H{i}: v\r\n").into_bytes());
    }
    many_headers.extend_from_slice(b"\r\n");
    vec![
        case("garbage request line", b"GARBAGE\r\n\r\n", 400, true),
        case("extra token in request line", b"GET /plaintext HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400, true),
        case("relative request target", b"GET plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 400, true),
        case("header without colon", b"GET /plaintext HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400, true),
        case("space before colon", b"GET /plaintext HTTP/1.1\r\nHost : x\r\n\r\n", 400, true),
        BadCase { name: "header section over 16 KiB", request: big_head, status: 431, closes: true },
        BadCase { name: "too many headers", request: many_headers, status: 431, closes: true },
        case(
            "Content-Length over max_body_bytes",
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n",
            413,
            true,
        ),
        case(
            "Content-Length over max_stream_body_bytes",
            b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n",
            413,
            true,
        ),
        case(
            "Content-Length and Transfer-Encoding",
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
            true,
        ),
        case(
            "two different Content-Length",
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef",
            400,
            true,
        ),
        case(
            "Transfer-Encoding gzip",
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
            501,
            true,
        ),
        case(
            "invalid chunk size",
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            400,
            true,
        ),
        case(
            "invalid chunk size, streamed route",
            b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
            400,
            true,
        ),
        case("HTTP/2.0 request line", b"GET /plaintext HTTP/2.0\r\nHost: x\r\n\r\n", 505, true),
        case("missing Host in HTTP/1.1", b"GET /plaintext HTTP/1.1\r\n\r\n", 400, true),
        case("unsupported Expect", b"GET /plaintext HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", 417, true),
        case("unknown path", b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404, false),
        case("wrong method", b"DELETE /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 405, false),
    ]
}

#[test]
fn bad_input_gets_the_right_error_and_never_disturbs_other_connections() {
    let server = start(config());
    let addr = server.local_addr();
    // A healthy connection on the same (only) worker, used between bad
    // cases: one bad connection must never disturb another.
    let mut good = Client::connect(addr);
    assert_eq!(good.roundtrip(&get("/plaintext")).text(), "Hello, World!");
    for case in bad_cases() {
        let mut c = Client::connect(addr);
        c.send(&case.request);
        // `response()` checks the error is well-formed with a correct
        // Content-Length; a close must then follow with nothing after it.
        let r = c.response();
        assert_eq!(r.status, case.status, "{}: {:?}", case.name, r.text());
        if case.closes {
            assert!(r.says_close(), "{}: error response must say Connection: close", case.name);
            c.expect_closed();
        } else {
            assert!(!r.says_close(), "{}", case.name);
            assert_eq!(c.roundtrip(&get("/id/3")).text(), "id 3", "{}: connection stays usable", case.name);
        }
        assert_eq!(good.roundtrip(&get("/id/1")).text(), "id 1", "after {}", case.name);
    }
    // And new connections are served normally after all of it.
    let mut fresh = Client::connect(addr);
    assert_eq!(fresh.roundtrip(&get("/json")).status, 200);
    server.shutdown();
}

#[test]
fn wrong_method_lists_allowed_methods() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(b"POST /plaintext HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    // The refused request's body was skipped, not parsed as a request.
    let r = c.roundtrip(&get("/echo"));
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("POST"));
    assert_eq!(c.roundtrip(&get("/id/4")).text(), "id 4");
    server.shutdown();
}

#[test]
fn bad_requests_pipelined_behind_good_ones_get_answers_in_order() {
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    let mut req = get("/id/1");
    req.extend(get("/missing"));
    req.extend(get("/id/2"));
    req.extend_from_slice(b"BROKEN\r\n\r\n");
    req.extend(get("/id/3"));
    c.send(&req);
    assert_eq!(c.response().text(), "id 1");
    assert_eq!(c.response().status, 404);
    assert_eq!(c.response().text(), "id 2");
    let r = c.response();
    assert_eq!(r.status, 400);
    // Nothing after the malformed request is trusted or answered.
    c.expect_closed();
    server.shutdown();
}

#[test]
fn a_malformed_head_with_more_input_behind_it_is_drained_not_reset() {
    // The server answers `400` and closes while the client's input goes on
    // arriving, 32 times what the connection's read buffer holds. A socket
    // closed with input still coming is reset by the kernel; the server
    // half-closes and drains instead (into the connection's own read
    // buffer), so every write goes through and the client reads the whole
    // `400`, then a clean end of stream.
    let server = start(config());
    let mut c = Client::connect(server.local_addr());
    c.send(b"GET /plaintext HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n");
    // The 400 leaves and the drain begins before the rest arrives.
    thread::sleep(Duration::from_millis(100));
    let tail = vec![b'x'; 256 * 1024];
    for chunk in tail.chunks(16 * 1024) {
        c.stream.write_all(chunk).expect("a draining server takes the client's input");
    }
    c.stream.shutdown(std::net::Shutdown::Write).unwrap();
    let r = c.response();
    assert_eq!(r.status, 400, "{:?}", r.text());
    assert!(r.says_close());
    let mut after = Vec::new();
    c.stream.read_to_end(&mut after).expect("a clean end of stream after the 400, not a reset");
    assert!(after.is_empty(), "{:?}", String::from_utf8_lossy(&after));
    server.shutdown();
}

#[test]
fn panicking_handler_gets_500_and_the_server_keeps_serving() {
    let server = start(config());
    let addr = server.local_addr();
    let mut other = Client::connect(addr);
    assert_eq!(other.roundtrip(&get("/id/1")).text(), "id 1");
    for path in ["/panic", "/panic-async"] {
        let mut c = Client::connect(addr);
        let r = c.roundtrip(&get(path));
        assert_eq!(r.status, 500, "{path}");
        assert_eq!(other.roundtrip(&get("/id/2")).text(), "id 2", "after {path}");
        let mut fresh = Client::connect(addr);
        assert_eq!(fresh.roundtrip(&get("/plaintext")).text(), "Hello, World!", "after {path}");
    }
    server.shutdown();
}

// ---------------------------------------------------------------------------
// Timeouts

fn fast_timeouts() -> Config {
    Config { header_timeout: Duration::from_secs(1), idle_timeout: Duration::from_secs(1), ..config() }
}

#[test]
fn slow_header_client_is_disconnected_without_slowing_others() {
    // Only the header timeout is short: the normal client pauses between
    // requests and must not trip the idle timeout (tested on its own).
    let server = start(Config { header_timeout: Duration::from_secs(1), ..config() });
    let addr = server.local_addr();
    let mut slow = Client::connect(addr);
    let mut dribble = slow.stream.try_clone().unwrap();
    // Long enough that it is never complete within the test.
    let head = b"GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let started = Instant::now();
    let dribbler = thread::spawn(move || {
        for byte in head {
            if dribble.write_all(std::slice::from_ref(byte)).is_err() {
                return; // Disconnected, as intended.
            }
            thread::sleep(Duration::from_millis(300));
        }
    });

    // The slow client gets a 408 (best effort) and/or end-of-stream.
    let watcher = thread::spawn(move || {
        match slow.read_response(false) {
            Ok(Some(r)) => {
                assert_eq!(r.status, 408);
                slow.expect_closed_within(Duration::from_secs(4));
            }
            Ok(None) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("slow client was not disconnected: {e}"),
        }
        started.elapsed()
    });

    // Meanwhile a normal client on the same worker is served promptly, for
    // as long as the slow one is connected (and at least 50 requests).
    let mut normal = Client::connect(addr);
    let mut worst = Duration::ZERO;
    let mut i = 0;
    while i < 50 || !watcher.is_finished() {
        let t = Instant::now();
        assert_eq!(normal.roundtrip(&get(&format!("/id/{i}"))).text(), format!("id {i}"));
        worst = worst.max(t.elapsed());
        thread::sleep(Duration::from_millis(10));
        i += 1;
        assert!(i < 1000, "slow client never disconnected");
    }
    assert!(worst < Duration::from_millis(100), "slowest of {i} responses took {worst:?}");

    let took = watcher.join().unwrap();
    assert!(took < Duration::from_millis(3500), "slow client disconnected only after {took:?}");
    dribbler.join().unwrap();
    server.shutdown();
}

#[test]
fn idle_keep_alive_connection_is_closed() {
    let server = start(fast_timeouts());
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.roundtrip(&get("/id/1")).text(), "id 1");
    let took = c.expect_closed_within(Duration::from_secs(4));
    assert!(took < Duration::from_millis(2500), "idle connection closed only after {took:?}");
    // A connection that never sends anything is idle too.
    let mut silent = Client::connect(server.local_addr());
    silent.expect_closed_within(Duration::from_secs(4));
    server.shutdown();
}

/// Sleeps until the wall clock is `fraction` of the way through a second.
/// The server's timeout sweep runs just after each wall-clock second, so
/// this places a test deterministically relative to the next sweep.
fn sleep_until_subsec(fraction: f64) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into = now.subsec_nanos() as f64 / 1e9;
    let wait = if into < fraction { fraction - into } else { 1.0 - into + fraction };
    thread::sleep(Duration::from_secs_f64(wait));
}

#[test]
fn idle_timeout_does_not_fire_early() {
    let server = start(fast_timeouts());
    let mut c = Client::connect(server.local_addr());
    // Finish a request late in a second, then pause for half the idle
    // timeout across the next sweep: the connection must survive.
    sleep_until_subsec(0.75);
    assert_eq!(c.roundtrip(&get("/id/1")).text(), "id 1");
    thread::sleep(Duration::from_millis(500));
    c.send(&get("/id/2"));
    match c.read_response(false) {
        Ok(Some(r)) => assert_eq!(r.text(), "id 2"),
        other => panic!(
            "a connection idle for 0.5 s was closed although idle_timeout is 1 s \
             (read gave {other:?})"
        ),
    }
    server.shutdown();
}

#[test]
fn header_timeout_does_not_fire_early() {
    let server = start(fast_timeouts());
    let mut c = Client::connect(server.local_addr());
    // Half a head late in a second, the rest 0.5 s later (across the next
    // sweep): half the header timeout, so it must be answered normally.
    let req = get("/id/1");
    sleep_until_subsec(0.75);
    c.send(&req[..10]);
    thread::sleep(Duration::from_millis(500));
    // A failed write means the server already gave up; read what it said.
    let wrote = c.stream.write_all(&req[10..]);
    match c.read_response(false) {
        Ok(Some(r)) if r.status == 200 && wrote.is_ok() => assert_eq!(r.text(), "id 1"),
        read => panic!(
            "a head completed 0.5 s after it started was refused although header_timeout is 1 s \
             (write: {wrote:?}, read: {:?})",
            read.map(|r| r.map(|r| (r.status, r.text().to_owned())))
        ),
    }
    server.shutdown();
}

// ---------------------------------------------------------------------------
// Connection limit

#[test]
fn connections_over_the_limit_get_503_and_existing_ones_keep_working() {
    let server = start(Config { max_connections_per_worker: 4, ..config() });
    let addr = server.local_addr();
    // A round trip on each proves the server has accepted (and counts) it.
    let mut open: Vec<Client> = (0..4).map(|_| Client::connect(addr)).collect();
    for (i, c) in open.iter_mut().enumerate() {
        assert_eq!(c.roundtrip(&get(&format!("/id/{i}"))).text(), format!("id {i}"));
    }
    let mut fifth = Client::connect(addr);
    let r = fifth.response();
    assert_eq!(r.status, 503);
    assert!(r.says_close());
    assert!(r.header("retry-after").is_some());
    fifth.expect_closed();

    for (i, c) in open.iter_mut().enumerate() {
        assert_eq!(c.roundtrip(&get(&format!("/id/{i}"))).text(), format!("id {i}"), "existing conn {i}");
    }

    // Closing one frees its slot (once the server has seen the close).
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let mut c = Client::connect(addr);
        c.send(&get("/id/9"));
        let r = c.response();
        if r.status == 200 {
            assert_eq!(r.text(), "id 9");
            break;
        }
        assert_eq!(r.status, 503);
        assert!(Instant::now() < deadline, "slot of a closed connection never freed");
        thread::sleep(Duration::from_millis(50));
    }
    server.shutdown();
}

/// A client that closes all its connections at the limit and opens new ones
/// at once (a pool being recycled, a load generator between runs) is
/// served: the old connections' closes, still queued when the new ones
/// arrive, make room before the server would refuse.
#[test]
fn connections_closed_at_the_limit_make_room_for_ones_opened_at_once() {
    const LIMIT: usize = 64;
    let server = start(Config { max_connections_per_worker: LIMIT, ..config() });
    let addr = server.local_addr();
    for round in 0..5 {
        let mut open: Vec<Client> = (0..LIMIT).map(|_| Client::connect(addr)).collect();
        for c in &mut open {
            c.send(&get("/id/1"));
        }
        for (i, c) in open.iter_mut().enumerate() {
            let r = c.response();
            assert_eq!(r.status, 200, "round {round}, connection {i} of {LIMIT}: {:?}", r.text());
        }
        drop(open);
    }
    server.shutdown();
}

// ---------------------------------------------------------------------------
// Graceful shutdown

#[test]
fn shutdown_finishes_in_flight_requests_then_refuses_connections() {
    let server = start(config());
    let addr: SocketAddr = server.local_addr();
    let mut busy = Client::connect(addr);
    let mut idle = Client::connect(addr);
    assert_eq!(idle.roundtrip(&get("/id/1")).text(), "id 1");
    busy.send(&get("/sleep/500"));
    // Let the server start the handler before the signal.
    thread::sleep(Duration::from_millis(100));

    let stopper = thread::spawn(move || {
        let started = Instant::now();
        server.shutdown();
        started.elapsed()
    });

    let r = busy.response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "slept 500");
    busy.expect_closed();
    // Idle connections are dropped rather than waited for.
    idle.expect_closed();
    let took = stopper.join().unwrap();
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    let refused = TcpStream::connect(addr);
    assert!(refused.is_err(), "connection accepted after shutdown");
}

/// The worker's shutdown path promises that in-flight requests finish with
/// `Connection: close`, so clients do not send another request into a
/// connection that is about to close.
#[test]
fn in_flight_response_at_shutdown_says_connection_close() {
    let server = start(config());
    let mut busy = Client::connect(server.local_addr());
    busy.send(&get("/sleep/400"));
    thread::sleep(Duration::from_millis(100));
    let stopper = thread::spawn(move || server.shutdown());
    let r = busy.response();
    assert_eq!(r.text(), "slept 400");
    stopper.join().unwrap();
    assert!(r.says_close(), "in-flight response during shutdown lacks Connection: close: {:?}", r.headers);
}

/// A handler that blocks its worker's thread keeps that worker from ever
/// seeing the shutdown signal. Stopping must still end, a moment after the
/// shutdown timeout, so a server process exits on SIGTERM and a test whose
/// server hangs fails instead of hanging with it.
#[test]
fn shutdown_gives_up_on_a_worker_whose_thread_is_blocked() {
    const BLOCKED_FOR: Duration = Duration::from_secs(30);
    let config = Config { shutdown_timeout: Duration::from_millis(300), ..config() };
    let server = Server::with_config(config)
        .spawn("127.0.0.1:0", |_| async {
            common::test_router().get("/block", || {
                thread::sleep(BLOCKED_FOR);
                "unblocked"
            })
        })
        .expect("test server starts");
    let mut blocked = Client::connect(server.local_addr());
    blocked.send(&get("/block"));
    // Let the worker enter the handler.
    thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    server.shutdown();
    let took = started.elapsed();
    // 300 ms of shutdown timeout and the 2 s margin, with room for a slow
    // machine, and far below the 30 s the thread stays blocked.
    assert!(took >= Duration::from_secs(2), "shutdown returned after {took:?}, before its margin");
    assert!(took < Duration::from_secs(10), "shutdown took {took:?} with a blocked worker");
}
