//! WebSocket over HTTP/2 (RFC 8441) over real sockets, with the `h2`
//! crate's client sending the extended `CONNECT` and this file's own
//! masked client framing on the stream: the SETTINGS announcement, echo
//! with fragments and control frames between, protocol errors and their
//! close codes, subprotocols and permessage-deflate, many sockets and
//! ordinary requests on one connection, refusals, a client's reset, slow
//! readers, idle and shutdown closes, over h2c and over TLS (ALPN `h2`).
//! The handlers are the HTTP/1.1 tests' handlers, unchanged.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::h2client::read_answer;
use common::ws::{echo, frame};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use peregrine::ws::{WebSocketConfig, WebSocketUpgrade};
use peregrine::{Config, Error, IntoResponse, Router, Server, ServerHandle, StatusCode};

/// What the handlers report back to the test.
#[derive(Default)]
struct Probe {
    /// Messages `/flood` has queued.
    sent: AtomicUsize,
    /// `/hold` sockets whose handler is still alive.
    alive: AtomicUsize,
}

/// Counts a live `/hold` handler until dropped.
struct Alive(Arc<Probe>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

fn router(probe: Arc<Probe>) -> Router {
    let small =
        WebSocketConfig { max_message_bytes: 1000, max_frame_bytes: 800, ..WebSocketConfig::default() };
    let idle = WebSocketConfig { idle_timeout: Some(Duration::from_secs(1)), ..WebSocketConfig::default() };
    let deflate =
        WebSocketConfig { permessage_deflate: true, compress_min_bytes: 0, ..WebSocketConfig::default() };
    let guarded = Router::new()
        .get("/guarded", echo)
        .layer(peregrine::middleware::bearer_auth("ws", |t: &str| (t == "tok").then_some(())));
    let flood_probe = Arc::clone(&probe);
    Router::new()
        .merge(guarded)
        .get("/echo", echo)
        .get("/plain", || "plain GET")
        .post("/post-only", || "posted")
        .get("/deflate", move |ws: WebSocketUpgrade| echo(ws.config(deflate.clone())))
        .get("/small", move |ws: WebSocketUpgrade| echo(ws.config(small.clone())))
        .get("/idle", move |ws: WebSocketUpgrade| echo(ws.config(idle.clone())))
        .get(
            "/private",
            |q: peregrine::Query<std::collections::HashMap<String, String>>, ws: WebSocketUpgrade| {
                if q.0.get("token").map(String::as_str) != Some("s3cret") {
                    return Error::new(StatusCode::UNAUTHORIZED, "no token").into_response();
                }
                let origin = ws.origin().unwrap_or("none").to_owned();
                ws.protocols(["v2.chat", "v1.chat"]).on_upgrade(move |mut socket| async move {
                    let protocol = socket.protocol().unwrap_or("none").to_owned();
                    let _ = socket.send(format!("origin={origin} protocol={protocol}")).await;
                    while socket.recv().await.is_some() {}
                })
            },
        )
        // Sends 64 KiB messages as fast as the client takes them.
        .get("/flood", move |ws: WebSocketUpgrade| {
            let probe = Arc::clone(&flood_probe);
            ws.on_upgrade(move |mut socket| async move {
                let chunk = vec![7u8; 64 << 10];
                for _ in 0..1000 {
                    if socket.feed(chunk.clone()).await.is_err() {
                        return;
                    }
                    probe.sent.fetch_add(1, Ordering::SeqCst);
                }
                let _ = socket.flush().await;
            })
        })
        // Never touches its socket: only the stream's reset can end it.
        .get("/hold", move |ws: WebSocketUpgrade| {
            let probe = Arc::clone(&probe);
            ws.on_upgrade(move |_socket| async move {
                probe.alive.fetch_add(1, Ordering::SeqCst);
                let _alive = Alive(probe);
                std::future::pending::<()>().await;
            })
        })
}

fn start_on(listener: peregrine::Listener) -> (ServerHandle, Arc<Probe>) {
    let probe = Arc::new(Probe::default());
    let shared = Arc::clone(&probe);
    let handle = Server::with_config(Config { workers: 1, ..Config::default() })
        .listen(listener)
        .start(move |_| {
            let probe = Arc::clone(&shared);
            async move { router(probe) }
        })
        .expect("server starts");
    (handle, probe)
}

fn start() -> (ServerHandle, Arc<Probe>) {
    start_on(peregrine::Listener::new(([127, 0, 0, 1], 0)))
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// Gives up on a test that hangs.
async fn within<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(common::READ_TIMEOUT, f).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}

type H2 = h2::client::SendRequest<Bytes>;

/// An h2c connection whose SETTINGS (with ENABLE_CONNECT_PROTOCOL) have
/// arrived.
async fn connect(addr: SocketAddr) -> H2 {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    handshake(tcp).await
}

async fn handshake<T>(io: T) -> H2
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // A connection window as browsers have it (the protocol's default,
    // 64 KiB, would let one unread stream stall all the others).
    let (send, conn) = h2::client::Builder::new()
        .initial_connection_window_size(16 << 20)
        .handshake(io)
        .await
        .expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut send = send.ready().await.expect("ready");
    // The server's SETTINGS come in the connection task's first reads.
    let started = Instant::now();
    while !send.is_extended_connect_protocol_enabled() {
        assert!(started.elapsed() < Duration::from_secs(5), "no SETTINGS_ENABLE_CONNECT_PROTOCOL");
        tokio::time::sleep(Duration::from_millis(5)).await;
        send = send.ready().await.expect("ready");
    }
    send
}

