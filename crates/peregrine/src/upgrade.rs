//! Protocol switches (`101 Switching Protocols`): how a response hands its
//! connection to another protocol's task.
//!
//! A handler answers with a [`Response`](crate::Response) that carries an
//! [`OnUpgrade`]. Whatever protocol the request came on writes the `101`
//! head and then, instead of reading the next request, gives the
//! connection's transport and the bytes it had already read past the
//! request ([`Upgraded`]) to that continuation, which runs on the same
//! worker task. The HTTP/1.1 driver does this in `proto/h1/conn.rs`; an
//! HTTP/2 driver (RFC 8441 extended `CONNECT`) would hand over a stream
//! instead, which is why nothing above this module sees the transport.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;

use crate::worker::timer::ConnTimer;
use crate::worker::transport::Io;
use crate::worker::Worker;

/// A connection after its `101`: what the new protocol runs on.
pub(crate) struct Upgraded {
    pub(crate) io: Io,
    /// Bytes the client sent after the request that switched protocols,
    /// already read into the HTTP/1.1 buffer.
    pub(crate) read_ahead: Vec<u8>,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) worker: Rc<Worker>,
    /// The connection's deadline entry in the worker's sweep.
    pub(crate) timer: Rc<ConnTimer>,
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

    /// Runs the new protocol on `upgraded` until it ends. A panic in it
    /// ends this connection only.
    pub(crate) async fn run(self, upgraded: Upgraded) {
        use futures_util::FutureExt;
        let fut = (self.0)(upgraded);
        if std::panic::AssertUnwindSafe(fut).catch_unwind().await.is_err() {
            tracing::error!("upgraded connection's handler panicked");
        }
    }
}

impl fmt::Debug for OnUpgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnUpgrade")
    }
}
