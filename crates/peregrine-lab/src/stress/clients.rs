//! Clients wrk cannot be: slow senders, noise (bad methods, unknown paths,
//! garbage connections), keep-alive loops that notice a truncated response,
//! and timed probes. All run on one current-thread tokio runtime in the lab
//! process, pinned with the rest of the load. Responses are read with
//! [`http_probe`]'s async reader; this module only sorts what went wrong
//! into the categories the scenarios count.

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use http_probe::{self as probe, End, Framing};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::{watch, Semaphore};

use super::protocol::Connector;

/// One HTTP response as the clients need it.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// The server said `Connection: close`.
    pub close: bool,
    pub body: Vec<u8>,
}

/// Why no complete response was read.
#[derive(Debug)]
pub enum ReadError {
    /// The connection ended cleanly before the first byte of a response.
    Closed,
    /// The connection failed (reset) before the first byte of a response.
    Reset(io::Error),
    /// The connection ended or failed after part of a response arrived.
    Truncated(String),
    /// Bytes arrived that are not an HTTP/1.1 response with a length.
    Malformed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Closed => f.write_str("connection closed before any response"),
            ReadError::Reset(e) => write!(f, "connection failed before any response: {e}"),
            ReadError::Truncated(why) => write!(f, "truncated response: {why}"),
            ReadError::Malformed(why) => write!(f, "malformed response: {why}"),
        }
    }
}

/// Reads one response (skipping interim `1xx` ones) with [`http_probe`],
/// holding it to what these clients count on: a `Content-Length` (or no
/// body by definition). Bytes read past its end stay in `buf` for the next
/// call.
pub async fn read_response<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
    buf: &mut Vec<u8>,
) -> Result<Response, ReadError> {
    loop {
        let head = probe::async_io::read_head(stream, buf).await.map_err(|e| match e {
            probe::ReadError::Ended { end: End::Closed, received: 0 } => ReadError::Closed,
            probe::ReadError::Ended { end, received: 0 } => ReadError::Reset(end.to_io_error()),
            probe::ReadError::Ended { end: End::Closed, received } => {
                ReadError::Truncated(format!("connection ended after {received} bytes of a response"))
            }
            probe::ReadError::Ended { end, received } => {
                ReadError::Truncated(format!("{} after {received} bytes of a response", end.describe()))
            }
            probe::ReadError::Malformed(why) => ReadError::Malformed(why),
        })?;
        let length = match head.framing(false) {
            (Framing::ContentLength(n), defects) if defects.is_empty() => n,
            (Framing::None, defects) if defects.is_empty() => 0,
            (_, _) if head.header("content-length").is_none() => {
                return Err(ReadError::Malformed(format!("no Content-Length in {:?}", head.raw_text())))
            }
            (_, defects) => return Err(ReadError::Malformed(defects.join(", "))),
        };
        let response = probe::async_io::read_body(stream, buf, head, false).await;
        if response.cut_short.is_some() {
            return Err(ReadError::Truncated(format!(
                "{} of {length} body bytes, then the connection ended",
                response.body.len()
            )));
        }
        if (100..200).contains(&response.status) {
            continue;
        }
        let close = response.header_all("connection").any(|v| v.eq_ignore_ascii_case("close"));
        return Ok(Response { status: response.status, close, body: response.body });
    }
}

/// A request head for `GET path`.
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: lab\r\n\r\n").into_bytes()
}

// ---------------------------------------------------------------- slow ---

/// What happened to the slow clients.
#[derive(Debug, Default)]
pub struct SlowOutcome {
    pub connected: usize,
    pub connect_failed: usize,
    /// Seconds from a client's first byte until the server closed it.
    pub cut_after: Vec<f64>,
    /// Clients that received a `408` before being closed.
    pub got_408: usize,
    /// Clients whose WebSocket upgrade was answered `101`.
    pub upgraded: usize,
    /// Upgraded clients that then received a close frame with `1008`
    /// (a message arriving below the minimum rate).
    pub got_1008: usize,
    /// Clients that received any other response (their head was never
    /// complete, so anything else is wrong), or another close code.
    pub got_other: usize,
    /// Clients still connected when the scenario stopped waiting.
    pub still_open: usize,
}

