//! Both event loops, epoll (the default, and the fallback where the kernel
//! refuses io_uring) and io_uring (`Config::event_loop`), over real
//! sockets: the same bytes for the same requests, and the io_uring
//! transport's own edges (more input at once than its shared receive
//! buffers hold, a connection that stops reading, connections dropped with
//! output still in flight or with input half read).
//!
//! The rest of the suite runs on the default; `scripts/test` runs the
//! HTTP, pipelining, strictness, HTTP/2 flood and WebSocket suites once
//! more on io_uring (`PEREGRINE_TEST_IO_URING=1`, read by
//! `common::config`).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use common::{get, post, Client};
use peregrine::{Config, Content, EventLoop, Server, ServerHandle};

/// Held by every test here, one at a time, so that the io_uring instances
/// this process has are exactly those of the test running.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This process's io_uring instances (the servers run in it): each
/// descriptor with the completions posted on it so far (`CqTail` in its
/// fdinfo).
fn rings() -> Vec<(String, u64)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").flatten() {
        let is_ring =
            std::fs::read_link(entry.path()).is_ok_and(|t| t.to_string_lossy() == "anon_inode:[io_uring]");
        if !is_ring {
            continue;
        }
        let fd = entry.file_name().to_string_lossy().into_owned();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
        let tail = info.lines().find_map(|l| l.strip_prefix("CqTail:")).and_then(|v| v.trim().parse().ok());
        if let Some(tail) = tail {
            found.push((fd, tail));
        }
    }
    found
}

/// Write system calls this process has made (`syscw` in /proc/self/io).
fn written_by_calls() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    io.lines().find_map(|l| l.strip_prefix("syscw:")).and_then(|v| v.trim().parse().ok()).expect("syscw")
}

fn start(event_loop: EventLoop) -> ServerHandle {
    let config = Config { workers: 1, event_loop, ..Config::default() };
    Server::with_config(config)
        .spawn("127.0.0.1:0", |_| async {
            common::test_router()
                .get("/big", || Content("application/octet-stream", big_body()))
                // Holds the worker's thread, so input piles up meanwhile.
                .get("/block", || {
                    thread::sleep(Duration::from_secs(1));
                    "unblocked"
                })
        })
        .expect("test server starts")
}

/// 3 MiB of a pattern that shows any byte out of place.
fn big_body() -> Vec<u8> {
    (0..3 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect()
}

/// Pipelined requests, a 1 MiB echo, a 3 MiB response and a streamed
/// upload on one connection, then the same on a second one: what each
/// loop answers, as (status, body) pairs.
fn exchange(addr: SocketAddr) -> Vec<(u16, Vec<u8>)> {
    let mut answers = Vec::new();
    for _ in 0..2 {
        let mut c = Client::connect(addr);
        let mut burst = Vec::new();
        for i in 0..40 {
            burst.extend(get(&format!("/id/{i}")));
        }
        c.send(&burst);
        for _ in 0..40 {
            let r = c.response();
            answers.push((r.status, r.body));
        }
        let echo: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 241) as u8).collect();
        let r = c.roundtrip(&post("/echo", &echo));
        assert_eq!(r.body.len(), echo.len());
        answers.push((r.status, r.body));
        let r = c.roundtrip(&get("/big"));
        answers.push((r.status, r.body));
        let r = c.roundtrip(&post("/upload", &vec![7u8; 300_000]));
        answers.push((r.status, r.body));
    }
    answers
}

