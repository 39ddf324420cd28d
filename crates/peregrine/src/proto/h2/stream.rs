//! One HTTP/2 stream, on its own task: the request head becomes an
//! [`OwnedRequest`], the body is framed the way the route wants it
//! (buffered, streamed or not read at all), the pipeline runs the endpoint
//! and the response goes back on the stream.
//!
//! A client that resets the stream cancels the handler: its future is
//! dropped at the reset, so resets cannot pile up work (rapid reset).
//!
//! A request that has arrived whole (its HEADERS ended the stream, or the
//! body to a buffered route came with them, as a gRPC unary call's does)
//! is first offered to [`answer_whole`], in the connection's task: routed and dispatched on a
//! borrowed view of `h2`'s head (no copy of it), a synchronous handler's
//! response queued at once, and only an asynchronous handler's future or
//! a response that must wait for window capacity given a task. Before,
//! every stream paid a task, an [`OwnedRequest`] (an allocation per header
//! name and value) and the handler's reset watch: perf put the task's
//! spawn, copy and teardown alone at about 8% of the server's CPU on
//! h2load's `/baseline2` (64 connections, 100 streams each).

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;

use bytes::Bytes;
use futures_util::future::{select, Either};
use h2::server::SendResponse;
use h2::RecvStream;
use http::request::Parts;

use super::body::{self, StreamedBody};
use super::{connect, respond, Activity, Shared};
use crate::body::{Body, Refused};
use crate::http::uri;
use crate::http::{Header, Method, Version};
use crate::pipeline::{self, BodyUse, Dispatched};
use crate::request::{OwnedRequest, Request};
use crate::response::canned;
use crate::response::{Response, ResponseWriter};
use crate::router::Lookup;

/// A stream [`answer_whole`] gives back for a task of its own, with the
/// part of its body already taken.
pub(super) type Unanswered = (http::Request<RecvStream>, SendResponse<Bytes>, Vec<u8>);

/// Answers `request` in the connection's task if it has arrived whole (its
/// HEADERS ended the stream, or the body to a buffered route is all in)
/// and its route does not stream a body; otherwise gives it back, for
/// [`serve`] on a task of its own.
pub(super) fn answer_whole<S: 'static>(
    mut request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    shared: &Rc<Shared<S>>,
) -> Option<Unanswered> {
    if connect::is_extended(&request) {
        return Some((request, respond, Vec::new()));
    }
    let router = &shared.router;
    let method = Method::from_token(request.method().as_str());
    let mut body = Vec::new();
    if !request.body().is_end_stream() {
        let body_use = pipeline::route(router, method, request_path(&request)).1;
        if body_use != BodyUse::Buffered {
            return Some((request, respond, body));
        }
        let limit = shared.worker.config.max_body_bytes;
        match body::take_arrived(request.body_mut(), &mut body, limit, &shared.activity) {
            Ok(true) => {}
            Ok(false) => return Some((request, respond, body)),
            Err(Refused::Cut) => return None,
            Err(refused) => {
                let response = Response::canned(refused.canned());
                respond::send_at_once(&mut respond, response, method == Method::Head, &shared.stamp());
                return None;
            }
        }
    }
    let path = request_path(&request);
    // Refused paths and streaming routes take the general path.
    if uri::path_error(path.as_bytes()).is_some() {
        return Some((request, respond, body));
    }
    let (lookup, body_use) = pipeline::route(router, method, path);
    if body_use == BodyUse::Streamed {
        return Some((request, respond, body));
    }
    let uri = request.uri();
    let method_str = request.method().as_str();
    let headers: Vec<Header<'_>> =
        fields(uri, request.headers()).map(|(name, value)| Header { name, value }).collect();
    let view = Request {
        peer: shared.peer,
        method,
        method_str,
        path,
        query: uri.query(),
        version: Version::Http2,
        headers: &headers,
        params: match &lookup {
            Lookup::Found { params, .. } => Some(*params),
            _ => None,
        },
        body: &body,
        extensions: None,
    };
    let head_only = method == Method::Head;
    let mut slot = None;
    // A request is activity: without a task to open and close, the idle
    // deadline would otherwise still date from the last task-served stream.
    shared.activity.progress(0);
    let dispatched =
        pipeline::dispatch(&lookup, &view, router, &mut ResponseWriter::owned_with_files(&mut slot));
    match dispatched {
        Dispatched::Written | Dispatched::Panicked => {
            let response = slot.unwrap_or_else(|| Response::canned(canned::HANDLER_PANICKED));
            if respond::needs_pacing(&response) {
                tokio::task::spawn_local(send_later(respond, response, head_only, Rc::clone(shared)));
            } else {
                respond::send_at_once(&mut respond, response, head_only, &shared.stamp());
            }
        }
        Dispatched::Pending(answer) => {
            tokio::task::spawn_local(answer_later(answer, respond, head_only, Rc::clone(shared)));
        }
    }
    None
}

/// Sends a response that waits for window capacity, on its own task.
async fn send_later<S: 'static>(
    mut respond: SendResponse<Bytes>,
    response: Response,
    head_only: bool,
    shared: Rc<Shared<S>>,
) {
    let activity = &shared.activity;
    let _open = activity.open_stream();
    respond::send(&mut respond, response, head_only, &shared.stamp(), activity).await;
}

/// Awaits an asynchronous handler that [`answer_whole`] started, then sends
/// its response; a reset from the client drops it.
async fn answer_later<S: 'static>(
    answer: crate::handler::ResponseFuture,
    mut respond: SendResponse<Bytes>,
    head_only: bool,
    shared: Rc<Shared<S>>,
) {
    let activity = &shared.activity;
    let _open = activity.open_stream();
    let answer = pipeline::run_handler(answer);
    if let Some(response) = until_reset(answer, &mut respond, activity).await {
        respond::send(&mut respond, response, head_only, &shared.stamp(), activity).await;
    }
}

