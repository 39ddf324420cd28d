//! The lab's own HTTP/1.1 load generator, for what wrk cannot do: reconnect
//! every N requests, rotate weighted request templates (HttpArena's crud and
//! api-4 mixes), send large bodies, and count response bytes.
//!
//! Closed loop: each connection has one request (or one pipelined batch of
//! `pipeline` requests) in flight and sends the next when the last answer
//! is in. Every connection lives on one thread, driven by one
//! level-triggered epoll set: a connection is registered once for reading,
//! and for writing only while a write is incomplete, so a keep-alive request
//! costs one `write`, one `read` and a share of one `epoll_wait` (wrk also
//! re-arms the socket for writing twice per request). Reads go into one
//! shared scratch buffer; a connection keeps bytes only when a response
//! head straddles two reads; bodies framed by `Content-Length` are counted,
//! never copied. Requests are written straight from the templates.
//!
//! Response heads are parsed by [`http_probe::parse::parse_head`] and framed
//! by [`http_probe::Head::framing`] (chunked bodies by
//! [`http_probe::parse::parse_body`]): the one reader of the workspace.
//! What it made of a head is kept by the head's exact bytes (`HeadCache`),
//! so a head seen before (the same answer within the same second) costs a
//! comparison, not a parse that allocates each header. Answers read in one
//! pass of the event loop share one clock reading for their latency.
//! Status classes are counted; a head that cannot be parsed, a connection
//! reset or closed with answers outstanding, and an answer slower than the
//! timeout are errors, after which the connection is replaced.
//!
//! The run is `warmup` then `duration`: counters, the latency histogram and
//! this process's CPU time (`getrusage`) cover the measured part only.
//!
//! Why it is lean: on pipelined `/plaintext` this client, not the server,
//! sets the requests/s of the fastest servers. Comparing with the last
//! head before searching for its end, and one clock reading a pass rather
//! than one an answer, took it from 2.23M to 2.65M requests per client
//! CPU-second against peregrine (4 alternating rounds, 256 connections,
//! depth 16, server on CPU 0 and client on CPU 1).

use http_probe::parse::{parse_body, parse_head};
use http_probe::Framing;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// One request, bytes ready to write, and how often it is sent relative to
/// the other templates.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub request: Vec<u8>,
    pub weight: u32,
    /// For a request sent with `Expect: 100-continue`: where its body
    /// starts. The head is written, and the body only after a `100
    /// Continue` (a final answer instead ends the request unsent). Ignored
    /// when pipelining.
    pub continue_at: Option<usize>,
}

impl Template {
    pub fn new(request: Vec<u8>, weight: u32) -> Template {
        Template { request, weight, continue_at: None }
    }
}

/// What to send, how, and for how long.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub addr: SocketAddr,
    pub templates: Vec<Template>,
    pub connections: usize,
    /// Requests per write (1: one request in flight per connection).
    pub pipeline: usize,
    /// Close and reopen a connection after this many answered requests.
    pub reconnect_every: Option<u64>,
    pub warmup: Duration,
    pub duration: Duration,
    /// An answer not complete this long after its request is a timeout.
    pub timeout: Duration,
}

/// Socket-level failures, as wrk counts them (plus unparsable answers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadErrors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
    /// Answers http-probe could not read as an HTTP/1.1 response.
    pub malformed: u64,
}

impl LoadErrors {
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout + self.malformed
    }
}

/// What one run measured (its measured part only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Complete answers, whatever their status.
    pub requests: u64,
    pub duration_secs: f64,
    pub requests_per_sec: f64,
    /// Answers by status class: 1xx (final only), 2xx, 3xx, 4xx, 5xx.
    pub status_classes: [u64; 5],
    pub errors: LoadErrors,
    /// Response bytes, heads and framing included.
    pub response_bytes: u64,
    /// Connections opened after the first ones (reconnects and replacements).
    pub reconnects: u64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub latency_max_ms: Option<f64>,
    /// This process's CPU time (user + system) during the measured part.
    pub cpu_seconds: f64,
}

impl LoadReport {
    /// Answers outside 2xx and 3xx (wrk's "Non-2xx or 3xx responses").
    pub fn non_2xx_3xx(&self) -> u64 {
        self.status_classes[0] + self.status_classes[3] + self.status_classes[4]
    }