#[test]
fn both_event_loops_answer_the_same_bytes() {
    let _serial = one_at_a_time();
    let before = rings();
    let uring = start(EventLoop::IoUring);
    // One worker, so one ring more, and the epoll server adds none.
    let with_uring = rings();
    assert_eq!(with_uring.len(), before.len() + 1, "the io_uring server set up no ring");
    let (ring, idle) = with_uring
        .into_iter()
        .find(|(fd, _)| !before.iter().any(|(old, _)| old == fd))
        .expect("the new ring");
    let epoll = start(EventLoop::Epoll);
    assert_eq!(rings().len(), before.len() + 1, "the epoll server set up a ring");
    let tail = |fd: &str| rings().into_iter().find(|(f, _)| f == fd).map(|(_, t)| t).expect("the ring");

    let from_uring = exchange(uring.local_addr());
    // Its connections' bytes went through the ring. Each connection's 4
    // MiB of responses take at least 65 sends of at most 64 KiB, and its
    // four exchanges a receive each for their first bytes (the rest of a
    // large body may be read directly, as epoll would).
    // The last connection's close reaches the ring after its last answer
    // (its end-of-stream receive completes then): wait for the tail to
    // settle, so that what the epoll server's exchange adds is its own.
    let mut after_uring = tail(&ring);
    let settle_by = Instant::now() + Duration::from_secs(5);
    loop {
        thread::sleep(Duration::from_millis(200));
        let now = tail(&ring);
        if now == after_uring || Instant::now() > settle_by {
            break;
        }
        after_uring = now;
    }
    let least = 2 * (65 + 4);
    assert!(after_uring - idle >= least, "{} completions, fewer than {least}", after_uring - idle);
    let from_epoll = exchange(epoll.local_addr());
    assert_eq!(tail(&ring), after_uring, "the epoll server's requests went through the ring");
    assert_eq!(from_uring.len(), 2 * 43);
    assert_eq!(from_uring[5], (200, b"id 5".to_vec()));
    assert_eq!(from_uring[41].1, big_body());
    assert_eq!(from_uring[42], (200, b"300000".to_vec()));
    assert!(from_uring == from_epoll, "the two event loops answered differently");
    uring.shutdown();
    epoll.shutdown();
}

/// 600 connections each send a 40 KB request while the worker is held up:
/// the io_uring completes their receives meanwhile, up to 16 KiB each,
/// more than its shared receive buffers hold (8 MiB), so receives run out
/// of buffers and must be armed again as readers give buffers back. Every
/// request still gets its own answer, intact.
#[test]
fn more_input_at_once_than_the_receive_buffers_hold_is_all_answered() {
    let _serial = one_at_a_time();
    let server = start(EventLoop::IoUring);
    let addr = server.local_addr();
    // Accepted and waiting for their next request, receives armed.
    let mut conns: Vec<Client> = (0..600)
        .map(|_| {
            let mut c = Client::connect(addr);
            assert_eq!(c.roundtrip(&get("/plaintext")).text(), "Hello, World!");
            c
        })
        .collect();
    let mut blocker = Client::connect(addr);
    blocker.send(&get("/block"));
    thread::sleep(Duration::from_millis(100));
    let bodies: Vec<Vec<u8>> =
        (0..600u32).map(|i| (0..40_000u32).map(|j| ((i + j) % 253) as u8).collect()).collect();
    for (c, body) in conns.iter_mut().zip(&bodies) {
        c.send(&post("/echo", body));
    }
    assert_eq!(blocker.response().text(), "unblocked");
    for (c, body) in conns.iter_mut().zip(&bodies) {
        let r = c.response();
        assert_eq!((r.status, r.body.len()), (200, body.len()));
        assert!(&r.body == body, "an echo came back changed");
    }
    server.shutdown();
}

/// Many large uploads at once, each a stream of 16 KiB receives: their
/// receives take every shared buffer while readers have input queued, so
/// some end with `ENOBUFS`. Armed again at once, each such receive failed
/// again in the same system call, and the ring's task, always finding a
/// new completion, never let the readers run to give buffers back: the
/// worker spun at 100% and answered nothing more, on any connection
/// (HttpArena's upload profile at 32 connections). Every upload must be
/// counted, and the server must still answer afterwards.
#[test]
fn uploads_that_take_every_receive_buffer_are_all_answered() {
    let _serial = one_at_a_time();
    for event_loop in [EventLoop::IoUring, EventLoop::Epoll] {
        let server = start(event_loop);
        let addr = server.local_addr();
        const UPLOADS: usize = 48;
        const LEN: usize = 6 * 1024 * 1024;
        let body: std::sync::Arc<Vec<u8>> = std::sync::Arc::new((0..LEN).map(|i| (i % 241) as u8).collect());
        let started = Instant::now();
        let uploaders: Vec<_> = (0..UPLOADS)
            .map(|_| {
                let body = std::sync::Arc::clone(&body);
                thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    let mut answers = Vec::new();
                    for _ in 0..2 {
                        c.send(&post("/upload", &body));
                        let r = c.response();
                        answers.push((r.status, r.text().to_string()));
                    }
                    answers
                })
            })
            .collect();
        for uploader in uploaders {
            let answers = uploader.join().expect("an upload got no answer");
            for (status, text) in answers {
                assert_eq!((status, text.as_str()), (200, LEN.to_string().as_str()), "{event_loop:?}");
            }
        }
        let mut c = Client::connect(addr);
        assert_eq!(c.roundtrip(&get("/plaintext")).text(), "Hello, World!", "{event_loop:?}");
        eprintln!("{event_loop:?}: {UPLOADS} x 2 uploads of {LEN} bytes in {:?}", started.elapsed());
        server.shutdown();
    }
}

