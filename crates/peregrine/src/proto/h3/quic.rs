//! `h3`'s transport traits ([`h3::quic`]) on quinn's connection and
//! streams: the glue `h3-quinn` provides, kept here because `h3-quinn`
//! keeps quinn's streams private. Through its types the server could not
//! learn that a client stopped (`STOP_SENDING`) or reset (`RESET_STREAM`)
//! a request stream while the handler runs, nor count the bytes a stream
//! moves for the minimum data rates. Here every request stream gets a
//! [`Probe`]: what the stream task needs to watch for a cancel and to pace
//! the client.
//!
//! Reads use quinn's `read_chunk` (cancel-safe, no copy) polled in place,
//! where `h3-quinn` boxes each read in a reusable future; writes are
//! quinn's `write` polled in place, as `h3-quinn` does.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use futures_util::stream::{self, Stream, StreamExt};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use quinn::VarInt;

type Accepting<T> = Pin<Box<dyn Stream<Item = Result<T, quinn::ConnectionError>>>>;
type Opening<T> = Pin<Box<dyn Future<Output = Result<T, quinn::ConnectionError>>>>;

/// What a request stream's task watches: quinn's request side (shared with
/// the [`RequestRecv`] `h3` reads through), the bytes the stream moved each
/// way, and the client's `STOP_SENDING`.
///
/// quinn tells a reset only to a read (`received_reset` leaves a waker
/// behind, which quinn asserts is gone once the stream is read to its
/// end), so while nobody reads, the watch reads ahead, at most
/// [`AHEAD`] bytes, and keeps them for the next read. A handler that has
/// read all that came (or has no body) is told of a reset at once; one
/// that leaves more unread learns of it when it reads. The bound keeps
/// what the watch holds small beside the connection's window: quinn
/// gives the client credit back for what it read.
pub(super) struct Probe {
    recv: RefCell<quinn::RecvStream>,
    /// What the watch read ahead, for the next read.
    ahead: RefCell<Option<Result<Option<Bytes>, quinn::ReadError>>>,
    /// Whether a read is waiting on quinn (which then holds its waker, and
    /// will hand it a reset): the watch keeps off the stream meanwhile.
    reading: Cell<bool>,
    /// The request side is over: read to its end, failed, or stopped.
    ended: Cell<bool>,
    /// Request stream bytes read (frame headers included).
    pub(super) received: Cell<u64>,
    /// Response stream bytes quinn took (frame headers included): no more
    /// than the client's flow-control credit allows.
    pub(super) sent: Cell<u64>,
    stopped: RefCell<Option<Stopped>>,
}

type Stopped = Pin<Box<dyn Future<Output = Result<Option<VarInt>, quinn::StoppedError>>>>;

/// The most request bytes the reset watch reads ahead of the handler
/// (4 KiB; with 128 streams, half a MiB a connection at worst).
const AHEAD: usize = 4096;

impl Probe {
    fn new(recv: quinn::RecvStream, stopped: Option<Stopped>) -> Rc<Probe> {
        Rc::new(Probe {
            recv: RefCell::new(recv),
            ahead: RefCell::new(None),
            reading: Cell::new(false),
            ended: Cell::new(false),
            received: Cell::new(0),
            sent: Cell::new(0),
            stopped: RefCell::new(stopped),
        })
    }

    /// Reads the next chunk from quinn, at most `max` bytes.
    fn read(&self, cx: &mut Context<'_>, max: usize) -> Poll<Result<Option<Bytes>, quinn::ReadError>> {
        let read = {
            let mut recv = self.recv.borrow_mut();
            let read = pin!(recv.read_chunk(max, true)).poll(cx);
            read
        };
        match &read {
            Poll::Pending => {}
            Poll::Ready(Ok(Some(chunk))) => self.received.set(self.received.get() + chunk.bytes.len() as u64),
            Poll::Ready(_) => self.ended.set(true),
        }
        read.map(|read| read.map(|chunk| chunk.map(|chunk| chunk.bytes)))
    }

