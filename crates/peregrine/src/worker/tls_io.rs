//! A TLS session as a connection's transport, and the `Alt-Svc` line it
//! puts into the first HTTP/1.1 response head it carries.
//!
//! # Why the transport advertises HTTP/3, and only once a connection
//! A server with an HTTP/3 listener says so with `Alt-Svc` on its TLS
//! connections (RFC 7838; browsers ignore it from cleartext origins).
//! HTTP/2 puts it on every response: its encoder indexes the field, so
//! after the first it costs one byte. HTTP/1.1 would have to encode it on
//! every answer, and the HTTP/1.1 encoder and connection loop are shared
//! with cleartext, where it is never wanted: the two designs measured there
//! (a field checked in the encoder; the line spliced in after it, even in a
//! second, const-generic copy of the loop that cleartext never ran) each
//! cost cleartext 20–38 instructions a request (callgrind: plaintext ×16
//! 1,746 → 1,766–1,770; json 3,329 → 3,353–3,431), through code generation
//! around the loop rather than the check itself.
//!
//! So the TLS transport does it, and cleartext compiles nothing new. The
//! first bytes an HTTP/1.1 connection writes are always the start of a
//! response head, so the transport knows where its status line ends
//! without parsing anything else. A client caches the advertisement for its
//! `ma` (a day), so the first response on each connection is enough; every
//! later byte passes through untouched. A `100 Continue` written alone is
//! passed over (the final answer after it carries the line); any other
//! interim answer (`101` above all: WebSocket frames follow it) or anything
//! unexpected ends the attempt, and that connection advertises nothing
//! rather than risk writing into a stream it does not understand.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::response::canned::HTTP1_CONTINUE;

/// A server-side TLS session over TCP.
pub(crate) struct TlsIo {
    session: TlsStream<TcpStream>,
    advert: Advert,
}

/// Where the `Alt-Svc` line stands.
enum Advert {
    /// Nothing to add (an HTTP/2 session, no HTTP/3 listener, or already
    /// done or given up).
    Done,
    /// To go into the next write's first final response head.
    Waiting(http::HeaderValue),
    /// The head's status line with the line after it, copied out of the
    /// caller's buffer, part written: the write that made it answers
    /// `takes` bytes of the caller's buffer once all of `bytes` are in.
    Sending { bytes: Vec<u8>, sent: usize, takes: usize },
}

/// Where a first write's response head can take a field.
#[derive(Debug, PartialEq, Eq)]
enum Insertion {
    /// After the first `n` bytes (the status line of the first final head).
    At(usize),
    /// The write holds only whole `100 Continue` heads: try the next one.
    Later,
    /// Not a head this can safely add to.
    Never,
}

impl TlsIo {
    /// `alt_svc`: the value to advertise in the first response head, for
    /// an HTTP/1.1 session on a server with an HTTP/3 listener.
    pub(crate) fn new(session: TlsStream<TcpStream>, alt_svc: Option<http::HeaderValue>) -> TlsIo {
        let advert = match alt_svc {
            Some(value) => Advert::Waiting(value),
            None => Advert::Done,
        };
        TlsIo { session, advert }
    }

    /// Writes through the session, adding the `Alt-Svc` line if it is
    /// still due.
    fn write(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            match &mut self.advert {
                Advert::Done => return Pin::new(&mut self.session).poll_write(cx, buf),
                Advert::Waiting(value) => match insertion(buf) {
                    Insertion::At(n) => {
                        let mut bytes = Vec::with_capacity(n + value.len() + 11);
                        bytes.extend_from_slice(&buf[..n]);
                        bytes.extend_from_slice(b"Alt-Svc: ");
                        bytes.extend_from_slice(value.as_bytes());
                        bytes.extend_from_slice(b"\r\n");
                        self.advert = Advert::Sending { bytes, sent: 0, takes: n };
                    }
                    Insertion::Later => {
                        let written = Pin::new(&mut self.session).poll_write(cx, buf);
                        // Only while heads stay whole is the next write's
                        // start known to be a head's.
                        if !matches!(written, Poll::Ready(Ok(n)) if n == buf.len()) {
                            self.advert = Advert::Done;
                        }
                        return written;
                    }
                    Insertion::Never => self.advert = Advert::Done,
                },
                Advert::Sending { bytes, sent, takes } => {
                    while *sent < bytes.len() {
                        match ready!(Pin::new(&mut self.session).poll_write(cx, &bytes[*sent..])) {
                            Ok(0) => return Poll::Ready(Ok(0)),
                            Ok(n) => *sent += n,
                            Err(e) => return Poll::Ready(Err(e)),
                        }
                    }
                    let takes = *takes;
                    self.advert = Advert::Done;
                    return Poll::Ready(Ok(takes));
                }
            }
        }
    }
}

/// Finds where a first write's first final response head can take a
/// field: after its status line.
fn insertion(buf: &[u8]) -> Insertion {
    let mut rest = buf;
    while rest.starts_with(HTTP1_CONTINUE) {
        rest = &rest[HTTP1_CONTINUE.len()..];
    }
    if rest.is_empty() && !buf.is_empty() {
        return Insertion::Later;
    }
    // `HTTP/1.1 NNN` and a final status: 2xx to 5xx.
    let final_status = rest.len() > 12 && rest.starts_with(b"HTTP/1.1 ") && matches!(rest[9], b'2'..=b'5');
    if !final_status {
        return Insertion::Never;
    }
    match memchr::memmem::find(rest, b"\r\n") {
        Some(end) => Insertion::At(buf.len() - rest.len() + end + 2),
        None => Insertion::Never,
    }
}

impl AsyncRead for TlsIo {
    #[inline]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().session).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsIo {
    #[inline]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().write(cx, buf)
    }

    /// Forwarded as vectored while nothing is due (HTTP/2 sessions, which
    /// write vectored, never have anything due); the first write with the
    /// line still due takes only the first non-empty slice, as a vectored
    /// write may.
    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if matches!(this.advert, Advert::Done) {
            return Pin::new(&mut this.session).poll_write_vectored(cx, bufs);
        }
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
        this.write(cx, first)
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        self.session.is_write_vectored()
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().session).poll_flush(cx)
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().session).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_goes_after_the_first_final_status_line() {
        let head = b"HTTP/1.1 200 OK\r\nServer: peregrine\r\n\r\n";
        assert_eq!(insertion(head), Insertion::At(17));
        let both = [HTTP1_CONTINUE, &head[..]].concat();
        assert_eq!(insertion(&both), Insertion::At(HTTP1_CONTINUE.len() + 17));
        assert_eq!(insertion(b"HTTP/1.1 404 Not Found\r\n\r\n"), Insertion::At(24));
    }

    #[test]
    fn a_continue_alone_waits_for_the_next_write() {
        assert_eq!(insertion(HTTP1_CONTINUE), Insertion::Later);
        assert_eq!(insertion(&[HTTP1_CONTINUE, HTTP1_CONTINUE].concat()), Insertion::Later);
    }

    #[test]
    fn anything_else_is_left_alone() {
        // A switch to WebSocket: frames follow the head.
        assert_eq!(
            insertion(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"),
            Insertion::Never
        );
        assert_eq!(insertion(b"HTTP/1.1 103 Early Hints\r\n\r\n"), Insertion::Never);
        // A status line split across writes, or bytes that are no head.
        assert_eq!(insertion(b"HTTP/1.1 200 OK"), Insertion::Never);
        assert_eq!(insertion(b"\x00\x00\x12\x04\x00"), Insertion::Never);
        assert_eq!(insertion(b""), Insertion::Never);
    }
}
