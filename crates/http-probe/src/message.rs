//! The vocabulary every part of the crate shares: a [`Response`], how its
//! body was framed, how a stream ended, why no response could be read, and
//! the small text helpers messages and checks use. No parsing, no I/O.

use std::fmt;
use std::io::{self, ErrorKind};

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
}

/// The defect for bytes received past a response nobody asked for: a body
/// longer than its `Content-Length`, or a stray reply.
pub fn unexpected_bytes(n: usize) -> String {
    format!("{n} unexpected bytes after the response (body longer than Content-Length?)")
}

pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

pub fn header_all<'a>(headers: &'a [(String, String)], name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

pub fn is_interim(status: u16) -> bool {
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
