//! Which deadline an HTTP/2 connection is under, from what its streams are
//! doing, kept in the connection's one [`ConnTimer`].
//!
//! A connection multiplexes streams, but the worker sweeps one deadline per
//! connection; this keeps that deadline right with two counters:
//! - a handler (or a response stream producing its next chunk) is running:
//!   no deadline, as on HTTP/1.1 while a handler runs;
//! - streams are open and all wait on the client (body bytes, window
//!   capacity): the I/O timeout, restarted whenever one makes progress, so
//!   a client that opens streams and then stalls, or never opens its
//!   window, is dropped; and the minimum data rate over that stretch of
//!   waiting, so one that trickles DATA frames or opens its window a few
//!   bytes at a time is dropped too;
//! - before the first stream: the header timeout, from the preface on, so
//!   a client that sends its preface or first HEADERS slowly is dropped as
//!   a slow HTTP/1.1 head is;
//! - no stream is open: the idle timeout; but once a frame or header
//!   block is part-way in with no stream open, a request head is arriving,
//!   and the header timeout bounds it from there, as it bounds the first
//!   (a client could otherwise send a later HEADERS frame a byte a second
//!   under the 60 s idle timeout, restarted by every byte).
//!
//! PING or SETTINGS frames are not progress: they cannot keep stalled
//! streams alive.

use std::cell::Cell;
use std::rc::Rc;

use crate::worker::timer::{ConnTimer, Wait};
use crate::worker::Worker;

/// A connection's stream counters and its timer.
pub(super) struct Activity {
    worker: Rc<Worker>,
    timer: Rc<ConnTimer>,
    /// Stream tasks alive.
    open: Cell<u32>,
    /// Of those, the ones running application code.
    busy: Cell<u32>,
    /// The idle deadline a head arriving on an idle connection interrupted
    /// ([`Activity::head_arriving`]): restored, not restarted, if no stream
    /// comes of it, so frames sent slowly cannot stretch the idle timeout.
    late_head: Cell<Option<u64>>,
}

impl Activity {
    pub(super) fn new(worker: Rc<Worker>, timer: Rc<ConnTimer>) -> Activity {
        Activity { worker, timer, open: Cell::new(0), busy: Cell::new(0), late_head: Cell::new(None) }
    }

    /// Arms the deadline the counters call for.
    pub(super) fn rearm(&self) {
        let config = &self.worker.config;
        if self.busy.get() > 0 {
            self.timer.arm(Wait::Busy, u64::MAX);
        } else if self.open.get() > 0 {
            if !matches!(self.timer.wait.get(), Wait::Streams | Wait::Busy) {
                // A new stretch of waiting on the client: its minimum rate
                // counts from here. Not after a handler ran (the sweep does
                // not count that time): a streaming handler reading its
                // body goes busy after every read, and restarting there let
                // one-byte DATA frames hold a stream for ever.
                self.timer.begin_transfer();
            }
            self.timer.arm(Wait::Streams, self.worker.deadline_after(config.io_timeout));
        } else {
            self.timer.arm(Wait::Idle, self.worker.deadline_after(config.idle_timeout));
        }
    }

    /// Told after each batch of input whether a frame or header block is
    /// part-way in. On an idle connection that is a request head arriving:
    /// the header timeout bounds it from its first byte; once nothing is
    /// part-way in again without a stream having opened, the idle deadline
    /// it interrupted is back.
    pub(super) fn head_arriving(&self, arriving: bool) {
        let wait = self.timer.wait.get();
        if arriving {
            if wait == Wait::Idle {
                let idle = self.timer.deadline.get();
                self.late_head.set(Some(idle));
                let head = self.worker.deadline_after(self.worker.config.header_timeout);
                self.timer.arm(Wait::Head, head.min(idle));
            }
        } else if let Some(idle) = self.late_head.take() {
            if wait == Wait::Head {
                self.timer.arm(Wait::Idle, idle);
            }
        }
    }

    /// A stream moved `bytes` (body bytes in, window capacity out): they
    /// count toward the minimum rate, and the I/O deadline starts again.
    pub(super) fn progress(&self, bytes: usize) {
        self.timer.moved(bytes);
        if self.busy.get() == 0 {
            self.rearm();
        }
    }

    /// Counts a stream task until the guard drops.
    pub(super) fn open_stream(&self) -> OpenGuard<'_> {
        self.open.set(self.open.get() + 1);
        self.rearm();
        OpenGuard { activity: self }
    }

    /// Counts application code running until the guard drops.
    pub(super) fn busy(&self) -> BusyGuard<'_> {
        self.busy.set(self.busy.get() + 1);
        self.rearm();
        BusyGuard { activity: self }
    }

    /// Marks application code waiting on the client (a streaming handler
    /// reading its body) until the guard drops.
    pub(super) fn waiting_on_client(&self) -> WaitGuard<'_> {
        self.busy.set(self.busy.get().saturating_sub(1));
        self.rearm();
        WaitGuard { activity: self }
    }
}

impl Activity {
    /// Marks application code that holds a busy count as waiting on the
    /// client, until [`Activity::end_wait`]: a tunnel waiting for window
    /// capacity (the guard form, [`Activity::waiting_on_client`], cannot
    /// live in the tunnel, which outlives any borrow).
    pub(super) fn begin_wait(&self) {
        self.busy.set(self.busy.get().saturating_sub(1));
        self.rearm();
    }

    /// Ends [`Activity::begin_wait`]: the client made progress.
    pub(super) fn end_wait(&self) {
        self.busy.set(self.busy.get() + 1);
        self.rearm();
    }
}

/// See [`Activity::open_stream`].
pub(super) struct OpenGuard<'a> {
    activity: &'a Activity,
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        let open = &self.activity.open;
        open.set(open.get().saturating_sub(1));
        self.activity.rearm();
    }
}

/// See [`Activity::busy`].
pub(super) struct BusyGuard<'a> {
    activity: &'a Activity,
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        let busy = &self.activity.busy;
        busy.set(busy.get().saturating_sub(1));
        self.activity.rearm();
    }
}

/// See [`Activity::waiting_on_client`].
pub(super) struct WaitGuard<'a> {
    activity: &'a Activity,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        let busy = &self.activity.busy;
        busy.set(busy.get() + 1);
        self.activity.rearm();
    }
}
