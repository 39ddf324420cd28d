//! The seven TFB test types on hyper 1, a peer for peregrine's lab, and
//! HttpArena's `/baseline2` for the HTTP/2 profiles.
//!
//! Usage: `peer-hyper [--addr HOST:PORT] [--workers N]`. Without `--addr` it
//! listens on `0.0.0.0:$PORT` (8080 if `PORT` is unset); without `--workers`
//! it runs one worker per available CPU. `DATABASE_URL` (postgres://...)
//! enables the database tests; without it they answer 503.
//!
//! `--addr` speaks HTTP/1.1 only (hyper's `http1` builder, as the TFB types
//! are measured). HTTP/2 through hyper-util's `auto` builder, hyper's
//! documented way to serve both versions: `H2C_ADDR` adds a listener for
//! HTTP/1.1 and h2c with prior knowledge; `TLS_ADDR` with `TLS_CERT` and
//! `TLS_KEY` (PEM) adds a rustls (tokio-rustls) listener whose ALPN offers
//! `h2` and `http/1.1`.
//!
//! Layout: one thread per worker, each with its own current-thread tokio
//! runtime and its own listening socket on the same address (SO_REUSEPORT,
//! the kernel spreads connections). Nothing is shared between threads, so
//! the service and its database state need not be `Send`; each thread owns
//! one tokio-postgres connection and one cache (see `peer_common::Worker`).

use peer_common as tfb;

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE, SERVER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use serde::Serialize;
use tfb::{count_param, DbError, Message, Worker, DB_UNAVAILABLE};
use tokio::net::TcpListener;

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const HTML: &str = "text/html; charset=utf-8";

fn response(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    // hyper adds Date (cached per second) and Content-Length (the body's
    // exact size) itself.
    let mut res = Response::new(Full::new(body.into()));
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static("hyper"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    res
}

fn json<T: Serialize>(value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_vec(value) {
        Ok(body) => response(StatusCode::OK, JSON, body),
        Err(_) => response(StatusCode::INTERNAL_SERVER_ERROR, TEXT, Bytes::new()),
    }
}

fn unavailable(e: DbError) -> Response<Full<Bytes>> {
    eprintln!("{e}");
    response(StatusCode::SERVICE_UNAVAILABLE, JSON, DB_UNAVAILABLE)
}

fn reply<T: Serialize>(result: Result<T, DbError>) -> Response<Full<Bytes>> {
    match result {
        Ok(value) => json(&value),
        Err(e) => unavailable(e),
    }
}

async fn handle(req: Request<Incoming>, worker: Rc<Worker>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path();
    if path == "/baseline2" {
        return Ok(baseline2(req.uri().query()));
    }
    let known = matches!(
        path,
        "/plaintext" | "/json" | "/db" | "/queries" | "/fortunes" | "/updates" | "/cached-queries"
    );
    if !known {
        return Ok(response(StatusCode::NOT_FOUND, TEXT, Bytes::new()));
    }
    if req.method() != Method::GET {
        let mut res = response(StatusCode::METHOD_NOT_ALLOWED, TEXT, Bytes::new());
        res.headers_mut().insert(ALLOW, HeaderValue::from_static("GET"));
        return Ok(res);
    }
    let query = req.uri().query();
    Ok(match path {
        "/plaintext" => response(StatusCode::OK, TEXT, Bytes::from_static(b"Hello, World!")),
        "/json" => json(&Message { message: "Hello, World!" }),
        "/db" => reply(worker.single().await),
        "/queries" => reply(worker.queries(count_param(query, "queries")).await),
        "/updates" => reply(worker.updates(count_param(query, "queries")).await),
        "/cached-queries" => reply(worker.cached(count_param(query, "count")).await),
        _ => match worker.fortunes().await {
            Ok(html) => response(StatusCode::OK, HTML, html),
            Err(e) => unavailable(e),
        },
    })
}

/// `/baseline2` (HttpArena's HTTP/2 profiles): the sum of the integer query
/// parameters.
fn baseline2(query: Option<&str>) -> Response<Full<Bytes>> {
    let mut sum: i64 = 0;
    for pair in query.unwrap_or("").split('&') {
        let value = pair.split_once('=').map_or("", |(_, v)| v);
        if let Ok(n) = value.parse::<i64>() {
            match sum.checked_add(n) {
                Some(s) => sum = s,
                None => return response(StatusCode::BAD_REQUEST, TEXT, Bytes::from_static(b"sum overflows")),
            }
        }
    }
    response(StatusCode::OK, TEXT, sum.to_string())
}

/// Runs HTTP/2 streams on the worker's `LocalSet`: the service holds an
/// `Rc`, so its futures are not `Send` (hyper's single-threaded example
/// does the same).
#[derive(Clone, Copy)]
struct LocalExec;

impl<F: std::future::Future + 'static> hyper::rt::Executor<F> for LocalExec {
    fn execute(&self, fut: F) {
        tokio::task::spawn_local(fut);
    }
}

/// What a worker's extra listener speaks: HTTP/1.1 and h2c, or TLS.
#[derive(Clone)]
enum Extra {
    H2c,
    Tls(tokio_rustls::TlsAcceptor),
}

