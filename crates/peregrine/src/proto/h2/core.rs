//! The HTTP/2 connection state machine (RFC 9113), without I/O: frames in
//! from the read buffer, frames out into [`Out`], and the state between
//! them: stream states, both directions' flow-control windows, the two
//! HPACK contexts, SETTINGS, and the budgets that end an abusive
//! connection.
//!
//! Why not the `h2` crate: on h2load's `/baseline2` (64 connections x 100
//! streams, one worker) h2o answered 2.3 to 2.4 times as many requests per
//! CPU-second as peregrine on `h2`, and perf put most of the gap in `h2`
//! itself: its frame queue moves `Frame` values (17.5% of the CPU in
//! memmove), every stream is a lock-protected slab entry shared between
//! handles, and every request head becomes a `HeaderMap` and a `Uri`
//! (allocations per field). Here one connection is one task's state
//! (`Rc<RefCell<Core>>`, no locks), a response's frames are encoded
//! straight into the connection's output buffer, and a request head is
//! decoded into a reused buffer ([`RequestHead`]). Measured with
//! `scripts/h2-bench 8 64` on a quiet machine, in one run with the peers:
//! baseline-h2c went from 395k requests/s at 100% server CPU on `h2` to
//! 984k at 87% (1,125,894 per server CPU-second: 1.28x h2o's), and an idle
//! h2c connection from 22.3 to 8.8 KiB (`stress idle`).
//!
//! Streams reach the driver as [`Accepted`]; it answers them in the
//! connection's task or hands them to a stream task through the handles in
//! `handle.rs`, which call back into this state for every send and receive.
//!
//! Bounds, each the answer to a published attack:
//! - concurrent streams (`REFUSED_STREAM` beyond the limit);
//! - the decoded header list (`431`), and the header block gathered from
//!   CONTINUATION frames (a connection error past the list limit: the
//!   CONTINUATION flood);
//! - streams the client resets before the driver took them (rapid reset),
//!   and streams the server had to reset for the client's errors:
//!   `ENHANCE_YOUR_CALM` past their budgets;
//! - empty DATA frames: `ENHANCE_YOUR_CALM` past [`EMPTY_DATA_BUDGET`];
//! - SETTINGS and PING floods, whose acknowledgements queue output: the
//!   driver stops reading while the output is over [`OUT_HIGH`], so a
//!   client that writes without reading stalls itself;
//! - response bytes: flow control, and capacity granted only while the
//!   output holds less than the send-buffer limit.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::IoSlice;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};

use super::frame::{self, Head, Reason, HEADER_LEN, MAX_WINDOW};
use super::head::RequestHead;
use super::hpack::{Decoder, Encoder};
use crate::config::Http2Config;

/// Output above which the connection reads no more input.
pub(crate) const OUT_HIGH: usize = 256 * 1024;
/// Streams taken from one read before the driver answers them.
const ACCEPT_BATCH: usize = 256;
/// Empty DATA frames (without END_STREAM) a connection may send in a row.
const EMPTY_DATA_BUDGET: u32 = 1000;
/// Streams reset by the server whose late frames are ignored.
const RECENT_RESETS: usize = 128;
/// Output buffer capacity kept across waits (about 100 small answers).
const KEEP_TAIL: usize = 16 * 1024;
/// DATA payloads up to this size are copied into the output buffer; larger
/// ones are queued as they are and written with `writev`.
const COPY_DATA: usize = 1024;

/// The SETTINGS identifiers the server reads or sends (RFC 9113 §6.5.2,
/// RFC 8441 §3).
const HEADER_TABLE_SIZE: u16 = 0x1;
const ENABLE_PUSH: u16 = 0x2;
const MAX_CONCURRENT_STREAMS: u16 = 0x3;
const INITIAL_WINDOW_SIZE: u16 = 0x4;
const MAX_FRAME_SIZE: u16 = 0x5;
const MAX_HEADER_LIST_SIZE: u16 = 0x6;
const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;

/// The table size the server's decoder allows (the protocol's default).
const DECODER_TABLE: usize = 4096;

/// A stream the client opened, for the driver to answer.
pub(crate) struct Accepted {
    pub(crate) id: u32,
    pub(crate) head: RequestHead,
    /// The request ended with its head (no body).
    pub(crate) end_stream: bool,
}

/// A multiplicative hash for stream identifiers: they are distinct odd
/// numbers chosen by the client, and at most a few hundred are live.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// The bytes waiting for the socket: earlier segments (large DATA
/// payloads, shared rather than copied) and a tail that small frames are
/// appended to.
#[derive(Default)]
pub(crate) struct Out {
    segments: VecDeque<Bytes>,
    tail: Vec<u8>,
    /// Bytes of the first segment (or of the tail, with no segments)
    /// already written.
    written: usize,
    len: usize,
}

impl Out {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends to the tail with `f`, keeping the count.
    fn put(&mut self, f: impl FnOnce(&mut Vec<u8>)) {
        let before = self.tail.len();
        f(&mut self.tail);
        self.len += self.tail.len() - before;
    }

    /// Queues `data` after what is there, without copying it.
    fn put_shared(&mut self, data: Bytes) {
        if !self.tail.is_empty() {
            let tail = Bytes::copy_from_slice(&self.tail[self.written_in_tail()..]);
            if self.segments.is_empty() {
                self.written = 0;
            }
            self.tail.clear();
            self.segments.push_back(tail);
        }
        self.len += data.len();
        self.segments.push_back(data);
    }

    fn written_in_tail(&self) -> usize {
        if self.segments.is_empty() {
            self.written
        } else {
            0
        }
    }

    /// Gives back the tail's memory once a burst is written, past what a
    /// batch of small answers needs.
    pub(crate) fn shrink_when_empty(&mut self) {
        if self.len == 0 && self.tail.capacity() > KEEP_TAIL {
            self.tail = Vec::new();
        }
    }

    /// The unwritten bytes as slices for one vectored write.
    pub(crate) fn slices<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (i, segment) in self.segments.iter().enumerate() {
            if n == dst.len() {
                return n;
            }
            let skip = if i == 0 { self.written } else { 0 };
            dst[n] = IoSlice::new(&segment[skip..]);
            n += 1;
        }
        let skip = self.written_in_tail();
        if n < dst.len() && self.tail.len() > skip {
            dst[n] = IoSlice::new(&self.tail[skip..]);
            n += 1;
        }
        n
    }

    /// Drops `n` written bytes.
    pub(crate) fn advance(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            match self.segments.front() {
                Some(front) => {
                    let left = front.len() - self.written;
                    if n >= left {
                        n -= left;
                        self.written = 0;
                        self.segments.pop_front();
                    } else {
                        self.written += n;
                        n = 0;
                    }
                }
                None => {
                    self.written += n;
                    n = 0;
                }
            }
        }
        if self.segments.is_empty() && self.written == self.tail.len() {
            self.tail.clear();
            self.written = 0;
        }
    }
}

/// A continuation of a header block in progress (HEADERS without
/// END_HEADERS).
struct Continuation {
    stream: u32,
    end_stream: bool,
    block: Vec<u8>,
    depends_on_itself: bool,
}

/// One stream's state.
struct Stream {
    /// END_STREAM received (or the stream reset).
    recv_closed: bool,
    /// What the client may still send on this stream.
    recv_window: i64,
    /// Bytes taken by the reader, not yet given back in a WINDOW_UPDATE.
    recv_release: i64,
    recv_buf: VecDeque<Bytes>,
    recv_waker: Option<Waker>,
    /// Someone may still read the body; if not, DATA is released at once.
    reading: bool,
    content_length: Option<u64>,
    received: u64,
    /// END_STREAM queued or written.
    send_ended: bool,
    send_window: i64,
    queued: VecDeque<Bytes>,
    queued_end: bool,
    queued_trailers: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    cap_waker: Option<Waker>,
    reset: Option<Reason>,
    reset_waker: Option<Waker>,
    /// Claims on the stream: the driver's until it hands the stream on,
    /// then one per handle.
    claims: u32,
    /// Counted toward the concurrency limit.
    active: bool,
}

impl Stream {
    fn queued_is_empty(&self) -> bool {
        self.queued.is_empty() && !self.queued_end && self.queued_trailers.is_none()
    }

    /// Reset, by either side: nothing more is sent or received; wakes
    /// every waiter. Returns the buffered body bytes it dropped, for the
    /// connection window.
    fn reset(&mut self, reason: Reason) -> i64 {
        self.reset = Some(reason);
        self.recv_closed = true;
        self.send_ended = true;
        self.queued.clear();
        self.queued_end = false;
        self.queued_trailers = None;
        self.wake_all();
        self.drop_buffered()
    }

    /// Drops the buffered body; returns its size, for the connection
    /// window.
    fn drop_buffered(&mut self) -> i64 {
        self.recv_buf.drain(..).map(|b| b.len() as i64).sum()
    }

    fn wake_all(&mut self) {
        for waker in
            [self.recv_waker.take(), self.cap_waker.take(), self.reset_waker.take()].into_iter().flatten()
        {
            waker.wake();
        }
    }
}

/// Why a stream cannot take a send or a receive any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamGone {
    /// Reset, by the client or by the server.
    Reset(Reason),
    /// The connection failed or closed.
    Closed,
}

