//! HTTP/3 over real UDP sockets, with hyperium's `h3` client on `quinn`
//! (a client someone else wrote) and, for bad input, a raw QUIC connection
//! that writes HTTP/3 frames by hand: each protocol violation must end its
//! stream or connection with the code RFC 9114 / RFC 9204 name, while a
//! connection opened before keeps being served.
//!
//! Certificates come from `scripts/certs` (openssl), generated afresh into
//! a directory of the test's own.
#![cfg(feature = "http3")]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes};
use common::test_router;
use peregrine::tls::Tls;
use peregrine::{Config, Listener, Server, ServerHandle};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// `H3_NO_ERROR`, `H3_FRAME_UNEXPECTED`, `H3_FRAME_ERROR`,
/// `H3_MESSAGE_ERROR` (RFC 9114 §8.1), `QPACK_DECOMPRESSION_FAILED`
/// (RFC 9204 §6).
const H3_NO_ERROR: u64 = 0x100;
const H3_FRAME_ERROR: u64 = 0x106;
const H3_FRAME_UNEXPECTED: u64 = 0x105;
const H3_MESSAGE_ERROR: u64 = 0x10e;
const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;

/// A fresh directory with a CA and a server certificate it signed.
fn certs() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "peregrine-h3-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/certs");
    let status = Command::new(script).arg(&dir).status().expect("run scripts/certs");
    assert!(status.success(), "scripts/certs failed");
    dir
}

/// The test router with a large response.
fn router() -> peregrine::Router {
    test_router().get("/large", || {
        let body: Vec<u8> = (0..LARGE).map(|i| (i % 251) as u8).collect();
        peregrine::Content("application/octet-stream", body)
    })
}

const LARGE: usize = 3 * 1024 * 1024 + 17;

/// A server with one TLS listener that also speaks HTTP/3, on a free port
/// (TCP and UDP share it).
fn start(dir: &Path) -> ServerHandle {
    start_with(dir, Config { workers: 2, ..Config::default() })
}

fn start_with(dir: &Path, config: Config) -> ServerHandle {
    let tls =
        Tls::from_pem_files(dir.join("server.crt"), dir.join("server.key")).expect("load the certificate");
    Server::with_config(config)
        .listen(Listener::new(([127, 0, 0, 1], 0)).tls(tls).http3(true))
        .start(|_| async { router() })
        .expect("server starts")
}

/// A QUIC client endpoint that trusts the test CA and offers ALPN `h3`.
fn client(dir: &Path) -> quinn::Endpoint {
    let mut endpoint = quinn::Endpoint::client(([127, 0, 0, 1], 0).into()).expect("client endpoint");
    endpoint.set_default_client_config(client_config(dir));
    endpoint
}

/// The client configuration [`client`] uses: TLS 1.3 trusting the test
/// CA, ALPN `h3`, quinn's default transport.
fn client_config(dir: &Path) -> quinn::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(dir.join("ca.crt")).expect("read ca.crt")).expect("CA");
    let mut tls =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_root_certificates(roots)
            .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(tls)).expect("QUIC client TLS");
    quinn::ClientConfig::new(Arc::new(crypto))
}

