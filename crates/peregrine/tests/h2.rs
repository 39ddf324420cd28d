//! HTTP/2 over real sockets: the `h2` crate's client (another codec's
//! view of the wire), `curl --http2-prior-knowledge` and `h2load`, against
//! the same router HTTP/1.1 serves. Covers GET/HEAD/POST, body limits,
//! streamed request and response bodies, trailers, flow-control
//! backpressure, multiplexing, h2c told apart from HTTP/1.1 on one port,
//! and graceful shutdown.

mod common;

use std::process::Command;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::h2client::{connect, exchange, read_answer, request};
use common::Client;
use futures_util::stream;
use futures_util::StreamExt;
use peregrine::{Body, Config, Content, Listener, Response, Router, Server, ServerHandle};

fn router(produced: Arc<AtomicUsize>) -> Router {
    let produced = Rc::new(produced);
    common::test_router()
        .get("/numbers", || async {
            Response::stream(
                "text/plain",
                stream::iter((0..5).map(|i| Ok::<_, std::io::Error>(format!("{i};")))),
            )
        })
        .get("/trailers", || {
            Response::text("body").header("x-before", "1").trailer("grpc-status", "0").trailer("x-sum", "42")
        })
        .get("/stream-trailers", || {
            Response::stream("text/plain", stream::iter([Ok::<_, std::io::Error>("a"), Ok("b")]))
                .trailer("x-done", "yes")
        })
        .get("/big", move || {
            let produced = Arc::clone(&produced);
            async move {
                let chunks = stream::iter(0..200).map(move |_| {
                    produced.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, std::io::Error>(vec![b'x'; 64 * 1024])
                });
                Response::stream("application/octet-stream", chunks)
            }
        })
        .get("/large", || Content("application/octet-stream", vec![7u8; 3 * 1024 * 1024]))
        // Past the writer's CR/LF/NUL check, but not a field value the
        // `http` crate (and so HTTP/2) takes.
        .get("/control-char-header", || Response::text("body").header("x-name", "a\u{1}b"))
        .get("/authority", |req: &peregrine::Request<'_>| {
            format!("{} {:?}", req.header_str("host").unwrap_or("-"), req.version())
        })
        .post_stream("/echo-stream", |mut body: Body| async move {
            let mut all = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                match body.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => all.extend_from_slice(&buf[..n]),
                    Err(e) => return Err(e),
                }
            }
            Ok(Content("application/octet-stream", all))
        })
}

fn start_with(config: Config, produced: Arc<AtomicUsize>) -> ServerHandle {
    start_on(config, Listener::new(([127, 0, 0, 1], 0)), produced)
}

fn start_on(config: Config, listener: Listener, produced: Arc<AtomicUsize>) -> ServerHandle {
    Server::with_config(config)
        .listen(listener)
        .start(move |_| {
            let produced = Arc::clone(&produced);
            async move { router(produced) }
        })
        .expect("test server starts")
}

fn start() -> ServerHandle {
    start_with(common::config(), Arc::default())
}

/// A current-thread runtime for the client side.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

#[test]
fn get_head_and_not_found_over_h2c() {
    let server = start();
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        let a = exchange(&mut c, request("GET", "/plaintext"), b"").await;
        assert_eq!(a.status, 200);
        assert_eq!(a.body, b"Hello, World!");
        assert_eq!(a.header("content-type"), Some("text/plain"));
        assert_eq!(a.header("content-length"), Some("13"));
        assert_eq!(a.header("server"), Some("peregrine"));
        assert!(a.header("date").is_some_and(|d| d.ends_with(" GMT")));

        let a = exchange(&mut c, request("GET", "/json"), b"").await;
        assert_eq!(a.body, br#"{"message":"Hello, World!"}"#);
        let a = exchange(&mut c, request("GET", "/id/7"), b"").await;
        assert_eq!(a.body, b"id 7");
        let a = exchange(&mut c, request("GET", "/sleep/20"), b"").await;
        assert_eq!(a.body, b"slept 20");

        let a = exchange(&mut c, request("HEAD", "/plaintext"), b"").await;
        assert_eq!((a.status, a.header("content-length")), (200, Some("13")));
        assert!(a.body.is_empty());

        assert_eq!(exchange(&mut c, request("GET", "/nope"), b"").await.status, 404);
        assert_eq!(exchange(&mut c, request("DELETE", "/plaintext"), b"").await.status, 405);
        let a = exchange(&mut c, request("GET", "/authority"), b"").await;
        assert_eq!(a.body, b"localhost Http2");
        // A panicking handler costs one stream its answer, not the connection.
        assert_eq!(exchange(&mut c, request("GET", "/panic"), b"").await.status, 500);
        assert_eq!(exchange(&mut c, request("GET", "/panic-async"), b"").await.status, 500);
        assert_eq!(exchange(&mut c, request("GET", "/plaintext"), b"").await.status, 200);
    });
}