impl SlowOutcome {
    /// Adds another round's counts to these.
    pub fn absorb(&mut self, other: SlowOutcome) {
        self.connected += other.connected;
        self.connect_failed += other.connect_failed;
        self.cut_after.extend(other.cut_after);
        self.got_408 += other.got_408;
        self.upgraded += other.upgraded;
        self.got_1008 += other.got_1008;
        self.got_other += other.got_other;
        self.still_open += other.still_open;
    }
}

/// What a slow client does once connected and its prefix is sent.
#[derive(Clone, Debug)]
pub enum Slowness {
    /// Sends these bytes `piece` at a time (a byte, or one whole small
    /// frame), one piece per interval, reading whatever comes.
    Dribble { head: Vec<u8>, piece: usize, interval: Duration },
    /// Sends this message over and over and never reads, with a 4 KiB
    /// receive buffer (a client that never reads what it asked for).
    Flood { message: Vec<u8> },
}

/// Opens `n` connections that each send `prefix` at once and then behave
/// as `slowness` says, and waits (at most `give_up` after the last
/// connected) for the server to close them. `connected` is told how many
/// are connected once all tried; for [`Slowness::Flood`], once each has
/// also stalled (or been cut), so that what is measured beside them is the
/// attack held, not its first second: each flooder then pushes what the
/// server's kernel buffers take, 0.4 to 2 MB (see [`flood`]), on the load
/// generator's own CPU here.
pub async fn slow_clients(
    addr: SocketAddr,
    n: usize,
    prefix: Vec<u8>,
    slowness: Slowness,
    give_up: Duration,
    connected: watch::Sender<usize>,
) -> SlowOutcome {
    let (prefix, slowness) = (Rc::new(prefix), Rc::new(slowness));
    // Connect in waves, so the listen backlog never overflows.
    let connecting = Rc::new(Semaphore::new(128));
    let mut tasks = Vec::with_capacity(n);
    let (up_tx, mut up_rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
    let small_buffers = matches!(*slowness, Slowness::Flood { .. });
    for _ in 0..n {
        let (prefix, slowness) = (Rc::clone(&prefix), Rc::clone(&slowness));
        let (connecting, up) = (Rc::clone(&connecting), up_tx.clone());
        tasks.push(tokio::task::spawn_local(async move {
            let stream = {
                let _permit = connecting.acquire().await;
                connect_retrying_with(addr, 5, small_buffers).await
            };
            let Some(mut stream) = stream else {
                let _ = up.send(false);
                return SlowClient::ConnectFailed;
            };
            let mut up = Some(up);
            if !matches!(*slowness, Slowness::Flood { .. }) {
                announce(&mut up);
            }
            let start = Instant::now();
            if stream.write_all(&prefix).await.is_err() {
                announce(&mut up);
                return cut(start, &[]);
            }
            match &*slowness {
                Slowness::Dribble { head, piece, interval } => {
                    dribble(&mut stream, start, head, (*piece).max(1), *interval, give_up).await
                }
                Slowness::Flood { message } => flood(&mut stream, start, message, give_up, &mut up).await,
            }
        }));
    }
    drop(up_tx);
    let mut outcome = SlowOutcome::default();
    while let Some(ok) = up_rx.recv().await {
        if ok {
            outcome.connected += 1;
        } else {
            outcome.connect_failed += 1;
        }
    }
    let _ = connected.send(outcome.connected);
    for task in tasks {
        match task.await {
            Ok(SlowClient::ConnectFailed) | Err(_) => {}
            Ok(SlowClient::Cut { after, status, close_code }) => {
                outcome.cut_after.push(after.as_secs_f64());
                match (status, close_code) {
                    (Some(408), _) => outcome.got_408 += 1,
                    (Some(101), Some(1008)) => {
                        outcome.upgraded += 1;
                        outcome.got_1008 += 1;
                    }
                    (Some(101), None) => outcome.upgraded += 1,
                    (Some(101), Some(_)) => {
                        outcome.upgraded += 1;
                        outcome.got_other += 1;
                    }
                    (Some(_), _) => outcome.got_other += 1,
                    (None, _) => {}
                }
            }
            Ok(SlowClient::StillOpen) => outcome.still_open += 1,
        }
    }
    outcome
}

enum SlowClient {
    ConnectFailed,
    Cut { after: Duration, status: Option<u16>, close_code: Option<u16> },
    StillOpen,
}

async fn dribble(
    stream: &mut TcpStream,
    start: Instant,
    head: &[u8],
    piece: usize,
    interval: Duration,
    give_up: Duration,
) -> SlowClient {
    let mut received = Vec::new();
    let mut next = 0;
    let mut chunk = [0u8; 1024];
    // Pieces go out on a fixed schedule, one per `interval`. What the
    // server sends back must not move it: a slow reader's grant is
    // answered with a DATA frame at once, and a client that wrote its next
    // piece on each answer would grant as fast as the round trip allows.
    let mut due = tokio::time::Instant::from_std(start);
    loop {
        if start.elapsed() > give_up {
            return SlowClient::StillOpen;
        }
        if tokio::time::Instant::now() >= due {
            let end = (next + piece).min(head.len());
            if next < end && stream.write_all(&head[next..end]).await.is_err() {
                return cut(start, &received);
            }
            next = end;
            due += interval;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(due) => {}
            read = stream.read(&mut chunk) => match read {
                Ok(0) | Err(_) => return cut(start, &received),
                Ok(n) => received.extend_from_slice(&chunk[..n]),
            },
        }
    }
}

/// Tells the connection's counter, once, that it is connected (and for a
/// flooder, stalled).
fn announce(up: &mut Option<UnboundedSender<bool>>) {
    if let Some(up) = up.take() {
        let _ = up.send(true);
    }
}

/// A write that waits this long means the flooder has filled what the
/// server's socket takes and the server stopped reading it.
const FLOOD_STALL: Duration = Duration::from_millis(100);

/// Writes `message` again and again, never reading, until a write fails
/// (the server closed or reset the connection). A write that cannot go
/// on waits; one cut short is resumed where it stopped, so the stream of
/// messages stays well-formed. The first write that waits
/// [`FLOOD_STALL`] is announced on `stalled`. Until then a flooder moves
/// what the server's kernel buffers take: measured (50 flooders,
/// 64 KiB messages), about 370 KB each in 0.14 s against peregrine on epoll,
/// whose receive buffer stayed at its 128 KiB default, and about 2 MB each
/// over 0.75 s on io_uring in most runs, where the kernel's receive-buffer
/// autotuning had grown it to 1.65 MB.
async fn flood(
    stream: &mut TcpStream,
    start: Instant,
    message: &[u8],
    give_up: Duration,
    stalled: &mut Option<UnboundedSender<bool>>,
) -> SlowClient {
    let mut at = 0;
    loop {
        if start.elapsed() > give_up {
            announce(stalled);
            return SlowClient::StillOpen;
        }
        let wait = if stalled.is_some() { FLOOD_STALL } else { Duration::from_millis(500) };
        match tokio::time::timeout(wait, stream.write(&message[at..])).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                announce(stalled);
                return cut(start, &[]);
            }
            Ok(Ok(n)) => at = (at + n) % message.len(),
            Err(_) => announce(stalled),
        }
    }
}

