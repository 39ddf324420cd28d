//! The HTTP/1.1 connection driver: read, answer every complete request in
//! the buffer, write all answers at once, repeat.
//!
//! [`Conn::step`] handles one request in five small steps: parse the head,
//! settle the reply (keep-alive, `HEAD`), route, frame the body, dispatch
//! through the protocol-neutral [pipeline](crate::pipeline). It is a plain
//! function, so the header array and the borrowed request never live in the
//! connection's future (which stays small). Asynchronous handlers return a
//! `'static` future that the loop awaits; responses stay in request order
//! because a connection handles one request at a time, while the worker
//! serves other connections meanwhile. Streaming handlers get the
//! connection's input lent to them ([`Conn::lend_body`]).

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use super::body::{BodyDecoder, BodyError};
use super::encode::{ConnectionHeader, Encoder, PendingBody, PendingStream};
use super::lend::{BodyProgress, LentBody};
use super::parse::{header_slots, parse_head, Framing, Head, HeadLimits};
use crate::body::Body;
use crate::handler::{BodyConsumer, ResponseFuture};
use crate::http::date::DateBlock;
use crate::http::{Method, Version};
use crate::pipeline::{self, BodyUse, Dispatched};
use crate::proto::h2;
use crate::request::{Params, Request};
use crate::response::canned::{self, Canned};
use crate::response::{FileRange, IntoResponse, Response, ResponseWriter};
use crate::router::{Lookup, Router};
use crate::upgrade::{OnUpgrade, Upgraded, UpgradedIo};
use crate::worker::readbuf::ReadBuf;
use crate::worker::timer::{ConnTimer, Wait};
use crate::worker::transport::{DirectSocket, Io};
use crate::worker::{Registration, Worker};

/// The most of a file body sent by one `sendfile` call.
const FILE_PIECE: usize = 256 * 1024;
/// Where `sendfile(2)` cannot be used (TLS), a file is read into the
/// output buffer in pieces that fill it up to [`KEEP_OUT_CAPACITY`], and at
/// least this much.
const MIN_FILE_PIECE: usize = 16 * 1024;
/// Smallest read we ask the kernel for.
const MIN_READ: usize = 4096;
/// Pending output beyond which we write before parsing more requests, so a
/// client pipelining thousands of requests cannot grow it without bound.
const FLUSH_THRESHOLD: usize = 256 * 1024;
/// Output buffer capacity kept between batches; larger buffers (a big
/// response) are released.
const KEEP_OUT_CAPACITY: usize = 64 * 1024;
/// Raw bytes a chunked body may take beyond its decoded limit: tiny chunks
/// could otherwise make the encoded body far larger than the decoded one.
const CHUNKED_OVERHEAD: usize = 64 * 1024;
/// A response batch at least this large may outlast its `write` in the
/// kernel's send buffer (which grows to megabytes): the connection then
/// waits for its next request as [`Wait::Drain`], still held to the
/// minimum response rate, instead of [`Wait::Idle`]. Measured with
/// slowhttptest's slow-read mode: 300 KB responses to a 5-byte-a-second
/// reader were all accepted by `write`, and the readers held their
/// connections until the 60 s idle timeout; with this they are cut when
/// their rate falls short.
const DRAIN_WATCH: u64 = 16 * 1024;
/// How long a closing connection with unread input keeps discarding it.
const UNREAD_DRAIN: Duration = Duration::from_millis(500);
/// How long a refused connection keeps discarding its unread request.
const REFUSED_DRAIN: Duration = Duration::from_secs(1);

/// What the loop does after [`Conn::step`].
enum Step {
    /// A response was written; parse the next request.
    Continue,
    /// The buffer holds no complete request: read until it holds `need`
    /// bytes (0: any amount).
    Read { need: usize },
    /// Write what is queued, then close.
    Close,
    /// Await an async handler, then write its response.
    Await { fut: ResponseFuture, reply: Reply },
    /// Lend the connection's input to a streaming handler.
    Stream { consumer: BodyConsumer, decoder: BodyDecoder, expect_continue: bool, reply: Reply },
    /// The connection opened with the HTTP/2 preface: hand it over.
    Http2,
}

/// How the response to the current request is written.
#[derive(Clone, Copy, Debug)]
struct Reply {
    connection: ConnectionHeader,
    head_only: bool,
}

impl Reply {
    fn closes(self) -> bool {
        self.connection == ConnectionHeader::Close
    }

    fn closing(self) -> Reply {
        Reply { connection: ConnectionHeader::Close, ..self }
    }