#[test]
fn request_bodies_buffered_and_streamed_with_limits() {
    let server = start();
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        // 600 KB: more than the stream window, so the server must give
        // capacity back while it buffers.
        let body: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let a = exchange(&mut c, request("POST", "/echo"), &body).await;
        assert_eq!(a.status, 200);
        assert!(a.body == body, "echoed body differs");

        let a = exchange(&mut c, request("POST", "/echo-stream"), &body).await;
        assert!(a.status == 200 && a.body == body, "streamed echo differs");

        // 5 MB through a streaming route, counted by the handler.
        let big = vec![1u8; 5 * 1024 * 1024];
        let a = exchange(&mut c, request("POST", "/upload"), &big).await;
        assert_eq!(a.body, (5 * 1024 * 1024).to_string().as_bytes());

        // Over the 1 MB buffered limit: 413, declared or not.
        let over = vec![0u8; 1024 * 1024 + 1];
        let declared = http::Request::builder()
            .method("POST")
            .uri("http://localhost/echo")
            .header("content-length", over.len())
            .body(())
            .unwrap();
        let mut client = c.clone().ready().await.unwrap();
        let (response, _send) = client.send_request(declared, false).unwrap();
        assert_eq!(response.await.expect("413 before the body").status(), 413);
        let mut client = c.clone().ready().await.unwrap();
        let (response, mut send) = client.send_request(request("POST", "/echo"), false).unwrap();
        let sender = async move {
            // The server answers before taking it all; the rest fails.
            let mut body = Bytes::from(over);
            while !body.is_empty() {
                send.reserve_capacity(body.len());
                match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                    Some(Ok(n)) => {
                        let piece = body.split_to(n.min(body.len()));
                        if send.send_data(piece, body.is_empty()).is_err() {
                            return;
                        }
                    }
                    _ => return,
                }
            }
        };
        let (_, answer) = tokio::join!(sender, response);
        assert_eq!(answer.expect("413 head").status(), 413);

        // A small body whose end comes later, alone in an empty DATA
        // frame: the part that had arrived must not be lost on the way to
        // the stream's own task.
        let mut client = c.clone().ready().await.unwrap();
        let (response, mut send) = client.send_request(request("POST", "/echo"), false).unwrap();
        send.send_data(Bytes::from_static(b"hello"), false).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        send.send_data(Bytes::new(), true).unwrap();
        let a = read_answer(response).await;
        assert_eq!((a.status, a.body.as_slice()), (200, &b"hello"[..]));

        // The connection still serves.
        assert_eq!(exchange(&mut c, request("GET", "/plaintext"), b"").await.status, 200);
    });
}

#[test]
fn streamed_responses_and_trailers() {
    let server = start();
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        let a = exchange(&mut c, request("GET", "/numbers"), b"").await;
        assert_eq!(a.body, b"0;1;2;3;4;");
        assert_eq!(a.header("content-length"), None);

        let a = exchange(&mut c, request("GET", "/trailers"), b"").await;
        assert_eq!((a.body.as_slice(), a.header("x-before")), (&b"body"[..], Some("1")));
        let trailers = a.trailers.expect("trailers");
        assert_eq!(trailers.get("grpc-status").unwrap(), "0");
        assert_eq!(trailers.get("x-sum").unwrap(), "42");

        let a = exchange(&mut c, request("GET", "/stream-trailers"), b"").await;
        assert_eq!(a.body, b"ab");
        assert_eq!(a.trailers.expect("trailers").get("x-done").unwrap(), "yes");

        let a = exchange(&mut c, request("GET", "/large"), b"").await;
        assert_eq!(a.body.len(), 3 * 1024 * 1024);
        assert_eq!(a.header("content-length"), Some("3145728"));
    });
}

