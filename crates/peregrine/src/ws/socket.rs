//! [`WebSocket`]: one upgraded connection as handlers see it: `recv`,
//! `send`, `feed` / `flush`, `close`.
//!
//! The socket owns the worker's transport and runs on the connection's own
//! task; nothing here is shared or locked. Input is read only while the
//! handler waits in [`WebSocket::recv`], so a handler that stops reading
//! makes TCP push back on the client. `recv` is cancel-safe (all state
//! lives in the socket, and output is flushed from where it stopped), so a
//! handler can `select!` between it and its own channels. While it waits,
//! `recv` also answers pings, sends keepalive pings, enforces the idle and
//! ping timeouts, and notices the server shutting down (close `1001`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Poll, Waker};

use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::deflate::Deflater;
use super::frame::{encode_header, OpCode};
use super::read::{Event, ProtocolError, Reader};
use super::{CloseCode, CloseFrame, Message, WebSocketConfig, WsError};
use crate::upgrade::{Upgraded, UpgradedIo};
use crate::worker::timer::{ConnTimer, Wait};
use crate::worker::Worker;

/// Output capacity kept after a flush; a larger buffer (a big message) is
/// released.
const KEEP_OUT_CAPACITY: usize = 64 << 10;
/// The read buffer always holds a whole control frame (14 + 125 bytes).
const MIN_READ_BUFFER: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    /// Our close frame is queued or sent; waiting for the client's.
    CloseSent,
    Closed,
}

/// What waiting for input brought.
enum Input {
    Bytes,
    Ended,
    Shutdown,
    Timer,
}

/// Keepalive and idle deadlines, checked lazily: the timer is only reset
/// when it fires, and input is stamped with the worker's coarse clock
/// ([`Worker::coarse_now`]: two loads, where `Instant::now()` was 35 of
/// an echo's instructions), so input costs no clock read. The stamp is
/// late by up to a second, never early: the ping and idle deadlines come
/// at least their configured time after the last input or data, and at
/// most about a second more.
struct Keepalive {
    sleep: Pin<Box<Sleep>>,
    /// The last input's coarse stamp (at most about a second late).
    last_input: Instant,
    /// The last data message's coarse stamp.
    last_data: Instant,
    ping_sent: Option<Instant>,
    /// Input arrived since the last keepalive ping was sent (which the
    /// coarse stamps cannot tell to the moment).
    heard: bool,
    /// Whether `sleep` holds a waker for its current deadline.
    armed: bool,
}

/// A WebSocket connection; see the [module docs](super).
pub struct WebSocket {
    io: UpgradedIo,
    rbuf: Box<[u8]>,
    rstart: usize,
    rend: usize,
    reader: Reader,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    out_pos: usize,
    deflater: Option<Deflater>,
    scratch: Vec<u8>,
    state: State,
    keepalive: Option<Keepalive>,
    config: Rc<WebSocketConfig>,
    protocol: Option<String>,
    worker: Rc<Worker>,
    timer: Rc<ConnTimer>,
    /// A message is part-way in, and its waits so far against the minimum
    /// rate: seconds waited and bytes received (see `wait_for_input`).
    receiving: bool,
    inbound: (u64, u64),
    peer: Option<std::net::SocketAddr>,
    /// Where the worker keeps our waker for shutdown.
    shutdown_slot: Option<usize>,
    /// The waker the shutdown slot and the keepalive timer hold.
    waker: Option<Waker>,
}

