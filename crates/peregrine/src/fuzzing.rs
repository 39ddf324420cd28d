//! Entry points for fuzz targets (`fuzz/`), the parser's differential test
//! and the micro-benchmarks, behind the `fuzzing` feature.
//!
//! Not part of the public API and not covered by semver: this exposes
//! internals (the HTTP/1.1 codec, the connection state machine, the route
//! matcher) with just enough surface for `cargo fuzz`, tests and criterion to
//! drive them directly.

pub use crate::http::date::{date_block, DateBlock};
pub use crate::http::Header;
pub use crate::proto::h1::chunked::{ChunkedDecoder, ChunkedError, Progress};
pub use crate::proto::h1::parse::{
    header_slots, parse_head, parse_head_using, Framing, Head, HeadLimits, HeaderSlots, ParseError,
    ParserForm, MAX_HEADERS_CAP,
};
pub use crate::proto::h2::hpack::{Decoder, Encoder, HpackError};

/// The JSON writer behind `Json` and `Response::json`, for the fuzz target
/// that holds it to serde_json's output.
pub fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), String> {
    crate::response::json::write(out, value).map_err(|e| e.to_string())
}

use std::io::IoSlice;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;
use tokio::task::LocalSet;

use crate::config::{Config, Http2Config};
use crate::pattern::Pattern;
use crate::proto::h1::conn;
use crate::proto::h2::core::{Accepted, Core};
use crate::proto::h2::frame::Reason;
use crate::router::Router;
use crate::worker::timer::Wait;
use crate::worker::transport::Io;
use crate::worker::{Registration, Worker};

/// Scheduler turns granted after each segment so the connection can consume
/// it and answer whatever it completed before the next one arrives. The
/// handlers a harness is meant for never wait on anything external, so a
/// segment is fully processed well within this many turns.
const SETTLE_TURNS: usize = 64;
/// Turns allowed, after the client has closed its side, for the connection
/// to notice and finish. Running out means the state machine hangs.
const FINISH_TURNS: usize = 10_000;

/// Runs the real connection state machine ([`conn::serve`]) over an
/// in-memory pipe on a private current-thread runtime.
#[allow(missing_debug_implementations)]
pub struct ConnectionHarness<S: 'static> {
    runtime: Runtime,
    local: LocalSet,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
}

impl<S: 'static> ConnectionHarness<S> {
    /// A harness serving `router` with the limits of `config`. Timeouts in
    /// `config` do not apply: no clock sweeps a harness's connections.
    ///
    /// # Panics
    ///
    /// If the tokio runtime cannot be built.
    pub fn new(config: Config, router: Router<S>) -> Self {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
        ConnectionHarness {
            runtime,
            local: LocalSet::new(),
            worker: Rc::new(Worker::new(config)),
            router: Rc::new(router),
        }
    }

    /// Opens a connection, sends `segments` one at a time (letting the
    /// server run to a standstill after each, so each segment boundary is a
    /// boundary the server sees), closes the client's sending side, and
    /// returns every byte the server wrote until it closed the connection.
    ///
    /// # Panics
    ///
    /// If the connection is still running after the client closed: a hang.
    pub fn run(&self, segments: &[&[u8]]) -> Vec<u8> {
        self.local.block_on(&self.runtime, async {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let (key, timer) = self.worker.register(-1);
            timer.arm(Wait::Idle, u64::MAX);
            let registration = Registration::new(Rc::clone(&self.worker), key);
            let serving = tokio::task::spawn_local(conn::serve(
                Io::Memory(server),
                None,
                // The HTTP/1.1 state machine alone: an HTTP/2 preface stays
                // an (unsupported) HTTP/1.1 request rather than handing the
                // connection to the HTTP/2 driver.
                false,
                Rc::clone(&self.worker),
                Rc::clone(&self.router),
                timer,
                registration,
            ));
            let (mut from_server, mut to_server) = tokio::io::split(client);
            // Read concurrently, so a server with lots to say never blocks
            // on a full pipe while we are still writing.
            let reader = tokio::task::spawn_local(async move {
                let mut out = Vec::new();
                let _ = from_server.read_to_end(&mut out).await;
                out
            });
            for segment in segments {
                // A server that closed early refuses further input; what it
                // wrote so far is the result.
                if to_server.write_all(segment).await.is_err() {
                    break;
                }
                settle(SETTLE_TURNS).await;
            }
            let _ = to_server.shutdown().await;
            for _ in 0..FINISH_TURNS {
                if serving.is_finished() {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert!(serving.is_finished(), "connection still running after the client closed");
            drop(to_server);
            reader.await.unwrap_or_default()
        })
    }
}

async fn settle(turns: usize) {
    for _ in 0..turns {
        tokio::task::yield_now().await;
    }
}

/// Matches `path` against the route `pattern` (`/a/{x}/{*rest}` syntax)
/// exactly as the router does, returning the raw parameter values.
///
/// # Panics
///
/// On an invalid pattern, like [`Router::route`].
pub fn capture(pattern: &str, path: &str) -> Option<Vec<String>> {
    Pattern::parse(pattern)
        .capture(path)
        .map(|(values, n)| values[..n].iter().map(|v| v.to_string()).collect())
}

/// What [`ws_read`] decoded: each message, ping, pong or close, in order,
/// and the protocol error that ended the input, if any.
#[derive(Debug, PartialEq, Eq)]
pub struct WsDecoded {
    /// A debug rendering of each event.
    pub events: Vec<String>,
    /// The close code of the error that ended decoding.
    pub error: Option<u16>,
}

/// Runs the WebSocket message reader over `input` as a client's bytes,
/// delivered in reads of `step` bytes (at least 1), with permessage-deflate
/// agreed or not, and limits of 64 KiB per frame and 256 KiB per message.
pub fn ws_read(input: &[u8], step: usize, deflate: bool) -> WsDecoded {
    crate::ws::fuzz_read(input, step, deflate)
}

/// How [`H2CoreHarness::respond`] answers a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H2Answer {
    /// A bodiless response: HEADERS with END_STREAM.
    HeadOnly,
    /// HEADERS, then the body with END_STREAM on its last DATA frame.
    Body,
    /// HEADERS, the body, then trailers (a HEADERS frame with END_STREAM).
    BodyAndTrailers,
    /// HEADERS and the body, the stream left open for more.
    Unfinished,
}

