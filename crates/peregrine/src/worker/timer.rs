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
    /// Reading a body or writing a response.
    Io,
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
    /// Set by the sweep when the deadline passed while the connection was
    /// waiting for the rest of a request head: its driver answers `408`.
    pub(crate) expired: Cell<bool>,
}

impl ConnTimer {
    /// Whether the sweep cut this connection for a request head that did
    /// not arrive in time.
    #[inline]
    pub(crate) fn head_timed_out(&self) -> bool {
        self.expired.get()
    }

    /// A timer for the connection on `fd`, idle and without a deadline.
    pub(crate) fn new(fd: RawFd) -> ConnTimer {
        ConnTimer {
            fd,
            wait: Cell::new(Wait::Idle),
            deadline: Cell::new(u64::MAX),
            seen_idle: Cell::new(false),
            expired: Cell::new(false),
        }
    }

    #[inline]
    pub(crate) fn arm(&self, wait: Wait, deadline: u64) {
        self.wait.set(wait);
        self.deadline.set(deadline);
        self.seen_idle.set(false);
    }
}
