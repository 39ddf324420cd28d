//! The pure parser: bytes in, a [`Head`] or a [`Body`] out, no I/O.
//!
//! Both functions look at everything buffered so far and answer "complete"
//! or "need more" (`None`), so a reader calls them again after each read;
//! a head is tiny and a `Content-Length` body is only counted, so the
//! repetition costs little. What the bytes cannot say on their own, whether
//! the stream has ended, the caller passes as `end`: only then does a body
//! that is still short become a (defective) result.

use crate::message::{
    header, header_all, is_interim, parse_decimal, preview, End, Framing, ReadError, Response,
};

/// Largest response head accepted; a server sending more is broken, and the
/// cap keeps a runaway server from growing the buffer without bound.
pub const MAX_HEAD: usize = 64 * 1024;
/// Largest response body kept; every body a test expects is far smaller.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// A [`Response`] from its head, its framing and its body.
pub(crate) fn assemble(head: Head, framing: Framing, body: Body) -> Response {
    let mut defects = head.defects;
    defects.extend(body.defects);
    Response {
        version: head.version,
        status: head.status,
        reason: head.reason,
        headers: head.headers,
        body: body.bytes,
        framing,
        defects,
        cut_short: body.cut_short,
        raw_head: head.raw,
    }
}

/// Longest chunk-size line accepted (size, extensions, CRLF).
const MAX_CHUNK_LINE: usize = 4096;

/// A response head: status line and headers.
#[derive(Clone, Debug)]
pub struct Head {
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// Names keep their case; values are trimmed of surrounding whitespace.
    pub headers: Vec<(String, String)>,
    /// Syntax problems (bare LF, malformed header lines).
    pub defects: Vec<String>,
    /// The head as received, status line through the empty line.
    pub raw: Vec<u8>,
}

impl Head {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// Every header named `name`, in order.
    pub fn header_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        header_all(&self.headers, name)
    }

    /// 1xx other than 101: a final response follows.
    pub fn is_interim(&self) -> bool {
        is_interim(self.status)
    }

    /// How the body is delimited, and any framing defects (RFC 9112 §6.3):
    /// none for `HEAD`, 1xx, 204 and 304; chunked when `Transfer-Encoding`
    /// ends in it; else `Content-Length`; else until the server closes.
    pub fn framing(&self, head_request: bool) -> (Framing, Vec<String>) {
        let mut defects = Vec::new();
        let status = self.status;
        if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
            return (Framing::None, defects);
        }
        let te: Vec<String> = self
            .header_all("transfer-encoding")
            .flat_map(|v| v.split(','))
            .map(|c| c.trim().to_ascii_lowercase())
            .collect();
        let lengths: Vec<&str> = self.header_all("content-length").collect();
        if !te.is_empty() {
            if !lengths.is_empty() {
                defects.push("both Transfer-Encoding and Content-Length".to_string());
            }
            if te.last().map(String::as_str) == Some("chunked") {
                return (Framing::Chunked, defects);
            }
            defects.push(format!("Transfer-Encoding {te:?} does not end in chunked"));
            return (Framing::UntilClose, defects);
        }
        let mut declared = None;
        for v in &lengths {
            match parse_decimal(v.trim()) {
                Some(n) if declared.is_none() || declared == Some(n) => declared = Some(n),
                Some(_) => {
                    defects.push(format!("conflicting Content-Length values {lengths:?}"));
                    declared = None;
                    break;
                }
                None => {
                    defects.push(format!("invalid Content-Length {v:?}"));
                    declared = None;
                    break;
                }
            }
        }
        if lengths.len() > 1 && declared.is_some() {
            defects.push(format!("Content-Length sent {} times", lengths.len()));
        }
        match declared {
            Some(n) if n > MAX_BODY => {
                defects.push(format!("Content-Length {n} larger than this client reads"));
                (Framing::None, defects)
            }
            Some(n) => (Framing::ContentLength(n), defects),
            None => {
                if lengths.is_empty() {
                    defects.push("no Content-Length and not chunked".to_string());
                }
                (Framing::UntilClose, defects)
            }
        }
    }

    /// The head as text, for messages.
    pub fn raw_text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }
}

