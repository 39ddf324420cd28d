//! Micro-benchmarks of the per-request wire-format work: head parsing, the
//! `Date` block, response building and chunked decoding.
//!
//! Run with `cargo bench -p peregrine --bench http`. Measurement times are
//! kept short so the whole file runs in well under a minute; these numbers
//! are for spotting regressions of a few percent or more, not for
//! publication.

use std::hint::black_box;
use std::time::{Duration, SystemTime};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine::http::chunked::ChunkedDecoder;
use peregrine::http::date::date_block;
use peregrine::http::parse::{header_slots, parse_head, HeadLimits};
use peregrine::response::Response;
use serde::Serialize;

/// The server's default limits.
const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 16 * 1024, max_headers: 100 };

/// A TechEmpower plaintext request exactly as wrk sends it.
const TFB_PLAINTEXT: &[u8] = b"GET /plaintext HTTP/1.1\r\n\
Host: localhost:8080\r\n\
Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\n\
Connection: keep-alive\r\n\r\n";

/// The TFB plaintext test pipelines 16 requests per write.
const PIPELINE_DEPTH: usize = 16;

/// A browser-like request with 20 header fields (Host included).
fn twenty_headers() -> Vec<u8> {
    let mut req = b"GET /api/items?page=2&sort=name HTTP/1.1\r\nHost: example.com\r\n".to_vec();
    for i in 1..20 {
        req.extend_from_slice(format!("X-Header-{i:02}: some-moderately-long-value-{i}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req
}

/// Parses every head in `buf` (none of them has a body), returning how many
/// there were, the way the connection loop walks a pipelined read.
fn parse_all(buf: &[u8]) -> usize {
    let mut rest = buf;
    let mut count = 0;
    while !rest.is_empty() {
        let mut slots = header_slots();
        let head = parse_head(rest, &mut slots, &LIMITS).unwrap().unwrap();
        black_box(&head);
        rest = &rest[head.len..];
        count += 1;
    }
    count
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");

    group.throughput(Throughput::Elements(1));
    group.bench_function("tfb_plaintext", |b| b.iter(|| parse_all(black_box(TFB_PLAINTEXT))));

    let pipelined = TFB_PLAINTEXT.repeat(PIPELINE_DEPTH);
    group.throughput(Throughput::Elements(PIPELINE_DEPTH as u64));
    group.bench_function("pipelined_16", |b| {
        b.iter(|| assert_eq!(parse_all(black_box(&pipelined)), PIPELINE_DEPTH))
    });

    let many = twenty_headers();
    group.throughput(Throughput::Elements(1));
    group.bench_function("headers_20", |b| b.iter(|| parse_all(black_box(&many))));

    group.finish();
}

fn date(c: &mut Criterion) {
    let mut group = c.benchmark_group("date");
    // What the once-a-second timer does...
    group.bench_function("format_block", |b| b.iter(|| date_block(black_box(SystemTime::now()))));
    // ...versus what every response does instead: append the cached block.
    let cached = date_block(SystemTime::now());
    let mut out = Vec::with_capacity(256);
    group.bench_function("copy_cached_block", |b| {
        b.iter(|| {
            out.clear();
            out.extend_from_slice(black_box(&cached));
            black_box(&out);
        })
    });
    group.finish();
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// `ResponseWriter::new` is crate-private, so the fast path that writes a
/// response straight into the output buffer cannot be driven from here.
/// These measure the public pieces instead: building the owned `Response`
/// (what async handlers return) and the JSON serialization the `Json` fast
/// path performs into the output buffer.
fn writer(c: &mut Criterion) {
    let mut group = c.benchmark_group("writer");
    group.bench_function("owned_plaintext", |b| b.iter(|| Response::text(black_box("Hello, World!"))));
    group.bench_function("owned_json", |b| {
        b.iter(|| Response::json(black_box(&Message { message: "Hello, World!" })))
    });
    let mut out = Vec::with_capacity(256);
    group.bench_function("json_body_in_place", |b| {
        b.iter(|| {
            out.clear();
            serde_json::to_writer(&mut out, black_box(&Message { message: "Hello, World!" })).unwrap();
            black_box(&out);
        })
    });
    group.finish();
}

/// A chunked encoding of `total` bytes in chunks of `chunk` bytes.
fn chunked_body(total: usize, chunk: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(total + total / chunk * 8 + 5);
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk);
        body.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        body.extend((0..n).map(|i| b'a' + (i % 26) as u8));
        body.extend_from_slice(b"\r\n");
        left -= n;
    }
    body.extend_from_slice(b"0\r\n\r\n");
    body
}

fn chunked(c: &mut Criterion) {
    const TOTAL: usize = 64 * 1024;
    let mut group = c.benchmark_group("chunked");
    group.throughput(Throughput::Bytes(TOTAL as u64));
    // Typical client chunking, and a pathological small-chunk body where the
    // per-chunk state machine dominates.
    for (name, chunk) in [("64k_in_4k_chunks", 4096), ("64k_in_64b_chunks", 64)] {
        let body = chunked_body(TOTAL, chunk);
        // One reused output buffer, as a connection's body buffer is: a
        // fresh one per iteration would mostly measure page faults.
        let mut out = Vec::with_capacity(TOTAL);
        group.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                let mut decoder = ChunkedDecoder::new(1 << 20);
                let p = decoder.decode(black_box(&body), |c| out.extend_from_slice(c)).unwrap();
                assert!(p.done && out.len() == TOTAL);
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = parse, date, writer, chunked
}
criterion_main!(benches);