async fn connect(endpoint: &quinn::Endpoint, addr: SocketAddr) -> quinn::Connection {
    endpoint.connect(addr, "localhost").expect("connect").await.expect("QUIC handshake")
}

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// An HTTP/3 client on a new connection; its driver runs on a task.
async fn h3_client(endpoint: &quinn::Endpoint, addr: SocketAddr) -> (SendRequest, quinn::Connection) {
    let conn = connect(endpoint, addr).await;
    let (mut driver, send) =
        h3::client::new(h3_quinn::Connection::new(conn.clone())).await.expect("h3 client");
    tokio::task::spawn_local(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    (send, conn)
}

struct Reply {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

async fn request(send: &mut SendRequest, method: &str, path: &str, body: &[u8]) -> Reply {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .body(())
        .expect("request");
    let mut stream = send.send_request(req).await.expect("send request");
    if !body.is_empty() {
        // In pieces, so the body spans many DATA frames.
        for piece in body.chunks(50_000) {
            stream.send_data(Bytes::copy_from_slice(piece)).await.expect("send body");
        }
    }
    stream.finish().await.expect("finish request");
    let response = stream.recv_response().await.expect("response head");
    let mut got = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.expect("response body") {
        while chunk.has_remaining() {
            let piece = chunk.chunk();
            got.extend_from_slice(piece);
            let n = piece.len();
            chunk.advance(n);
        }
    }
    Reply { status: response.status().as_u16(), headers: response.headers().clone(), body: got }
}

fn local() -> tokio::task::LocalSet {
    tokio::task::LocalSet::new()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

#[test]
fn get_post_large_and_streamed_bodies() {
    let dir = certs();
    let server = start(&dir);
    let addr = server.local_addr();
    local().block_on(&runtime(), async move {
        let endpoint = client(&dir);
        let (mut send, _conn) = h3_client(&endpoint, addr).await;

        let reply = request(&mut send, "GET", "/plaintext", b"").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, b"Hello, World!");
        assert_eq!(reply.headers["content-type"], "text/plain");
        assert_eq!(reply.headers["content-length"], "13");
        assert_eq!(reply.headers["server"], "peregrine");

        // Path parameters and an async handler.
        assert_eq!(request(&mut send, "GET", "/id/42", b"").await.body, b"id 42");
        assert_eq!(request(&mut send, "GET", "/sleep/20", b"").await.body, b"slept 20");
        assert_eq!(request(&mut send, "GET", "/nope", b"").await.status, 404);
        // A panicking handler is a 500 on its stream, nothing more.
        assert_eq!(request(&mut send, "GET", "/panic", b"").await.status, 500);

        // A buffered body (more than the stream window, so the server must
        // give credit back as it reads).
        let body: Vec<u8> = (0..600_000u32).map(|i| (i % 253) as u8).collect();
        let reply = request(&mut send, "POST", "/echo", &body).await;
        assert_eq!(reply.status, 200);
        assert!(reply.body == body, "echoed body differs");

        // A streamed body, counted by the handler as it arrives.
        let big = vec![7u8; 5 * 1024 * 1024];
        let reply = request(&mut send, "POST", "/upload", &big).await;
        assert_eq!((reply.status, reply.body), (200, big.len().to_string().into_bytes()));

        // Over the buffered limit (1 MiB): 413.
        let reply = request(&mut send, "POST", "/echo", &vec![1u8; 1024 * 1024 + 1]).await;
        assert_eq!(reply.status, 413);

        // A large response, past every window.
        let reply = request(&mut send, "GET", "/large", b"").await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body.len(), LARGE);
        assert!(reply.body.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8), "large body corrupt");
        assert_eq!(reply.headers["content-length"], LARGE.to_string().as_str());

        // HEAD: the length, no body.
        let reply = request(&mut send, "HEAD", "/plaintext", b"").await;
        assert_eq!((reply.status, reply.body.len()), (200, 0));
        assert_eq!(reply.headers["content-length"], "13");
    });
}

#[test]
fn many_concurrent_streams_on_one_connection() {
    let dir = certs();
    let server = start(&dir);
    let addr = server.local_addr();
    local().block_on(&runtime(), async move {
        let endpoint = client(&dir);
        let (send, _conn) = h3_client(&endpoint, addr).await;
        // More than the 128 streams the server allows at once: the rest
        // wait for stream credit.
        let tasks: Vec<_> = (0..300u32)
            .map(|n| {
                let mut send = send.clone();
                let path = if n % 3 == 0 { format!("/sleep/{}", n % 50) } else { format!("/id/{n}") };
                tokio::task::spawn_local(async move { (n, request(&mut send, "GET", &path, b"").await) })
            })
            .collect();
        for task in tasks {
            let (n, reply) = task.await.expect("request task");
            assert_eq!(reply.status, 200);
            let want = if n % 3 == 0 { format!("slept {}", n % 50) } else { format!("id {n}") };
            assert_eq!(reply.body, want.as_bytes());
        }
    });
}

