//! Request-head parsing: bytes in the connection's read buffer to a borrowed
//! [`Head`], with the framing and connection decisions HTTP/1.1 requires.
//!
//! `httparse` does the tokenizing (it uses SIMD to find delimiters and
//! validates tokens); this module adds what it leaves to the caller: the
//! head-size and header-count limits, message framing (`Content-Length`
//! versus `Transfer-Encoding`, the request-smuggling rules of RFC 9112 §6.3),
//! keep-alive, `Host` and `Expect`.

use std::mem::MaybeUninit;

use crate::http::StatusCode;

/// Request method. `Other` keeps the token in [`Head::method_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Patch,
    Options,
    Trace,
    Connect,
    /// Any other (syntactically valid) method token.
    Other,
}

impl Method {
    fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "CONNECT" => Method::Connect,
            _ => Method::Other,
        }
    }

    /// The method's name as sent on the wire (`"OTHER"` for [`Method::Other`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Options => "OPTIONS",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Other => "OTHER",
        }
    }
}

/// HTTP version of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// How the request body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (no `Content-Length`, no `Transfer-Encoding`, or a length of 0).
    None,
    /// `Content-Length: n`, n > 0.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Limits applied while parsing a head.
#[derive(Clone, Copy, Debug)]
pub struct HeadLimits {
    /// Largest request line plus header section, in bytes.
    pub max_head_bytes: usize,
    /// Largest number of header fields.
    pub max_headers: usize,
}

/// Upper bound for [`HeadLimits::max_headers`]: the size of the on-stack
/// header array the parser fills.
pub const MAX_HEADERS_CAP: usize = 256;

/// A parsed request head borrowing the read buffer.
#[derive(Debug)]
pub struct Head<'b, 'h> {
    pub method: Method,
    pub method_str: &'b str,
    /// The path, without the query (`*` for asterisk-form).
    pub path: &'b str,
    /// The query, without the `?`.
    pub query: Option<&'b str>,
    pub version: Version,
    pub headers: &'h [httparse::Header<'b>],
    /// Length of the head in bytes, including the final blank line.
    pub len: usize,
    pub framing: Framing,
    /// Whether the connection may stay open after this request.
    pub keep_alive: bool,
    /// The client sent `Expect: 100-continue`.
    pub expect_continue: bool,
}

/// Why a head was refused. Each maps to a status and a short reason; the
/// connection is always closed afterwards, since the framing of what follows
/// can no longer be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Syntax or semantics error: `400 Bad Request`.
    BadRequest(&'static str),
    /// Head over the size limit, or too many headers: `431`.
    HeadTooLarge,
    /// A `Content-Length` beyond any representable size: `413`.
    BodyTooLarge,
    /// A transfer coding other than `chunked`: `501`.
    UnsupportedTransferCoding,
    /// `Expect` with something other than `100-continue`: `417`.
    UnsupportedExpectation,
    /// A well-formed version other than HTTP/1.x: `505`.
    VersionNotSupported,
}

impl ParseError {
    /// The status this error is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            ParseError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ParseError::HeadTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ParseError::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ParseError::UnsupportedTransferCoding => StatusCode::NOT_IMPLEMENTED,
            ParseError::UnsupportedExpectation => StatusCode::EXPECTATION_FAILED,
            ParseError::VersionNotSupported => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
        }
    }

    /// A short human-readable reason, sent as the error body.
    pub fn reason(self) -> &'static str {
        match self {
            ParseError::BadRequest(why) => why,
            ParseError::HeadTooLarge => "request header section too large",
            ParseError::BodyTooLarge => "request body too large",
            ParseError::UnsupportedTransferCoding => "unsupported transfer coding",
            ParseError::UnsupportedExpectation => "unsupported expectation",
            ParseError::VersionNotSupported => "HTTP version not supported",
        }
    }
}

/// Uninitialised storage for parsed headers; lives on the caller's stack so
/// parsing never allocates and never pays to zero 256 slots.
pub type HeaderSlots<'b> = [MaybeUninit<httparse::Header<'b>>; MAX_HEADERS_CAP];

/// A fresh array of header slots.
#[inline]
pub fn header_slots<'b>() -> HeaderSlots<'b> {
    [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP]
}

