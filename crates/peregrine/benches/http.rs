//! Micro-benchmarks of the per-request wire-format work: head parsing, the
//! `Date` block, response building, JSON serialization (the library's
//! writer beside serde_json and sonic-rs) and chunked decoding.
//!
//! Run with `cargo bench -p peregrine --bench http`. Measurement times are
//! kept short so the whole file runs in well under a minute; these numbers
//! are for spotting regressions of a few percent or more, not for
//! publication.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use peregrine::fuzzing::date_block;
use peregrine::fuzzing::ChunkedDecoder;
use peregrine::fuzzing::{header_slots, parse_head, parse_head_using, HeadLimits, ParserForm};
use peregrine::response::Response;
use serde::{Deserialize, Serialize};

/// Counts allocations so each benchmark can report what it allocates per
/// iteration (`peregrine-lab ab` shows it beside the times).
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are plain atomics and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: as for `dealloc`, and `new_size` comes from the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `routine` outside criterion's timing to count its allocations,
/// writes them where `peregrine-lab ab` looks (the `alloc.json` protocol in
/// its `ab` module docs), then benchmarks it.
fn bench(group: &mut BenchmarkGroup<'_, WallTime>, group_name: &str, name: &str, mut routine: impl FnMut()) {
    const RUNS: u64 = 2_000;
    routine();
    let (allocs, bytes) = (ALLOCS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed));
    for _ in 0..RUNS {
        routine();
    }
    let allocs = (ALLOCS.load(Ordering::Relaxed) - allocs) as f64 / RUNS as f64;
    let bytes = (BYTES.load(Ordering::Relaxed) - bytes) as f64 / RUNS as f64;
    // Where criterion writes: $CRITERION_HOME, else the target directory,
    // which holds this executable at `<target>/<profile>/deps/<bench>`.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok().and_then(|exe| exe.ancestors().nth(3).map(PathBuf::from)));
    let home = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| target.unwrap_or_else(|| PathBuf::from("target")).join("criterion"));
    let dir = home.join(group_name).join(name);
    let json = format!("{{\"bytes_per_iter\": {bytes}, \"allocs_per_iter\": {allocs}}}\n");
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("alloc.json"), json))
    {
        eprintln!("could not record allocations for {group_name}/{name}: {e}");
    }
    group.bench_function(name, |b| b.iter(&mut routine));
}

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
    parse_all_with(None, buf)
}

/// [`parse_all`] with the parser's compiled `form`, or the one the server
/// runs.
fn parse_all_with(form: Option<ParserForm>, buf: &[u8]) -> usize {
    let mut rest = buf;
    let mut count = 0;
    while !rest.is_empty() {
        let mut slots = header_slots();
        let head = match form {
            Some(form) => parse_head_using(form, rest, &mut slots, &LIMITS),
            None => parse_head(rest, &mut slots, &LIMITS),
        };
        let head = head.unwrap().unwrap();
        black_box(&head);
        rest = &rest[head.len..];
        count += 1;
    }
    count
}

fn parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("parse");

    group.throughput(Throughput::Elements(1));
    bench(&mut group, "parse", "tfb_plaintext", || {
        black_box(parse_all(black_box(TFB_PLAINTEXT)));
    });

    let pipelined = TFB_PLAINTEXT.repeat(PIPELINE_DEPTH);
    group.throughput(Throughput::Elements(PIPELINE_DEPTH as u64));
    bench(&mut group, "parse", "pipelined_16", || {
        assert_eq!(parse_all(black_box(&pipelined)), PIPELINE_DEPTH)
    });

    let many = twenty_headers();
    group.throughput(Throughput::Elements(1));
    bench(&mut group, "parse", "headers_20", || {
        black_box(parse_all(black_box(&many)));
    });
    group.finish();

    // Each compiled form of the parser this CPU runs, side by side (the
    // server runs the first), in wall time: callgrind counts only what
    // valgrind can run, and it does not emulate AVX-512, so a form built on
    // it can be judged only here and under load.
    let mut group = c.benchmark_group("parse_forms");
    for form in ParserForm::available() {
        let name = format!("{form:?}").to_lowercase();
        group.throughput(Throughput::Elements(PIPELINE_DEPTH as u64));
        bench(&mut group, "parse_forms", &format!("pipelined_16/{name}"), || {
            assert_eq!(parse_all_with(Some(form), black_box(&pipelined)), PIPELINE_DEPTH)
        });
        group.throughput(Throughput::Elements(1));
        bench(&mut group, "parse_forms", &format!("tfb_plaintext/{name}"), || {
            black_box(parse_all_with(Some(form), black_box(TFB_PLAINTEXT)));
        });
        bench(&mut group, "parse_forms", &format!("headers_20/{name}"), || {
            black_box(parse_all_with(Some(form), black_box(&many)));
        });
    }
    group.finish();
}

