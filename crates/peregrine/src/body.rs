//! [`Body`]: a request body read incrementally by a streaming handler.
//!
//! While a streaming handler runs, its connection lends the body's source
//! (for HTTP/1.1: the socket and read buffer, decoded by the same
//! `BodyDecoder` that buffered routes use) to the `Body`; bytes are decoded
//! as they arrive, through one bounded buffer, so a 20 MB upload never holds
//! more than that buffer in memory. When the handler finishes the
//! connection takes the source back and, if the body was read to its end,
//! goes on with the next request.
//!
//! This type knows no protocol: each protocol's driver implements
//! `BodySource` for what it lends. HTTP/2 and HTTP/3, whose bodies arrive
//! in DATA pieces, share their bookkeeping (`Pieces`: the pending piece,
//! the limit, the counts) and their reasons for refusing one (`Refused`).

use std::cell::{Cell, RefCell};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use bytes::{Buf, Bytes};

use crate::error::Error;
use crate::response::canned::{self, Canned};

/// The future of one [`BodySource::read`].
pub(crate) type ReadFuture<'a> = Pin<Box<dyn Future<Output = Result<usize, Error>> + 'a>>;

/// Where a streamed body's bytes come from, implemented by each protocol's
/// connection driver.
pub(crate) trait BodySource {
    /// Reads the next decoded bytes into `buf`; `Ok(0)` at the end.
    fn read<'a>(&'a self, buf: &'a mut [u8]) -> ReadFuture<'a>;
    /// Decoded bytes handed out so far.
    fn bytes_read(&self) -> u64;
}

/// A body already in memory, handed out as a stream (a streaming handler
/// behind middleware, which buffers the body).
pub(crate) struct MemoryBody {
    bytes: Vec<u8>,
    read: std::cell::Cell<usize>,
}

impl MemoryBody {
    pub(crate) fn new(bytes: Vec<u8>) -> MemoryBody {
        MemoryBody { bytes, read: std::cell::Cell::new(0) }
    }
}

impl BodySource for MemoryBody {
    fn read<'a>(&'a self, buf: &'a mut [u8]) -> ReadFuture<'a> {
        let at = self.read.get();
        let n = buf.len().min(self.bytes.len() - at);
        buf[..n].copy_from_slice(&self.bytes[at..at + n]);
        self.read.set(at + n);
        Box::pin(std::future::ready(Ok(n)))
    }

    fn bytes_read(&self) -> u64 {
        self.read.get() as u64
    }
}

/// Why a request body that arrives in pieces (HTTP/2 and HTTP/3 DATA) was
/// not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Over the route's body limit.
    TooLarge,
    /// The client reset the stream or the connection failed mid-body.
    Cut,
}

impl Refused {
    /// The server's answer (a cut body has nobody left to answer, but a
    /// response keeps this total).
    pub(crate) fn canned(self) -> Canned<'static> {
        match self {
            Refused::TooLarge => canned::BODY_TOO_LARGE,
            Refused::Cut => Canned::bad_request("request body cut short"),
        }
    }

    /// The error a streaming handler sees.
    pub(crate) fn error(self) -> Error {
        match self {
            Refused::TooLarge => Error::payload_too_large("request body too large"),
            Refused::Cut => Error::bad_request("request body cut short"),
        }
    }
}

/// The bookkeeping of a streamed body that arrives in pieces, shared by the
/// HTTP/2 and HTTP/3 drivers: the piece being handed out, the size limit,
/// the counts, and why the body failed, if it did. Each driver brings how
/// the next piece is received (and, for HTTP/2, gives flow-control window
/// back for what the handler took).
pub(crate) struct Pieces {
    /// Received, not yet handed to the handler.
    pending: RefCell<Bytes>,
    received: Cell<u64>,
    handed_out: Cell<u64>,
    limit: u64,
    refused: Cell<Option<Refused>>,
}

impl Pieces {
    pub(crate) fn new(limit: u64) -> Pieces {
        Pieces {
            pending: RefCell::new(Bytes::new()),
            received: Cell::new(0),
            handed_out: Cell::new(0),
            limit,
            refused: Cell::new(None),
        }
    }

    /// Why the body failed, if it did: the server answers that instead of
    /// the handler's response, as on HTTP/1.1.
    pub(crate) fn refused(&self) -> Option<Refused> {
        self.refused.get()
    }

    /// Bytes handed to the handler so far.
    pub(crate) fn handed_out(&self) -> u64 {
        self.handed_out.get()
    }

    /// Copies the next bytes into `buf`, waiting on `next` for a piece when
    /// none is pending; `Ok(0)` at the end. A piece past the limit, or a
    /// failure from `next`, fails this read and every later one.
    pub(crate) async fn read<F>(&self, buf: &mut [u8], next: impl FnOnce() -> F) -> Result<usize, Error>
    where
        F: Future<Output = Result<Option<Bytes>, Refused>>,
    {
        if let Some(refused) = self.refused.get() {
            return Err(refused.error());
        }
        if self.pending.borrow().is_empty() {
            let data = match next().await {
                Ok(Some(data)) => data,
                Ok(None) => return Ok(0),
                Err(refused) => {
                    self.refused.set(Some(refused));
                    return Err(refused.error());
                }
            };
            let received = self.received.get() + data.len() as u64;
            if received > self.limit {
                self.refused.set(Some(Refused::TooLarge));
                return Err(Refused::TooLarge.error());
            }
            self.received.set(received);
            *self.pending.borrow_mut() = data;
        }
        let mut pending = self.pending.borrow_mut();
        let n = buf.len().min(pending.len());
        buf[..n].copy_from_slice(&pending[..n]);
        pending.advance(n);
        self.handed_out.set(self.handed_out.get() + n as u64);
        Ok(n)
    }
}

/// A request body being streamed to a handler.
pub struct Body {
    source: Rc<dyn BodySource>,
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Body").field("bytes_read", &self.bytes_read()).finish_non_exhaustive()
    }
}

impl Body {
    pub(crate) fn new(source: Rc<dyn BodySource>) -> Body {
        Body { source }
    }

    /// Reads the next bytes of the body into `buf`; `Ok(0)` at the end.
    ///
    /// Errors are ready-made responses: `400` for invalid framing or a body
    /// cut short, `413` over the size limit. Whatever the handler then
    /// answers, the server replaces it with its own answer to that failure
    /// (the same as a buffered route gets) and closes the connection. A
    /// client that stalls past the I/O timeout is disconnected, which ends
    /// the body early.
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.source.read(buf).await
    }

    /// Reads the whole body and returns how many bytes it had, without
    /// keeping them.
    pub async fn count(mut self) -> Result<u64, Error> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            match self.read(&mut buf).await? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    }

    /// Reads the whole body into memory, refusing more than `limit` bytes
    /// with `413`.
    pub async fn to_vec(mut self, limit: usize) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = self.read(&mut buf).await?;
            if n == 0 {
                return Ok(out);
            }
            if out.len().saturating_add(n) > limit {
                return Err(Error::payload_too_large("request body too large"));
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// Bytes handed to the handler so far.
    pub fn bytes_read(&self) -> u64 {
        self.source.bytes_read()
    }
}