/// A client that asks for large responses and never reads them stalls only
/// itself: on each loop, others are served meanwhile, and what the server
/// took for it stays bounded (its socket buffer plus one send).
#[test]
fn a_connection_that_stops_reading_does_not_stall_others() {
    let _serial = one_at_a_time();
    for event_loop in [EventLoop::IoUring, EventLoop::Epoll] {
        let server = start(event_loop);
        let addr = server.local_addr();
        let mut stalled = TcpStream::connect(addr).expect("connect");
        let requests: Vec<u8> = (0..20).flat_map(|_| get("/big")).collect();
        stalled.write_all(&requests).expect("send");
        // It keeps sending, too, into a server that stopped reading it.
        stalled.set_write_timeout(Some(Duration::from_millis(200))).expect("timeout");
        let flood = vec![b'x'; 64 * 1024];
        for _ in 0..64 {
            if stalled.write_all(&flood).is_err() {
                break;
            }
        }
        thread::sleep(Duration::from_millis(300));
        for _ in 0..20 {
            let mut c = Client::connect(addr);
            assert_eq!(c.roundtrip(&get("/plaintext")).text(), "Hello, World!", "{event_loop:?}");
        }
        drop(stalled);
        server.shutdown();
    }
}

/// An HTTP/2 connection that broke the protocol is drained of at most
/// 256 KiB (in 4 KiB reads) before its close. Input arriving in 5,000-byte
/// pieces, which the reader keeps up with, leaves the drain's last read
/// inside a piece with the io_uring receive still armed: its last
/// completion comes after the slot let its input go. That completion once
/// found the slot's read position past its emptied input and took the
/// worker down; the server must go on serving.
#[test]
fn a_connection_dropped_inside_a_received_piece_leaves_the_worker_serving() {
    let _serial = one_at_a_time();
    for event_loop in [EventLoop::IoUring, EventLoop::Epoll] {
        let server = start(event_loop);
        let addr = server.local_addr();
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        // The preface, an empty SETTINGS, then DATA on stream 0: a
        // connection error (RFC 9113 §6.1).
        let mut opening = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        opening.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
        opening.extend_from_slice(&[0, 0, 1, 0x0, 0, 0, 0, 0, 0, b'x']);
        s.write_all(&opening).expect("send");
        thread::sleep(Duration::from_millis(50));
        let piece = vec![0u8; 5000];
        for _ in 0..80 {
            if s.write_all(&piece).is_err() {
                break;
            }
            thread::sleep(Duration::from_millis(1));
        }
        thread::sleep(Duration::from_millis(100));
        let mut c = Client::connect(addr);
        assert_eq!(c.roundtrip(&get("/plaintext")).text(), "Hello, World!", "{event_loop:?}");
        drop(s);
        server.shutdown();
    }
}

/// Connections closed by the client with responses in flight, over and
/// over: the server frees each (no leak of slots or descriptors shows as a
/// refused or unanswered connection later) and keeps serving.
#[test]
fn connections_dropped_mid_response_are_released() {
    let _serial = one_at_a_time();
    let server = start(EventLoop::IoUring);
    let addr = server.local_addr();
    for _ in 0..200 {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(&get("/big")).expect("send");
        let mut first = [0u8; 1024];
        let _ = s.read(&mut first);
        drop(s);
    }
    let mut c = Client::connect(addr);
    for _ in 0..10 {
        assert_eq!(c.roundtrip(&get("/plaintext")).text(), "Hello, World!");
    }
    server.shutdown();
}