/// Drives the HTTP/2 connection state machine (`proto::h2::core::Core`)
/// directly, without I/O or tasks: bytes in with [`feed`](Self::feed),
/// the server's answers chosen by the caller, bytes out with
/// [`drain`](Self::drain). The fuzz target `h2_connection` checks the
/// output frame by frame; the harness holds the driver's claim on every
/// accepted stream until [`release`](Self::release).
#[allow(missing_debug_implementations)]
pub struct H2CoreHarness {
    core: Core,
    input: BytesMut,
    batch: Vec<Accepted>,
    streams: Vec<u32>,
    /// Streams whose response head was sent: the driver sends one head,
    /// then only body and trailers.
    answered: Vec<u32>,
}

impl H2CoreHarness {
    /// A connection under `config`; its SETTINGS and WINDOW_UPDATE are the
    /// first output. The client preface is taken as already read.
    pub fn new(config: &Http2Config) -> Self {
        H2CoreHarness {
            core: Core::new(config),
            input: BytesMut::new(),
            batch: Vec::new(),
            streams: Vec::new(),
            answered: Vec::new(),
        }
    }

    /// Appends `bytes` to what the client sent and parses as much as the
    /// connection takes now (it stops while its output is over the
    /// high-water mark, or after an error). Accepted streams join
    /// [`streams`](Self::streams).
    ///
    /// # Panics
    ///
    /// If an accepted request head that is not oversized is malformed
    /// (the core must have reset the stream instead).
    pub fn feed(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
        loop {
            let before = self.input.len();
            self.core.receive(&mut self.input);
            self.core.take_accepted(&mut self.batch);
            let accepted = !self.batch.is_empty();
            for stream in self.batch.drain(..) {
                let head = &stream.head;
                // An oversized head is accepted unchecked, to be answered
                // 431 (`stream.rs`); any other must be well-formed.
                if !head.oversized() {
                    assert!(head.malformed_reason().is_none(), "accepted a malformed head");
                    assert!(!head.method().is_empty(), "accepted a head without :method");
                }
                self.streams.push(stream.id);
                self.core.recycle(stream.head);
            }
            if self.input.len() == before && !accepted {
                break;
            }
        }
    }

    /// The accepted streams the harness still holds, oldest first.
    pub fn streams(&self) -> &[u32] {
        &self.streams
    }