/// How a slow client ended: the status of the response it got, if any,
/// and after a `101`, the code of the first close frame that followed.
fn cut(start: Instant, received: &[u8]) -> SlowClient {
    let status = received.get(9..12).and_then(|s| std::str::from_utf8(s).ok()).and_then(|s| s.parse().ok());
    let close_code = (status == Some(101)).then(|| close_code(received)).flatten();
    SlowClient::Cut { after: start.elapsed(), status, close_code }
}

/// The code of the first close frame after the response head in
/// `received`.
fn close_code(received: &[u8]) -> Option<u16> {
    let mut rest = &received[received.windows(4).position(|w| w == b"\r\n\r\n")? + 4..];
    while let Ok(Some(frame)) = crate::rig::wsframe::parse_frame(rest) {
        if frame.opcode == 0x8 {
            return Some(match frame.payload {
                [a, b, ..] => u16::from_be_bytes([*a, *b]),
                _ => 1005,
            });
        }
        rest = &rest[frame.len..];
    }
    None
}

async fn connect_retrying(addr: SocketAddr, attempts: u32) -> Option<TcpStream> {
    connect_retrying_with(addr, attempts, false).await
}

/// The receive buffer a non-reader ([`Slowness::Flood`]) asks for: one
/// byte, which the kernel raises to its smallest (2,304 bytes on Linux).
/// What the client's kernel takes counts as read for the server's minimum
/// response rate, which cannot tell it from the application's reads: with
/// 4 KiB asked (8 KiB given), a non-reader whose first echo stalled had
/// 6,329 bytes acknowledged and was cut 25–26 s after its first byte
/// (5 s grace, then 6,329 bytes at 240 B/s), while those whose stall came
/// on a later echo, with the buffer already full, were cut at 6 s.
const NON_READER_RECV_BUFFER: u32 = 1;

