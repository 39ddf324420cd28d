//! `peregrine-lab ws-load`: WebSocket echo load, as HttpArena's echo-ws
//! runs it: N connections, one message in flight on each (send, wait for
//! the echo, send again), for a fixed time; messages/s, and with
//! `--server-pid` messages per server CPU-second. `--memory` instead
//! measures the server's resident memory per idle connection, and after a
//! burst of 1 MiB messages, whether it comes back down.
//!
//! `--h2 K` runs the same sockets over HTTP/2 instead (RFC 8441: an
//! extended `CONNECT` per socket, on h2c connections with prior knowledge),
//! K sockets per connection, so HTTP/1.1 and HTTP/2 can be compared on one
//! endpoint.
//!
//! ```text
//! peregrine-lab ws-load ws://127.0.0.1:8080/ws -c 512 -d 5 --cpu 1 --server-pid 1234
//! peregrine-lab ws-load ws://127.0.0.1:8080/ws -c 512 --h2 64 --cpu 1 --server-pid 1234
//! peregrine-lab ws-load ws://127.0.0.1:8080/ws -c 4096 --memory --server-pid 1234
//! ```
//!
//! One current-thread tokio runtime (pinned with `--cpu`) drives every
//! connection, so the client costs one CPU at most and the server's CPU is
//! measured apart from it.

use std::cell::Cell;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::rig::wsframe::{frame, handshake, parse_frame};
use crate::rig::{cpu, fdlimit, procfs};

#[derive(clap::Args, Debug)]
pub struct WsLoadArgs {
    /// `ws://HOST:PORT/PATH` of an echo endpoint.
    url: String,
    /// Connections, each with one message in flight.
    #[arg(short = 'c', long, default_value_t = 512)]
    connections: usize,
    /// Seconds measured.
    #[arg(short = 'd', long, default_value_t = 5.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Payload bytes per message (echo-ws sends 5).
    #[arg(long, default_value_t = 5)]
    size: usize,
    /// Send binary messages instead of text.
    #[arg(long)]
    binary: bool,
    /// Over HTTP/2 (RFC 8441, h2c with prior knowledge): this many sockets
    /// share each connection (`-c` counts sockets).
    #[arg(long, value_name = "SOCKETS_PER_CONNECTION")]
    h2: Option<usize>,
    /// Pin this process to these CPUs (comma-separated).
    #[arg(long)]
    cpu: Option<String>,
    /// The server's PID: adds messages per server CPU-second (and is
    /// needed for --memory).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Measure memory instead of throughput: per idle connection, then
    /// after each of 64 connections echoes a 1 MiB message, and again after
    /// those connections idle for a few seconds.
    #[arg(long)]
    memory: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
}

fn parse_url(url: &str) -> Result<Target, String> {
    let rest = url.strip_prefix("ws://").ok_or_else(|| format!("{url:?}: only ws:// URLs"))?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host:?} resolves to no address"))?;
    Ok(Target { addr, host: host.to_owned(), path: path.to_owned() })
}

