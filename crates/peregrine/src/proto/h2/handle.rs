//! The handles a stream task holds on its stream: [`RecvStream`] reads the
//! request body, [`SendResponse`] answers and watches for a reset,
//! [`SendStream`] sends the body and trailers. Each is the stream id and
//! the connection's shared [`Core`]; every call borrows the core for that
//! call only, and the connection task writes out what the call queued.
//!
//! The last handle dropped settles the stream (`Core::release`): a
//! response never finished is reset, a body nobody reads is refused.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;

use super::core::{Core, StreamGone};
use super::frame::Reason;
use super::hpack::Encoder;

/// Why a stream handle's call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamError(pub(crate) StreamGone);

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            StreamGone::Reset(reason) => write!(f, "HTTP/2 stream reset: {reason}"),
            StreamGone::Closed => f.write_str("HTTP/2 connection closed"),
        }
    }
}

impl std::error::Error for StreamError {}

impl From<StreamGone> for StreamError {
    fn from(gone: StreamGone) -> Self {
        StreamError(gone)
    }
}

impl From<StreamError> for io::Error {
    fn from(e: StreamError) -> io::Error {
        let kind = match e.0 {
            StreamGone::Reset(_) => io::ErrorKind::ConnectionReset,
            StreamGone::Closed => io::ErrorKind::BrokenPipe,
        };
        io::Error::new(kind, e)
    }
}

/// One claim on a stream; the claim goes with the drop.
struct Claim {
    core: Rc<RefCell<Core>>,
    id: u32,
}

impl Claim {
    fn new(core: &Rc<RefCell<Core>>, id: u32) -> Claim {
        core.borrow_mut().claim(id);
        Claim { core: Rc::clone(core), id }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Ok(mut core) = self.core.try_borrow_mut() {
            core.release(self.id);
        }
    }
}

/// The request body of one stream.
pub(crate) struct RecvStream {
    claim: Claim,
}

impl RecvStream {
    pub(crate) fn new(core: &Rc<RefCell<Core>>, id: u32) -> RecvStream {
        RecvStream { claim: Claim::new(core, id) }
    }

    /// The next DATA payload (possibly empty), `None` at the end.
    pub(crate) fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, StreamError>>> {
        match self.claim.core.borrow_mut().poll_data(self.claim.id, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Some(data))) => Poll::Ready(Some(Ok(data))),
            Poll::Ready(Ok(None)) => Poll::Ready(None),
            Poll::Ready(Err(gone)) => Poll::Ready(Some(Err(gone.into()))),
        }
    }

    /// Whether the body has ended with nothing left to read.
    pub(crate) fn is_end_stream(&self) -> bool {
        self.claim.core.borrow().is_end_stream(self.claim.id)
    }

    /// `n` bytes were taken: the client may send as many again.
    pub(crate) fn release_capacity(&mut self, n: usize) {
        self.claim.core.borrow_mut().release_capacity(self.claim.id, n);
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        if let Ok(mut core) = self.claim.core.try_borrow_mut() {
            core.stop_reading(self.claim.id);
        }
    }
}

/// Answers one stream.
pub(crate) struct SendResponse {
    claim: Claim,
}

impl SendResponse {
    pub(crate) fn new(core: &Rc<RefCell<Core>>, id: u32) -> SendResponse {
        SendResponse { claim: Claim::new(core, id) }
    }

    /// Sends the response head encoded by `encode`; with `end_stream` it
    /// is the whole response. The returned handle sends the body.
    pub(crate) fn send_response(
        &mut self,
        end_stream: bool,
        encode: impl FnOnce(&mut Encoder, &mut Vec<u8>),
    ) -> Result<SendStream, StreamError> {
        self.claim.core.borrow_mut().send_headers(self.claim.id, end_stream, encode)?;
        Ok(SendStream { claim: Claim::new(&self.claim.core, self.claim.id) })
    }

    /// Waits for the client to reset the stream.
    pub(crate) fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Reason> {
        self.claim.core.borrow_mut().poll_reset(self.claim.id, cx)
    }
}

/// Sends one stream's body and trailers.
pub(crate) struct SendStream {
    claim: Claim,
}

impl SendStream {
    /// Queues `data` (sent as the windows allow); `end_stream` ends the
    /// stream after it.
    pub(crate) fn send_data(&mut self, data: Bytes, end_stream: bool) -> Result<(), StreamError> {
        Ok(self.claim.core.borrow_mut().send_data(self.claim.id, data, end_stream)?)
    }

    /// Waits until up to `want` bytes may be sent without queueing.
    pub(crate) fn poll_capacity(
        &mut self,
        want: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Result<usize, StreamError>> {
        self.claim.core.borrow_mut().poll_capacity(self.claim.id, want, cx).map_err(StreamError)
    }

    /// Capacity available now.
    pub(crate) fn capacity(&self) -> usize {
        self.claim.core.borrow().capacity(self.claim.id)
    }

    /// Ends the stream with `fields` as trailers (names in lowercase).
    pub(crate) fn send_trailers(&mut self, fields: Vec<(Vec<u8>, Vec<u8>)>) -> Result<(), StreamError> {
        Ok(self.claim.core.borrow_mut().send_trailers(self.claim.id, fields)?)
    }

    pub(crate) fn send_reset(&mut self, reason: Reason) {
        self.claim.core.borrow_mut().send_reset(self.claim.id, reason);
    }

    /// Waits for the client to reset the stream.
    pub(crate) fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Reason> {
        self.claim.core.borrow_mut().poll_reset(self.claim.id, cx)
    }
}