/// Parses one request head from the start of `buf`.
///
/// `Ok(None)` means the head is not complete yet (and still within limits).
pub fn parse_head<'b, 'h>(
    buf: &'b [u8],
    slots: &'h mut [MaybeUninit<httparse::Header<'b>>],
    limits: &HeadLimits,
) -> Result<Option<Head<'b, 'h>>, ParseError> {
    let max_headers = limits.max_headers.min(slots.len());
    let mut req = httparse::Request::new(&mut []);
    let status = req.parse_with_uninit_headers(buf, &mut slots[..max_headers]);
    let len = match status {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > limits.max_head_bytes { Err(ParseError::HeadTooLarge) } else { Ok(None) };
        }
        Err(httparse::Error::TooManyHeaders) => return Err(ParseError::HeadTooLarge),
        Err(httparse::Error::Version) => return Err(version_error(buf)),
        Err(httparse::Error::HeaderName) => return Err(ParseError::BadRequest("invalid header name")),
        Err(httparse::Error::HeaderValue) => return Err(ParseError::BadRequest("invalid header value")),
        Err(httparse::Error::NewLine) => return Err(ParseError::BadRequest("invalid line ending")),
        Err(httparse::Error::Token) => return Err(ParseError::BadRequest("invalid method")),
        Err(_) => return Err(ParseError::BadRequest("malformed request line")),
    };
    if len > limits.max_head_bytes {
        return Err(ParseError::HeadTooLarge);
    }
    // httparse fills all three on `Complete`; a missing one would be a bug
    // there, answered as a bad request rather than a panic.
    let (Some(method_str), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(ParseError::BadRequest("malformed request line"));
    };
    let version = if minor == 1 { Version::Http11 } else { Version::Http10 };
    let method = Method::from_token(method_str);
    let (path, query) = split_target(target, method)?;
    let headers: &'h [httparse::Header<'b>] = req.headers;
    let semantics = header_semantics(headers, version)?;
    Ok(Some(Head {
        method,
        method_str,
        path,
        query,
        version,
        headers,
        len,
        framing: semantics.framing,
        keep_alive: semantics.keep_alive,
        expect_continue: semantics.expect_continue,
    }))
}

/// Tells a well-formed but unsupported version (`HTTP/2.0`) from garbage.
fn version_error(buf: &[u8]) -> ParseError {
    let line_end = memchr::memchr(b'\n', buf).unwrap_or(buf.len());
    let line = &buf[..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match line.rsplit(|&b| b == b' ').next() {
        Some([b'H', b'T', b'T', b'P', b'/', major, b'.', minor])
            if major.is_ascii_digit() && minor.is_ascii_digit() && *major != b'1' =>
        {
            ParseError::VersionNotSupported
        }
        _ => ParseError::BadRequest("malformed request line"),
    }
}

/// Splits a request target into path and query, accepting origin-form,
/// absolute-form (RFC 9112 §3.2.2 says servers must) and `*` for `OPTIONS`.
fn split_target(target: &str, method: Method) -> Result<(&str, Option<&str>), ParseError> {
    let origin = if target.starts_with('/') {
        target
    } else if target == "*" && method == Method::Options {
        return Ok(("*", None));
    } else if let Some(rest) = strip_scheme(target) {
        // Skip the authority; an absolute URI with an empty path means "/".
        match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
            Some(i) => return Ok(("/", Some(&rest[i + 1..]))),
            None => "/",
        }
    } else {
        return Err(ParseError::BadRequest("invalid request target"));
    };
    match memchr::memchr(b'?', origin.as_bytes()) {
        Some(i) => Ok((&origin[..i], Some(&origin[i + 1..]))),
        None => Ok((origin, None)),
    }
}

fn strip_scheme(target: &str) -> Option<&str> {
    let bytes = target.as_bytes();
    for scheme in ["http://", "https://"] {
        if bytes.len() > scheme.len() && bytes[..scheme.len()].eq_ignore_ascii_case(scheme.as_bytes()) {
            return Some(&target[scheme.len()..]);
        }
    }
    None
}

struct Semantics {
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
}

/// One pass over the headers for everything the server itself must act on.
fn header_semantics(headers: &[httparse::Header<'_>], version: Version) -> Result<Semantics, ParseError> {
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut hosts = 0u32;
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    let mut expect_continue = false;

    for h in headers {
        let name = h.name.as_bytes();
        // Dispatch on length first: most headers match none of these and
        // are rejected by one comparison.
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => hosts += 1,
            6 if name.eq_ignore_ascii_case(b"expect") => {
                if trim(h.value).eq_ignore_ascii_case(b"100-continue") {
                    expect_continue = true;
                } else {
                    return Err(ParseError::UnsupportedExpectation);
                }
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in h.value.split(|&b| b == b',').map(trim) {
                    if token.eq_ignore_ascii_case(b"close") {
                        conn_close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        conn_keep_alive = true;
                    }
                }
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                for item in h.value.split(|&b| b == b',').map(trim) {
                    let n = parse_content_length(item)?;
                    match content_length {
                        Some(prev) if prev != n => {
                            return Err(ParseError::BadRequest("conflicting Content-Length values"))
                        }
                        _ => content_length = Some(n),
                    }
                }
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                transfer_encoding = true;
                for coding in h.value.split(|&b| b == b',').map(trim) {
                    if coding.is_empty() {
                        continue;
                    }
                    if chunked {
                        // Anything after `chunked` (even a second `chunked`)
                        // makes the body length undeterminable.
                        return Err(ParseError::BadRequest("chunked must be the final transfer coding"));
                    }
                    if coding.eq_ignore_ascii_case(b"chunked") {
                        chunked = true;
                    } else {
                        return Err(ParseError::UnsupportedTransferCoding);
                    }
                }
            }
            _ => {}
        }
    }

    if version == Version::Http11 && hosts != 1 {
        return Err(ParseError::BadRequest(if hosts == 0 {
            "missing Host header"
        } else {
            "more than one Host header"
        }));
    }
    let framing = if transfer_encoding {
        if content_length.is_some() {
            return Err(ParseError::BadRequest("both Content-Length and Transfer-Encoding"));
        }
        if version == Version::Http10 {
            return Err(ParseError::BadRequest("Transfer-Encoding in an HTTP/1.0 request"));
        }
        if !chunked {
            return Err(ParseError::BadRequest("Transfer-Encoding without chunked"));
        }
        Framing::Chunked
    } else {
        match content_length {
            None | Some(0) => Framing::None,
            Some(n) => Framing::Length(n),
        }
    };
    let keep_alive = match version {
        Version::Http11 => !conn_close,
        Version::Http10 => conn_keep_alive && !conn_close,
    };
    Ok(Semantics { framing, keep_alive, expect_continue: expect_continue && version == Version::Http11 })
}