/// The connection's state. See the module docs.
pub(crate) struct Core {
    config: Http2Config,
    decoder: Decoder,
    encoder: Encoder,
    /// Scratch for encoding one header block.
    block: Vec<u8>,
    peer_max_frame: usize,
    peer_initial_window: i64,
    send_window: i64,
    recv_window: i64,
    recv_release: i64,
    streams: HashMap<u32, Stream, BuildHasherDefault<IdHasher>>,
    last_client_id: u32,
    active: usize,
    continuation: Option<Continuation>,
    pub(crate) out: Out,
    pub(crate) accepted: Vec<Accepted>,
    head_pool: Vec<RequestHead>,
    /// Streams with DATA waiting for window, in the order they queued it.
    pending_send: VecDeque<u32>,
    cap_waiting: Vec<u32>,
    /// The last stream id of the GOAWAY sent, once sent.
    goaway: Option<u32>,
    /// A connection error: GOAWAY is queued, nothing more is read.
    error: Option<Reason>,
    /// The transport failed or the connection is being torn down.
    closed: bool,
    /// The client sent GOAWAY.
    peer_goaway: bool,
    pending_accept_resets: usize,
    local_error_resets: usize,
    /// Streams the server reset lately, newest last: what the client still
    /// sends on them (it may not have seen the RST_STREAM yet) is ignored
    /// (RFC 9113 §5.4.2), not answered with another reset or, for
    /// trailers, a connection error.
    recently_reset: VecDeque<u32>,
    empty_data: u32,
    conn_waker: Option<Waker>,
    /// A stream handle queued output since the driver last looked.
    pub(crate) dirty: bool,
}

impl Core {
    /// A connection under `config`, with the server's SETTINGS and the
    /// connection window's opening WINDOW_UPDATE queued.
    pub(crate) fn new(config: &Http2Config) -> Core {
        let mut config = config.clone();
        config.max_frame_size = config.max_frame_size.clamp(1 << 14, (1 << 24) - 1);
        config.initial_stream_window = config.initial_stream_window.min(MAX_WINDOW as u32);
        config.initial_connection_window = config.initial_connection_window.min(MAX_WINDOW as u32);
        let mut core = Core {
            decoder: Decoder::new(DECODER_TABLE),
            encoder: Encoder::new(),
            block: Vec::new(),
            peer_max_frame: frame::DEFAULT_MAX_FRAME,
            peer_initial_window: 65_535,
            send_window: 65_535,
            recv_window: 65_535,
            recv_release: 0,
            streams: HashMap::default(),
            last_client_id: 0,
            active: 0,
            continuation: None,
            out: Out::default(),
            accepted: Vec::new(),
            head_pool: Vec::new(),
            pending_send: VecDeque::new(),
            cap_waiting: Vec::new(),
            goaway: None,
            error: None,
            closed: false,
            peer_goaway: false,
            pending_accept_resets: 0,
            local_error_resets: 0,
            recently_reset: VecDeque::new(),
            empty_data: 0,
            conn_waker: None,
            dirty: false,
            config,
        };
        let c = &core.config;
        let settings = [
            (MAX_CONCURRENT_STREAMS, c.max_concurrent_streams),
            (INITIAL_WINDOW_SIZE, c.initial_stream_window),
            (MAX_FRAME_SIZE, c.max_frame_size),
            (MAX_HEADER_LIST_SIZE, c.max_header_list_bytes),
            (ENABLE_CONNECT_PROTOCOL, 1),
        ];
        core.out.put(|o| frame::put_settings(o, &settings));
        let grow = i64::from(core.config.initial_connection_window) - core.recv_window;
        if grow > 0 {
            core.out.put(|o| frame::put_word(o, frame::WINDOW_UPDATE, 0, grow as u32));
            core.recv_window += grow;
        }
        core
    }

    /// The connection failed with `reason`, if it did.
    pub(crate) fn error(&self) -> Option<Reason> {
        self.error
    }

    /// Whether the connection has nothing left to do after a GOAWAY (sent
    /// or received): no stream is left.
    pub(crate) fn finished(&self) -> bool {
        (self.goaway.is_some() || self.peer_goaway) && self.streams.is_empty() && self.accepted.is_empty()
    }

    /// Whether a header block is part-way in (HEADERS without END_HEADERS,
    /// its CONTINUATION frames still to come).
    pub(crate) fn in_header_block(&self) -> bool {
        self.continuation.is_some()
    }

    /// Whether more input may be read and parsed now.
    pub(crate) fn wants_input(&self) -> bool {
        self.error.is_none() && !self.closed && self.out.len() < OUT_HIGH
    }

    /// Registers the connection task's waker, woken when a stream handle
    /// queues output.
    pub(crate) fn register(&mut self, waker: &Waker) {
        match &self.conn_waker {
            Some(w) if w.will_wake(waker) => {}
            _ => self.conn_waker = Some(waker.clone()),
        }
    }

    fn wake_conn(&mut self) {
        self.dirty = true;
        if let Some(w) = &self.conn_waker {
            w.wake_by_ref();
        }
    }

    /// A connection error: GOAWAY with `reason`, and nothing more is read.
    fn fail(&mut self, reason: Reason, why: &str) {
        if self.error.is_some() {
            return;
        }
        tracing::debug!(%reason, why, "HTTP/2 connection error");
        self.error = Some(reason);
        // Never above an earlier GOAWAY's (RFC 9113 §6.8).
        let last = self.goaway.map_or(self.last_client_id, |sent| sent.min(self.last_client_id));
        self.goaway = Some(last);
        self.out.put(|o| frame::put_goaway(o, last, reason, why.as_bytes()));
    }

    /// Sends GOAWAY (graceful shutdown): streams open now finish, new
    /// ones are ignored.
    pub(crate) fn go_away(&mut self) {
        if self.goaway.is_none() && self.error.is_none() {
            let last = self.last_client_id;
            self.goaway = Some(last);
            self.out.put(|o| frame::put_goaway(o, last, Reason::NO_ERROR, b""));
        }
    }

    /// The transport is gone: every stream fails.
    pub(crate) fn close(&mut self) {
        self.closed = true;
        for stream in self.streams.values_mut() {
            if stream.reset.is_none() {
                stream.reset = Some(Reason::CANCEL);
            }
            stream.recv_closed = true;
            stream.wake_all();
        }
    }

    /// A stream error: RST_STREAM with `reason`.
    fn reset_stream(&mut self, id: u32, reason: Reason, counts_as_error: bool) {
        self.out.put(|o| frame::put_word(o, frame::RST_STREAM, id, reason.0));
        if !self.recently_reset.contains(&id) {
            if self.recently_reset.len() == RECENT_RESETS {
                self.recently_reset.pop_front();
            }
            self.recently_reset.push_back(id);
        }
        if counts_as_error {
            self.local_error_resets += 1;
            if self.local_error_resets > self.config.max_local_error_reset_streams {
                self.fail(Reason::ENHANCE_YOUR_CALM, "too many stream errors");
            }
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            let released = stream.reset(reason);
            self.release_connection(released);
            self.settle(id);
        }
    }

    /// Updates the concurrency count and drops the stream once it is
    /// closed both ways and nobody holds it.
    fn settle(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else { return };
        let closed =
            stream.reset.is_some() || (stream.recv_closed && stream.send_ended && stream.queued_is_empty());
        if closed && stream.active {
            stream.active = false;
            self.active -= 1;
        }
        if closed && stream.claims == 0 {
            self.streams.remove(&id);
        }
    }

    // ---- input -------------------------------------------------------

    /// Takes every whole frame from `input` while the connection wants
    /// input and the batch of accepted streams has room.
    pub(crate) fn receive(&mut self, input: &mut BytesMut) {
        while self.wants_input() && self.accepted.len() < ACCEPT_BATCH && input.len() >= HEADER_LEN {
            let mut raw = [0u8; HEADER_LEN];
            raw.copy_from_slice(&input[..HEADER_LEN]);
            let head = Head::parse(&raw);
            if head.len > self.config.max_frame_size as usize {
                self.fail(Reason::FRAME_SIZE_ERROR, "frame larger than SETTINGS_MAX_FRAME_SIZE");
                return;
            }
            if input.len() < HEADER_LEN + head.len {
                input.reserve(HEADER_LEN + head.len - input.len());
                return;
            }
            if head.kind == frame::DATA && self.continuation.is_none() {
                let mut data = input.split_to(HEADER_LEN + head.len).freeze();
                data.advance(HEADER_LEN);
                self.on_data(&head, data);
            } else {
                self.on_frame(&head, &input[HEADER_LEN..HEADER_LEN + head.len]);
                input.advance(HEADER_LEN + head.len);
            }
        }
    }

    fn on_frame(&mut self, head: &Head, payload: &[u8]) {
        if let Some(cont) = &self.continuation {
            if head.kind != frame::CONTINUATION || head.stream != cont.stream {
                return self.fail(Reason::PROTOCOL_ERROR, "expected CONTINUATION");
            }
        }
        let result = match head.kind {
            frame::HEADERS => self.on_headers(head, payload),
            frame::CONTINUATION => self.on_continuation(head, payload),
            frame::PRIORITY => self.on_priority(head, payload),
            frame::RST_STREAM => self.on_reset(head, payload),
            frame::SETTINGS => self.on_settings(head, payload),
            frame::PING => self.on_ping(head, payload),
            frame::GOAWAY => self.on_goaway(head, payload),
            frame::WINDOW_UPDATE => self.on_window_update(head, payload),
            frame::PUSH_PROMISE => Err(frame::FrameError { reason: Reason::PROTOCOL_ERROR, stream: false }),
            // Unknown frame types are ignored (RFC 9113 §4.1, §5.5).
            _ => Ok(()),
        };
        if let Err(e) = result {
            // RST_STREAM must not be sent on an idle stream (RFC 9113
            // §6.4): a stream error there (a malformed PRIORITY) ends the
            // connection instead.
            if e.stream && !self.is_idle(head.stream) {
                self.reset_stream(head.stream, e.reason, true);
            } else {
                self.fail(e.reason, "invalid frame");
            }
        }
    }

