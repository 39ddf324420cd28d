//! A worker's io_uring: the byte stream of cleartext TCP connections when
//! [`Config::event_loop`](crate::Config::event_loop) asks for io_uring
//! and the kernel allows it.
//!
//! Why: with epoll readiness every request costs a `recvfrom` and a
//! `sendto`, each a system call of its own. Here a connection's receive and
//! send are submissions, and everything a loop turn queued enters the
//! kernel in one `io_uring_enter` at the end of the turn (see
//! [`Ring::run`]). On this machine, one worker on CPU 0 and wrk on CPU 1,
//! 256 connections (`peregrine-uring` against `peregrine` in
//! `lab/servers.toml`), requests per server CPU-second: `/json` 1.19x,
//! reaching 0.91 of the bare io_uring responder; pipelined `/plaintext`
//! level (0.93x to 1.05x over three runs); WebSocket echo at 16,384
//! connections 1.20x to 1.25x actix-ws, where epoll gave 1.11x to 1.14x.
//!
//! Large bodies go beside the ring, as epoll would move them. A reader
//! with room for a large body ([`DIRECT_READ_ROOM`]) waits with a `POLLIN`
//! poll in the ring and then `recv`s straight into its own buffer until
//! the socket is drained; so does any reader right after a receive that
//! took all it could ([`MAX_RECV`]). File bodies leave by `sendfile(2)`
//! (the socket stays non-blocking; a full socket is waited for with a
//! `POLLOUT` poll in the ring). Before, HttpArena's upload profile ran at
//! 0.24x to 0.30x of epoll's requests/s and static at 0.70x to 0.82x with
//! 4x the memory; after, upload 0.87x to 0.98x (0.93x to 0.96x per
//! CPU-second) and static 0.85x to 0.98x.
//!
//! How it fits under tokio: the ring signals an eventfd, registered with
//! the worker's reactor like any socket, and the ring's own task, woken
//! by it, collects the completions, hands each to its connection and wakes
//! the task waiting on it. Connection drivers see an `AsyncRead +
//! AsyncWrite` like any other transport ([`UringStream`]), so nothing
//! above knows. The ring is set up with `COOP_TASKRUN`: the kernel runs a
//! completion's task work when the worker next enters the kernel (or wakes
//! it from a sleep for it), instead of interrupting it for each (without
//! either, `/json` ran at 0.72x of epoll); the task work posts the
//! completion and signals the eventfd from the worker itself, and an entry
//! that asks for them runs what is pending (the kernel flags it with
//! `IORING_SQ_TASKRUN`, or `IORING_SQ_CQ_OVERFLOW` for completions a full
//! queue overflowed; see [`Inner::completions_held`]).
//!
//! Why not `DEFER_TASKRUN`, which holds completions until an entry asks for
//! them: its eventfd signal, sent from the context that queued the task
//! work (here the network softirq of the client's send), is deferred by the
//! kernel through an RCU callback, and reaches a sleeping worker only at
//! the next RCU batch, a timer tick or more later (`perf record -g -e
//! sched:sched_waking`: every wakeup of the worker came from `rcu_core` ->
//! `io_eventfd_do_signal`, Linux 6.18). A worker that ever goes idle paid
//! that for every wakeup: one connection got 61 requests/s on `/json` at
//! a median of 16 ms (epoll: 15,364 at 0.06 ms), and WebSocket echo at 256
//! connections ran at 0.75x to 0.95x of epoll with a p99 of 4 to 15 ms,
//! the server idle a fifth of the time. With `COOP_TASKRUN`: 14,276
//! requests/s at 0.07 ms, and the echo at 268k to 286k messages/s with a
//! p99 of 1.1 to 1.6 ms (`DEFER_TASKRUN` 205k to 265k). It costs the
//! saturated case a little: under the lab client at 256 connections (5
//! alternating rounds, server on CPU 0), `/json` 0.97x requests/s and 0.94x
//! per server CPU-second of `DEFER_TASKRUN`, pipelined `/plaintext` 0.98x
//! and 0.96x (an earlier A/B had put `DEFER_TASKRUN` 1.03x to 1.09x per
//! CPU-second ahead, before the wakeups were looked at).
//!
//! An entry collects what has arrived and does not wait for more. Waiting
//! was tried (2026-11-28): entering with `min_complete` 32 and
//! `min_wait_usec` 50 cut entries on `/json` (lab client, 256 connections)
//! from 18,800 to 2,900 a second, about 40 requests each instead of 7, yet
//! requests per server CPU-second stayed level (medians of 5 alternating
//! rounds 145k without, 146k with; 144k at 64 and 100 µs) while
//! requests/s fell 3% and the median latency rose 0.3 ms. Larger batches
//! do not make the kernel's work per request cheaper here.
//!
//! Sockets are registered files: a connection's socket also sits in the
//! ring's file table at its slot's key ([`FIXED_FILES`]), entered with the
//! first receive and taken out with a submission when the slot is freed, so
//! receives and sends skip the kernel's descriptor lookup (`fget`/`fput`:
//! 1.44% of the worker's samples on `/json` before, 0.10% after).
//!
//! Memory stays bounded as with epoll, and one connection cannot take
//! what others need:
//! - a receive is armed when the connection's reader waits for input,
//!   and each completion takes at most [`MAX_RECV`] bytes. It is
//!   multishot: it stays armed, so a connection whose requests and answers
//!   alternate costs one submission per request (the send), not two, and
//!   no poll (pipelined `/plaintext`: 2.3 submissions and one poll a batch
//!   of 16 before, 1 and 0 after, as the bare io_uring responder). But a
//!   reader [`MAX_RECV`] behind (a flood, a reader that stopped) ends it,
//!   and that connection gets one receive per wait from then on: it
//!   leaves further input in its own socket buffer, as with epoll, and
//!   cannot take every buffer again. (Multishot receives that were never
//!   ended kept taking input for readers that had stopped: an HTTP/2 ping
//!   flood from a client that never read filled every buffer and starved
//!   the other connections.)
//! - receive buffers belong to the worker, not to connections: an idle
//!   connection holds none. They are consumed incrementally
//!   (`IOU_PBUF_RING_INC`, Linux 6.12): receives are packed one after
//!   another into a large buffer, so a 5-byte WebSocket message takes 11
//!   bytes of it, not a buffer of its own. With whole 4 KiB buffers, 1,024
//!   of them, 16,384 WebSocket connections ran out of buffers all the time
//!   and echoed 0.65x actix-ws's messages per CPU-second;
//! - when every buffer is taken anyway, a receive ends with `ENOBUFS` and
//!   is armed again at the end of the turn in which a reader returned a
//!   buffer, not before: armed again while none was free, it ended with
//!   `ENOBUFS` in the same entry, every entry found a completion, and the
//!   ring's task entered again and again without letting the readers run
//!   (32 uploads at once left the worker spinning and serving nothing);
//! - a write waits while the connection's previous send is in flight and
//!   takes at most [`MAX_SEND`] bytes.
//!
//! A connection's slot outlives its stream while the kernel still uses
//! it: dropped with a send in flight, that send completes (as `close` on a
//! socket would send what it holds) and the descriptor is closed after;
//! dropped with a receive armed, the receive is cancelled first.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::task::{Context, Poll, Waker};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use slab::Slab;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::sys;