    /// The reply for a request the server refuses before it is understood.
    const REFUSAL: Reply = Reply { connection: ConnectionHeader::Close, head_only: false };
}

/// A request body as the buffered path framed it.
enum Framed<'d> {
    /// The whole body, and the bytes the request took in the buffer.
    Body(&'d [u8], usize),
    /// Not all there yet: read until the buffer holds this many bytes.
    Need(usize),
    /// Refused while decoding.
    Refused(BodyError),
}

/// What a read brought.
enum Input {
    More,
    Closed,
    /// The worker's sweep found the request (head or body) late, or its
    /// body below the minimum rate, and ended our input.
    TimedOut,
}

struct Conn<S: 'static> {
    /// The client's address (`None` for the fuzzing harness's pipe).
    peer: Option<SocketAddr>,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
    timer: Rc<ConnTimer>,
    limits: HeadLimits,
    out: Vec<u8>,
    /// Decoded chunked bodies of buffered routes.
    body: Vec<u8>,
    /// Deadline for the current partial head, fixed when it started
    /// arriving so a client dribbling bytes cannot extend it.
    head_deadline: Option<u64>,
    /// `100 Continue` already sent for the current request.
    continue_sent: bool,
    /// The current request's body is being waited for, and counted against
    /// the minimum request body rate.
    body_transfer: bool,
    /// A streamed or file response body whose head is queued: sent before
    /// the next request is read.
    pending: Option<PendingBody>,
    /// Whether an HTTP/2 preface would still be taken (h2c on a shared
    /// port): only as the connection's first bytes.
    h2c: bool,
    /// A `101`'s continuation: the connection switches protocols once the
    /// head is sent.
    upgrade: Option<OnUpgrade>,
}

/// Serves one accepted connection until it closes.
pub(crate) async fn serve<S: 'static>(
    mut stream: Io,
    peer: Option<SocketAddr>,
    h2c: bool,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
    timer: Rc<ConnTimer>,
    registration: Registration,
) {
    let read_len = worker.config.read_buffer_bytes.max(MIN_READ);
    let mut conn = Conn {
        peer,
        limits: HeadLimits::from_config(&worker.config),
        worker,
        router,
        timer,
        out: Vec::with_capacity(read_len),
        body: Vec::new(),
        head_deadline: None,
        continue_sent: false,
        body_transfer: false,
        pending: None,
        h2c,
        upgrade: None,
    };
    // The read buffer lives beside the connection rather than in it, so
    // that requests can borrow it while `Conn::answer` takes the rest: in
    // the connection, it was moved out and back for every run of requests.
    let mut rbuf = ReadBuf::new(read_len);
    loop {
        // Tested before taken: `take` writes the slot back every request.
        if conn.upgrade.is_some() {
            if let Some(on_upgrade) = conn.upgrade.take() {
                return conn.switch_protocols(rbuf, stream, on_upgrade, registration).await;
            }
        }
        if conn.pending.is_some() && !conn.send_pending(&mut stream).await {
            return conn.close(&mut rbuf, stream).await;
        }
        match conn.step(&mut rbuf, &mut stream) {
            Step::Continue => {
                if conn.out.len() >= FLUSH_THRESHOLD && conn.flush(&mut stream).await.is_err() {
                    return;
                }
            }
            Step::Read { need } => {
                if conn.flush(&mut stream).await.is_err() {
                    return;
                }
                if conn.worker.shutting_down() && rbuf.is_empty() {
                    return;
                }
                match conn.read(&mut rbuf, &mut stream, need).await {
                    Input::More => {}
                    Input::Closed => return,
                    Input::TimedOut => {
                        conn.write_canned(canned::REQUEST_TIMEOUT);
                        return conn.close(&mut rbuf, stream).await;
                    }
                }
            }
            Step::Close => return conn.close(&mut rbuf, stream).await,
            Step::Await { fut, reply } => {
                conn.timer.arm(Wait::Busy, u64::MAX);
                let response = pipeline::run_handler(fut).await;
                if !conn.write_deferred(response, reply) {
                    let _ = conn.flush(&mut stream).await;
                    return;
                }
            }
            Step::Stream { consumer, decoder, expect_continue, reply } => {
                match conn.lend_body(&mut rbuf, stream, consumer, decoder, expect_continue, reply).await {
                    Some(returned) => stream = returned,
                    None => return,
                }
            }
            Step::Http2 => {
                // The HTTP/2 driver reads the preface again; boxed, so
                // this future stays as small as HTTP/1.1 needs.
                let io = h2::Rewind::new(Bytes::copy_from_slice(rbuf.data()), stream);
                let (peer, worker, router, timer) = (conn.peer, conn.worker, conn.router, conn.timer);
                return Box::pin(h2::serve(io, false, peer, worker, router, timer, registration)).await;
            }
        }
    }
}

