//! The compression middleware over real sockets: negotiation, every coding
//! decoded back, what is left alone, and streamed bodies compressed as they
//! are produced.

mod common;

use std::io::Read;
use std::time::Duration;

use common::{config, Client};
use futures_util::stream;
use peregrine::middleware::compression;
use peregrine::{Content, Response, Router, Server, ServerHandle};

fn big_json() -> String {
    let items: Vec<String> = (0..500).map(|i| format!("{{\"id\":{i},\"name\":\"item {i}\"}}")).collect();
    format!("[{}]", items.join(","))
}

fn router() -> Router {
    Router::new()
        .get("/json", || Content("application/json", big_json()))
        .get("/small", || Content("application/json", "{\"ok\":true}"))
        .get("/png", || Content("image/png", vec![7u8; 4096]))
        .get("/no-transform", || {
            Response::with_body("text/plain", big_json().into_bytes()).header("Cache-Control", "no-transform")
        })
        .get("/encoded", || {
            Response::with_body("text/plain", big_json().into_bytes()).header("Content-Encoding", "gzip")
        })
        .get("/stream", || async {
            let chunks = stream::unfold(0, |i| async move {
                if i == 3 {
                    return None;
                }
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Some((Ok::<_, std::io::Error>(format!("part {i} {}\n", "x".repeat(300))), i + 1))
            });
            Response::stream("text/plain", chunks)
        })
        .layer(compression())
}

fn start() -> ServerHandle {
    Server::with_config(config()).spawn("127.0.0.1:0", |_| async { router() }).expect("test server starts")
}

fn get(c: &mut Client, path: &str, accept: Option<&str>) -> common::Response {
    let accept = accept.map(|a| format!("Accept-Encoding: {a}\r\n")).unwrap_or_default();
    c.roundtrip(format!("GET {path} HTTP/1.1\r\nHost: x\r\n{accept}\r\n").as_bytes())
}

fn decode(coding: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "gzip" => {
            flate2::read::GzDecoder::new(body).read_to_end(&mut out).expect("valid gzip");
        }
        "br" => brotli::BrotliDecompress(&mut &body[..], &mut out).expect("valid brotli"),
        "zstd" => out = zstd::decode_all(body).expect("valid zstd"),
        other => panic!("unexpected coding {other}"),
    }
    out
}

#[test]
fn each_accepted_coding_is_used_and_decodes_to_the_body() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let plain = get(&mut c, "/json", None);
    assert_eq!(plain.header("content-encoding"), None, "no Accept-Encoding, no coding");
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.text(), big_json());
    for (accept, coding) in [
        ("gzip", "gzip"),
        ("gzip, br", "br"),
        ("br;q=0.5, gzip;q=0.8", "gzip"),
        ("zstd", "zstd"),
        ("*", "zstd"),
        ("zstd;q=0, *", "br"),
        ("zstd;q=0, br;q=0, *", "gzip"),
    ] {
        let r = get(&mut c, "/json", Some(accept));
        assert_eq!(r.header("content-encoding"), Some(coding), "{accept}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{accept}");
        assert!(r.body.len() < big_json().len() / 3, "{accept}: {} bytes", r.body.len());
        assert_eq!(decode(coding, &r.body), big_json().into_bytes(), "{accept}");
    }
    for refused in ["identity", "gzip;q=0, br;q=0, zstd;q=0", "identity;q=0", "deflate"] {
        let r = get(&mut c, "/json", Some(refused));
        assert_eq!(r.header("content-encoding"), None, "{refused}");
        assert_eq!(r.text(), big_json(), "{refused}");
    }
    server.shutdown();
}

#[test]
fn small_precompressed_and_no_transform_bodies_are_left_alone() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    for path in ["/small", "/png", "/no-transform"] {
        let r = get(&mut c, path, Some("gzip, br"));
        assert_eq!(r.header("content-encoding"), None, "{path}");
    }
    assert_eq!(get(&mut c, "/png", Some("gzip")).header("vary"), None);
    let r = get(&mut c, "/encoded", Some("br"));
    assert_eq!(r.header("content-encoding"), Some("gzip"), "an existing coding is kept, not doubled");
    server.shutdown();
}

#[test]
fn a_streamed_body_is_compressed_chunk_by_chunk() {
    let server = start();
    let mut raw = std::net::TcpStream::connect(server.local_addr()).unwrap();
    std::io::Write::write_all(&mut raw, b"GET /stream HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        .unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The first part must arrive, compressed and decodable, while the
    // handler still sleeps (200 ms) before the second.
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let first_part = loop {
        let n = raw.read(&mut buf).expect("the head and first chunk arrive before the stream ends");
        got.extend_from_slice(&buf[..n]);
        let Some(head_end) = common::find(&got, b"\r\n\r\n") else { continue };
        let body = &got[head_end + 4..];
        let Some(line_end) = common::find(body, b"\r\n") else { continue };
        let size = usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap(), 16).unwrap();
        if body.len() >= line_end + 2 + size {
            break body[line_end + 2..line_end + 2 + size].to_vec();
        }
    };
    assert!(started.elapsed() < Duration::from_millis(180), "{:?}", started.elapsed());
    let head = String::from_utf8_lossy(&got).into_owned();
    assert!(head.contains("Content-Encoding: gzip") && head.contains("Transfer-Encoding: chunked"), "{head}");
    let mut decoder = flate2::write::GzDecoder::new(Vec::new());
    std::io::Write::write_all(&mut decoder, &first_part).unwrap();
    std::io::Write::flush(&mut decoder).unwrap();
    let decoded = String::from_utf8_lossy(decoder.get_ref()).into_owned();
    assert!(decoded.starts_with("part 0 "), "the first chunk decodes on its own: {decoded:?}");
    drop(raw);
    let mut c = Client::connect(server.local_addr());
    let r = get(&mut c, "/stream", Some("gzip"));
    let plain = String::from_utf8(decode("gzip", &r.body)).unwrap();
    assert_eq!(plain.lines().count(), 3);
    assert!(plain.starts_with("part 0 ") && plain.contains("part 2 "), "{plain}");
    server.shutdown();
}
