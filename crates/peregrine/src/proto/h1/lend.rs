//! Lending an HTTP/1.1 connection's input to a streaming handler.
//!
//! [`LentBody`] owns the socket and read buffer while the handler runs and
//! decodes the body through the same [`BodyDecoder`] buffered routes use.
//! The connection driver gets both back with [`LentBody::give_back`], along
//! with where the body stands, which decides whether the connection can
//! serve another request and, if decoding failed, what the answer is.

use std::cell::RefCell;
use std::rc::Rc;

use tokio::io::AsyncReadExt;

use super::body::{BodyDecoder, BodyError};
use crate::body::{BodySource, ReadFuture};
use crate::error::Error;
use crate::http::StatusCode;
use crate::worker::readbuf::ReadBuf;
use crate::worker::timer::{ConnTimer, Wait};
use crate::worker::transport::Io;
use crate::worker::Worker;

/// Smallest read asked of the kernel while streaming a body.
const BODY_READ: usize = 16 * 1024;

/// Where a streamed body stands when its handler returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyProgress {
    /// Read to its end: the connection can serve the next request.
    Complete,
    /// Not read to its end (the next request's start is unknown).
    Unfinished,
    /// The body was refused while decoding: the answer is the server's.
    Refused(BodyError),
    /// The client closed, or stalled past the I/O timeout.
    Lost,
}

/// The socket, read buffer and decoder of a body being streamed.
pub(crate) struct Lent {
    stream: Io,
    rbuf: ReadBuf,
    decoder: BodyDecoder,
    progress: BodyProgress,
    read_so_far: u64,
    worker: Rc<Worker>,
    timer: Rc<ConnTimer>,
}

/// A body lent to a handler. The state sits in a cell so that no borrow is
/// held across an await: a read takes it out and puts it back, even when
/// the reading future is dropped half-way.
pub(crate) struct LentBody {
    cell: RefCell<Option<Lent>>,
}

impl LentBody {
    pub(crate) fn new(
        stream: Io,
        rbuf: ReadBuf,
        decoder: BodyDecoder,
        worker: Rc<Worker>,
        timer: Rc<ConnTimer>,
    ) -> LentBody {
        let progress = if decoder.is_done() { BodyProgress::Complete } else { BodyProgress::Unfinished };
        timer.begin_transfer();
        LentBody {
            cell: RefCell::new(Some(Lent { stream, rbuf, decoder, progress, read_so_far: 0, worker, timer })),
        }
    }

    /// Takes the connection's input back. `None` if a read was still in
    /// progress (a handler that leaked its body into a task of its own).
    pub(crate) fn give_back(self) -> Option<(Io, ReadBuf, BodyProgress)> {
        self.cell.into_inner().map(|lent| (lent.stream, lent.rbuf, lent.progress))
    }
}

/// Puts the state back into its cell when a read ends.
struct Guard<'a> {
    cell: &'a RefCell<Option<Lent>>,
    lent: Option<Lent>,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        *self.cell.borrow_mut() = self.lent.take();
    }
}

impl BodySource for LentBody {
    fn read<'a>(&'a self, buf: &'a mut [u8]) -> ReadFuture<'a> {
        Box::pin(async move {
            let taken = self.cell.borrow_mut().take();
            let mut guard = Guard { cell: &self.cell, lent: taken };
            match guard.lent.as_mut() {
                Some(lent) => lent.read(buf).await,
                None => Err(Error::bad_request("request body unreadable")),
            }
        })
    }

    fn bytes_read(&self) -> u64 {
        self.cell.borrow().as_ref().map_or(0, |lent| lent.read_so_far)
    }
}

impl Lent {
    async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        loop {
            match self.progress {
                BodyProgress::Complete => return Ok(0),
                BodyProgress::Refused(e) => return Err(body_error(e)),
                BodyProgress::Lost => return Err(Error::bad_request("request body ended early")),
                BodyProgress::Unfinished => {}
            }
            if !self.rbuf.is_empty() {
                let mut produced = 0;
                let decoded = self.decoder.decode(self.rbuf.data(), buf.len(), |chunk| {
                    buf[produced..produced + chunk.len()].copy_from_slice(chunk);
                    produced += chunk.len();
                });
                match decoded {
                    Ok(d) => {
                        self.rbuf.consume(d.consumed);
                        if d.done {
                            self.progress = BodyProgress::Complete;
                        }
                        if produced > 0 || d.done {
                            self.read_so_far += produced as u64;
                            return Ok(produced);
                        }
                    }
                    Err(e) => {
                        self.progress = BodyProgress::Refused(e);
                        return Err(body_error(e));
                    }
                }
            }
            // A length-framed body with nothing buffered is read straight
            // into the handler's buffer: one copy (kernel to handler)
            // instead of two, and reads as large as the handler asks for.
            // On a 20 MB upload the second copy was 7% of the server's CPU.
            let direct = match self.decoder.remaining_length() {
                Some(remaining) if remaining > 0 && self.rbuf.is_empty() && buf.len() >= BODY_READ => {
                    Some(usize::try_from(remaining).unwrap_or(usize::MAX).min(buf.len()))
                }
                _ => None,
            };
            self.timer.arm(Wait::Body, self.worker.deadline_after(self.worker.config.io_timeout));
            let read = match direct {
                Some(len) => self.stream.read(&mut buf[..len]).await,
                None => self.rbuf.read_from(&mut self.stream, BODY_READ, 0).await,
            };
            self.timer.arm(Wait::Busy, u64::MAX);
            match read {
                Ok(0) | Err(_) if self.timer.read_timed_out() => {
                    self.progress = BodyProgress::Lost;
                    return Err(Error::new(StatusCode::REQUEST_TIMEOUT, "request body too slow"));
                }
                Ok(0) | Err(_) => {
                    self.progress = BodyProgress::Lost;
                    return Err(Error::bad_request("request body ended early"));
                }
                Ok(n) => {
                    self.timer.moved(n);
                    if direct.is_none() {
                        continue;
                    }
                    // The bytes are already where the handler wants them:
                    // the decoder only counts them off.
                    let decoded = self.decoder.decode(&buf[..n], n, |_| {});
                    match decoded {
                        Ok(d) => {
                            if d.done {
                                self.progress = BodyProgress::Complete;
                            }
                            self.read_so_far += n as u64;
                            return Ok(n);
                        }
                        Err(e) => {
                            self.progress = BodyProgress::Refused(e);
                            return Err(body_error(e));
                        }
                    }
                }
            }
        }
    }
}

/// The error a handler sees for a refused body. The client gets the
/// server's canned answer instead, whatever the handler returns.
fn body_error(e: BodyError) -> Error {
    match e {
        BodyError::TooLarge => Error::payload_too_large("request body too large"),
        BodyError::Invalid(why) => Error::bad_request(format!("invalid chunked body: {why}")),
    }
}