    pub fn bytes_per_response(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.response_bytes as f64 / self.requests as f64)
    }
}

/// The order templates are sent in: each index repeated by its weight,
/// interleaved (smooth weighted round-robin), so 3:3:2 gives
/// `0 1 2 0 1 0 2 1` rather than three of one kind in a row.
pub fn schedule(templates: &[Template]) -> Vec<usize> {
    let total: i64 = templates.iter().map(|t| i64::from(t.weight)).sum();
    let mut current = vec![0i64; templates.len()];
    let mut order = Vec::with_capacity(total.max(0) as usize);
    for _ in 0..total {
        for (c, t) in current.iter_mut().zip(templates) {
            *c += i64::from(t.weight);
        }
        let Some((best, _)) = current.iter().enumerate().max_by_key(|(i, c)| (**c, -(*i as i64))) else {
            break;
        };
        current[best] -= total;
        order.push(best);
    }
    order
}

/// Latency histogram in microseconds: exact below 64 µs, then 32 linear
/// buckets per power of two (about 3% resolution). Fixed size, no
/// allocation per sample.
#[derive(Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max_us: u64,
}

const SUB: u32 = 32;
const LINEAR: u64 = 64;

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: vec![0; (LINEAR + 58 * u64::from(SUB)) as usize], count: 0, max_us: 0 }
    }
}

impl Histogram {
    fn index(us: u64) -> usize {
        if us < LINEAR {
            return us as usize;
        }
        let exp = 63 - us.leading_zeros(); // >= 6
        let sub = (us >> (exp - 5)) & u64::from(SUB - 1);
        (LINEAR + u64::from(exp - 6) * u64::from(SUB) + sub) as usize
    }

    /// The middle of bucket `i`, in microseconds.
    fn value(i: usize) -> f64 {
        let i = i as u64;
        if i < LINEAR {
            return i as f64;
        }
        let exp = (i - LINEAR) / u64::from(SUB) + 6;
        let sub = (i - LINEAR) % u64::from(SUB);
        let width = 1u64 << (exp - 5);
        ((u64::from(SUB) + sub) * width) as f64 + width as f64 / 2.0
    }

    pub fn record(&mut self, us: u64) {
        let i = Self::index(us).min(self.buckets.len() - 1);
        self.buckets[i] += 1;
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    /// The `p`th percentile (0..=100) in microseconds, `None` when empty.
    pub fn percentile_us(&self, p: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(Self::value(i).min(self.max_us as f64));
            }
        }
        Some(self.max_us as f64)
    }

    pub fn max_us(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max_us)
    }
}

/// Counters of the measured part.
#[derive(Default)]
struct Stats {
    requests: u64,
    classes: [u64; 5],
    errors: LoadErrors,
    bytes: u64,
    reconnects: u64,
    latency: Histogram,
}

/// How the body of the answer being read is delimited.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Body {
    /// Waiting for a head.
    Head,
    /// This many body bytes still to come.
    Length(usize),
    Chunked,
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// No socket (waiting to be reopened).
    Closed,
    Connecting,
    Open,
}

struct Conn {
    fd: RawFd,
    phase: Phase,
    /// Bytes of an answer head or chunked body that straddle reads.
    pending: Vec<u8>,
    /// The pipelined batch (unused with `pipeline == 1`).
    batch: Vec<u8>,
    /// The template being written when not pipelined.
    template: usize,
    written: usize,
    /// Write no further than this until a `100 Continue` arrives.
    hold_at: Option<usize>,
    /// Registered for writability too (a write is incomplete).
    want_write: bool,
    /// Where this connection is in the schedule.
    cursor: usize,
    sent_at: Instant,
    /// Answers still expected for the batch in flight.
    outstanding: usize,
    body: Body,
    status: u16,
    close_after: bool,
    answer_bytes: u64,
    /// Answers on this connection since it opened.
    answered: u64,
}

/// Bytes read per `read` call; also the most a static file answer costs in
/// calls per 256 KiB.
const SCRATCH: usize = 256 * 1024;
const MAX_EVENTS: usize = 1024;

