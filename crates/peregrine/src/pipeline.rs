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

use futures_util::FutureExt;

use crate::handler::{BodyConsumer, ResponseFuture};
use crate::http::Method;
use crate::request::Request;
use crate::response::canned::{self, Canned};
use crate::response::{IntoResponse, Response, ResponseWriter};
use crate::router::{Endpoint, Lookup, Router};

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

/// Finds the endpoint for `method` and `path`.
#[inline]
pub(crate) fn route<'a, S: 'static>(
    router: &'a Router<S>,
    method: Method,
    path: &'a str,
) -> (Lookup<'a, S>, BodyUse) {
    let lookup = router.lookup(method, path);
    let body = match &lookup {
        Lookup::Found { endpoint: Endpoint::Stream(_), .. } => BodyUse::Streamed,
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
#[inline]
pub(crate) fn dispatch<S>(
    lookup: &Lookup<'_, S>,
    req: &Request<'_>,
    state: &S,
    w: &mut ResponseWriter<'_>,
) -> Dispatched {
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