    /// Answers stream `id` with `status` and `body` bytes, as `answer`
    /// says; `false` if the stream could not take it (reset, closed) or was
    /// answered before.
    pub fn respond(&mut self, id: u32, status: u16, body: usize, answer: H2Answer) -> bool {
        if self.answered.contains(&id) {
            return false;
        }
        self.answered.push(id);
        let head_only = answer == H2Answer::HeadOnly;
        let headers = self.core.send_headers(id, head_only, |enc, dst| {
            enc.status(status, dst);
            enc.field(b"content-type", b"text/plain", dst);
            enc.field(b"x-body", body.to_string().as_bytes(), dst);
        });
        if headers.is_err() || head_only {
            return headers.is_ok();
        }
        let end = answer == H2Answer::Body;
        if self.core.send_data(id, Bytes::from(vec![b'x'; body]), end).is_err() {
            return false;
        }
        if answer == H2Answer::BodyAndTrailers {
            return self.core.send_trailers(id, vec![(b"grpc-status".to_vec(), b"0".to_vec())]).is_ok();
        }
        true
    }

    /// More body on stream `id` (once answered), ending it with `end`.
    pub fn send_data(&mut self, id: u32, len: usize, end: bool) -> bool {
        if !self.answered.contains(&id) {
            return false;
        }
        self.core.send_data(id, Bytes::from(vec![b'y'; len]), end).is_ok()
    }

    /// Reads what stream `id`'s request body has buffered, giving the
    /// window back as a reader does; the bytes read.
    pub fn read_body(&mut self, id: u32) -> usize {
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let mut total = 0;
        while let Poll::Ready(Ok(Some(data))) = self.core.poll_data(id, &mut cx) {
            total += data.len();
            self.core.release_capacity(id, data.len());
        }
        total
    }

    /// The send capacity stream `id` has now, at most `want` (registers
    /// a waiter when there is none).
    pub fn capacity(&mut self, id: u32, want: usize) -> usize {
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        match self.core.poll_capacity(id, want, &mut cx) {
            Poll::Ready(Ok(n)) => n,
            _ => 0,
        }
    }

    /// Resets stream `id` from the server's side with error `code`.
    pub fn reset(&mut self, id: u32, code: u32) {
        self.core.send_reset(id, Reason(code));
    }

    /// Nobody will read stream `id`'s body any more.
    pub fn stop_reading(&mut self, id: u32) {
        self.core.stop_reading(id);
    }

    /// Drops the harness's claim on stream `id`, as the driver does once a
    /// stream is answered or handed on.
    pub fn release(&mut self, id: u32) {
        if let Some(at) = self.streams.iter().position(|&s| s == id) {
            self.streams.remove(at);
            self.core.release(id);
        }
    }

    /// Graceful shutdown: GOAWAY with NO_ERROR.
    pub fn go_away(&mut self) {
        self.core.go_away();
    }

    /// The transport is gone.
    pub fn close(&mut self) {
        self.core.close();
    }

    /// Takes up to `max` bytes of output, as a socket write would.
    ///
    /// # Panics
    ///
    /// If the output's slices do not add up to its length.
    pub fn drain(&mut self, max: usize) -> Vec<u8> {
        let mut taken = Vec::new();
        while taken.len() < max && !self.core.out.is_empty() {
            let mut slices = [IoSlice::new(&[]); 8];
            let n = self.core.out.slices(&mut slices);
            assert!(n > 0, "output of {} bytes without a slice", self.core.out.len());
            let sum: usize = slices[..n].iter().map(|s| s.len()).sum();
            assert!(
                sum <= self.core.out.len() && (n == slices.len() || sum == self.core.out.len()),
                "slices do not add up"
            );
            let before = taken.len();
            for slice in &slices[..n] {
                let room = max - taken.len();
                taken.extend_from_slice(&slice[..slice.len().min(room)]);
            }
            let written = taken.len() - before;
            assert!(written <= self.core.out.len(), "slices longer than the output");
            self.core.out.advance(written);
        }
        if self.core.out.is_empty() {
            self.core.wake_capacity();
        }
        taken
    }

    /// Output bytes waiting.
    pub fn out_len(&self) -> usize {
        self.core.out.len()
    }

    /// Whether the connection reads more input now.
    pub fn wants_input(&self) -> bool {
        self.core.wants_input()
    }

    /// Whether the connection is done after a GOAWAY.
    pub fn finished(&self) -> bool {
        self.core.finished()
    }

    /// The connection error's code, if it failed.
    pub fn error(&self) -> Option<u32> {
        self.core.error().map(|r| r.0)
    }
}