/// A body taken from the buffer.
#[derive(Clone, Debug, Default)]
pub struct Body {
    pub bytes: Vec<u8>,
    /// Buffered bytes it took (framing included).
    pub len: usize,
    pub defects: Vec<String>,
    /// The stream ended before the framing said the body was complete.
    pub cut_short: Option<End>,
}

impl Body {
    pub(crate) fn with_defects_first(mut self, mut first: Vec<String>) -> Body {
        first.append(&mut self.defects);
        self.defects = first;
        self
    }
}

/// One line: its bytes without the terminator, whether it ended in a bare
/// LF, and where the next line starts.
type Line<'a> = (&'a [u8], bool, usize);

/// The line starting at `from`. `Ok(None)`: no line end buffered yet.
fn line_at(buf: &[u8], from: usize, limit: usize) -> Result<Option<Line<'_>>, String> {
    let rest = &buf[from..];
    match rest.iter().position(|&b| b == b'\n') {
        Some(end) => {
            let bare = end == 0 || rest[end - 1] != b'\r';
            let line = if bare { &rest[..end] } else { &rest[..end - 1] };
            Ok(Some((line, bare, from + end + 1)))
        }
        None if rest.len() > limit => Err(format!("line longer than {limit} bytes")),
        None => Ok(None),
    }
}

/// Parses a response head from the start of `buf`. `Ok(None)`: the head is
/// not complete yet; `Err`: these bytes are not a response head.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut defects = Vec::new();
    let Some((line, bare, mut at)) = line_at(buf, 0, MAX_HEAD)? else { return Ok(None) };
    if bare {
        defects.push("status line ends in a bare LF, not CRLF".to_string());
    }
    let (version, status, reason) = parse_status_line(line)?;
    let mut headers = Vec::new();
    let mut head_len = line.len();
    loop {
        let Some((line, bare, next)) = line_at(buf, at, MAX_HEAD)? else { return Ok(None) };
        at = next;
        head_len += line.len() + 2;
        if head_len > MAX_HEAD {
            return Err(format!("response head longer than {MAX_HEAD} bytes"));
        }
        if bare {
            defects.push(format!("header line {} ends in a bare LF", preview(line)));
        }
        if line.is_empty() {
            break;
        }
        let text = String::from_utf8_lossy(line);
        match text.split_once(':') {
            Some((name, value)) => {
                if name.is_empty() || name.ends_with([' ', '\t']) || name.contains(' ') {
                    defects.push(format!("malformed header name in {text:?}"));
                }
                headers.push((name.trim().to_string(), value.trim().to_string()));
            }
            None => defects.push(format!("header line without a colon: {text:?}")),
        }
    }
    Ok(Some(Head { version, status, reason, headers, defects, raw: buf[..at].to_vec() }))
}

/// [`parse_head`], removing the head from `buf` when complete.
pub(crate) fn take_head(buf: &mut Vec<u8>) -> Result<Option<Head>, ReadError> {
    let head = parse_head(buf).map_err(ReadError::Malformed)?;
    if let Some(head) = &head {
        buf.drain(..head.raw.len());
    }
    Ok(head)
}

fn parse_status_line(line: &[u8]) -> Result<(String, u16, String), String> {
    let text =
        std::str::from_utf8(line).map_err(|_| format!("status line is not UTF-8: {}", preview(line)))?;
    let bad = || format!("malformed status line {text:?}");
    let (version, rest) = text.split_once(' ').ok_or_else(bad)?;
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(bad());
    }
    let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let status: u16 = code.parse().map_err(|_| bad())?;
    if !(100..=599).contains(&status) {
        return Err(bad());
    }
    Ok((version.to_string(), status, reason.to_string()))
}