#[test]
fn a_client_that_does_not_read_holds_the_producer_back() {
    let produced = Arc::new(AtomicUsize::new(0));
    let server = start_with(common::config(), Arc::clone(&produced));
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        let mut client = c.clone().ready().await.unwrap();
        let (response, _) = client.send_request(request("GET", "/big"), true).unwrap();
        let response = response.await.expect("head");
        // Read nothing for a while: the client's 64 KiB windows close.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let held = produced.load(Ordering::SeqCst);
        // One window and one send buffer's worth at most, not 200 chunks.
        assert!(held <= 6, "{held} chunks of 64 KiB produced for a client that reads nothing");
        let mut recv = response.into_body();
        let mut total = 0;
        while let Some(data) = recv.data().await {
            let data = data.expect("body");
            total += data.len();
            let _ = recv.flow_control().release_capacity(data.len());
        }
        assert_eq!(total, 200 * 64 * 1024);
        assert_eq!(produced.load(Ordering::SeqCst), 200);
        assert_eq!(exchange(&mut c, request("GET", "/plaintext"), b"").await.status, 200);
    });
}

#[test]
fn streams_are_served_concurrently_on_one_connection() {
    let server = start();
    block_on(async {
        let c = connect(server.local_addr()).await;
        let started = Instant::now();
        let calls = (0..50).map(|i| {
            let mut c = c.clone();
            async move {
                let a = exchange(&mut c, request("GET", &format!("/sleep/{}", 200 + i)), b"").await;
                assert_eq!(a.body, format!("slept {}", 200 + i).as_bytes());
            }
        });
        futures_util::future::join_all(calls).await;
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "50 sleeps of 200 ms took {:?}",
            started.elapsed()
        );
    });
}

#[test]
fn one_port_tells_http1_from_h2c_by_the_preface() {
    let server = start();
    let mut http1 = Client::connect(server.local_addr());
    assert_eq!(http1.roundtrip(&common::get("/plaintext")).text(), "Hello, World!");
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        assert_eq!(exchange(&mut c, request("GET", "/plaintext"), b"").await.body, b"Hello, World!");
    });
    // The preface after an HTTP/1.1 request is not a protocol switch.
    http1.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    assert_eq!(http1.response().status, 505);

    // HTTP/1.1 only: the preface is an unsupported version.
    let only1 = start_on(common::config(), Listener::new(([127, 0, 0, 1], 0)).h2(false), Arc::default());
    let mut c = Client::connect(only1.local_addr());
    c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    assert_eq!(c.response().status, 505);

    // HTTP/2 only: HTTP/1.1 gets no answer, h2c is served.
    let only2 = start_on(common::config(), Listener::new(([127, 0, 0, 1], 0)).http1(false), Arc::default());
    let mut raw = std::net::TcpStream::connect(only2.local_addr()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    use std::io::{Read, Write};
    raw.write_all(&common::get("/plaintext")).unwrap();
    let mut got = Vec::new();
    let _ = raw.read_to_end(&mut got);
    assert!(!got.starts_with(b"HTTP/1.1"), "an HTTP/2-only port answered HTTP/1.1");
    block_on(async {
        let mut c = connect(only2.local_addr()).await;
        assert_eq!(exchange(&mut c, request("GET", "/id/3"), b"").await.body, b"id 3");
    });
}

