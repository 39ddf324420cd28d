//! A tiny blocking HTTP/1.1 client over raw TCP sockets, shared by the
//! verifier (every request it sends) and stress scenarios (a probe while a
//! server is under load).
//!
//! This module owns the byte-level view of the conversation with a server:
//! it sends exactly the bytes a check hands it (so malformed input reaches
//! the server unaltered, which no ordinary HTTP client allows) and parses
//! responses, including chunked and `Content-Length` framing. Parsing is
//! deliberately forgiving: a framing defect (bare LF, short body, duplicate
//! `Content-Length`, bytes after the body...) is recorded in
//! [`Response::defects`] instead of aborting, so a check can name the defect
//! rather than report an opaque parse error. Only a response that cannot be
//! delimited at all (no status line) is an `Err`.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Largest response head we accept; a server sending more is broken, and the
/// cap keeps a runaway server from growing our buffer without bound.
const MAX_HEAD: usize = 64 * 1024;
/// Largest response body we keep; every body a check expects is far smaller.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Where the server under test listens, and how long to wait for it.
#[derive(Clone, Debug)]
pub struct Target {
    pub addr: SocketAddr,
    /// Value of the `Host` header we send.
    pub host: String,
    /// Path prefix from the URL (empty for a server at the root).
    pub prefix: String,
    /// Read/write timeout of every socket operation.
    pub timeout: Duration,
}

impl Target {
    /// Parses `http://host:port[/prefix]` (the scheme may be omitted) and
    /// resolves the host once, so every check talks to the same address.
    pub fn parse(url: &str, timeout: Duration) -> Result<Target, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some((scheme, _)) => return Err(format!("unsupported scheme {scheme:?}: only http")),
            None => url,
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(format!("no host in {url:?}"));
        }
        // A bare host means port 80, as in any URL.
        let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {authority:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("{authority:?} resolves to no address"))?;
        Ok(Target { addr, host: authority.to_string(), prefix: prefix.to_string(), timeout })
    }

    /// Opens a fresh connection with the configured timeouts and `TCP_NODELAY`
    /// (so a pipelined batch leaves in one segment train, not held back).
    pub fn connect(&self) -> Result<Conn, String> {
        let stream = TcpStream::connect_timeout(&self.addr, self.timeout)
            .map_err(|e| format!("cannot connect to {}: {e}", self.addr))?;
        stream.set_nodelay(true).map_err(|e| format!("set_nodelay: {e}"))?;
        stream
            .set_read_timeout(Some(self.timeout))
            .and_then(|()| stream.set_write_timeout(Some(self.timeout)))
            .map_err(|e| format!("set timeouts: {e}"))?;
        Ok(Conn { reader: ResponseReader::new(stream), timeout: self.timeout })
    }

    /// A plain `GET` for `path` (prefix added) with only a `Host` header.
    pub fn get_request(&self, path: &str) -> Vec<u8> {
        self.request("GET", path, &[], b"")
    }

    /// Builds a request with `Host`, the given extra headers and a body; the
    /// caller supplies any framing header (`Content-Length` or chunked), so
    /// checks can build deliberately inconsistent requests too.
    pub fn request(&self, method: &str, path: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
        let mut out = format!("{method} {}{path} HTTP/1.1\r\nHost: {}\r\n", self.prefix, self.host);
        for h in headers {
            out.push_str(h);
            out.push_str("\r\n");
        }
        out.push_str("\r\n");
        let mut out = out.into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// One `GET` on a new connection.
    pub fn get(&self, path: &str) -> Result<Response, String> {
        let mut conn = self.connect()?;
        conn.exchange(&self.get_request(path))
    }
}

/// What a connection looked like after a response.
#[derive(Debug, PartialEq, Eq)]
pub enum CloseState {
    /// Orderly close (FIN) or reset: the server is done with it.
    Closed,
    /// Still open when the wait ended.
    Open,
    /// The server sent bytes nobody asked for.
    Data(usize),
}

/// One client connection.
pub struct Conn {
    reader: ResponseReader<TcpStream>,
    timeout: Duration,
}

