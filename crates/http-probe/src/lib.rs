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
//!
//! Reading is forgiving where a checker wants to name a problem rather than
//! stop: a framing defect (bare LF, short body, duplicate `Content-Length`)
//! is recorded in [`Response::defects`]. Only a response that cannot be
//! delimited at all is a [`ReadError`]. Interim (1xx) responses are returned
//! like any other; callers decide whether to skip them. Nothing here depends
//! on the server under test, so no byte it sends can make this panic.

#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, ErrorKind, Read};

#[cfg(feature = "tokio")]
pub mod async_io;
pub mod date;
pub mod parse;
pub mod strict;

pub use parse::Head;

/// Largest response head accepted; a server sending more is broken, and the
/// cap keeps a runaway server from growing the buffer without bound.
pub const MAX_HEAD: usize = 64 * 1024;
/// Largest response body kept; every body a test expects is far smaller.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// How the body of a response was delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body by definition (HEAD, 1xx, 204, 304).
    None,
    ContentLength(usize),
    Chunked,
    /// Read until the server closed (or went quiet).
    UntilClose,
}

/// How a byte stream stopped delivering: closed, or a read failed (reset,
/// timed out). Kept as kind and text so a [`Response`] can carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Orderly end of stream (FIN).
    Closed,
    /// A read failed.
    Failed { kind: ErrorKind, message: String },
}

impl End {
    pub fn of(e: &io::Error) -> End {
        End::Failed { kind: e.kind(), message: e.to_string() }
    }

    /// The read timed out: the peer went quiet rather than away.
    pub fn timed_out(&self) -> bool {
        matches!(self, End::Failed { kind: ErrorKind::WouldBlock | ErrorKind::TimedOut, .. })
    }

    /// An `io::Error` of the same kind, for callers that return one.
    pub fn to_io_error(&self) -> io::Error {
        match self {
            End::Closed => io::Error::new(ErrorKind::UnexpectedEof, "connection closed"),
            End::Failed { kind, message } => io::Error::new(*kind, message.clone()),
        }
    }

    /// `connection closed`, `timed out`, or the error's text.
    pub fn describe(&self) -> String {
        match self {
            End::Closed => "connection closed".into(),
            _ if self.timed_out() => "timed out".into(),
            End::Failed { message, .. } => message.clone(),
        }
    }
}

/// Why no response head could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The stream ended or failed before the head was complete, after
    /// `received` bytes of it (0: before any byte of a response).
    Ended { end: End, received: usize },
    /// Bytes that are not an HTTP/1.x response head, or a head too long to
    /// be one.
    Malformed(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Ended { end: End::Closed, received: 0 } => {
                f.write_str("connection closed without a response")
            }
            ReadError::Ended { end, received: 0 } => {
                write!(f, "{} while reading the response head", end.describe())
            }
            ReadError::Ended { end, received } => {
                write!(f, "{} inside the response head, after {received} bytes", end.describe())
            }
            ReadError::Malformed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for ReadError {}

/// A parsed response. Header names keep their case; lookups ignore it.
#[derive(Clone, Debug)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub framing: Framing,
    /// Framing and syntax problems noticed while parsing; a well-formed
    /// response has none.
    pub defects: Vec<String>,
    /// `Some` when the stream ended (or went quiet) before the framing said
    /// the body was complete: `body` is what arrived.
    pub cut_short: Option<End>,
    /// The head as received, status line through the empty line.
    pub raw_head: Vec<u8>,
}