/// Answers a connection over the worker's limit with `503` and closes it,
/// so the client gets a clear answer instead of a hang in the backlog.
pub(crate) async fn refuse(mut stream: Io, date: DateBlock) {
    let mut out = Vec::with_capacity(192);
    writer(&mut out, &date, Reply::REFUSAL).canned(canned::CONNECTION_LIMIT);
    if tokio::time::timeout(REFUSED_DRAIN, stream.write_all(&out)).await.is_ok() {
        // The client's request is still unread: linger so the 503 is not
        // lost to a reset. A small sink: a request head, read in pieces.
        linger_close(stream, REFUSED_DRAIN, &mut ReadBuf::new(REFUSED_SINK)).await;
    }
}

/// What a refused connection's drain reads at a time.
const REFUSED_SINK: usize = 512;

/// Half-closes `stream`, then discards what the client still sends for up
/// to `drain`, reading it into `sink`. Closing outright with input pending
/// makes the kernel send a reset, which can destroy the last response
/// before the client reads it (RFC 9112 §9.6).
///
/// The sink is the caller's: a connection lends its read buffer. An array
/// of its own here (4 KiB) made every HTTP/1.1 connection's future 4 KiB
/// larger, copied whole when the connection's task was spawned, and was
/// zeroed at every linger: on connections that each carried one garbage
/// request, 4,096 of the 12,336 bytes set and about 3,700 of the 3,735
/// copied per connection (callgrind).
pub(crate) async fn linger_close(mut stream: Io, drain: Duration, sink: &mut ReadBuf) {
    let _ = stream.shutdown().await;
    if drain.is_zero() {
        return;
    }
    let discard = async {
        while let Ok(n) = sink.drain_from(&mut stream).await {
            if n == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(drain, discard).await;
}

/// A writer for one response into `out`.
#[inline]
fn writer<'a>(out: &'a mut Vec<u8>, date: &'a DateBlock, reply: Reply) -> ResponseWriter<'a> {
    ResponseWriter::http1(Encoder::new(out, date, reply.connection, reply.head_only))
}

/// Keep-alive and `HEAD` handling for the response to `head`.
#[inline]
fn reply_settings(head: &Head<'_, '_>, shutting_down: bool) -> Reply {
    let keep_alive = head.keep_alive && !shutting_down;
    let connection = match (keep_alive, head.version) {
        (false, _) => ConnectionHeader::Close,
        (true, Version::Http10) => ConnectionHeader::KeepAlive,
        (true, Version::Http11 | Version::Http2 | Version::Http3) => ConnectionHeader::Omit,
    };
    Reply { connection, head_only: head.method == Method::Head }
}

/// The request handlers see, borrowing the head and the body.
#[inline]
fn request<'r>(
    head: &'r Head<'r, 'r>,
    peer: Option<SocketAddr>,
    params: Option<Params<'r>>,
    body: &'r [u8],
) -> Request<'r> {
    Request {
        peer,
        method: head.method,
        method_str: head.method_str,
        path: head.path,
        query: head.query,
        version: head.version,
        headers: head.headers,
        params,
        body,
        extensions: None,
    }
}

/// The route parameters a lookup found.
#[inline]
fn params<'a, S>(lookup: &Lookup<'a, S>) -> Option<Params<'a>> {
    match lookup {
        Lookup::Found { params, .. } => Some(*params),
        _ => None,
    }
}