/// Serves the stream `request` opened; `respond` answers it.
/// `taken` is the part of the body [`answer_whole`] already read.
pub(super) async fn serve<S: 'static>(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    taken: Vec<u8>,
    shared: Rc<Shared<S>>,
) {
    if connect::is_extended(&request) {
        let (parts, recv) = request.into_parts();
        return connect::serve(parts, recv, respond, shared).await;
    }
    let activity = &shared.activity;
    let _open = activity.open_stream();
    let (parts, recv) = request.into_parts();
    let head_only = parts.method == http::Method::HEAD;
    let mut req = owned_request(&parts, shared.peer);
    let router = &shared.router;
    let config = &shared.worker.config;

    // The same rule as HTTP/1.1's: a path that is not in its one canonical
    // spelling (a dot segment, an escaped unreserved character) is refused
    // before routing, never normalised.
    let response = if let Some(why) = uri::path_error(req.path().as_bytes()) {
        drop(recv);
        Some(Response::canned(canned::Canned::bad_request(why)))
    } else if recv.is_end_stream() {
        // The end may have come after the part `answer_whole` took.
        drop(recv);
        *req.body_mut() = taken;
        until_reset(pipeline::dispatch_owned(Rc::clone(router), req), &mut respond, activity).await
    } else {
        let (_, body_use) = pipeline::route(router, req.method(), req.path());
        match body_use {
            BodyUse::Streamed => serve_streamed(req, recv, &shared, &mut respond).await,
            BodyUse::Buffered if declared_length(&parts) > Some(config.max_body_bytes) => {
                Some(Response::canned(canned::BODY_TOO_LARGE))
            }
            BodyUse::Buffered => {
                match body::read_to_end(recv, taken, config.max_body_bytes, activity).await {
                    Ok(body) => {
                        *req.body_mut() = body;
                        until_reset(pipeline::dispatch_owned(Rc::clone(router), req), &mut respond, activity)
                            .await
                    }
                    Err(Refused::Cut) => None,
                    Err(refused) => Some(Response::canned(refused.canned())),
                }
            }
            // Nobody reads the body: dropping it tells `h2` to refuse the
            // rest once the answer is sent.
            BodyUse::Unrouted => {
                drop(recv);
                until_reset(pipeline::dispatch_owned(Rc::clone(router), req), &mut respond, activity).await
            }
        }
    };
    // `None`: the client reset the stream; nobody is left to answer.
    if let Some(response) = response {
        respond::send(&mut respond, response, head_only, &shared.stamp(), activity).await;
    }
}

/// Runs a streaming endpoint, its body read from `recv` as the handler
/// asks for it.
async fn serve_streamed<S: 'static>(
    req: OwnedRequest,
    recv: RecvStream,
    shared: &Rc<Shared<S>>,
    respond: &mut SendResponse<Bytes>,
) -> Option<Response> {
    let consumer = match pipeline::prepare_owned_stream(&shared.router, &req) {
        Ok(consumer) => consumer,
        Err(rejection) => return Some(rejection),
    };
    let limit = shared.worker.config.max_stream_body_bytes;
    let body = Rc::new(StreamedBody::new(recv, limit, Rc::clone(&shared.activity)));
    let handler = pipeline::run_handler(consumer(Body::new(Rc::clone(&body) as _)));
    let response = until_reset(handler, respond, &shared.activity).await?;
    // One failure, one answer: the server's, as on HTTP/1.1.
    match body.refused() {
        None => Some(response),
        Some(Refused::Cut) => None,
        Some(refused) => Some(Response::canned(refused.canned())),
    }
}

/// Runs application code until it answers, or until the client resets the
/// stream (then `None`, and the future is dropped).
pub(super) async fn until_reset(
    answer: impl Future<Output = Response>,
    respond: &mut SendResponse<Bytes>,
    activity: &Activity,
) -> Option<Response> {
    let _busy = activity.busy();
    let answer = pin!(answer);
    let reset = pin!(poll_fn(|cx| respond.poll_reset(cx)));
    match select(answer, reset).await {
        Either::Left((response, _)) => Some(response),
        Either::Right(_) => None,
    }
}

/// The request's path, `/` for an empty one.
fn request_path<B>(request: &http::Request<B>) -> &str {
    match request.uri().path() {
        "" => "/",
        path => path,
    }
}

/// The request as handlers see it, its fields from [`fields`].
fn owned_request(parts: &Parts, peer: Option<std::net::SocketAddr>) -> OwnedRequest {
    let headers =
        fields(&parts.uri, &parts.headers).map(|(name, value)| (name.into(), value.into())).collect();
    OwnedRequest::from_parts(
        peer,
        parts.method.as_str(),
        parts.uri.path(),
        parts.uri.query(),
        Version::Http2,
        headers,
    )
}

/// The request's header fields as handlers see them: `:authority` first,
/// as `host`, when the client sent no `host` field (so code written for
/// HTTP/1.1 finds it), then every field as sent.
pub(crate) fn fields<'a>(
    uri: &'a http::Uri,
    headers: &'a http::HeaderMap,
) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
    let host = uri
        .authority()
        .filter(|_| !headers.contains_key(http::header::HOST))
        .map(|authority| ("host", authority.as_str().as_bytes()));
    host.into_iter().chain(headers.iter().map(|(name, value)| (name.as_str(), value.as_bytes())))
}

/// The `content-length` the client declared (`h2` checks the DATA frames
/// against it).
fn declared_length(parts: &Parts) -> Option<u64> {
    parts.headers.get(http::header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}