    /// Completes when the client cancels the request: it stopped the
    /// response (`STOP_SENDING`), reset the request before its end
    /// (`RESET_STREAM`), or the connection is gone.
    pub(super) async fn cancelled(&self) {
        std::future::poll_fn(|cx| {
            let mut stopped = self.stopped.borrow_mut();
            if let Some(watch) = stopped.as_mut() {
                match watch.as_mut().poll(cx) {
                    Poll::Ready(Ok(Some(_)) | Err(_)) => return Poll::Ready(()),
                    // Finished and acknowledged: nothing left to stop.
                    Poll::Ready(Ok(None)) => *stopped = None,
                    Poll::Pending => {}
                }
            }
            drop(stopped);
            if !self.reading.get() && !self.ended.get() && self.ahead.borrow().is_none() {
                match self.read(cx, AHEAD) {
                    Poll::Ready(Err(quinn::ReadError::Reset(_) | quinn::ReadError::ConnectionLost(_))) => {
                        return Poll::Ready(())
                    }
                    Poll::Ready(read) => *self.ahead.borrow_mut() = Some(read),
                    Poll::Pending => {}
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// A QUIC connection as `h3` sees it. `accepted` holds the [`Probe`] of
/// the request stream accepted last, for the connection driver to hand
/// to the stream's task (`h3` hands out a request stream after each
/// accept, or refuses it and accepts the next).
pub(super) struct Conn {
    incoming_bi: Accepting<(quinn::SendStream, quinn::RecvStream)>,
    incoming_uni: Accepting<quinn::RecvStream>,
    opener: Opener,
    accepted: Rc<RefCell<Option<Rc<Probe>>>>,
}

impl Conn {
    pub(super) fn new(conn: quinn::Connection) -> (Conn, Rc<RefCell<Option<Rc<Probe>>>>) {
        let accepted = Rc::new(RefCell::new(None));
        let bi = stream::unfold(conn.clone(), |conn| async { Some((conn.accept_bi().await, conn)) });
        let uni = stream::unfold(conn.clone(), |conn| async { Some((conn.accept_uni().await, conn)) });
        let conn = Conn {
            incoming_bi: Box::pin(bi),
            incoming_uni: Box::pin(uni),
            opener: Opener { conn, opening_bi: None, opening_uni: None },
            accepted: Rc::clone(&accepted),
        };
        (conn, accepted)
    }
}

fn connection_error(e: quinn::ConnectionError) -> ConnectionErrorIncoming {
    match e {
        quinn::ConnectionError::ApplicationClosed(close) => {
            ConnectionErrorIncoming::ApplicationClose { error_code: close.error_code.into_inner() }
        }
        quinn::ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        e => ConnectionErrorIncoming::Undefined(std::sync::Arc::new(e)),
    }
}

fn stream_error(e: quinn::ConnectionError) -> StreamErrorIncoming {
    StreamErrorIncoming::ConnectionErrorIncoming { connection_error: connection_error(e) }
}

fn read_error(e: quinn::ReadError) -> StreamErrorIncoming {
    match e {
        quinn::ReadError::Reset(code) => {
            StreamErrorIncoming::StreamTerminated { error_code: code.into_inner() }
        }
        quinn::ReadError::ConnectionLost(e) => stream_error(e),
        e => StreamErrorIncoming::Unknown(Box::new(e)),
    }
}

fn write_error(e: quinn::WriteError) -> StreamErrorIncoming {
    match e {
        quinn::WriteError::Stopped(code) => {
            StreamErrorIncoming::StreamTerminated { error_code: code.into_inner() }
        }
        quinn::WriteError::ConnectionLost(e) => stream_error(e),
        e => StreamErrorIncoming::Unknown(Box::new(e)),
    }
}

fn stream_id(id: quinn::StreamId) -> StreamId {
    // quinn's stream ids are QUIC varints, which is all `h3` accepts.
    StreamId::try_from(u64::from(id)).unwrap_or_else(|_| unreachable!("a QUIC stream id is a varint"))
}

fn code(code: u64) -> VarInt {
    VarInt::from_u64(code).unwrap_or(VarInt::MAX)
}

impl<B: Buf> quic::Connection<B> for Conn {
    type RecvStream = UniRecv;
    type OpenStreams = Opener;

    fn poll_accept_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<UniRecv, ConnectionErrorIncoming>> {
        match ready!(self.incoming_uni.poll_next_unpin(cx)) {
            Some(Ok(recv)) => Poll::Ready(Ok(UniRecv(recv))),
            Some(Err(e)) => Poll::Ready(Err(connection_error(e))),
            None => Poll::Ready(Err(ConnectionErrorIncoming::InternalError("accept ended".into()))),
        }
    }

    fn poll_accept_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bidi<B>, ConnectionErrorIncoming>> {
        let (send, recv) = match ready!(self.incoming_bi.poll_next_unpin(cx)) {
            Some(Ok(streams)) => streams,
            Some(Err(e)) => return Poll::Ready(Err(connection_error(e))),
            None => return Poll::Ready(Err(ConnectionErrorIncoming::InternalError("accept ended".into()))),
        };
        let probe = Probe::new(recv, Some(Box::pin(send.stopped())));
        *self.accepted.borrow_mut() = Some(Rc::clone(&probe));
        Poll::Ready(Ok(Bidi {
            send: Send { stream: send, writing: None, probe: Some(Rc::clone(&probe)) },
            recv: RequestRecv(probe),
        }))
    }

    fn opener(&self) -> Opener {
        Opener { conn: self.opener.conn.clone(), opening_bi: None, opening_uni: None }
    }
}

impl<B: Buf> quic::OpenStreams<B> for Conn {
    type BidiStream = Bidi<B>;
    type SendStream = Send<B>;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bidi<B>, StreamErrorIncoming>> {
        self.opener.poll_open_bidi(cx)
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<Send<B>, StreamErrorIncoming>> {
        self.opener.poll_open_send(cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        <Opener as quic::OpenStreams<B>>::close(&mut self.opener, code, reason);
    }
}

/// Opens the streams the server starts: its control stream (and a
/// bidirectional one, which an HTTP/3 server never opens).
pub(super) struct Opener {
    conn: quinn::Connection,
    opening_bi: Option<Opening<(quinn::SendStream, quinn::RecvStream)>>,
    opening_uni: Option<Opening<quinn::SendStream>>,
}

impl<B: Buf> quic::OpenStreams<B> for Opener {
    type BidiStream = Bidi<B>;
    type SendStream = Send<B>;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bidi<B>, StreamErrorIncoming>> {
        let conn = &self.conn;
        let opening = self.opening_bi.get_or_insert_with(|| {
            let conn = conn.clone();
            Box::pin(async move { conn.open_bi().await })
        });
        let opened = ready!(opening.as_mut().poll(cx));
        self.opening_bi = None;
        let (send, recv) = opened.map_err(stream_error)?;
        let probe = Probe::new(recv, None);
        Poll::Ready(Ok(Bidi {
            send: Send { stream: send, writing: None, probe: None },
            recv: RequestRecv(probe),
        }))
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<Send<B>, StreamErrorIncoming>> {
        let conn = &self.conn;
        let opening = self.opening_uni.get_or_insert_with(|| {
            let conn = conn.clone();
            Box::pin(async move { conn.open_uni().await })
        });
        let opened = ready!(opening.as_mut().poll(cx));
        self.opening_uni = None;
        let send = opened.map_err(stream_error)?;
        Poll::Ready(Ok(Send { stream: send, writing: None, probe: None }))
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        self.conn.close(VarInt::from_u64(code.value()).unwrap_or(VarInt::MAX), reason);
    }
}

/// A request stream before `h3` splits it.
pub(super) struct Bidi<B: Buf> {
    send: Send<B>,
    recv: RequestRecv,
}

impl<B: Buf> quic::BidiStream<B> for Bidi<B> {
    type SendStream = Send<B>;
    type RecvStream = RequestRecv;

    fn split(self) -> (Send<B>, RequestRecv) {
        (self.send, self.recv)
    }
}

impl<B: Buf> quic::RecvStream for Bidi<B> {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code);
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> quic::SendStream<B> for Bidi<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code);
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

/// The request side of a request stream, read through its [`Probe`].
pub(super) struct RequestRecv(Rc<Probe>);

impl quic::RecvStream for RequestRecv {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let probe = &*self.0;
        let ahead = probe.ahead.borrow_mut().take();
        let read = match ahead {
            Some(read) => read,
            None => {
                let read = probe.read(cx, usize::MAX);
                probe.reading.set(read.is_pending());
                ready!(read)
            }
        };
        Poll::Ready(read.map_err(read_error))
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.0.ended.set(true);
        // Fails only when the stream is already over: nothing to stop.
        let _ = self.0.recv.borrow_mut().stop(code(error_code));
    }

    fn recv_id(&self) -> StreamId {
        stream_id(self.0.recv.borrow().id())
    }
}

/// A stream the client opened one way: its control stream, QPACK streams.
pub(super) struct UniRecv(quinn::RecvStream);

impl quic::RecvStream for UniRecv {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        match ready!(pin!(self.0.read_chunk(usize::MAX, true)).poll(cx)) {
            Ok(chunk) => Poll::Ready(Ok(chunk.map(|c| c.bytes))),
            Err(e) => Poll::Ready(Err(read_error(e))),
        }
    }

    fn stop_sending(&mut self, error_code: u64) {
        let _ = self.0.stop(code(error_code));
    }

    fn recv_id(&self) -> StreamId {
        stream_id(self.0.id())
    }
}

/// A stream the server sends on: a response, or its control stream.
pub(super) struct Send<B: Buf> {
    stream: quinn::SendStream,
    /// The frame `h3` gave last, until quinn has taken all of it.
    writing: Option<WriteBuf<B>>,
    /// A response's probe, which counts what quinn took.
    probe: Option<Rc<Probe>>,
}

impl<B: Buf> quic::SendStream<B> for Send<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(data) = &mut self.writing {
            while data.has_remaining() {
                let written = ready!(pin!(self.stream.write(data.chunk())).poll(cx)).map_err(write_error)?;
                data.advance(written);
                if let Some(probe) = &self.probe {
                    probe.sent.set(probe.sent.get() + written as u64);
                }
            }
        }
        self.writing = None;
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            // `h3` waits for `poll_ready` before each frame.
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError(
                    "frame sent before the last was".into(),
                ),
            });
        }
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        Poll::Ready(self.stream.finish().map_err(|e| StreamErrorIncoming::Unknown(Box::new(e))))
    }

    fn reset(&mut self, reset_code: u64) {
        let _ = self.stream.reset(code(reset_code));
    }

    fn send_id(&self) -> StreamId {
        stream_id(self.stream.id())
    }
}
