//! The whole connection state machine, fed arbitrary bytes split at
//! arbitrary points.
//!
//! Input layout: byte 0 is the number of cuts (mod 16), then two bytes per
//! cut (a little-endian offset into the rest, mod its length), then the
//! bytes the client sends. A cut makes the server see a segment boundary
//! there: it reads, runs and answers everything before it first.
//!
//! Checked:
//! - no panic, and the connection ends once the client closes (no hang);
//! - the server's output does not depend on where the input was cut (the
//!   interim `100 Continue`, whose timing legitimately depends on whether
//!   the body had arrived yet, is removed before comparing);
//! - the output is a sequence of well-formed responses, none of them a 500
//!   (no handler here fails).

#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use peregrine::fuzzing::ConnectionHarness;
use peregrine::{Body, Config, Content, Json, Path, Query, Router};

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

fn router() -> Router {
    Router::new()
        .get("/plaintext", || Content("text/plain", "Hello, World!"))
        .get("/json", || Json(serde_json::json!({ "message": "Hello, World!" })))
        .get("/p/{a}/{b}", |Path((a, b)): Path<(String, String)>| format!("{a}|{b}"))
        .get("/n/{n}", |Path(n): Path<u32>| format!("{n}"))
        .get("/files/{*rest}", |Path(rest): Path<String>| rest)
        .get("/q", |Query(q): Query<BTreeMap<String, String>>| format!("{q:?}"))
        .get_async("/async/{n}", |Path(n): Path<u8>| async move { format!("async {n}") })
        .post("/echo", |body: Vec<u8>| Content("application/octet-stream", body))
        .post("/json", |Json(v): Json<serde_json::Value>| Json(v))
        .post_stream("/upload", |body: Body| async move { body.count().await.map(|n| n.to_string()) })
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        // Small limits, so short inputs reach them.
        let config = Config {
            max_head_bytes: 1024,
            max_headers: 16,
            max_body_bytes: 2048,
            max_stream_body_bytes: 4096,
            read_buffer_bytes: 4096,
            ..Config::default()
        };
        Harness(ConnectionHarness::new(config, router()))
    })
}

/// The harness lives on libFuzzer's single thread only.
struct Harness(ConnectionHarness<()>);
// SAFETY: libFuzzer runs the target on one thread, the only one that ever
// touches the harness (its `Rc`s and runtime never cross threads).
unsafe impl Sync for Harness {}
// SAFETY: as above; the value is created and used on that one thread.
unsafe impl Send for Harness {}

fn without_continue(mut out: Vec<u8>) -> Vec<u8> {
    while let Some(at) = memchr::memmem::find(&out, CONTINUE) {
        out.drain(at..at + CONTINUE.len());
    }
    out
}

/// Walks `out` as consecutive responses. A response to `HEAD` carries a
/// `Content-Length` but no body, so when skipping the body does not land on
/// the next status line, the response is taken as bodiless.
fn check_responses(mut out: &[u8]) {
    while !out.is_empty() {
        assert!(out.starts_with(b"HTTP/1.1 "), "not a status line: {:?}", String::from_utf8_lossy(out));
        let end = memchr::memmem::find(out, b"\r\n\r\n").expect("response head ends");
        let head = std::str::from_utf8(&out[..end]).expect("response head is ASCII");
        let status: u16 = head[9..12].parse().expect("three-digit status");
        assert!((200..600).contains(&status) && status != 500, "status {status}: {head}");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .expect("every response is length-delimited")
            .parse()
            .expect("numeric Content-Length");
        let rest = &out[end + 4..];
        out = if rest.len() >= length && (rest.len() == length || rest[length..].starts_with(b"HTTP/1.1 ")) {
            &rest[length..]
        } else {
            assert!(rest.is_empty() || rest.starts_with(b"HTTP/1.1 "), "truncated body: {head}");
            rest
        };
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cuts, rest)) = data.split_first() else { return };
    let cuts = usize::from(cuts % 16);
    if rest.len() < cuts * 2 {
        return;
    }
    let (offsets, input) = rest.split_at(cuts * 2);
    let mut points: Vec<usize> = offsets
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (input.len() + 1))
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut segments = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for p in points {
        segments.push(&input[start..p]);
        start = p;
    }
    segments.push(&input[start..]);

    let harness = &harness().0;
    let whole = without_continue(harness.run(&[input]));
    let split = without_continue(harness.run(&segments));
    assert!(
        whole == split,
        "output depends on segmentation {:?}:\nwhole: {:?}\nsplit: {:?}",
        segments.iter().map(|s| s.len()).collect::<Vec<_>>(),
        String::from_utf8_lossy(&whole),
        String::from_utf8_lossy(&split)
    );
    check_responses(&whole);
});
