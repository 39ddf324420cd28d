//! A smaller body limit for one group of routes than the server's.

use super::{Middleware, Next};
use crate::handler::ResponseFuture;
use crate::http::StatusCode;
use crate::request::OwnedRequest;
use crate::response::Response;

/// See [`body_limit`].
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(usize);

/// Refuses bodies over `bytes` with `413`. The server's own
/// [`Config::max_body_bytes`](crate::Config::max_body_bytes) still bounds
/// what is read at all; this lowers it for the routes behind the layer.
pub fn body_limit(bytes: usize) -> BodyLimit {
    BodyLimit(bytes)
}

impl Middleware for BodyLimit {
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture {
        if req.body().len() > self.0 {
            let refused = Response::text("request body too large\n").status(StatusCode::PAYLOAD_TOO_LARGE);
            return Box::pin(std::future::ready(refused));
        }
        Box::pin(next.run(req))
    }
}
