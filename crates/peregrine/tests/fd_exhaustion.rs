//! Out of file descriptors: `accept` fails with `EMFILE`, the connection
//! waits in the backlog, and the server must pause accepting (not spin,
//! not stop) and resume once descriptors are free again.
//!
//! The open-file limit is the process's, so this binary holds this one
//! test only: it lowers its own soft limit after the server started, with
//! its client sockets created beforehand (connecting one takes no new
//! descriptor; the server's `accept` does).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{config, start};

fn soft_limit() -> (u64, u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid rlimit that getrlimit fills.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    (limit.rlim_cur, limit.rlim_max)
}

fn set_soft_limit(soft: u64) {
    let (_, hard) = soft_limit();
    let wanted = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: `wanted` is a valid rlimit; it concerns this process only.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) }, 0);
}

fn open_fds() -> Vec<u64> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Sends a request on `stream` and waits up to `wait` for the answer.
fn answered(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 512];
    match stream.read(&mut buf) {
        Ok(n) if n > 0 => {
            assert!(buf.starts_with(b"HTTP/1.1 200 OK\r\n"), "{:?}", String::from_utf8_lossy(&buf[..n]));
            true
        }
        _ => false,
    }
}

const REQUEST: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\n";

#[test]
fn accepting_pauses_when_out_of_descriptors_and_resumes_when_some_free_up() {
    let server = start(config());
    let addr = server.local_addr();
    let sockets: Vec<socket2::Socket> = (0..40)
        .map(|_| socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap())
        .collect();
    let (original, _) = soft_limit();
    // Room for exactly `room` more descriptors: the lowest free numbers
    // below the limit are what the kernel hands out.
    let room = 6;
    let open = open_fds();
    let limit = (0..).find(|&l| l - open.iter().filter(|&&fd| fd < l).count() as u64 == room).unwrap();
    set_soft_limit(limit);

    let mut served = Vec::new();
    let mut stalled = None;
    // Sockets not yet used stay open until the end: closing them would
    // free descriptors.
    let mut unused = sockets.into_iter();
    for socket in unused.by_ref() {
        socket.connect(&addr.into()).expect("connect (the backlog takes it)");
        let mut stream: TcpStream = socket.into();
        stream.write_all(REQUEST).unwrap();
        if answered(&mut stream, Duration::from_millis(700)) {
            served.push(stream);
        } else {
            stalled = Some(stream);
            break;
        }
    }
    let mut stalled = stalled.expect("the server never ran out of descriptors");
    // (One more than `room`: listing /proc/self/fd held a descriptor.)
    assert!(
        !served.is_empty() && served.len() <= room as usize + 1,
        "{} served before running out",
        served.len()
    );

    // Still out: the waiting client stays unanswered, and the server is
    // not spinning on the failing accept meanwhile (it answers its open
    // connections at once).
    let t = Instant::now();
    served[0].write_all(REQUEST).unwrap();
    assert!(answered(&mut served[0], Duration::from_secs(2)), "an open connection went unanswered");
    assert!(t.elapsed() < Duration::from_millis(200));
    assert!(!answered(&mut stalled, Duration::from_millis(300)), "answered with no descriptor free");

    // Two connections close: accepting resumes, the waiting client is
    // answered promptly.
    served.truncate(served.len().saturating_sub(2));
    let t = Instant::now();
    assert!(answered(&mut stalled, Duration::from_secs(3)), "accepting did not resume");
    assert!(t.elapsed() < Duration::from_secs(1), "resumed only after {:?}", t.elapsed());

    // With the limit back, every further connection is served.
    set_soft_limit(original);
    for _ in 0..5 {
        let mut fresh = TcpStream::connect(addr).unwrap();
        fresh.write_all(REQUEST).unwrap();
        assert!(answered(&mut fresh, Duration::from_secs(2)));
    }
    drop((served, unused));
    server.shutdown();
}
