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
    header_slots, parse_head, Framing, Head, HeadLimits, HeaderSlots, ParseError, MAX_HEADERS_CAP,
};
pub use crate::proto::h2::hpack::{Decoder, Encoder, HpackError};

use std::rc::Rc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;
use tokio::task::LocalSet;

use crate::config::Config;
use crate::pattern::Pattern;
use crate::proto::h1::conn;
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