/// Writes `bytes` on a new request stream of a raw QUIC connection (ALPN
/// `h3`, no HTTP/3 client), ends the stream, and returns the connection.
async fn raw_stream(
    endpoint: &quinn::Endpoint,
    addr: SocketAddr,
    bytes: &[u8],
) -> (quinn::Connection, quinn::RecvStream) {
    let conn = connect(endpoint, addr).await;
    let (mut send, recv) = conn.open_bi().await.expect("open a request stream");
    send.write_all(bytes).await.expect("write frames");
    send.finish().expect("end the stream");
    (conn, recv)
}

/// The application error code the server closed `conn` with.
async fn closed_with(conn: &quinn::Connection) -> u64 {
    let closed = tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .expect("server closes the connection");
    match closed {
        quinn::ConnectionError::ApplicationClosed(close) => close.error_code.into_inner(),
        other => panic!("connection ended otherwise: {other}"),
    }
}

#[test]
fn bad_input_gets_the_right_error_and_others_are_served() {
    let dir = certs();
    // One worker: the broken connections and the good one share it.
    let server = start_with(&dir, Config { workers: 1, ..Config::default() });
    let addr = server.local_addr();
    local().block_on(&runtime(), async move {
        let endpoint = client(&dir);
        let (mut good, _good_conn) = h3_client(&endpoint, addr).await;
        assert_eq!(request(&mut good, "GET", "/plaintext", b"").await.status, 200);

        // DATA before HEADERS on a request stream.
        let (conn, _) = raw_stream(&endpoint, addr, &[0x00, 0x03, b'a', b'b', b'c']).await;
        assert_eq!(closed_with(&conn).await, H3_FRAME_UNEXPECTED, "DATA first");
        assert_eq!(request(&mut good, "GET", "/id/1", b"").await.body, b"id 1");

        // SETTINGS (a control-stream frame) on a request stream.
        let (conn, _) = raw_stream(&endpoint, addr, &[0x04, 0x00]).await;
        assert_eq!(closed_with(&conn).await, H3_FRAME_UNEXPECTED, "SETTINGS on a request stream");
        assert_eq!(request(&mut good, "GET", "/id/2", b"").await.body, b"id 2");

        // A malformed frame: HEADERS announcing 16 bytes, the stream ends
        // after 3.
        let (conn, _) = raw_stream(&endpoint, addr, &[0x01, 0x10, 0x00, 0x00, 0xd1]).await;
        assert_eq!(closed_with(&conn).await, H3_FRAME_ERROR, "truncated HEADERS");
        assert_eq!(request(&mut good, "GET", "/id/3", b"").await.body, b"id 3");

        // QPACK: a field line indexing dynamic-table entry 0, which cannot
        // exist (the server's table capacity is 0).
        let (conn, _) = raw_stream(&endpoint, addr, &[0x01, 0x03, 0x00, 0x00, 0x80]).await;
        assert_eq!(closed_with(&conn).await, QPACK_DECOMPRESSION_FAILED, "dynamic reference");
        assert_eq!(request(&mut good, "GET", "/id/4", b"").await.body, b"id 4");

        // A malformed request (`:method GET`, `:scheme https`, no `:path`):
        // a stream error; the connection stays up and serves the next one.
        let (conn, mut recv) = raw_stream(&endpoint, addr, &[0x01, 0x04, 0x00, 0x00, 0xd1, 0xd7]).await;
        let read = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 16))
            .await
            .expect("the stream is answered");
        match read {
            Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(code))) => {
                assert_eq!(code.into_inner(), H3_MESSAGE_ERROR)
            }
            other => panic!("expected a reset with H3_MESSAGE_ERROR, got {other:?}"),
        }
        assert!(conn.close_reason().is_none(), "a stream error keeps the connection");
        let (mut send, mut recv) = conn.open_bi().await.expect("another stream");
        // `:method GET`, `:scheme https`, `:path /`, `:authority localhost`
        // (static name 0, literal value).
        let mut block = vec![0x00, 0x00, 0xd1, 0xd7, 0xc1, 0x50, 0x09];
        block.extend_from_slice(b"localhost");
        let mut frame = vec![0x01, block.len() as u8];
        frame.extend_from_slice(&block);
        send.write_all(&frame).await.expect("write HEADERS");
        send.finish().expect("end the stream");
        let answer =
            tokio::time::timeout(Duration::from_secs(5), async move { recv.read_to_end(1 << 16).await })
                .await
                .expect("answered")
                .expect("read the answer");
        // A response (HEADERS, then the router's 404 as DATA).
        assert!(answer.windows(9).any(|w| w == b"not found"), "an answer: {answer:?}");
        assert_eq!(request(&mut good, "GET", "/id/5", b"").await.body, b"id 5");
    });
}

