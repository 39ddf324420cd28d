//! One worker's state: its clock and `Date` block, its connection registry
//! and the sweep that enforces their deadlines. Nothing here is shared with
//! other workers, so nothing here is locked.
//!
//! Protocol-neutral and below every protocol: connection drivers
//! ([`crate::proto`]) read the worker's clock, `Date` and configuration and
//! arm their [`ConnTimer`]; the server's accept loop registers connections.
//! The sweep never writes to a connection itself: it ends the read side of
//! one past its deadline, and the connection's own driver answers (a `408`
//! for a slow request head) and closes.

pub(crate) mod readbuf;
pub(crate) mod timer;
#[cfg(feature = "tls")]
pub(crate) mod tls_io;
pub(crate) mod transport;
pub(crate) mod uring;

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Waker;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use slab::Slab;

use crate::config::Config;
use crate::http::date::{date_block, DateBlock};
use crate::sys;
use timer::{ConnTimer, Wait};

/// Per-worker state every connection task holds an `Rc` to.
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) config: Config,
    date: Cell<DateBlock>,
    /// When the first tick ran; later ticks are counted from it.
    first_tick: Cell<Option<Instant>>,
    /// Ticks so far (one a second).
    clock: Cell<u64>,
    /// When the next tick is due: see [`Worker::coarse_now`].
    next_tick_at: Cell<Instant>,
    conns: RefCell<Slab<Rc<ConnTimer>>>,
    shutting_down: Cell<bool>,
    /// Wakes tasks that must act when shutdown begins rather than at a
    /// deadline: HTTP/2 sends `GOAWAY`, upgraded connections say goodbye
    /// in their own protocol; HTTP/1.1 only notices at its next request.
    shutdown_begun: tokio::sync::Notify,
    /// Wakers of long-lived waits that check [`Worker::shutting_down`]
    /// themselves when woken (WebSocket reads): registered once and kept,
    /// where a `Notify` waiter is linked and unlinked around every wait
    /// (with [`Worker::shutdown_begun`], 134 of a WebSocket echo's 2,745
    /// instructions).
    shutdown_wakers: RefCell<Slab<Waker>>,
    /// Woken whenever a connection ends, for an accept loop paused by
    /// running out of file descriptors.
    closed: tokio::sync::Notify,
    /// `Alt-Svc` advertising the server's HTTP/3 listener, for responses
    /// on TLS connections; `None` without one.
    pub(crate) alt_svc: Option<http::HeaderValue>,
    /// The worker's io_uring, when cleartext connections are served
    /// through one ([`Config::event_loop`]).
    pub(crate) ring: Option<Rc<uring::Ring>>,
}

impl Worker {
    pub(crate) fn new(config: Config) -> Worker {
        Worker {
            config,
            date: Cell::new(date_block(SystemTime::now())),
            first_tick: Cell::new(None),
            clock: Cell::new(0),
            next_tick_at: Cell::new(Instant::now() + std::time::Duration::from_secs(1)),
            conns: RefCell::new(Slab::new()),
            shutting_down: Cell::new(false),
            shutdown_begun: tokio::sync::Notify::new(),
            shutdown_wakers: RefCell::new(Slab::new()),
            closed: tokio::sync::Notify::new(),
            alt_svc: None,
            ring: None,
        }
    }

    #[inline]
    pub(crate) fn date(&self) -> DateBlock {
        self.date.get()
    }

    /// The deadline for something that may take `timeout` from now.
    ///
    /// The clock counts ticks, which come once a second. Armed between ticks
    /// `k` and `k + 1`, a deadline of `k + t + 1` is swept at tick
    /// `k + t + 1`: at least `t` seconds later and at most `t + 2`. That is
    /// precise enough for timeouts of seconds and reads no clock on the
    /// request path.
    #[inline]
    pub(crate) fn deadline_after(&self, timeout: std::time::Duration) -> u64 {
        self.clock.get() + timeout.as_secs().max(1) + 1
    }

    /// A clock read for hot paths that only need to know about when
    /// something happened: the time the next tick is due, which is at most
    /// a second after now and not before it (unless the loop is so busy
    /// that the tick runs late). Two loads where `Instant::now()` cost a
    /// WebSocket echo 35 of its instructions.
    #[inline]
    pub(crate) fn coarse_now(&self) -> Instant {
        self.next_tick_at.get()
    }

    #[inline]
    pub(crate) fn shutting_down(&self) -> bool {
        self.shutting_down.get()
    }

