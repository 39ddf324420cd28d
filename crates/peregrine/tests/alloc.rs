//! The hot path allocates nothing: once a keep-alive connection is warm,
//! serving `/plaintext` and `/json` (pipelined or not) makes zero heap
//! allocations on the worker thread.
//!
//! A counting global allocator counts only on threads that marked
//! themselves as the worker (from the app factory, which runs on the worker
//! thread), and only while armed. The client side of the test runs on other
//! threads and may allocate freely.
//!
//! The worker also rebuilds its `Date` header once a second; that is
//! per-second work, not per-request work, so measurements are taken in
//! rounds that start just after a second boundary and are discarded if
//! they cross the next one.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{get, Client, Message};
use peregrine::{Config, Content, Json, Router, Server};

struct Counting;

static ARMED: AtomicBool = AtomicBool::new(false);
static WORKER_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    // `const` initialisation and no destructor: reading it never allocates
    // or registers anything, so it is safe inside the allocator.
    static IS_WORKER: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if ARMED.load(Ordering::Relaxed) && IS_WORKER.try_with(Cell::get).unwrap_or(false) {
        WORKER_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to `System`; counting touches
// only an atomic and a const thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PIPELINE: usize = 16;

/// One unit of traffic: `/plaintext` and `/json` alternately, either one
/// request per round trip or a pipelined batch of 16.
fn exchange(c: &mut Client, pipelined: bool, n: usize) {
    let paths = ["/plaintext", "/json"];
    if pipelined {
        let batch: Vec<u8> = (0..n).flat_map(|i| get(paths[i % 2])).collect();
        c.send(&batch);
        for i in 0..n {
            check(&c.response(), paths[i % 2]);
        }
    } else {
        for i in 0..n {
            check(&c.roundtrip(&get(paths[i % 2])), paths[i % 2]);
        }
    }
}

fn check(r: &common::Response, path: &str) {
    assert_eq!(r.status, 200);
    let want = if path == "/json" { r#"{"message":"Hello, World!"}"# } else { "Hello, World!" };
    assert_eq!(r.text(), want);
}

fn wall_second() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// Waits until 20 ms past the next wall-clock second: the worker's date
/// tick (1 ms past the second) has run, and nearly a second is left.
fn just_after_second_boundary() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let to_next = Duration::from_secs(1) - Duration::from_nanos(u64::from(now.subsec_nanos()));
    std::thread::sleep(to_next + Duration::from_millis(20));
}

#[test]
fn warm_connection_serves_without_allocating() {
    let server = Server::with_config(Config { workers: 1, ..Config::default() })
        .spawn("127.0.0.1:0", |_worker| {
            // The factory runs on the worker thread: mark it for counting.
            IS_WORKER.with(|w| w.set(true));
            async {
                Router::new()
                    .get("/plaintext", || Content("text/plain", "Hello, World!"))
                    .get("/json", || Json(Message { message: "Hello, World!" }))
            }
        })
        .expect("server starts");
    let mut c = Client::connect(server.local_addr());

    // Warm-up: buffers reach their working sizes.
    exchange(&mut c, false, 50);
    for _ in 0..4 {
        exchange(&mut c, true, PIPELINE);
    }
    exchange(&mut c, false, 2);

    // 1,000 measured requests in rounds of 500: half one at a time, half
    // in pipelined batches. Each round must fit between two date ticks.
    const HALF: usize = 250;
    let (mut measured, mut allocations, mut retries) = (0, 0, 0);
    while measured < 1000 {
        just_after_second_boundary();
        let second = wall_second();
        WORKER_ALLOCATIONS.store(0, Ordering::SeqCst);
        ARMED.store(true, Ordering::SeqCst);
        exchange(&mut c, false, HALF);
        for _ in 0..(HALF / PIPELINE) {
            exchange(&mut c, true, PIPELINE);
        }
        exchange(&mut c, true, HALF % PIPELINE);
        ARMED.store(false, Ordering::SeqCst);
        if wall_second() != second {
            // The date tick may have run inside this round; measure again.
            retries += 1;
            assert!(retries < 10, "rounds keep crossing a second boundary; machine too slow?");
            continue;
        }
        measured += 2 * HALF;
        allocations += WORKER_ALLOCATIONS.load(Ordering::SeqCst);
    }
    server.shutdown();
    assert_eq!(
        allocations,
        0,
        "the worker thread made {allocations} heap allocations over {measured} warm requests \
         ({:.3} per request)",
        allocations as f64 / measured as f64
    );
}
