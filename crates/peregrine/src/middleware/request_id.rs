//! Request ids: one per request, taken from `X-Request-Id` when the client
//! (or a proxy in front) sent a sensible one, made up otherwise; attached as
//! an extension for handlers and sent back in the response.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use super::{Middleware, Next};
use crate::handler::ResponseFuture;
use crate::request::OwnedRequest;

/// The request's id, as an [`Extension`](crate::Extension).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestId(pub String);

/// See [`request_id`].
#[derive(Clone, Copy, Debug, Default)]
pub struct SetRequestId;

/// Request id middleware: keeps an incoming `X-Request-Id` of 1 to 64
/// characters from `[A-Za-z0-9._-]`, otherwise makes a 16-hex-digit one.
pub fn request_id() -> SetRequestId {
    SetRequestId
}

thread_local! {
    /// xorshift64* state, seeded per thread from the clock and the
    /// thread's address space: ids need to be unique, not secret.
    static STATE: Cell<u64> = Cell::new({
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let local = 0u8;
        (nanos ^ (&local as *const u8 as u64).rotate_left(32)) | 1
    });
}

fn next_id() -> String {
    let n = STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    });
    format!("{n:016x}")
}

fn acceptable(id: &[u8]) -> bool {
    (1..=64).contains(&id.len()) && id.iter().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(b))
}

impl Middleware for SetRequestId {
    fn call(&self, mut req: OwnedRequest, next: Next) -> ResponseFuture {
        let id = match req.header("x-request-id") {
            Some(given) if acceptable(given) => String::from_utf8_lossy(given).into_owned(),
            _ => next_id(),
        };
        req.extensions_mut().insert(RequestId(id.clone()));
        Box::pin(async move {
            let mut response = next.run(req).await;
            response.set_header("X-Request-Id", id);
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_well_formed() {
        let a = next_id();
        let b = next_id();
        assert_ne!(a, b);
        assert!(acceptable(a.as_bytes()));
        assert!(!acceptable(b""));
        assert!(!acceptable(b"has space"));
        assert!(!acceptable(&[b'a'; 65]));
    }
}
