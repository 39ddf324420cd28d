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
//! is first offered to [`accept`], in the connection's task: routed and
//! dispatched on a borrowed view of the decoded head (no copy of it), a
//! synchronous handler's
//! response queued at once, and only an asynchronous handler's future or
//! a response that must wait for window capacity given a task. Before,
//! every stream paid a task, an [`OwnedRequest`] (an allocation per header
//! name and value) and the handler's reset watch: perf put the task's
//! spawn, copy and teardown alone at about 8% of the server's CPU on
//! h2load's `/baseline2` (64 connections, 100 streams each).

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;

use futures_util::future::{select, Either};

use super::body::{self, StreamedBody};
use super::core::Accepted;
use super::handle::{RecvStream, SendResponse};
use super::head::RequestHead;
use super::{connect, respond, Activity, Shared};
use crate::body::{Body, Refused};
use crate::http::uri;
use crate::http::{Header, Method, Version};
use crate::pipeline::{self, BodyUse, Dispatched};
use crate::request::{OwnedRequest, Request};
use crate::response::canned;
use crate::response::{Response, ResponseWriter};
use crate::router::Lookup;

/// Fields a request answered in the connection's task may have before its
/// view of them is put on the heap.
const INLINE_FIELDS: usize = 32;

/// Takes a stream the connection accepted: answers it right here if it has
/// arrived whole (its HEADERS ended the stream, or the body to a buffered
/// route is all in) and its route does not stream a body; otherwise gives
/// it a task of its own ([`serve`]).
pub(super) fn accept<S: 'static>(accepted: Accepted, shared: &Rc<Shared<S>>) {
    let Accepted { id, head, end_stream } = accepted;
    let core = &shared.core;
    if core.borrow().is_reset(id) {
        let mut core = core.borrow_mut();
        core.release(id);
        core.recycle(head);
        return;
    }
    let mut respond = SendResponse::new(core, id);
    // The connection's claim on the stream passes to the handles.
    core.borrow_mut().release(id);
    if head.oversized() {
        let refusal = Response::canned(canned::HEADERS_TOO_LARGE);
        respond::send_at_once(&mut respond, refusal, false, &shared.stamp());
        core.borrow_mut().recycle(head);
        return;
    }
    if head.protocol().is_some() {
        let recv = RecvStream::new(core, id);
        tokio::task::spawn_local(connect::serve(head, recv, respond, Rc::clone(shared)));
        return;
    }
    let router = &shared.router;
    let method = Method::from_token(head.method());
    let mut body = Vec::new();
    if !end_stream {
        let body_use = pipeline::route(router, method, head.path()).1;
        let mut recv = RecvStream::new(core, id);
        if body_use != BodyUse::Buffered {
            tokio::task::spawn_local(serve(head, respond, recv, body, Rc::clone(shared)));
            return;
        }
        let limit = shared.worker.config.max_body_bytes;
        match body::take_arrived(&mut recv, &mut body, limit, &shared.activity) {
            Ok(true) => {}
            Ok(false) => {
                tokio::task::spawn_local(serve(head, respond, recv, body, Rc::clone(shared)));
                return;
            }
            Err(Refused::Cut) => return,
            Err(refused) => {
                drop(recv);
                let response = Response::canned(refused.canned());
                respond::send_at_once(&mut respond, response, method == Method::Head, &shared.stamp());
                return;
            }
        }
    }
    let path = head.path();
    // Refused paths and streaming routes take the general path.
    if uri::path_error(path.as_bytes()).is_some() {
        let recv = RecvStream::new(core, id);
        tokio::task::spawn_local(serve(head, respond, recv, body, Rc::clone(shared)));
        return;
    }
    let (lookup, body_use) = pipeline::route(router, method, path);
    if body_use == BodyUse::Streamed {
        let recv = RecvStream::new(core, id);
        tokio::task::spawn_local(serve(head, respond, recv, body, Rc::clone(shared)));
        return;
    }
    let mut inline = [Header { name: "", value: b"" }; INLINE_FIELDS];
    let mut spilled = Vec::new();
    let mut count = 0;
    for (name, value) in head.fields() {
        if count < INLINE_FIELDS {
            inline[count] = Header { name, value };
        } else {
            if spilled.is_empty() {
                spilled.extend_from_slice(&inline);
            }
            spilled.push(Header { name, value });
        }
        count += 1;
    }
    let headers = if spilled.is_empty() { &inline[..count] } else { &spilled[..] };
    let view = Request {
        peer: shared.peer,
        method,
        method_str: head.method(),
        path,
        query: head.query(),
        version: Version::Http2,
        headers,
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
    drop(spilled);
    core.borrow_mut().recycle(head);
}

/// Sends a response that waits for window capacity, on its own task.
async fn send_later<S: 'static>(
    mut respond: SendResponse,
    response: Response,
    head_only: bool,
    shared: Rc<Shared<S>>,
) {
    let activity = &shared.activity;
    let _open = activity.open_stream();
    respond::send(&mut respond, response, head_only, &shared.stamp(), activity).await;
}

/// Awaits an asynchronous handler that [`accept`] started, then sends its
/// response; a reset from the client drops it.
async fn answer_later<S: 'static>(
    answer: crate::handler::ResponseFuture,
    mut respond: SendResponse,
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

/// Serves the stream `head` opened; `respond` answers it. `taken` is the
/// part of the body [`accept`] already read.
async fn serve<S: 'static>(
    head: RequestHead,
    mut respond: SendResponse,
    recv: RecvStream,
    taken: Vec<u8>,
    shared: Rc<Shared<S>>,
) {
    let activity = &shared.activity;
    let _open = activity.open_stream();
    let head_only = head.method() == "HEAD";
    let mut req = owned_request(&head, shared.peer);
    let router = &shared.router;
    let config = &shared.worker.config;

    // The same rule as HTTP/1.1's: a path that is not in its one canonical
    // spelling (a dot segment, an escaped unreserved character) is refused
    // before routing, never normalised.
    let response = if let Some(why) = uri::path_error(req.path().as_bytes()) {
        drop(recv);
        Some(Response::canned(canned::Canned::bad_request(why)))
    } else if recv.is_end_stream() {
        // The end may have come after the part `accept` took.
        drop(recv);
        *req.body_mut() = taken;
        until_reset(pipeline::dispatch_owned(Rc::clone(router), req), &mut respond, activity).await
    } else {
        let (_, body_use) = pipeline::route(router, req.method(), req.path());
        match body_use {
            BodyUse::Streamed => serve_streamed(req, recv, &shared, &mut respond).await,
            BodyUse::Buffered if head.content_length() > Some(config.max_body_bytes) => {
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
            // Nobody reads the body: dropping it refuses the rest once the
            // answer is sent.
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
    respond: &mut SendResponse,
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
    respond: &mut SendResponse,
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

/// The request as handlers see it, its fields from [`RequestHead::fields`].
fn owned_request(head: &RequestHead, peer: Option<std::net::SocketAddr>) -> OwnedRequest {
    let headers = head.fields().map(|(name, value)| (name.into(), value.into())).collect();
    OwnedRequest::from_parts(peer, head.method(), head.path(), head.query(), Version::Http2, headers)
}
