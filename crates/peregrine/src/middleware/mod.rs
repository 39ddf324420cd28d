//! Middleware: async functions around a route's handler that can read and
//! change the request, change the response, or answer early.
//!
//! ```no_run
//! use peregrine::middleware::{from_fn, Next};
//! use peregrine::{OwnedRequest, Response, Router, StatusCode};
//!
//! async fn require_key(req: OwnedRequest, next: Next) -> Response {
//!     if req.header("x-api-key") != Some(b"secret".as_slice()) {
//!         return Response::text("no key\n").status(StatusCode::UNAUTHORIZED);
//!     }
//!     let mut response = next.run(req).await;
//!     response.set_header("x-checked", "yes");
//!     response
//! }
//!
//! let admin = Router::new().get("/admin/stats", || "42").layer(from_fn(require_key));
//! let app = Router::new().get("/", || "home").merge(admin);
//! ```
//!
//! [`Router::layer`](crate::Router::layer) wraps every route registered on
//! that router so far (layers added later run first); apply it to a group by
//! building the group as its own router and [`nest`](crate::Router::nest)ing
//! or [`merge`](crate::Router::merge)ing it, and to one route the same way.
//!
//! A tower layer (tower-http's, say) runs as middleware through [`tower`].
//!
//! Built in: [`trace`] (request logging), [`cors`], [`compression`], [`timeout`],
//! [`request_id`], [`body_limit`], [`bearer_auth`] and [`basic_auth`].
//! Middleware also sees requests whose method the route does not serve
//! (they would get `405`), so [`cors`] answers preflights without routes.
//!
//! # Cost
//! Routes without middleware are untouched: their requests stay borrowed
//! from the read buffer and their handlers write straight into the output.
//! A route with middleware copies its request into an [`OwnedRequest`] (it
//! must outlive the read buffer across `.await`s) and its handler's answer
//! into an owned [`Response`], a few allocations per request. Its body is
//! always buffered, up to the server's `max_body_bytes`, even for a
//! streaming handler.

mod auth;
mod compression;
mod cors;
mod limit;
mod request_id;
mod timeout;
mod tower;
mod trace;

pub use auth::{basic_auth, bearer_auth, BasicAuth, BearerAuth};
pub use compression::{compression, negotiate, Coding, Compression};
pub use cors::{cors, Cors};
pub use limit::{body_limit, BodyLimit};
pub use request_id::{request_id, RequestId, SetRequestId};
pub use timeout::{timeout, Timeout};
pub use tower::{tower, NextService, TowerLayer};
pub use trace::{trace, Trace};

use std::fmt;
use std::future::Future;
use std::rc::Rc;

use futures_util::FutureExt;

use crate::handler::ResponseFuture;
use crate::request::OwnedRequest;
use crate::response::{IntoResponse, Response};

/// One layer of middleware. Usually made with [`from_fn`].
pub trait Middleware: 'static {
    /// Handles `req`, normally by awaiting `next.run(req)` and returning
    /// (perhaps changing) its response, or answering early without it.
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture;
}

/// The rest of the chain: later middleware, then the handler.
pub struct Next {
    chain: Rc<[Rc<dyn Middleware>]>,
    index: usize,
    endpoint: Rc<dyn Fn(OwnedRequest) -> ResponseFuture>,
}

impl fmt::Debug for Next {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next").field("layers_left", &(self.chain.len() - self.index)).finish()
    }
}

impl Next {
    pub(crate) fn new(
        chain: Rc<[Rc<dyn Middleware>]>,
        endpoint: Rc<dyn Fn(OwnedRequest) -> ResponseFuture>,
    ) -> Next {
        Next { chain, index: 0, endpoint }
    }

    /// Runs the rest of the chain on `req`.
    pub async fn run(self, req: OwnedRequest) -> Response {
        match self.chain.get(self.index) {
            Some(layer) => {
                let layer = Rc::clone(layer);
                layer.call(req, Next { index: self.index + 1, ..self }).await
            }
            None => (self.endpoint)(req).await,
        }
    }
}

/// Middleware made from an async function `(OwnedRequest, Next) -> impl IntoResponse`.
pub fn from_fn<F, Fut>(f: F) -> FromFn<F>
where
    F: Fn(OwnedRequest, Next) -> Fut + 'static,
    Fut: Future + 'static,
    Fut::Output: IntoResponse,
{
    FromFn(f)
}

/// See [`from_fn`].
#[derive(Clone, Copy)]
pub struct FromFn<F>(F);

impl<F> fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FromFn")
    }
}

impl<F, Fut> Middleware for FromFn<F>
where
    F: Fn(OwnedRequest, Next) -> Fut + 'static,
    Fut: Future + 'static,
    Fut::Output: IntoResponse,
{
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture {
        // Mapped, not awaited in an `async` block, which would hold the
        // future twice (see `ResponseFuture`).
        Box::pin((self.0)(req, next).map(IntoResponse::into_response))
    }
}