/// The receive buffer the kernel gives a non-reader's socket: an upper
/// bound on the response bytes a client that never reads still takes.
pub fn non_reader_receive_buffer() -> std::io::Result<u32> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(NON_READER_RECV_BUFFER)?;
    socket.recv_buffer_size()
}

/// Connects, retrying with a growing pause; with `small_buffers` the
/// socket's receive buffer is the smallest (see [`NON_READER_RECV_BUFFER`])
/// and its send buffer 16 KiB (set before connecting, so the window
/// offered is small from the start).
async fn connect_retrying_with(addr: SocketAddr, attempts: u32, small_buffers: bool) -> Option<TcpStream> {
    for attempt in 0..attempts {
        let Ok(socket) = crate::rig::sources::socket(addr) else { return None };
        if small_buffers {
            let _ = socket.set_recv_buffer_size(NON_READER_RECV_BUFFER);
            let _ = socket.set_send_buffer_size(16 << 10);
        }
        match tokio::time::timeout(Duration::from_secs(3), socket.connect(addr)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Some(stream);
            }
            _ => tokio::time::sleep(Duration::from_millis(50 << attempt)).await,
        }
    }
    None
}

// --------------------------------------------------------------- noise ---

/// The kinds of noise, each with the statuses a correct server may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    /// A method nobody implements (`BREW`).
    BadMethod,
    /// A path with no route.
    UnknownPath,
    /// A known path with a method it does not allow.
    WrongMethod,
    /// A fresh connection sending random bytes.
    Garbage,
}

impl Noise {
    pub const ALL: [Noise; 4] = [Noise::BadMethod, Noise::UnknownPath, Noise::WrongMethod, Noise::Garbage];

    /// Parses a `--kinds` value.
    pub fn parse(name: &str) -> Result<Noise, String> {
        match name {
            "bad-method" => Ok(Noise::BadMethod),
            "unknown-path" => Ok(Noise::UnknownPath),
            "wrong-method" => Ok(Noise::WrongMethod),
            "garbage" => Ok(Noise::Garbage),
            other => {
                Err(format!("unknown noise kind {other:?} (bad-method, unknown-path, wrong-method, garbage)"))
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Noise::BadMethod => "bad method",
            Noise::UnknownPath => "unknown path",
            Noise::WrongMethod => "wrong method",
            Noise::Garbage => "garbage connection",
        }
    }

    fn accepts(self, status: u16) -> bool {
        match self {
            Noise::BadMethod => matches!(status, 400 | 405 | 501),
            Noise::UnknownPath => status == 404,
            Noise::WrongMethod => status == 405,
            Noise::Garbage => status == 400,
        }
    }

    fn request(self, seq: u64) -> Vec<u8> {
        match self {
            Noise::BadMethod => b"BREW /json HTTP/1.1\r\nHost: lab\r\n\r\n".to_vec(),
            Noise::UnknownPath => {
                format!("GET /no/such/path/{seq} HTTP/1.1\r\nHost: lab\r\n\r\n").into_bytes()
            }
            Noise::WrongMethod => b"DELETE /json HTTP/1.1\r\nHost: lab\r\n\r\n".to_vec(),
            Noise::Garbage => {
                // Printable junk (so it is not mistaken for a TLS hello or
                // anything else), then an empty line to end the "head".
                let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut junk: Vec<u8> = (0..64 + seq % 64)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        b'!' + (x % 94) as u8
                    })
                    .collect();
                junk.extend_from_slice(b"\r\n\r\n");
                junk
            }
        }
    }
}

/// Counts per kind of noise.
#[derive(Debug, Default, Clone)]
pub struct NoiseStats {
    pub sent: [u64; 4],
    pub answered_right: [u64; 4],
    /// The first few wrong answers, described.
    pub wrong: Vec<String>,
    pub wrong_count: u64,
}

impl NoiseStats {
    pub fn total_sent(&self) -> u64 {
        self.sent.iter().sum()
    }
}