/// Server sockets on `port` in `CLOSE_WAIT`: the client has closed its end
/// and the server has not closed its own (`/proc/net/tcp`, state `08`).
fn close_wait_on(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace();
            let local_address = fields.nth(1).unwrap_or("");
            let state = fields.nth(1).unwrap_or("");
            local_address.ends_with(&local) && state == "08"
        })
        .count()
}

/// Connections their clients close are closed by the server in full, while
/// a long-lived one goes on beside them. On io_uring the socket is also in
/// the ring's table of registered files, which holds it open: a slot freed
/// without taking it out of the table would leave the server's end in
/// `CLOSE_WAIT`, and the next connection at that slot must not be hurt by
/// the removal.
#[test]
fn connections_closed_by_clients_leave_no_server_socket_open() {
    let _serial = one_at_a_time();
    for event_loop in [EventLoop::Epoll, EventLoop::IoUring] {
        let server = start(event_loop);
        let addr = server.local_addr();
        let mut long_lived = Client::connect(addr);
        for i in 0..300 {
            let mut c = Client::connect(addr);
            assert_eq!(c.roundtrip(&get("/plaintext")).text(), "Hello, World!");
            drop(c);
            if i % 10 == 0 {
                assert_eq!(long_lived.roundtrip(&get("/plaintext")).text(), "Hello, World!");
            }
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let open = close_wait_on(addr.port());
            if open == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{open} server sockets still in CLOSE_WAIT on {event_loop:?} 3 s after their clients closed"
            );
            thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(long_lived.roundtrip(&get("/plaintext")).text(), "Hello, World!");
        server.shutdown();
    }
}

