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
//! `BodySource` for what it lends.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use crate::error::Error;

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