/// Submission queue entries.
const RING_ENTRIES: u32 = 1024;
/// Completion queue entries (16 bytes each): room for a completion from
/// each of many connections at once, so multishot receives are not ended
/// by an overflowing queue.
const COMPLETION_ENTRIES: u32 = 16384;
/// Submissions queued before they are entered without waiting for the
/// turn to end: a long run of ready tasks should not hold sends back.
const SUBMIT_BATCH: usize = 256;
/// Receive buffers in the provided ring (a power of two, as the kernel
/// requires) and the size of each, filled incrementally: 8 MiB a worker,
/// touched only as used.
const BUFFERS: u16 = 256;
const BUFFER_LEN: usize = 32 * 1024;
const GROUP: u16 = 0;
/// `IOU_PBUF_RING_INC`: the kernel consumes a provided buffer a receive at
/// a time rather than whole.
const PBUF_RING_INC: u16 = 2;
/// `IORING_CQE_F_BUF_MORE`: the kernel goes on filling the buffer of this
/// completion.
const CQE_F_BUF_MORE: u32 = 1 << 4;
/// The most one receive takes.
const MAX_RECV: usize = 16 * 1024;
/// A reader with at least this much room (a large body's) waits for input
/// with a `POLLIN` poll and then reads it straight into its own buffer, as
/// on epoll, rather than through a ring receive of at most [`MAX_RECV`].
/// HttpArena's upload profile on receives alone used 1.3x epoll's CPU per
/// request: each 16 KiB receive drained the socket a little, and the
/// kernel answered many of them with a window update.
const DIRECT_READ_ROOM: usize = 64 * 1024;
/// The most one send takes. A write waits while its connection's previous
/// send is in flight, so output the kernel has not taken stays bounded by
/// this plus `TCP_NOTSENT_LOWAT`, as with epoll (where a write takes what
/// the socket takes), and the minimum response rate sees the client's
/// real progress (with [`Ring::unsent_bytes`]).
const MAX_SEND: usize = 64 * 1024;
/// Send buffers above this are not kept after their send completes.
const KEEP_SEND_CAPACITY: usize = 16 * 1024;
/// Send buffers kept for reuse by the worker's connections. A connection
/// holds one only while its send is in flight, so idle connections cost
/// none: kept per connection instead, 6,800 static-file connections held
/// 16 KiB each.
const SPARE_SEND_BUFFERS: usize = 256;
/// Entries in the ring's table of registered files, indexed by slot key:
/// a connection whose key fits has its socket there, and its receives and
/// sends name it by index (`IOSQE_FIXED_FILE`). Why: otherwise the kernel
/// looks the descriptor up and takes and drops a reference to its file on
/// every operation (`fget`/`fput`: 1.44% of the worker's samples on
/// `/json`, against 0.10% with the table). The table costs 8 bytes an
/// entry in the kernel, 128 KiB a worker; connections beyond it use their
/// descriptors as before.
const FIXED_FILES: u32 = 16384;

const NO_SLOT: usize = usize::MAX;

/// `io_uring_enter` flag: run the completions' pending task work for this
/// thread and post them, waiting for none.
const IORING_ENTER_GETEVENTS: u32 = 1;

const RECV: u64 = 1;
const SEND: u64 = 2;
const CANCEL: u64 = 3;
const POLL_OUT: u64 = 4;
const POLL_IN: u64 = 5;
/// A registered file set or removed; nothing waits on its completion.
const FILES: u64 = 6;

fn tag(kind: u64, key: usize) -> u64 {
    (key as u64) << 8 | kind
}

/// One worker's ring and every connection it serves.
pub(crate) struct Ring {
    /// The ring's eventfd in the reactor: the kernel signals it when
    /// completions are posted (their task work runs in the worker, woken
    /// for it if asleep). Never read: the reactor's edge-triggered
    /// registration sees every signal, and an entry collects the
    /// completions.
    events: AsyncFd<OwnedFd>,
    inner: RefCell<Inner>,
}

struct Inner {
    /// First: the ring is closed before the buffers its submissions point
    /// into are dropped.
    ring: IoUring,
    slots: Slab<Slot>,
    /// Slot keys by file descriptor ([`NO_SLOT`] where none), for the
    /// worker's sweep, which knows connections by descriptor.
    by_fd: Vec<usize>,
    buffers: ProvidedBuffers,
    /// Each slot's descriptor by key, for `IORING_OP_FILES_UPDATE` to read
    /// when it registers the slot's socket; empty when the kernel refused
    /// the table ([`FIXED_FILES`]).
    fixed_fds: Box<[RawFd]>,
    /// Send buffers between sends ([`SPARE_SEND_BUFFERS`] at most).
    spare_sends: Vec<Vec<u8>>,
    /// Slots whose receive ended for want of a buffer, armed again at the
    /// next submission.
    starved: Vec<usize>,
    /// Receives asked for in this loop turn, entered after everything
    /// else the turn queued ([`Inner::queue_receive`]).
    receives: Vec<usize>,
    /// Completions of one reaping, copied out so the ring can take new
    /// submissions while they are handled.
    done: Vec<(u64, i32, u32)>,
    /// Wakers to call once the borrow is released.
    wake: Vec<Waker>,
    /// The ring's own task ([`Ring::run`]), and whether it has been woken
    /// to enter queued submissions.
    task: Option<Waker>,
    submit_scheduled: bool,
}

/// A connection's state, owned by the ring.
struct Slot {
    fd: RawFd,
    /// Received and not yet read, in order; the first has had `offset`
    /// bytes read.
    received: VecDeque<Segment>,
    offset: usize,
    recv_armed: bool,
    /// The armed receive is being cancelled: its last completion is due.
    recv_cancelling: bool,
    /// The reader fell [`MAX_RECV`] behind its input once: this
    /// connection's receives are single-shot from now on.
    single_shot: bool,
    /// The receive is in `receives`, not yet queued for the kernel, which
    /// holds nothing of it.
    recv_deferred: bool,
    /// What is armed is a `POLLIN` poll (for a direct read), not a receive.
    recv_is_poll: bool,
    /// How the receive ended for good: `Some(0)` at end of stream,
    /// `Some(-errno)` on an error.
    recv_end: Option<i32>,
    /// The last receive took all it could: more input is likely waiting
    /// (a large body), so the next read asks the socket directly.
    bulk: bool,
    read_waker: Option<Waker>,
    /// What the kernel is sending now; untouched until the send completes,
    /// then given back to the worker's spares.
    sending: Vec<u8>,
    sent: usize,
    send_in_flight: bool,
    send_error: Option<i32>,
    /// The connection ends after what is being written: sends carry
    /// `MSG_MORE`, so the kernel holds a short last response back and the
    /// `FIN` of the shutdown that follows leaves in the same segment (see
    /// [`UringStream::send_last`]).
    last_sends: bool,
    /// A direct write (`sendfile(2)`, beside the ring) found the socket's
    /// send buffer full: the writer waits for room with a poll.
    socket_full: bool,
    poll_out: PollOut,
    write_waker: Option<Waker>,
    /// The stream is gone; the slot lives until the kernel is done with it.
    dropped: bool,
}

impl Slot {
    fn new(fd: RawFd) -> Slot {
        Slot {
            fd,
            received: VecDeque::new(),
            offset: 0,
            recv_armed: false,
            recv_cancelling: false,
            single_shot: false,
            recv_deferred: false,
            recv_is_poll: false,
            recv_end: None,
            bulk: false,
            read_waker: None,
            sending: Vec::new(),
            sent: 0,
            send_in_flight: false,
            send_error: None,
            last_sends: false,
            socket_full: false,
            poll_out: PollOut::Idle,
            write_waker: None,
            dropped: false,
        }
    }

