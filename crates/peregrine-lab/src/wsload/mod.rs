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
//!
//! `peregrine-lab stress` uses it too: `--json` runs are the WebSocket load
//! of its scenarios (`--protocol ws`), and its shutdown scenario drives
//! [`open_all`] and [`echo_loops`] in its own process to see each socket's
//! close code. A socket that cannot be opened (a `503` at the server's
//! connection limit, a failed connect) is counted, not fatal, and every
//! echo's latency goes into a [`Latencies`] histogram.

use std::cell::{Cell, RefCell};
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::rig::sources;
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

pub(crate) struct Target {
    pub(crate) addr: SocketAddr,
    pub(crate) host: String,
    pub(crate) path: String,
}

pub(crate) fn parse_url(url: &str) -> Result<Target, String> {
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
pub(crate) struct Socket {
    io: SocketIo,
    buf: Vec<u8>,
    /// The status code of the server's close frame, once one arrived.
    pub(crate) close_code: Option<u16>,
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
    let tcp = sources::connect(target.addr).await.map_err(|e| format!("connect: {e}"))?;
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
        Ok(Socket {
            io: SocketIo::H2 { send, recv: response.into_body() },
            buf: Vec::with_capacity(4096),
            close_code: None,
        })
    }

    pub(crate) async fn open(target: &Target) -> Result<Socket, String> {
        let mut s = sources::connect(target.addr).await.map_err(|e| format!("connect: {e}"))?;
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
                return Ok(Socket { io: SocketIo::H1(s), buf, close_code: None });
            }
            read_more(&mut s, &mut buf).await?;
        }
    }

    /// Sends `message` (a whole client frame) and waits for one data frame
    /// back of `expect_len` payload bytes; pings are answered. A close
    /// frame from the server ends it with an error, its code kept in
    /// [`Socket::close_code`].
    pub(crate) async fn echo(&mut self, message: &[u8], expect_len: usize) -> Result<(), String> {
        self.io.write_all(message).await?;
        loop {
            if let Some(f) = parse_frame(&self.buf)? {
                let (opcode, len, payload_len) = (f.opcode, f.len, f.payload.len());
                let pong = (opcode == 0x9).then(|| frame(0x8A, f.payload));
                // RFC 6455 §7.1.5: a close frame without a code is 1005.
                let code = match f.payload {
                    [a, b, ..] => u16::from_be_bytes([*a, *b]),
                    _ => 1005,
                };
                self.buf.drain(..len);
                match opcode {
                    0x1 | 0x2 if payload_len == expect_len => return Ok(()),
                    0x9 => {
                        let pong = pong.unwrap_or_default();
                        self.io.write_all(&pong).await?;
                    }
                    0xA => {}
                    0x8 => {
                        let code = *self.close_code.insert(code);
                        return Err(format!("the server closed the socket with code {code}"));
                    }
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

/// What opening a batch of sockets gave: the open ones, and how many could
/// not be opened (with the first reason).
pub(crate) struct Opened {
    pub(crate) sockets: Vec<Socket>,
    pub(crate) failed: usize,
    pub(crate) first_error: Option<String>,
}

impl Opened {
    fn push(&mut self, socket: Result<Socket, String>) {
        match socket {
            Ok(s) => self.sockets.push(s),
            Err(e) => {
                self.failed += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    /// All of them, or the first reason one was not opened.
    fn all(self) -> Result<Vec<Socket>, String> {
        match self.first_error {
            Some(e) => Err(format!("{} sockets not opened; the first: {e}", self.failed)),
            None => Ok(self.sockets),
        }
    }
}

/// Opens `n` sockets, a bounded number of handshakes at a time; over
/// HTTP/2 with `per_h2` sockets per connection.
pub(crate) async fn open_all(target: &Rc<Target>, n: usize, per_h2: Option<usize>) -> Opened {
    let mut opened = Opened { sockets: Vec::with_capacity(n), failed: 0, first_error: None };
    if let Some(per) = per_h2 {
        open_all_h2(target, n, per.max(1), &mut opened).await;
        return opened;
    }
    for batch in (0..n).collect::<Vec<_>>().chunks(256) {
        let opening = batch.iter().map(|_| {
            let target = Rc::clone(target);
            async move { Socket::open(&target).await }
        });
        for socket in futures_join(opening).await {
            opened.push(socket);
        }
    }
    opened
}

async fn open_all_h2(target: &Rc<Target>, n: usize, per: usize, opened: &mut Opened) {
    while opened.sockets.len() + opened.failed < n {
        let count = per.min(n - opened.sockets.len() - opened.failed);
        let h2 = match h2_connect(target).await {
            Ok(h2) => h2,
            Err(e) => {
                for _ in 0..count {
                    opened.push(Err(e.clone()));
                }
                continue;
            }
        };
        let opening = (0..count).map(|_| {
            let (h2, target) = (h2.clone(), Rc::clone(target));
            async move { Socket::open_h2(h2, &target).await }
        });
        for socket in futures_join(opening).await {
            opened.push(socket);
        }
    }
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

/// Echo latencies in a fixed histogram (0.1 ms buckets up to 60 s), so a
/// long run keeps no per-message list.
pub(crate) struct Latencies {
    buckets: Vec<u32>,
    count: u64,
    max_ms: f64,
}

impl Latencies {
    const BUCKET_MS: f64 = 0.1;
    const BUCKETS: usize = 600_000;

    pub(crate) fn new() -> Latencies {
        Latencies { buckets: vec![0; Latencies::BUCKETS], count: 0, max_ms: 0.0 }
    }

    pub(crate) fn record(&mut self, ms: f64) {
        let i = ((ms / Latencies::BUCKET_MS) as usize).min(Latencies::BUCKETS - 1);
        self.buckets[i] = self.buckets[i].saturating_add(1);
        self.count += 1;
        self.max_ms = self.max_ms.max(ms);
    }

    /// The `p`th percentile (upper edge of its bucket); `None` when empty.
    pub(crate) fn percentile(&self, p: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += u64::from(n);
            if seen >= rank {
                // The last bucket holds everything past it: its only bound
                // is the maximum.
                if i + 1 == Latencies::BUCKETS {
                    return Some(self.max_ms);
                }
                return Some(((i + 1) as f64 * Latencies::BUCKET_MS).min(self.max_ms));
            }
        }
        Some(self.max_ms)
    }
}

/// What the echo loops of [`echo_loops`] count, shared with them.
pub(crate) struct EchoCounts {
    pub(crate) done: Cell<u64>,
    pub(crate) errors: Cell<u64>,
    pub(crate) first_error: RefCell<Option<String>>,
    pub(crate) latencies: RefCell<Latencies>,
    pub(crate) stop: Cell<bool>,
}

impl EchoCounts {
    pub(crate) fn new() -> EchoCounts {
        EchoCounts {
            done: Cell::new(0),
            errors: Cell::new(0),
            first_error: RefCell::new(None),
            latencies: RefCell::new(Latencies::new()),
            stop: Cell::new(false),
        }
    }
}

/// How one echo loop ended: stopped, or with the error that ended it and
/// the server's close code if it sent one.
pub(crate) enum LoopEnd {
    Stopped,
    Failed { close_code: Option<u16> },
}

/// Longest an echo loop waits for one echo before counting its socket as
/// failed.
pub(crate) const ECHO_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs one echo loop per socket (send `message`, wait for its echo of
/// `size` bytes, again) until `counts.stop` is set or the socket fails.
pub(crate) fn echo_loops(
    sockets: Vec<Socket>,
    message: Rc<Vec<u8>>,
    size: usize,
    counts: &Rc<EchoCounts>,
) -> Vec<tokio::task::JoinHandle<LoopEnd>> {
    sockets
        .into_iter()
        .map(|mut socket| {
            let (message, counts) = (Rc::clone(&message), Rc::clone(counts));
            tokio::task::spawn_local(async move {
                while !counts.stop.get() {
                    let sent = Instant::now();
                    let echoed = tokio::time::timeout(ECHO_TIMEOUT, socket.echo(&message, size))
                        .await
                        .unwrap_or_else(|_| Err(format!("no echo within {ECHO_TIMEOUT:?}")));
                    if let Err(e) = echoed {
                        if counts.stop.get() && socket.close_code.is_none() {
                            return LoopEnd::Stopped;
                        }
                        counts.errors.set(counts.errors.get() + 1);
                        counts.first_error.borrow_mut().get_or_insert(e);
                        return LoopEnd::Failed { close_code: socket.close_code };
                    }
                    counts.latencies.borrow_mut().record(sent.elapsed().as_secs_f64() * 1000.0);
                    counts.done.set(counts.done.get() + 1);
                }
                LoopEnd::Stopped
            })
        })
        .collect()
}

/// One throughput run as `--json` prints it (and `peregrine-lab stress`
/// reads it back).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default)]
pub(crate) struct EchoReport {
    pub(crate) connections: usize,
    pub(crate) h2_per_connection: Option<usize>,
    /// Sockets that could not be opened (refused, failed to connect).
    pub(crate) open_failed: usize,
    pub(crate) first_open_error: Option<String>,
    /// Echoes completed while measuring.
    pub(crate) messages: u64,
    pub(crate) seconds: f64,
    pub(crate) messages_per_sec: f64,
    pub(crate) messages_per_server_cpu_sec: Option<f64>,
    /// Sockets that failed after opening (over the whole run).
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) latency_p50_ms: Option<f64>,
    pub(crate) latency_p99_ms: Option<f64>,
    pub(crate) latency_max_ms: Option<f64>,
    pub(crate) server_rss_kib: Option<u64>,
}

async fn throughput(args: &WsLoadArgs, target: Rc<Target>) -> Result<String, String> {
    let opened = open_all(&target, args.connections, args.h2).await;
    if opened.sockets.is_empty() {
        return Err(format!("no socket opened ({:?})", opened.first_error));
    }
    let payload = vec![b'x'; args.size];
    let message = Rc::new(frame(if args.binary { 0x82 } else { 0x81 }, &payload));
    let counts = Rc::new(EchoCounts::new());
    let _loops = echo_loops(opened.sockets, message, args.size, &counts);
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let (count0, cpu0, t0) = (counts.done.get(), server_cpu(args.server_pid), Instant::now());
    tokio::time::sleep(Duration::from_secs_f64(args.duration)).await;
    let (count1, cpu1, elapsed) =
        (counts.done.get(), server_cpu(args.server_pid), t0.elapsed().as_secs_f64());
    counts.stop.set(true);
    let messages = count1 - count0;
    let per_sec = messages as f64 / elapsed;
    let per_cpu = match (cpu0, cpu1) {
        (Some(a), Some(b)) if b > a => Some(messages as f64 / (b - a)),
        _ => None,
    };
    let rss = args.server_pid.and_then(procfs::rss_kib);
    let latencies = counts.latencies.borrow();
    let report = EchoReport {
        connections: args.connections,
        h2_per_connection: args.h2,
        open_failed: opened.failed,
        first_open_error: opened.first_error.clone(),
        messages,
        seconds: (elapsed * 1000.0).round() / 1000.0,
        messages_per_sec: per_sec.round(),
        messages_per_server_cpu_sec: per_cpu.map(f64::round),
        errors: counts.errors.get(),
        first_error: counts.first_error.borrow().clone(),
        latency_p50_ms: latencies.percentile(50.0),
        latency_p99_ms: latencies.percentile(99.0),
        latency_max_ms: latencies.percentile(100.0),
        server_rss_kib: rss,
    };
    if args.json {
        return serde_json::to_string(&report).map_err(|e| e.to_string());
    }
    let over = match args.h2 {
        Some(per) => format!(" over HTTP/2 ({} per connection)", per.max(1)),
        None => String::new(),
    };
    let mut text = format!(
        "{} sockets{over}, {}-byte messages: {messages} echoes in {elapsed:.2} s = {per_sec:.0} messages/s",
        args.connections, args.size
    );
    if let Some(v) = per_cpu {
        text.push_str(&format!(", {v:.0} per server CPU-second"));
    }
    if let Some(kib) = rss {
        text.push_str(&format!(", server RSS {:.1} MiB", kib as f64 / 1024.0));
    }
    if let (Some(p50), Some(p99)) = (report.latency_p50_ms, report.latency_p99_ms) {
        text.push_str(&format!(", latency p50 {p50:.1} ms, p99 {p99:.1} ms"));
    }
    text.push_str(&format!(", {} errors", report.errors));
    if report.open_failed > 0 {
        text.push_str(&format!(", {} not opened ({:?})", report.open_failed, report.first_open_error));
    }
    Ok(text)
}

fn server_cpu(pid: Option<u32>) -> Option<f64> {
    pid.and_then(|p| procfs::cpu_secs(p).ok())
}

async fn memory(args: &WsLoadArgs, target: Rc<Target>) -> Result<String, String> {
    let pid = args.server_pid.ok_or("--memory needs --server-pid")?;
    let rss = || procfs::rss_kib(pid).ok_or_else(|| format!("cannot read the RSS of process {pid}"));
    let before = rss()?;
    let mut sockets = open_all(&target, args.connections, args.h2).await.all()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_percentiles_come_from_the_histogram() {
        let mut l = Latencies::new();
        assert_eq!(l.percentile(50.0), None);
        for i in 1..=100 {
            l.record(i as f64);
        }
        l.record(70_000.0);
        let p50 = l.percentile(50.0).unwrap();
        assert!((50.0..=51.2).contains(&p50), "{p50}");
        let p99 = l.percentile(99.0).unwrap();
        assert!((99.0..=101.2).contains(&p99), "{p99}");
        // Past the last bucket the maximum is still exact.
        assert_eq!(l.percentile(100.0), Some(70_000.0));
    }

    #[test]
    fn the_json_report_keeps_whole_counts_for_scripts() {
        let report = EchoReport { messages: 1234, messages_per_sec: 617.0, ..EchoReport::default() };
        let text = serde_json::to_string(&report).unwrap();
        // scripts/callgrind and scripts/ws-bench grep these.
        assert!(text.contains("\"messages\":1234,"), "{text}");
        assert!(text.contains("\"messages_per_sec\":617"), "{text}");
        let back: EchoReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back.messages, 1234);
    }
}
