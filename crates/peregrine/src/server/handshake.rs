//! The TLS handshake of an accepted connection, then the protocol ALPN
//! chose.
//!
//! The handshake runs under the connection's [`ConnTimer`], armed by the
//! accept loop with the header timeout: a client that stalls (or dribbles
//! bytes) has its socket's read side shut by the worker's once-a-second
//! sweep, the handshake fails with end of input, and the connection is
//! dropped. Malformed or hostile input fails inside rustls, which sends an
//! alert and stops at the first bad record, and rustls bounds the size of
//! every handshake message it buffers, so a failing handshake costs a
//! bounded amount of memory, time and work.

use std::net::SocketAddr;
use std::rc::Rc;

use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

use super::accept::{serve, Protocol};
use crate::router::Router;
use crate::worker::timer::{ConnTimer, Wait};
use crate::worker::tls_io::TlsIo;
use crate::worker::transport::Io;
use crate::worker::{Registration, Worker};

/// Completes the handshake on `stream` and serves the connection.
pub(crate) async fn serve_tls<S: 'static>(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
    timer: Rc<ConnTimer>,
    registration: Registration,
) {
    let tls = match acceptor.accept(stream).await {
        Ok(tls) => tls,
        Err(e) => {
            if timer.read_timed_out() {
                tracing::debug!(%peer, "TLS handshake timed out");
            } else {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
            }
            return;
        }
    };
    // HTTP/2 advertises HTTP/3 in its own encoder; HTTP/1.1's transport
    // does (see `TlsIo`).
    let (protocol, alt_svc) = match tls.get_ref().1.alpn_protocol() {
        Some(b"h2") => (Protocol::H2, None),
        // `http/1.1`, or no ALPN at all (the client did not offer it).
        _ => (Protocol::Http1 { h2c: false }, worker.alt_svc.clone()),
    };
    timer.arm(Wait::Idle, worker.deadline_after(worker.config.idle_timeout));
    let io = Io::Tls(Box::new(TlsIo::new(tls, alt_svc)));
    serve(protocol, io, peer, worker, router, timer, registration).await;
}
