//! One HTTP/3 request stream, on its own task: the head becomes an
//! [`OwnedRequest`] (mapped as HTTP/2 maps its streams), the body is read
//! the way the route wants it (buffered up to `max_body_bytes`, streamed to
//! the handler, or not read), the pipeline runs the endpoint and the
//! [`Response`] goes back as HEADERS, DATA and, if any, trailing HEADERS.
//!
//! Flow control needs no bookkeeping here: quinn gives a stream's window
//! back as its bytes are read, and a streamed body is read only as the
//! handler asks for it, so a handler that stops reading stops the client.
//! Response DATA waits for the client's windows in `send_data`; a streamed
//! body's next chunk is asked for only once the one before is sent.
//!
//! A client that cancels the request (`STOP_SENDING` on the response,
//! `RESET_STREAM` on the request, or the connection's end) drops the
//! task, handler and all, as an HTTP/2 `RST_STREAM` does (a reset that
//! comes while the handler leaves body bytes unread: at its next read, see
//! [`Probe`]). Waits on the
//! client are paced ([`super::pace`]): a request body below
//! [`min_request_body_rate`](crate::Config::min_request_body_rate) is
//! answered `408` (on a streaming route the handler's read fails first),
//! a response taken below
//! [`min_response_rate`](crate::Config::min_response_rate) is reset with
//! `H3_REQUEST_CANCELLED`.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;

use bytes::{Buf, Bytes};
use futures_util::StreamExt;
use h3::error::Code;
use h3::server::{RequestResolver, RequestStream};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;

use super::fields::{request_fields, response_head};
use super::pace::{Pace, TooSlow};
use super::quic::{self, Probe};
use super::Shared;
use crate::body::{Body, BodySource, Pieces, ReadFuture, Refused};
use crate::http::date::DateBlock;
use crate::http::uri;
use crate::http::Version;
use crate::pipeline::{self, BodyUse};
use crate::request::OwnedRequest;
use crate::response::canned::{self, Canned};
use crate::response::{BodyStream, Response, Trailers};

type SendHalf = RequestStream<quic::Send<Bytes>, Bytes>;
type RecvHalf = RequestStream<quic::RequestRecv, Bytes>;

/// Serves the request stream `resolver` holds, whose [`Probe`] is `probe`:
/// reads its head, then answers it unless the client cancels first.
pub(super) async fn serve<S: 'static>(
    resolver: RequestResolver<quic::Conn, Bytes>,
    probe: Rc<Probe>,
    shared: Rc<Shared<S>>,
) {
    let config = &shared.worker.config;
    // The head first, whatever the client does meanwhile, so a malformed
    // one always gets its error. `h3` answers a head over the size limit
    // with `431` itself, and turns frame and QPACK errors into stream or
    // connection errors.
    let (request, stream) =
        match tokio::time::timeout(config.header_timeout, resolver.resolve_request()).await {
            Ok(Ok(resolved)) => resolved,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "HTTP/3 request refused");
                return;
            }
            Err(_) => {
                tracing::debug!("HTTP/3 request head timed out");
                return;
            }
        };
    tokio::select! {
        biased;
        () = answer(request, stream, &probe, &shared) => {}
        () = probe.cancelled() => tracing::debug!("HTTP/3 request cancelled by the client"),
    }
}

/// Reads the request's body, runs its endpoint, sends the response.
async fn answer<S: 'static>(
    request: http::Request<()>,
    stream: RequestStream<quic::Bidi<Bytes>, Bytes>,
    probe: &Rc<Probe>,
    shared: &Rc<Shared<S>>,
) {
    let config = &shared.worker.config;
    let (parts, ()) = request.into_parts();
    let head_only = parts.method == http::Method::HEAD;
    let (mut send, mut recv) = stream.split();
    let mut req = owned_request(&parts, shared.peer);
    let router = &shared.router;
    let body_pace = Pace::request(config.min_request_body_rate, probe);

    // The same rule as HTTP/1.1's: a path not in its canonical spelling is
    // refused before routing, never normalised.
    let response = if let Some(why) = uri::path_error(req.path().as_bytes()) {
        recv.stop_sending(Code::H3_NO_ERROR);
        Response::canned(Canned::bad_request(why))
    } else {
        let (_, body_use) = pipeline::route(router, req.method(), req.path());
        match body_use {
            BodyUse::Streamed => match serve_streamed(req, recv, body_pace, shared).await {
                Some(response) => response,
                None => return,
            },
            BodyUse::Buffered if declared_length(&parts) > Some(config.max_body_bytes) => {
                recv.stop_sending(Code::H3_NO_ERROR);
                Response::canned(canned::BODY_TOO_LARGE)
            }
            BodyUse::Buffered => match read_to_end(&mut recv, config.max_body_bytes, &body_pace).await {
                Ok(Ok(body)) => {
                    *req.body_mut() = body;
                    pipeline::dispatch_owned(Rc::clone(router), req).await
                }
                Ok(Err(Refused::Cut)) => return,
                Ok(Err(refused)) => {
                    recv.stop_sending(Code::H3_NO_ERROR);
                    Response::canned(refused.canned())
                }
                Err(TooSlow) => {
                    tracing::debug!("HTTP/3 request body below the minimum rate");
                    recv.stop_sending(Code::H3_REQUEST_CANCELLED);
                    Response::canned(canned::REQUEST_TIMEOUT)
                }
            },
            BodyUse::Unrouted => {
                // Nobody reads the body (RFC 9114 §4.1 lets the answer come
                // first, with the rest refused this way).
                recv.stop_sending(Code::H3_NO_ERROR);
                pipeline::dispatch_owned(Rc::clone(router), req).await
            }
        }
    };
    let pace = Pace::response(config.min_response_rate, probe);
    if let Err(TooSlow) = send_response(&mut send, response, head_only, &shared.worker.date(), &pace).await {
        tracing::debug!("HTTP/3 response taken below the minimum rate");
        send.stop_stream(Code::H3_REQUEST_CANCELLED);
    }
}

