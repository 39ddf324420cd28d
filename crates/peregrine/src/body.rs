//! [`Body`]: a request body read incrementally by a streaming handler.
//!
//! While a streaming handler runs, its connection lends the socket and read
//! buffer to the `Body`; bytes are decoded (length-delimited or chunked) as
//! they arrive, through one bounded buffer, so a 20 MB upload never holds
//! more than that buffer in memory. When the handler finishes the
//! connection takes them back and, if the body was read to its end, goes on
//! with the next request.

use std::cell::RefCell;
use std::rc::Rc;

use tokio::io::AsyncReadExt;

use crate::error::Error;
use crate::http::chunked::{ChunkedDecoder, ChunkedError};
use crate::http::parse::Framing;
use crate::server::transport::Io;
use crate::server::worker::{ConnTimer, Wait, Worker};
use crate::server::ReadBuf;

/// Where a streamed body stands when its handler returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyProgress {
    /// Read to its end: the connection can serve the next request.
    Complete,
    /// Not read to its end.
    Unfinished,
    /// Invalid framing, too large, or the client vanished.
    Failed,
}

enum Decoding {
    Length { remaining: u64 },
    Chunked(ChunkedDecoder),
}

pub(crate) struct BodyInner {
    stream: Io,
    rbuf: ReadBuf,
    decoding: Decoding,
    progress: BodyProgress,
    read_so_far: u64,
    worker: Rc<Worker>,
    timer: Rc<ConnTimer>,
}

impl BodyInner {
    pub(crate) fn new(
        stream: Io,
        rbuf: ReadBuf,
        framing: Framing,
        limit: u64,
        worker: Rc<Worker>,
        timer: Rc<ConnTimer>,
    ) -> BodyInner {
        let (decoding, progress) = match framing {
            Framing::None => (Decoding::Length { remaining: 0 }, BodyProgress::Complete),
            Framing::Length(n) => (Decoding::Length { remaining: n }, BodyProgress::Unfinished),
            Framing::Chunked => (Decoding::Chunked(ChunkedDecoder::new(limit)), BodyProgress::Unfinished),
        };
        BodyInner { stream, rbuf, decoding, progress, read_so_far: 0, worker, timer }
    }

    pub(crate) fn into_parts(self) -> (Io, ReadBuf, BodyProgress) {
        (self.stream, self.rbuf, self.progress)
    }

    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        loop {
            match self.progress {
                BodyProgress::Complete => return Ok(0),
                BodyProgress::Failed => return Err(Error::bad_request("request body unreadable")),
                BodyProgress::Unfinished => {}
            }
            if !self.rbuf.is_empty() {
                match self.take_buffered(buf) {
                    Ok(0) => {}
                    Ok(n) => {
                        self.read_so_far += n as u64;
                        return Ok(n);
                    }
                    Err(e) => {
                        self.progress = BodyProgress::Failed;
                        return Err(e);
                    }
                }
                if self.progress == BodyProgress::Complete {
                    return Ok(0);
                }
            }
            self.timer.arm(Wait::Io, self.worker.deadline_after(self.worker.config.io_timeout));
            let spare = self.rbuf.spare(16 * 1024, 0);
            let read = self.stream.read(spare).await;
            self.timer.arm(Wait::Busy, u64::MAX);
            match read {
                Ok(0) | Err(_) => {
                    self.progress = BodyProgress::Failed;
                    return Err(Error::bad_request("request body ended early"));
                }
                Ok(n) => self.rbuf.filled(n),
            }
        }
    }

    /// Moves decoded bytes already buffered into `buf`.
    fn take_buffered(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        match &mut self.decoding {
            Decoding::Length { remaining } => {
                let n = (*remaining).min(self.rbuf.len() as u64).min(buf.len() as u64) as usize;
                buf[..n].copy_from_slice(&self.rbuf.data()[..n]);
                self.rbuf.consume(n);
                *remaining -= n as u64;
                if *remaining == 0 {
                    self.progress = BodyProgress::Complete;
                }
                Ok(n)
            }
            Decoding::Chunked(decoder) => {
                let mut produced = 0;
                let progress = decoder
                    .decode_limited(self.rbuf.data(), buf.len(), |chunk| {
                        buf[produced..produced + chunk.len()].copy_from_slice(chunk);
                        produced += chunk.len();
                    })
                    .map_err(chunked_error)?;
                self.rbuf.consume(progress.consumed);
                if progress.done {
                    self.progress = BodyProgress::Complete;
                }
                Ok(produced)
            }
        }
    }
}

fn chunked_error(e: ChunkedError) -> Error {
    match e {
        ChunkedError::TooLarge => Error::payload_too_large("request body too large"),
        ChunkedError::Invalid(why) => Error::bad_request(format!("invalid chunked body: {why}")),
    }
}

/// A request body being streamed to a handler.
pub struct Body {
    inner: Rc<RefCell<Option<BodyInner>>>,
}

/// Puts the body state back into its cell when a read ends, including when
/// the reading future is dropped half-way.
struct Lent<'a> {
    cell: &'a RefCell<Option<BodyInner>>,
    inner: Option<BodyInner>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        *self.cell.borrow_mut() = self.inner.take();
    }
}

impl Body {
    pub(crate) fn new(inner: Rc<RefCell<Option<BodyInner>>>) -> Body {
        Body { inner }
    }

    /// Reads the next bytes of the body into `buf`; `Ok(0)` at the end.
    ///
    /// Errors are ready-made responses: `400` for invalid chunked framing or
    /// a body cut short, `413` over the size limit. A client that stalls
    /// past the I/O timeout is disconnected, which ends the body early.
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Take the state out of the cell so no borrow is held across the
        // awaits below; the guard puts it back.
        let taken = self.inner.borrow_mut().take();
        let mut lent = Lent { cell: &self.inner, inner: taken };
        let Some(inner) = lent.inner.as_mut() else {
            return Err(Error::bad_request("request body unreadable"));
        };
        inner.read(buf).await
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
            if out.len() + n > limit {
                return Err(Error::payload_too_large("request body too large"));
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// Bytes handed to the handler so far.
    pub fn bytes_read(&self) -> u64 {
        self.inner.borrow().as_ref().map_or(0, |inner| inner.read_so_far)
    }
}