/// Runs the load on the calling thread and returns what the measured part
/// saw. Pin the thread (or process) before calling.
pub fn run(spec: &LoadSpec) -> Result<LoadReport, String> {
    if spec.templates.is_empty() || spec.connections == 0 {
        return Err("nothing to send: no templates or no connections".into());
    }
    let order = schedule(&spec.templates);
    if order.is_empty() {
        return Err("every template has weight 0".into());
    }
    let mut engine = Engine::new(spec, order)?;
    let result = engine.run();
    engine.close_all();
    result
}

struct Engine<'a> {
    spec: &'a LoadSpec,
    order: Vec<usize>,
    epoll: RawFd,
    conns: Vec<Conn>,
    scratch: Vec<u8>,
    stats: Stats,
    measuring: bool,
    /// The first connections are not reconnects.
    opened: u64,
    heads: HeadCache,
    /// When the last `epoll_wait` returned: the arrival time of every
    /// answer read in that pass. One clock read a pass instead of one an
    /// answer: at 16 pipelined answers a read, `clock_gettime` was 5.7% of
    /// this client's CPU (pipelined `/plaintext`, 256 connections), and
    /// the client is the ceiling there.
    woke_at: Instant,
}

/// What the engine needs from a response head.
#[derive(Debug, Clone, Copy, PartialEq)]
struct HeadInfo {
    /// Bytes of the head, status line through the empty line.
    len: usize,
    status: u16,
    /// `Connection: close`, or HTTP/1.0.
    close: bool,
    /// How the body is delimited; `None` when there is none.
    body: Option<Body>,
}

/// Response heads already read by http-probe, by their exact bytes. A
/// server sends the same head for the same request, except that `Date`
/// changes once a second, so after the first of each kind a head costs one
/// comparison (with the head that matched last; a search for its end and a
/// lookup when another kind comes) instead of a parse that allocates every
/// header. Different bytes are always parsed by http-probe.
#[derive(Default)]
struct HeadCache {
    entries: Vec<(Vec<u8>, HeadInfo)>,
    /// The entry replaced next once full.
    next: usize,
    /// The entry that matched last, tried first.
    last: usize,
}

const HEAD_CACHE: usize = 32;

impl HeadCache {
    /// The head at the start of `buf`: `Ok(None)` while incomplete, `Err`
    /// if http-probe cannot read it as a response head.
    fn read(&mut self, buf: &[u8]) -> Result<Option<HeadInfo>, ()> {
        // A cached head ends at its first CRLFCRLF, so a buffer that starts
        // with it holds exactly that head: one comparison, without the
        // byte-by-byte search for the end (the search and this engine's
        // reading were 8.3% of the client's CPU on pipelined `/plaintext`).
        if let Some((bytes, info)) = self.entries.get(self.last) {
            if buf.starts_with(bytes) {
                return Ok(Some(*info));
            }
        }
        let Some(end) = find_head_end(buf) else {
            // Incomplete, or ended by bare LFs: http-probe decides.
            return parse_info(buf);
        };
        let head = &buf[..end];
        if let Some(k) = self.entries.iter().position(|(bytes, _)| bytes.as_slice() == head) {
            self.last = k;
            return Ok(Some(self.entries[k].1));
        }
        let Some(info) = parse_info(head)? else { return Err(()) };
        if info.len != end {
            // http-probe ended the head elsewhere (a bare LF before the
            // CRLFs): trust it and do not cache.
            return Ok(Some(info));
        }
        let entry = (head.to_vec(), info);
        if self.entries.len() < HEAD_CACHE {
            self.entries.push(entry);
            self.last = self.entries.len() - 1;
        } else {
            self.entries[self.next] = entry;
            self.last = self.next;
            self.next = (self.next + 1) % HEAD_CACHE;
        }
        Ok(Some(info))
    }
}

/// Where the first `\r\n\r\n` ends, if there is one.
fn find_head_end(buf: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(k) = buf[from..].iter().position(|&b| b == b'\n') {
        let lf = from + k;
        if lf >= 3 && &buf[lf - 3..=lf] == b"\r\n\r\n" {
            return Some(lf + 1);
        }
        from = lf + 1;
    }
    None
}