/// Sends noise at `rate` per second until `stop` turns true. Bad methods,
/// unknown paths and disallowed methods go over keep-alive connections,
/// reused while the server keeps them open (a real client's stray requests
/// arrive that way); garbage opens a fresh connection each time, since the
/// server answers it `400` and closes.
pub async fn noise(
    addr: SocketAddr,
    rate: f64,
    kinds: Vec<Noise>,
    mut stop: watch::Receiver<bool>,
) -> NoiseStats {
    let stats = Rc::new(std::cell::RefCell::new(NoiseStats::default()));
    let idle: Rc<std::cell::RefCell<Vec<TcpStream>>> = Rc::default();
    let in_flight = std::sync::Arc::new(Semaphore::new(64));
    // Bursts every 10 ms rather than a timer per request: the generator
    // shares the load CPU with wrk and must not cost more than its noise.
    const TICK: Duration = Duration::from_millis(10);
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let started = Instant::now();
    let mut seq = 0u64;
    'ticks: loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = ticker.tick() => {}
        }
        let due = (started.elapsed().as_secs_f64() * rate) as u64;
        while seq < due {
            let Some(&kind) = kinds.get(seq as usize % kinds.len().max(1)) else { break 'ticks };
            seq += 1;
            let Ok(permit) = std::sync::Arc::clone(&in_flight).acquire_owned().await else { break 'ticks };
            let (stats, idle) = (Rc::clone(&stats), Rc::clone(&idle));
            tokio::task::spawn_local(async move {
                let outcome = one_noise(addr, kind, seq, &idle).await;
                let mut s = stats.borrow_mut();
                let k = kind as usize;
                s.sent[k] += 1;
                match outcome {
                    Ok(status) if kind.accepts(status) => s.answered_right[k] += 1,
                    other => {
                        s.wrong_count += 1;
                        if s.wrong.len() < 5 {
                            s.wrong.push(format!("{}: {other:?}", kind.name()));
                        }
                    }
                }
                drop(permit);
            });
        }
    }
    // Let the last ones finish.
    let _ = tokio::time::timeout(Duration::from_secs(5), in_flight.acquire_many(64)).await;
    let s = stats.borrow().clone();
    s
}

/// One noise request; returns the status it was answered with.
async fn one_noise(
    addr: SocketAddr,
    kind: Noise,
    seq: u64,
    idle: &std::cell::RefCell<Vec<TcpStream>>,
) -> Result<u16, String> {
    // Garbage always ends its connection; the rest reuse one while the
    // server keeps it open (it says so in every answer).
    let reusable = kind != Noise::Garbage;
    let pooled = if reusable { idle.borrow_mut().pop() } else { None };
    let mut stream = match pooled {
        Some(s) => s,
        None => connect_retrying(addr, 3).await.ok_or("cannot connect")?,
    };
    stream.write_all(&kind.request(seq)).await.map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    let response = tokio::time::timeout(Duration::from_secs(5), read_response(&mut stream, &mut buf))
        .await
        .map_err(|_| "no answer within 5 s".to_string())?
        .map_err(|e| e.to_string())?;
    if reusable && !response.close && buf.is_empty() {
        idle.borrow_mut().push(stream);
    }
    Ok(response.status)
}

// ----------------------------------------------------------- keep-alive ---

/// What keep-alive loops saw.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct LoopStats {
    pub ok: u64,
    /// Answers other than 200 (`unavailable` among them).
    pub other_status: u64,
    /// `503` answers: refusals at the connection limit, among others.
    pub unavailable: u64,
    /// Requests with no answer within [`REQUEST_TIMEOUT`].
    pub timed_out: u64,
    /// Responses cut short: the connection ended mid-response.
    pub truncated: u64,
    /// Requests sent on a connection the server then closed (or reset)
    /// before answering anything: the keep-alive close race.
    pub unanswered: u64,
    /// Responses that announced `Connection: close`.
    pub close_announced: u64,
    pub connect_failed: u64,
    pub malformed: u64,
    /// Latency of every answered request, in milliseconds.
    pub latencies_ms: Vec<f64>,
    pub first_problem: Option<String>,
}

impl LoopStats {
    /// Adds another loop's (or client process's) counts to these.
    pub fn absorb(&mut self, other: LoopStats) {
        self.ok += other.ok;
        self.other_status += other.other_status;
        self.unavailable += other.unavailable;
        self.timed_out += other.timed_out;
        self.truncated += other.truncated;
        self.unanswered += other.unanswered;
        self.close_announced += other.close_announced;
        self.connect_failed += other.connect_failed;
        self.malformed += other.malformed;
        self.latencies_ms.extend(other.latencies_ms);
        if self.first_problem.is_none() {
            self.first_problem = other.first_problem;
        }
    }
}

