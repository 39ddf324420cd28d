//! The connection state machine: read, answer every complete request in the
//! buffer, write all answers at once, repeat.
//!
//! Parsing and synchronous handlers run in [`Conn::step`], a plain function,
//! so the header array and borrowed request never live in the connection's
//! future (which stays small). Asynchronous handlers return a `'static`
//! future that the loop awaits; responses stay in request order because a
//! connection handles one request at a time, while the worker serves other
//! connections meanwhile.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::body::{Body, BodyInner, BodyProgress};
use crate::handler::{BodyConsumer, ResponseFuture};
use crate::http::chunked::{ChunkedDecoder, ChunkedError};
use crate::http::parse::{header_slots, parse_head, Framing, ParseError};
use crate::http::writer::{ConnectionHeader, ResponseWriter};
use crate::http::{Method, StatusCode, Version};
use crate::request::{Params, Request};
use crate::response::{IntoResponse, Response, TEXT_UTF8};
use crate::router::{Endpoint, Lookup, Router};
use crate::server::readbuf::ReadBuf;
use crate::server::transport::Io;
use crate::server::worker::{ConnTimer, Registration, Wait, Worker};

/// Smallest read we ask the kernel for.
const MIN_READ: usize = 4096;
/// Pending output beyond which we write before parsing more requests, so a
/// client pipelining thousands of requests cannot grow it without bound.
const FLUSH_THRESHOLD: usize = 256 * 1024;
/// Output buffer capacity kept between batches; larger buffers (a big
/// response) are released.
const KEEP_OUT_CAPACITY: usize = 64 * 1024;

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
    Await { fut: ResponseFuture, reply: ReplyMeta },
    /// Hand the connection's input to a streaming handler.
    Stream { consumer: BodyConsumer, framing: Framing, expect_continue: bool, reply: ReplyMeta },
}

/// How a deferred response must be written.
#[derive(Clone, Copy)]
struct ReplyMeta {
    connection: ConnectionHeader,
    head_only: bool,
}

struct Conn<S: 'static> {
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
    timer: Rc<ConnTimer>,
    rbuf: ReadBuf,
    out: Vec<u8>,
    /// Decoded chunked bodies of buffered routes.
    body: Vec<u8>,
    /// Deadline for the current partial head, fixed when it started
    /// arriving so a client dribbling bytes cannot extend it.
    head_deadline: Option<u64>,
    /// `100 Continue` already sent for the current request.
    continue_sent: bool,
}

/// Serves one accepted connection until it closes.
pub(crate) async fn serve<S: 'static>(
    mut stream: Io,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
    timer: Rc<ConnTimer>,
    _registration: Registration,
) {
    let read_len = worker.config.read_buffer_bytes.max(MIN_READ);
    let mut conn = Conn {
        worker,
        router,
        timer,
        rbuf: ReadBuf::new(read_len),
        out: Vec::with_capacity(read_len),
        body: Vec::new(),
        head_deadline: None,
        continue_sent: false,
    };
    loop {
        match conn.step() {
            Step::Continue => {
                if conn.out.len() >= FLUSH_THRESHOLD && conn.flush(&mut stream).await.is_err() {
                    return;
                }
            }
            Step::Read { need } => {
                if conn.flush(&mut stream).await.is_err() {
                    return;
                }
                if conn.worker.shutting_down() && conn.rbuf.is_empty() {
                    return;
                }
                if !conn.read(&mut stream, need).await {
                    return;
                }
            }
            Step::Close => {
                let _ = conn.flush(&mut stream).await;
                // Closing with unread input makes the kernel send a reset,
                // which can destroy the response before the client reads it
                // (RFC 9112 §9.6): half-close and drain briefly first.
                let drain = if conn.rbuf.is_empty() { Duration::ZERO } else { UNREAD_DRAIN };
                linger_close(stream, drain).await;
                return;
            }
            Step::Await { fut, reply } => {
                conn.timer.arm(Wait::Busy, u64::MAX);
                let response = run_handler(fut).await;
                if !conn.write_deferred(response, reply) {
                    let _ = conn.flush(&mut stream).await;
                    return;
                }
            }
            Step::Stream { consumer, framing, expect_continue, reply } => {
                if expect_continue {
                    conn.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
                if conn.flush(&mut stream).await.is_err() {
                    return;
                }
                let inner = Rc::new(RefCell::new(Some(BodyInner::new(
                    stream,
                    std::mem::replace(&mut conn.rbuf, ReadBuf::empty()),
                    framing,
                    conn.worker.config.max_stream_body_bytes,
                    Rc::clone(&conn.worker),
                    Rc::clone(&conn.timer),
                ))));
                conn.timer.arm(Wait::Busy, u64::MAX);
                let response = run_handler(consumer(Body::new(Rc::clone(&inner)))).await;
                // Take the socket back. A handler that kept its `Body`
                // alive past its own future leaves us nothing to continue on.
                let Some(body) = Rc::try_unwrap(inner).ok().and_then(RefCell::into_inner) else { return };
                let (returned_stream, rbuf, progress) = body.into_parts();
                stream = returned_stream;
                conn.rbuf = rbuf;
                let mut reply = reply;
                if progress != BodyProgress::Complete {
                    // Unread or invalid body bytes: the next request's start
                    // is unknown, so this response is the last.
                    reply.connection = ConnectionHeader::Close;
                }
                if !conn.write_deferred(response, reply) {
                    let _ = conn.flush(&mut stream).await;
                    linger_close(stream, UNREAD_DRAIN).await;
                    return;
                }
            }
        }
    }
}

/// Awaits a handler, turning a panic into a `500` for this request only.
async fn run_handler(fut: ResponseFuture) -> Response {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!("handler panicked");
            crate::Error::internal("internal error").into_response()
        }
    }
}