#[test]
fn graceful_shutdown_sends_goaway_and_finishes_streams_in_flight() {
    let server = start();
    let addr = server.local_addr();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let client = std::thread::spawn(move || {
        rt.block_on(async {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let (send, conn) = h2::client::handshake(tcp).await.unwrap();
            let driver = tokio::spawn(conn);
            let mut client = send.ready().await.unwrap();
            let (response, _) = client.send_request(request("GET", "/sleep/700"), true).unwrap();
            tx.send(()).unwrap();
            let answer = read_answer(response).await;
            // The connection then ends cleanly (GOAWAY, no error).
            let ended = tokio::time::timeout(Duration::from_secs(5), driver).await;
            (answer.status, answer.body, ended.map(|r| r.map(|r| r.is_ok())))
        })
    });
    rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    server.shutdown();
    let (status, body, ended) = client.join().unwrap();
    assert_eq!((status, body.as_slice()), (200, &b"slept 700"[..]));
    assert!(matches!(ended, Ok(Ok(true))), "connection did not end cleanly after GOAWAY: {ended:?}");
}

/// `curl --http2-prior-knowledge`: a client someone else wrote.
#[test]
fn curl_speaks_h2c_with_prior_knowledge() {
    let server = start();
    let url = format!("http://{}", server.local_addr());
    let out = Command::new("curl")
        .args(["-sS", "--http2-prior-knowledge", "-w", "\n%{http_version} %{http_code}"])
        .arg(format!("{url}/plaintext"))
        .output()
        .expect("curl runs (apt install curl)");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello, World!\n2 200", "{out:?}");
    let out = Command::new("curl")
        .args(["-sS", "--http2-prior-knowledge", "--data-binary", "hello h2", "-w", " %{http_version}"])
        .arg(format!("{url}/echo"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello h2 2", "{out:?}");
}

/// `h2load` (nghttp2): thousands of multiplexed requests, all answered.
#[test]
fn h2load_gets_every_answer() {
    let server = start();
    let out = Command::new("h2load")
        .args(["-n", "4000", "-c", "4", "-m", "32"])
        .arg(format!("http://{}/plaintext", server.local_addr()))
        .output()
        .expect("h2load runs (apt install nghttp2-client; scripts/install-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("4000 succeeded, 0 failed, 0 errored"), "{text}");
    assert!(text.contains("status codes: 4000 2xx"), "{text}");
}

/// HTTP/2 refuses the paths HTTP/1.1 refuses (a dot segment, an escaped
/// unreserved character), with the same `400`, before any route runs; the
/// connection serves on.
#[test]
fn non_canonical_paths_are_refused_as_on_http1() {
    let server = start();
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        for path in ["/a/../plaintext", "/./plaintext", "/%70laintext", "/plaintext%2"] {
            let a = exchange(&mut c, request("GET", path), b"").await;
            assert_eq!(a.status, 400, "{path}");
        }
        let a = exchange(&mut c, request("POST", "/a/../echo"), b"body").await;
        assert_eq!(a.status, 400, "a refused path with a body");
        assert_eq!(exchange(&mut c, request("GET", "/plaintext"), b"").await.body, b"Hello, World!");
    });
}

/// Requests answered in the connection's own task (no stream task opens
/// and closes) still count as activity: a connection kept busy well past
/// the idle timeout stays open, and once it falls silent it is closed.
#[test]
fn a_busy_connection_outlives_the_idle_timeout_and_an_idle_one_does_not() {
    let mut config = common::config();
    config.idle_timeout = Duration::from_millis(500);
    let server = start_with(config, Arc::default());
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(3) {
            assert_eq!(exchange(&mut c, request("GET", "/plaintext"), b"").await.status, 200);
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(c.clone().ready().await.is_err(), "an idle HTTP/2 connection outlived its idle timeout");
    });
}

/// A response with a header HTTP/2 cannot carry is refused with a `500`
/// (the `500`'s own head and body), on a stream answered in the
/// connection's task, and the connection goes on serving.
#[test]
fn a_header_http2_cannot_carry_is_answered_with_500() {
    let server = start();
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        let a = exchange(&mut c, request("GET", "/control-char-header"), b"").await;
        assert_eq!(a.status, 500);
        assert!(a.header("x-name").is_none());
        assert!(!a.body.is_empty() && a.body != b"body");
        assert_eq!(exchange(&mut c, request("GET", "/plaintext"), b"").await.status, 200);
    });
}

/// A directory with `big.bin` (`len` bytes, not all alike, so a misplaced
/// piece shows) for `ServeDir`, removed on drop.
struct FileDir(std::path::PathBuf);