/// An extended CONNECT for `path` with `protocol` and extra fields.
fn connect_request(path: &str, protocol: &str, fields: &[(&str, &str)]) -> http::Request<()> {
    let mut req = http::Request::builder()
        .method("CONNECT")
        .uri(format!("http://localhost{path}"))
        .extension(h2::ext::Protocol::from(protocol));
    for (name, value) in fields {
        req = req.header(*name, *value);
    }
    req.body(()).unwrap()
}

/// One WebSocket on one HTTP/2 stream, as a client.
struct Ws {
    send: h2::SendStream<Bytes>,
    recv: h2::RecvStream,
    buf: Vec<u8>,
    headers: http::HeaderMap,
}

/// Sends an extended CONNECT; `Ok` is the open socket, `Err` the refusal
/// (status, body).
async fn try_open(h2: &H2, path: &str, fields: &[(&str, &str)]) -> Result<Ws, (u16, String)> {
    let mut fields = fields.to_vec();
    if !fields.iter().any(|(n, _)| *n == "sec-websocket-version") {
        fields.push(("sec-websocket-version", "13"));
    }
    let mut client = h2.clone().ready().await.expect("ready");
    let (response, send) =
        client.send_request(connect_request(path, "websocket", &fields), false).expect("send");
    let response = within("extended CONNECT answer", response).await.expect("response head");
    let (parts, recv) = response.into_parts();
    if parts.status != 200 {
        let answer = read_rest(recv).await;
        return Err((parts.status.as_u16(), answer));
    }
    Ok(Ws { send, recv, buf: Vec::new(), headers: parts.headers })
}

async fn open(h2: &H2, path: &str) -> Ws {
    match try_open(h2, path, &[]).await {
        Ok(ws) => ws,
        Err((status, body)) => panic!("{path}: {status} {body}"),
    }
}