    /// Bytes received and not read yet.
    fn unread(&self) -> usize {
        self.received.iter().map(|segment| segment.len as usize).sum::<usize>() - self.offset
    }

    /// Whether the next read asks the socket directly, beside the ring:
    /// the last receive took all it could, and none is armed.
    #[inline]
    fn reads_directly(&self) -> bool {
        self.bulk && !self.recv_armed
    }

    /// How input ended for good, once it has and every byte received is
    /// read: `Ok` at the end of the stream, else the receive's error.
    #[inline]
    fn input_ended(&self) -> Option<io::Result<()>> {
        match self.recv_end {
            Some(0) => Some(Ok(())),
            Some(err) => Some(Err(io::Error::from_raw_os_error(-err))),
            None => None,
        }
    }

    /// Whether the kernel still holds an operation of this slot's.
    fn busy(&self) -> bool {
        (self.recv_armed && !self.recv_deferred) || self.send_in_flight || self.poll_out == PollOut::Armed
    }
}

/// A connection's wait for its socket to take more output.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PollOut {
    Idle,
    /// A `POLLOUT` poll is in the ring.
    Armed,
    /// The poll completed: the socket has room (or an error to report).
    Ready,
}

impl Ring {
    /// Sets a ring up for this thread, or says why the kernel refused: no
    /// io_uring, one older than Linux 6.12 (incrementally consumed
    /// buffers), or io_uring forbidden (a seccomp filter, as Docker's
    /// default profile, or `kernel.io_uring_disabled`).
    pub(crate) fn new() -> io::Result<Rc<Ring>> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            // Not DEFER_TASKRUN: see the module doc.
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .setup_clamp()
            .setup_cqsize(COMPLETION_ENTRIES)
            .build(RING_ENTRIES)?;
        if !ring.params().is_feature_nodrop() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel's io_uring may drop completions",
            ));
        }
        let buffers = ProvidedBuffers::register(&ring)?;
        // Refused above the descriptor limit (`RLIMIT_NOFILE`) or for want of
        // memory: connections then use their descriptors, as they would
        // beyond the table.
        let fixed_fds = match ring.submitter().register_files_sparse(FIXED_FILES) {
            Ok(()) => vec![-1; FIXED_FILES as usize].into_boxed_slice(),
            Err(e) => {
                tracing::debug!(error = %e, "io_uring: no registered files; operations name descriptors");
                Box::default()
            }
        };
        let events = sys::eventfd()?;
        // The ring holds its own reference to the eventfd from here on.
        ring.submitter().register_eventfd(events.as_raw_fd())?;
        // SAFETY: the `AsyncFd` owns the eventfd, which stays open until
        // it is dropped (and deregistered) with it.
        let events = unsafe { AsyncFd::register_with_interest(events, tokio::io::Interest::READABLE) }?;
        let ring = Rc::new(Ring {
            inner: RefCell::new(Inner {
                ring,
                slots: Slab::new(),
                by_fd: Vec::new(),
                buffers,
                fixed_fds,
                spare_sends: Vec::new(),
                starved: Vec::new(),
                receives: Vec::new(),
                done: Vec::with_capacity(2 * RING_ENTRIES as usize),
                wake: Vec::new(),
                task: None,
                submit_scheduled: false,
            }),
            events,
        });
        Ok(ring)
    }

    /// The ring's own task, for as long as the worker runs: hands
    /// completions to their connections (waking the tasks waiting on
    /// them), and enters what the loop turn has queued.
    ///
    /// The first submission queued after an entry wakes this task, so it
    /// runs after the tasks already scheduled, which queue theirs too: a
    /// turn's submissions go in together. (Entering from the runtime's
    /// park hook instead left them waiting whenever some task kept
    /// yielding, for the runtime then never parks: an HTTP/2 ping flood
    /// kept a new connection's first receive from being entered.)
    pub(crate) async fn run(self: Rc<Self>) {
        std::future::poll_fn(|cx| {
            loop {
                let signalled = match self.events.poll_read_ready(cx) {
                    // Cleared before the entry that collects the
                    // completions: one that arrives after it signals again.
                    // The loop then turns once more, so that the task waits
                    // only after a poll that registered its waker.
                    Poll::Ready(Ok(mut guard)) => {
                        guard.clear_ready();
                        true
                    }
                    Poll::Ready(Err(e)) => {
                        tracing::error!(error = %e, "the io_uring eventfd failed in the reactor");
                        return Poll::Ready(());
                    }
                    Poll::Pending => false,
                };
                let mut inner = self.inner.borrow_mut();
                keep_waker(&mut inner.task, cx);
                // A signal alone is no reason to enter: the kernel flags
                // completions whose task work is pending
                // ([`Inner::completions_held`]), and a signal for completions
                // it posted at once (a send finished inside the entry that
                // submitted it) is stale by now, as this task reaped them
                // after that entry. Entering for those cost every request
                // on an otherwise idle connection a second turn of the
                // ring: 3 entries and 2 `epoll_wait`s a request at one
                // connection, 2 and 2 after.
                let held_back = inner.completions_held();
                inner.submit(held_back);
                let held_back = inner.completions_held();
                let completed = !inner.ring.completion().is_empty();
                drop(inner);
                if completed {
                    self.reap();
                }
                if held_back && !signalled {
                    // The rest after the tasks just woken have run, so that
                    // their submissions go in with that entry.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                // Ends once an entry finds no completion. Nothing this loop
                // submits by itself can keep that from happening: receives
                // that ran out of buffers wait for a buffer to come back
                // ([`Inner::rearm_starved`]).
                if !completed && !signalled {
                    return Poll::Pending;
                }
            }
        })
        .await
    }

    /// Serves `stream` through the ring from now on.
    pub(crate) fn adopt(self: &Rc<Self>, stream: std::net::TcpStream) -> io::Result<UringStream> {
        // The socket stays non-blocking (tokio's `into_std` leaves it so):
        // the ring's receives and sends wait for readiness in the kernel
        // all the same (the io_uring tests run on such sockets), and the
        // direct calls beside them (a bulk `recv`, `sendfile`) must not
        // block the worker.
        let fd = stream.into_raw_fd();
        let mut inner = self.inner.borrow_mut();
        let key = inner.slots.insert(Slot::new(fd));
        let index = fd as usize;
        if inner.by_fd.len() <= index {
            inner.by_fd.resize(index + 1, NO_SLOT);
        }
        inner.by_fd[index] = key;
        inner.register_file(key, fd);
        Ok(UringStream { ring: Rc::clone(self), key })
    }

    /// Output written to the connection on `fd` that the kernel has not
    /// taken yet (the rest of its send in flight).
    pub(crate) fn unsent_bytes(&self, fd: RawFd) -> u64 {
        let inner = self.inner.borrow();
        match inner.slot_of(fd) {
            Some(slot) if slot.send_in_flight => (slot.sending.len() - slot.sent) as u64,
            _ => 0,
        }
    }

    /// Whether the connection on `fd` has received bytes its reader has
    /// not read yet.
    pub(crate) fn has_received(&self, fd: RawFd) -> bool {
        let inner = self.inner.borrow();
        inner.slot_of(fd).is_some_and(|slot| !slot.received.is_empty())
    }

    fn reap(&self) {
        let mut wake = {
            let mut inner = self.inner.borrow_mut();
            let inner = &mut *inner;
            loop {
                inner.done.clear();
                inner.done.extend(inner.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
                if inner.done.is_empty() {
                    break;
                }
                let done = std::mem::take(&mut inner.done);
                for &(data, res, flags) in &done {
                    inner.complete(data, res, flags);
                }
                inner.done = done;
            }
            std::mem::take(&mut inner.wake)
        };
        for waker in wake.drain(..) {
            waker.wake();
        }
        // Keep the vector's capacity for the next reaping.
        let mut inner = self.inner.borrow_mut();
        if inner.wake.capacity() < wake.capacity() {
            inner.wake = wake;
        }
    }

    fn release(&self, key: usize) {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(slot) = inner.slots.get_mut(key) else { return };
        slot.dropped = true;
        slot.read_waker = None;
        slot.write_waker = None;
        for segment in slot.received.drain(..) {
            inner.buffers.release(segment.bid);
        }
        // `offset` counts into the first segment: none is left. A receive
        // still armed completes after this, and `unread` must read zero.
        slot.offset = 0;
        if slot.recv_deferred {
            // Not queued for the kernel yet: nothing to cancel, and the
            // submission skips it.
            slot.recv_deferred = false;
            slot.recv_armed = false;
        }
        // Called once per slot (from the stream's drop), so at most one
        // cancellation of each is ever in flight.
        let recv_armed = slot.recv_armed && !slot.recv_cancelling;
        slot.recv_cancelling |= recv_armed;
        let poll_armed = slot.poll_out == PollOut::Armed;
        if recv_armed {
            let armed = if slot.recv_is_poll { tag(POLL_IN, key) } else { tag(RECV, key) };
            let cancel = opcode::AsyncCancel::new(armed).build().user_data(tag(CANCEL, key));
            inner.push(&cancel);
        }
        if poll_armed {
            let cancel = opcode::PollRemove::new(tag(POLL_OUT, key)).build().user_data(tag(CANCEL, key));
            inner.push(&cancel);
        }
        inner.rearm_starved_soon();
        inner.free_if_done(key);
    }
}

impl Inner {
    fn slot_of(&self, fd: RawFd) -> Option<&Slot> {
        let key = *self.by_fd.get(usize::try_from(fd).ok()?)?;
        self.slots.get(key).filter(|slot| slot.fd == fd && !slot.dropped)
    }

    /// Queues one submission, entering the kernel first if the queue is
    /// full, and entering a large batch at once.
    fn push(&mut self, entry: &squeue::Entry) {
        loop {
            // SAFETY: every buffer an entry points to outlives its
            // operation: receives use the provided ring, which lives as long
            // as the `IoUring` (dropped after it, see `ProvidedBuffers`); a
            // send points into its slot's `sending`, which is neither
            // changed nor dropped until the send's completion arrives (a
            // slot is freed only with no operation in flight); a file
            // update points into `fixed_fds`, which is never reallocated
            // and is dropped after the ring (field order).
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                break;
            }
            self.enter();
        }
        if self.ring.submission().len() >= SUBMIT_BATCH {
            self.enter();
        } else {
            self.schedule_submit();
        }
    }

    /// Wakes the ring's task to enter what this turn queues, once per turn.
    fn schedule_submit(&mut self) {
        if !self.submit_scheduled {
            self.submit_scheduled = true;
            if let Some(task) = &self.task {
                task.wake_by_ref();
            }
        }
    }

    /// Enters everything queued, the turn's receives last, after arming
    /// the receives that ran out of buffers; and, when `collect` (the
    /// kernel holds completions back) or anything is entered, runs the
    /// task work pending for this thread and collects its completions, in
    /// the same system call.
    fn submit(&mut self, collect: bool) {
        self.rearm_starved();
        let mut receives = std::mem::take(&mut self.receives);
        for key in receives.drain(..) {
            self.push_deferred(key);
        }
        self.receives = receives;
        self.submit_scheduled = false;
        let queued = self.ring.submission().len();
        if queued == 0 && !collect {
            return;
        }
        // SAFETY: no argument pointer is passed; `queued` entries are in
        // the submission queue, each valid (see `push`).
        entered(unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(queued as u32, 0, IORING_ENTER_GETEVENTS, None)
        });
    }

    /// Enters what is queued, mid-turn (the queue is full, or holds a
    /// large batch). Held-back completions are collected by the turn's
    /// [`Inner::submit`].
    fn enter(&mut self) {
        entered(self.ring.submit());
    }

    /// Whether the kernel holds completions that an entry asking for them
    /// posts now: task work pending for this thread (`IORING_SQ_TASKRUN`),
    /// or completions a full completion queue overflowed into the kernel's
    /// own list (`IORING_SQ_CQ_OVERFLOW`).
    fn completions_held(&mut self) -> bool {
        let queue = self.ring.submission();
        queue.taskrun() || queue.cq_overflow()
    }

    /// Puts the socket of a new slot in the ring's table of registered
    /// files at its key, when the table has room for it. The update is a
    /// submission, entered before the slot's first receive (the kernel
    /// issues a submission batch in order), so adopting costs no system
    /// call of its own.
    fn register_file(&mut self, key: usize, fd: RawFd) {
        let Some(entry) = self.fixed_fds.get_mut(key) else { return };
        *entry = fd;
        let update = opcode::FilesUpdate::new(entry as *const RawFd, 1).offset(key as i32).build();
        self.push(&update.user_data(tag(FILES, key)));
    }

    /// Whether the socket of slot `key` is in the ring's table of
    /// registered files: every slot whose key fits the table has it there
    /// ([`Inner::register_file`]).
    fn is_fixed(&self, key: usize) -> bool {
        key < self.fixed_fds.len()
    }

    /// Asks for a receive for `key`, queued for the kernel after everything
    /// else this loop turn queues: after the turn's sends, and so after
    /// the response the reader has just written. (Asked for when the
    /// reader waits and no receive is armed: the first, or after a
    /// multishot receive ended; see the module doc.)
    ///
    /// Why: queued at once, beside that response, a receive cannot find
    /// the client's next request, so the kernel arms a poll for it and the
    /// request completes it later through task work: two steps more per
    /// request. Queued after the turn's sends, it is tried once the kernel
    /// has sent them all, and by then many clients have answered: the
    /// receive takes the request at once, with no poll. (xitca-web's
    /// io_uring build reads only after its write has completed, which
    /// avoids the poll likewise.) On this machine (one worker on CPU 0,
    /// the lab client on CPU 1, `/json`, 256 connections), polls armed per
    /// request (the `io_uring_poll_arm` tracepoint) went from 1.00 to 0.22
    /// to 0.47, as fast as the client answers. Requests per server
    /// CPU-second, medians of paired rounds: 1.085x while the VM ran slow,
    /// 1.00x to 1.02x while it ran fast, where every server here meets the
    /// client's own ceiling (about 185k requests/s). Pipelined
    /// `/plaintext` and WebSocket echo were level.
    fn queue_receive(&mut self, key: usize) {
        let Some(slot) = self.slots.get_mut(key) else { return };
        slot.recv_armed = true;
        slot.recv_deferred = true;
        self.receives.push(key);
        self.schedule_submit();
    }

    /// Queues the receive asked for `key` for the kernel, unless its
    /// stream has been dropped since (a slot reused and asked again
    /// queues once): multishot unless the connection fell behind, at most
    /// [`MAX_RECV`] bytes a completion, into the provided buffers.
    /// The kernel tries it at once (no `IORING_RECVSEND_POLL_FIRST`) and
    /// arms a poll only if the socket is empty.
    fn push_deferred(&mut self, key: usize) {
        let fixed = self.is_fixed(key);
        let Some(slot) = self.slots.get_mut(key) else { return };
        if !slot.recv_deferred {
            return;
        }
        slot.recv_deferred = false;
        let recv = match (fixed, slot.single_shot) {
            (true, false) => {
                opcode::RecvMulti::new(types::Fixed(key as u32), GROUP).len(MAX_RECV as u32).build()
            }
            (false, false) => opcode::RecvMulti::new(types::Fd(slot.fd), GROUP).len(MAX_RECV as u32).build(),
            (true, true) => {
                opcode::Recv::new(types::Fixed(key as u32), std::ptr::null_mut(), MAX_RECV as u32)
                    .buf_group(GROUP)
                    .build()
                    .flags(squeue::Flags::BUFFER_SELECT)
            }
            (false, true) => opcode::Recv::new(types::Fd(slot.fd), std::ptr::null_mut(), MAX_RECV as u32)
                .buf_group(GROUP)
                .build()
                .flags(squeue::Flags::BUFFER_SELECT),
        };
        self.push(&recv.user_data(tag(RECV, key)));
    }

    /// Arms again the receives that ended for want of a buffer, once the
    /// kernel has one to give: armed while it has none, each would end
    /// with `ENOBUFS` again in the same system call, and the ring's task,
    /// finding a completion after every entry, would enter again and again
    /// (see [`Ring::run`]).
    fn rearm_starved(&mut self) {
        if self.buffers.in_ring == 0 {
            return;
        }
        while let Some(key) = self.starved.pop() {
            if let Some(slot) = self.slots.get(key) {
                if !slot.dropped && !slot.recv_armed && slot.recv_end.is_none() {
                    // Queued with the turn's receives, which this
                    // submission enters right after.
                    self.queue_receive(key);
                }
            }
        }
    }

    /// Called after buffers may have gone back to the kernel: if receives
    /// wait for one and the kernel has one again, asks for the submission
    /// that arms them ([`Inner::rearm_starved`]). Without it, a worker whose
    /// every connection waited for a buffer would never submit again.
    fn rearm_starved_soon(&mut self) {
        if !self.starved.is_empty() && self.buffers.in_ring > 0 {
            self.schedule_submit();
        }
    }

    fn send(&mut self, key: usize) {
        let fixed = self.is_fixed(key);
        let Some(slot) = self.slots.get_mut(key) else { return };
        let rest = &slot.sending[slot.sent..];
        let entry = if fixed {
            opcode::Send::new(types::Fixed(key as u32), rest.as_ptr(), rest.len() as u32)
        } else {
            opcode::Send::new(types::Fd(slot.fd), rest.as_ptr(), rest.len() as u32)
        };
        let entry = if slot.last_sends { entry.flags(libc::MSG_MORE) } else { entry }.build();
        slot.send_in_flight = true;
        self.push(&entry.user_data(tag(SEND, key)));
    }

    fn complete(&mut self, data: u64, res: i32, flags: u32) {
        let key = (data >> 8) as usize;
        match data & 0xff {
            RECV => self.received(key, res, flags),
            SEND => self.sent(key, res),
            POLL_OUT => self.polled(key),
            POLL_IN => self.readable(key),
            FILES if res < 0 => {
                // Not expected (the key is within the table): the slot's
                // operations then fail with `EBADF`, and it closes.
                tracing::error!(error = %io::Error::from_raw_os_error(-res), "io_uring: a registered file update failed");
            }
            _ => {}
        }
    }

    /// Has the reader of `key` woken by `cx` when input arrives, arming
    /// what waits for it unless something is armed already: a `POLLIN`
    /// poll when the reader will read `directly` (it has room for a large
    /// body), else a receive into the provided buffers.
    #[inline]
    fn await_input(&mut self, key: usize, cx: &Context<'_>, directly: bool) {
        let Some(slot) = self.slots.get_mut(key) else { return };
        keep_waker(&mut slot.read_waker, cx);
        if slot.recv_armed {
            return;
        }
        if directly {
            self.arm_poll_in(key);
        } else {
            self.queue_receive(key);
        }
    }

    /// Waits in the ring for input to read directly.
    fn arm_poll_in(&mut self, key: usize) {
        let Some(slot) = self.slots.get_mut(key) else { return };
        slot.recv_armed = true;
        slot.recv_is_poll = true;
        let poll = opcode::PollAdd::new(types::Fd(slot.fd), libc::POLLIN as u32).build();
        self.push(&poll.user_data(tag(POLL_IN, key)));
    }

    fn readable(&mut self, key: usize) {
        let Some(slot) = self.slots.get_mut(key) else { return };
        slot.recv_armed = false;
        slot.recv_is_poll = false;
        // Input, end of stream, an error or a cancellation alike: the
        // reader's direct `recv` sees which (or finds nothing, and waits
        // again).
        slot.bulk = true;
        if let Some(waker) = slot.read_waker.take() {
            self.wake.push(waker);
        }
        self.free_if_done(key);
    }

    /// Waits in the ring for room in the socket's send buffer.
    fn arm_poll_out(&mut self, key: usize) {
        let Some(slot) = self.slots.get_mut(key) else { return };
        slot.poll_out = PollOut::Armed;
        let poll = opcode::PollAdd::new(types::Fd(slot.fd), libc::POLLOUT as u32).build();
        self.push(&poll.user_data(tag(POLL_OUT, key)));
    }

    fn polled(&mut self, key: usize) {
        let Some(slot) = self.slots.get_mut(key) else { return };
        // Room, an error or a cancellation alike: the writer tries again
        // and sees which.
        slot.poll_out = PollOut::Ready;
        if let Some(waker) = slot.write_waker.take() {
            self.wake.push(waker);
        }
        self.free_if_done(key);
    }

    fn received(&mut self, key: usize, res: i32, flags: u32) {
        let Some(slot) = self.slots.get_mut(key) else { return };
        let more = cqueue::more(flags);
        if !more {
            slot.recv_armed = false;
            slot.recv_cancelling = false;
        }
        if res > 0 {
            slot.bulk = res >= MAX_RECV as i32;
        }
        if let Some(bid) = cqueue::buffer_select(flags) {
            let segment = self.buffers.filled(bid, res.max(0) as u32, flags & CQE_F_BUF_MORE != 0);
            if slot.dropped || res <= 0 {
                self.buffers.release(bid);
            } else {
                slot.received.push_back(segment);
            }
        }
        // The receive stays armed while its reader keeps up. A reader
        // MAX_RECV behind (a flood, a reader that stopped) ends it, and the
        // connection falls back to one receive per wait, each at most
        // MAX_RECV, so it cannot take more than its share of the buffers or
        // of the loop again. A large body ends it too, to be read directly
        // (`bulk`).
        let behind = !slot.dropped && slot.unread() >= MAX_RECV;
        if more && !slot.recv_cancelling && (behind || slot.bulk) {
            slot.single_shot |= behind;
            slot.recv_cancelling = true;
            let cancel = opcode::AsyncCancel::new(tag(RECV, key)).build().user_data(tag(CANCEL, key));
            self.push(&cancel);
        }
        let Some(slot) = self.slots.get_mut(key) else { return };
        if res == -libc::ENOBUFS {
            // Every buffer is taken: armed again once the turn's readers
            // have given some back.
            self.starved.push(key);
        } else if res <= 0 && res != -libc::ECANCELED {
            // End of stream, or an error: for good.
            slot.recv_end = Some(res);
        }
        if res != -libc::ENOBUFS {
            if let Some(waker) = slot.read_waker.take() {
                self.wake.push(waker);
            }
        }
        // A receive starved for a buffer this gave back is armed by the
        // submission `Ring::run` makes after every reaping.
        self.free_if_done(key);
    }

    fn sent(&mut self, key: usize, res: i32) {
        let Some(slot) = self.slots.get_mut(key) else { return };
        slot.send_in_flight = false;
        if res <= 0 {
            // The peer is gone (a send of something never returns 0
            // otherwise): drop the output and report it to the writer.
            slot.send_error = Some(if res == 0 { -libc::EPIPE } else { res });
            slot.sent = slot.sending.len();
        } else {
            slot.sent += res as usize;
        }
        if slot.sent >= slot.sending.len() {
            slot.sent = 0;
            let mut done = std::mem::take(&mut slot.sending);
            if done.capacity() <= KEEP_SEND_CAPACITY && self.spare_sends.len() < SPARE_SEND_BUFFERS {
                done.clear();
                self.spare_sends.push(done);
            }
        }
        if let Some(waker) = slot.write_waker.take() {
            self.wake.push(waker);
        }
        if !slot.sending.is_empty() {
            self.send(key);
        } else {
            self.free_if_done(key);
        }
    }

    /// Closes a dropped connection once the kernel holds nothing of it.
    fn free_if_done(&mut self, key: usize) {
        let Some(slot) = self.slots.get(key) else { return };
        if slot.dropped && !slot.busy() {
            let slot = self.slots.remove(key);
            if let Some(entry) = self.by_fd.get_mut(slot.fd as usize) {
                if *entry == key {
                    *entry = NO_SLOT;
                }
            }
            for segment in slot.received {
                self.buffers.release(segment.bid);
            }
            self.rearm_starved_soon();
            if self.is_fixed(key) {
                // The table holds the socket open too. Entered in order, the
                // removal comes before any registration of a new connection
                // at this key.
                let remove = opcode::Close::new(types::Fixed(key as u32)).build();
                self.push(&remove.user_data(tag(FILES, key)));
            }
            // SAFETY: the slot owned the descriptor and nothing in the ring
            // refers to it any more.
            unsafe { libc::close(slot.fd) };
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.slots.is_empty() {
            return;
        }
        // Connections whose operations were still in flight when the worker
        // stopped. Closing the ring cancels those operations, but the
        // kernel finishes tearing it down in the background: their receive
        // buffers are leaked rather than freed under it, and their sockets
        // closed (the ring holds its own reference until then).
        self.buffers.data.leak();
        for slot in self.slots.drain() {
            // SAFETY: the slot owned the descriptor; the ring's references
            // to the socket are its own.
            unsafe { libc::close(slot.fd) };
        }
    }
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("ring_fd", &self.inner.try_borrow().ok().map(|inner| inner.ring.as_raw_fd()))
            .finish_non_exhaustive()
    }
}