/// The request as handlers see it: fields as HTTP/2 gives them
/// (`:authority` as `host` when there is none).
fn owned_request(parts: &Parts, peer: Option<std::net::SocketAddr>) -> OwnedRequest {
    let headers =
        request_fields(&parts.uri, &parts.headers).map(|(name, value)| (name.into(), value.into())).collect();
    OwnedRequest::from_parts(
        peer,
        parts.method.as_str(),
        parts.uri.path(),
        parts.uri.query(),
        Version::Http3,
        headers,
    )
}

/// The `content-length` the client declared.
fn declared_length(parts: &Parts) -> Option<u64> {
    parts.headers.get(http::header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// The next non-empty DATA payload, `None` at the end of the body. A body
/// below its minimum rate is cut, and `slow` set.
async fn next_data(
    recv: &RefCell<RecvHalf>,
    pace: &Pace,
    slow: &Cell<bool>,
) -> Result<Option<Bytes>, Refused> {
    loop {
        let next = pace.wait(poll_fn(|cx| {
            recv.borrow_mut()
                .poll_recv_data(cx)
                .map(|data| data.map(|data| data.map(|mut data| data.copy_to_bytes(data.remaining()))))
        }));
        match next.await {
            Ok(Ok(None)) => return Ok(None),
            Ok(Ok(Some(data))) if data.is_empty() => {}
            Ok(Ok(Some(data))) => return Ok(Some(data)),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "HTTP/3 request body cut short");
                return Err(Refused::Cut);
            }
            Err(TooSlow) => {
                tracing::debug!("HTTP/3 request body below the minimum rate");
                slow.set(true);
                return Err(Refused::Cut);
            }
        }
    }
}

/// Reads a whole body of at most `limit` bytes.
async fn read_to_end(
    recv: &mut RecvHalf,
    limit: u64,
    pace: &Pace,
) -> Result<Result<Vec<u8>, Refused>, TooSlow> {
    let mut body = Vec::new();
    loop {
        match pace.wait(recv.recv_data()).await? {
            Ok(None) => return Ok(Ok(body)),
            Ok(Some(mut data)) => {
                if (body.len() + data.remaining()) as u64 > limit {
                    return Ok(Err(Refused::TooLarge));
                }
                while data.has_remaining() {
                    let chunk = data.chunk();
                    body.extend_from_slice(chunk);
                    let n = chunk.len();
                    data.advance(n);
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "HTTP/3 request body cut short");
                return Ok(Err(Refused::Cut));
            }
        }
    }
}

/// Runs a streaming endpoint, its body read from `recv` as the handler
/// asks for it. `None`: the body was cut, nobody is left to answer.
async fn serve_streamed<S: 'static>(
    req: OwnedRequest,
    recv: RecvHalf,
    pace: Pace,
    shared: &Rc<Shared<S>>,
) -> Option<Response> {
    let consumer = match pipeline::prepare_owned_stream(&shared.router, &req) {
        Ok(consumer) => consumer,
        Err(rejection) => return Some(rejection),
    };
    let limit = shared.worker.config.max_stream_body_bytes;
    let body = Rc::new(StreamedBody {
        recv: RefCell::new(recv),
        pieces: Pieces::new(limit),
        pace,
        slow: Cell::new(false),
    });
    let response = pipeline::run_handler(consumer(Body::new(Rc::clone(&body) as _))).await;
    // One failure, one answer: the server's, as on HTTP/1.1.
    if body.slow.get() {
        body.recv.borrow_mut().stop_sending(Code::H3_REQUEST_CANCELLED);
        return Some(Response::canned(canned::REQUEST_TIMEOUT));
    }
    match body.pieces.refused() {
        None => Some(response),
        Some(Refused::Cut) => None,
        Some(refused) => {
            body.recv.borrow_mut().stop_sending(Code::H3_NO_ERROR);
            Some(Response::canned(refused.canned()))
        }
    }
}