async fn read_rest(mut recv: h2::RecvStream) -> String {
    let mut body = Vec::new();
    while let Some(Ok(data)) = recv.data().await {
        body.extend_from_slice(&data);
        let _ = recv.flow_control().release_capacity(data.len());
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// A masked client frame.
impl Ws {
    async fn send_raw(&mut self, bytes: Vec<u8>) {
        send_all_open(&mut self.send, Bytes::from(bytes)).await;
    }

    async fn send(&mut self, b0: u8, payload: &[u8]) {
        self.send_raw(frame(b0, payload)).await;
    }

    async fn recv(&mut self) -> (u8, Vec<u8>) {
        within("a frame", self.try_recv()).await.expect("a frame, not the end of the stream")
    }

    /// The next frame, `None` at the end of the stream.
    async fn try_recv(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if self.buf.len() >= 2 {
                assert_eq!(self.buf[1] & 0x80, 0, "server frames are not masked");
                let (len, at) = match self.buf[1] & 0x7f {
                    126 if self.buf.len() >= 4 => {
                        (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 4)
                    }
                    127 if self.buf.len() >= 10 => {
                        (u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize, 10)
                    }
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 2),
                };
                if len != usize::MAX && self.buf.len() >= at + len {
                    let b0 = self.buf[0];
                    let payload = self.buf[at..at + len].to_vec();
                    self.buf.drain(..at + len);
                    return Some((b0, payload));
                }
            }
            match self.recv.data().await {
                Some(Ok(data)) => {
                    self.buf.extend_from_slice(&data);
                    let _ = self.recv.flow_control().release_capacity(data.len());
                }
                Some(Err(e)) => panic!("stream failed: {e}"),
                None => return None,
            }
        }
    }

    /// Expects a close frame with `code`, answers it, then expects the
    /// stream to end (END_STREAM, not a reset). After a protocol error the
    /// server does not wait for the answer (RFC 6455 §7.1.7): its stream
    /// may be gone already (`RST_STREAM(NO_ERROR)` after its END_STREAM).
    async fn expect_close(&mut self, code: u16) {
        let (b0, payload) = self.recv().await;
        assert_eq!(b0, 0x88, "expected a close frame, got {b0:#x} {payload:?}");
        assert_eq!(
            u16::from_be_bytes([payload[0], payload[1]]),
            code,
            "{:?}",
            String::from_utf8_lossy(&payload[2..])
        );
        let answer = frame(0x88, &payload[..2]);
        self.send.reserve_capacity(answer.len());
        if let Some(Ok(n)) =
            within("send capacity", std::future::poll_fn(|cx| self.send.poll_capacity(cx))).await
        {
            if n >= answer.len() {
                let _ = self.send.send_data(Bytes::from(answer), true);
            }
        }
        assert_eq!(
            within("END_STREAM", self.try_recv()).await,
            None,
            "the stream ends after the close handshake"
        );
    }
}

/// Sends `data` on a stream that stays open.
async fn send_all_open(send: &mut h2::SendStream<Bytes>, mut data: Bytes) {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let n = within("send capacity", std::future::poll_fn(|cx| send.poll_capacity(cx)))
            .await
            .expect("capacity")
            .expect("capacity");
        let piece = data.split_to(n.min(data.len()));
        send.send_data(piece, false).expect("send data");
    }
}

#[test]
fn echo_fragments_pings_and_the_close_handshake() {
    let (handle, _) = start();
    block_on(async {
        let h2 = connect(handle.local_addr()).await;
        let mut ws = open(&h2, "/echo").await;
        // No HTTP/1.1 handshake fields on HTTP/2.
        for name in ["sec-websocket-accept", "upgrade", "connection", "content-length"] {
            assert!(!ws.headers.contains_key(name), "{name} in {:?}", ws.headers);
        }
        ws.send(0x81, b"hello").await;
        assert_eq!(ws.recv().await, (0x81, b"hello".to_vec()));
        ws.send(0x82, &[0, 1, 2, 255]).await;
        assert_eq!(ws.recv().await, (0x82, vec![0, 1, 2, 255]));
        // A large binary message, more than one DATA frame and window.
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        ws.send(0x82, &big).await;
        assert_eq!(ws.recv().await, (0x82, big));
        // Fragments with a ping between them: the pong comes first.
        ws.send(0x01, b"frag").await;
        ws.send(0x89, b"p").await;
        ws.send(0x00, b"men").await;
        ws.send(0x80, b"ted").await;
        assert_eq!(ws.recv().await, (0x8A, b"p".to_vec()));
        assert_eq!(ws.recv().await, (0x81, b"fragmented".to_vec()));
        // The client closes; the server echoes the code, then END_STREAM.
        ws.send(0x88, &1000u16.to_be_bytes()).await;
        assert_eq!(ws.recv().await, (0x88, 1000u16.to_be_bytes().to_vec()));
        assert_eq!(within("END_STREAM", ws.try_recv()).await, None);
    });
    handle.shutdown();
}

