//! A tiny blocking HTTP/1.1 client over raw TCP sockets, shared by the
//! verifier (every request it sends) and stress scenarios (a probe while a
//! server is under load).
//!
//! This module owns the conversation with a server: it sends exactly the
//! bytes a check hands it (so malformed input reaches the server unaltered,
//! which no ordinary HTTP client allows), reads responses with
//! [`http_probe`] (forgiving: a framing defect is recorded in
//! [`Response::defects`] so a check can name it; only a response that
//! cannot be delimited at all is an `Err`), and watches how a connection
//! ends. Interim (1xx) responses are skipped here, as a client would.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

pub use http_probe::{Framing, Response};

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
        Ok(Conn { stream, buf: Vec::new(), timeout: self.timeout })
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
    stream: TcpStream,
    /// Bytes received but not yet consumed by a response.
    buf: Vec<u8>,
    timeout: Duration,
}

impl Conn {
    /// Writes all of `bytes`. A write error is returned, but callers testing
    /// bad input may ignore it: a server may answer and close before reading
    /// everything, and its answer can still be read.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream.write_all(bytes).map_err(|e| format!("write failed: {e}"))
    }

    /// Reads the next final response, skipping interim (1xx) ones (`head`:
    /// it answers a `HEAD`, so no body).
    pub fn read_response(&mut self, head: bool) -> Result<Response, String> {
        loop {
            let resp = http_probe::read_response(&mut self.stream, &mut self.buf, head)
                .map_err(|e| e.to_string())?;
            if !resp.is_interim() {
                return Ok(resp);
            }
        }
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
        let extra = self.buffered();
        if extra > 0 {
            resp.defects.push(http_probe::unexpected_bytes(extra));
        }
        Ok(resp)
    }

    /// Bytes received but not yet consumed by a response.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Waits up to `within` to see whether the server closes the connection.
    pub fn wait_closed(&mut self, within: Duration) -> CloseState {
        let buffered = self.buffered();
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
            if self.stream.set_read_timeout(Some(left)).is_err() {
                return CloseState::Closed;
            }
            let r = self.stream.read(&mut scratch);
            // Restore the normal timeout for any later reads.
            let _ = self.stream.set_read_timeout(Some(self.timeout));
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
        &mut self.stream
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;

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
