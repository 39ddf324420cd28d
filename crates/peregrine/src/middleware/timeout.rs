//! A deadline for the handler (and the middleware inside this layer).

use std::time::Duration;

use super::{Middleware, Next};
use crate::handler::ResponseFuture;
use crate::http::StatusCode;
use crate::request::OwnedRequest;
use crate::response::Response;

/// Answers `503 Service Unavailable` (with `Retry-After: 1`) when the
/// inner handler takes longer than the duration; the handler's future is
/// dropped. `503`, not `408`: the server was slow, not the client.
#[derive(Clone, Copy, Debug)]
pub struct Timeout(Duration);

/// Timeout middleware.
pub fn timeout(limit: Duration) -> Timeout {
    Timeout(limit)
}

impl Middleware for Timeout {
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture {
        let limit = self.0;
        Box::pin(async move {
            match tokio::time::timeout(limit, next.run(req)).await {
                Ok(response) => response,
                Err(_) => Response::text("request timed out\n")
                    .status(StatusCode::SERVICE_UNAVAILABLE)
                    .header("Retry-After", "1"),
            }
        })
    }
}