#[test]
fn shutdown_sends_goaway_and_finishes_requests_in_flight() {
    let dir = certs();
    let server = start(&dir);
    let addr = server.local_addr();
    local().block_on(&runtime(), async move {
        let endpoint = client(&dir);
        let (send, conn) = h3_client(&endpoint, addr).await;
        let slow = tokio::task::spawn_local({
            let mut send = send.clone();
            async move { request(&mut send, "GET", "/sleep/400", b"").await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stopping = tokio::task::spawn_blocking(move || server.shutdown());
        let reply = slow.await.expect("slow request");
        assert_eq!((reply.status, reply.body), (200, b"slept 400".to_vec()));
        assert_eq!(closed_with(&conn).await, H3_NO_ERROR);
        stopping.await.expect("server stops");
    });
}

#[test]
fn tls_listeners_advertise_http3_with_alt_svc() {
    use common::h2client;
    let dir = certs();
    let tls =
        Tls::from_pem_files(dir.join("server.crt"), dir.join("server.key")).expect("load the certificate");
    // Cleartext first, then TLS on TCP with HTTP/3 on the same UDP port.
    let server = Server::with_config(Config { workers: 1, ..Config::default() })
        .listen(Listener::new(([127, 0, 0, 1], 0)))
        .listen(Listener::new(([127, 0, 0, 1], 0)).tls(tls).http3(true))
        .start(|_| async { router() })
        .expect("server starts");
    let (plain, secure) = (server.local_addrs()[0], server.local_addrs()[1]);
    local().block_on(&runtime(), async move {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_file(dir.join("ca.crt")).expect("read ca.crt")).expect("CA");
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let tcp = tokio::net::TcpStream::connect(secure).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("TLS");
        let (mut send, conn) = h2::client::handshake(tls).await.expect("HTTP/2 handshake");
        tokio::task::spawn_local(async move {
            let _ = conn.await;
        });
        let answer = h2client::exchange(&mut send, h2client::request("GET", "/plaintext"), b"").await;
        assert_eq!(answer.status, 200);
        let want = format!("h3=\":{}\"; ma=86400", secure.port());
        assert_eq!(answer.header("alt-svc"), Some(want.as_str()));

        // The advertised service answers.
        let endpoint = client(&dir);
        let (mut h3, _conn) = h3_client(&endpoint, secure).await;
        assert_eq!(request(&mut h3, "GET", "/plaintext", b"").await.body, b"Hello, World!");

        // Cleartext connections advertise nothing (browsers use Alt-Svc
        // from https origins only).
        let mut h2c = h2client::connect(plain).await;
        let answer = h2client::exchange(&mut h2c, h2client::request("GET", "/plaintext"), b"").await;
        assert_eq!((answer.status, answer.header("alt-svc")), (200, None));
    });
}

#[test]
fn http3_without_tls_is_refused_at_start() {
    let err = Server::with_config(Config { workers: 1, ..Config::default() })
        .listen(Listener::new(([127, 0, 0, 1], 0)).http3(true))
        .start(|_| async { router() })
        .expect_err("HTTP/3 needs a certificate");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("HTTP/3 needs TLS"), "{err}");
}

#[test]
fn clients_that_must_validate_their_address_with_retry_are_served() {
    let dir = certs();
    let mut config = Config { workers: 2, ..Config::default() };
    // Every new client is sent a Retry first.
    config.http3.retry_above_handshakes = Some(0);
    let server = start_with(&dir, config);
    let addr = server.local_addr();
    local().block_on(&runtime(), async move {
        let endpoint = client(&dir);
        for n in 0..4 {
            let (mut send, _conn) = h3_client(&endpoint, addr).await;
            let path = format!("/id/{n}");
            assert_eq!(request(&mut send, "GET", &path, b"").await.body, format!("id {n}").as_bytes());
        }
    });
}

/// Counts the handlers (or response streams) dropped before they finished.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Handlers that wait (on a timer, without reading their body, or
/// producing an endless body), each holding a [`Dropped`] on `dropped`.
fn waiting_router(dropped: Arc<AtomicUsize>) -> peregrine::Router {
    use futures_util::StreamExt;
    let (d1, d2, d3) = (Arc::clone(&dropped), Arc::clone(&dropped), dropped);
    router()
        .get_async("/wait", move || {
            let guard = Dropped(Arc::clone(&d1));
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(60)).await;
                "waited"
            }
        })
        .post_stream("/hold", move |body: peregrine::Body| {
            let guard = Dropped(Arc::clone(&d2));
            async move {
                let (_guard, _body) = (guard, body);
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, peregrine::Error>("held")
            }
        })
        .get("/forever", move || {
            let guard = Dropped(Arc::clone(&d3));
            let chunks = futures_util::stream::repeat(()).map(move |()| {
                let _ = &guard;
                Ok::<_, std::io::Error>(vec![b'f'; 16 * 1024])
            });
            peregrine::Response::stream("application/octet-stream", chunks)
        })
}