/// Reads a head with http-probe.
fn parse_info(buf: &[u8]) -> Result<Option<HeadInfo>, ()> {
    let head = match parse_head(buf) {
        Ok(Some(head)) => head,
        Ok(None) => return Ok(None),
        Err(_) => return Err(()),
    };
    let close =
        head.header_all("connection").any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
            || head.version == "HTTP/1.0";
    let body = match head.framing(false).0 {
        Framing::None | Framing::ContentLength(0) => None,
        Framing::ContentLength(n) => Some(Body::Length(n)),
        Framing::Chunked => Some(Body::Chunked),
        Framing::UntilClose => Some(Body::UntilClose),
    };
    Ok(Some(HeadInfo { len: head.raw.len(), status: head.status, close, body }))
}

impl<'a> Engine<'a> {
    fn new(spec: &'a LoadSpec, order: Vec<usize>) -> Result<Self, String> {
        // SAFETY: epoll_create1 takes no pointers.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(format!("epoll_create1: {}", std::io::Error::last_os_error()));
        }
        let now = Instant::now();
        let conns = (0..spec.connections)
            .map(|i| Conn {
                fd: -1,
                phase: Phase::Closed,
                pending: Vec::new(),
                batch: Vec::new(),
                template: 0,
                written: 0,
                hold_at: None,
                want_write: false,
                cursor: i % order.len(),
                sent_at: now,
                outstanding: 0,
                body: Body::Head,
                status: 0,
                close_after: false,
                answer_bytes: 0,
                answered: 0,
            })
            .collect();
        Ok(Engine {
            spec,
            order,
            epoll,
            conns,
            scratch: vec![0; SCRATCH],
            stats: Stats::default(),
            measuring: false,
            opened: 0,
            heads: HeadCache::default(),
            woke_at: now,
        })
    }

    fn run(&mut self) -> Result<LoadReport, String> {
        for i in 0..self.conns.len() {
            self.open(i);
        }
        // The clock starts once every connect is issued: at HttpArena's
        // 16,384 connections issuing them takes seconds here, which would
        // otherwise eat a short run's whole window.
        let start = Instant::now();
        let measure_from = start + self.spec.warmup;
        let end = measure_from + self.spec.duration;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        let mut cpu_start = 0.0;
        let mut measured_from = measure_from;
        let mut last_scan = start;
        loop {
            let now = Instant::now();
            if !self.measuring && now >= measure_from {
                self.stats = Stats::default();
                self.measuring = true;
                cpu_start = own_cpu_seconds();
                measured_from = now;
            }
            if now >= end {
                break;
            }
            if now.duration_since(last_scan) >= Duration::from_millis(100) {
                last_scan = now;
                self.scan(now);
            }
            let wait_ms = end.saturating_duration_since(now).as_millis().min(50) as i32;
            // SAFETY: `events` has room for MAX_EVENTS entries.
            let n = unsafe {
                libc::epoll_wait(self.epoll, events.as_mut_ptr(), MAX_EVENTS as i32, wait_ms.max(1))
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("epoll_wait: {e}"));
            }
            self.woke_at = Instant::now();
            for ev in &events[..n as usize] {
                let (i, flags) = (ev.u64 as usize, ev.events);
                self.event(i, flags);
            }
        }
        let elapsed = Instant::now().duration_since(measured_from).as_secs_f64();
        let cpu = own_cpu_seconds() - cpu_start;
        let s = &self.stats;
        let ms = |us: Option<f64>| us.map(|v| v / 1000.0);
        Ok(LoadReport {
            requests: s.requests,
            duration_secs: elapsed,
            requests_per_sec: if elapsed > 0.0 { s.requests as f64 / elapsed } else { 0.0 },
            status_classes: s.classes,
            errors: s.errors,
            response_bytes: s.bytes,
            reconnects: s.reconnects,
            latency_p50_ms: ms(s.latency.percentile_us(50.0)),
            latency_p99_ms: ms(s.latency.percentile_us(99.0)),
            latency_max_ms: ms(s.latency.max_us().map(|v| v as f64)),
            cpu_seconds: cpu,
        })
    }

    /// Reopens closed connections and times out slow answers.
    fn scan(&mut self, now: Instant) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            match c.phase {
                Phase::Closed => self.open(i),
                Phase::Connecting | Phase::Open if now.duration_since(c.sent_at) > self.spec.timeout => {
                    self.stats.errors.timeout += 1;
                    self.close(i);
                    self.open(i);
                }
                _ => {}
            }
        }
    }

    fn open(&mut self, i: usize) {
        if self.opened >= self.conns.len() as u64 {
            self.stats.reconnects += 1;
        }
        self.opened += 1;
        let c = &mut self.conns[i];
        c.pending.clear();
        c.body = Body::Head;
        c.outstanding = 0;
        c.answered = 0;
        c.want_write = false;
        c.sent_at = Instant::now();
        match connect(self.spec.addr) {
            Ok(fd) => {
                c.fd = fd;
                c.phase = Phase::Connecting;
                c.want_write = true;
                ctl(self.epoll, libc::EPOLL_CTL_ADD, fd, libc::EPOLLOUT as u32, i);
            }
            Err(_) => {
                self.stats.errors.connect += 1;
                c.phase = Phase::Closed;
            }
        }
    }

    fn close(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd >= 0 {
            // SAFETY: our own descriptor; closing removes it from the epoll set.
            unsafe { libc::close(c.fd) };
        }
        c.fd = -1;
        c.phase = Phase::Closed;
    }

    fn close_all(&mut self) {
        for i in 0..self.conns.len() {
            self.close(i);
        }
        // SAFETY: our own descriptor.
        unsafe { libc::close(self.epoll) };
    }

    /// Closes and reopens at once (a reconnect, or a replacement after an
    /// error).
    fn replace(&mut self, i: usize) {
        self.close(i);
        self.open(i);
    }

    fn event(&mut self, i: usize, flags: u32) {
        match self.conns[i].phase {
            Phase::Closed => {}
            Phase::Connecting => {
                if socket_error(self.conns[i].fd) != 0 {
                    self.stats.errors.connect += 1;
                    self.close(i); // reopened by the next scan
                    return;
                }
                self.conns[i].phase = Phase::Open;
                self.send(i);
            }
            Phase::Open => {
                if flags & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                    self.readable(i);
                }
                if self.conns[i].phase == Phase::Open
                    && flags & libc::EPOLLOUT as u32 != 0
                    && self.conns[i].want_write
                {
                    self.write(i);
                }
            }
        }
    }

    /// Starts the next request (or pipelined batch) on connection `i`.
    fn send(&mut self, i: usize) {
        let depth = self.spec.pipeline.max(1);
        let c = &mut self.conns[i];
        if depth == 1 {
            c.template = self.order[c.cursor];
            c.cursor = (c.cursor + 1) % self.order.len();
            c.hold_at = self.spec.templates[c.template].continue_at;
        } else {
            c.batch.clear();
            for _ in 0..depth {
                let t = self.order[c.cursor];
                c.cursor = (c.cursor + 1) % self.order.len();
                c.batch.extend_from_slice(&self.spec.templates[t].request);
            }
        }
        c.written = 0;
        c.outstanding = depth;
        c.sent_at = Instant::now();
        self.write(i);
    }

    fn write(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let out: &[u8] =
            if self.spec.pipeline > 1 { &c.batch } else { &self.spec.templates[c.template].request };
        let until = c.hold_at.unwrap_or(out.len()).min(out.len());
        while c.written < until {
            let rest = &out[c.written..until];
            // SAFETY: `rest` is a valid slice for the length given.
            let n = unsafe {
                libc::send(c.fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::WouldBlock => {
                        if !c.want_write {
                            c.want_write = true;
                            let flags = (libc::EPOLLIN | libc::EPOLLOUT) as u32;
                            ctl(self.epoll, libc::EPOLL_CTL_MOD, c.fd, flags, i);
                        }
                        return;
                    }
                    std::io::ErrorKind::Interrupted => continue,
                    _ => {
                        // Reset or closed by the server: a new connection.
                        self.stats.errors.write += 1;
                        self.replace(i);
                        return;
                    }
                }
            }
            c.written += n as usize;
        }
        // Written in full: reading only from now on (a fresh connection is
        // still registered for writing, from its connect).
        if c.want_write {
            c.want_write = false;
            ctl(self.epoll, libc::EPOLL_CTL_MOD, c.fd, libc::EPOLLIN as u32, i);
        }
    }

    fn readable(&mut self, i: usize) {
        let fd = self.conns[i].fd;
        // SAFETY: reads into our scratch buffer, within its length.
        let n = unsafe {
            libc::recv(fd, self.scratch.as_mut_ptr().cast(), self.scratch.len(), libc::MSG_DONTWAIT)
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) {
                self.stats.errors.read += 1;
                self.replace(i);
            }
            return;
        }
        if n == 0 {
            let c = &self.conns[i];
            if c.body == Body::UntilClose {
                self.answered(i);
            } else if c.outstanding > 0 {
                self.stats.errors.read += 1;
            }
            self.replace(i);
            return;
        }
        let n = n as usize;
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut pending = std::mem::take(&mut self.conns[i].pending);
        let outcome = if pending.is_empty() {
            let r = self.consume(i, &scratch[..n]);
            if let Ok(used) = r {
                pending.extend_from_slice(&scratch[used..n]);
            }
            r
        } else {
            pending.extend_from_slice(&scratch[..n]);
            let r = self.consume(i, &pending);
            if let Ok(used) = r {
                pending.drain(..used);
            }
            r
        };
        std::mem::swap(&mut self.scratch, &mut scratch);
        match outcome {
            // Still the same socket: keep the partial answer. After a
            // reconnect inside `consume` nothing is left over.
            Ok(_) if self.conns[i].phase == Phase::Open => self.conns[i].pending = pending,
            Ok(_) => {}
            Err(()) => {
                self.stats.errors.malformed += 1;
                self.replace(i);
            }
        }
    }

    /// Takes complete answers from `data`; returns how many bytes it used.
    /// Finishing answers may send the next request or reconnect.
    fn consume(&mut self, i: usize, data: &[u8]) -> Result<usize, ()> {
        let mut at = 0;
        loop {
            let c = &mut self.conns[i];
            if c.phase != Phase::Open || c.outstanding == 0 {
                // Bytes nobody asked for, or the connection was replaced.
                return Ok(data.len());
            }
            match c.body {
                Body::Head => {
                    let head = match self.heads.read(&data[at..]) {
                        Ok(Some(head)) => head,
                        Ok(None) => return Ok(at),
                        Err(()) => return Err(()),
                    };
                    at += head.len;
                    c.answer_bytes = head.len as u64;
                    if (100..200).contains(&head.status) && head.status != 101 {
                        if head.status == 100 && c.hold_at.take().is_some() {
                            self.write(i);
                        }
                        continue;
                    }
                    c.status = head.status;
                    c.close_after = head.close;
                    match head.body {
                        Some(body) => self.conns[i].body = body,
                        None => self.answered(i),
                    }
                }
                Body::Length(left) => {
                    let take = left.min(data.len() - at);
                    at += take;
                    c.answer_bytes += take as u64;
                    if take == left {
                        self.answered(i);
                    } else {
                        c.body = Body::Length(left - take);
                        return Ok(at);
                    }
                }
                Body::Chunked => match parse_body(&data[at..], Framing::Chunked, None) {
                    Some(body) if body.defects.is_empty() => {
                        at += body.len;
                        c.answer_bytes += body.len as u64;
                        self.answered(i);
                    }
                    Some(_) => return Err(()),
                    None => return Ok(at),
                },
                Body::UntilClose => {
                    c.answer_bytes += (data.len() - at) as u64;
                    return Ok(data.len());
                }
            }
        }
    }

    /// One answer is complete on connection `i`.
    fn answered(&mut self, i: usize) {
        // Read in this pass, so it had arrived by the time the pass began.
        let now = self.woke_at;
        let c = &mut self.conns[i];
        c.body = Body::Head;
        // A final answer before `100 Continue`: the body is not sent.
        c.hold_at = None;
        c.outstanding = c.outstanding.saturating_sub(1);
        c.answered += 1;
        let s = &mut self.stats;
        s.requests += 1;
        let class = (c.status / 100).clamp(1, 5) as usize - 1;
        s.classes[class] += 1;
        s.bytes += c.answer_bytes;
        s.latency.record(now.duration_since(c.sent_at).as_micros() as u64);
        if c.close_after {
            // The server closes: a new connection for the rest of the batch.
            c.close_after = false;
            self.replace(i);
            return;
        }
        if c.outstanding > 0 {
            return;
        }
        if self.spec.reconnect_every.is_some_and(|n| c.answered >= n) {
            self.replace(i);
            return;
        }
        self.send(i);
    }
}

