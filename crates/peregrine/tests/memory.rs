//! Memory a burst of large requests used goes back to the system within a
//! few seconds, with the default allocator settings.
//!
//! Its own test binary: it reads the process's resident set size, which
//! tests running beside it in the same process would disturb.

mod common;

use std::time::{Duration, Instant};

use common::{config, post, start, Client};

/// The process's resident set size in bytes (`VmRSS`).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// 48 connections at once each echo a 900 KB body: about 90 MB in flight
/// (the body read, the body given to the handler, the echoed response).
fn burst(addr: std::net::SocketAddr) {
    let body = vec![7u8; 900_000];
    let threads: Vec<_> = (0..48)
        .map(|_| {
            let req = post("/echo", &body);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let r = c.roundtrip(&req);
                assert_eq!((r.status, r.body.len()), (200, 900_000));
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn memory_freed_after_a_burst_goes_back_to_the_system() {
    let server = start(config());
    let addr = server.local_addr();
    // The first burst's blocks are mapped on their own (glibc's mmap
    // threshold starts at 128 KiB) and raise that threshold as they are
    // freed; the second burst's come from the heap, which glibc keeps.
    burst(addr);
    burst(addr);
    let after_burst = rss();
    // The server checks once a second.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut now = after_burst;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        now = rss();
        if now + (32 << 20) < after_burst {
            break;
        }
    }
    assert!(
        now + (32 << 20) < after_burst,
        "RSS {} MiB right after the burst, still {} MiB up to 5 s later",
        after_burst >> 20,
        now >> 20
    );
    server.shutdown();
}
