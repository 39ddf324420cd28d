//! The protocol-neutral request pipeline: route, extract, run the handler,
//! answer through a [`ResponseWriter`].
//!
//! A protocol's connection driver (see [`crate::proto`]) decodes a request
//! head, asks [`route`] where it goes, frames the body the way the answer
//! says ([`BodyUse`]), builds a [`Request`], and calls [`dispatch`] (a body
//! in memory) or [`prepare_stream`] (a body the handler reads as it
//! arrives). Synchronous handlers write straight into the driver's output
//! through the writer, so the fast path makes no intermediate response and
//! no allocation; asynchronous ones give back a future the driver awaits
//! before writing its [`Response`] the same way. Nothing here knows the
//! protocol, and nothing above it (router, extractors, handlers) does either.

use std::panic::AssertUnwindSafe;
use std::rc::Rc;

use futures_util::FutureExt;

use crate::body::{Body, MemoryBody};
use crate::handler::{BodyConsumer, ResponseFuture};
use crate::http::Method;
use crate::middleware::Next;
use crate::pattern::Pattern;
use crate::request::{OwnedRequest, Params, Request};
use crate::response::canned::{self, Canned};
use crate::response::{IntoResponse, Response, ResponseWriter};
use crate::router::{Endpoint, Layered, Lookup, Router};

/// How the endpoint a request was routed to wants its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyUse {
    /// Collected in memory (up to the body limit) before the handler runs.
    Buffered,
    /// Read by the handler as it arrives (up to the streaming limit).
    Streamed,
    /// Nobody reads it: the route does not exist or refuses the method.
    Unrouted,
}

/// Finds the endpoint for `method` and `path`. Always inlined, with
/// [`Router::lookup`], for the reason given at [`dispatch`].
#[inline(always)]
pub(crate) fn route<'a, S: 'static>(
    router: &'a Router<S>,
    method: Method,
    path: &'a str,
) -> (Lookup<'a, S>, BodyUse) {
    let lookup = router.lookup(method, path);
    let body = match &lookup {
        Lookup::Found { endpoint: Endpoint::Stream(_), .. } => BodyUse::Streamed,
        // Middleware sees the whole request, body included.
        Lookup::Found { endpoint: Endpoint::Layered(_), .. } => BodyUse::Buffered,
        Lookup::Found { .. } => BodyUse::Buffered,
        Lookup::MethodNotAllowed { .. } | Lookup::NotFound => BodyUse::Unrouted,
    };
    (lookup, body)
}

/// What [`dispatch`] did.
pub(crate) enum Dispatched {
    /// The answer is written.
    Written,
    /// The handler panicked: a `500` is written, and the connection should
    /// close, since the handler's state is unknown.
    Panicked,
    /// Await this future, then write its response.
    Pending(ResponseFuture),
}

/// Runs the endpoint for a request whose body (if any) is in memory.
///
/// Always inlined: once the HTTP/2 driver became a second caller, LLVM
/// stopped inlining it into the HTTP/1.1 loop, and the call (with the
/// `Lookup` passed through memory) cost cleartext HTTP/1.1 about 35
/// instructions a request (callgrind, pipelined `/plaintext`).
#[inline(always)]
pub(crate) fn dispatch<S: 'static>(
    lookup: &Lookup<'_, S>,
    req: &Request<'_>,
    router: &Rc<Router<S>>,
    w: &mut ResponseWriter<'_>,
) -> Dispatched {
    let state = router.state();
    match lookup {
        Lookup::Found { endpoint: Endpoint::Sync(handler), .. } => {
            let checkpoint = w.checkpoint();
            let ran = std::panic::catch_unwind(AssertUnwindSafe(|| handler(req, state, w)));
            if ran.is_err() {
                tracing::error!(path = req.path(), "handler panicked");
                w.rollback(checkpoint);
                w.close_connection();
                w.canned(canned::HANDLER_PANICKED);
                return Dispatched::Panicked;
            }
            Dispatched::Written
        }
        Lookup::Found { endpoint: Endpoint::Async(handler), .. } => Dispatched::Pending(handler(req, state)),
        Lookup::Found { endpoint: Endpoint::Layered(layered), .. } => {
            Dispatched::Pending(run_layered(layered, req, router))
        }
        Lookup::Found { endpoint: Endpoint::Stream(_), .. } => {
            // A driver hands streaming routes to `prepare_stream`; answering
            // here keeps this total without a panic.
            w.canned(canned::HANDLER_PANICKED);
            Dispatched::Panicked
        }
        Lookup::MethodNotAllowed { allow } => {
            w.canned(Canned::method_not_allowed(allow));
            Dispatched::Written
        }
        Lookup::NotFound => {
            w.canned(canned::NOT_FOUND);
            Dispatched::Written
        }
    }
}