/// On io_uring, a file body leaves by `sendfile(2)` as on epoll (not
/// copied through the ring's sends), waiting in the ring for room while its
/// client reads slowly, and a large upload arriving in pauses is read in
/// full, whether straight from the socket or through the ring.
#[test]
fn io_uring_sends_files_with_sendfile_and_reads_uploads_whole() {
    let _serial = one_at_a_time();
    let dir = std::env::temp_dir().join(format!("peregrine-event-loops-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    // Larger than the loopback socket buffers on both sides can hold, so
    // the socket fills and the sender must wait for room.
    let file: Vec<u8> = (0..16 * 1024 * 1024u32).map(|i| (i % 239) as u8).collect();
    std::fs::write(dir.join("big.bin"), &file).expect("write the file");
    let files = peregrine::fs::ServeDir::new(&dir);
    let before = rings();
    let server =
        Server::with_config(Config { workers: 1, event_loop: EventLoop::IoUring, ..Config::default() })
            .spawn("127.0.0.1:0", move |_| {
                let files = files.clone();
                async move { common::test_router().get("/files/{*path}", files) }
            })
            .expect("test server starts");
    assert_eq!(rings().len(), before.len() + 1, "the io_uring server set up no ring");
    let addr = server.local_addr();

    let mut slow = Client::connect(addr);
    let writes_before = written_by_calls();
    slow.send(&get("/files/big.bin"));
    // While it does not read, the socket fills, and others are served.
    thread::sleep(Duration::from_millis(300));
    let mut other = Client::connect(addr);
    assert_eq!(other.roundtrip(&get("/plaintext")).text(), "Hello, World!");
    let r = slow.response();
    assert_eq!((r.status, r.body.len()), (200, file.len()));
    assert!(r.body == file, "the file body came back changed");
    // Each `sendfile` call counts as a write system call of this process
    // (the server runs in it), each of at most 256 KiB: at least 64 for
    // the file. Copied through the ring's sends it would take none.
    let writes = written_by_calls() - writes_before;
    assert!(writes >= 64, "{writes} write calls: the file did not leave by sendfile");

    // An upload in 64 KiB pieces with pauses between them: some reads
    // find the socket empty and wait in the ring again.
    let body: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 233) as u8).collect();
    let request = post("/echo", &body);
    let mut uploader = TcpStream::connect(addr).expect("connect");
    let reader = uploader.try_clone().expect("clone");
    let sender = thread::spawn(move || {
        for piece in request.chunks(64 * 1024) {
            uploader.write_all(piece).expect("send a piece");
            thread::sleep(Duration::from_millis(5));
        }
        uploader
    });
    let mut c = Client::from_stream(reader);
    let r = c.response();
    let _uploader = sender.join().expect("sender");
    assert_eq!((r.status, r.body.len()), (200, body.len()));
    assert!(r.body == body, "the upload came back changed");
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `EventLoop::Auto` takes io_uring wherever `EventLoop::IoUring` gets a
/// ring from this kernel, and serves through it; `Epoll` sets none up.
#[test]
fn auto_takes_io_uring_where_the_kernel_allows_it() {
    let _serial = one_at_a_time();
    let before = rings();
    let required = common::start(Config { workers: 1, event_loop: EventLoop::IoUring, ..Config::default() });
    let kernel_allows = rings().len() > before.len();
    required.shutdown();

    let before = rings();
    let auto = common::start(Config { workers: 1, event_loop: EventLoop::Auto, ..Config::default() });
    let added: Vec<_> =
        rings().into_iter().filter(|(fd, _)| !before.iter().any(|(old, _)| old == fd)).collect();
    let mut c = Client::connect(auto.local_addr());
    let r = c.roundtrip(&get("/plaintext"));
    assert_eq!((r.status, r.text()), (200, "Hello, World!"));
    if kernel_allows {
        let [(ring, idle)] = added.as_slice() else { panic!("auto set up {} rings, not 1", added.len()) };
        let now = rings().into_iter().find(|(fd, _)| fd == ring).map(|(_, tail)| tail).expect("the ring");
        assert!(now > *idle, "auto's request went around its ring");
    } else {
        assert!(added.is_empty(), "auto set up a ring where io_uring failed");
    }
    auto.shutdown();

    let before = rings().len();
    let epoll = common::start(Config { workers: 1, event_loop: EventLoop::Epoll, ..Config::default() });
    assert_eq!(rings().len(), before, "the epoll server set up a ring");
    epoll.shutdown();
}

/// Segments the socket has received so far (`tcpi_segs_in` of TCP_INFO).
fn segments_received(stream: &TcpStream) -> u32 {
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero bytes are a valid `tcp_info` (plain integers).
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` are valid for writes and `len` holds the
    // size of `info`; getsockopt writes at most that many bytes.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info.tcpi_segs_in
}

/// A response after which the server closes (a malformed request's `400`,
/// a `Connection: close` request's answer) leaves with the `FIN` in one
/// segment, on both event loops, not as the response and a `FIN` behind
/// it. One transmission
/// fewer per closed connection: on loopback, where the sender also runs
/// the receiver's TCP, a garbage connection cost the server 19.5 us
/// instead of 20.7 (`peregrine-lab stress noisy --kinds garbage`).
#[test]
fn a_closing_response_leaves_with_its_fin() {
    let _serial = one_at_a_time();
    for event_loop in [EventLoop::Epoll, EventLoop::IoUring] {
        let server = start(event_loop);
        let cases: [(&[u8], &str); 2] = [
            (b"x!#$% not a request line\r\n\r\n", "HTTP/1.1 400 "),
            (b"GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "HTTP/1.1 200 "),
        ];
        for (request, status) in cases {
            let mut s = TcpStream::connect(server.local_addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(request).unwrap();
            let mut response = Vec::new();
            s.read_to_end(&mut response).expect("the server closes after answering");
            let text = String::from_utf8_lossy(&response);
            assert!(text.starts_with(status), "{event_loop:?}: {text:?}");
            assert!(text.contains("Connection: close"), "{event_loop:?}: {text:?}");
            // SYN-ACK, the server's ACK of the request (Linux starts a
            // connection acknowledging at once), and the response with
            // the FIN; sent apart, they were four.
            let segments = segments_received(&s);
            assert!(segments <= 3, "{event_loop:?}, {status}: {segments} segments, so the FIN came apart");
        }
        server.shutdown();
    }
}