fn date(c: &mut Criterion) {
    let mut group = c.benchmark_group("date");
    // What the once-a-second timer does...
    bench(&mut group, "date", "format_block", || {
        black_box(date_block(black_box(SystemTime::now())));
    });
    // ...versus what every response does instead: append the cached block.
    let cached = date_block(SystemTime::now());
    let mut out = Vec::with_capacity(256);
    bench(&mut group, "date", "copy_cached_block", || {
        out.clear();
        out.extend_from_slice(black_box(&cached));
        black_box(&out);
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
/// (what async handlers return). The JSON the `Json` fast path writes into
/// the output buffer is the `json` group's.
fn writer(c: &mut Criterion) {
    let mut group = c.benchmark_group("writer");
    bench(&mut group, "writer", "owned_plaintext", || {
        black_box(Response::text(black_box("Hello, World!")));
    });
    bench(&mut group, "writer", "owned_json", || {
        black_box(Response::json(black_box(&Message { message: "Hello, World!" })));
    });
    group.finish();
}

/// An item of HttpArena's `json` profile, as `peregrine-tfb`'s dataset
/// holds it.
#[derive(Serialize, Deserialize)]
struct Item {
    id: i64,
    name: String,
    category: String,
    price: i64,
    quantity: i64,
    active: bool,
    tags: Vec<String>,
    rating: Rating,
}

#[derive(Serialize, Deserialize)]
struct Rating {
    score: i64,
    count: i64,
}

/// The profile's fifty items: `peregrine-tfb`'s copy of HttpArena's
/// dataset (7,676 bytes of compact JSON).
fn arena_items() -> Vec<Item> {
    serde_json::from_str(include_str!("../../peregrine-tfb/data/dataset.json"))
        .expect("peregrine-tfb's dataset parses")
}

/// The library's JSON writer against serde_json and sonic-rs 0.5.10 (a
/// SIMD serializer), each into a reused buffer: TFB's message and
/// HttpArena's fifty items. All three must write the same bytes, which is
/// checked before timing. Exact user-space instructions per serialization
/// (callgrind, 2026-11-29, a scratch program serializing the same two):
/// the message 271 (sonic-rs 306, serde_json 396), the items 104,520
/// (sonic-rs 129,138, serde_json 132,287). This benchmark's times agreed:
/// the message 12.3 ns (sonic-rs 20.5, serde_json 19.2), the items 5.2 µs
/// (sonic-rs 9.0, serde_json 7.7). sonic-rs wins on neither, so the library
/// keeps its own writer.
fn json(c: &mut Criterion) {
    let mut group = c.benchmark_group("json");
    let mut out = Vec::with_capacity(16 * 1024);
    json_payload(&mut group, &mut out, "message", &Message { message: "Hello, World!" });
    json_payload(&mut group, &mut out, "items", &arena_items());
    group.finish();
}

/// One payload of the `json` group: the same-bytes check, then each
/// serializer timed as `{payload}_{serializer}`.
fn json_payload<T: Serialize>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    out: &mut Vec<u8>,
    payload: &str,
    value: &T,
) {
    let write = |out: &mut Vec<u8>, serializer: &str| {
        out.clear();
        match serializer {
            "peregrine" => peregrine::fuzzing::write_json(out, black_box(value)).unwrap(),
            "serde_json" => serde_json::to_writer(&mut *out, black_box(value)).unwrap(),
            "sonic_rs" => sonic_rs::to_writer(&mut *out, black_box(value)).unwrap(),
            _ => unreachable!("a serializer this benchmark does not list"),
        }
    };
    // The comparison is fair only if all three write the same JSON.
    write(out, "peregrine");
    let ours = out.clone();
    for other in ["serde_json", "sonic_rs"] {
        write(out, other);
        assert_eq!(*out, ours, "{other} wrote other bytes than the library for {payload}");
    }
    for serializer in ["peregrine", "serde_json", "sonic_rs"] {
        bench(group, "json", &format!("{payload}_{serializer}"), || {
            write(out, serializer);
            black_box(&*out);
        });
    }
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
        bench(&mut group, "chunked", name, || {
            out.clear();
            let mut decoder = ChunkedDecoder::new(1 << 20);
            let p = decoder.decode(black_box(&body), |c| out.extend_from_slice(c)).unwrap();
            assert!(p.done && out.len() == TOTAL);
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
    targets = parse, date, writer, json, chunked
}
criterion_main!(benches);
