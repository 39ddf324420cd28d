//! One HTTP/1.1 response reader for clients that test servers.
//!
//! The lab's verifier, the lab's stress clients and the library's
//! integration tests all read responses byte by byte from raw sockets, so
//! that framing mistakes reach them instead of being smoothed over by an
//! ordinary client. This crate owns that reading, once:
//!
//! - [`parse`]: the pure part. [`parse::parse_head`] turns buffered bytes
//!   into a [`Head`] (status line, headers, syntax defects),
//!   [`Head::framing`] decides how its body is delimited (`Content-Length`,
//!   chunked, until close, or none for `HEAD`, 1xx, 204 and 304), and
//!   [`parse::parse_body`] takes the body out of the buffer. Neither does
//!   I/O: both say "need more bytes" until the caller reports how the
//!   stream ended.
//! - [`read_head`], [`read_body`], [`read_response`]: the same over any
//!   [`std::io::Read`]; [`async_io`] (feature `tokio`) over a tokio
//!   `AsyncRead`. Bytes past a response stay in the caller's buffer for the
//!   next one, which is what makes pipelining checkable.
//! - [`strict`]: what a well-formed response must look like beyond being
//!   delimitable (token header names, `Date` in IMF-fixdate and current,
//!   required headers), for callers that hold servers to that;
//!   [`date`]: IMF-fixdate itself.
//! - [`corpus`]: the malformed and smuggling requests servers are held to,
//!   with the answers the RFCs call for.
//!
//! Reading is forgiving where a checker wants to name a problem rather than
//! stop: a framing defect (bare LF, short body, duplicate `Content-Length`)
//! is recorded in [`Response::defects`]. Only a response that cannot be
//! delimited at all is a [`ReadError`]. Interim (1xx) responses are returned
//! like any other; callers decide whether to skip them. Nothing here depends
//! on the server under test, so no byte it sends can make this panic.

#![forbid(unsafe_code)]

#[cfg(feature = "tokio")]
pub mod async_io;
mod blocking;
pub mod corpus;
pub mod date;
mod message;
pub mod parse;
pub mod strict;

pub use blocking::{read_body, read_head, read_response};
pub use message::{is_token, parse_decimal, preview, unexpected_bytes, End, Framing, ReadError, Response};
pub use parse::{Head, MAX_BODY, MAX_HEAD};

#[cfg(test)]
mod tests;