/// How long a closing connection with unread input keeps discarding it.
const UNREAD_DRAIN: Duration = Duration::from_millis(500);

/// Half-closes `stream`, then discards what the client still sends for up
/// to `drain`. Closing outright with input pending makes the kernel send a
/// reset, which can destroy the last response before the client reads it.
pub(crate) async fn linger_close(mut stream: Io, drain: Duration) {
    let _ = stream.shutdown().await;
    if drain.is_zero() {
        return;
    }
    let mut sink = [0u8; 4096];
    let discard = async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(drain, discard).await;
}

impl<S: 'static> Conn<S> {
    /// Parses the next request in the buffer and answers it if it can be
    /// answered synchronously.
    fn step(&mut self) -> Step {
        let Conn { worker, router, rbuf, out, body, head_deadline, continue_sent, .. } = self;
        let data = rbuf.data();
        if data.is_empty() {
            return Step::Read { need: 0 };
        }
        let date = worker.date();
        let mut slots = header_slots();
        let head = match parse_head(data, &mut slots, &worker.limits) {
            Ok(Some(head)) => head,
            Ok(None) => {
                head_deadline.get_or_insert_with(|| worker.deadline_after(worker.config.header_timeout));
                return Step::Read { need: 0 };
            }
            Err(e) => {
                write_parse_error(out, &date, e);
                return Step::Close;
            }
        };
        let keep_alive = head.keep_alive && !worker.shutting_down();
        let connection = match (keep_alive, head.version) {
            (false, _) => ConnectionHeader::Close,
            (true, Version::Http10) => ConnectionHeader::KeepAlive,
            (true, Version::Http11) => ConnectionHeader::Omit,
        };
        let head_only = head.method == Method::Head;
        let reply = ReplyMeta { connection, head_only };
        let lookup = router.lookup(head.method, head.path);

        // Streaming routes take the body as it arrives; nothing to buffer.
        if let Lookup::Found { endpoint: Endpoint::Stream(prepare), params, .. } = &lookup {
            if let Framing::Length(n) = head.framing {
                if n > worker.config.max_stream_body_bytes {
                    write_parse_error(out, &date, ParseError::BodyTooLarge);
                    return Step::Close;
                }
            }
            let req = request(&head, *params, &[]);
            let prepared = prepare(&req, router.state());
            let (framing, expect_continue, head_len) = (head.framing, head.expect_continue, head.len);
            rbuf.consume(head_len);
            *head_deadline = None;
            return match prepared {
                Ok(consumer) => Step::Stream { consumer, framing, expect_continue, reply },
                Err(response) => {
                    let reply = if framing == Framing::None {
                        reply
                    } else {
                        ReplyMeta { connection: ConnectionHeader::Close, ..reply }
                    };
                    response.write_to(&mut ResponseWriter::new(out, &date, reply.connection, head_only));
                    if reply.connection == ConnectionHeader::Close {
                        Step::Close
                    } else {
                        Step::Continue
                    }
                }
            };
        }

        // Everything else gets its whole body before the handler runs.
        let max_body = worker.config.max_body_bytes;
        let (req_body, total): (&[u8], usize) = match head.framing {
            Framing::None => (&[], head.len),
            Framing::Length(n) => {
                if n > max_body {
                    write_parse_error(out, &date, ParseError::BodyTooLarge);
                    return Step::Close;
                }
                let total = head.len + n as usize;
                if data.len() < total {
                    send_continue(out, continue_sent, head.expect_continue);
                    return Step::Read { need: total };
                }
                (&data[head.len..total], total)
            }
            Framing::Chunked => {
                body.clear();
                let mut decoder = ChunkedDecoder::new(max_body);
                match decoder.decode(&data[head.len..], |chunk| body.extend_from_slice(chunk)) {
                    Ok(p) if p.done => (&body[..], head.len + p.consumed),
                    Ok(_) => {
                        // Encoded size is bounded too: tiny chunks could
                        // otherwise make the raw bytes far larger than the
                        // decoded limit.
                        let raw_limit = worker.limits.max_head_bytes + 2 * max_body as usize + 64 * 1024;
                        if data.len() > raw_limit {
                            write_parse_error(out, &date, ParseError::BodyTooLarge);
                            return Step::Close;
                        }
                        send_continue(out, continue_sent, head.expect_continue);
                        return Step::Read { need: data.len() + 1 };
                    }
                    Err(ChunkedError::TooLarge) => {
                        write_parse_error(out, &date, ParseError::BodyTooLarge);
                        return Step::Close;
                    }
                    Err(ChunkedError::Invalid(why)) => {
                        write_parse_error(out, &date, ParseError::BadRequest(why));
                        return Step::Close;
                    }
                }
            }
        };

        let step = match lookup {
            Lookup::Found { endpoint: Endpoint::Sync(handler), params, .. } => {
                let req = request(&head, params, req_body);
                let start = out.len();
                let mut w = ResponseWriter::new(out, &date, connection, head_only);
                let ran =
                    std::panic::catch_unwind(AssertUnwindSafe(|| handler(&req, router.state(), &mut w)));
                if ran.is_err() {
                    tracing::error!(path = head.path, "handler panicked");
                    out.truncate(start);
                    crate::Error::internal("internal error").write_to(&mut ResponseWriter::new(
                        out,
                        &date,
                        ConnectionHeader::Close,
                        head_only,
                    ));
                    Step::Close
                } else if keep_alive {
                    Step::Continue
                } else {
                    Step::Close
                }
            }
            Lookup::Found { endpoint: Endpoint::Async(handler), params, .. } => {
                let req = request(&head, params, req_body);
                Step::Await { fut: handler(&req, router.state()), reply }
            }
            Lookup::Found { endpoint: Endpoint::Stream(_), .. } => {
                // Handled above; kept total for the compiler.
                Step::Close
            }
            Lookup::MethodNotAllowed { allow } => {
                ResponseWriter::new(out, &date, connection, head_only).write(
                    StatusCode::METHOD_NOT_ALLOWED,
                    TEXT_UTF8,
                    [("Allow", allow)],
                    b"method not allowed\n",
                );
                if keep_alive {
                    Step::Continue
                } else {
                    Step::Close
                }
            }
            Lookup::NotFound => {
                ResponseWriter::new(out, &date, connection, head_only).write(
                    StatusCode::NOT_FOUND,
                    TEXT_UTF8,
                    [],
                    b"not found\n",
                );
                if keep_alive {
                    Step::Continue
                } else {
                    Step::Close
                }
            }
        };
        rbuf.consume(total);
        *head_deadline = None;
        *continue_sent = false;
        if body.capacity() > KEEP_OUT_CAPACITY {
            *body = Vec::new();
        }
        step
    }

    /// Writes the response of an async or streaming handler. Returns whether
    /// the connection stays open.
    fn write_deferred(&mut self, response: Response, mut reply: ReplyMeta) -> bool {
        // The server may have begun shutting down while the handler ran.
        if self.worker.shutting_down() {
            reply.connection = ConnectionHeader::Close;
        }
        let date = self.worker.date();
        response.write_to(&mut ResponseWriter::new(&mut self.out, &date, reply.connection, reply.head_only));
        reply.connection != ConnectionHeader::Close
    }

    /// Writes all queued output.
    async fn flush(&mut self, stream: &mut Io) -> std::io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        self.timer.arm(Wait::Io, self.worker.deadline_after(self.worker.config.io_timeout));
        let result = stream.write_all(&self.out).await;
        self.out.clear();
        if self.out.capacity() > KEEP_OUT_CAPACITY {
            self.out = Vec::with_capacity(self.worker.config.read_buffer_bytes);
        }
        result
    }

    /// Reads more input. Returns `false` when the connection is finished
    /// (end of input, error, or a timeout that shut the socket).
    async fn read(&mut self, stream: &mut Io, need: usize) -> bool {
        let worker = &self.worker;
        let (wait, deadline) = if self.rbuf.is_empty() {
            self.rbuf.shrink();
            (Wait::Idle, worker.deadline_after(worker.config.idle_timeout))
        } else if let Some(deadline) = self.head_deadline {
            (Wait::Head, deadline)
        } else {
            (Wait::Io, worker.deadline_after(worker.config.io_timeout))
        };
        self.timer.arm(wait, deadline);
        let spare = self.rbuf.spare(MIN_READ, need);
        match stream.read(spare).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.rbuf.filled(n);
                true
            }
        }
    }
}

fn request<'r>(
    head: &'r crate::http::parse::Head<'r, 'r>,
    params: Params<'r>,
    body: &'r [u8],
) -> Request<'r> {
    Request {
        method: head.method,
        method_str: head.method_str,
        path: head.path,
        query: head.query,
        version: head.version,
        headers: head.headers,
        params,
        body,
    }
}

fn send_continue(out: &mut Vec<u8>, sent: &mut bool, expected: bool) {
    if expected && !*sent {
        out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        *sent = true;
    }
}

fn write_parse_error(out: &mut Vec<u8>, date: &crate::http::date::DateBlock, e: ParseError) {
    let reason = e.reason().as_bytes();
    let _ = ResponseWriter::new(out, date, ConnectionHeader::Close, false).write_with(
        e.status(),
        TEXT_UTF8,
        [],
        reason.len() + 1,
        |body| {
            body.extend_from_slice(reason);
            body.push(b'\n');
            Ok::<(), std::convert::Infallible>(())
        },
    );
}
