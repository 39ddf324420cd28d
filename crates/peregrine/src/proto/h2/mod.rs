//! HTTP/2 (RFC 9113): the connection driver over the `h2` crate, which owns
//! the codec (frames, HPACK with its dynamic table and Huffman coding),
//! stream states and flow-control bookkeeping.
//!
//! One connection is one task that drives the `h2` connection and accepts
//! streams. A request that came whole to a synchronous handler is answered
//! right there; any other stream becomes a task of its own on the same
//! worker, which turns the stream into an [`OwnedRequest`](crate::OwnedRequest),
//! runs it through the protocol-neutral [pipeline](crate::pipeline) and
//! sends the [`Response`](crate::Response) back (`stream.rs`). Router,
//! extractors and handlers are the same as for HTTP/1.1.
//!
//! - Request bodies are buffered up to `max_body_bytes` (`413` beyond, as
//!   on HTTP/1.1) or, on streaming routes, read by the handler through a
//!   [`BodySource`](crate::body::BodySource) that gives flow-control
//!   capacity back only as the handler consumes bytes (`body.rs`).
//! - Response bodies stream with real backpressure: each chunk waits for
//!   window capacity before the next is asked for (`respond.rs`).
//! - Limits (`settings.rs`): concurrent streams, header list size (the
//!   HPACK bomb and CONTINUATION flood), reset-stream budgets (rapid
//!   reset), send buffer, windows. `h2` itself bounds PING and SETTINGS
//!   floods (one pending acknowledgement, written before more is read) and
//!   empty or tiny DATA frames.
//! - Deadlines go through the worker's [`ConnTimer`] (`activity.rs`): the
//!   preface, handshake and first request head have the header timeout, a
//!   connection without streams the idle timeout, and one whose open
//!   streams all wait on the client the I/O timeout and the minimum data
//!   rate (a trickled body, a window opened a few bytes at a time).
//! - Shutdown sends `GOAWAY`, lets the streams in flight finish, then
//!   closes.
//! - WebSocket over HTTP/2 (RFC 8441): an extended `CONNECT` is routed as
//!   the `GET` it stands for, and a handler that upgrades gets the stream
//!   as its socket (`connect.rs`, `tunnel.rs`), while the connection goes
//!   on serving its other streams.

mod activity;
mod body;
mod connect;
// Not wired into the connection yet: the own HTTP/2 server will use it.
#[allow(dead_code, unused_imports)]
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
pub(crate) mod hpack;
mod respond;
mod rewind;
mod settings;
mod stream;
mod tunnel;

use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::router::Router;
use crate::worker::timer::{ConnTimer, Wait};
use crate::worker::{Registration, Worker};
use activity::Activity;
pub(crate) use rewind::Rewind;
pub(crate) use tunnel::Tunnel;
// HTTP/3 maps requests and responses to `http` types by the same rules.
#[cfg(feature = "http3")]
pub(crate) use respond::head as response_head;
#[cfg(feature = "http3")]
pub(crate) use stream::fields as request_fields;

/// The start of the client connection preface (RFC 9113 §3.4). On a port
/// that also speaks HTTP/1.1, a connection whose first bytes are these is
/// HTTP/2; as an HTTP/1.1 request line it is invalid anyway (version 2.0).
pub(crate) const PREFACE_START: &[u8] = b"PRI * HTTP/2.0";

/// The whole client connection preface.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// How long a connection that sent something else is drained before the
/// close.
const PREFACE_DRAIN: Duration = Duration::from_millis(500);

/// Reads the client's preface; `false` if the connection ends first or
/// sends something else. (`h2` checks it too, but closes with unread
/// input, which the kernel turns into a reset.)
async fn read_preface<T: AsyncRead + Unpin>(io: &mut T) -> bool {
    let mut got = [0u8; PREFACE.len()];
    let mut filled = 0;
    while filled < got.len() {
        match io.read(&mut got[filled..]).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => filled += n,
        }
        if got[..filled] != PREFACE[..filled] {
            return false;
        }
    }
    true
}

/// What every stream task of one connection shares.
struct Shared<S: 'static> {
    peer: Option<SocketAddr>,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
    activity: Rc<Activity>,
    /// `Alt-Svc` for this connection's responses (TLS connections of a
    /// server with an HTTP/3 listener).
    alt_svc: Option<http::HeaderValue>,
}