impl FileDir {
    fn new(len: usize) -> FileDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "peregrine-h2-files-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("big.bin"), patterned(len)).unwrap();
        FileDir(dir)
    }
}

impl Drop for FileDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn patterned(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ (i / 251) as u8).collect()
}

fn start_files(dir: &FileDir) -> ServerHandle {
    let files = peregrine::fs::ServeDir::new(&dir.0);
    Server::with_config(common::config())
        .listen(Listener::new(([127, 0, 0, 1], 0)))
        .start(move |_| {
            let files = files.clone();
            async move { Router::new().get("/static/{*path}", files) }
        })
        .expect("test server starts")
}

#[test]
fn a_large_static_file_arrives_whole_in_pieces_with_ranges_and_head() {
    const LEN: usize = 5 * 1024 * 1024 + 123;
    let dir = FileDir::new(LEN);
    let server = start_files(&dir);
    let addr = server.local_addr();
    let want = patterned(LEN);
    block_on(async move {
        let mut client = connect(addr).await;
        // The client's 64 KiB window holds the server to pieces it grants.
        let whole = exchange(&mut client, request("GET", "/static/big.bin"), b"").await;
        assert_eq!(whole.status, 200);
        assert_eq!(whole.header("content-length"), Some(LEN.to_string().as_str()));
        assert!(whole.body == want, "the body differs ({} bytes of {LEN})", whole.body.len());

        let range = http::Request::builder()
            .uri("http://localhost/static/big.bin")
            .header("range", "bytes=1000-2000999")
            .body(())
            .unwrap();
        let part = exchange(&mut client, range, b"").await;
        assert_eq!(part.status, 206);
        assert_eq!(part.header("content-range"), Some(format!("bytes 1000-2000999/{LEN}").as_str()));
        assert!(part.body == want[1000..2_001_000], "the range differs");

        let head = exchange(&mut client, request("HEAD", "/static/big.bin"), b"").await;
        assert_eq!(head.status, 200);
        assert_eq!(head.header("content-length"), Some(LEN.to_string().as_str()));
        assert!(head.body.is_empty());
    });
    // Another client: curl's HTTP/2 (nghttp2) gets the same bytes.
    let out = Command::new("curl")
        .args(["-sS", "--http2-prior-knowledge", "--max-time", "20"])
        .arg(format!("http://{addr}/static/big.bin"))
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == patterned(LEN), "curl's body differs ({} bytes)", out.stdout.len());
    server.shutdown();
}

#[test]
fn a_file_that_shrinks_while_sent_resets_the_stream() {
    const LEN: usize = 4 * 1024 * 1024;
    let dir = FileDir::new(LEN);
    let server = start_files(&dir);
    let addr = server.local_addr();
    let path = dir.0.join("big.bin");
    block_on(async move {
        let client = connect(addr).await;
        let mut client = client.ready().await.expect("ready");
        let (response, _) =
            client.send_request(request("GET", "/static/big.bin"), true).expect("send request");
        let response = response.await.expect("response head");
        assert_eq!(response.status(), 200);
        let mut recv = response.into_body();
        // Without released capacity the server is held to the 64 KiB
        // window: it is mid-file when the file shrinks.
        let first = recv.data().await.expect("a first piece").expect("a first piece");
        let mut got = first.len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(100 * 1024).unwrap();
        let _ = recv.flow_control().release_capacity(first.len());
        let outcome = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(data) = recv.data().await {
                let data = data?;
                got += data.len();
                let _ = recv.flow_control().release_capacity(data.len());
            }
            Ok::<_, h2::Error>(())
        })
        .await
        .expect("the stream ends, it does not hang");
        let err = outcome.expect_err("a body cut short must not end as if whole");
        assert_eq!(err.reason(), Some(h2::Reason::INTERNAL_ERROR), "{err}");
        assert!(got < LEN, "{got} bytes arrived");
        // The connection goes on: another stream is served.
        let mut client = client.ready().await.expect("ready");
        let (response, _) =
            client.send_request(request("HEAD", "/static/big.bin"), true).expect("send request");
        assert_eq!(response.await.expect("response head").status(), 200);
    });
    server.shutdown();
}