/// The slot a writer of connection `key` works on, or the error its
/// writes now end with: the connection is gone, or a send of it failed.
fn writer(slots: &mut Slab<Slot>, key: usize) -> io::Result<&mut Slot> {
    let slot = slots.get_mut(key).ok_or(io::ErrorKind::NotConnected)?;
    match slot.send_error {
        Some(err) => Err(io::Error::from_raw_os_error(-err)),
        None => Ok(slot),
    }
}

/// The slot of a writer whose previous send has completed; `Pending`
/// while it is in flight, with the waker of `cx` kept for its completion.
fn idle_writer<'s>(
    slots: &'s mut Slab<Slot>,
    key: usize,
    cx: &mut Context<'_>,
) -> Poll<io::Result<&'s mut Slot>> {
    let slot = match writer(slots, key) {
        Ok(slot) => slot,
        Err(e) => return Poll::Ready(Err(e)),
    };
    if slot.send_in_flight {
        keep_waker(&mut slot.write_waker, cx);
        return Poll::Pending;
    }
    Poll::Ready(Ok(slot))
}

/// Reports an `io_uring_enter` that failed for good. Interrupted, or the
/// completion queue full: what was not taken stays queued for the next
/// turn.
fn entered(result: io::Result<usize>) {
    match result {
        Ok(_) => {}
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)) => {}
        Err(e) => tracing::error!(error = %e, "io_uring_enter failed"),
    }
}