#[test]
fn protocol_errors_close_with_the_right_code() {
    let (handle, _) = start();
    block_on(async {
        let h2 = connect(handle.local_addr()).await;
        // Unmasked client frame: 1002.
        let mut ws = open(&h2, "/echo").await;
        ws.send_raw(vec![0x81, 0x02, b'h', b'i']).await;
        ws.expect_close(1002).await;
        // Invalid UTF-8 in text: 1007.
        let mut ws = open(&h2, "/echo").await;
        ws.send(0x81, &[0xff, 0xfe]).await;
        ws.expect_close(1007).await;
        // Over the route's message limit: 1009.
        let mut ws = open(&h2, "/small").await;
        ws.send(0x82, &[0; 2000]).await;
        ws.expect_close(1009).await;
        // The connection serves on.
        let mut ws = open(&h2, "/echo").await;
        ws.send(0x81, b"still").await;
        assert_eq!(ws.recv().await, (0x81, b"still".to_vec()));
    });
    handle.shutdown();
}

#[test]
fn subprotocols_origin_middleware_and_permessage_deflate() {
    let (handle, _) = start();
    block_on(async {
        let h2 = connect(handle.local_addr()).await;
        // Extractors run first: no token, no socket.
        let refused = try_open(&h2, "/private", &[]).await.err().expect("refused");
        assert_eq!(refused.0, 401, "{refused:?}");
        let fields = [("sec-websocket-protocol", "v1.chat, v2.chat"), ("origin", "https://app.example")];
        let mut ws = try_open(&h2, "/private?token=s3cret", &fields).await.expect("opens");
        assert_eq!(ws.headers.get("sec-websocket-protocol").unwrap(), "v2.chat");
        assert_eq!(ws.recv().await, (0x81, b"origin=https://app.example protocol=v2.chat".to_vec()));
        // Middleware in front sees the request, and refuses or lets it on.
        assert_eq!(try_open(&h2, "/guarded", &[]).await.err().map(|e| e.0), Some(401));
        let mut ws = try_open(&h2, "/guarded", &[("authorization", "Bearer tok")]).await.expect("opens");
        ws.send(0x81, b"behind middleware").await;
        assert_eq!(ws.recv().await, (0x81, b"behind middleware".to_vec()));

        let offer = [("sec-websocket-extensions", "permessage-deflate; client_max_window_bits")];
        let mut ws = try_open(&h2, "/deflate", &offer).await.expect("opens");
        assert_eq!(ws.headers.get("sec-websocket-extensions").unwrap(), "permessage-deflate");
        let mut tx = Compress::new(Compression::default(), false);
        let mut rx = Decompress::new(false);
        let text = "a message that repeats, a message that repeats".repeat(20);
        for _ in 0..3 {
            let mut wire = Vec::with_capacity(text.len() + 64);
            tx.compress_vec(text.as_bytes(), &mut wire, FlushCompress::Sync).unwrap();
            wire.truncate(wire.len() - 4);
            let half = wire.len() / 2;
            ws.send(0x41, &wire[..half]).await;
            ws.send(0x80, &wire[half..]).await;
            let (b0, mut payload) = ws.recv().await;
            assert_eq!(b0, 0xC1, "compressed text");
            payload.extend_from_slice(&[0, 0, 0xff, 0xff]);
            let mut out = Vec::with_capacity(text.len() + 16);
            rx.decompress_vec(&payload, &mut out, FlushDecompress::Sync).unwrap();
            assert_eq!(out, text.as_bytes());
        }
        // Not agreed on this route: RSV1 is a protocol error.
        let mut ws = try_open(&h2, "/echo", &offer).await.expect("opens");
        assert!(!ws.headers.contains_key("sec-websocket-extensions"));
        ws.send(0xC1, b"x").await;
        ws.expect_close(1002).await;
    });
    handle.shutdown();
}