impl Conn {
    /// Writes all of `bytes`. A write error is returned, but callers testing
    /// bad input may ignore it: a server may answer and close before reading
    /// everything, and its answer can still be read.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.reader.src.write_all(bytes).map_err(|e| format!("write failed: {e}"))
    }

    /// Reads the next response (`head`: it answers a `HEAD`, so no body).
    pub fn read_response(&mut self, head: bool) -> Result<Response, String> {
        self.reader.read_response(head)
    }

    /// Sends one request, reads one response, and records any bytes already
    /// received beyond it as a defect: nothing else was asked for, so they
    /// can only be a body longer than its `Content-Length` or a stray reply.
    ///
    /// A failed write does not end the exchange: a server may answer (413,
    /// 431...) and close before reading everything, and that answer is what
    /// the check wants to see. The write error is reported only if no
    /// response can be read either.
    pub fn exchange(&mut self, request: &[u8]) -> Result<Response, String> {
        let written = self.send(request);
        let mut resp = match (self.read_response(false), written) {
            (Ok(resp), _) => resp,
            (Err(e), Ok(())) => return Err(e),
            (Err(e), Err(w)) => return Err(format!("{w}, then {e}")),
        };
        let extra = self.reader.buffered();
        if extra > 0 {
            resp.defects.push(format!(
                "{extra} unexpected bytes after the response (body longer than Content-Length?)"
            ));
        }
        Ok(resp)
    }

    /// Bytes received but not yet consumed by a response.
    pub fn buffered(&self) -> usize {
        self.reader.buffered()
    }

    /// Waits up to `within` to see whether the server closes the connection.
    pub fn wait_closed(&mut self, within: Duration) -> CloseState {
        let buffered = self.reader.buffered();
        if buffered > 0 {
            return CloseState::Data(buffered);
        }
        let deadline = Instant::now() + within;
        let mut scratch = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return CloseState::Open;
            }
            if self.reader.src.set_read_timeout(Some(left)).is_err() {
                return CloseState::Closed;
            }
            let r = self.reader.src.read(&mut scratch);
            // Restore the normal timeout for any later reads.
            let _ = self.reader.src.set_read_timeout(Some(self.timeout));
            return match r {
                Ok(0) => CloseState::Closed,
                Ok(n) => CloseState::Data(n),
                Err(e) if is_timeout(&e) => CloseState::Open,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => CloseState::Closed,
            };
        }
    }

    /// The raw stream, for checks that pace their own writes.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.reader.src
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

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
}

impl Response {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every header named `name`, in order.
    pub fn header_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The declared `Content-Length`, if present and a plain decimal number.
    pub fn content_length(&self) -> Option<usize> {
        self.header("content-length").and_then(|v| parse_decimal(v.trim()))
    }

    /// The body as text, for error messages (lossy, shortened).
    pub fn body_preview(&self) -> String {
        preview(&self.body)
    }

    /// Parses one complete response from bytes (used by unit tests to feed
    /// checks hand-made server output).
    #[cfg(test)]
    pub fn parse(bytes: &[u8]) -> Result<Response, String> {
        let mut reader = ResponseReader::new(bytes);
        let mut resp = reader.read_response(false)?;
        if reader.buffered() > 0 {
            resp.defects.push(format!(
                "{} unexpected bytes after the response (body longer than Content-Length?)",
                reader.buffered()
            ));
        }
        Ok(resp)
    }
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

/// Buffered response parser over any byte source.
pub struct ResponseReader<R> {
    src: R,
    buf: Vec<u8>,
    /// Start of unconsumed bytes in `buf`.
    pos: usize,
}

impl<R: Read> ResponseReader<R> {
    pub fn new(src: R) -> Self {
        ResponseReader { src, buf: Vec::with_capacity(16 * 1024), pos: 0 }
    }

