//! Protocol switches: how a response hands its connection, or its
//! stream, to another protocol's task.
//!
//! A handler answers with a [`Response`](crate::Response) that carries an
//! [`OnUpgrade`]. Whatever protocol the request came on sends the head and
//! then gives the byte stream ([`Upgraded`]) to that continuation:
//! - HTTP/1.1 (`proto/h1/conn.rs`) writes `101 Switching Protocols` and,
//!   instead of reading the next request, hands over the connection's
//!   transport with the bytes it had already read past the request;
//! - HTTP/2 (`proto/h2/connect.rs`, RFC 8441 extended `CONNECT`) answers
//!   the stream `200` and hands over the stream itself: its DATA frames
//!   both ways, through the [`Tunnel`] adapter, while the connection goes
//!   on serving its other streams.
//!
//! Either way the continuation reads and writes an [`UpgradedIo`], so
//! nothing above this module (the WebSocket code included) knows which
//! it got. The continuation runs on the worker task that owned the
//! request (HTTP/1.1: the connection's; HTTP/2: the stream's).

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::proto::h2::Tunnel;
use crate::worker::timer::ConnTimer;
use crate::worker::transport::Io;
use crate::worker::Worker;

/// A connection after its `101`, or an HTTP/2 stream after its `200`:
/// what the new protocol runs on.
pub(crate) struct Upgraded {
    pub(crate) io: UpgradedIo,
    /// Bytes the client sent after the request that switched protocols,
    /// already read into the HTTP/1.1 buffer (always empty on HTTP/2).
    pub(crate) read_ahead: Vec<u8>,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) worker: Rc<Worker>,
    /// The deadline entry the new protocol arms while it waits: on
    /// HTTP/1.1 the connection's own in the worker's sweep; on HTTP/2 one
    /// no sweep reads, since the connection's deadline follows all its
    /// streams (the tunnel reports its stream's waits to it instead).
    pub(crate) timer: Rc<ConnTimer>,
}

/// The byte stream an upgraded protocol reads and writes.
///
/// A separate enum rather than another [`Io`] variant, so the HTTP/1.1
/// request path, which matches on `Io` for every read and write, pays
/// nothing for it. The tunnel is boxed: an HTTP/1.1 WebSocket stays the
/// size of its socket.
pub(crate) enum UpgradedIo {
    /// The whole connection (HTTP/1.1 `101`).
    Conn(Io),
    /// One HTTP/2 stream (RFC 8441).
    H2(Box<Tunnel>),
}

impl AsyncRead for UpgradedIo {
    #[inline]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpgradedIo::Conn(io) => Pin::new(io).poll_read(cx, buf),
            UpgradedIo::H2(tunnel) => Pin::new(tunnel.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpgradedIo {
    #[inline]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpgradedIo::Conn(io) => Pin::new(io).poll_write(cx, buf),
            UpgradedIo::H2(tunnel) => Pin::new(tunnel.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpgradedIo::Conn(io) => Pin::new(io).poll_flush(cx),
            UpgradedIo::H2(tunnel) => Pin::new(tunnel.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpgradedIo::Conn(io) => Pin::new(io).poll_shutdown(cx),
            UpgradedIo::H2(tunnel) => Pin::new(tunnel.as_mut()).poll_shutdown(cx),
        }
    }
}

impl fmt::Debug for Upgraded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgraded")
            .field("read_ahead", &self.read_ahead.len())
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// The continuation a `101` response carries: it gets the connection once
/// the head is sent.
pub(crate) struct OnUpgrade(Box<dyn FnOnce(Upgraded) -> UpgradedFuture>);

/// The new protocol's task, boxed: the `101` carries it type-erased.
type UpgradedFuture = Pin<Box<dyn Future<Output = ()>>>;

impl OnUpgrade {
    pub(crate) fn new<F, Fut>(run: F) -> OnUpgrade
    where
        F: FnOnce(Upgraded) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        OnUpgrade(Box::new(move |upgraded| Box::pin(run(upgraded))))
    }

    /// Runs the new protocol on `upgraded` until it ends, then drops
    /// `guard` (what must live as long as the protocol: the connection's
    /// registration with the worker, when it runs as a task of its own).
    /// A panic in it ends this connection only.
    pub(crate) async fn run<G>(self, upgraded: Upgraded, guard: G) {
        use futures_util::FutureExt;
        let fut = (self.0)(upgraded);
        if std::panic::AssertUnwindSafe(fut).catch_unwind().await.is_err() {
            tracing::error!("upgraded connection's handler panicked");
        }
        drop(guard);
    }
}

impl fmt::Debug for OnUpgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnUpgrade")
    }
}