    /// From now on, in-flight requests are answered as the connection's
    /// last and idle connections are swept.
    pub(crate) fn begin_shutdown(&self) {
        self.shutting_down.set(true);
        self.shutdown_begun.notify_waiters();
        let wakers = std::mem::take(&mut *self.shutdown_wakers.borrow_mut());
        for (_, waker) in wakers {
            waker.wake();
        }
    }

    /// Has `waker` woken when shutdown begins, in `slot` (which replaces
    /// the waker registered there before). A registration lasts until
    /// [`Worker::forget_shutdown_waker`] or shutdown: the owner checks
    /// [`Worker::shutting_down`] whenever it is woken, and compares its
    /// waker (`Waker::will_wake`) before registering again.
    pub(crate) fn wake_on_shutdown(&self, slot: &mut Option<usize>, waker: &Waker) {
        debug_assert!(!self.shutting_down(), "check shutting_down() before registering");
        let mut wakers = self.shutdown_wakers.borrow_mut();
        match slot.and_then(|key| wakers.get_mut(key)) {
            Some(registered) => registered.clone_from(waker),
            None => *slot = Some(wakers.insert(waker.clone())),
        }
    }

    /// Drops the waker registered in `slot` (if shutdown has not already
    /// woken and dropped it: then its key may name another's waker, and
    /// nothing registers after shutdown).
    pub(crate) fn forget_shutdown_waker(&self, slot: &mut Option<usize>) {
        if let Some(key) = slot.take().filter(|_| !self.shutting_down()) {
            let mut wakers = self.shutdown_wakers.borrow_mut();
            if wakers.contains(key) {
                wakers.remove(key);
            }
        }
    }

    /// Completes once shutdown has begun (at once if it has).
    pub(crate) async fn shutdown_begun(&self) {
        // Created before the check, so a shutdown in between is not missed.
        let notified = self.shutdown_begun.notified();
        if self.shutting_down() {
            return;
        }
        notified.await;
    }

    pub(crate) fn register(&self, fd: RawFd) -> (usize, Rc<ConnTimer>) {
        let timer = Rc::new(ConnTimer::new(fd));
        let key = self.conns.borrow_mut().insert(Rc::clone(&timer));
        (key, timer)
    }

    pub(crate) fn unregister(&self, key: usize) {
        let mut conns = self.conns.borrow_mut();
        if conns.contains(key) {
            conns.remove(key);
        }
        self.closed.notify_waiters();
    }

    /// Resolves when the next connection ends.
    pub(crate) async fn connection_closed(&self) {
        self.closed.notified().await;
    }

    pub(crate) fn connection_count(&self) -> usize {
        self.conns.borrow().len()
    }

    /// Refreshes the clock and the `Date` block, then sweeps.
    pub(crate) fn tick(&self) {
        self.date.set(date_block(SystemTime::now()));
        // Count ticks, catching up if the loop was too busy to tick on time:
        // ticks land just after each wall-clock second, so rounding the time
        // since the first one gives the number of seconds that passed.
        let now = Instant::now();
        self.next_tick_at.set(now + std::time::Duration::from_secs(1));
        let first = self.first_tick.get().unwrap_or(now);
        self.first_tick.set(Some(first));
        let elapsed = (now - first).as_secs_f64().round() as u64;
        self.clock.set((self.clock.get() + 1).max(elapsed + 1));
        self.sweep(false);
        if self.config.malloc_release_threshold.is_none() {
            release_free_memory_once_a_second();
        }
    }

    /// Drops connections past their deadline or below their minimum data
    /// rate and, during shutdown, idle ones.
    ///
    /// `closing` (shutdown sweeps only, [`SHUTDOWN_SWEEP`] apart) also
    /// closes connections idle since the previous such sweep.
    pub(crate) fn sweep(&self, closing: bool) {
        let now = self.clock.get();
        for (_, timer) in self.conns.borrow().iter() {
            let wait = timer.wait.get();
            let expired = (wait != Wait::Busy && timer.deadline.get() <= now)
                || (!closing && self.too_slow(timer, wait));
            if expired || (closing && idle_since_last_sweep(timer, self.ring.as_deref())) {
                // A slow request head or body gets its `408` from the
                // connection's driver: ending only the read side wakes its
                // pending read with end of input and leaves the socket
                // writable. Every other case ends the connection outright.
                // Entries are removed (on this thread) before their socket
                // is closed, so `fd` is live.
                // A connection cut with response bytes still unsent (a
                // slow reader) is reset, so the kernel drops them too.
                if expired && matches!(wait, Wait::Head | Wait::Body) {
                    timer.expired.set(true);
                    sys::shutdown_read(timer.fd);
                } else if self.unsent_bytes(timer.fd) > 0 {
                    sys::abort_socket(timer.fd);
                } else {
                    sys::shutdown_socket(timer.fd);
                }
                timer.deadline.set(u64::MAX);
            }
        }
    }
}