    fn buffered(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Reads more bytes; `Ok(0)` means end of stream.
    fn fill(&mut self) -> io::Result<usize> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.src.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// One line without its terminator, and whether it ended in a bare LF.
    /// `Ok(None)`: end of stream before any byte of the line.
    fn read_line(&mut self, limit: usize) -> Result<Option<(Vec<u8>, bool)>, String> {
        let mut scanned = 0;
        loop {
            let avail = &self.buf[self.pos..];
            if let Some(i) = avail[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + i;
                let bare = end == 0 || avail[end - 1] != b'\r';
                let line_end = if bare { end } else { end - 1 };
                let line = avail[..line_end].to_vec();
                self.pos += end + 1;
                return Ok(Some((line, bare)));
            }
            scanned = avail.len();
            if scanned > limit {
                return Err(format!("line longer than {limit} bytes"));
            }
            match self.fill() {
                Ok(0) if scanned == 0 => return Ok(None),
                Ok(0) => {
                    let partial = preview(&self.buf[self.pos..]);
                    return Err(format!("connection closed mid-line: {partial}"));
                }
                Ok(_) => {}
                Err(e) => return Err(io_context(&e, "while reading the response head")),
            }
        }
    }

    /// Reads exactly `n` bytes, or fewer if the stream ends or stalls; the
    /// shortfall is reported by the caller as a defect.
    fn read_upto(&mut self, n: usize) -> (Vec<u8>, Option<String>) {
        while self.buffered() < n {
            match self.fill() {
                Ok(0) => {
                    let got = self.take(self.buffered());
                    return (got, Some("connection closed".into()));
                }
                Ok(_) => {}
                Err(e) => {
                    let got = self.take(self.buffered());
                    return (got, Some(io_context(&e, "")));
                }
            }
        }
        (self.take(n), None)
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        out
    }

    /// Reads one response, skipping interim (1xx) ones.
    pub fn read_response(&mut self, head: bool) -> Result<Response, String> {
        loop {
            let resp = self.read_one(head)?;
            if (100..200).contains(&resp.status) && resp.status != 101 {
                continue;
            }
            return Ok(resp);
        }
    }

    fn read_one(&mut self, head: bool) -> Result<Response, String> {
        let mut defects = Vec::new();
        let (line, bare) =
            self.read_line(MAX_HEAD)?.ok_or_else(|| "connection closed without a response".to_string())?;
        if bare {
            defects.push("status line ends in a bare LF, not CRLF".to_string());
        }
        let (version, status, reason) = parse_status_line(&line)?;
        let mut headers = Vec::new();
        let mut head_len = line.len();
        loop {
            let (line, bare) = self
                .read_line(MAX_HEAD)?
                .ok_or_else(|| "connection closed inside the response head".to_string())?;
            head_len += line.len() + 2;
            if head_len > MAX_HEAD {
                return Err(format!("response head longer than {MAX_HEAD} bytes"));
            }
            if bare {
                defects.push(format!("header line {} ends in a bare LF", preview(&line)));
            }
            if line.is_empty() {
                break;
            }
            let text = String::from_utf8_lossy(&line);
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
        let mut resp =
            Response { version, status, reason, headers, body: Vec::new(), framing: Framing::None, defects };
        if head || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(resp);
        }
        self.read_body(&mut resp);
        Ok(resp)
    }

    fn read_body(&mut self, resp: &mut Response) {
        let te: Vec<String> = resp
            .header_all("transfer-encoding")
            .flat_map(|v| v.split(','))
            .map(|c| c.trim().to_ascii_lowercase())
            .collect();
        let lengths: Vec<String> = resp.header_all("content-length").map(str::to_string).collect();
        if !te.is_empty() {
            if !lengths.is_empty() {
                resp.defects.push("both Transfer-Encoding and Content-Length".to_string());
            }
            if te.last().map(String::as_str) == Some("chunked") {
                resp.framing = Framing::Chunked;
                self.read_chunked(resp);
            } else {
                resp.defects.push(format!("Transfer-Encoding {te:?} does not end in chunked"));
                self.read_until_close(resp);
            }
            return;
        }
        let mut declared = None;
        for v in &lengths {
            match parse_decimal(v.trim()) {
                Some(n) if declared.is_none() || declared == Some(n) => declared = Some(n),
                Some(_) => {
                    resp.defects.push(format!("conflicting Content-Length values {lengths:?}"));
                    declared = None;
                    break;
                }
                None => {
                    resp.defects.push(format!("invalid Content-Length {v:?}"));
                    declared = None;
                    break;
                }
            }
        }
        if lengths.len() > 1 && declared.is_some() {
            resp.defects.push(format!("Content-Length sent {} times", lengths.len()));
        }
        match declared {
            Some(n) if n > MAX_BODY => {
                resp.defects.push(format!("Content-Length {n} larger than this client reads"));
            }
            Some(n) => {
                resp.framing = Framing::ContentLength(n);
                let (body, short) = self.read_upto(n);
                if let Some(why) = short {
                    resp.defects.push(format!(
                        "body shorter than Content-Length {n}: {} bytes, then {why}",
                        body.len()
                    ));
                }
                resp.body = body;
            }
            None => {
                if lengths.is_empty() {
                    resp.defects.push("no Content-Length and not chunked".to_string());
                }
                self.read_until_close(resp);
            }
        }
    }

    fn read_until_close(&mut self, resp: &mut Response) {
        resp.framing = Framing::UntilClose;
        loop {
            if self.buffered() > MAX_BODY {
                resp.defects.push("unbounded body".to_string());
                break;
            }
            match self.fill() {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    if is_timeout(&e) {
                        resp.defects.push("unframed body and the connection stayed open".to_string());
                    }
                    break;
                }
            }
        }
        resp.body = self.take(self.buffered());
    }