fn connect(addr: SocketAddr) -> std::io::Result<RawFd> {
    let SocketAddr::V4(v4) = addr else {
        return Err(std::io::Error::other("only IPv4 addresses are supported"));
    };
    // SAFETY: plain socket calls on a descriptor we own; the sockaddr_in is
    // fully initialised and passed with its size.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            (&sin as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                libc::close(fd);
                return Err(e);
            }
        }
        Ok(fd)
    }
}

fn socket_error(fd: RawFd) -> i32 {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt fills one c_int whose size is passed.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return -1;
    }
    err
}

fn ctl(epoll: RawFd, op: libc::c_int, fd: RawFd, events: u32, token: usize) {
    let mut ev = libc::epoll_event { events, u64: token as u64 };
    // SAFETY: `ev` is a valid epoll_event for the call's duration.
    unsafe { libc::epoll_ctl(epoll, op, fd, &mut ev) };
}

/// This process's user + system CPU seconds so far.
pub fn own_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_SELF)
}

/// CPU seconds of this process's waited-for children (wrk, or a `load`
/// child), for measuring a client process as a whole.
pub fn children_cpu_seconds() -> f64 {
    rusage_seconds(libc::RUSAGE_CHILDREN)
}

fn rusage_seconds(who: libc::c_int) -> f64 {
    // SAFETY: getrusage fills the one zeroed struct passed.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut u);
        u
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn t(weight: u32) -> Template {
        Template::new(Vec::new(), weight)
    }

    #[test]
    fn schedule_interleaves_by_weight() {
        let order = schedule(&[t(3), t(3), t(2)]);
        assert_eq!(order.len(), 8);
        for (k, want) in [(0, 3), (1, 3), (2, 2)] {
            assert_eq!(order.iter().filter(|&&i| i == k).count(), want);
        }
        assert!(order.windows(2).all(|w| w[0] != w[1]), "{order:?}");
        assert_eq!(schedule(&[t(1)]), [0]);
        assert!(schedule(&[t(0)]).is_empty());
    }

    #[test]
    fn head_cache_matches_http_probe() {
        let mut cache = HeadCache::default();
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1";
        let want = HeadInfo { len: 38, status: 200, close: false, body: Some(Body::Length(2)) };
        assert_eq!(cache.read(ok), Ok(Some(want)));
        assert_eq!(cache.read(ok), Ok(Some(want)), "from the cache");
        assert_eq!(cache.entries.len(), 1);
        // Starts like the cached head up to its last header line: parsed,
        // not taken for it.
        let longer = b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n";
        assert_eq!(cache.read(longer).unwrap().unwrap().body, Some(Body::Length(20)));
        assert_eq!(cache.read(ok), Ok(Some(want)), "the first kind again");
        let close =
            b"HTTP/1.1 404 Not Found\r\nConnection: keep-alive, close\r\nTransfer-Encoding: chunked\r\n\r\n";
        let info = cache.read(close).unwrap().unwrap();
        assert_eq!((info.status, info.close, info.body), (404, true, Some(Body::Chunked)));
        assert_eq!(cache.read(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
        assert!(cache.read(b"HTTP/1.0 204 No Content\n\n").unwrap().unwrap().close);
        assert_eq!(cache.read(b"SSH-2.0\r\n\r\n"), Err(()));
        for n in 0..100 {
            let head = format!("HTTP/1.1 200 OK\r\nX-N: {n}\r\nContent-Length: 0\r\n\r\n");
            assert_eq!(cache.read(head.as_bytes()).unwrap().unwrap().body, None);
        }
        assert_eq!(cache.entries.len(), HEAD_CACHE);
        assert_eq!(find_head_end(b"a\r\n\r\nb"), Some(5));
        assert_eq!(find_head_end(b"\n\r\n\r"), None);
    }

    #[test]
    fn histogram_percentiles_are_close() {
        let mut h = Histogram::default();
        for us in 1..=10_000u64 {
            h.record(us);
        }
        let p50 = h.percentile_us(50.0).unwrap();
        let p99 = h.percentile_us(99.0).unwrap();
        assert!((p50 - 5000.0).abs() / 5000.0 < 0.04, "{p50}");
        assert!((p99 - 9900.0).abs() / 9900.0 < 0.04, "{p99}");
        assert_eq!(h.max_us(), Some(10_000));
        assert_eq!(Histogram::default().percentile_us(50.0), None);
        for us in [0, 1, 63, 64, 65, 1000, 123_456_789] {
            let v = Histogram::value(Histogram::index(us));
            assert!((v - us as f64).abs() <= us as f64 * 0.04 + 1.0, "{us} -> {v}");
        }
    }

    /// A tiny server: answers each request head with `answer(n)` for the
    /// nth request on the connection, closing when it says so.
    fn serve(answer: fn(u64) -> (&'static [u8], bool)) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let mut n = 0;
                    loop {
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            n += 1;
                            let (bytes, close) = answer(n);
                            if s.write_all(bytes).is_err() || close {
                                return;
                            }
                        }
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(k) => buf.extend_from_slice(&chunk[..k]),
                        }
                    }
                });
            }
        });
        addr
    }

    fn spec(addr: SocketAddr) -> LoadSpec {
        LoadSpec {
            addr,
            templates: vec![Template::new(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), 1)],
            connections: 4,
            pipeline: 1,
            reconnect_every: None,
            warmup: Duration::ZERO,
            duration: Duration::from_millis(300),
            timeout: Duration::from_secs(2),
        }
    }

    #[test]
    fn counts_answers_and_bytes() {
        let addr = serve(|_| (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false));
        let r = run(&spec(addr)).unwrap();
        assert!(r.requests > 10, "{r:?}");
        assert_eq!(r.status_classes[1], r.requests);
        assert_eq!(r.errors.total(), 0, "{r:?}");
        assert_eq!(r.response_bytes, r.requests * 40);
        assert_eq!(r.reconnects, 0);
        assert!(r.latency_p50_ms.is_some());
    }

    #[test]
    fn pipelines_reconnects_and_counts_non_2xx() {
        let addr = serve(|n| {
            if n % 3 == 0 {
                (b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", false)
            } else {
                (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false)
            }
        });
        let mut s = spec(addr);
        s.pipeline = 3;
        s.reconnect_every = Some(6);
        let r = run(&s).unwrap();
        assert!(r.requests > 30, "{r:?}");
        assert_eq!(r.errors.total(), 0, "{r:?}");
        // Every third answer is a 404 (up to the batches cut by the window).
        assert!((r.status_classes[3] * 3).abs_diff(r.requests) <= 24, "{r:?}");
        assert!(r.reconnects > 0);
    }

    #[test]
    fn connection_close_answers_reconnect() {
        let addr = serve(|_| (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nk", true));
        let r = run(&spec(addr)).unwrap();
        assert!(r.requests > 10, "{r:?}");
        assert_eq!(r.errors.total(), 0, "{r:?}");
        assert!(r.reconnects >= r.requests - 4, "{r:?}");
    }

    #[test]
    fn expect_100_continue_holds_the_body() {
        // Answers `100 Continue` to the head, then 200 once the body
        // (`abc`, ending the next "head" at its CRLFCRLF) has arrived.
        let addr = serve(|n| {
            if n % 2 == 1 {
                (b"HTTP/1.1 100 Continue\r\n\r\n", false)
            } else {
                (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false)
            }
        });
        let head = b"POST /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 7\r\n\r\n";
        let mut request = head.to_vec();
        request.extend_from_slice(b"abc\r\n\r\n");
        let mut s = spec(addr);
        s.templates = vec![Template { request, weight: 1, continue_at: Some(head.len()) }];
        let r = run(&s).unwrap();
        assert!(r.requests > 10, "{r:?}");
        assert_eq!((r.errors.total(), r.status_classes[1]), (0, r.requests), "{r:?}");
    }

    #[test]
    fn garbage_is_malformed_and_refused_is_connect_error() {
        let addr = serve(|_| (b"SSH-2.0-nope\r\n\r\n", false));
        let r = run(&spec(addr)).unwrap();
        assert!(r.errors.malformed > 0, "{r:?}");
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let r = run(&spec(closed)).unwrap();
        assert!(r.errors.connect > 0 && r.requests == 0, "{r:?}");
    }
}