impl Worker {
    /// Response bytes written to the connection on `fd` that have not
    /// left: what its socket holds, and what the worker's io_uring has yet
    /// to hand it.
    fn unsent_bytes(&self, fd: RawFd) -> u64 {
        sys::unsent_bytes(fd) + self.ring.as_ref().map_or(0, |ring| ring.unsent_bytes(fd))
    }

    /// Counts one more second of the connection's transfer waiting on the
    /// client, and says whether it now falls short of its minimum rate.
    /// For a response, bytes still in the kernel's send buffer do not
    /// count as taken: otherwise a client that never reads would be
    /// credited with the whole buffer (hundreds of KiB) at once.
    fn too_slow(&self, timer: &ConnTimer, wait: Wait) -> bool {
        let rate = match wait {
            Wait::Body => self.config.min_request_body_rate,
            Wait::Write | Wait::Drain => self.config.min_response_rate,
            Wait::Streams => crate::config::MinDataRate::laxer(
                self.config.min_request_body_rate,
                self.config.min_response_rate,
            ),
            _ => return false,
        };
        let Some(rate) = rate else { return false };
        if wait == Wait::Drain && self.unsent_bytes(timer.fd) == 0 {
            // The client took it all: an ordinary idle connection now.
            timer.wait.set(Wait::Idle);
            return false;
        }
        let waited = timer.transfer_ticks.get() + 1;
        timer.transfer_ticks.set(waited);
        if waited <= rate.grace.as_secs() {
            return false;
        }
        let mut moved = timer.transferred.get();
        if wait != Wait::Body && !rate.falls_short(moved, waited) {
            moved = moved.saturating_sub(self.unsent_bytes(timer.fd));
        }
        rate.falls_short(moved, waited)
    }
}

/// The wall-clock second of the last free-memory check, shared by every
/// worker so the process checks once a second, whichever worker ticks
/// first.
static FREE_MEMORY_CHECKED: AtomicU64 = AtomicU64::new(0);

/// Hands memory the allocator keeps free back to the system, at most once
/// a second per process (see [`sys::release_free_memory`]). With glibc's
/// default thresholds, 1,024 idle WebSocket connections of which 64 echoed
/// a 1 MiB message each left the process at 73.1 MiB, 3 s later too; with
/// this, 22.8 MiB (22.3 MiB before the burst). Fixed thresholds
/// ([`crate::Config::malloc_release_threshold`]) return it as well but
/// cost compressed responses four fifths of their rate.
fn release_free_memory_once_a_second() {
    let second = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    if FREE_MEMORY_CHECKED.swap(second, Ordering::Relaxed) == second {
        return;
    }
    if let Some(free) = sys::release_free_memory() {
        tracing::debug!(free, "returned the allocator's free memory to the system");
    }
}

/// During shutdown: whether a connection has been idle, with nothing to
/// read, since the previous shutdown sweep.
///
/// A keep-alive client that just got an answer sends its next request
/// within moments; closing its connection in between would lose that
/// request in flight. So a connection is closed only when two sweeps (at
/// least [`SHUTDOWN_SWEEP`] apart) found it idle in the same waiting
/// period; a busy client's next request is answered with
/// `Connection: close` instead, and the connection ends by itself.
fn idle_since_last_sweep(timer: &ConnTimer, ring: Option<&uring::Ring>) -> bool {
    if timer.wait.get() != Wait::Idle || has_pending_input(ring, timer.fd) {
        timer.seen_idle.set(false);
        return false;
    }
    timer.seen_idle.replace(true)
}

/// Whether the connection on `fd` has received bytes not read yet, in its
/// socket or in the worker's io_uring.
fn has_pending_input(ring: Option<&uring::Ring>, fd: RawFd) -> bool {
    sys::has_pending_input(fd) || ring.is_some_and(|ring| ring.has_received(fd))
}

/// Interval between shutdown sweeps: how long a connection must stay idle
/// before shutdown closes it.
pub(crate) const SHUTDOWN_SWEEP: std::time::Duration = std::time::Duration::from_millis(100);

/// Removes a connection from its worker's registry when its task ends, on
/// every path (including cancellation at shutdown).
#[derive(Debug)]
pub(crate) struct Registration {
    worker: Rc<Worker>,
    key: usize,
}

impl Registration {
    pub(crate) fn new(worker: Rc<Worker>, key: usize) -> Registration {
        Registration { worker, key }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.worker.unregister(self.key);
    }
}
