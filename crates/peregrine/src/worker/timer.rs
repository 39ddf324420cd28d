//! A connection's deadline: what it waits for and until when, on the
//! worker's clock of whole seconds.
//!
//! A leaf shared by every protocol's connection driver (which re-arms it
//! with two `Cell` writes as it moves between reading, writing and running
//! a handler) and the worker's once-a-second sweep (which reads it). The
//! request path never touches a real timer.

use std::cell::Cell;
use std::os::fd::RawFd;

/// What a connection is waiting for, which decides its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Between requests (keep-alive idle).
    Idle,
    /// In the middle of a request head.
    Head,
    /// Reading a request body.
    Body,
    /// Writing a response.
    Write,
    /// Between requests after a large response, which may still sit in the
    /// kernel's send buffer (up to megabytes of it): idle for the
    /// application, still a transfer for the minimum response rate, until
    /// the sweep finds the buffer drained and makes it [`Wait::Idle`].
    Drain,
    /// HTTP/2 streams are open and waiting on the peer: the I/O deadline
    /// applies, and the laxer of the two minimum rates to what the
    /// connection's streams move (a client trickling DATA frames, or one
    /// opening its window a few bytes at a time, is cut).
    Streams,
    /// A handler is running; no connection deadline applies.
    Busy,
}

/// A connection's deadline, shared between the connection task (which
/// updates it with two `Cell` writes) and the worker's once-a-second sweep.
#[derive(Debug)]
pub(crate) struct ConnTimer {
    pub(crate) fd: RawFd,
    pub(crate) wait: Cell<Wait>,
    /// Worker-clock seconds after which the connection is dropped.
    pub(crate) deadline: Cell<u64>,
    /// Set by a shutdown sweep that found the connection idle; cleared by
    /// every [`ConnTimer::arm`], so it survives only while the connection
    /// stays in that same idle period.
    pub(crate) seen_idle: Cell<bool>,
    /// Set by the sweep when the deadline passed (or the minimum rate was
    /// missed) while the connection was waiting for the rest of a request:
    /// its driver answers `408`.
    pub(crate) expired: Cell<bool>,
    /// Sweeps that found the current transfer (see [`ConnTimer::begin_transfer`])
    /// waiting on the client: its duration for the minimum data rate, in
    /// seconds, leaving out time a handler spent between reads.
    pub(crate) transfer_ticks: Cell<u64>,
    /// Bytes the current transfer has moved.
    pub(crate) transferred: Cell<u64>,
}

impl ConnTimer {
    /// Whether the sweep cut this connection for a request (head or
    /// body) that did not arrive in time.
    #[inline]
    pub(crate) fn read_timed_out(&self) -> bool {
        self.expired.get()
    }

    /// Starts measuring a new transfer (a request body, or one batch of
    /// response bytes) against its minimum data rate.
    #[inline]
    pub(crate) fn begin_transfer(&self) {
        self.transfer_ticks.set(0);
        self.transferred.set(0);
    }

    /// Counts `n` bytes moved by the current transfer.
    #[inline]
    pub(crate) fn moved(&self, n: usize) {
        self.transferred.set(self.transferred.get() + n as u64);
    }

    /// A timer for the connection on `fd`, idle and without a deadline.
    pub(crate) fn new(fd: RawFd) -> ConnTimer {
        ConnTimer {
            fd,
            wait: Cell::new(Wait::Idle),
            deadline: Cell::new(u64::MAX),
            seen_idle: Cell::new(false),
            expired: Cell::new(false),
            transfer_ticks: Cell::new(0),
            transferred: Cell::new(0),
        }
    }

    #[inline]
    pub(crate) fn arm(&self, wait: Wait, deadline: u64) {
        self.wait.set(wait);
        self.deadline.set(deadline);
        self.seen_idle.set(false);
    }
}