/// Longest a keep-alive loop waits for one answer before counting it as
/// timed out and reconnecting.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `conns` keep-alive loops, each sending `GET path` (cycling through
/// `paths`) and reading the answer, until `stop` turns true. A loop whose
/// connection closes reconnects; once connecting fails it retries every
/// 20 ms until stopped. `connector` says where and over what: cleartext
/// HTTP/1.1 or HTTP/1.1 over TLS (a failed handshake counts as a failed
/// connect).
pub async fn keepalive_loops(
    connector: Connector,
    conns: usize,
    paths: &[&str],
    stop: watch::Receiver<bool>,
) -> LoopStats {
    let requests: Rc<Vec<Vec<u8>>> = Rc::new(paths.iter().map(|p| get(p)).collect());
    // Connect in waves, so thousands of loops do not overflow the listen
    // backlog all at once.
    let gate = Rc::new(Semaphore::new(256));
    let connector = Rc::new(connector);
    let mut tasks = Vec::new();
    for i in 0..conns {
        let (requests, mut stop, gate) = (Rc::clone(&requests), stop.clone(), Rc::clone(&gate));
        let connector = Rc::clone(&connector);
        tasks.push(tokio::task::spawn_local(async move {
            let mut stats = LoopStats::default();
            let mut n = i;
            'outer: while !*stop.borrow() {
                let connected = {
                    let _permit = gate.acquire().await;
                    let connected = connector.connect().await;
                    if connected.is_err() {
                        // Back off holding the permit, as connect_retrying.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    connected
                };
                let Ok(mut stream) = connected else {
                    stats.connect_failed += 1;
                    tokio::select! {
                        _ = stop.changed() => {}
                        _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                    }
                    continue;
                };
                let mut buf = Vec::new();
                while !*stop.borrow() {
                    let request = &requests[n % requests.len()];
                    n += 1;
                    let sent = Instant::now();
                    if stream.write_all(request).await.is_err() {
                        stats.unanswered += 1;
                        continue 'outer;
                    }
                    let Ok(answer) =
                        tokio::time::timeout(REQUEST_TIMEOUT, read_response(&mut stream, &mut buf)).await
                    else {
                        stats.timed_out += 1;
                        continue 'outer;
                    };
                    match answer {
                        Ok(r) => {
                            stats.latencies_ms.push(sent.elapsed().as_secs_f64() * 1000.0);
                            if r.status == 200 {
                                stats.ok += 1;
                            } else {
                                stats.other_status += 1;
                                stats.unavailable += u64::from(r.status == 503);
                            }
                            if r.close {
                                stats.close_announced += 1;
                                continue 'outer;
                            }
                        }
                        Err(ReadError::Closed | ReadError::Reset(_)) => {
                            stats.unanswered += 1;
                            continue 'outer;
                        }
                        Err(ReadError::Truncated(why)) => {
                            stats.truncated += 1;
                            stats.first_problem.get_or_insert(format!("truncated: {why}"));
                            continue 'outer;
                        }
                        Err(ReadError::Malformed(why)) => {
                            stats.malformed += 1;
                            stats.first_problem.get_or_insert(format!("malformed: {why}"));
                            continue 'outer;
                        }
                    }
                }
            }
            stats
        }));
    }
    let mut total = LoopStats::default();
    for task in tasks {
        if let Ok(s) = task.await {
            total.absorb(s);
        }
    }
    total
}

