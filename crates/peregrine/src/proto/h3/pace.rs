//! The minimum data rates ([`Config::min_request_body_rate`],
//! [`Config::min_response_rate`]) on one HTTP/3 stream.
//!
//! TCP connections are paced by the worker's once-a-second sweep over
//! their sockets; a QUIC connection has no socket of its own and carries
//! many streams that the client may each starve, so each stream paces
//! itself, and a slow stream is cut alone (others on its connection, and
//! other connections, go on). Only waits on the client count: a wait that
//! completes at once reads no clock and arms no timer (the common case: a
//! response within the client's windows, a body already received); one
//! that does not is timed, and checked when it ends and on each whole
//! second of the transfer's waiting.
//!
//! A transfer's bytes count from its first wait on: a response's first
//! bytes go into the client's initial flow-control window at once (quinn's
//! default is 1.25 MB a stream), which says nothing about how fast the
//! client reads; what quinn takes after that, the client granted as it
//! read (or acknowledged). So a client that stops reading is cut one grace
//! period after its window filled, however large the window.
//!
//! [`Config::min_request_body_rate`]: crate::Config::min_request_body_rate
//! [`Config::min_response_rate`]: crate::Config::min_response_rate

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use super::quic::Probe;
use crate::config::MinDataRate;

/// A transfer (a request body, or a response) fell short of its rate.
#[derive(Debug)]
pub(super) struct TooSlow;

/// One transfer's time spent waiting on the client and its bytes.
pub(super) struct Pace {
    rate: Option<MinDataRate>,
    probe: Rc<Probe>,
    /// Which way: the response (else the request body).
    response: bool,
    /// The counter when the transfer first waited.
    base: Cell<Option<u64>>,
    /// Time waited so far, in waits that have ended.
    waited: Cell<Duration>,
}

impl Pace {
    /// Paces the request body of `probe`'s stream.
    pub(super) fn request(rate: Option<MinDataRate>, probe: &Rc<Probe>) -> Pace {
        Pace {
            rate,
            probe: Rc::clone(probe),
            response: false,
            base: Cell::new(None),
            waited: Cell::default(),
        }
    }

    /// Paces the response of `probe`'s stream.
    pub(super) fn response(rate: Option<MinDataRate>, probe: &Rc<Probe>) -> Pace {
        Pace { rate, probe: Rc::clone(probe), response: true, base: Cell::new(None), waited: Cell::default() }
    }

    /// The bytes the stream moved this way so far.
    fn moved(&self) -> u64 {
        if self.response {
            self.probe.sent.get()
        } else {
            self.probe.received.get()
        }
    }

    /// Runs `wait` (one wait on the client), cut if the transfer falls
    /// short of its rate meanwhile.
    pub(super) async fn wait<F: Future>(&self, wait: F) -> Result<F::Output, TooSlow> {
        let Some(rate) = self.rate else { return Ok(wait.await) };
        let mut wait = pin!(wait);
        if let Poll::Ready(done) = poll_fn(|cx| Poll::Ready(wait.as_mut().poll(cx))).await {
            return Ok(done);
        }
        let base = match self.base.get() {
            Some(base) => base,
            None => {
                self.base.set(Some(self.moved()));
                self.moved()
            }
        };
        let started = Instant::now();
        // Checks fall on whole seconds of the transfer's waiting, however
        // its waits are cut up (a body trickled in pieces half a second
        // apart waits in pieces of half a second).
        let mut check = started + (Duration::from_secs(1) - subsec(self.waited.get()));
        loop {
            tokio::select! {
                biased;
                done = &mut wait => {
                    let waited = self.waited.get() + started.elapsed();
                    self.waited.set(waited);
                    if rate.falls_short(self.moved() - base, waited.as_secs()) {
                        return Err(TooSlow);
                    }
                    return Ok(done);
                }
                () = tokio::time::sleep_until(check) => {
                    let waited = self.waited.get() + started.elapsed();
                    if rate.falls_short(self.moved() - base, waited.as_secs()) {
                        return Err(TooSlow);
                    }
                    check += Duration::from_secs(1);
                }
            }
        }
    }
}

/// The part of `d` below a whole second.
fn subsec(d: Duration) -> Duration {
    Duration::from_nanos(u64::from(d.subsec_nanos()))
}
