//! The seven TFB test types on hyper 1 (HTTP/1.1 only), a peer for
//! peregrine's lab.
//!
//! Usage: `peer-hyper [--addr HOST:PORT] [--workers N]`. Without `--addr` it
//! listens on `0.0.0.0:$PORT` (8080 if `PORT` is unset); without `--workers`
//! it runs one worker per available CPU. `DATABASE_URL` (postgres://...)
//! enables the database tests; without it they answer 503.
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

async fn serve(listener: TcpListener, url: Option<String>) {
    let worker = Rc::new(Worker::new(url).await);
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

fn run_worker(listener: std::net::TcpListener, url: Option<String>) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        serve(TcpListener::from_std(listener)?, url).await;
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
    eprintln!("peer-hyper listening on {} with {} workers", args.addr, args.workers);
    // Workers only return on error; the first one to end ends the process.
    let (done, ended) = std::sync::mpsc::channel();
    for (i, listener) in listeners.into_iter().enumerate() {
        let url = url.clone();
        let done = done.clone();
        std::thread::Builder::new()
            .name(format!("hyper-worker-{i}"))
            .spawn(move || {
                let result = run_worker(listener, url);
                let _ = done.send(result);
            })
            .expect("spawn a worker thread");
    }
    if let Ok(Err(e)) = ended.recv() {
        eprintln!("peer-hyper: worker failed: {e}");
    }
    std::process::exit(1);
}