impl<S: 'static> Shared<S> {
    /// The fields the server adds to a response head now.
    fn stamp(&self) -> respond::Stamp<'_> {
        respond::Stamp { date: self.worker.date(), alt_svc: self.alt_svc.as_ref() }
    }
}

/// Serves one HTTP/2 connection until it closes. `io` starts with the
/// client's connection preface (already-read bytes can be put back in
/// front with [`Rewind`]); `tls` if it came through TLS.
pub(crate) async fn serve<T, S>(
    io: T,
    tls: bool,
    peer: Option<SocketAddr>,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
    timer: Rc<ConnTimer>,
    registration: Registration,
) where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
    S: 'static,
{
    // Dropped last: the worker counts this connection until it is gone.
    let _registration = registration;
    // The preface and the first SETTINGS are the connection's head.
    timer.arm(Wait::Head, worker.deadline_after(worker.config.header_timeout));
    let mut io = io;
    if !read_preface(&mut io).await {
        // Not HTTP/2: close without a word (RFC 9113 §3.4), draining
        // what was sent so the close is not a reset.
        let _ = io.shutdown().await;
        let mut sink = [0u8; 1024];
        let drain = async { while matches!(io.read(&mut sink).await, Ok(n) if n > 0) {} };
        let _ = tokio::time::timeout(PREFACE_DRAIN, drain).await;
        return;
    }
    let io = Rewind::new(Bytes::from_static(PREFACE), io);
    let handshake = settings::builder(&worker.config.http2).handshake::<_, Bytes>(io);
    let mut conn = match handshake.await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::debug!(error = %e, "HTTP/2 handshake failed");
            return;
        }
    };
    let shared = Rc::new(Shared {
        peer,
        worker: Rc::clone(&worker),
        router,
        activity: Rc::new(Activity::new(Rc::clone(&worker), timer)),
        alt_svc: if tls { worker.alt_svc.clone() } else { None },
    });
    // The header timeout armed before the preface stays until the first
    // stream: a client must send its first request head within it.

    let mut draining = false;
    let shutdown = worker.shutdown_begun();
    tokio::pin!(shutdown);
    let mut ready = Vec::new();
    loop {
        let next = if draining {
            accept_ready(&mut conn, &mut ready).await
        } else {
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    // GOAWAY now; streams in flight finish, then `accept`
                    // ends.
                    conn.graceful_shutdown();
                    draining = true;
                    continue;
                }
                next = accept_ready(&mut conn, &mut ready) => next,
            }
        };
        match next {
            Some(Ok(())) => {
                for (request, respond) in ready.drain(..) {
                    if let Some((request, respond, taken)) = stream::answer_whole(request, respond, &shared) {
                        tokio::task::spawn_local(stream::serve(request, respond, taken, Rc::clone(&shared)));
                    }
                }
            }
            Some(Err(e)) => {
                // `h2` has sent GOAWAY with the reason, where the socket
                // still takes it.
                tracing::debug!(error = %e, "HTTP/2 connection ended with an error");
                return;
            }
            None => return,
        }
    }
}

/// A stream `h2` accepted: its request and the handle that answers it.
type Accepted = (http::Request<h2::RecvStream>, h2::server::SendResponse<Bytes>);

/// Waits for streams, then takes every one the connection has ready into
/// `ready` (`Some(Ok(()))`). Taking them all before answering any matters:
/// `h2` writes out what is queued each time it is polled, so a response
/// answered between two accepts would leave in a write of its own (one
/// per request on h2load's 100-stream batches, where taking them all lets
/// one write carry them).
async fn accept_ready<T>(
    conn: &mut h2::server::Connection<T, Bytes>,
    ready: &mut Vec<Accepted>,
) -> Option<Result<(), h2::Error>>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    std::future::poll_fn(|cx| loop {
        match conn.poll_accept(cx) {
            Poll::Ready(Some(Ok(accepted))) => ready.push(accepted),
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
            // What was taken is answered first; the next call sees the end,
            // or waits, again.
            _ if !ready.is_empty() => return Poll::Ready(Some(Ok(()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
}
