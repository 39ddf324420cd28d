//! Request bodies off an HTTP/2 stream: read whole for buffered routes
//! ([`read_to_end`]), or lent to a streaming handler ([`StreamedBody`]).
//!
//! Either way the stream's flow-control window is given back only for
//! bytes the server has taken: a buffered body into its bounded `Vec`, a
//! streamed one as the handler reads it. A handler that stops reading
//! stops the client (its window closes), so nothing piles up in memory.

use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use super::handle::RecvStream;
use bytes::Bytes;

use super::activity::Activity;
use crate::body::{BodySource, Pieces, ReadFuture, Refused};
use crate::error::Error;

/// Polls for the next non-empty DATA payload, `None` at the end of the
/// body; every payload counts as activity.
fn poll_next_data(
    recv: &mut RecvStream,
    cx: &mut Context<'_>,
    activity: &Activity,
) -> Poll<Result<Option<Bytes>, Refused>> {
    loop {
        match ready!(recv.poll_data(cx)) {
            None => return Poll::Ready(Ok(None)),
            Some(Err(e)) => {
                tracing::debug!(error = %e, "HTTP/2 request body cut short");
                return Poll::Ready(Err(Refused::Cut));
            }
            Some(Ok(data)) => {
                activity.progress(data.len());
                if !data.is_empty() {
                    return Poll::Ready(Ok(Some(data)));
                }
            }
        }
    }
}

/// The next non-empty DATA payload, `None` at the end of the body.
async fn next_data(recv: &RefCell<RecvStream>, activity: &Activity) -> Result<Option<Bytes>, Refused> {
    poll_fn(|cx| poll_next_data(&mut recv.borrow_mut(), cx, activity)).await
}

/// Appends `data` to a buffered body of at most `limit` bytes and gives
/// its window back: taken into a bounded buffer, the client may send more.
fn append(recv: &mut RecvStream, body: &mut Vec<u8>, data: &[u8], limit: u64) -> Result<(), Refused> {
    if (body.len() + data.len()) as u64 > limit {
        return Err(Refused::TooLarge);
    }
    body.extend_from_slice(data);
    recv.release_capacity(data.len());
    Ok(())
}

/// Takes the part of a body that has already arrived, without waiting,
/// into `body`; `Ok(true)` if that was all of it. A small request (a gRPC
/// unary call, a JSON POST) usually comes whole in one read, with its
/// HEADERS, and can then be answered in the connection's task.
pub(super) fn take_arrived(
    recv: &mut RecvStream,
    body: &mut Vec<u8>,
    limit: u64,
    activity: &Activity,
) -> Result<bool, Refused> {
    // A waker that does nothing: `Pending` means we stop here, and the
    // stream's task, if it gets one, polls again with its own waker.
    let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
    loop {
        match poll_next_data(recv, &mut cx, activity) {
            Poll::Pending => return Ok(false),
            Poll::Ready(Ok(None)) => return Ok(true),
            Poll::Ready(Ok(Some(data))) => append(recv, body, &data, limit)?,
            Poll::Ready(Err(refused)) => return Err(refused),
        }
    }
}

/// Reads the rest of a body of at most `limit` bytes after the `body`
/// already taken, giving the window back as it goes.
pub(super) async fn read_to_end(
    recv: RecvStream,
    mut body: Vec<u8>,
    limit: u64,
    activity: &Activity,
) -> Result<Vec<u8>, Refused> {
    let recv = RefCell::new(recv);
    while let Some(data) = next_data(&recv, activity).await? {
        append(&mut recv.borrow_mut(), &mut body, &data, limit)?;
    }
    Ok(body)
}

/// A body a streaming handler reads as it arrives.
pub(super) struct StreamedBody {
    recv: RefCell<RecvStream>,
    pieces: Pieces,
    activity: Rc<Activity>,
}

impl StreamedBody {
    pub(super) fn new(recv: RecvStream, limit: u64, activity: Rc<Activity>) -> StreamedBody {
        StreamedBody { recv: RefCell::new(recv), pieces: Pieces::new(limit), activity }
    }

    /// Why the body failed, if it did: the server answers that instead of
    /// the handler's response, as on HTTP/1.1.
    pub(super) fn refused(&self) -> Option<Refused> {
        self.pieces.refused()
    }

    async fn read_into(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let next = || async {
            let _waiting = self.activity.waiting_on_client();
            next_data(&self.recv, &self.activity).await
        };
        let n = self.pieces.read(buf, next).await?;
        // Only what the handler took opens the window again.
        self.recv.borrow_mut().release_capacity(n);
        Ok(n)
    }
}

impl BodySource for StreamedBody {
    fn read<'a>(&'a self, buf: &'a mut [u8]) -> ReadFuture<'a> {
        Box::pin(self.read_into(buf))
    }

    fn bytes_read(&self) -> u64 {
        self.pieces.handed_out()
    }
}