/// A current-thread runtime with a `LocalSet`, for the clients above.
pub fn block_on<F: std::future::Future>(fut: F) -> Result<F::Output, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    Ok(tokio::task::LocalSet::new().block_on(&runtime, fut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_printable_and_ends_the_head() {
        for seq in 0..50 {
            let g = Noise::Garbage.request(seq);
            assert!(g.ends_with(b"\r\n\r\n"));
            assert!(g[..g.len() - 4].iter().all(|b| (b'!'..=b'~').contains(b)));
        }
    }

    #[test]
    fn noise_kinds_accept_only_their_answers() {
        assert!(Noise::UnknownPath.accepts(404) && !Noise::UnknownPath.accepts(200));
        assert!(Noise::WrongMethod.accepts(405) && !Noise::WrongMethod.accepts(404));
        assert!(Noise::Garbage.accepts(400) && !Noise::Garbage.accepts(500));
        assert!(Noise::BadMethod.accepts(501) && !Noise::BadMethod.accepts(200));
    }

    #[test]
    fn the_close_code_after_an_upgrade_is_found() {
        let mut received = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".to_vec();
        assert_eq!(close_code(&received), None);
        received.extend_from_slice(&[0x81, 2, b'h', b'i']);
        received.extend_from_slice(&[0x88, 2, 0x03, 0xE9]);
        assert_eq!(close_code(&received), Some(1001));
        let SlowClient::Cut { status, close_code, .. } = cut(Instant::now(), &received) else {
            panic!("a cut client")
        };
        assert_eq!((status, close_code), (Some(101), Some(1001)));
    }

    #[tokio::test]
    async fn a_flood_ends_when_the_server_closes_and_not_before() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        // Accepts, never reads, and closes after 1 s: with unread bytes in
        // its receive buffer the close is a reset.
        tokio::spawn(async move {
            let (s, _) = listener.accept().await.expect("accept");
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(s);
        });
        let mut stream = connect_retrying_with(addr, 1, true).await.expect("connect");
        let start = Instant::now();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut stalled = Some(tx);
        let flooding = flood(&mut stream, start, &[7u8; 64 << 10], Duration::from_secs(10), &mut stalled);
        let announced = async {
            let ok = rx.recv().await;
            (ok, start.elapsed())
        };
        let (ended, (announced, announced_after)) = tokio::join!(flooding, announced);
        let SlowClient::Cut { after, status: None, close_code: None } = ended else {
            panic!("the flood should end with the connection")
        };
        assert!(after >= Duration::from_millis(900) && after < Duration::from_secs(5), "{after:?}");
        // The server never reads: the writes stall long before it closes,
        // and the stall is announced once.
        assert_eq!(announced, Some(true));
        assert!(announced_after < Duration::from_millis(900), "announced after {announced_after:?}");
        assert!(stalled.is_none());
    }

    /// A loopback server writing canned bytes, for the response reader.
    async fn canned(bytes: &'static [u8]) -> Result<Response, ReadError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            s.write_all(bytes).await.expect("write");
        });
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        read_response(&mut stream, &mut Vec::new()).await
    }

    #[tokio::test]
    async fn a_dribble_keeps_its_pace_when_every_piece_is_answered() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        // Answers each read at once, as an HTTP/2 server answers a window
        // grant with DATA; counts the bytes it got and closes after 1 s.
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let (mut got, mut buf) = (0, [0u8; 64]);
            let until = tokio::time::Instant::now() + Duration::from_millis(1000);
            while let Ok(Ok(n)) = tokio::time::timeout_at(until, s.read(&mut buf)).await {
                if n == 0 {
                    break;
                }
                got += n;
                let _ = s.write_all(b"answer").await;
            }
            got
        });
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let ended = dribble(
            &mut stream,
            Instant::now(),
            &[b'x'; 100],
            2,
            Duration::from_millis(300),
            Duration::from_secs(10),
        )
        .await;
        // Pieces at 0, 300, 600 and 900 ms: 8 bytes. Writing on each answer
        // instead would have sent all 100 within the second.
        assert_eq!(server.await.expect("server"), 8);
        let SlowClient::Cut { after, status, .. } = ended else {
            panic!("the server's close cuts the client")
        };
        assert!(after >= Duration::from_millis(1000) && status.is_none());
    }

    #[tokio::test]
    async fn reader_tells_complete_truncated_and_closed_apart() {
        let ok = canned(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi")
            .await
            .expect("complete");
        assert_eq!((ok.status, ok.close, ok.body.as_slice()), (200, true, &b"hi"[..]));
        assert!(matches!(
            canned(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhi").await,
            Err(ReadError::Truncated(_))
        ));
        assert!(matches!(canned(b"HTTP/1.1 200 OK\r\nContent-").await, Err(ReadError::Truncated(_))));
        assert!(matches!(canned(b"").await, Err(ReadError::Closed)));
        assert!(matches!(canned(b"SSH-2.0\r\n\r\n").await, Err(ReadError::Malformed(_))));
    }
}