    fn is_idle(&self, id: u32) -> bool {
        id > self.last_client_id
    }

    fn on_data(&mut self, head: &Head, payload: Bytes) {
        let id = head.stream;
        if id == 0 {
            return self.fail(Reason::PROTOCOL_ERROR, "DATA on stream 0");
        }
        let (start, end) = match frame::unpad(head, &payload) {
            Ok(range) => range,
            Err(e) => return self.fail(e.reason, "invalid DATA padding"),
        };
        let flow = payload.len() as i64;
        if flow > self.recv_window {
            return self.fail(Reason::FLOW_CONTROL_ERROR, "DATA beyond the connection window");
        }
        self.recv_window -= flow;
        let end_stream = head.has(frame::END_STREAM);
        let data = payload.slice(start..end);
        if data.is_empty() && !end_stream {
            self.empty_data += 1;
            if self.empty_data > EMPTY_DATA_BUDGET {
                return self.fail(Reason::ENHANCE_YOUR_CALM, "too many empty DATA frames");
            }
        } else if !data.is_empty() {
            self.empty_data = 0;
        }
        let Some(stream) = self.streams.get_mut(&id) else {
            self.release_connection(flow);
            if self.goaway.is_some_and(|last| id > last) || self.recently_reset.contains(&id) {
                // A stream ignored after GOAWAY (RFC 9113 §6.8), or one the
                // server reset (§5.4.2).
                return;
            }
            if self.is_idle(id) {
                return self.fail(Reason::PROTOCOL_ERROR, "DATA on an idle stream");
            }
            return self.reset_stream(id, Reason::STREAM_CLOSED, false);
        };
        if stream.recv_closed {
            self.release_connection(flow);
            if self.recently_reset.contains(&id) {
                return;
            }
            return self.reset_stream(id, Reason::STREAM_CLOSED, false);
        }
        if flow > stream.recv_window {
            self.release_connection(flow);
            return self.reset_stream(id, Reason::FLOW_CONTROL_ERROR, true);
        }
        stream.recv_window -= flow;
        stream.received += data.len() as u64;
        let too_long = stream.content_length.is_some_and(|n| stream.received > n);
        let too_short = end_stream && stream.content_length.is_some_and(|n| stream.received != n);
        if too_long || too_short {
            self.release_connection(flow);
            return self.reset_stream(id, Reason::PROTOCOL_ERROR, true);
        }
        // Padding is consumed at once; the data when the reader takes it.
        let padding = flow - data.len() as i64;
        let mut release_now = padding;
        if stream.reading {
            if !data.is_empty() {
                stream.recv_buf.push_back(data);
            }
        } else {
            release_now = flow;
        }
        if end_stream {
            stream.recv_closed = true;
        }
        if let Some(w) = stream.recv_waker.take() {
            w.wake();
        }
        self.release_connection(release_now);
        if end_stream {
            self.settle(id);
        }
    }

    fn on_headers(&mut self, head: &Head, payload: &[u8]) -> Result<(), frame::FrameError> {
        let (priority, start, end) = frame::headers(head, payload)?;
        let depends_on_itself = priority.is_some_and(|p| p.depends_on == head.stream);
        let fragment = &payload[start..end];
        if head.has(frame::END_HEADERS) {
            self.on_header_block(head.stream, head.has(frame::END_STREAM), depends_on_itself, fragment);
        } else {
            if fragment.len() > self.config.max_header_list_bytes as usize {
                self.fail(Reason::ENHANCE_YOUR_CALM, "header block larger than the header list limit");
                return Ok(());
            }
            self.continuation = Some(Continuation {
                stream: head.stream,
                end_stream: head.has(frame::END_STREAM),
                block: fragment.to_vec(),
                depends_on_itself,
            });
        }
        Ok(())
    }

    fn on_continuation(&mut self, head: &Head, payload: &[u8]) -> Result<(), frame::FrameError> {
        let Some(mut cont) = self.continuation.take() else {
            self.fail(Reason::PROTOCOL_ERROR, "CONTINUATION without HEADERS");
            return Ok(());
        };
        // The compressed block is never larger than the list it decodes to
        // by more than a few bytes; past the limit, this is a flood.
        if cont.block.len() + payload.len() > self.config.max_header_list_bytes as usize + 1024 {
            self.fail(Reason::ENHANCE_YOUR_CALM, "header block larger than the header list limit");
            return Ok(());
        }
        cont.block.extend_from_slice(payload);
        if head.has(frame::END_HEADERS) {
            self.on_header_block(cont.stream, cont.end_stream, cont.depends_on_itself, &cont.block);
        } else {
            self.continuation = Some(cont);
        }
        Ok(())
    }

    /// A whole header block: a new stream's request head, or a stream's
    /// trailers.
    fn on_header_block(&mut self, id: u32, end_stream: bool, depends_on_itself: bool, block: &[u8]) {
        if id % 2 == 0 {
            return self.fail(Reason::PROTOCOL_ERROR, "HEADERS on an even stream");
        }
        let mut head = self.head_pool.pop().unwrap_or_default();
        head.clear();
        let existing = self.streams.contains_key(&id);
        let limit = self.config.max_header_list_bytes as usize;
        let decoded = self.decoder.decode(block, &mut |name, value| head.field(name, value, existing, limit));
        if decoded.is_err() {
            self.head_pool.push(head);
            return self.fail(Reason::COMPRESSION_ERROR, "invalid header block");
        }
        if existing {
            // Trailers: they end the stream; their fields are not kept.
            let malformed = head.malformed_reason().is_some() || head.oversized();
            self.head_pool.push(head);
            let Some(stream) = self.streams.get_mut(&id) else { return };
            if stream.recv_closed {
                if self.recently_reset.contains(&id) {
                    return;
                }
                return self.reset_stream(id, Reason::STREAM_CLOSED, false);
            }
            if !end_stream || malformed || stream.content_length.is_some_and(|n| stream.received != n) {
                return self.reset_stream(id, Reason::PROTOCOL_ERROR, true);
            }
            stream.recv_closed = true;
            if let Some(w) = stream.recv_waker.take() {
                w.wake();
            }
            return self.settle(id);
        }
        if self.goaway.is_some_and(|last| id > last) {
            // Opened after GOAWAY (or its trailers): ignored (RFC 9113
            // §6.8). The id counts as used, so the stream's other frames
            // are ignored too rather than failing the connection as frames
            // on an idle stream.
            self.last_client_id = self.last_client_id.max(id);
            self.head_pool.push(head);
            return;
        }
        if !self.is_idle(id) {
            self.head_pool.push(head);
            if self.recently_reset.contains(&id) {
                // Trailers on a stream the server reset: ignored (§5.4.2).
                return;
            }
            return self.fail(Reason::STREAM_CLOSED, "HEADERS on a closed stream");
        }
        self.last_client_id = id;
        if depends_on_itself {
            self.head_pool.push(head);
            return self.reset_stream(id, Reason::PROTOCOL_ERROR, true);
        }
        if self.active >= self.config.max_concurrent_streams as usize {
            self.head_pool.push(head);
            return self.reset_stream(id, Reason::REFUSED_STREAM, false);
        }
        head.finish_request(true);
        if let Some(why) = head.malformed_reason() {
            tracing::debug!(why, "malformed HTTP/2 request");
            self.head_pool.push(head);
            return self.reset_stream(id, Reason::PROTOCOL_ERROR, true);
        }
        let content_length = head.content_length();
        if end_stream && content_length.is_some_and(|n| n != 0) {
            self.head_pool.push(head);
            return self.reset_stream(id, Reason::PROTOCOL_ERROR, true);
        }
        self.active += 1;
        self.streams.insert(
            id,
            Stream {
                recv_closed: end_stream,
                recv_window: i64::from(self.config.initial_stream_window),
                recv_release: 0,
                recv_buf: VecDeque::new(),
                recv_waker: None,
                reading: true,
                content_length,
                received: 0,
                send_ended: false,
                send_window: self.peer_initial_window,
                queued: VecDeque::new(),
                queued_end: false,
                queued_trailers: None,
                cap_waker: None,
                reset: None,
                reset_waker: None,
                claims: 1,
                active: true,
            },
        );
        self.accepted.push(Accepted { id, head, end_stream });
    }

    fn on_priority(&mut self, head: &Head, payload: &[u8]) -> Result<(), frame::FrameError> {
        let priority = frame::priority(head, payload)?;
        if priority.depends_on == head.stream {
            return Err(frame::FrameError { reason: Reason::PROTOCOL_ERROR, stream: true });
        }
        Ok(())
    }