/// Keeps the waker of `cx` in `waker`, unless the one there already wakes
/// the same task (cloning a waker is not free).
fn keep_waker(waker: &mut Option<Waker>, cx: &Context<'_>) {
    match waker {
        Some(kept) if kept.will_wake(cx.waker()) => {}
        _ => *waker = Some(cx.waker().clone()),
    }
}

/// A cleartext TCP connection served through the worker's ring.
pub(crate) struct UringStream {
    ring: Rc<Ring>,
    key: usize,
}

impl Drop for UringStream {
    fn drop(&mut self) {
        self.ring.release(self.key);
    }
}

impl AsyncRead for UringStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut inner = this.ring.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(slot) = inner.slots.get_mut(this.key) else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        if !slot.received.is_empty() {
            while buf.remaining() > 0 {
                let Some(&segment) = slot.received.front() else { break };
                let data = &inner.buffers.bytes(segment)[slot.offset..];
                let n = data.len().min(buf.remaining());
                buf.put_slice(&data[..n]);
                slot.offset += n;
                if slot.offset == segment.len as usize {
                    slot.received.pop_front();
                    slot.offset = 0;
                    inner.buffers.release(segment.bid);
                }
            }
            inner.rearm_starved_soon();
            return Poll::Ready(Ok(()));
        }
        if let Some(ended) = slot.input_ended() {
            return Poll::Ready(ended);
        }
        if slot.reads_directly() && buf.remaining() > 0 {
            // A large body arriving: read it straight into the reader's
            // buffer, as much as it has room for, as epoll would (a ring
            // receive takes at most MAX_RECV, and a loop turn each).
            // SAFETY: recv only writes the bytes it returns, and those
            // are then marked initialised and filled.
            let spare = unsafe { buf.unfilled_mut() };
            let room = spare.len();
            match crate::sys::recv_nonblocking(slot.fd, spare) {
                Ok(n) => {
                    // SAFETY: recv wrote the first `n` bytes of `spare`.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    if n == 0 {
                        slot.recv_end = Some(0);
                    }
                    // A short read emptied the socket.
                    slot.bulk = n == room;
                    return Poll::Ready(Ok(()));
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
                    slot.bulk = false;
                }
                Err(e) => {
                    slot.recv_end = Some(-e.raw_os_error().unwrap_or(libc::EIO));
                    return Poll::Ready(Err(e));
                }
            }
        }
        inner.await_input(this.key, cx, buf.remaining() >= DIRECT_READ_ROOM);
        Poll::Pending
    }
}