/// `n` in lowercase hexadecimal, written into `buf`.
fn hex(mut n: usize, buf: &mut [u8; 16]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b"0123456789abcdef"[n & 0xf];
        n >>= 4;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// Frames the body of a buffered route: in place for a `Content-Length`
/// body (and a chunked one of a single chunk), copied into `decoded`
/// otherwise. The encoded size is bounded too, so tiny chunks cannot make
/// the raw bytes far larger than the decoded limit.
fn frame_buffered<'d>(
    framing: Framing,
    data: &'d [u8],
    head_len: usize,
    max_body: u64,
    max_head: usize,
    decoded: &'d mut Vec<u8>,
) -> Framed<'d> {
    // Most requests have no body: nothing to decode (the decoder's setup
    // and callback cost about 15 instructions a pipelined GET).
    if framing == Framing::None {
        return Framed::Body(&[], head_len);
    }
    let mut decoder = match BodyDecoder::new(framing, max_body) {
        Ok(decoder) => decoder,
        Err(e) => return Framed::Refused(e),
    };
    decoded.clear();
    let mut single: Option<&'d [u8]> = None;
    let mut copied = false;
    let result = decoder.decode(&data[head_len..], usize::MAX, |chunk| {
        if let Some(first) = single.take() {
            decoded.extend_from_slice(first);
            copied = true;
        }
        if copied {
            decoded.extend_from_slice(chunk);
        } else {
            single = Some(chunk);
        }
    });
    match result {
        Err(e) => Framed::Refused(e),
        Ok(d) if d.done => {
            let total = head_len + d.consumed;
            let decoded: &'d Vec<u8> = decoded;
            Framed::Body(if copied { decoded } else { single.unwrap_or(&[]) }, total)
        }
        Ok(_) => match decoder.remaining_length() {
            // The whole declared length, which the limit already bounds.
            Some(remaining) => {
                Framed::Need(data.len().saturating_add(usize::try_from(remaining).unwrap_or(usize::MAX)))
            }
            None => {
                let max_raw = usize::try_from(max_body.saturating_mul(2))
                    .unwrap_or(usize::MAX)
                    .saturating_add(max_head)
                    .saturating_add(CHUNKED_OVERHEAD);
                if data.len() > max_raw {
                    Framed::Refused(BodyError::TooLarge)
                } else {
                    Framed::Need(data.len() + 1)
                }
            }
        },
    }
}

/// The server's answer to a refused body.
fn refused_body(e: BodyError) -> Canned<'static> {
    match e {
        BodyError::TooLarge => canned::BODY_TOO_LARGE,
        BodyError::Invalid(why) => Canned::bad_request(why),
    }
}