impl std::fmt::Debug for WebSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocket")
            .field("state", &self.state)
            .field("protocol", &self.protocol)
            .field("compressed", &self.deflater.is_some())
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl WebSocket {
    pub(crate) fn new(
        upgraded: Upgraded,
        config: Rc<WebSocketConfig>,
        protocol: Option<String>,
        deflate: Option<super::deflate::Agreed>,
    ) -> WebSocket {
        let Upgraded { io, read_ahead, peer, worker, timer } = upgraded;
        let mut rbuf = vec![0u8; config.read_buffer_bytes.max(MIN_READ_BUFFER).max(read_ahead.len())];
        rbuf[..read_ahead.len()].copy_from_slice(&read_ahead);
        let now = Instant::now();
        let keepalive = (config.idle_timeout.is_some() || config.ping_interval.is_some()).then(|| {
            let first =
                [config.idle_timeout, config.ping_interval].into_iter().flatten().min().unwrap_or_default();
            Keepalive {
                sleep: Box::pin(tokio::time::sleep_until(now + first)),
                last_input: now,
                last_data: now,
                ping_sent: None,
                heard: false,
                armed: false,
            }
        });
        WebSocket {
            io,
            rbuf: rbuf.into_boxed_slice(),
            rstart: 0,
            rend: read_ahead.len(),
            reader: Reader::new(
                config.max_frame_bytes,
                config.max_message_bytes,
                deflate.map(super::deflate::Inflater::new),
            ),
            out: Vec::new(),
            out_pos: 0,
            deflater: deflate.map(Deflater::new),
            scratch: Vec::new(),
            state: State::Open,
            keepalive,
            config,
            protocol,
            worker,
            timer,
            receiving: false,
            inbound: (0, 0),
            peer,
            shutdown_slot: None,
            waker: None,
        }
    }

    /// The subprotocol agreed in the handshake.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// Whether permessage-deflate was agreed.
    pub fn is_compressed(&self) -> bool {
        self.deflater.is_some()
    }

    /// The client's address.
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.peer
    }

    /// Whether the socket is closed or closing: nothing more can be sent.
    pub fn is_closed(&self) -> bool {
        self.state != State::Open
    }

    /// The next message, `None` once the socket is closed.
    ///
    /// A close from the client is answered, then returned as
    /// [`Message::Close`]; a protocol error is answered with a close frame
    /// carrying its code, then returned as [`WsError::Protocol`]. Pings
    /// are answered (and pongs swallowed) unless
    /// [`WebSocketConfig::auto_pong`] is off. Cancel-safe.
    pub async fn recv(&mut self) -> Option<Result<Message, WsError>> {
        loop {
            if self.state == State::Closed {
                return None;
            }
            match self.decode_buffered() {
                Err(e) => {
                    self.close_with(e.code, e.reason).await;
                    return Some(Err(WsError::Protocol { code: e.code, reason: e.reason }));
                }
                Ok(Some(event)) => {
                    if let Some(item) = self.on_event(event).await {
                        return item;
                    }
                    continue;
                }
                Ok(None) => {}
            }
            if let Err(e) = self.flush_out().await {
                self.state = State::Closed;
                return Some(Err(WsError::Io(e)));
            }
            match self.wait_for_input().await {
                Input::Bytes => {}
                Input::Ended if self.timer.read_timed_out() => {
                    // The worker's sweep cut a message arriving below the
                    // minimum rate (it ends only the read side, so the
                    // close can still be said).
                    self.close_with(CloseCode::POLICY, "message arriving too slowly").await;
                    return None;
                }
                Input::Ended => {
                    self.state = State::Closed;
                    return None;
                }
                Input::Shutdown => {
                    self.close_with(CloseCode::GOING_AWAY, "server shutting down").await;
                    return None;
                }
                Input::Timer => {
                    if let Some((code, reason)) = self.on_timer() {
                        self.close_with(code, reason).await;
                        return None;
                    }
                }
            }
        }
    }

    /// What an event means for the handler: `Some` to return it.
    async fn on_event(&mut self, event: Event) -> Option<Option<Result<Message, WsError>>> {
        match event {
            // After our close, only the client's close matters.
            Event::Data(_) | Event::Ping(_) | Event::Pong(_) if self.state != State::Open => None,
            Event::Data(message) => {
                if let Some(k) = &mut self.keepalive {
                    k.last_data = k.last_input;
                }
                Some(Some(Ok(message)))
            }
            Event::Ping(payload) if self.config.auto_pong => {
                self.encode_control(OpCode::Pong, &payload);
                None
            }
            Event::Ping(payload) => Some(Some(Ok(Message::Ping(payload)))),
            Event::Pong(_) if self.config.auto_pong => None,
            Event::Pong(payload) => Some(Some(Ok(Message::Pong(payload)))),
            Event::Close(frame) => {
                let answered = self.state == State::CloseSent;
                if !answered {
                    // Echo the code (§5.5.1); no code, no payload.
                    let payload = frame.as_ref().map(|f| f.code.0.to_be_bytes()).unwrap_or_default();
                    let len = if frame.is_some() { 2 } else { 0 };
                    self.encode_control(OpCode::Close, &payload[..len]);
                }
                let _ = self.flush_out().await;
                self.end().await;
                Some(if answered { None } else { Some(Ok(Message::Close(frame))) })
            }
        }
    }

    /// Decodes the next event from what is buffered.
    fn decode_buffered(&mut self) -> Result<Option<Event>, ProtocolError> {
        loop {
            let (n, event) = self.reader.decode(&mut self.rbuf[self.rstart..self.rend])?;
            self.rstart += n;
            if self.rstart == self.rend {
                self.rstart = 0;
                self.rend = 0;
            }
            if event.is_some() || n == 0 {
                return Ok(event);
            }
        }
    }

    /// Reads more input, or learns that the server is shutting down or a
    /// keepalive deadline is due.
    ///
    /// Written by hand rather than as a `select!` over the read, a
    /// shutdown `Notified` and the keepalive `Sleep`: the shutdown waker
    /// and the timer keep the waker they were given until it changes, so
    /// a wait that finds input costs one read and two flag checks. With
    /// the `select!`, linking and unlinking the `Notified` and polling the
    /// `Sleep` were 160 of an echo's 2,745 instructions.
    async fn wait_for_input(&mut self) -> Input {
        if self.rstart > 0 && self.rbuf.len() - self.rend < MIN_READ_BUFFER {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        if self.rstart < self.rend || self.reader.mid_message() {
            // A message is part-way in: the time spent waiting for its
            // bytes is held to the minimum request-body rate, as a request
            // body's is. Every trickled byte is input, so neither the
            // keepalive ping nor a read deadline would ever cut a client
            // sending a frame a byte a second. Only waits count: the
            // counters are set aside while the handler runs or the socket
            // writes (a pong, say), so neither the handler's time nor a
            // ping between fragments restarts or spends the client's.
            if !self.receiving {
                self.receiving = true;
                self.inbound = (0, 0);
            }
            self.timer.transfer_ticks.set(self.inbound.0);
            self.timer.transferred.set(self.inbound.1);
            self.timer.arm(Wait::Body, self.worker.deadline_after(self.worker.config.io_timeout));
        } else {
            self.receiving = false;
            self.timer.arm(Wait::Busy, u64::MAX);
        }
        let WebSocket { io, rbuf, rend, keepalive, worker, shutdown_slot, waker, timer, .. } = self;
        let input = std::future::poll_fn(|cx| {
            let mut buf = ReadBuf::new(&mut rbuf[*rend..]);
            match Pin::new(&mut *io).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Input::Ended),
                Poll::Ready(Ok(())) => {
                    *rend += buf.filled().len();
                    timer.moved(buf.filled().len());
                    return Poll::Ready(Input::Bytes);
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Input::Ended),
                Poll::Pending => {}
            }
            if worker.shutting_down() {
                return Poll::Ready(Input::Shutdown);
            }
            let new_waker = !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
            if new_waker {
                worker.wake_on_shutdown(shutdown_slot, cx.waker());
                *waker = Some(cx.waker().clone());
            }
            if let Some(k) = keepalive {
                // A `Sleep` keeps the waker it was last polled with until
                // it fires (and gives it up then): poll it again only for a
                // new waker or a new deadline.
                if new_waker || !k.armed {
                    if k.sleep.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Input::Timer);
                    }
                    k.armed = true;
                } else if k.sleep.is_elapsed() {
                    return Poll::Ready(Input::Timer);
                }
            }
            Poll::Pending
        })
        .await;
        if self.receiving {
            self.inbound = (self.timer.transfer_ticks.get(), self.timer.transferred.get());
            self.timer.arm(Wait::Busy, u64::MAX);
        }
        if let (Input::Bytes, Some(k)) = (&input, &mut self.keepalive) {
            k.last_input = Instant::from_std(self.worker.coarse_now());
            k.heard = true;
        }
        input
    }

    /// Acts on a due keepalive deadline: sends a ping, or says why the
    /// socket must close. Re-arms the timer for the next deadline.
    fn on_timer(&mut self) -> Option<(CloseCode, &'static str)> {
        let config = Rc::clone(&self.config);
        let k = self.keepalive.as_mut()?;
        let now = Instant::now();
        // A coarse stamp may lie ahead of now: the input came at the latest now.
        k.last_input = k.last_input.min(now);
        k.last_data = k.last_data.min(now);
        if k.heard {
            k.ping_sent = None;
        }
        if let Some(idle) = config.idle_timeout {
            if now >= k.last_data + idle {
                return Some((CloseCode::GOING_AWAY, "idle timeout"));
            }
        }
        let mut send_ping = false;
        let ping_due = match (k.ping_sent, config.ping_interval) {
            (Some(sent), _) if now >= sent + config.ping_timeout => {
                return Some((CloseCode::INTERNAL, "keepalive ping timeout"));
            }
            (Some(sent), _) => Some(sent + config.ping_timeout),
            (None, Some(interval)) if now >= k.last_input + interval => {
                send_ping = true;
                k.ping_sent = Some(now);
                k.heard = false;
                Some(now + config.ping_timeout)
            }
            (None, Some(interval)) => Some(k.last_input + interval),
            (None, None) => None,
        };
        let idle_due = config.idle_timeout.map(|idle| k.last_data + idle);
        let next = [ping_due, idle_due].into_iter().flatten().min().unwrap_or(now + config.ping_timeout);
        k.sleep.as_mut().reset(next);
        k.armed = false;
        if send_ping {
            self.encode_control(OpCode::Ping, b"");
        }
        None
    }

    /// Sends a message: queues it, then writes everything queued.
    /// A [`Message::Close`] starts the close handshake (see
    /// [`WebSocket::close`]).
    pub async fn send(&mut self, message: impl Into<Message>) -> Result<(), WsError> {
        self.feed(message).await?;
        self.flush().await
    }

    /// Queues a message without writing it, unless the queue already holds
    /// [`WebSocketConfig::write_buffer_bytes`]: then it first waits until
    /// the client has taken what is queued. Pair with
    /// [`WebSocket::flush`] to write a batch with one syscall.
    pub async fn feed(&mut self, message: impl Into<Message>) -> Result<(), WsError> {
        if self.state != State::Open {
            return Err(WsError::Closed);
        }
        let message = message.into();
        if let Message::Close(frame) = message {
            let (code, reason) =
                frame.map(|f| (f.code, f.reason)).unwrap_or((CloseCode::NORMAL, String::new()));
            return self.close(code, &reason).await;
        }
        if self.out.len() - self.out_pos >= self.config.write_buffer_bytes {
            self.flush().await?;
        }
        match &message {
            Message::Text(text) => self.encode_data(OpCode::Text, text.as_bytes()),
            Message::Binary(data) => self.encode_data(OpCode::Binary, data),
            Message::Ping(p) | Message::Pong(p) if p.len() > 125 => {
                return Err(WsError::Invalid("ping and pong payloads are at most 125 bytes"));
            }
            Message::Ping(p) => self.encode_control(OpCode::Ping, p),
            Message::Pong(p) => self.encode_control(OpCode::Pong, p),
            Message::Close(_) => {}
        }
        // The message is copied out: its buffer can carry the next one in.
        self.reader.recycle(message);
        Ok(())
    }

    /// Writes everything queued, waiting for the client to take it.
    pub async fn flush(&mut self) -> Result<(), WsError> {
        self.flush_out().await.map_err(|e| {
            self.state = State::Closed;
            WsError::Io(e)
        })
    }

    /// Starts the close handshake with `code` and `reason` (cut to 123
    /// bytes), waits (up to [`WebSocketConfig::close_timeout`]) for the
    /// client's close frame, and closes the connection.
    pub async fn close(&mut self, code: CloseCode, reason: &str) -> Result<(), WsError> {
        if self.state != State::Open {
            return Err(WsError::Closed);
        }
        self.close_with(code, reason).await;
        Ok(())
    }

    /// Sends our close frame (if not sent), waits for the client's, ends.
    async fn close_with(&mut self, code: CloseCode, reason: &str) {
        if self.state == State::Open {
            self.encode_close(code, reason);
            self.state = State::CloseSent;
        }
        if self.flush_out().await.is_err() {
            self.state = State::Closed;
            return;
        }
        let timeout = self.config.close_timeout;
        let wait_for_close = async {
            loop {
                match self.decode_buffered() {
                    Ok(Some(Event::Close(_))) | Err(_) => return,
                    Ok(Some(_)) => continue,
                    Ok(None) => {}
                }
                if self.rstart > 0 {
                    self.rbuf.copy_within(self.rstart..self.rend, 0);
                    self.rend -= self.rstart;
                    self.rstart = 0;
                }
                match self.io.read(&mut self.rbuf[self.rend..]).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => self.rend += n,
                }
            }
        };
        let _ = tokio::time::timeout(timeout, wait_for_close).await;
        self.end().await;
    }

    /// Closes the transport: the server closes TCP first (§7.1.1).
    async fn end(&mut self) {
        self.state = State::Closed;
        let _ = self.io.shutdown().await;
        // The buffers are no longer needed while the handler finishes.
        self.rbuf = Box::default();
        (self.rstart, self.rend) = (0, 0);
        self.out = Vec::new();
        self.out_pos = 0;
    }

    fn encode_data(&mut self, opcode: OpCode, payload: &[u8]) {
        match &mut self.deflater {
            Some(deflater) if payload.len() >= self.config.compress_min_bytes => {
                self.scratch.clear();
                deflater.deflate(payload, &mut self.scratch);
                encode_header(&mut self.out, true, true, opcode, self.scratch.len());
                self.out.extend_from_slice(&self.scratch);
                if self.scratch.capacity() > KEEP_OUT_CAPACITY {
                    self.scratch = Vec::new();
                }
            }
            _ => {
                self.out.reserve(payload.len() + 10);
                encode_header(&mut self.out, true, false, opcode, payload.len());
                self.out.extend_from_slice(payload);
            }
        }
    }

    fn encode_control(&mut self, opcode: OpCode, payload: &[u8]) {
        encode_header(&mut self.out, true, false, opcode, payload.len());
        self.out.extend_from_slice(payload);
    }

    fn encode_close(&mut self, code: CloseCode, reason: &str) {
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let mut payload = [0u8; 125];
        payload[..2].copy_from_slice(&code.0.to_be_bytes());
        payload[2..2 + end].copy_from_slice(&reason.as_bytes()[..end]);
        self.encode_control(OpCode::Close, &payload[..2 + end]);
    }

    /// Writes what is queued, from where the last (possibly cancelled)
    /// write stopped. A client that does not read for the server's I/O
    /// timeout, or reads slower than the minimum response rate, is cut off
    /// by the worker's sweep, as an HTTP/1.1 response's reader would be.
    async fn flush_out(&mut self) -> io::Result<()> {
        if self.out_pos == self.out.len() {
            return Ok(());
        }
        let io_timeout = self.worker.config.io_timeout;
        self.timer.arm(Wait::Write, self.worker.deadline_after(io_timeout));
        self.timer.begin_transfer();
        // Most messages fit the socket at once: try that first.
        if let UpgradedIo::Conn(io) = &self.io {
            match io.try_write_now(&self.out[self.out_pos..]) {
                Ok(n) => {
                    self.out_pos += n;
                    self.timer.moved(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        while self.out_pos < self.out.len() {
            let n = self.io.write(&self.out[self.out_pos..]).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.out_pos += n;
            self.timer.moved(n);
            self.timer.deadline.set(self.worker.deadline_after(io_timeout));
        }
        self.timer.arm(Wait::Busy, u64::MAX);
        self.out.clear();
        self.out_pos = 0;
        if self.out.capacity() > KEEP_OUT_CAPACITY {
            self.out = Vec::new();
        }
        Ok(())
    }
}

impl Drop for WebSocket {
    /// A handler that returns without closing: send a close frame if the
    /// socket can take it now (`1000`, or `1001` in shutdown), then close.
    fn drop(&mut self) {
        self.worker.forget_shutdown_waker(&mut self.shutdown_slot);
        if self.state == State::Open {
            let code = if self.worker.shutting_down() { CloseCode::GOING_AWAY } else { CloseCode::NORMAL };
            self.encode_close(code, "");
            self.state = State::Closed;
            let _ = self.flush_out().now_or_never();
            let _ = self.io.shutdown().now_or_never();
        }
    }
}

/// A close frame to send: `code` and `reason`.
impl From<(CloseCode, &str)> for CloseFrame {
    fn from((code, reason): (CloseCode, &str)) -> CloseFrame {
        CloseFrame { code, reason: reason.to_owned() }
    }
}
