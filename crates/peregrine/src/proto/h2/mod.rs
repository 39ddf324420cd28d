//! HTTP/2 (RFC 9113): the server's own implementation. `frame.rs` and
//! `hpack/` are the pure codecs (fuzzed), `core.rs` the connection's state
//! without I/O (streams, flow control, SETTINGS, limits; why not the `h2`
//! crate is measured there), `handle.rs` the handles stream tasks hold,
//! and this module the driver: one task per connection that reads,
//! feeds the core, answers and writes.
//!
//! A request that came whole to a synchronous handler is answered right
//! there, in the connection's task; any other stream becomes a task of its own on the same
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
//! - Limits (`core.rs`): concurrent streams, header list size (the
//!   HPACK bomb and CONTINUATION flood), reset-stream budgets (rapid
//!   reset), send buffer, windows, empty DATA frames; PING and SETTINGS
//!   floods stall on their own acknowledgements (no input is read while
//!   the output is over its high-water mark).
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
// Reachable crate-wide for `crate::fuzzing`'s HTTP/2 harness.
pub(crate) mod core;
pub(crate) mod frame;
mod handle;
mod head;
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
pub(crate) mod hpack;
mod respond;
mod rewind;
mod stream;
mod tunnel;

use std::cell::RefCell;
use std::future::poll_fn;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use self::core::Core;
use crate::router::Router;
use crate::worker::readbuf::ReadBuf;
use crate::worker::timer::{ConnTimer, Wait};
use crate::worker::{Registration, Worker};
use activity::Activity;
// HTTP/3 forbids the same response fields.
#[cfg(feature = "http3")]
pub(crate) use respond::connection_specific;
pub(crate) use rewind::Rewind;
pub(crate) use tunnel::Tunnel;

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
/// sends something else (the caller then drains before closing, since a
/// close with unread input is a reset).
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
    core: Rc<RefCell<Core>>,
    /// `Alt-Svc` for this connection's responses (TLS connections of a
    /// server with an HTTP/3 listener).
    alt_svc: Option<http::HeaderValue>,
}

impl<S: 'static> Shared<S> {
    /// The fields the server adds to a response head now.
    fn stamp(&self) -> respond::Stamp<'_> {
        respond::Stamp { date: self.worker.date(), alt_svc: self.alt_svc.as_ref().map(|v| v.as_bytes()) }
    }
}

/// Read buffer growth: room for at least this much before each read.
const READ_ROOM: usize = 16 * 1024;
/// Slices gathered for one vectored write.
const WRITE_SLICES: usize = 64;

/// What woke the connection task.
enum Event {
    /// Input arrived (or whole frames are still waiting in the buffer).
    Input,
    /// The server began shutting down.
    Shutdown,
    /// The connection is done: closed by the client, failed, or finished
    /// after GOAWAY.
    Done,
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
        close_draining(&mut io).await;
        return;
    }
    let core = Rc::new(RefCell::new(Core::new(&worker.config.http2)));
    let shared = Rc::new(Shared {
        peer,
        worker: Rc::clone(&worker),
        router,
        activity: Rc::new(Activity::new(Rc::clone(&worker), timer)),
        core: Rc::clone(&core),
        alt_svc: if tls { worker.alt_svc.clone() } else { None },
    });
    // The header timeout armed before the preface stays until the first
    // stream: a client must send its first request head within it.

    let mut input = BytesMut::with_capacity(READ_ROOM);
    let mut batch = Vec::new();
    let mut draining = false;
    let shutdown = worker.shutdown_begun();
    tokio::pin!(shutdown);
    loop {
        {
            let mut core = core.borrow_mut();
            core.receive(&mut input);
            core.take_accepted(&mut batch);
            shared.activity.head_arriving(!input.is_empty() || core.in_header_block());
        }
        for accepted in batch.drain(..) {
            stream::accept(accepted, &shared);
        }
        let event = poll_fn(|cx| drive(cx, &mut io, &core, &mut input, &mut shutdown, draining)).await;
        match event {
            Event::Input => {}
            Event::Shutdown => {
                // GOAWAY now; streams in flight finish, then the
                // connection ends.
                core.borrow_mut().go_away();
                draining = true;
            }
            Event::Done => break,
        }
    }
    let failed = core.borrow().error().is_some();
    // Every stream still open fails; their tasks end.
    core.borrow_mut().close();
    if failed {
        close_draining(&mut io).await;
    } else {
        let _ = io.shutdown().await;
    }
}

