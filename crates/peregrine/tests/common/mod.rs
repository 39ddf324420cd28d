//! Shared by the integration tests: a test server and a raw-TCP HTTP/1.1
//! client that checks every response it reads for well-formedness.
//!
//! The client is deliberately raw, over `std::net::TcpStream`: an HTTP
//! client crate would normalise exactly the things these tests exist to
//! check (framing, `Content-Length`, interim responses, closes). Reading
//! and the well-formedness rules are the workspace's `http-probe` crate,
//! the same reader the lab's verifier uses; this module decides what is a
//! test failure (a panic) and what the test gets back.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod h2client;
pub mod ws;

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime};

use http_probe::{strict, End, ReadError};

use peregrine::{Body, Config, Content, EventLoop, Json, Path, Router, Server, ServerHandle};
use serde::Serialize;

/// Longest a test waits for any single read before calling it a hang.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Serialize)]
pub struct Message {
    pub message: &'static str,
}

/// The routes the HTTP tests exercise: sync and async handlers, a buffered
/// echo, a streamed byte counter and handlers that panic.
pub fn test_router() -> Router {
    Router::new()
        .get("/plaintext", || Content("text/plain", "Hello, World!"))
        .get("/json", || Json(Message { message: "Hello, World!" }))
        // Sync, with a body that names the request, to check ordering.
        .get("/id/{n}", |Path(n): Path<u32>| format!("id {n}"))
        // Async: the connection waits while the worker serves others.
        .get_async("/sleep/{ms}", |Path(ms): Path<u64>| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            format!("slept {ms}")
        })
        .post("/echo", |body: Vec<u8>| Content("application/octet-stream", body))
        .post_stream("/upload", |body: Body| async move { body.count().await.map(|n| n.to_string()) })
        // Reads with buffers from 1 byte to 200 KB, so body bytes arrive
        // both through the connection's buffer and straight from the
        // socket, and answers a checksum of what it saw.
        .post_stream("/checksum", |mut body: Body| async move {
            let sizes = [200_000usize, 200_000, 1, 70_000, 70_000, 13, 16_384, 16_384, 4_096];
            let mut buf = vec![0u8; 200_000];
            let (mut hash, mut len, mut i) = (FNV_OFFSET, 0u64, 0);
            loop {
                let n = body.read(&mut buf[..sizes[i % sizes.len()]]).await?;
                if n == 0 {
                    return Ok::<_, peregrine::Error>(format!("{len} {hash:016x}"));
                }
                hash = fnv1a(hash, &buf[..n]);
                len += n as u64;
                i += 1;
            }
        })
        .get("/panic", || -> &'static str { panic!("test handler panics on purpose") })
        .get_async("/panic-async", || async {
            // The branch keeps the future's output type `&str`.
            if std::hint::black_box(true) {
                panic!("async test handler panics on purpose");
            }
            "unreachable"
        })
}

/// FNV-1a's starting value.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Folds `bytes` into an FNV-1a hash: the `/checksum` route's answer.
pub fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// One worker, so every test also checks that connections sharing a worker
/// do not disturb each other. On the default event loop (epoll), or on
/// io_uring when `PEREGRINE_TEST_IO_URING` is set: `scripts/test` runs the
/// HTTP suites both ways.
pub fn config() -> Config {
    let event_loop = if std::env::var_os("PEREGRINE_TEST_IO_URING").is_some() {
        EventLoop::IoUring
    } else {
        EventLoop::Epoll
    };
    Config { workers: 1, event_loop, ..Config::default() }
}

pub fn start(config: Config) -> ServerHandle {
    Server::with_config(config)
        .spawn("127.0.0.1:0", |_worker| async { test_router() })
        .expect("test server starts")
}

/// `GET path` with a `Host` header.
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").into_bytes()
}