/// Runs the extractors of a streaming endpoint. `Ok` holds the continuation
/// that takes the body; `Err` a rejection to answer instead (the body is
/// then never read).
pub(crate) fn prepare_stream<S>(
    lookup: &Lookup<'_, S>,
    req: &Request<'_>,
    state: &S,
) -> Result<BodyConsumer, Response> {
    match lookup {
        Lookup::Found { endpoint: Endpoint::Stream(prepare), .. } => prepare(req, state),
        _ => Err(Response::canned(canned::NOT_FOUND)),
    }
}

/// [`prepare_stream`] for an owned request (HTTP/2 and HTTP/3 streams):
/// routes it and runs the streaming endpoint's extractors.
pub(crate) fn prepare_owned_stream<S: 'static>(
    router: &Router<S>,
    req: &OwnedRequest,
) -> Result<BodyConsumer, Response> {
    let (lookup, _) = route(router, req.method(), req.path());
    let params = match &lookup {
        Lookup::Found { params, .. } => Some(*params),
        _ => None,
    };
    req.with_view(params, |view| prepare_stream(&lookup, view, router.state()))
}

/// Starts the middleware chain of a layered endpoint on a copy of `req`.
fn run_layered<S: 'static>(
    layered: &Layered<S>,
    req: &Request<'_>,
    router: &Rc<Router<S>>,
) -> ResponseFuture {
    let owned = OwnedRequest::from_request(req);
    let (inner, pattern, router) =
        (Rc::clone(&layered.inner), Rc::clone(&layered.pattern), Rc::clone(router));
    let endpoint: Rc<dyn Fn(OwnedRequest) -> ResponseFuture> =
        Rc::new(move |req| run_inner(Rc::clone(&inner), Rc::clone(&pattern), Rc::clone(&router), req));
    Box::pin(Next::new(Rc::clone(&layered.chain), endpoint).run(owned))
}

/// What a handler behind middleware gave back when called.
enum Started {
    Done(Response),
    Pending(ResponseFuture),
}

/// Runs the endpoint behind a middleware chain on the (possibly changed)
/// owned request; its answer is an owned [`Response`] the middleware sees.
fn run_inner<S: 'static>(
    inner: Rc<Endpoint<S>>,
    pattern: Rc<Pattern>,
    router: Rc<Router<S>>,
    req: OwnedRequest,
) -> ResponseFuture {
    Box::pin(async move {
        let state = router.state();
        let params = Some(Params { pattern: &pattern, path: req.path() });
        let started = req.with_view(params, |view| match &*inner {
            Endpoint::Sync(handler) => {
                let mut slot = None;
                handler(view, state, &mut ResponseWriter::owned(&mut slot));
                Started::Done(slot.unwrap_or_else(|| Response::canned(canned::HANDLER_PANICKED)))
            }
            Endpoint::Async(handler) => Started::Pending(handler(view, state)),
            Endpoint::Stream(prepare) => match prepare(view, state) {
                Ok(consumer) => {
                    let body = Rc::new(MemoryBody::new(req.body().to_vec()));
                    Started::Pending(consumer(Body::new(body)))
                }
                Err(response) => Started::Done(response),
            },
            // Layers stack in one chain; an inner endpoint is never layered.
            Endpoint::Layered(_) => Started::Done(Response::canned(canned::HANDLER_PANICKED)),
        });
        match started {
            Started::Done(response) => response,
            Started::Pending(fut) => fut.await,
        }
    })
}

/// Runs a whole request that is already owned (the test client's) through
/// routing and the endpoint, to an owned response.
pub(crate) async fn dispatch_owned<S: 'static>(router: Rc<Router<S>>, req: OwnedRequest) -> Response {
    let started = {
        let (lookup, body_use) = route(&router, req.method(), req.path());
        let params = match &lookup {
            Lookup::Found { params, .. } => Some(*params),
            _ => None,
        };
        req.with_view(params, |view| {
            if body_use == BodyUse::Streamed {
                return match prepare_stream(&lookup, view, router.state()) {
                    Ok(consumer) => {
                        Started::Pending(consumer(Body::new(Rc::new(MemoryBody::new(view.body().to_vec())))))
                    }
                    Err(response) => Started::Done(response),
                };
            }
            let mut slot = None;
            match dispatch(&lookup, view, &router, &mut ResponseWriter::owned(&mut slot)) {
                Dispatched::Pending(fut) => Started::Pending(fut),
                Dispatched::Written | Dispatched::Panicked => {
                    Started::Done(slot.unwrap_or_else(|| Response::canned(canned::HANDLER_PANICKED)))
                }
            }
        })
    };
    match started {
        Started::Done(response) => response,
        Started::Pending(fut) => run_handler(fut).await,
    }
}

/// Awaits a handler, turning a panic into a `500` for this request only.
pub(crate) async fn run_handler(fut: ResponseFuture) -> Response {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(response) => response,
        Err(_) => {
            tracing::error!("handler panicked");
            Response::canned(canned::HANDLER_PANICKED)
        }
    }
}

/// Writes a response a handler produced after the request was let go.
#[inline]
pub(crate) fn write_response(response: Response, w: &mut ResponseWriter<'_>) {
    response.write_to(w);
}