/// `1*DIGIT`, nothing else (no sign, no spaces inside). A value too large
/// for u64 is syntactically fine but larger than any limit.
fn parse_content_length(value: &[u8]) -> Result<u64, ParseError> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadRequest("invalid Content-Length"));
    }
    let mut n: u64 = 0;
    for &d in value {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(ParseError::BodyTooLarge)?;
    }
    Ok(n)
}

/// Trims optional whitespace (SP and HTAB) from both ends.
pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 16 * 1024, max_headers: 100 };

    type Parsed = (Method, String, Option<String>, Framing, bool, usize);

    fn parse(buf: &[u8]) -> Result<Option<Parsed>, ParseError> {
        let mut slots = header_slots();
        parse_head(buf, &mut slots, &LIMITS).map(|h| {
            h.map(|h| {
                (h.method, h.path.to_owned(), h.query.map(str::to_owned), h.framing, h.keep_alive, h.len)
            })
        })
    }

    #[test]
    fn simple_get() {
        let req = b"GET /plaintext?x=1 HTTP/1.1\r\nHost: a\r\n\r\nGET";
        let (m, path, q, framing, ka, len) = parse(req).unwrap().unwrap();
        assert_eq!(m, Method::Get);
        assert_eq!(path, "/plaintext");
        assert_eq!(q.as_deref(), Some("x=1"));
        assert_eq!(framing, Framing::None);
        assert!(ka);
        assert_eq!(len, req.len() - 3);
    }

    #[test]
    fn partial_heads_wait_for_more() {
        let req = b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\n";
        for cut in 0..req.len() {
            assert_eq!(parse(&req[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn http10_closes_unless_keep_alive() {
        let (.., ka, _) = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!ka);
        let (.., ka, _) = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().unwrap();
        assert!(ka);
        let (.., ka, _) = parse(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").unwrap().unwrap();
        assert!(!ka);
    }

    #[test]
    fn framing_rules() {
        let ok = |r: &[u8]| parse(r).unwrap().unwrap().3;
        assert_eq!(ok(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"), Framing::Length(5));
        assert_eq!(ok(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n"), Framing::Length(5));
        assert_eq!(ok(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"), Framing::Chunked);
        let err = |r: &[u8]| parse(r).unwrap_err().status().as_u16();
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), 400);
        assert_eq!(
            err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), 400);
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"), 400);
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n"), 400);
        assert_eq!(
            err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
            413
        );
    }

    #[test]
    fn malformed_heads() {
        let err = |r: &[u8]| parse(r).unwrap_err().status().as_u16();
        assert_eq!(err(b"GARBAGE\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1 extra\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1\r\nHost a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1\r\nHost : a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1\r\n\r\n"), 400, "missing Host");
        assert_eq!(err(b"GET x HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
        assert_eq!(err(b"GET /x HTTP/x.y\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n"), 417);
    }

    #[test]
    fn absolute_form() {
        let (_, path, q, ..) =
            parse(b"GET http://example.com/a/b?c HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert_eq!((path.as_str(), q.as_deref()), ("/a/b", Some("c")));
        let (_, path, ..) = parse(b"GET http://example.com HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert_eq!(path, "/");
    }

    #[test]
    fn head_size_limit() {
        let mut req = b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: ".to_vec();
        req.extend(std::iter::repeat_n(b'a', 17 * 1024));
        assert_eq!(parse(&req), Err(ParseError::HeadTooLarge));
        req.extend_from_slice(b"\r\n\r\n");
        assert_eq!(parse(&req), Err(ParseError::HeadTooLarge));
    }

    #[test]
    fn header_count_limit() {
        let mut req = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        for i in 0..101 {
            req.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        req.extend_from_slice(b"\r\n");
        assert_eq!(parse(&req), Err(ParseError::HeadTooLarge));
    }
}