/// Serves one extra listener (h2c or TLS) with hyper-util's `auto` builder.
async fn serve_auto(listener: TcpListener, worker: Rc<Worker>, extra: Extra) {
    let mut builder = auto::Builder::new(LocalExec);
    builder.http1().pipeline_flush(true).timer(TokioTimer::new());
    builder.http2().timer(TokioTimer::new());
    let builder = Rc::new(builder);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                eprintln!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (worker, builder, extra) = (worker.clone(), builder.clone(), extra.clone());
        tokio::task::spawn_local(async move {
            let service = service_fn(move |req| handle(req, worker.clone()));
            match extra {
                Extra::H2c => {
                    let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                }
                Extra::Tls(acceptor) => {
                    if let Ok(tls) = acceptor.accept(stream).await {
                        let _ = builder.serve_connection(TokioIo::new(tls), service).await;
                    }
                }
            }
        });
    }
}

/// `TLS_ADDR`, `TLS_CERT` and `TLS_KEY` as an address and an acceptor whose
/// ALPN offers `h2` then `http/1.1`; `None` without `TLS_ADDR`.
fn tls_listener() -> Result<Option<(SocketAddr, tokio_rustls::TlsAcceptor)>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let Some(addr) = std::env::var("TLS_ADDR").ok().filter(|a| !a.is_empty()) else { return Ok(None) };
    let addr = addr.parse().map_err(|_| format!("TLS_ADDR: not HOST:PORT: {addr:?}"))?;
    let var = |name: &str| std::env::var(name).map_err(|_| format!("TLS_ADDR needs {name}"));
    let (cert, key) = (var("TLS_CERT")?, var("TLS_KEY")?);
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("TLS_CERT {cert}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(&key).map_err(|e| format!("TLS_KEY {key}: {e}"))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS certificate: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some((addr, tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))))
}

/// A listener on `addr` that the other workers bind too.
fn reuseport_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}

async fn serve(listener: TcpListener, extras: Vec<(TcpListener, Extra)>, url: Option<String>) {
    let worker = Rc::new(Worker::new(url).await);
    for (listener, extra) in extras {
        tokio::task::spawn_local(serve_auto(listener, worker.clone(), extra));
    }
    let mut http = http1::Builder::new();
    // Answers to pipelined requests are written together, not one write each.
    http.pipeline_flush(true).timer(TokioTimer::new());
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: back off, go on.
                eprintln!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let worker = worker.clone();
        let conn =
            http.serve_connection(TokioIo::new(stream), service_fn(move |req| handle(req, worker.clone())));
        tokio::task::spawn_local(async move {
            let _ = conn.await;
        });
    }
}

fn run_worker(
    listener: std::net::TcpListener,
    extras: Vec<(std::net::TcpListener, Extra)>,
    url: Option<String>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let extras = extras
            .into_iter()
            .map(|(l, extra)| Ok((TcpListener::from_std(l)?, extra)))
            .collect::<io::Result<Vec<_>>>()?;
        serve(TcpListener::from_std(listener)?, extras, url).await;
        Ok(())
    })
}

fn main() {
    let args = match tfb::parse_args("peer-hyper") {
        Ok(args) => args,
        Err(e) => {
            eprintln!("peer-hyper: {e}");
            std::process::exit(2);
        }
    };
    let url = std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("DATABASE_URL is not set: the database tests will answer 503");
    }
    // Every worker's socket is bound here, so a busy port fails at once.
    let listeners: Vec<std::net::TcpListener> =
        match (0..args.workers).map(|_| reuseport_listener(args.addr)).collect() {
            Ok(listeners) => listeners,
            Err(e) => {
                eprintln!("peer-hyper: cannot listen on {}: {e}", args.addr);
                std::process::exit(1);
            }
        };
    let mut extra_addrs = Vec::new();
    if let Some(addr) = std::env::var("H2C_ADDR").ok().filter(|a| !a.is_empty()) {
        match addr.parse::<SocketAddr>() {
            Ok(addr) => extra_addrs.push((addr, Extra::H2c)),
            Err(_) => {
                eprintln!("peer-hyper: H2C_ADDR: not HOST:PORT: {addr:?}");
                std::process::exit(2);
            }
        }
    }
    match tls_listener() {
        Ok(Some((addr, acceptor))) => extra_addrs.push((addr, Extra::Tls(acceptor))),
        Ok(None) => {}
        Err(e) => {
            eprintln!("peer-hyper: {e}");
            std::process::exit(2);
        }
    }
    let mut extras: Vec<Vec<(std::net::TcpListener, Extra)>> = Vec::new();
    for _ in 0..args.workers {
        let mut mine = Vec::new();
        for (addr, extra) in &extra_addrs {
            match reuseport_listener(*addr) {
                Ok(l) => mine.push((l, extra.clone())),
                Err(e) => {
                    eprintln!("peer-hyper: cannot listen on {addr}: {e}");
                    std::process::exit(1);
                }
            }
        }
        extras.push(mine);
    }
    for (addr, extra) in &extra_addrs {
        let what = match extra {
            Extra::H2c => "HTTP/1.1 and h2c",
            Extra::Tls(_) => "TLS (h2, http/1.1)",
        };
        eprintln!("peer-hyper: {what} on {addr}");
    }
    eprintln!("peer-hyper listening on {} with {} workers", args.addr, args.workers);
    // Workers only return on error; the first one to end ends the process.
    let (done, ended) = std::sync::mpsc::channel();
    for (i, (listener, extras)) in listeners.into_iter().zip(extras).enumerate() {
        let url = url.clone();
        let done = done.clone();
        std::thread::Builder::new()
            .name(format!("hyper-worker-{i}"))
            .spawn(move || {
                let result = run_worker(listener, extras, url);
                let _ = done.send(result);
            })
            .expect("spawn a worker thread");
    }
    if let Ok(Err(e)) = ended.recv() {
        eprintln!("peer-hyper: worker failed: {e}");
    }
    std::process::exit(1);
}