    fn read_chunked(&mut self, resp: &mut Response) {
        loop {
            let (line, bare) = match self.read_line(4096) {
                Ok(Some(l)) => l,
                Ok(None) => {
                    resp.defects.push("connection closed before the last chunk".to_string());
                    return;
                }
                Err(e) => {
                    resp.defects.push(format!("bad chunk: {e}"));
                    return;
                }
            };
            if bare {
                resp.defects.push("chunk size line ends in a bare LF".to_string());
            }
            let text = String::from_utf8_lossy(&line);
            // Chunk extensions (`;name=value`) are legal and ignored.
            let size_text = text.split(';').next().unwrap_or("").trim();
            let size = match usize::from_str_radix(size_text, 16) {
                Ok(n) if !size_text.is_empty() && !size_text.starts_with('+') => n,
                _ => {
                    resp.defects.push(format!("bad chunk size line {text:?}"));
                    return;
                }
            };
            if size == 0 {
                // Trailer section, ended by an empty line.
                loop {
                    match self.read_line(MAX_HEAD) {
                        Ok(Some((l, _))) if l.is_empty() => return,
                        Ok(Some(_)) => {}
                        _ => {
                            resp.defects.push("connection ended inside the chunked trailer".to_string());
                            return;
                        }
                    }
                }
            }
            if resp.body.len() + size > MAX_BODY {
                resp.defects.push("chunked body too large".to_string());
                return;
            }
            let (data, short) = self.read_upto(size);
            resp.body.extend_from_slice(&data);
            if let Some(why) = short {
                resp.defects.push(format!("chunk of {size} bytes cut short: {why}"));
                return;
            }
            match self.read_upto(2) {
                (crlf, None) if crlf == b"\r\n" => {}
                (other, _) => {
                    resp.defects.push(format!("chunk data not followed by CRLF: {}", preview(&other)));
                    return;
                }
            }
        }
    }
}

fn io_context(e: &io::Error, what: &str) -> String {
    let sep = if what.is_empty() { "" } else { " " };
    if is_timeout(e) {
        format!("timed out{sep}{what}")
    } else {
        format!("{e}{sep}{what}")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_response() {
        let r = Response::parse(b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 13\r\n\r\nHello, World!")
            .expect("parse");
        assert_eq!(r.status, 200);
        assert_eq!(r.reason, "OK");
        assert_eq!(r.header("server"), Some("x"));
        assert_eq!(r.body, b"Hello, World!");
        assert_eq!(r.framing, Framing::ContentLength(13));
        assert!(r.defects.is_empty(), "{:?}", r.defects);
    }

    #[test]
    fn parses_chunked_with_extension_and_trailer() {
        let r = Response::parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nHello\r\n8\r\n, World!\r\n0\r\nX-T: 1\r\n\r\n",
        )
        .expect("parse");
        assert_eq!(r.body, b"Hello, World!");
        assert_eq!(r.framing, Framing::Chunked);
        assert!(r.defects.is_empty(), "{:?}", r.defects);
    }

    #[test]
    fn records_framing_defects() {
        let short = Response::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nHello").expect("parse");
        assert!(short.defects.iter().any(|d| d.contains("shorter")), "{:?}", short.defects);
        let long = Response::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nHello").expect("parse");
        assert!(long.defects.iter().any(|d| d.contains("unexpected bytes")));
        let bare = Response::parse(b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n").expect("parse");
        assert!(bare.defects.iter().any(|d| d.contains("bare LF")));
        let both = Response::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
            .expect("parse");
        assert!(both.defects.iter().any(|d| d.contains("conflicting")));
        let none = Response::parse(b"HTTP/1.1 200 OK\r\n\r\nabc").expect("parse");
        assert_eq!(none.framing, Framing::UntilClose);
        assert_eq!(none.body, b"abc");
        assert!(!none.defects.is_empty());
    }

    #[test]
    fn skips_interim_responses_and_rejects_garbage() {
        let r =
            Response::parse(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n").expect("parse");
        assert_eq!(r.status, 204);
        assert!(Response::parse(b"garbage\r\n\r\n").is_err());
        assert!(Response::parse(b"HTTP/1.1 2000 OK\r\n\r\n").is_err());
        assert!(Response::parse(b"").is_err());
    }

    #[test]
    fn parses_targets() {
        let t = Target::parse("http://127.0.0.1:8080/", Duration::from_secs(1)).expect("url");
        assert_eq!(t.addr.port(), 8080);
        assert_eq!(t.prefix, "");
        assert_eq!(t.host, "127.0.0.1:8080");
        let t = Target::parse("127.0.0.1:81/app", Duration::from_secs(1)).expect("url");
        assert_eq!(t.prefix, "/app");
        assert_eq!(t.get_request("/x"), b"GET /app/x HTTP/1.1\r\nHost: 127.0.0.1:81\r\n\r\n".to_vec());
        assert!(Target::parse("https://x", Duration::from_secs(1)).is_err());
    }
}