/// `POST path` with a `Content-Length` body.
pub fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let mut req =
        format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n", body.len())
            .into_bytes();
    req.extend_from_slice(body);
    req
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of the only header called `name`; panics if it repeats.
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut found = self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name));
        let first = found.next().map(|(_, v)| v.as_str());
        assert!(found.next().is_none(), "header {name} appears more than once: {:?}", self.headers);
        first
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("body is UTF-8")
    }

    /// Whether the server announced it closes after this response.
    pub fn says_close(&self) -> bool {
        self.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A raw client connection. Bytes read past one response stay buffered for
/// the next, which is what makes pipelining checkable.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect to test server");
        // Small writes must leave at once so split requests really arrive
        // split.
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        Client { stream, buf: Vec::new() }
    }

    /// A client over a connection made elsewhere (one another thread
    /// writes to, say).
    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        Client { stream, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to test server");
    }

    /// Sends `req` and reads one response.
    pub fn roundtrip(&mut self, req: &[u8]) -> Response {
        self.send(req);
        self.response()
    }

    /// Reads one complete response; panics on end-of-stream or malformed
    /// output.
    pub fn response(&mut self) -> Response {
        self.read_response(false).expect("read response").expect("connection closed before a response")
    }

    /// Reads the response to a `HEAD` request: its `Content-Length`
    /// describes a body that must not be sent.
    pub fn head_response(&mut self) -> Response {
        self.read_response(true).expect("read response").expect("connection closed before a response")
    }

    /// Reads one response. `Ok(None)` when the server closed the connection
    /// cleanly before sending any byte of one. A response that is there but
    /// malformed panics: that is always a test failure. Parsing is
    /// `http_probe`'s; the rules every response is held to are its
    /// `strict` ones.
    pub fn read_response(&mut self, head_only: bool) -> io::Result<Option<Response>> {
        let head = match http_probe::read_head(&mut self.stream, &mut self.buf) {
            Ok(head) => head,
            Err(ReadError::Ended { end: End::Closed, received: 0 }) => return Ok(None),
            Err(ReadError::Ended { end: End::Closed, .. }) => panic!(
                "connection closed in the middle of a response head: {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
            Err(ReadError::Ended { end, .. }) => return Err(end.to_io_error()),
            Err(e @ ReadError::Malformed(_)) => panic!("malformed response: {e}"),
        };
        let text = head.raw_text();
        let problems = strict::head_problems(&head);
        assert!(problems.is_empty(), "{}: {text:?}", problems.join("; "));
        if head.status < 200 {
            // Interim responses (`100 Continue`) are a bare status line.
            let problems = strict::interim_problems(&head);
            assert!(problems.is_empty(), "{}", problems.join("; "));
            return Ok(Some(Response { status: head.status, headers: head.headers, body: Vec::new() }));
        }

        // What every final response must carry (SPEC: Server, Date,
        // Content-Type, Content-Length), each exactly once.
        let problems = strict::final_problems(&head, SystemTime::now());
        assert!(problems.is_empty(), "{}: {text:?}", problems.join("; "));
        let response = http_probe::read_body(&mut self.stream, &mut self.buf, head, head_only);
        match &response.cut_short {
            None => {}
            Some(End::Closed) => panic!(
                "connection closed after {} of {:?} body bytes; head {text:?}",
                response.body.len(),
                response.content_length()
            ),
            Some(end) => return Err(end.to_io_error()),
        }
        assert!(response.defects.is_empty(), "{}: {text:?}", response.defects.join("; "));
        // Whatever follows a response must be the next response: a wrong
        // Content-Length would leave body bytes (or eat head bytes) here.
        if let Some(problem) = strict::leftover_problem(&self.buf) {
            panic!("after a {}-byte body: {problem}", response.body.len());
        }
        Ok(Some(Response { status: response.status, headers: response.headers, body: response.body }))
    }

    /// Asserts the server closes the connection (end-of-stream, or a reset)
    /// within `within`, without sending anything more. Returns how long it
    /// took.
    pub fn expect_closed_within(&mut self, within: Duration) -> Duration {
        assert!(
            self.buf.is_empty(),
            "unexpected bytes after the last response: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let start = Instant::now();
        self.stream.set_read_timeout(Some(within)).unwrap();
        let mut byte = [0u8; 1024];
        let result = self.stream.read(&mut byte);
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        match result {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Ok(n) => {
                panic!("expected the connection to close, got {:?}", String::from_utf8_lossy(&byte[..n]))
            }
            Err(e) => panic!("expected the connection to close within {within:?}, got {e}"),
        }
        start.elapsed()
    }

    pub fn expect_closed(&mut self) {
        self.expect_closed_within(Duration::from_secs(3));
    }
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A router whose `GET /endless` streams 4,096 chunks of 16 KiB, adding
/// each chunk to `produced` as the handler hands it over: how far the
/// server gets writing to a client that does not read.
pub fn endless_router(produced: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> peregrine::Router {
    use futures_util::StreamExt;
    peregrine::Router::new().get("/endless", move || {
        let counter = std::sync::Arc::clone(&produced);
        async move {
            let chunks = futures_util::stream::repeat(()).take(4096).map(move |()| {
                counter.fetch_add(16 * 1024, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, std::io::Error>(vec![b'e'; 16 * 1024])
            });
            peregrine::Response::stream("application/octet-stream", chunks)
        }
    })
}