/// Takes a body framed as `framing` from the start of `buf`. `None`: more
/// bytes are needed and `end` is `None`. With `end` given, always `Some`:
/// whatever arrived, with a defect saying how it fell short.
pub fn parse_body(buf: &[u8], framing: Framing, end: Option<&End>) -> Option<Body> {
    match framing {
        Framing::None => Some(Body::default()),
        Framing::ContentLength(n) if buf.len() >= n => {
            Some(Body { bytes: buf[..n].to_vec(), len: n, ..Body::default() })
        }
        Framing::ContentLength(n) => {
            let end = end?;
            Some(Body {
                bytes: buf.to_vec(),
                len: buf.len(),
                defects: vec![format!(
                    "body shorter than Content-Length {n}: {} bytes, then {}",
                    buf.len(),
                    end.describe()
                )],
                cut_short: Some(end.clone()),
            })
        }
        Framing::UntilClose => {
            let mut body = Body { bytes: buf.to_vec(), len: buf.len(), ..Body::default() };
            if buf.len() > MAX_BODY {
                body.defects.push("unbounded body".to_string());
                return Some(body);
            }
            let end = end?;
            if end.timed_out() {
                body.defects.push("unframed body and the connection stayed open".to_string());
            }
            if *end != End::Closed {
                body.cut_short = Some(end.clone());
            }
            Some(body)
        }
        Framing::Chunked => parse_chunked(buf, end),
    }
}

/// [`parse_body`], removing the body from `buf` when complete.
pub(crate) fn take_body(buf: &mut Vec<u8>, framing: Framing, end: Option<&End>) -> Option<Body> {
    let body = parse_body(buf, framing, end)?;
    buf.drain(..body.len);
    Some(body)
}

/// Stops a chunked body with a defect; the bytes up to `at` are consumed.
fn fail(mut body: Body, at: usize, why: String, cut: Option<&End>) -> Option<Body> {
    body.defects.push(why);
    body.len = at;
    body.cut_short = cut.cloned();
    Some(body)
}

/// A chunked body: size lines (extensions ignored), data, CRLF, ..., a zero
/// size, then a trailer section ended by an empty line.
fn parse_chunked(buf: &[u8], end: Option<&End>) -> Option<Body> {
    let mut body = Body::default();
    let mut at = 0;
    loop {
        let (line, bare, next) = match line_at(buf, at, MAX_CHUNK_LINE) {
            Ok(Some(l)) => l,
            Ok(None) => {
                let end = end?;
                let why = match (end, at == buf.len()) {
                    (End::Closed, true) => "connection closed before the last chunk".to_string(),
                    (_, true) => format!("bad chunk: {} before the last chunk", end.describe()),
                    (_, false) => format!(
                        "bad chunk: {} inside a chunk size line: {}",
                        end.describe(),
                        preview(&buf[at..])
                    ),
                };
                return fail(body, buf.len(), why, Some(end));
            }
            Err(e) => return fail(body, at, format!("bad chunk: {e}"), None),
        };
        if bare {
            body.defects.push("chunk size line ends in a bare LF".to_string());
        }
        let text = String::from_utf8_lossy(line);
        // Chunk extensions (`;name=value`) are legal and ignored.
        let size_text = text.split(';').next().unwrap_or("").trim();
        let size = match usize::from_str_radix(size_text, 16) {
            Ok(n) if !size_text.is_empty() && !size_text.starts_with('+') => n,
            _ => return fail(body, next, format!("bad chunk size line {text:?}"), None),
        };
        at = next;
        if size == 0 {
            // Trailer section, ended by an empty line.
            loop {
                match line_at(buf, at, MAX_HEAD) {
                    Ok(Some((l, _, next))) => {
                        at = next;
                        if l.is_empty() {
                            body.len = at;
                            return Some(body);
                        }
                    }
                    Ok(None) if end.is_none() => return None,
                    _ => {
                        let why = "connection ended inside the chunked trailer".to_string();
                        return fail(body, buf.len(), why, end);
                    }
                }
            }
        }
        if body.bytes.len() + size > MAX_BODY {
            return fail(body, at, "chunked body too large".to_string(), None);
        }
        let available = buf.len() - at;
        if available < size {
            let end = end?;
            body.bytes.extend_from_slice(&buf[at..]);
            let why = format!("chunk of {size} bytes cut short: {}", end.describe());
            return fail(body, buf.len(), why, Some(end));
        }
        body.bytes.extend_from_slice(&buf[at..at + size]);
        at += size;
        match buf.get(at..at + 2) {
            Some(b"\r\n") => at += 2,
            Some(other) => {
                let why = format!("chunk data not followed by CRLF: {}", preview(other));
                return fail(body, at + 2, why, None);
            }
            None => {
                let end = end?;
                let why = format!("chunk data not followed by CRLF: {}", preview(&buf[at..]));
                return fail(body, buf.len(), why, Some(end));
            }
        }
    }
}
