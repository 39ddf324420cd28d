//! Request logging through `tracing`: one event per request with method,
//! path, status, latency and client address.

use std::time::Instant;

use super::{Middleware, Next};
use crate::handler::ResponseFuture;
use crate::request::OwnedRequest;

/// Logs every request at `INFO` (`5xx` at `WARN`) under the target
/// `peregrine::request`. See [`trace`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Trace;

/// Request logging middleware.
pub fn trace() -> Trace {
    Trace
}

impl Middleware for Trace {
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture {
        Box::pin(async move {
            let started = Instant::now();
            let method = req.method_str().to_owned();
            let path = req.path().to_owned();
            let client = req.peer_addr();
            let response = next.run(req).await;
            let status = response.status_code().as_u16();
            let micros = started.elapsed().as_micros() as u64;
            let client = client.map(|a| a.to_string()).unwrap_or_default();
            if status >= 500 {
                tracing::warn!(target: "peregrine::request", %method, %path, status, micros, %client, "request");
            } else {
                tracing::info!(target: "peregrine::request", %method, %path, status, micros, %client, "request");
            }
            response
        })
    }
}
