//! [`Tunnel`]: one HTTP/2 stream as a byte stream (`AsyncRead` +
//! `AsyncWrite`), which is what an extended `CONNECT` (RFC 8441) hands to
//! the protocol it bootstraps (`connect.rs`). The WebSocket code reads and
//! writes it exactly as it does a TCP socket after an HTTP/1.1 `101`.
//!
//! - Reading takes the stream's DATA frames in order. Window capacity is
//!   given back only as bytes are copied out to the reader, so a handler
//!   that stops reading closes the client's window: backpressure, as TCP's
//!   receive buffer gives it on HTTP/1.1. What the client can make the
//!   server hold is the stream's window.
//! - Writing waits for send capacity (the stream's and the connection's
//!   windows, bounded by `max_send_buffer_bytes`) and queues at most what
//!   was granted, so a client that does not read holds the writer, not the
//!   server's memory.
//! - Shutdown ends the stream (`END_STREAM`). A client's `RST_STREAM` fails
//!   reads and writes.
//!
//! Deadlines: the stream task counts the tunnel as application code
//! running (no connection deadline: the protocol on top keeps its own,
//! WebSocket keepalive pings), except while a write waits for window
//! capacity, when it counts as waiting on the client, so a connection
//! whose every stream waits on a client that does not read gets the I/O
//! timeout, as a slow reader of a response would.
//!
//! Cost, measured with `peregrine-lab ws-load` (5-byte echo, 512 sockets,
//! one message in flight each, one worker on CPU 0, load on CPU 1, the
//! machine loaded by other builds; messages per server CPU-second, three
//! rounds): HTTP/1.1 106k to 114k; HTTP/2 with one socket per connection
//! 63k to 65k (each message crosses from the stream's task to the
//! connection's, which frames and copies it; measured on `h2`); HTTP/2 with 64 sockets
//! per connection 442k to 503k, since one write then carries many
//! streams' frames.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use super::handle::{RecvStream, SendStream};
use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::activity::Activity;

/// The receive and send halves of one HTTP/2 stream, as a byte stream.
pub(crate) struct Tunnel {
    recv: RecvStream,
    /// Shared with the stream task, which watches it for a reset while the
    /// upgraded protocol runs (the protocol may be waiting on neither half).
    send: Rc<RefCell<SendStream>>,
    /// Received bytes not read yet (the rest of a DATA frame larger than
    /// the reader's buffer).
    pending: Bytes,
    activity: Rc<Activity>,
    /// A write is waiting for window capacity (see the module docs).
    waiting: bool,
    /// `END_STREAM` is sent.
    ended: bool,
}

impl Tunnel {
    pub(super) fn new(recv: RecvStream, send: Rc<RefCell<SendStream>>, activity: Rc<Activity>) -> Tunnel {
        Tunnel { recv, send, pending: Bytes::new(), activity, waiting: false, ended: false }
    }

    fn set_waiting(&mut self, waiting: bool) {
        if self.waiting != waiting {
            self.waiting = waiting;
            if waiting {
                self.activity.begin_wait();
            } else {
                self.activity.end_wait();
            }
        }
    }
}

/// The send half is in use elsewhere (cannot happen: the stream task and
/// the tunnel run on one task and borrow it only inside a poll).
fn busy() -> io::Error {
    io::Error::other("HTTP/2 stream's send half borrowed twice")
}

impl AsyncRead for Tunnel {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        // An empty DATA frame is not the end: only `END_STREAM` is.
        while this.pending.is_empty() {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => this.pending = data,
                Some(Err(e)) => return Poll::Ready(Err(e.into())),
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = this.pending.len().min(buf.remaining());
        buf.put_slice(&this.pending[..n]);
        this.pending.advance(n);
        // Read, so the client may send as much again. (Fails only on a
        // stream already gone, which the next read reports.)
        this.recv.release_capacity(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tunnel {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if this.ended {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let send = Rc::clone(&this.send);
        let Ok(mut send) = send.try_borrow_mut() else { return Poll::Ready(Err(busy())) };
        let granted = send.capacity();
        if granted > 0 {
            this.set_waiting(false);
            let n = granted.min(buf.len());
            send.send_data(Bytes::copy_from_slice(&buf[..n]), false)?;
            return Poll::Ready(Ok(n));
        }
        match send.poll_capacity(buf.len(), cx) {
            Poll::Pending => {
                this.set_waiting(true);
                Poll::Pending
            }
            Poll::Ready(Ok(granted)) => {
                this.set_waiting(false);
                let n = granted.min(buf.len());
                send.send_data(Bytes::copy_from_slice(&buf[..n]), false)?;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => {
                this.set_waiting(false);
                Poll::Ready(Err(e.into()))
            }
        }
    }

    /// The connection task writes what is queued as it runs: nothing to
    /// do here.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Ends the stream: an empty DATA frame with `END_STREAM`.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(Ok(()));
        }
        this.ended = true;
        this.set_waiting(false);
        let Ok(mut send) = this.send.try_borrow_mut() else { return Poll::Ready(Err(busy())) };
        Poll::Ready(send.send_data(Bytes::new(), true).map_err(io::Error::from))
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        self.set_waiting(false);
    }
}