    fn on_reset(&mut self, head: &Head, payload: &[u8]) -> Result<(), frame::FrameError> {
        let code = frame::word(payload)?;
        let id = head.stream;
        if id == 0 || self.is_idle(id) {
            return Err(frame::FrameError { reason: Reason::PROTOCOL_ERROR, stream: false });
        }
        let Some(stream) = self.streams.get_mut(&id) else { return Ok(()) };
        let unanswered = !stream.send_ended;
        let released = stream.reset(Reason(code));
        self.release_connection(released);
        // Rapid reset: streams reset before the driver even took them.
        if unanswered && self.accepted.iter().any(|a| a.id == id) {
            self.pending_accept_resets += 1;
            if self.pending_accept_resets > self.config.max_pending_accept_reset_streams {
                self.fail(Reason::ENHANCE_YOUR_CALM, "too many streams reset before they were answered");
            }
        }
        self.settle(id);
        Ok(())
    }

    fn on_settings(&mut self, head: &Head, payload: &[u8]) -> Result<(), frame::FrameError> {
        let params = frame::settings(head, payload)?;
        if head.has(frame::ACK) {
            return Ok(());
        }
        let protocol = |reason| Err(frame::FrameError { reason, stream: false });
        for (id, value) in params {
            match id {
                HEADER_TABLE_SIZE => self.encoder.set_max_table_size(value as usize),
                ENABLE_PUSH if value > 1 => return protocol(Reason::PROTOCOL_ERROR),
                INITIAL_WINDOW_SIZE => {
                    if i64::from(value) > MAX_WINDOW {
                        return protocol(Reason::FLOW_CONTROL_ERROR);
                    }
                    let delta = i64::from(value) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(value);
                    for stream in self.streams.values_mut() {
                        stream.send_window += delta;
                        if stream.send_window > MAX_WINDOW {
                            return protocol(Reason::FLOW_CONTROL_ERROR);
                        }
                    }
                    if delta > 0 {
                        self.window_opened();
                    }
                }
                MAX_FRAME_SIZE => {
                    if !(1 << 14..1 << 24).contains(&value) {
                        return protocol(Reason::PROTOCOL_ERROR);
                    }
                    self.peer_max_frame = value as usize;
                }
                ENABLE_CONNECT_PROTOCOL if value > 1 => return protocol(Reason::PROTOCOL_ERROR),
                _ => {}
            }
        }
        self.out.put(|o| frame::put_head(o, 0, frame::SETTINGS, frame::ACK, 0));
        Ok(())
    }

    fn on_ping(&mut self, head: &Head, payload: &[u8]) -> Result<(), frame::FrameError> {
        if head.stream != 0 {
            return Err(frame::FrameError { reason: Reason::PROTOCOL_ERROR, stream: false });
        }
        if payload.len() != 8 {
            return Err(frame::FrameError { reason: Reason::FRAME_SIZE_ERROR, stream: false });
        }
        if !head.has(frame::ACK) {
            self.out.put(|o| {
                frame::put_head(o, 8, frame::PING, frame::ACK, 0);
                o.extend_from_slice(payload);
            });
        }
        Ok(())
    }

    fn on_goaway(&mut self, head: &Head, payload: &[u8]) -> Result<(), frame::FrameError> {
        if head.stream != 0 {
            return Err(frame::FrameError { reason: Reason::PROTOCOL_ERROR, stream: false });
        }
        if payload.len() < 8 {
            return Err(frame::FrameError { reason: Reason::FRAME_SIZE_ERROR, stream: false });
        }
        self.peer_goaway = true;
        Ok(())
    }

    fn on_window_update(&mut self, head: &Head, payload: &[u8]) -> Result<(), frame::FrameError> {
        let increment = i64::from(frame::word(payload)? & 0x7fff_ffff);
        let id = head.stream;
        if id == 0 {
            if increment == 0 {
                return Err(frame::FrameError { reason: Reason::PROTOCOL_ERROR, stream: false });
            }
            self.send_window += increment;
            if self.send_window > MAX_WINDOW {
                return Err(frame::FrameError { reason: Reason::FLOW_CONTROL_ERROR, stream: false });
            }
            self.window_opened();
            return Ok(());
        }
        if self.is_idle(id) {
            return Err(frame::FrameError { reason: Reason::PROTOCOL_ERROR, stream: false });
        }
        if increment == 0 {
            return Err(frame::FrameError { reason: Reason::PROTOCOL_ERROR, stream: true });
        }
        let Some(stream) = self.streams.get_mut(&id) else { return Ok(()) };
        stream.send_window += increment;
        if stream.send_window > MAX_WINDOW {
            return Err(frame::FrameError { reason: Reason::FLOW_CONTROL_ERROR, stream: true });
        }
        self.window_opened();
        Ok(())
    }

    /// Gives `n` bytes of connection window back once half the window is
    /// waiting to be given.
    fn release_connection(&mut self, n: i64) {
        if n <= 0 {
            return;
        }
        self.recv_release += n;
        if self.recv_release >= i64::from(self.config.initial_connection_window) / 2 && self.error.is_none() {
            let grant = self.recv_release;
            self.recv_release = 0;
            self.recv_window += grant;
            self.out.put(|o| frame::put_word(o, frame::WINDOW_UPDATE, 0, grant as u32));
        }
    }

    // ---- for the driver and the handles -------------------------------

    /// A head back into the pool once the driver is done with it.
    pub(crate) fn recycle(&mut self, head: RequestHead) {
        if self.head_pool.len() < ACCEPT_BATCH {
            self.head_pool.push(head);
        }
    }

    /// Takes the batch of accepted streams (the driver gives the vector
    /// back with [`Core::return_accepted`] to keep its memory).
    pub(crate) fn take_accepted(&mut self, into: &mut Vec<Accepted>) {
        std::mem::swap(&mut self.accepted, into);
        self.pending_accept_resets = 0;
    }

    /// Whether the stream is reset (or gone).
    pub(crate) fn is_reset(&self, id: u32) -> bool {
        self.streams.get(&id).map_or(true, |s| s.reset.is_some())
    }