/// Closes the connection, draining what the client still sends for a
/// moment so the close is not a reset (which could destroy the GOAWAY or
/// response the client has not read yet).
/// The drain is bounded in bytes too: a client flooding the connection
/// (which is often why it failed) is not read on.
///
/// The sink is a read buffer allocated here (not zeroed), not an array in
/// the future: an array made every HTTP/2 connection's future 4 KiB
/// larger, copied whole when its task was spawned, for a path only failed
/// connections take.
async fn close_draining<T: AsyncRead + AsyncWrite + Unpin>(io: &mut T) {
    let _ = io.shutdown().await;
    let mut sink = ReadBuf::new(DRAIN_READ);
    let drain = async {
        let mut left = DRAIN_BYTES;
        while left > 0 {
            match sink.drain_from(io).await {
                Ok(n) if n > 0 => left = left.saturating_sub(n),
                _ => return,
            }
        }
    };
    let _ = tokio::time::timeout(PREFACE_DRAIN, drain).await;
}

/// The most a closing connection reads from its client.
const DRAIN_BYTES: usize = 256 * 1024;
/// What it reads at a time.
const DRAIN_READ: usize = 4096;

/// One turn of the connection: writes what is queued, then waits for
/// input, a stream task's output, or the shutdown.
fn drive<T, F>(
    cx: &mut Context<'_>,
    io: &mut T,
    core: &RefCell<Core>,
    input: &mut BytesMut,
    shutdown: &mut Pin<&mut F>,
    draining: bool,
) -> Poll<Event>
where
    T: AsyncRead + AsyncWrite + Unpin,
    F: std::future::Future<Output = ()>,
{
    let mut core = core.borrow_mut();
    core.register(cx.waker());
    loop {
        core.dirty = false;
        let had_output = !core.out.is_empty();
        while !core.out.is_empty() {
            let mut slices = [IoSlice::new(&[]); WRITE_SLICES];
            let n = core.out.slices(&mut slices);
            match Pin::new(&mut *io).poll_write_vectored(cx, &slices[..n]) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Event::Done),
                Poll::Ready(Ok(written)) => core.out.advance(written),
                Poll::Pending => break,
            }
        }
        if had_output && core.out.is_empty() {
            // TLS holds the last record until flushed.
            match Pin::new(&mut *io).poll_flush(cx) {
                Poll::Ready(Err(_)) => return Poll::Ready(Event::Done),
                Poll::Ready(Ok(())) | Poll::Pending => {}
            }
        }
        if core.has_capacity_waiters() {
            core.wake_capacity();
        }
        if core.out.is_empty() && (core.error().is_some() || core.finished()) {
            return Poll::Ready(Event::Done);
        }
        if core.wants_input() && whole_frame(input) {
            return Poll::Ready(Event::Input);
        }
        if !draining && shutdown.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Event::Shutdown);
        }
        if core.wants_input() {
            if input.capacity() - input.len() < READ_ROOM / 4 {
                input.reserve(READ_ROOM);
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut *io), cx, input) {
                // The client closed the connection (or it failed).
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Event::Done),
                Poll::Ready(Ok(_)) => return Poll::Ready(Event::Input),
                Poll::Pending => {}
            }
        }
        // A stream task woken by this turn's wakes may already have queued
        // more; it wakes this task again, so nothing is missed by waiting.
        if !core.dirty {
            // Waiting: an empty read buffer is given back (an idle
            // connection then holds none; the next read takes a new one,
            // one allocation per batch of frames read).
            if input.is_empty() && input.capacity() > 0 {
                *input = BytesMut::new();
            }
            core.out.shrink_when_empty();
            return Poll::Pending;
        }
    }
}

/// Whether `input` holds a whole frame.
fn whole_frame(input: &BytesMut) -> bool {
    match input.get(..frame::HEADER_LEN).and_then(|head| <&[u8; frame::HEADER_LEN]>::try_from(head).ok()) {
        Some(head) => input.len() >= frame::HEADER_LEN + frame::Head::parse(head).len,
        None => false,
    }
}