#[test]
fn many_sockets_and_ordinary_requests_share_one_connection() {
    let (handle, _) = start();
    block_on(async {
        let h2 = connect(handle.local_addr()).await;
        let mut sockets = Vec::new();
        for _ in 0..40 {
            sockets.push(open(&h2, "/echo").await);
        }
        for round in 0..5 {
            for (i, ws) in sockets.iter_mut().enumerate() {
                ws.send(0x81, format!("{round}:{i}").as_bytes()).await;
            }
            // An ordinary request between, on the same connection.
            let mut client = h2.clone().ready().await.unwrap();
            let (response, _) =
                client.send_request(common::h2client::request("GET", "/plain"), true).unwrap();
            let answer = within("GET /plain", read_answer(response)).await;
            assert_eq!((answer.status, answer.body.as_slice()), (200, &b"plain GET"[..]));
            for (i, ws) in sockets.iter_mut().enumerate().rev() {
                assert_eq!(ws.recv().await, (0x81, format!("{round}:{i}").into_bytes()));
            }
        }
    });
    handle.shutdown();
}

#[test]
fn refusals() {
    let (handle, _) = start();
    block_on(async {
        let h2 = connect(handle.local_addr()).await;
        // Another version: 400, naming the one spoken.
        let mut client = h2.clone().ready().await.unwrap();
        let req = connect_request("/echo", "websocket", &[("sec-websocket-version", "8")]);
        let (response, _) = client.send_request(req, false).unwrap();
        let answer = within("version 8", read_answer(response)).await;
        assert_eq!(answer.status, 400);
        assert_eq!(answer.header("sec-websocket-version"), Some("13"));
        // No version at all: 400 too.
        let mut client = h2.clone().ready().await.unwrap();
        let (response, _) = client.send_request(connect_request("/echo", "websocket", &[]), false).unwrap();
        assert_eq!(within("no version", read_answer(response)).await.status, 400);
        // A protocol the server does not speak: 501.
        assert_eq!(
            status_of(&h2, connect_request("/echo", "mqtt", &[("sec-websocket-version", "13")])).await,
            501
        );
        // Routed as the GET it stands for: a route that is no WebSocket
        // route answers as it would a GET, but never with a 2xx; a route
        // without GET says 405, no route 404.
        let ws = [("sec-websocket-version", "13")];
        assert_eq!(status_of(&h2, connect_request("/plain", "websocket", &ws)).await, 400);
        assert_eq!(status_of(&h2, connect_request("/post-only", "websocket", &ws)).await, 405);
        assert_eq!(status_of(&h2, connect_request("/nowhere", "websocket", &ws)).await, 404);
        assert_eq!(status_of(&h2, connect_request("/a/../echo", "websocket", &ws)).await, 400);
        // A plain GET to the WebSocket route over HTTP/2: 426, as on
        // HTTP/1.1.
        assert_eq!(status_of(&h2, common::h2client::request("GET", "/echo")).await, 426);
        // A plain CONNECT (no :protocol) is still refused: this server is
        // no proxy.
        let plain = http::Request::builder().method("CONNECT").uri("localhost:443").body(()).unwrap();
        let status = status_of(&h2, plain).await;
        assert!(status >= 400, "plain CONNECT answered {status}");
        // And the connection serves on.
        let mut ws = open(&h2, "/echo").await;
        ws.send(0x81, b"ok").await;
        assert_eq!(ws.recv().await, (0x81, b"ok".to_vec()));
    });
    handle.shutdown();
}

async fn status_of(h2: &H2, req: http::Request<()>) -> u16 {
    let mut client = h2.clone().ready().await.unwrap();
    let end = req.method() != http::Method::CONNECT;
    let (response, _send) = client.send_request(req, end).unwrap();
    within("answer", read_answer(response)).await.status
}