impl<S: 'static> Conn<S> {
    /// Answers the requests waiting, as far as they can be answered
    /// synchronously: from the read buffer, or, when that is empty, from
    /// the input `stream` received in place (io_uring's receive buffers).
    ///
    /// Parsed in place, a request is never copied: copying each batch of
    /// 16 pipelined plaintext requests (about 2.5 KB) into the read buffer
    /// was 3.8% of the worker's time, and the copy's destination, a buffer
    /// per connection, took 61% of user space's last-level cache write
    /// misses at 256 connections (callgrind's cache simulation). Whatever
    /// a step leaves that is read from the read buffer afterwards (a
    /// partial request, a streamed body, a protocol switch, the input a
    /// closing connection discards) moves there first.
    ///
    /// Requests answered at once are answered in a run, and their input
    /// consumed once for the run: in place, taking the segment and
    /// consuming it again for each request of a pipelined batch cost
    /// plaintext about 120 instructions a request.
    fn step(&mut self, rbuf: &mut ReadBuf, stream: &mut Io) -> Step {
        let in_place = rbuf.is_empty();
        let input = if in_place { stream.received() } else { rbuf.data() };
        let mut consumed = 0;
        let step = loop {
            let data = &input[consumed..];
            if data.is_empty() {
                break Step::Read { need: 0 };
            }
            let (step, used) = self.answer(data);
            consumed += used;
            match step {
                Step::Continue
                    if self.out.len() < FLUSH_THRESHOLD
                        && self.pending.is_none()
                        && self.upgrade.is_none() => {}
                step => break step,
            }
        };
        if !in_place {
            rbuf.consume(consumed);
            return step;
        }
        let seen = input.len() - consumed;
        stream.consume_received(consumed);
        // Only the next request is parsed in place, after this one's answer
        // (or its handler's). Everything else reads the read buffer.
        if !matches!(step, Step::Continue | Step::Await { .. }) || self.upgrade.is_some() {
            loop {
                let rest = stream.received();
                if rest.is_empty() {
                    break;
                }
                let n = rest.len();
                rbuf.append(rest);
                stream.consume_received(n);
            }
        }
        // A request cut where one receive ended may be whole with the
        // next: parse it again, from the read buffer.
        if matches!(step, Step::Read { .. }) && rbuf.len() > seen {
            Step::Continue
        } else {
            step
        }
    }

    /// Parses the request at the start of `data` and answers it if it can
    /// be answered synchronously. Returns what the loop does next and how
    /// many bytes of `data` the request took (0 if it is not complete).
    fn answer(&mut self, data: &[u8]) -> (Step, usize) {
        let Conn {
            worker,
            router,
            timer,
            out,
            body,
            head_deadline,
            continue_sent,
            body_transfer,
            limits,
            peer,
            pending,
            h2c,
            upgrade,
        } = self;
        let date = worker.date();

        // 1. Parse the head.
        let mut slots = header_slots();
        // Borrowed where `parse_head` left it: moving the head out of the
        // result copied it, about 26 instructions a request.
        let parsed = parse_head(data, &mut slots, limits);
        let head = match &parsed {
            Ok(Some(head)) => head,
            Ok(None) => {
                head_deadline.get_or_insert_with(|| worker.deadline_after(worker.config.header_timeout));
                return (Step::Read { need: 0 }, 0);
            }
            Err(_) if *h2c && data.starts_with(h2::PREFACE_START) => return (Step::Http2, 0),
            Err(e) => {
                writer(out, &date, Reply::REFUSAL).canned(Canned::status(e.status(), e.reason()));
                return (Step::Close, 0);
            }
        };

        // 2. Settle how the reply is written.
        let mut reply = reply_settings(head, worker.shutting_down());

        // 3. Route.
        let (lookup, body_use) = pipeline::route(router, head.method, head.path);

        // 4. Frame the body.
        let (req_body, total) = match body_use {
            BodyUse::Streamed => {
                let decoder = match BodyDecoder::new(head.framing, worker.config.max_stream_body_bytes) {
                    Ok(decoder) => decoder,
                    Err(e) => {
                        writer(out, &date, Reply::REFUSAL).canned(refused_body(e));
                        return (Step::Close, 0);
                    }
                };
                let req = request(head, *peer, params(&lookup), &[]);
                let prepared = pipeline::prepare_stream(&lookup, &req, router.state());
                let (expect_continue, has_body) = (head.expect_continue, head.framing != Framing::None);
                *head_deadline = None;
                let step = match prepared {
                    Ok(consumer) => Step::Stream { consumer, decoder, expect_continue, reply },
                    Err(response) => {
                        // The body is never read, so what follows it is
                        // unknown: this answer is the last.
                        let reply = if has_body { reply.closing() } else { reply };
                        response.write_to(&mut writer(out, &date, reply));
                        if reply.closes() {
                            Step::Close
                        } else {
                            Step::Continue
                        }
                    }
                };
                return (step, head.len);
            }
            // A client waiting for `100 Continue` before sending a body
            // nobody will read gets its answer at once; the body may still
            // follow, so the connection closes after it.
            BodyUse::Unrouted if head.expect_continue && head.framing != Framing::None => {
                reply = reply.closing();
                (&[][..], head.len)
            }
            BodyUse::Buffered | BodyUse::Unrouted => {
                let max_body = worker.config.max_body_bytes;
                match frame_buffered(head.framing, data, head.len, max_body, limits.max_head_bytes, body) {
                    Framed::Body(req_body, total) => (req_body, total),
                    Framed::Need(need) => {
                        // The head is complete: from here on the body's own
                        // limits apply (the I/O timeout, the minimum rate),
                        // not the head's deadline.
                        *head_deadline = None;
                        if !*body_transfer {
                            *body_transfer = true;
                            timer.begin_transfer();
                        }
                        if head.expect_continue && body_use == BodyUse::Buffered && !*continue_sent {
                            out.extend_from_slice(canned::HTTP1_CONTINUE);
                            *continue_sent = true;
                        }
                        return (Step::Read { need }, 0);
                    }
                    Framed::Refused(e) => {
                        writer(out, &date, Reply::REFUSAL).canned(refused_body(e));
                        return (Step::Close, 0);
                    }
                }
            }
        };

        // 5. Dispatch.
        let req = request(head, *peer, params(&lookup), req_body);
        let mut w = ResponseWriter::http1(
            Encoder::new(out, &date, reply.connection, reply.head_only)
                .streaming_into(pending)
                .upgrading_into(upgrade),
        );
        let dispatched = pipeline::dispatch(&lookup, &req, router, &mut w);
        let closes = w.closes_connection();
        let step = match dispatched {
            // A streamed body is sent before anything else: the loop does
            // that first, then closes if this answer is the last.
            Dispatched::Written if closes && pending.is_none() => Step::Close,
            Dispatched::Written => Step::Continue,
            Dispatched::Panicked => Step::Close,
            Dispatched::Pending(fut) => Step::Await { fut, reply },
        };
        *head_deadline = None;
        *continue_sent = false;
        *h2c = false;
        *body_transfer = false;
        if body.capacity() > KEEP_OUT_CAPACITY {
            *body = Vec::new();
        }
        (step, total)
    }

    /// Lends the connection's input to a streaming handler, runs it, takes
    /// the input back and answers. Returns the stream if the connection
    /// goes on.
    async fn lend_body(
        &mut self,
        rbuf: &mut ReadBuf,
        mut stream: Io,
        consumer: BodyConsumer,
        decoder: BodyDecoder,
        expect_continue: bool,
        reply: Reply,
    ) -> Option<Io> {
        if expect_continue && !decoder.is_done() {
            self.out.extend_from_slice(canned::HTTP1_CONTINUE);
        }
        if self.flush(&mut stream).await.is_err() {
            return None;
        }
        let lent = Rc::new(LentBody::new(
            stream,
            std::mem::replace(rbuf, ReadBuf::empty()),
            decoder,
            Rc::clone(&self.worker),
            Rc::clone(&self.timer),
        ));
        self.timer.arm(Wait::Busy, u64::MAX);
        let response = pipeline::run_handler(consumer(Body::new(Rc::clone(&lent) as _))).await;
        // A handler that kept its `Body` alive past its own future leaves
        // us nothing to continue on.
        let (mut stream, returned, progress) = Rc::try_unwrap(lent).ok()?.give_back()?;
        *rbuf = returned;
        let goes_on = match progress {
            BodyProgress::Complete => self.write_deferred(response, reply),
            // One failure, one answer: the server's, as on a buffered route.
            BodyProgress::Refused(e) => {
                self.write_canned(refused_body(e));
                false
            }
            // Unread or lost body bytes: the next request's start is
            // unknown, so this response is the last.
            BodyProgress::Unfinished | BodyProgress::Lost => {
                self.write_deferred(response, reply.closing());
                false
            }
        };
        if goes_on {
            return Some(stream);
        }
        let _ = self.flush(&mut stream).await;
        linger_close(stream, UNREAD_DRAIN, rbuf).await;
        None
    }

    /// Writes the response of an async or streaming handler. Returns whether
    /// the connection stays open.
    fn write_deferred(&mut self, response: Response, mut reply: Reply) -> bool {
        // The server may have begun shutting down while the handler ran.
        if self.worker.shutting_down() {
            reply = reply.closing();
        }
        let date = self.worker.date();
        let encoder = Encoder::new(&mut self.out, &date, reply.connection, reply.head_only);
        let mut w = ResponseWriter::http1(
            encoder.streaming_into(&mut self.pending).upgrading_into(&mut self.upgrade),
        );
        pipeline::write_response(response, &mut w);
        let closes = w.closes_connection();
        // With a streamed body pending, the loop decides after sending it.
        self.pending.is_some() || !closes
    }

    /// Sends the pending body, whose head is queued already. Returns
    /// whether the connection goes on.
    async fn send_pending(&mut self, stream: &mut Io) -> bool {
        match self.pending.take() {
            None => true,
            Some(PendingBody::Stream(body)) => self.send_stream(stream, body).await,
            Some(PendingBody::File(file)) => {
                self.send_file(stream, file).await && !self.worker.shutting_down()
            }
        }
    }

    /// Sends a file range after its queued head: with `sendfile(2)` over
    /// TCP (the head held back with `MSG_MORE`, so it leaves in the same
    /// segment as the file's first bytes), else read into the output
    /// buffer in pieces. If the file turns out shorter than its head said,
    /// the connection closes: the client sees a cut body, not a desync.
    async fn send_file(&mut self, stream: &mut Io, range: FileRange) -> bool {
        let io_timeout = self.worker.config.io_timeout;
        if let Some(socket) = stream.direct() {
            // A transfer held to the minimum response rate, as `flush`'s;
            // afterwards `read` sees `Write` with the bytes moved and waits
            // as `Drain` while the kernel still holds a large file's tail.
            let timer = &self.timer;
            timer.arm(Wait::Write, self.worker.deadline_after(io_timeout));
            timer.begin_transfer();
            let sent = send_file_direct(socket, &self.out, &range, |n| {
                timer.moved(n);
                timer.deadline.set(self.worker.deadline_after(io_timeout));
            })
            .await;
            self.out.clear();
            return sent;
        }
        let mut offset = range.offset;
        let end = range.offset + range.len;
        while offset < end {
            // Pieces that keep `out` within the capacity `flush` keeps, so
            // one buffer serves the whole file (a larger piece made `flush`
            // free and the next piece allocate it again).
            let room = KEEP_OUT_CAPACITY.saturating_sub(self.out.len()).max(MIN_FILE_PIECE);
            let piece = (end - offset).min(room as u64) as usize;
            let at = self.out.len();
            match crate::sys::pread_append(&range.file, &mut self.out, piece, offset) {
                Ok(read) if read == piece => offset += piece as u64,
                read => {
                    match read {
                        Ok(_) => tracing::warn!("a file shrank while being sent; closing the connection"),
                        Err(e) => tracing::warn!(error = %e, "reading a file response body failed"),
                    }
                    self.out.truncate(at);
                    let _ = self.flush(stream).await;
                    return false;
                }
            }
            if self.flush(stream).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Sends a streamed body: each chunk is written as the stream yields
    /// it, after the client took the one before. Returns whether the
    /// connection goes on.
    async fn send_stream(&mut self, stream: &mut Io, body: PendingStream) -> bool {
        use futures_util::StreamExt;
        let PendingStream { body, chunked } = body;
        let mut chunks = body.0;
        if self.flush(stream).await.is_err() {
            return false;
        }
        loop {
            // No deadline while the application produces the next chunk;
            // writing it has the I/O timeout (in `flush`).
            self.timer.arm(Wait::Busy, u64::MAX);
            match chunks.next().await {
                Some(Ok(chunk)) if chunk.is_empty() => {}
                Some(Ok(chunk)) => {
                    if chunked {
                        let mut size = [0u8; 16];
                        self.out.extend_from_slice(hex(chunk.len(), &mut size));
                        self.out.extend_from_slice(b"\r\n");
                    }
                    self.out.extend_from_slice(&chunk);
                    if chunked {
                        self.out.extend_from_slice(b"\r\n");
                    }
                    if self.flush(stream).await.is_err() {
                        return false;
                    }
                }
                Some(Err(e)) => {
                    // The status is sent: ending without the last chunk (or
                    // closing) is how the client learns the body is cut.
                    tracing::warn!(error = %e, "streamed response body failed");
                    return false;
                }
                None => break,
            }
        }
        if !chunked {
            return false;
        }
        self.out.extend_from_slice(b"0\r\n\r\n");
        self.flush(stream).await.is_ok() && !self.worker.shutting_down()
    }

    /// Sends the `101` and hands the transport, with whatever the client
    /// sent after the request, to the new protocol's continuation. This
    /// connection's buffers are released first: an idle upgraded
    /// connection keeps only its own.
    ///
    /// The continuation runs as a task of its own, which holds the
    /// connection's registration (through `OnUpgrade::run`), and this one
    /// ends: awaited here, every poll of a WebSocket went through this
    /// driver's state machine too (an echo: 2,120 -> 2,069 instructions,
    /// callgrind), and the finished driver's future stayed allocated for
    /// the socket's lifetime.
    async fn switch_protocols(
        mut self,
        rbuf: ReadBuf,
        mut stream: Io,
        on_upgrade: OnUpgrade,
        registration: Registration,
    ) {
        if self.flush(&mut stream).await.is_err() {
            return;
        }
        let read_ahead = rbuf.data().to_vec();
        let Conn { peer, worker, timer, out, body, .. } = self;
        // Freed now: fields left in a partly moved `self` would only be
        // dropped when this function returns, after the new protocol ends,
        // and an idle WebSocket kept HTTP/1.1's read and output buffers
        // besides its own (`peregrine-lab ws-load --memory`, 1,024 idle
        // connections: 22,068 to 23,324 bytes each before, 12,344 to
        // 13,020 after).
        drop((rbuf, out, body));
        // The new protocol keeps its own deadlines.
        timer.arm(Wait::Busy, u64::MAX);
        let upgraded = Upgraded { io: UpgradedIo::Conn(stream), read_ahead, peer, worker, timer };
        tokio::task::spawn_local(on_upgrade.run(upgraded, registration));
    }

    /// Queues a server-generated answer after which the connection closes.
    fn write_canned(&mut self, canned: Canned<'_>) {
        let date = self.worker.date();
        writer(&mut self.out, &date, Reply::REFUSAL).canned(canned);
    }

    /// Writes what is queued, then closes. Closing with unread input makes
    /// the kernel send a reset, which can destroy the response before the
    /// client reads it: half-close and drain briefly first.
    async fn close(&mut self, rbuf: &mut ReadBuf, mut stream: Io) {
        let _ = self.flush_output(&mut stream, true).await;
        let drain = if rbuf.is_empty() { Duration::ZERO } else { UNREAD_DRAIN };
        linger_close(stream, drain, rbuf).await;
    }

    /// Writes all queued output. Each write that makes progress pushes the
    /// I/O deadline back, and counts towards the minimum response rate the
    /// worker's sweep enforces.
    async fn flush(&mut self, stream: &mut Io) -> std::io::Result<()> {
        self.flush_output(stream, false).await
    }

    /// [`Conn::flush`]; `last`: the connection is shut down right after.
    async fn flush_output(&mut self, stream: &mut Io, last: bool) -> std::io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let (timer, worker) = (&self.timer, &self.worker);
        timer.arm(Wait::Write, worker.deadline_after(worker.config.io_timeout));
        timer.begin_transfer();
        let result = if let Io::Uring(ring) = stream {
            // On io_uring the buffer itself is handed to the ring.
            let len = self.out.len();
            let result =
                if last { ring.send_last(&mut self.out).await } else { ring.send_all(&mut self.out).await };
            if result.is_ok() {
                timer.moved(len);
            }
            result
        } else {
            // Most responses fit the socket at once: try that first.
            let first = if last { stream.try_write_last(&self.out) } else { stream.try_write_now(&self.out) };
            let result = match first {
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => Err(e),
                first => {
                    // What the try sent (nothing on `WouldBlock`).
                    let mut written = first.unwrap_or(0);
                    timer.moved(written);
                    loop {
                        if written == self.out.len() {
                            break Ok(());
                        }
                        match stream.write(&self.out[written..]).await {
                            Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
                            Ok(n) => {
                                written += n;
                                timer.moved(n);
                                timer.deadline.set(worker.deadline_after(worker.config.io_timeout));
                            }
                            Err(e) => break Err(e),
                        }
                    }
                }
            };
            // `flush` pushes out what a TLS session still holds after taking
            // all of `out` (a socket that filled up mid-record); on TCP it
            // does nothing.
            match result {
                Ok(()) => stream.flush().await,
                Err(e) => Err(e),
            }
        };
        self.out.clear();
        if self.out.capacity() > KEEP_OUT_CAPACITY {
            self.out = Vec::with_capacity(self.worker.config.read_buffer_bytes);
        }
        result
    }

    /// Reads more input.
    async fn read(&mut self, rbuf: &mut ReadBuf, stream: &mut Io, need: usize) -> Input {
        let worker = &self.worker;
        let (wait, deadline) = if rbuf.is_empty() {
            rbuf.shrink();
            // Right after a flush the timer still says `Write`, with the
            // size of what was written.
            let timer = &self.timer;
            let wait = if timer.wait.get() == Wait::Write && timer.transferred.get() >= DRAIN_WATCH {
                Wait::Drain
            } else {
                Wait::Idle
            };
            (wait, worker.deadline_after(worker.config.idle_timeout))
        } else if let Some(deadline) = self.head_deadline {
            (Wait::Head, deadline)
        } else {
            (Wait::Body, worker.deadline_after(worker.config.io_timeout))
        };
        self.timer.arm(wait, deadline);
        let read = match stream {
            // Nothing buffered: the next request is parsed where the ring
            // received it (see `step`).
            Io::Uring(ring) if rbuf.is_empty() && ring.waits_in_place() => {
                std::future::poll_fn(|cx| ring.poll_received(cx)).await
            }
            _ => rbuf.read_from(stream, MIN_READ, need).await,
        };
        match read {
            Ok(0) | Err(_) if self.timer.read_timed_out() => Input::TimedOut,
            Ok(0) | Err(_) => Input::Closed,
            Ok(n) => {
                self.timer.moved(n);
                Input::More
            }
        }
    }
}

/// Writes `head` and then the file range to `socket`; `progress` runs
/// with the count after every write that moved bytes (to push the
/// connection's I/O deadline forward and count towards its minimum rate).
/// Returns whether everything was sent.
async fn send_file_direct(
    socket: DirectSocket<'_>,
    head: &[u8],
    range: &FileRange,
    progress: impl Fn(usize),
) -> bool {
    use std::os::fd::AsRawFd;
    let mut head = head;
    while !head.is_empty() {
        match socket.try_write(|fd| crate::sys::send_more(fd, head)) {
            Ok(n) => {
                head = &head[n..];
                progress(n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if socket.writable().await.is_err() {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    let file = range.file.as_raw_fd();
    let mut offset = range.offset;
    let end = range.offset + range.len;
    while offset < end {
        let count = (end - offset).min(FILE_PIECE as u64) as usize;
        match socket.try_write(|fd| crate::sys::sendfile(fd, file, &mut offset, count)) {
            // The file shrank under us: the head promised more.
            Ok(0) => return false,
            Ok(n) => progress(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if socket.writable().await.is_err() {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    true
}