/// Input read in place: a reader that can parse straight from the ring's
/// receive buffers borrows the first unread segment ([`UringStream::received`]),
/// says how much of it it used ([`UringStream::consume_received`]), and waits
/// for more without a buffer of its own ([`UringStream::poll_received`]).
/// HTTP/1.1 does (see `proto::h1::conn`); everything else reads through
/// [`AsyncRead`], which copies.
impl UringStream {
    /// The first received bytes not yet read, where the kernel put them;
    /// empty if there are none. More may follow in later segments.
    pub(crate) fn received(&self) -> &[u8] {
        let inner = self.ring.inner.borrow();
        let Some(slot) = inner.slots.get(self.key) else { return &[] };
        let Some(&segment) = slot.received.front() else { return &[] };
        let bytes = &inner.buffers.bytes(segment)[slot.offset..];
        // SAFETY: the bytes lie in `ProvidedBuffers::data`, a mapping that
        // lives as long as the ring, which `self.ring` keeps alive, and
        // the kernel wrote them before posting their completion. It writes
        // into this part of the buffer again only after the buffer goes
        // back to it, and that needs this segment released: only
        // `consume_received`, `poll_read` and the stream's drop release a
        // stream's segments, and each needs `&mut self` or `self`, which
        // the returned borrow of `self` excludes until it ends. (The
        // completion handler only appends segments, and releases only
        // those of dropped streams.)
        unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) }
    }

    /// Marks the first `n` bytes of [`UringStream::received`] read; a
    /// segment read to its end goes back to the worker's buffers.
    pub(crate) fn consume_received(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let mut inner = self.ring.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(slot) = inner.slots.get_mut(self.key) else { return };
        let Some(&segment) = slot.received.front() else { return };
        slot.offset = (slot.offset + n).min(segment.len as usize);
        if slot.offset == segment.len as usize {
            slot.received.pop_front();
            slot.offset = 0;
            inner.buffers.release(segment.bid);
            inner.rearm_starved_soon();
        }
    }

    /// Whether the next wait for input can be [`UringStream::poll_received`]:
    /// not when the last receive took all it could, so that a large body
    /// is read straight from the socket by [`AsyncRead::poll_read`].
    pub(crate) fn waits_in_place(&self) -> bool {
        let inner = self.ring.inner.borrow();
        inner.slots.get(self.key).is_some_and(|slot| !slot.reads_directly())
    }

    /// Waits until input has been received, without reading it: ready
    /// with the length of [`UringStream::received`], 0 at the end of the
    /// stream.
    pub(crate) fn poll_received(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let mut inner = self.ring.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(slot) = inner.slots.get_mut(self.key) else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        if let Some(segment) = slot.received.front() {
            return Poll::Ready(Ok(segment.len as usize - slot.offset));
        }
        if let Some(ended) = slot.input_ended() {
            return Poll::Ready(ended.map(|()| 0));
        }
        inner.await_input(self.key, cx, false);
        Poll::Pending
    }
}

