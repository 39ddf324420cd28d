//! The byte stream a connection is served over.
//!
//! In a running server this is a TCP socket (read and written through epoll
//! readiness, or through the worker's io_uring, see [`super::uring`]), or a
//! TLS session over one on a TLS listener. With the `fuzzing` feature it can also be an in-memory
//! pipe, so the connection state machine can be driven with arbitrary
//! bytes, split at arbitrary points, without sockets or timing in the way
//! (see [`crate::fuzzing`]).
//!
//! Cleartext pays one predictable branch per read or write for the TLS
//! variant (reads and writes are forced inline so that it is no more). The
//! TLS session ([`super::tls_io::TlsIo`]) is boxed (rustls's connection
//! state is over a kilobyte), so `Io`, and every connection future holding
//! it, stays the size of a `TcpStream` plus a tag.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection's transport.
pub(crate) enum Io {
    Tcp(TcpStream),
    /// A cleartext TCP socket served through the worker's io_uring.
    Uring(super::uring::UringStream),
    #[cfg(feature = "tls")]
    Tls(Box<super::tls_io::TlsIo>),
    #[cfg(feature = "fuzzing")]
    Memory(tokio::io::DuplexStream),
}

impl Io {
    /// Writes what the socket takes of `buf` now, without waiting: on a
    /// plain TCP socket that tokio last saw writable, one `send` outside
    /// tokio's poll machinery (no task budget, no waker); `WouldBlock`
    /// otherwise, and on every other transport, for the caller's `write`
    /// to handle. Measured with callgrind (`scripts/callgrind`), trying it
    /// before `write` took `/json` from 2,903 to 2,815 user-space
    /// instructions a request and a WebSocket echo from 2,081 to 1,985 a
    /// message.
    pub(crate) fn try_write_now(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(s) => s.try_write(buf),
            _ => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// [`Io::try_write_now`] for the last output before a shutdown: sent
    /// with `MSG_MORE`, so a short response leaves with the shutdown's
    /// `FIN` in one segment (as `UringStream::send_last` does on io_uring).
    pub(crate) fn try_write_last(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Io::Tcp(s) => {
                use std::os::fd::AsRawFd;
                s.try_io(tokio::io::Interest::WRITABLE, || crate::sys::send_more(s.as_raw_fd(), buf))
            }
            _ => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Input received and not yet read that can be parsed where it lies
    /// (io_uring's receive buffers; see `UringStream::received`); empty on
    /// every other transport, whose input is read into the caller's buffer.
    #[inline]
    pub(crate) fn received(&self) -> &[u8] {
        match self {
            Io::Uring(s) => s.received(),
            _ => &[],
        }
    }

    /// Marks the first `n` bytes of [`Io::received`] read.
    #[inline]
    pub(crate) fn consume_received(&mut self, n: usize) {
        if let Io::Uring(s) = self {
            s.consume_received(n);
        }
    }

    /// The TCP socket, when the bytes go to it as they are (no framing or
    /// encryption in between): what `sendfile(2)` can write to.
    #[inline]
    pub(crate) fn direct(&self) -> Option<DirectSocket<'_>> {
        match self {
            Io::Tcp(s) => Some(DirectSocket::Tcp(s)),
            Io::Uring(s) => Some(DirectSocket::Uring(s)),
            #[cfg(feature = "tls")]
            Io::Tls(_) => None,
            #[cfg(feature = "fuzzing")]
            Io::Memory(_) => None,
        }
    }
}

/// A cleartext TCP socket written with direct, non-blocking system calls
/// (`sendfile(2)`), whichever event loop serves it.
pub(crate) enum DirectSocket<'a> {
    Tcp(&'a TcpStream),
    Uring(&'a super::uring::UringStream),
}

impl DirectSocket<'_> {
    /// Runs `write`, a non-blocking write to the socket's descriptor;
    /// `WouldBlock` when it cannot take more now (then wait with
    /// [`DirectSocket::writable`]).
    pub(crate) fn try_write(&self, write: impl FnOnce(RawFd) -> io::Result<usize>) -> io::Result<usize> {
        match self {
            DirectSocket::Tcp(s) => s.try_io(tokio::io::Interest::WRITABLE, || write(s.as_raw_fd())),
            DirectSocket::Uring(s) => s.try_write_direct(write),
        }
    }

    /// Waits until the socket may take more.
    pub(crate) async fn writable(&self) -> io::Result<()> {
        match self {
            DirectSocket::Tcp(s) => s.writable().await,
            DirectSocket::Uring(s) => s.writable().await,
        }
    }
}

impl AsyncRead for Io {
    // Always inlined, like the write below: left to LLVM this became a
    // call wrapping tokio's (inlined) read, and cost cleartext `/json`
    // about 48 instructions a request over calling `TcpStream` directly.
    #[inline(always)]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Io::Uring(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            #[cfg(feature = "fuzzing")]
            Io::Memory(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    #[inline(always)]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Io::Uring(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            #[cfg(feature = "fuzzing")]
            Io::Memory(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    /// Forwarded so that the HTTP/2 driver's vectored writes stay one
    /// syscall: its DATA payloads above 1 KiB are chained, not copied, and
    /// without `writev` each frame's header and payload would take a
    /// `write` each.
    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Uring(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            #[cfg(feature = "tls")]
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
            #[cfg(feature = "fuzzing")]
            Io::Memory(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        match self {
            Io::Tcp(s) => s.is_write_vectored(),
            Io::Uring(s) => s.is_write_vectored(),
            #[cfg(feature = "tls")]
            Io::Tls(s) => s.is_write_vectored(),
            #[cfg(feature = "fuzzing")]
            Io::Memory(s) => s.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_flush(cx),
            Io::Uring(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            #[cfg(feature = "fuzzing")]
            Io::Memory(s) => Pin::new(s).poll_flush(cx),
        }
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Io::Uring(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            #[cfg(feature = "fuzzing")]
            Io::Memory(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