pub fn run(args: WsLoadArgs) -> ExitCode {
    if let Some(cpus) = &args.cpu {
        cpu::pin_self(cpus);
    }
    let limit = fdlimit::raise();
    if args.connections as u64 + 64 > limit {
        eprintln!("ws-load: {} connections need more than the open-files limit of {limit}", args.connections);
        return ExitCode::from(2);
    }
    let target = match parse_url(&args.url) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ws-load: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ws-load: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = tokio::task::LocalSet::new();
    let result = if args.memory {
        local.block_on(&rt, memory(&args, Rc::new(target)))
    } else {
        local.block_on(&rt, throughput(&args, Rc::new(target)))
    };
    match result {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ws-load: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A client WebSocket: one connection after its `101`, or one HTTP/2
/// stream after its `200`.
struct Socket {
    io: SocketIo,
    buf: Vec<u8>,
}

enum SocketIo {
    H1(TcpStream),
    H2 { send: h2::SendStream<Bytes>, recv: h2::RecvStream },
}

impl SocketIo {
    async fn write_all(&mut self, bytes: &[u8]) -> Result<(), String> {
        match self {
            SocketIo::H1(s) => s.write_all(bytes).await.map_err(|e| format!("write: {e}")),
            // Messages are small: `h2` queues past the window if need be.
            SocketIo::H2 { send, .. } => {
                send.send_data(Bytes::copy_from_slice(bytes), false).map_err(|e| format!("send: {e}"))
            }
        }
    }

    async fn read_more(&mut self, buf: &mut Vec<u8>) -> Result<(), String> {
        match self {
            SocketIo::H1(s) => read_more(s, buf).await,
            SocketIo::H2 { recv, .. } => match recv.data().await {
                Some(Ok(data)) => {
                    buf.extend_from_slice(&data);
                    let _ = recv.flow_control().release_capacity(data.len());
                    Ok(())
                }
                Some(Err(e)) => Err(format!("stream: {e}")),
                None => Err("the server ended the stream".into()),
            },
        }
    }
}

/// An h2c connection that has the server's SETTINGS with
/// `SETTINGS_ENABLE_CONNECT_PROTOCOL`.
async fn h2_connect(target: &Target) -> Result<SendRequest<Bytes>, String> {
    let tcp = TcpStream::connect(target.addr).await.map_err(|e| format!("connect: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let (send, conn) = h2::client::Builder::new()
        .initial_connection_window_size(16 << 20)
        .handshake(tcp)
        .await
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    let started = Instant::now();
    let mut send = send.ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
    while !send.is_extended_connect_protocol_enabled() {
        if started.elapsed() > Duration::from_secs(5) {
            return Err("the server does not announce SETTINGS_ENABLE_CONNECT_PROTOCOL".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        send = send.ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
    }
    Ok(send)
}

impl Socket {
    /// An extended CONNECT on `h2`.
    async fn open_h2(h2: SendRequest<Bytes>, target: &Target) -> Result<Socket, String> {
        let mut h2 = h2.ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
        let req = http::Request::builder()
            .method("CONNECT")
            .uri(format!("http://{}{}", target.host, target.path))
            .header("sec-websocket-version", "13")
            .extension(h2::ext::Protocol::from("websocket"))
            .body(())
            .map_err(|e| e.to_string())?;
        let (response, send) = h2.send_request(req, false).map_err(|e| format!("extended CONNECT: {e}"))?;
        let response = response.await.map_err(|e| format!("extended CONNECT: {e}"))?;
        if response.status() != 200 {
            return Err(format!("extended CONNECT answered {}", response.status()));
        }
        Ok(Socket { io: SocketIo::H2 { send, recv: response.into_body() }, buf: Vec::with_capacity(4096) })
    }

    async fn open(target: &Target) -> Result<Socket, String> {
        let mut s = TcpStream::connect(target.addr).await.map_err(|e| format!("connect: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.write_all(&handshake(&target.host, &target.path, ""))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let mut buf = Vec::with_capacity(4096);
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                if !buf.starts_with(b"HTTP/1.1 101") {
                    let line = String::from_utf8_lossy(&buf[..end]).lines().next().unwrap_or("").to_owned();
                    return Err(format!("expected 101, got {line:?}"));
                }
                buf.drain(..end + 4);
                return Ok(Socket { io: SocketIo::H1(s), buf });
            }
            read_more(&mut s, &mut buf).await?;
        }
    }

    /// Sends `message` (a whole client frame) and waits for one data frame
    /// back of `expect_len` payload bytes; pings are answered.
    async fn echo(&mut self, message: &[u8], expect_len: usize) -> Result<(), String> {
        self.io.write_all(message).await?;
        loop {
            if let Some(f) = parse_frame(&self.buf)? {
                let (opcode, len, payload_len) = (f.opcode, f.len, f.payload.len());
                let pong = (opcode == 0x9).then(|| frame(0x8A, f.payload));
                self.buf.drain(..len);
                match opcode {
                    0x1 | 0x2 if payload_len == expect_len => return Ok(()),
                    0x9 => {
                        let pong = pong.unwrap_or_default();
                        self.io.write_all(&pong).await?;
                    }
                    0xA => {}
                    other => return Err(format!("unexpected frame: opcode {other:#x}, {payload_len} bytes")),
                }
                continue;
            }
            self.io.read_more(&mut self.buf).await?;
        }
    }
}

async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<(), String> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(buf.len().max(4096));
    }
    let n = s.read_buf(buf).await.map_err(|e| format!("read: {e}"))?;
    if n == 0 {
        return Err("the server closed the connection".into());
    }
    Ok(())
}

/// Opens `n` sockets, a bounded number of handshakes at a time; over
/// HTTP/2 with `per_h2` sockets per connection.
async fn open_all(target: &Rc<Target>, n: usize, per_h2: Option<usize>) -> Result<Vec<Socket>, String> {
    if let Some(per) = per_h2 {
        return open_all_h2(target, n, per.max(1)).await;
    }
    let mut sockets = Vec::with_capacity(n);
    for batch in (0..n).collect::<Vec<_>>().chunks(256) {
        let opening = batch.iter().map(|_| {
            let target = Rc::clone(target);
            async move { Socket::open(&target).await }
        });
        for socket in futures_join(opening).await {
            sockets.push(socket?);
        }
    }
    Ok(sockets)
}

async fn open_all_h2(target: &Rc<Target>, n: usize, per: usize) -> Result<Vec<Socket>, String> {
    let mut sockets = Vec::with_capacity(n);
    while sockets.len() < n {
        let h2 = h2_connect(target).await?;
        let count = per.min(n - sockets.len());
        let opening = (0..count).map(|_| {
            let (h2, target) = (h2.clone(), Rc::clone(target));
            async move { Socket::open_h2(h2, &target).await }
        });
        for socket in futures_join(opening).await {
            sockets.push(socket?);
        }
    }
    Ok(sockets)
}

/// Runs futures concurrently on this thread and collects their outputs.
async fn futures_join<F: std::future::Future + 'static>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let handles: Vec<_> = futs.map(tokio::task::spawn_local).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        if let Ok(v) = h.await {
            out.push(v);
        }
    }
    out
}

async fn throughput(args: &WsLoadArgs, target: Rc<Target>) -> Result<String, String> {
    let sockets = open_all(&target, args.connections, args.h2).await?;
    let payload = vec![b'x'; args.size];
    let message = Rc::new(frame(if args.binary { 0x82 } else { 0x81 }, &payload));
    let done = Rc::new(Cell::new(0u64));
    let errors = Rc::new(Cell::new(0u64));
    let stop = Rc::new(Cell::new(false));
    let size = args.size;
    for mut socket in sockets {
        let (message, done, errors, stop) =
            (Rc::clone(&message), Rc::clone(&done), Rc::clone(&errors), Rc::clone(&stop));
        tokio::task::spawn_local(async move {
            while !stop.get() {
                if socket.echo(&message, size).await.is_err() {
                    errors.set(errors.get() + 1);
                    return;
                }
                done.set(done.get() + 1);
            }
        });
    }
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let (count0, cpu0, t0) = (done.get(), server_cpu(args.server_pid), Instant::now());
    tokio::time::sleep(Duration::from_secs_f64(args.duration)).await;
    let (count1, cpu1, elapsed) = (done.get(), server_cpu(args.server_pid), t0.elapsed().as_secs_f64());
    stop.set(true);
    let messages = count1 - count0;
    let per_sec = messages as f64 / elapsed;
    let per_cpu = match (cpu0, cpu1) {
        (Some(a), Some(b)) if b > a => Some(messages as f64 / (b - a)),
        _ => None,
    };
    let rss = args.server_pid.and_then(procfs::rss_kib);
    if args.json {
        return Ok(format!(
            "{{\"connections\":{},\"h2_per_connection\":{},\"messages\":{messages},\"seconds\":{elapsed:.3},\"messages_per_sec\":{per_sec:.0},\"messages_per_server_cpu_sec\":{},\"errors\":{},\"server_rss_kib\":{}}}",
            args.connections,
            args.h2.map_or("null".into(), |v| v.to_string()),
            per_cpu.map_or("null".into(), |v| format!("{v:.0}")),
            errors.get(),
            rss.map_or("null".into(), |v| v.to_string()),
        ));
    }
    let over = match args.h2 {
        Some(per) => format!(" over HTTP/2 ({} per connection)", per.max(1)),
        None => String::new(),
    };
    let mut report = format!(
        "{} sockets{over}, {}-byte messages: {messages} echoes in {elapsed:.2} s = {per_sec:.0} messages/s",
        args.connections, args.size
    );
    if let Some(v) = per_cpu {
        report.push_str(&format!(", {v:.0} per server CPU-second"));
    }
    if let Some(kib) = rss {
        report.push_str(&format!(", server RSS {:.1} MiB", kib as f64 / 1024.0));
    }
    report.push_str(&format!(", {} errors", errors.get()));
    Ok(report)
}

fn server_cpu(pid: Option<u32>) -> Option<f64> {
    pid.and_then(|p| procfs::cpu_secs(p).ok())
}

async fn memory(args: &WsLoadArgs, target: Rc<Target>) -> Result<String, String> {
    let pid = args.server_pid.ok_or("--memory needs --server-pid")?;
    let rss = || procfs::rss_kib(pid).ok_or_else(|| format!("cannot read the RSS of process {pid}"));
    let before = rss()?;
    let mut sockets = open_all(&target, args.connections, args.h2).await?;
    // One small echo each, so every connection is past its handshake and
    // has read a message.
    let small = frame(0x81, b"hello");
    for s in sockets.iter_mut() {
        s.echo(&small, 5).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss()?;
    let per_conn = (idle.saturating_sub(before)) as f64 * 1024.0 / args.connections as f64;
    // A burst: 64 connections each echo a 1 MiB message at once.
    let big = Rc::new(frame(0x82, &vec![7u8; 1 << 20]));
    let burst: Vec<Socket> = sockets.drain(..64.min(sockets.len())).collect();
    let echoed = futures_join(burst.into_iter().map(|mut s| {
        let big = Rc::clone(&big);
        async move {
            let r = s.echo(&big, 1 << 20).await;
            (s, r)
        }
    }))
    .await;
    let mut burst_error = None;
    let mut kept = Vec::new();
    for (s, r) in echoed {
        match r {
            Ok(()) => kept.push(s),
            Err(e) => burst_error = Some(e),
        }
    }
    let after_burst = rss()?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let settled = rss()?;
    drop(kept);
    drop(sockets);
    let mib = |k: u64| k as f64 / 1024.0;
    if args.json {
        return Ok(format!(
            "{{\"connections\":{},\"rss_before_kib\":{before},\"rss_idle_kib\":{idle},\"bytes_per_idle_connection\":{per_conn:.0},\"rss_after_burst_kib\":{after_burst},\"rss_settled_kib\":{settled},\"burst_error\":{}}}",
            args.connections,
            burst_error.map_or("null".into(), |e| format!("{e:?}")),
        ));
    }
    let burst = match burst_error {
        None => "64 x 1 MiB echoed".to_owned(),
        Some(e) => format!("64 x 1 MiB NOT all echoed ({e})"),
    };
    Ok(format!(
        "{} idle connections: RSS {:.1} -> {:.1} MiB = {per_conn:.0} bytes per connection; \
         {burst}: {:.1} MiB right after, {:.1} MiB 3 s later",
        args.connections,
        mib(before),
        mib(idle),
        mib(after_burst),
        mib(settled)
    ))
}