impl UringStream {
    /// Takes up to [`MAX_SEND`] bytes of `bufs` into the connection's send
    /// buffer and queues their send, once the previous send has completed.
    fn poll_send(&mut self, cx: &mut Context<'_>, bufs: &[&[u8]]) -> Poll<io::Result<usize>> {
        let mut inner = self.ring.inner.borrow_mut();
        let inner = &mut *inner;
        let slot = std::task::ready!(idle_writer(&mut inner.slots, self.key, cx))?;
        slot.sending.clear();
        slot.sent = 0;
        if slot.sending.capacity() == 0 {
            if let Some(spare) = inner.spare_sends.pop() {
                slot.sending = spare;
            }
        }
        let mut room = MAX_SEND;
        for buf in bufs {
            let n = buf.len().min(room);
            slot.sending.extend_from_slice(&buf[..n]);
            room -= n;
            if room == 0 {
                break;
            }
        }
        let taken = slot.sending.len();
        if taken > 0 {
            inner.send(self.key);
        }
        Poll::Ready(Ok(taken))
    }
}

impl UringStream {
    /// Sends all of `out` and leaves it empty. The buffer itself goes to
    /// the ring, and `out` gets a spare one in exchange, so the bytes are
    /// not copied; beyond [`MAX_SEND`] they are copied in pieces, as
    /// writes are.
    ///
    /// Copying a batch of 16 pipelined plaintext responses into the send
    /// buffer was about 230 instructions (14 a request) in `memcpy`.
    pub(crate) async fn send_all(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        if out.len() > MAX_SEND {
            let mut written = 0;
            while written < out.len() {
                written += std::future::poll_fn(|cx| self.poll_send(cx, &[&out[written..]])).await?;
            }
            out.clear();
            return Ok(());
        }
        std::future::poll_fn(|cx| self.poll_hand_over(cx, out)).await
    }

    /// [`UringStream::send_all`] for the last output of a connection that
    /// [`shutdown`](tokio::io::AsyncWriteExt::shutdown) ends next.
    ///
    /// Sent with `MSG_MORE`, a short response waits in the socket for the
    /// `FIN`, and both leave in one segment: one transmission, and on
    /// loopback one receive processed and one wake-up of the client, where
    /// a response with `TCP_NODELAY` and then a shutdown made two. Should
    /// the shutdown not come, closing the socket sends what it holds all
    /// the same.
    pub(crate) async fn send_last(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        if let Some(slot) = self.ring.inner.borrow_mut().slots.get_mut(self.key) {
            slot.last_sends = true;
        }
        self.send_all(out).await
    }

    /// Queues the send of `out` whole, once the previous send has
    /// completed, taking its buffer; see [`UringStream::send_all`].
    fn poll_hand_over(&mut self, cx: &mut Context<'_>, out: &mut Vec<u8>) -> Poll<io::Result<()>> {
        let mut inner = self.ring.inner.borrow_mut();
        let inner = &mut *inner;
        let slot = std::task::ready!(idle_writer(&mut inner.slots, self.key, cx))?;
        if out.is_empty() {
            return Poll::Ready(Ok(()));
        }
        // In exchange, `out` gets what the slot holds (all sent), or, if
        // that has no room (a completed send gives its buffer to the
        // spares), a spare: so that `out` needs no allocation.
        let idle = std::mem::take(&mut slot.sending);
        let exchange = if idle.capacity() > 0 { idle } else { inner.spare_sends.pop().unwrap_or(idle) };
        slot.sending = std::mem::replace(out, exchange);
        out.clear();
        slot.sent = 0;
        inner.send(self.key);
        Poll::Ready(Ok(()))
    }
}