impl Response {
    fn new(head: &Head, framing: Framing, body: parse::Body) -> Response {
        let mut defects = head.defects.clone();
        defects.extend(body.defects);
        Response {
            version: head.version.clone(),
            status: head.status,
            reason: head.reason.clone(),
            headers: head.headers.clone(),
            body: body.bytes,
            framing,
            defects,
            cut_short: body.cut_short,
            raw_head: head.raw.clone(),
        }
    }

    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// Every header named `name`, in order.
    pub fn header_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        header_all(&self.headers, name)
    }

    /// The declared `Content-Length`, if present and a plain decimal number.
    pub fn content_length(&self) -> Option<usize> {
        self.header("content-length").and_then(|v| parse_decimal(v.trim()))
    }

    /// An interim response (1xx other than 101, which ends HTTP on the
    /// connection): a final one follows.
    pub fn is_interim(&self) -> bool {
        is_interim(self.status)
    }

    /// The body as text, for error messages (lossy, shortened).
    pub fn body_preview(&self) -> String {
        preview(&self.body)
    }

    /// Parses the first final response from canned bytes (interim ones
    /// skipped); bytes left after it are recorded as a defect, since nothing
    /// else was asked for. For tests that feed checks hand-made output.
    pub fn parse(bytes: &[u8]) -> Result<Response, ReadError> {
        let mut src = bytes;
        let mut buf = Vec::new();
        loop {
            let mut resp = read_response(&mut src, &mut buf, false)?;
            if resp.is_interim() {
                continue;
            }
            let extra = buf.len() + src.len();
            if extra > 0 {
                resp.defects.push(unexpected_bytes(extra));
            }
            return Ok(resp);
        }
    }
}

/// The defect for bytes received past a response nobody asked for: a body
/// longer than its `Content-Length`, or a stray reply.
pub fn unexpected_bytes(n: usize) -> String {
    format!("{n} unexpected bytes after the response (body longer than Content-Length?)")
}

pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

pub(crate) fn header_all<'a>(
    headers: &'a [(String, String)],
    name: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

pub(crate) fn is_interim(status: u16) -> bool {
    (100..200).contains(&status) && status != 101
}

/// Shortens bytes to a printable snippet for messages.
pub fn preview(bytes: &[u8]) -> String {
    const MAX: usize = 120;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX)]);
    let mut s = format!("{text:?}");
    if bytes.len() > MAX {
        s.push_str(&format!(" ... ({} bytes)", bytes.len()));
    }
    s
}

/// Strict `1*DIGIT` (no sign, no spaces), overflow-safe.
pub fn parse_decimal(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// An RFC 9110 token (what a header name must be).
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Reads one response head from `src`, buffering in `buf`, and removes it
/// from `buf` (the body, if any, is next there).
pub fn read_head<R: Read + ?Sized>(src: &mut R, buf: &mut Vec<u8>) -> Result<Head, ReadError> {
    loop {
        if let Some(head) = parse::take_head(buf)? {
            return Ok(head);
        }
        if let Some(end) = fill(src, buf) {
            return Err(ReadError::Ended { end, received: buf.len() });
        }
    }
}

/// Reads the body that follows `head` (`head_request`: it answers a `HEAD`,
/// so there is none). Never fails: a body cut short is returned as far as
/// it arrived, with a defect and [`Response::cut_short`].
pub fn read_body<R: Read + ?Sized>(
    src: &mut R,
    buf: &mut Vec<u8>,
    head: &Head,
    head_request: bool,
) -> Response {
    let (framing, defects) = head.framing(head_request);
    let mut end = None;
    loop {
        if let Some(body) = parse::take_body(buf, framing, end.as_ref()) {
            return Response::new(head, framing, body.with_defects_first(defects));
        }
        end = fill(src, buf);
    }
}

/// Reads one response, interim ones included: [`read_head`], then
/// [`read_body`].
pub fn read_response<R: Read + ?Sized>(
    src: &mut R,
    buf: &mut Vec<u8>,
    head_request: bool,
) -> Result<Response, ReadError> {
    let head = read_head(src, buf)?;
    Ok(read_body(src, buf, &head, head_request))
}

/// Reads once more into `buf`; `Some` when the stream ended or failed.
fn fill<R: Read + ?Sized>(src: &mut R, buf: &mut Vec<u8>) -> Option<End> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match src.read(&mut chunk) {
            Ok(0) => return Some(End::Closed),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return None;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Some(End::of(&e)),
        }
    }
}

#[cfg(test)]
mod tests;