/// A body a streaming handler reads as it arrives.
struct StreamedBody {
    recv: RefCell<RecvHalf>,
    pieces: Pieces,
    pace: Pace,
    /// Cut for arriving below the minimum rate.
    slow: Cell<bool>,
}

impl BodySource for StreamedBody {
    fn read<'a>(&'a self, buf: &'a mut [u8]) -> ReadFuture<'a> {
        Box::pin(self.pieces.read(buf, || next_data(&self.recv, &self.pace, &self.slow)))
    }

    fn bytes_read(&self) -> u64 {
        self.pieces.handed_out()
    }
}

/// Sends `response`: the head, the body (whole or chunk by chunk), the
/// trailers, the end of the stream. `head_only` for `HEAD`. A failed send
/// (the client stopped the stream, or the connection ended) ends it
/// quietly; `TooSlow` when the client took it below its minimum rate.
async fn send_response(
    send: &mut SendHalf,
    mut response: Response,
    head_only: bool,
    date: &DateBlock,
    pace: &Pace,
) -> Result<(), TooSlow> {
    let stream = response.take_stream();
    let body = response.take_body();
    let trailers = response.take_trailers();
    let length = if stream.is_some() { None } else { Some(body.len()) };
    let Some(head) = response_head(&response, date, length) else {
        tracing::error!("refusing a response with a header HTTP/3 cannot carry");
        let canned = Response::canned(canned::INVALID_RESPONSE_HEADER);
        // The `500` has only fixed headers, so its head always builds.
        if let Some(head) = response_head(&canned, date, Some(canned.body().len())) {
            if pace.wait(send.send_response(head)).await?.is_ok()
                && pace.wait(send.send_data(Bytes::copy_from_slice(canned.body()))).await?.is_ok()
            {
                let _ = send.finish().await;
            }
        }
        return Ok(());
    };
    if pace.wait(send.send_response(head)).await?.is_err() {
        return Ok(());
    }
    if !head_only {
        let sent = match stream {
            Some(stream) => send_stream(send, stream, pace).await?,
            None if body.is_empty() => Ok(()),
            None => {
                let body = match body {
                    std::borrow::Cow::Borrowed(b) => Bytes::from_static(b),
                    std::borrow::Cow::Owned(v) => Bytes::from(v),
                };
                pace.wait(send.send_data(body)).await?.map_err(|_| ())
            }
        };
        if sent.is_err() || send_trailers(send, trailers, pace).await?.is_err() {
            return Ok(());
        }
    }
    let _ = send.finish().await;
    Ok(())
}

/// Sends the trailers, if there are any (computed ones computed now that
/// the body is sent).
async fn send_trailers(
    send: &mut SendHalf,
    trailers: Trailers,
    pace: &Pace,
) -> Result<Result<(), ()>, TooSlow> {
    let trailers = trailers.finish();
    if trailers.is_empty() {
        return Ok(Ok(()));
    }
    let mut map = HeaderMap::with_capacity(trailers.len());
    for (name, value) in trailers.iter() {
        let (name, value): (&str, &str) = (name.as_ref(), value.as_ref());
        match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            (Ok(name), Ok(value)) => {
                map.append(name, value);
            }
            _ => {
                // The body is sent: a reset is how the client learns it
                // failed.
                send.stop_stream(Code::H3_INTERNAL_ERROR);
                return Ok(Err(()));
            }
        }
    }
    Ok(pace.wait(send.send_trailers(map)).await?.map_err(|_| ()))
}

/// Sends a streamed body: a chunk is asked for only after the one before
/// was sent (the handler's time making chunks is not paced).
async fn send_stream(
    send: &mut SendHalf,
    stream: BodyStream,
    pace: &Pace,
) -> Result<Result<(), ()>, TooSlow> {
    let mut chunks = stream.0;
    while let Some(next) = chunks.next().await {
        match next {
            Ok(chunk) if chunk.is_empty() => {}
            Ok(chunk) => {
                if pace.wait(send.send_data(chunk)).await?.is_err() {
                    return Ok(Err(()));
                }
            }
            Err(e) => {
                // The status is sent: a reset is how the client learns the
                // body is cut.
                tracing::warn!(error = %e, "streamed response body failed");
                send.stop_stream(Code::H3_INTERNAL_ERROR);
                return Ok(Err(()));
            }
        }
    }
    Ok(Ok(()))
}