/// Direct writes: system calls on the socket beside the ring's sends, for
/// what the ring has no better form of (`sendfile(2)` of a file body).
impl UringStream {
    /// Runs `write`, a non-blocking write to the socket, whose descriptor
    /// it is given. `WouldBlock` while the ring's send is still in flight
    /// (its bytes go first), or when the socket is full; then wait with
    /// [`UringStream::writable`].
    pub(crate) fn try_write_direct(
        &self,
        write: impl FnOnce(RawFd) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let mut inner = self.ring.inner.borrow_mut();
        let slot = writer(&mut inner.slots, self.key)?;
        if slot.send_in_flight {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let result = write(slot.fd);
        if matches!(&result, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            slot.socket_full = true;
        }
        result
    }

    /// Waits until a direct write may go on: the ring's send in flight has
    /// completed and, if the socket was full, it has room (or an error,
    /// which the next write reports).
    pub(crate) async fn writable(&self) -> io::Result<()> {
        std::future::poll_fn(|cx| {
            let mut inner = self.ring.inner.borrow_mut();
            let inner = &mut *inner;
            let slot = writer(&mut inner.slots, self.key)?;
            if !slot.send_in_flight {
                if slot.poll_out == PollOut::Ready {
                    slot.poll_out = PollOut::Idle;
                    slot.socket_full = false;
                }
                if !slot.socket_full {
                    return Poll::Ready(Ok(()));
                }
            }
            keep_waker(&mut slot.write_waker, cx);
            if !slot.send_in_flight && slot.poll_out == PollOut::Idle {
                inner.arm_poll_out(self.key);
            }
            Poll::Pending
        })
        .await
    }
}

impl AsyncWrite for UringStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_send(cx, &[data])
    }

    /// The slices go out in one send, as `writev` would send them.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut slices = [&[][..]; 16];
        let n = bufs.len().min(slices.len());
        for (slice, buf) in slices.iter_mut().zip(bufs) {
            *slice = buf;
        }
        self.get_mut().poll_send(cx, &slices[..n])
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Output is handed to the kernel as it is written.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let inner = this.ring.inner.borrow();
        match inner.slots.get(this.key).and_then(|slot| slot.send_error) {
            Some(err) => Poll::Ready(Err(io::Error::from_raw_os_error(-err))),
            None => Poll::Ready(Ok(())),
        }
    }

    /// Waits for every byte written to be sent, then ends the write side.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut inner = this.ring.inner.borrow_mut();
        let slot = writer(&mut inner.slots, this.key)?;
        if slot.send_in_flight {
            keep_waker(&mut slot.write_waker, cx);
            return Poll::Pending;
        }
        crate::sys::shutdown_write(slot.fd);
        Poll::Ready(Ok(()))
    }
}

/// Received bytes: `len` of them at `start` in buffer `bid`.
#[derive(Clone, Copy)]
struct Segment {
    bid: u16,
    start: u32,
    len: u32,
}

/// The ring of receive buffers the kernel picks from, registered with the
/// ring as buffer group [`GROUP`] and consumed incrementally: the kernel
/// packs receives into a buffer until it is full, saying in each
/// completion whether it goes on using it.
///
/// A buffer goes back to the kernel when the kernel has finished with it
/// and every segment received into it has been read (or its connection
/// dropped). Unregistered with the ring: `Inner` declares it after the
/// `IoUring`, and dropping the ring (closing its descriptor) ends every
/// operation first, so the kernel never writes into freed memory.
struct ProvidedBuffers {
    /// The ring of buffer entries the kernel reads (zeroed at first, as
    /// the kernel requires: its tail starts at 0).
    entries: crate::sys::AnonymousMemory,
    /// The buffers, `BUFFER_LEN` bytes each, resident only once written.
    data: crate::sys::AnonymousMemory,
    tail: u16,
    /// Buffers the kernel can still pick from: given to it and not yet
    /// reported finished (a partly filled one counts). At 0 a receive can
    /// only end with `ENOBUFS`.
    in_ring: usize,
    /// Per buffer: where the kernel's next receive into it starts.
    filled_to: Vec<u32>,
    /// Per buffer: segments received into it and not yet released.
    in_use: Vec<u32>,
    /// Per buffer: the kernel has finished with it.
    kernel_done: Vec<bool>,
}

impl ProvidedBuffers {
    fn register(ring: &IoUring) -> io::Result<Self> {
        let ring_bytes = BUFFERS as usize * std::mem::size_of::<types::BufRingEntry>();
        let mut this = ProvidedBuffers {
            entries: crate::sys::AnonymousMemory::new(ring_bytes)?,
            data: crate::sys::AnonymousMemory::new(BUFFERS as usize * BUFFER_LEN)?,
            tail: 0,
            in_ring: 0,
            filled_to: vec![0; BUFFERS as usize],
            in_use: vec![0; BUFFERS as usize],
            kernel_done: vec![false; BUFFERS as usize],
        };
        // SAFETY: the mapping is page-aligned and BUFFERS entries long, and
        // it is unmapped only after the ring that reads it is closed (the
        // type's doc).
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                this.ring_entries() as u64,
                BUFFERS,
                GROUP,
                PBUF_RING_INC,
            )
        }
        .map_err(|e| io::Error::new(e.kind(), format!("registering the receive buffer ring: {e}")))?;
        for bid in 0..BUFFERS {
            this.add(bid);
        }
        this.publish();
        Ok(this)
    }

    /// Records a receive of `len` bytes into buffer `bid`, which the kernel
    /// goes on using if `more`, and returns where they are. The segment
    /// counts as in use until [`ProvidedBuffers::release`].
    fn filled(&mut self, bid: u16, len: u32, more: bool) -> Segment {
        let b = usize::from(bid) % BUFFERS as usize;
        let start = self.filled_to[b];
        let len = len.min(BUFFER_LEN as u32 - start.min(BUFFER_LEN as u32));
        self.filled_to[b] = start + len;
        self.in_use[b] += 1;
        if !more && !self.kernel_done[b] {
            self.in_ring = self.in_ring.saturating_sub(1);
        }
        self.kernel_done[b] = !more;
        Segment { bid: b as u16, start, len }
    }

    /// A segment's bytes, which the kernel wrote before posting its
    /// completion and does not touch again.
    fn bytes(&self, segment: Segment) -> &[u8] {
        let start = usize::from(segment.bid) * BUFFER_LEN + segment.start as usize;
        self.data.bytes(start, segment.len as usize)
    }

    /// A segment of buffer `bid` has been read (or dropped): the buffer
    /// goes back to the kernel once it holds no other and the kernel has
    /// finished filling it.
    fn release(&mut self, bid: u16) {
        let b = usize::from(bid);
        self.in_use[b] = self.in_use[b].saturating_sub(1);
        if self.in_use[b] == 0 && self.kernel_done[b] {
            self.filled_to[b] = 0;
            self.kernel_done[b] = false;
            self.add(bid);
            self.publish();
        }
    }

    /// The ring's first entry, where the kernel reads them (and the tail).
    fn ring_entries(&self) -> *mut types::BufRingEntry {
        self.entries.ptr_at(0).cast()
    }

    fn add(&mut self, bid: u16) {
        let slot = (self.tail & (BUFFERS - 1)) as usize;
        let addr = self.data.ptr_at(bid as usize * BUFFER_LEN);
        let entries = self.ring_entries();
        // SAFETY: slot < BUFFERS, so the entry lies inside the mapping,
        // which is page-aligned; the kernel reads entries only between its
        // head and the published tail, and this one is past the tail until
        // `publish`.
        let entry = unsafe { &mut *entries.add(slot) };
        entry.set_addr(addr as u64);
        entry.set_len(BUFFER_LEN as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        self.in_ring += 1;
    }

    fn publish(&self) {
        let entries = self.ring_entries();
        // SAFETY: the tail is a u16 inside the ring's first entry, in the
        // mapping and aligned; the kernel reads it concurrently, so it is
        // written atomically with release order (after the entries).
        let tail = unsafe { AtomicU16::from_ptr(types::BufRingEntry::tail(entries) as *mut u16) };
        tail.store(self.tail, Ordering::Release);
    }
}