async fn until_dropped(dropped: &AtomicUsize, want: usize, what: &str) {
    let waited = tokio::time::timeout(Duration::from_secs(3), async {
        while dropped.load(Ordering::SeqCst) < want {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "{what}: handler still running ({} dropped)", dropped.load(Ordering::SeqCst));
}

#[test]
fn a_client_that_cancels_a_request_drops_its_handler() {
    let dir = certs();
    let dropped = Arc::new(AtomicUsize::new(0));
    let tls =
        Tls::from_pem_files(dir.join("server.crt"), dir.join("server.key")).expect("load the certificate");
    let server = Server::with_config(Config { workers: 1, ..Config::default() })
        .listen(Listener::new(([127, 0, 0, 1], 0)).tls(tls).http3(true))
        .start({
            let dropped = Arc::clone(&dropped);
            move |_| {
                let dropped = Arc::clone(&dropped);
                async move { waiting_router(dropped) }
            }
        })
        .expect("server starts");
    let addr = server.local_addr();
    local().block_on(&runtime(), async move {
        let endpoint = client(&dir);
        let (mut send, _conn) = h3_client(&endpoint, addr).await;
        let get = |path: &str| {
            http::Request::builder().uri(format!("https://localhost{path}")).body(()).expect("request")
        };

        // STOP_SENDING on the response while the handler sleeps.
        let mut stream = send.send_request(get("/wait")).await.expect("send request");
        stream.finish().await.expect("finish request");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(dropped.load(Ordering::SeqCst), 0, "the handler runs until cancelled");
        stream.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
        until_dropped(&dropped, 1, "STOP_SENDING").await;

        // RESET_STREAM on the request, whose body the handler is not
        // reading.
        let post =
            http::Request::builder().method("POST").uri("https://localhost/hold").body(()).expect("request");
        let mut stream = send.send_request(post).await.expect("send request");
        stream.send_data(Bytes::from_static(b"some of the body")).await.expect("send body");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "the handler holds its body");
        stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
        until_dropped(&dropped, 2, "RESET_STREAM").await;

        // An endless response, read for a while, then dropped: quinn stops
        // the stream (`STOP_SENDING`). (h3-quinn's own `stop_sending`
        // panics once a read has waited.)
        let mut stream = send.send_request(get("/forever")).await.expect("send request");
        stream.finish().await.expect("finish request");
        assert_eq!(stream.recv_response().await.expect("response head").status(), 200);
        let mut got = 0;
        while got < 1024 * 1024 {
            got += stream.recv_data().await.expect("body").expect("more body").remaining();
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 2, "the body is still being made");
        drop(stream);
        until_dropped(&dropped, 3, "STOP_SENDING mid-body").await;

        // The connection goes on.
        assert_eq!(request(&mut send, "GET", "/id/7", b"").await.body, b"id 7");
    });
}

/// A server holding every transfer to 1,000 bytes a second after 1 s.
fn start_paced(dir: &Path) -> ServerHandle {
    let rate = Some(peregrine::MinDataRate { bytes_per_second: 1000, grace: Duration::from_secs(1) });
    start_with(
        dir,
        Config { workers: 1, min_request_body_rate: rate, min_response_rate: rate, ..Config::default() },
    )
}

#[test]
fn a_request_body_trickled_below_the_minimum_rate_is_answered_408() {
    let dir = certs();
    let server = start_paced(&dir);
    let addr = server.local_addr();
    local().block_on(&runtime(), async move {
        let endpoint = client(&dir);
        let (mut good, _good_conn) = h3_client(&endpoint, addr).await;
        // A buffered route, then a streaming one.
        for path in ["/echo", "/upload"] {
            let (mut send, _conn) = h3_client(&endpoint, addr).await;
            let req = http::Request::builder()
                .method("POST")
                .uri(format!("https://localhost{path}"))
                .body(())
                .expect("request");
            let stream = send.send_request(req).await.expect("send request");
            let (mut body, mut answer) = stream.split();
            // 20 bytes a second, forever.
            let trickle = tokio::task::spawn_local(async move {
                while body.send_data(Bytes::from_static(b"0123456789")).await.is_ok() {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
            let started = std::time::Instant::now();
            let response = tokio::time::timeout(Duration::from_secs(8), async {
                // Others are served meanwhile.
                assert_eq!(request(&mut good, "GET", "/id/1", b"").await.body, b"id 1");
                answer.recv_response().await
            })
            .await
            .expect("the slow body is cut")
            .expect("a response");
            assert_eq!(response.status(), 408, "{path}");
            assert!(started.elapsed() >= Duration::from_secs(1), "cut within the grace period");
            trickle.abort();
        }
        assert_eq!(request(&mut good, "GET", "/id/2", b"").await.body, b"id 2");
    });
}

#[test]
fn a_client_that_stops_reading_a_response_is_reset() {
    let dir = certs();
    let server = start_paced(&dir);
    let addr = server.local_addr();
    local().block_on(&runtime(), async move {
        // A client with 16 KiB stream windows that never reads: the server
        // fills the window, then waits on the client.
        let endpoint = client(&dir);
        let mut transport = quinn::TransportConfig::default();
        transport.stream_receive_window(quinn::VarInt::from_u32(16 * 1024));
        let mut config = client_config(&dir);
        config.transport_config(Arc::new(transport));
        let conn =
            endpoint.connect_with(config, addr, "localhost").expect("connect").await.expect("QUIC handshake");
        let (mut good, _good_conn) = h3_client(&endpoint, addr).await;

        // GET /large on a raw request stream: `:method GET`, `:scheme
        // https`, `:authority localhost`, `:path /large` (static name 1,
        // literal value).
        let mut block = vec![0x00, 0x00, 0xd1, 0xd7, 0x50, 0x09];
        block.extend_from_slice(b"localhost");
        block.extend_from_slice(&[0x51, 0x06]);
        block.extend_from_slice(b"/large");
        let mut frame = vec![0x01, block.len() as u8];
        frame.extend_from_slice(&block);
        let (mut send, mut recv) = conn.open_bi().await.expect("open a request stream");
        send.write_all(&frame).await.expect("write HEADERS");
        send.finish().expect("end the request");
        let started = std::time::Instant::now();
        let reset = tokio::time::timeout(Duration::from_secs(8), async {
            // Others are served meanwhile.
            assert_eq!(request(&mut good, "GET", "/id/1", b"").await.body, b"id 1");
            recv.received_reset().await
        })
        .await
        .expect("the slow reader is cut");
        const H3_REQUEST_CANCELLED: u64 = 0x10c;
        assert_eq!(reset.expect("a reset").map(|code| code.into_inner()), Some(H3_REQUEST_CANCELLED));
        assert!(started.elapsed() >= Duration::from_secs(1), "cut within the grace period");
        assert!(conn.close_reason().is_none(), "only the stream is cut");
        assert_eq!(request(&mut good, "GET", "/id/2", b"").await.body, b"id 2");
    });
}
