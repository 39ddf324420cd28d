//! Every response the server generates itself, in one place.
//!
//! The rule: errors the server produces on its own, from the protocol layer
//! (malformed requests, limits, timeouts, unknown routes, the connection
//! limit, a panicking handler), are `text/plain; charset=utf-8` with a
//! one-line reason, the same on every protocol and every kind of route.
//! Errors a handler or an extractor returns ([`crate::Error`]) are JSON,
//! `{"error":"..."}`, because the application chose them. A request body
//! that fails to decode (bad chunked framing, over the limit) is a
//! server-generated error whichever kind of route was reading it, so a
//! streaming route answers it exactly as a buffered route does.

use crate::http::StatusCode;

/// A server-generated response: status, a one-line reason sent as the
/// body, and at most one extra header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Canned<'a> {
    pub(crate) status: StatusCode,
    pub(crate) reason: &'a str,
    pub(crate) header: Option<(&'static str, &'a str)>,
}

impl<'a> Canned<'a> {
    const fn new(status: StatusCode, reason: &'a str) -> Canned<'a> {
        Canned { status, reason, header: None }
    }

    /// `400` with the parser's reason.
    pub(crate) const fn bad_request(reason: &'a str) -> Canned<'a> {
        Canned::new(StatusCode::BAD_REQUEST, reason)
    }

    /// Any status with a reason of the protocol layer's choosing.
    pub(crate) const fn status(status: StatusCode, reason: &'a str) -> Canned<'a> {
        Canned::new(status, reason)
    }

    /// `405` with the methods the path allows.
    pub(crate) const fn method_not_allowed(allow: &'a str) -> Canned<'a> {
        Canned {
            status: StatusCode::METHOD_NOT_ALLOWED,
            reason: "method not allowed",
            header: Some(("Allow", allow)),
        }
    }

    /// The body: the reason and a newline.
    pub(crate) fn body_len(&self) -> usize {
        self.reason.len() + 1
    }
}

/// `503` for a protocol switch asked of a connection that is closing
/// (the server began shutting down).
pub(crate) const CANNOT_UPGRADE: Canned<'static> =
    Canned::new(StatusCode::SERVICE_UNAVAILABLE, "server shutting down: cannot switch protocols");
/// `404` for a path no route matches.
pub(crate) const NOT_FOUND: Canned<'static> = Canned::new(StatusCode::NOT_FOUND, "not found");
/// `408` for a client too slow to send its request head.
pub(crate) const REQUEST_TIMEOUT: Canned<'static> =
    Canned::new(StatusCode::REQUEST_TIMEOUT, "request header timeout");
/// `413` for a body over the route's limit.
pub(crate) const BODY_TOO_LARGE: Canned<'static> =
    Canned::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
/// `431` for an HTTP/2 request whose decoded header list is over the
/// limit (`SETTINGS_MAX_HEADER_LIST_SIZE`).
pub(crate) const HEADERS_TOO_LARGE: Canned<'static> =
    Canned::new(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "request header fields too large");
/// `500` for a handler that panicked.
pub(crate) const HANDLER_PANICKED: Canned<'static> =
    Canned::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
/// `500` for a response that tried to send an invalid header.
pub(crate) const INVALID_RESPONSE_HEADER: Canned<'static> =
    Canned::new(StatusCode::INTERNAL_SERVER_ERROR, "invalid response header");
/// `501` for an HTTP/2 extended `CONNECT` (RFC 8441) whose `:protocol`
/// the server does not speak (it speaks `websocket`).
pub(crate) const UNKNOWN_CONNECT_PROTOCOL: Canned<'static> =
    Canned::new(StatusCode::NOT_IMPLEMENTED, "extended CONNECT protocol not supported");
/// `400` for an HTTP/2 extended `CONNECT` to a route that answered it as
/// an ordinary `GET` (a `2xx` would tell the client its tunnel is open).
pub(crate) const NOT_A_TUNNEL: Canned<'static> =
    Canned::new(StatusCode::BAD_REQUEST, "this resource does not speak WebSocket");
/// `503` for a connection over the worker's limit.
pub(crate) const CONNECTION_LIMIT: Canned<'static> = Canned {
    status: StatusCode::SERVICE_UNAVAILABLE,
    reason: "connection limit reached",
    header: Some(("Retry-After", "1")),
};

/// HTTP/1.1's interim answer to `Expect: 100-continue`, sent only once the
/// request is known to reach a handler that will read its body.
pub(crate) const HTTP1_CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