#[test]
fn a_reset_stream_frees_its_socket_and_the_connection_serves_on() {
    let (handle, probe) = start();
    block_on(async {
        let h2 = connect(handle.local_addr()).await;
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(open(&h2, "/hold").await);
        }
        let started = Instant::now();
        while probe.alive.load(Ordering::SeqCst) < 3 {
            assert!(started.elapsed() < Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for mut ws in held {
            ws.send.send_reset(h2::Reason::CANCEL);
        }
        // The handlers, which never touch their sockets, are dropped.
        let started = Instant::now();
        while probe.alive.load(Ordering::SeqCst) > 0 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{} handlers alive",
                probe.alive.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // A reset echo socket too, then the connection still serves.
        let mut ws = open(&h2, "/echo").await;
        ws.send(0x81, b"a").await;
        assert_eq!(ws.recv().await, (0x81, b"a".to_vec()));
        ws.send.send_reset(h2::Reason::CANCEL);
        let mut ws = open(&h2, "/echo").await;
        ws.send(0x81, b"b").await;
        assert_eq!(ws.recv().await, (0x81, b"b".to_vec()));
    });
    handle.shutdown();
}

#[test]
fn sending_waits_for_a_client_that_does_not_read() {
    let (handle, probe) = start();
    block_on(async {
        let h2 = connect(handle.local_addr()).await;
        let mut ws = open(&h2, "/flood").await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let queued = probe.sent.load(Ordering::SeqCst);
        // 1000 messages of 64 KiB were offered; what was taken is bounded
        // by the windows, the stream's send buffer and the socket's.
        assert!(queued < 50, "{queued} messages of 64 KiB taken by a client reading nothing");
        // Meanwhile the connection serves other streams.
        let mut echo = open(&h2, "/echo").await;
        echo.send(0x81, b"not stuck").await;
        assert_eq!(echo.recv().await, (0x81, b"not stuck".to_vec()));
        for _ in 0..1000 {
            let (b0, payload) = ws.recv().await;
            assert_eq!((b0, payload.len()), (0x82, 64 << 10));
        }
        assert_eq!(probe.sent.load(Ordering::SeqCst), 1000);
    });
    handle.shutdown();
}

#[test]
fn idle_sockets_close_and_shutdown_says_going_away() {
    let (handle, _) = start();
    let addr = handle.local_addr();
    let (tx, rx) = std::sync::mpsc::channel();
    let client = std::thread::spawn(move || {
        block_on(async {
            let h2 = connect(addr).await;
            let mut ws = open(&h2, "/idle").await;
            let started = Instant::now();
            ws.expect_close(1001).await;
            assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());

            let mut ws = open(&h2, "/echo").await;
            ws.send(0x81, b"hi").await;
            assert_eq!(ws.recv().await, (0x81, b"hi".to_vec()));
            tx.send(()).unwrap();
            ws.expect_close(1001).await;
        })
    });
    rx.recv().unwrap();
    handle.shutdown();
    client.join().unwrap();
}

#[cfg(feature = "tls")]
#[test]
fn over_tls_with_alpn_h2() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};

    let dir = std::env::temp_dir().join(format!("peregrine-ws-h2-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/certs");
    assert!(std::process::Command::new(script).arg(&dir).status().expect("scripts/certs").success());
    let tls =
        peregrine::tls::Tls::from_pem_files(dir.join("server.crt"), dir.join("server.key")).expect("cert");
    let (handle, _) = start_on(peregrine::Listener::new(([127, 0, 0, 1], 0)).tls(tls));

    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(dir.join("ca.crt")).expect("ca.crt")).expect("CA");
    let mut config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    block_on(async {
        let tcp = tokio::net::TcpStream::connect(handle.local_addr()).await.unwrap();
        let tls =
            connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.expect("TLS handshake");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let h2 = handshake(tls).await;
        let mut ws = open(&h2, "/echo").await;
        ws.send(0x81, b"over TLS").await;
        assert_eq!(ws.recv().await, (0x81, b"over TLS".to_vec()));
        ws.send(0x88, &1000u16.to_be_bytes()).await;
        assert_eq!(ws.recv().await.0, 0x88);
    });
    handle.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