    /// One more claim on the stream (a handle).
    pub(crate) fn claim(&mut self, id: u32) {
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.claims += 1;
        }
    }

    /// Drops one claim on the stream. With the last one: a response never
    /// finished is reset (`CANCEL`), and a request body nobody will read
    /// is refused (`NO_ERROR`, RFC 9113 §8.1) once the response is out.
    pub(crate) fn release(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else { return };
        stream.claims = stream.claims.saturating_sub(1);
        if stream.claims > 0 {
            return;
        }
        if stream.reset.is_none() {
            if !stream.send_ended {
                self.reset_stream(id, Reason::CANCEL, false);
            } else if stream.queued_is_empty() && !stream.recv_closed {
                self.reset_stream(id, Reason::NO_ERROR, false);
            } else if !stream.queued_is_empty() {
                // Finished once the queue drains (`flush_stream`).
                self.stop_reading(id);
                return;
            }
        }
        self.settle(id);
        self.wake_conn();
    }

    /// The reader is gone: what is buffered and what still comes is
    /// released at once.
    pub(crate) fn stop_reading(&mut self, id: u32) {
        let Some(stream) = self.streams.get_mut(&id) else { return };
        stream.reading = false;
        let released = stream.drop_buffered();
        self.release_connection(released);
    }

    /// The next body piece of stream `id`: `Ok(None)` at its end.
    pub(crate) fn poll_data(
        &mut self,
        id: u32,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamGone>> {
        let Some(stream) = self.streams.get_mut(&id) else { return Poll::Ready(Err(StreamGone::Closed)) };
        if let Some(reason) = stream.reset {
            return Poll::Ready(Err(StreamGone::Reset(reason)));
        }
        if let Some(data) = stream.recv_buf.pop_front() {
            return Poll::Ready(Ok(Some(data)));
        }
        if stream.recv_closed {
            return Poll::Ready(Ok(None));
        }
        if self.closed || self.error.is_some() {
            return Poll::Ready(Err(StreamGone::Closed));
        }
        stream.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Whether the request body has ended with nothing left to read.
    pub(crate) fn is_end_stream(&self, id: u32) -> bool {
        self.streams.get(&id).map_or(true, |s| s.recv_closed && s.recv_buf.is_empty())
    }

    /// The reader took `n` bytes: the client may send as many again.
    pub(crate) fn release_capacity(&mut self, id: u32, n: usize) {
        if n == 0 {
            return;
        }
        let n = n as i64;
        let stream_window = i64::from(self.config.initial_stream_window);
        if let Some(stream) = self.streams.get_mut(&id) {
            // A stream whose body has ended needs no window back.
            if !stream.recv_closed {
                stream.recv_release += n;
                if stream.recv_release >= stream_window / 2 {
                    let grant = stream.recv_release;
                    stream.recv_release = 0;
                    stream.recv_window += grant;
                    self.out.put(|o| frame::put_word(o, frame::WINDOW_UPDATE, id, grant as u32));
                    self.wake_conn();
                }
            }
        }
        let before = self.out.len();
        self.release_connection(n);
        if self.out.len() != before {
            self.wake_conn();
        }
    }

    /// Waits for the client to reset stream `id`.
    pub(crate) fn poll_reset(&mut self, id: u32, cx: &mut Context<'_>) -> Poll<Reason> {
        let Some(stream) = self.streams.get_mut(&id) else { return Poll::Ready(Reason::CANCEL) };
        if let Some(reason) = stream.reset {
            return Poll::Ready(reason);
        }
        if self.closed {
            return Poll::Ready(Reason::CANCEL);
        }
        stream.reset_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Resets stream `id` from the server's side.
    pub(crate) fn send_reset(&mut self, id: u32, reason: Reason) {
        if self.streams.get(&id).is_some_and(|s| s.reset.is_none()) {
            self.reset_stream(id, reason, false);
            self.wake_conn();
        }
    }

    fn sendable(&self, id: u32) -> Result<(), StreamGone> {
        match self.streams.get(&id) {
            None => Err(StreamGone::Closed),
            Some(s) if s.reset.is_some() => Err(StreamGone::Reset(s.reset.unwrap_or(Reason::CANCEL))),
            Some(_) if self.closed || self.error.is_some() => Err(StreamGone::Closed),
            Some(s) if s.send_ended => Err(StreamGone::Reset(Reason::STREAM_CLOSED)),
            Some(_) => Ok(()),
        }
    }

    /// Sends a header block encoded by `encode` on stream `id` (the
    /// response head, or with `end_stream` the trailers or a bodiless
    /// response).
    pub(crate) fn send_headers(
        &mut self,
        id: u32,
        end_stream: bool,
        encode: impl FnOnce(&mut Encoder, &mut Vec<u8>),
    ) -> Result<(), StreamGone> {
        self.sendable(id)?;
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        self.encoder.begin_block(&mut block);
        encode(&mut self.encoder, &mut block);
        let max = self.peer_max_frame;
        self.out.put(|o| frame::put_headers(o, id, &block, end_stream, max));
        self.block = block;
        if end_stream {
            if let Some(stream) = self.streams.get_mut(&id) {
                stream.send_ended = true;
            }
            self.settle(id);
        }
        self.wake_conn();
        Ok(())
    }

    /// Sends (or queues, for lack of window) `data` on stream `id`.
    pub(crate) fn send_data(&mut self, id: u32, data: Bytes, end_stream: bool) -> Result<(), StreamGone> {
        self.sendable(id)?;
        let Some(stream) = self.streams.get_mut(&id) else { return Err(StreamGone::Closed) };
        let was_empty = stream.queued.is_empty();
        if !data.is_empty() {
            stream.queued.push_back(data);
        }
        if end_stream {
            stream.queued_end = true;
            stream.send_ended = true;
        }
        if was_empty {
            self.flush_stream(id);
        }
        if self.streams.get(&id).is_some_and(|s| !s.queued_is_empty()) && !self.pending_send.contains(&id) {
            self.pending_send.push_back(id);
        }
        self.wake_conn();
        Ok(())
    }

    /// Ends stream `id` with trailers, after its queued data.
    pub(crate) fn send_trailers(
        &mut self,
        id: u32,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<(), StreamGone> {
        self.sendable(id)?;
        let Some(stream) = self.streams.get_mut(&id) else { return Err(StreamGone::Closed) };
        stream.queued_trailers = Some(fields);
        stream.send_ended = true;
        self.flush_stream(id);
        if self.streams.get(&id).is_some_and(|s| !s.queued_is_empty()) && !self.pending_send.contains(&id) {
            self.pending_send.push_back(id);
        }
        self.wake_conn();
        Ok(())
    }

    /// Writes what stream `id` has queued, as far as the windows allow.
    fn flush_stream(&mut self, id: u32) {
        let max_frame = self.peer_max_frame;
        let Some(stream) = self.streams.get_mut(&id) else { return };
        while let Some(front) = stream.queued.front_mut() {
            let allowed = stream.send_window.min(self.send_window).min(max_frame as i64);
            if allowed <= 0 {
                break;
            }
            let n = (allowed as usize).min(front.len());
            let piece = front.split_to(n);
            if front.is_empty() {
                stream.queued.pop_front();
            }
            stream.send_window -= n as i64;
            self.send_window -= n as i64;
            let last = stream.queued.is_empty() && stream.queued_end && stream.queued_trailers.is_none();
            let flags = if last { frame::END_STREAM } else { 0 };
            if n <= COPY_DATA {
                self.out.put(|o| {
                    frame::put_head(o, n, frame::DATA, flags, id);
                    o.extend_from_slice(&piece);
                });
            } else {
                self.out.put(|o| frame::put_head(o, n, frame::DATA, flags, id));
                self.out.put_shared(piece);
            }
            if last {
                stream.queued_end = false;
            }
        }
        if !stream.queued.is_empty() {
            return;
        }
        if stream.queued_end && stream.queued_trailers.is_none() {
            stream.queued_end = false;
            self.out.put(|o| frame::put_head(o, 0, frame::DATA, frame::END_STREAM, id));
        }
        if let Some(trailers) = stream.queued_trailers.take() {
            stream.queued_end = false;
            let mut block = std::mem::take(&mut self.block);
            block.clear();
            self.encoder.begin_block(&mut block);
            for (name, value) in &trailers {
                self.encoder.field(name, value, &mut block);
            }
            let max = self.peer_max_frame;
            self.out.put(|o| frame::put_headers(o, id, &block, true, max));
            self.block = block;
        }
        if stream.claims == 0 && !stream.recv_closed {
            // Detached (`release`) and now sent: refuse the rest of the body.
            self.reset_stream(id, Reason::NO_ERROR, false);
        }
        self.settle(id);
    }

    /// Window opened (WINDOW_UPDATE, SETTINGS): queued DATA goes out, and
    /// streams waiting for capacity look again.
    fn window_opened(&mut self) {
        let pending = self.pending_send.len();
        for _ in 0..pending {
            let Some(id) = self.pending_send.pop_front() else { break };
            self.flush_stream(id);
            if self.streams.get(&id).is_some_and(|s| !s.queued_is_empty()) {
                self.pending_send.push_back(id);
            }
        }
        self.wake_capacity();
    }

    /// Wakes the streams waiting for send capacity.
    pub(crate) fn wake_capacity(&mut self) {
        for id in self.cap_waiting.drain(..) {
            if let Some(waker) = self.streams.get_mut(&id).and_then(|s| s.cap_waker.take()) {
                waker.wake();
            }
        }
    }

    /// Whether a stream waits for capacity that written output may free.
    pub(crate) fn has_capacity_waiters(&self) -> bool {
        !self.cap_waiting.is_empty()
    }

    /// Send capacity for stream `id`: at most `want` bytes it may send now
    /// without queueing (its window, the connection's, and the room left
    /// under the send-buffer limit).
    pub(crate) fn poll_capacity(
        &mut self,
        id: u32,
        want: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Result<usize, StreamGone>> {
        self.sendable(id)?;
        let room = self.config.max_send_buffer_bytes.saturating_sub(self.out.len()) as i64;
        let Some(stream) = self.streams.get_mut(&id) else { return Poll::Ready(Err(StreamGone::Closed)) };
        let available =
            if stream.queued.is_empty() { stream.send_window.min(self.send_window).min(room) } else { 0 };
        if available > 0 {
            return Poll::Ready(Ok((available as usize).min(want)));
        }
        stream.cap_waker = Some(cx.waker().clone());
        if !self.cap_waiting.contains(&id) {
            self.cap_waiting.push(id);
        }
        Poll::Pending
    }

    /// Capacity available now (for a tunnel's write), without waiting.
    pub(crate) fn capacity(&self, id: u32) -> usize {
        let room = self.config.max_send_buffer_bytes.saturating_sub(self.out.len()) as i64;
        match self.streams.get(&id) {
            Some(s) if s.queued.is_empty() && s.reset.is_none() => {
                s.send_window.min(self.send_window).min(room).max(0) as usize
            }
            _ => 0,
        }
    }
}

/// The state machine driven with raw frames, as a client would send them;
/// its output parsed back frame by frame and its header blocks decoded.
#[cfg(test)]
mod tests {
    use super::*;

    const PING_PAYLOAD: [u8; 8] = *b"pingpong";

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        frame::put_head(&mut out, payload.len(), kind, flags, stream);
        out.extend_from_slice(payload);
        out
    }

    fn settings(params: &[(u16, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        frame::put_settings(&mut out, params);
        out
    }

    fn window_update(stream: u32, increment: u32) -> Vec<u8> {
        frame(frame::WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
    }

    fn rst(stream: u32, reason: Reason) -> Vec<u8> {
        frame(frame::RST_STREAM, 0, stream, &reason.0.to_be_bytes())
    }

    /// A frame the server wrote.
    #[derive(Debug)]
    struct Frame {
        head: Head,
        payload: Vec<u8>,
    }

    impl Frame {
        fn word(&self, at: usize) -> u32 {
            u32::from_be_bytes([
                self.payload[at],
                self.payload[at + 1],
                self.payload[at + 2],
                self.payload[at + 3],
            ])
        }

        /// `(last stream, code)` of a GOAWAY.
        fn goaway(&self) -> (u32, Reason) {
            assert_eq!(self.head.kind, frame::GOAWAY, "{self:?}");
            (self.word(0), Reason(self.word(4)))
        }

        /// `(stream, code)` of a RST_STREAM.
        fn rst(&self) -> (u32, Reason) {
            assert_eq!(self.head.kind, frame::RST_STREAM, "{self:?}");
            (self.head.stream, Reason(self.word(0)))
        }
    }

    /// One client connection to a [`Core`].
    struct Client {
        core: Core,
        encoder: Encoder,
        decoder: Decoder,
        input: BytesMut,
    }

    impl Client {
        /// A connection under `config`, its preface already read.
        fn new(config: &Http2Config) -> Client {
            let mut client = Client {
                core: Core::new(config),
                encoder: Encoder::new(),
                decoder: Decoder::new(4096),
                input: BytesMut::new(),
            };
            client.read();
            client
        }

        fn plain() -> Client {
            Client::new(&Http2Config::default())
        }

        fn send(&mut self, bytes: &[u8]) {
            self.input.extend_from_slice(bytes);
            self.core.receive(&mut self.input);
        }

        /// Every byte the server queued, as a socket would take it.
        fn drain(&mut self) -> Vec<u8> {
            let mut bytes = Vec::new();
            while !self.core.out.is_empty() {
                let mut slices = [IoSlice::new(&[]); 4];
                let n = self.core.out.slices(&mut slices);
                let before = bytes.len();
                for slice in &slices[..n] {
                    bytes.extend_from_slice(slice);
                }
                self.core.out.advance(bytes.len() - before);
            }
            bytes
        }

        /// The frames the server queued.
        fn read(&mut self) -> Vec<Frame> {
            let bytes = self.drain();
            let mut frames = Vec::new();
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let head = Head::parse(rest[..HEADER_LEN].try_into().unwrap());
                assert!(head.len <= rest.len() - HEADER_LEN, "truncated frame {head:?}");
                frames.push(Frame { head, payload: rest[HEADER_LEN..HEADER_LEN + head.len].to_vec() });
                rest = &rest[HEADER_LEN + head.len..];
            }
            frames
        }

        /// A HEADERS frame carrying `fields`.
        fn headers(&mut self, stream: u32, flags: u8, fields: &[(&str, &str)]) -> Vec<u8> {
            let mut block = Vec::new();
            self.encoder.begin_block(&mut block);
            for (name, value) in fields {
                self.encoder.field(name.as_bytes(), value.as_bytes(), &mut block);
            }
            frame(frame::HEADERS, flags, stream, &block)
        }

        fn get(&mut self, stream: u32) -> Vec<u8> {
            self.headers(stream, frame::END_HEADERS | frame::END_STREAM, &GET)
        }

        /// A POST head, its body to follow.
        fn post(&mut self, stream: u32, content_length: Option<&str>) -> Vec<u8> {
            let mut fields = POST.to_vec();
            if let Some(n) = content_length {
                fields.push(("content-length", n));
            }
            self.headers(stream, frame::END_HEADERS, &fields)
        }

        /// Sends a GET on `stream` and takes it as accepted.
        fn open_get(&mut self, stream: u32) -> Vec<Accepted> {
            let get = self.get(stream);
            self.send(&get);
            self.accepted()
        }

        fn accepted(&mut self) -> Vec<Accepted> {
            let mut batch = Vec::new();
            self.core.take_accepted(&mut batch);
            batch
        }

        fn decode(&mut self, block: &[u8]) -> Vec<(String, String)> {
            let mut fields = Vec::new();
            self.decoder
                .decode(block, &mut |n, v| {
                    fields.push((
                        String::from_utf8_lossy(n).into_owned(),
                        String::from_utf8_lossy(v).into_owned(),
                    ))
                })
                .unwrap();
            fields
        }

        fn respond(&mut self, stream: u32, end_stream: bool) {
            self.core.send_headers(stream, end_stream, |enc, dst| enc.status(200, dst)).unwrap();
        }
    }

    const GET: [(&str, &str); 4] =
        [(":method", "GET"), (":scheme", "https"), (":authority", "a.example"), (":path", "/")];
    const POST: [(&str, &str); 4] =
        [(":method", "POST"), (":scheme", "https"), (":authority", "a.example"), (":path", "/up")];

    fn kinds(frames: &[Frame]) -> Vec<(u8, u8, u32, usize)> {
        frames.iter().map(|f| (f.head.kind, f.head.flags, f.head.stream, f.head.len)).collect()
    }

    fn noop_cx() -> Context<'static> {
        Context::from_waker(futures_util::task::noop_waker_ref())
    }

    #[test]
    fn the_preface_is_settings_and_a_connection_window_update() {
        let mut client = Client {
            core: Core::new(&Http2Config::default()),
            encoder: Encoder::new(),
            decoder: Decoder::new(4096),
            input: BytesMut::new(),
        };
        let frames = client.read();
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_eq!(
            (frames[0].head.kind, frames[0].head.flags, frames[0].head.stream),
            (frame::SETTINGS, 0, 0)
        );
        let params: Vec<_> = match frame::settings(&frames[0].head, &frames[0].payload) {
            Ok(params) => params.collect(),
            Err(e) => panic!("invalid SETTINGS: {e:?}"),
        };
        assert!(params.contains(&(INITIAL_WINDOW_SIZE, 256 * 1024)), "{params:?}");
        assert!(params.contains(&(MAX_CONCURRENT_STREAMS, 128)), "{params:?}");
        assert!(params.contains(&(ENABLE_CONNECT_PROTOCOL, 1)), "{params:?}");
        assert_eq!((frames[1].head.kind, frames[1].head.stream), (frame::WINDOW_UPDATE, 0));
        assert_eq!(frames[1].word(0), 1024 * 1024 - 65_535);
    }

    #[test]
    fn settings_and_pings_are_acknowledged_acks_are_not() {
        let mut client = Client::plain();
        client.send(&settings(&[(INITIAL_WINDOW_SIZE, 1000)]));
        assert_eq!(kinds(&client.read()), vec![(frame::SETTINGS, frame::ACK, 0, 0)]);
        client.send(&frame(frame::PING, 0, 0, &PING_PAYLOAD));
        let frames = client.read();
        assert_eq!(kinds(&frames), vec![(frame::PING, frame::ACK, 0, 8)]);
        assert_eq!(frames[0].payload, PING_PAYLOAD);
        client.send(&frame(frame::PING, frame::ACK, 0, &PING_PAYLOAD));
        client.send(&frame(frame::SETTINGS, frame::ACK, 0, &[]));
        assert!(client.read().is_empty());
        assert_eq!(client.core.error(), None);
    }

    #[test]
    fn a_get_is_accepted_with_its_head() {
        let mut client = Client::plain();
        let fields = [
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "a.example"),
            (":path", "/p/q?x=1&y"),
            ("accept", "*/*"),
        ];
        let bytes = client.headers(1, frame::END_HEADERS | frame::END_STREAM, &fields);
        client.send(&bytes);
        let accepted = client.accepted();
        assert_eq!(accepted.len(), 1);
        let a = &accepted[0];
        assert_eq!((a.id, a.end_stream), (1, true));
        assert_eq!((a.head.method(), a.head.path(), a.head.query()), ("GET", "/p/q", Some("x=1&y")));
        let got: Vec<_> = a.head.fields().collect();
        assert_eq!(got, vec![("host", &b"a.example"[..]), ("accept", &b"*/*"[..])]);
        assert!(client.read().is_empty());
        assert!(client.core.is_end_stream(1));
    }

    #[test]
    fn a_response_is_split_at_the_peers_max_frame_size() {
        let mut client = Client::plain();
        client.open_get(1);
        client
            .core
            .send_headers(1, false, |enc, dst| {
                enc.status(200, dst);
                enc.field(b"content-type", b"text/plain", dst);
            })
            .unwrap();
        client.core.send_data(1, Bytes::from(vec![7u8; 40_000]), true).unwrap();
        let frames = client.read();
        assert_eq!(
            kinds(&frames)[1..],
            [
                (frame::DATA, 0, 1, 16_384),
                (frame::DATA, 0, 1, 16_384),
                (frame::DATA, frame::END_STREAM, 1, 7_232)
            ]
        );
        assert_eq!((frames[0].head.kind, frames[0].head.flags), (frame::HEADERS, frame::END_HEADERS));
        let fields = client.decode(&frames[0].payload.clone());
        assert_eq!(fields, [(":status".into(), "200".into()), ("content-type".into(), "text/plain".into())]);
        assert!(frames[1..].iter().all(|f| f.payload.iter().all(|&b| b == 7)));
        client.core.release(1);
        assert!(client.core.streams.is_empty());
        assert_eq!(client.core.active, 0);

        // A larger SETTINGS_MAX_FRAME_SIZE makes larger frames.
        client.send(&settings(&[(MAX_FRAME_SIZE, 20_000)]));
        let get = client.get(3);
        client.send(&get);
        client.read();
        client.respond(3, false);
        client.core.send_data(3, Bytes::from(vec![7u8; 20_001]), true).unwrap();
        let frames = client.read();
        assert_eq!(
            kinds(&frames)[1..],
            [(frame::DATA, 0, 3, 20_000), (frame::DATA, frame::END_STREAM, 3, 1)]
        );
    }

    #[test]
    fn data_waits_for_the_stream_window() {
        let mut client = Client::plain();
        client.send(&settings(&[(INITIAL_WINDOW_SIZE, 1)]));
        let get = client.get(1);
        client.send(&get);
        client.read();
        client.respond(1, false);
        let mut cx = noop_cx();
        assert_eq!(client.core.poll_capacity(1, 100, &mut cx), Poll::Ready(Ok(1)));
        client.core.send_data(1, Bytes::from_static(b"0123456789"), true).unwrap();
        let frames = client.read();
        assert_eq!(kinds(&frames)[1..], [(frame::DATA, 0, 1, 1)]);
        client.send(&window_update(1, 100));
        let frames = client.read();
        assert_eq!(kinds(&frames), [(frame::DATA, frame::END_STREAM, 1, 9)]);
        assert_eq!(frames[0].payload, b"123456789");
    }

    #[test]
    fn data_waits_for_the_connection_window() {
        let mut client = Client::plain();
        client.send(&settings(&[(INITIAL_WINDOW_SIZE, 1 << 20)]));
        let get = client.get(1);
        client.send(&get);
        client.read();
        client.respond(1, false);
        client.core.send_data(1, Bytes::from(vec![1u8; 70_000]), true).unwrap();
        let sent: usize =
            client.read().iter().filter(|f| f.head.kind == frame::DATA).map(|f| f.head.len).sum();
        assert_eq!(sent, 65_535);
        client.send(&window_update(0, 10_000));
        assert_eq!(kinds(&client.read()), [(frame::DATA, frame::END_STREAM, 1, 70_000 - 65_535)]);
    }

    #[test]
    fn a_settings_decrease_can_make_a_window_negative() {
        // RFC 9113 §6.9.2: the window goes below zero and the sender waits
        // until WINDOW_UPDATEs bring it above.
        let mut client = Client::plain();
        let get = client.get(1);
        client.send(&get);
        client.read();
        client.respond(1, false);
        client.core.send_data(1, Bytes::from(vec![1u8; 100]), false).unwrap();
        assert_eq!(kinds(&client.read())[1..], [(frame::DATA, 0, 1, 100)]);
        // 65,535 - 100 + (50 - 65,535) = -50.
        client.send(&settings(&[(INITIAL_WINDOW_SIZE, 50)]));
        assert_eq!(kinds(&client.read()), [(frame::SETTINGS, frame::ACK, 0, 0)]);
        client.core.send_data(1, Bytes::from(vec![2u8; 10]), true).unwrap();
        assert!(client.read().is_empty());
        assert_eq!(client.core.capacity(1), 0);
        client.send(&window_update(1, 50));
        assert!(client.read().is_empty(), "window 0 sends nothing");
        client.send(&window_update(1, 4));
        assert_eq!(kinds(&client.read()), [(frame::DATA, 0, 1, 4)]);
        client.send(&window_update(1, 100));
        assert_eq!(kinds(&client.read()), [(frame::DATA, frame::END_STREAM, 1, 6)]);
    }

    #[test]
    fn window_overflow_is_a_flow_control_error() {
        let mut client = Client::plain();
        let get = client.get(1);
        client.send(&get);
        client.read();
        client.send(&window_update(1, MAX_WINDOW as u32));
        let frames = client.read();
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(frames[0].rst(), (1, Reason::FLOW_CONTROL_ERROR));
        assert_eq!(client.core.error(), None);
        assert!(client.core.is_reset(1));

        client.send(&window_update(0, MAX_WINDOW as u32));
        let frames = client.read();
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(frames[0].goaway(), (1, Reason::FLOW_CONTROL_ERROR));
        assert_eq!(client.core.error(), Some(Reason::FLOW_CONTROL_ERROR));
        assert!(!client.core.wants_input());

        // Through SETTINGS: a stream window pushed past 2^31-1.
        let mut client = Client::plain();
        let get = client.get(1);
        client.send(&get);
        client.send(&window_update(1, MAX_WINDOW as u32 - 65_535));
        client.read();
        client.send(&settings(&[(INITIAL_WINDOW_SIZE, 65_536)]));
        assert_eq!(client.read()[0].goaway().1, Reason::FLOW_CONTROL_ERROR);
    }

    #[test]
    fn a_request_body_is_read_and_its_window_given_back() {
        let config = Http2Config {
            initial_stream_window: 16,
            initial_connection_window: 16,
            ..Http2Config::default()
        };
        let mut client = Client::new(&config);
        let post = client.post(1, None);
        client.send(&post);
        let accepted = client.accepted();
        assert!(!accepted[0].end_stream);
        let mut cx = noop_cx();
        assert!(client.core.poll_data(1, &mut cx).is_pending());
        client.send(&frame(frame::DATA, 0, 1, b"0123456789"));
        match client.core.poll_data(1, &mut cx) {
            Poll::Ready(Ok(Some(data))) => assert_eq!(&data[..], b"0123456789"),
            other => panic!("{:?}", other.map(|r| r.map(|d| d.map(|d| d.len())))),
        }
        assert!(client.core.poll_data(1, &mut cx).is_pending());
        assert!(client.read().is_empty(), "nothing given back before the reader took it");
        client.core.release_capacity(1, 10);
        let frames = client.read();
        assert_eq!(kinds(&frames), [(frame::WINDOW_UPDATE, 0, 1, 4), (frame::WINDOW_UPDATE, 0, 0, 4)]);
        assert_eq!((frames[0].word(0), frames[1].word(0)), (10, 10));
        // Beyond the (refilled) stream window: a stream error.
        client.send(&frame(frame::DATA, 0, 1, &[0; 17]));
        let frames = client.read();
        let reset = frames.iter().find(|f| f.head.kind == frame::RST_STREAM).unwrap();
        assert_eq!(reset.rst(), (1, Reason::FLOW_CONTROL_ERROR));
        assert_eq!(
            client.core.poll_data(1, &mut cx),
            Poll::Ready(Err(StreamGone::Reset(Reason::FLOW_CONTROL_ERROR)))
        );
    }

    #[test]
    fn a_body_ends_with_end_stream() {
        let mut client = Client::plain();
        let post = client.post(1, Some("5"));
        client.send(&post);
        client.accepted();
        client.send(&frame(frame::DATA, frame::END_STREAM, 1, b"hello"));
        let mut cx = noop_cx();
        assert!(matches!(client.core.poll_data(1, &mut cx), Poll::Ready(Ok(Some(d))) if &d[..] == b"hello"));
        assert_eq!(client.core.poll_data(1, &mut cx), Poll::Ready(Ok(None)));
        assert!(client.core.is_end_stream(1));
        assert!(client.read().is_empty());
    }

    #[test]
    fn a_content_length_mismatch_resets_the_stream() {
        for (body, end) in [(&b"hi"[..], true), (&b"toolong"[..], false)] {
            let mut client = Client::plain();
            let post = client.post(1, Some("5"));
            client.send(&post);
            client.accepted();
            client.send(&frame(frame::DATA, if end { frame::END_STREAM } else { 0 }, 1, body));
            let frames = client.read();
            assert_eq!(frames.len(), 1, "{frames:?}");
            assert_eq!(frames[0].rst(), (1, Reason::PROTOCOL_ERROR));
            assert_eq!(client.core.error(), None);
        }
        // END_STREAM on the head with a non-zero content-length.
        let mut client = Client::plain();
        let mut fields = POST.to_vec();
        fields.push(("content-length", "3"));
        let bytes = client.headers(1, frame::END_HEADERS | frame::END_STREAM, &fields);
        client.send(&bytes);
        assert!(client.accepted().is_empty());
        assert_eq!(client.read()[0].rst(), (1, Reason::PROTOCOL_ERROR));
    }

    #[test]
    fn data_on_an_idle_stream_is_a_connection_error() {
        let mut client = Client::plain();
        client.send(&frame(frame::DATA, 0, 3, b"x"));
        let frames = client.read();
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(frames[0].goaway(), (0, Reason::PROTOCOL_ERROR));
        let mut client = Client::plain();
        client.send(&frame(frame::DATA, 0, 0, b"x"));
        assert_eq!(client.read()[0].goaway(), (0, Reason::PROTOCOL_ERROR));
    }

    #[test]
    fn data_on_a_closed_stream_is_stream_closed() {
        let mut client = Client::plain();
        client.open_get(1);
        client.respond(1, true);
        client.core.release(1);
        client.read();
        assert!(client.core.streams.is_empty());
        client.send(&frame(frame::DATA, 0, 1, b"late"));
        let frames = client.read();
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(frames[0].rst(), (1, Reason::STREAM_CLOSED));
        // A half-closed (remote) stream: the request had ended.
        let get = client.get(3);
        client.send(&get);
        client.send(&frame(frame::DATA, 0, 3, b"late"));
        assert_eq!(client.read()[0].rst(), (3, Reason::STREAM_CLOSED));
        assert_eq!(client.core.error(), None);
    }

    #[test]
    fn late_frames_on_a_stream_the_server_reset_are_ignored() {
        let mut client = Client::plain();
        // A request with a body still coming; the server resets it.
        let mut block = Vec::new();
        let mut enc = Encoder::new();
        enc.field(b":method", b"POST", &mut block);
        enc.field(b":scheme", b"http", &mut block);
        enc.field(b":path", b"/upload", &mut block);
        client.send(&frame(frame::HEADERS, frame::END_HEADERS, 1, &block));
        client.accepted();
        client.core.send_reset(1, Reason::CANCEL);
        client.core.release(1);
        assert_eq!(client.read()[0].rst(), (1, Reason::CANCEL));
        // What the client had in flight: DATA, then trailers.
        client.send(&frame(frame::DATA, 0, 1, b"more body"));
        let mut trailers = Vec::new();
        enc.field(b"x-checksum", b"1", &mut trailers);
        client.send(&frame(frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, 1, &trailers));
        let frames = client.read();
        assert!(
            frames.iter().all(|f| f.head.kind != frame::RST_STREAM && f.head.kind != frame::GOAWAY),
            "{frames:?}"
        );
        assert_eq!(client.core.error(), None);
    }

    #[test]
    fn continuation_frames_must_follow_their_headers() {
        // A block split over HEADERS and two CONTINUATION frames.
        let mut client = Client::plain();
        let whole = client.get(1);
        let block = &whole[HEADER_LEN..];
        let (a, rest) = block.split_at(3);
        let (b, c) = rest.split_at(2);
        client.send(&frame(frame::HEADERS, frame::END_STREAM, 1, a));
        client.send(&frame(frame::CONTINUATION, 0, 1, b));
        assert!(client.accepted().is_empty());
        client.send(&frame(frame::CONTINUATION, frame::END_HEADERS, 1, c));
        let accepted = client.accepted();
        assert_eq!(accepted.len(), 1);
        assert_eq!((accepted[0].head.method(), accepted[0].end_stream), ("GET", true));

        let interruptions = [
            frame(frame::PING, 0, 0, &PING_PAYLOAD),
            frame(frame::DATA, 0, 1, b"x"),
            frame(frame::CONTINUATION, frame::END_HEADERS, 3, &[]),
        ];
        for interruption in interruptions {
            let mut client = Client::plain();
            let whole = client.get(1);
            client.send(&frame(frame::HEADERS, frame::END_STREAM, 1, &whole[HEADER_LEN..HEADER_LEN + 2]));
            client.send(&interruption);
            let frames = client.read();
            assert_eq!(frames.len(), 1, "{frames:?}");
            assert_eq!(frames[0].goaway().1, Reason::PROTOCOL_ERROR);
        }

        let mut client = Client::plain();
        client.send(&frame(frame::CONTINUATION, frame::END_HEADERS, 1, &[0x82]));
        assert_eq!(client.read()[0].goaway(), (0, Reason::PROTOCOL_ERROR));
    }

    #[test]
    fn a_malformed_priority_on_an_idle_stream_is_a_connection_error() {
        // On an open stream: a stream error.
        let mut client = Client::plain();
        let post = client.post(1, None);
        client.send(&post);
        client.send(&frame(frame::PRIORITY, 0, 1, &[0, 0, 0, 0]));
        assert_eq!(client.read()[0].rst(), (1, Reason::FRAME_SIZE_ERROR));
        // Stream 3 is idle, and a stream there cannot be reset: a
        // self-dependency fails the connection.
        client.send(&frame(frame::PRIORITY, 0, 3, &[0, 0, 0, 3, 0]));
        let frames = client.read();
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(frames[0].goaway(), (1, Reason::PROTOCOL_ERROR));
        let mut client = Client::plain();
        client.send(&frame(frame::PRIORITY, 0, 3, &[0, 0, 0, 0]));
        assert_eq!(client.read()[0].goaway(), (0, Reason::FRAME_SIZE_ERROR));
        // A well-formed PRIORITY on an idle stream is fine.
        let mut client = Client::plain();
        client.send(&frame(frame::PRIORITY, 0, 5, &[0, 0, 0, 1, 0]));
        assert!(client.read().is_empty());
        assert_eq!(client.core.error(), None);
    }

    #[test]
    fn streams_past_the_concurrency_limit_are_refused() {
        let config = Http2Config { max_concurrent_streams: 2, ..Http2Config::default() };
        let mut client = Client::new(&config);
        for id in [1, 3, 5] {
            let post = client.post(id, None);
            client.send(&post);
        }
        let accepted = client.accepted();
        assert_eq!(accepted.iter().map(|a| a.id).collect::<Vec<_>>(), [1, 3]);
        let frames = client.read();
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(frames[0].rst(), (5, Reason::REFUSED_STREAM));
        // A closed stream makes room.
        client.send(&rst(1, Reason::CANCEL));
        client.core.release(1);
        let post = client.post(7, None);
        client.send(&post);
        assert_eq!(client.accepted().len(), 1);
        assert!(client.read().is_empty());
    }

    #[test]
    fn rapid_reset_ends_the_connection() {
        let config = Http2Config::default();
        let mut client = Client::new(&config);
        let mut bytes = Vec::new();
        for i in 0..config.max_pending_accept_reset_streams as u32 {
            bytes.extend(client.get(2 * i + 1));
            bytes.extend(rst(2 * i + 1, Reason::CANCEL));
        }
        client.send(&bytes);
        assert_eq!(client.core.error(), None, "at the budget");
        // Taking the batch resets the count; the next read goes past it.
        client.accepted();
        let mut bytes = Vec::new();
        let base = 2 * config.max_pending_accept_reset_streams as u32 + 1;
        for i in 0..=config.max_pending_accept_reset_streams as u32 {
            bytes.extend(client.get(base + 2 * i));
            bytes.extend(rst(base + 2 * i, Reason::CANCEL));
        }
        client.send(&bytes);
        let frames = client.read();
        assert_eq!(frames.last().unwrap().goaway().1, Reason::ENHANCE_YOUR_CALM);
    }

    #[test]
    fn an_empty_data_flood_ends_the_connection() {
        let mut client = Client::plain();
        let post = client.post(1, None);
        client.send(&post);
        let empty = frame(frame::DATA, 0, 1, &[]);
        for _ in 0..EMPTY_DATA_BUDGET {
            client.send(&empty);
        }
        assert_eq!(client.core.error(), None);
        client.send(&empty);
        assert_eq!(client.read()[0].goaway(), (1, Reason::ENHANCE_YOUR_CALM));
    }

    #[test]
    fn releasing_an_unfinished_response_cancels_it() {
        let mut client = Client::plain();
        client.open_get(1);
        client.respond(1, false);
        client.core.release(1);
        let frames = client.read();
        assert_eq!(frames[0].head.kind, frame::HEADERS);
        assert_eq!(frames[1].rst(), (1, Reason::CANCEL));
        assert!(client.core.streams.is_empty());
        assert_eq!(client.core.active, 0);
    }

    #[test]
    fn releasing_an_answered_stream_with_an_open_body_refuses_the_rest() {
        let mut client = Client::plain();
        let post = client.post(1, None);
        client.send(&post);
        client.accepted();
        client.respond(1, false);
        client.core.send_data(1, Bytes::from_static(b"done"), true).unwrap();
        client.core.release(1);
        let frames = client.read();
        assert_eq!(kinds(&frames)[1..2], [(frame::DATA, frame::END_STREAM, 1, 4)]);
        assert_eq!(frames[2].rst(), (1, Reason::NO_ERROR));
        assert!(client.core.streams.is_empty());

        // The same with the response still waiting for window: the reset
        // follows the last DATA once it is out.
        let mut client = Client::plain();
        client.send(&settings(&[(INITIAL_WINDOW_SIZE, 2)]));
        let post = client.post(1, None);
        client.send(&post);
        client.accepted();
        client.respond(1, false);
        client.core.send_data(1, Bytes::from_static(b"done"), true).unwrap();
        client.core.release(1);
        let frames = client.read();
        assert_eq!(kinds(&frames)[2..], [(frame::DATA, 0, 1, 2)]);
        client.send(&window_update(1, 2));
        let frames = client.read();
        assert_eq!(kinds(&frames)[..1], [(frame::DATA, frame::END_STREAM, 1, 2)]);
        assert_eq!(frames[1].rst(), (1, Reason::NO_ERROR));
        assert!(client.core.streams.is_empty());
    }

    #[test]
    fn go_away_finishes_the_streams_in_flight() {
        let mut client = Client::plain();
        client.open_get(1);
        client.core.go_away();
        assert_eq!(client.read()[0].goaway(), (1, Reason::NO_ERROR));
        let get = client.get(3);
        client.send(&get);
        assert!(client.accepted().is_empty(), "a stream opened after GOAWAY is ignored");
        assert!(!client.core.finished());
        client.respond(1, true);
        assert!(!client.core.finished(), "the driver still holds stream 1");
        client.core.release(1);
        assert!(client.core.finished());
        let frames = client.read();
        assert_eq!(kinds(&frames), [(frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, 1, 1)]);
        client.core.go_away();
        assert!(client.read().is_empty(), "one GOAWAY");
    }

    #[test]
    fn frames_on_streams_ignored_after_go_away_are_no_connection_error() {
        // A client that opened stream 3 with a body before it saw the
        // GOAWAY: its frames on stream 3 must not fail stream 1 with the
        // connection (RFC 9113 §6.8).
        let mut client = Client::plain();
        let post = client.post(1, None);
        client.send(&post);
        client.accepted();
        client.core.go_away();
        client.read();
        let post = client.post(3, None);
        client.send(&post);
        client.send(&frame(frame::DATA, 0, 3, b"body"));
        client.send(&window_update(3, 10));
        client.send(&rst(3, Reason::CANCEL));
        assert_eq!(client.core.error(), None);
        assert!(client.read().iter().all(|f| f.head.kind != frame::GOAWAY));
        // A later connection error does not raise GOAWAY's last stream.
        client.send(&frame(frame::PING, 0, 1, &PING_PAYLOAD));
        assert_eq!(client.read().last().unwrap().goaway(), (1, Reason::PROTOCOL_ERROR));
    }

    #[test]
    fn a_ping_flood_stops_at_the_output_high_water_mark() {
        let mut client = Client::plain();
        let ping = frame(frame::PING, 0, 0, &PING_PAYLOAD);
        let count = OUT_HIGH / ping.len() + 100;
        let flood: Vec<u8> = ping.iter().copied().cycle().take(ping.len() * count).collect();
        client.send(&flood);
        assert!(client.core.out.len() >= OUT_HIGH);
        assert!(client.core.out.len() < OUT_HIGH + ping.len());
        assert!(!client.core.wants_input());
        assert!(!client.input.is_empty(), "the rest of the flood is left unread");
        let left = client.input.len();
        client.core.receive(&mut client.input);
        assert_eq!(client.input.len(), left, "nothing read while the output is high");
        let answered = client.read().len();
        client.core.receive(&mut client.input);
        assert!(client.input.is_empty());
        assert_eq!(answered + client.read().len(), count);
    }
}
