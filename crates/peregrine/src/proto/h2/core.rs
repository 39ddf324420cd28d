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
//! decoded into a reused buffer ([`RequestHead`]).
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
        let last = self.last_client_id;
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
        if counts_as_error {
            self.local_error_resets += 1;
            if self.local_error_resets > self.config.max_local_error_reset_streams {
                self.fail(Reason::ENHANCE_YOUR_CALM, "too many stream errors");
            }
        }
        if let Some(stream) = self.streams.get_mut(&id) {
            stream.reset = Some(reason);
            stream.recv_closed = true;
            stream.send_ended = true;
            stream.queued.clear();
            stream.queued_end = false;
            stream.queued_trailers = None;
            stream.wake_all();
            let released: usize = stream.recv_buf.drain(..).map(|b| b.len()).sum();
            self.release_connection(released as i64);
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
            if e.stream {
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
            if self.is_idle(id) {
                return self.fail(Reason::PROTOCOL_ERROR, "DATA on an idle stream");
            }
            return self.reset_stream(id, Reason::STREAM_CLOSED, false);
        };
        if stream.recv_closed {
            self.release_connection(flow);
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
        if !self.is_idle(id) {
            self.head_pool.push(head);
            return self.fail(Reason::STREAM_CLOSED, "HEADERS on a closed stream");
        }
        if self.goaway.is_some() {
            // Opened after GOAWAY: ignored (RFC 9113 §6.8).
            self.head_pool.push(head);
            return;
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
        stream.reset = Some(Reason(code));
        stream.recv_closed = true;
        stream.queued.clear();
        stream.queued_end = false;
        stream.queued_trailers = None;
        stream.wake_all();
        let released: usize = stream.recv_buf.drain(..).map(|b| b.len()).sum();
        let unanswered = !stream.send_ended;
        self.release_connection(released as i64);
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
                stream.reading = false;
                let released: usize = stream.recv_buf.drain(..).map(|b| b.len()).sum();
                self.release_connection(released as i64);
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
        let released: usize = stream.recv_buf.drain(..).map(|b| b.len()).sum();
        self.release_connection(released as i64);
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
