//! One worker: a thread with its own listener, event loop, `Date` block,
//! connection registry and timeouts. Nothing here is shared with other
//! workers, so nothing here is locked.

use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::{Instant, SystemTime};

use slab::Slab;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::config::Config;
use crate::http::date::{date_block, until_next_second, DateBlock};
use crate::http::parse::HeadLimits;
use crate::http::writer::{ConnectionHeader, ResponseWriter};
use crate::http::StatusCode;
use crate::router::Router;
use crate::server::conn;
use crate::server::transport::Io;

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
pub(crate) struct ConnTimer {
    fd: RawFd,
    wait: Cell<Wait>,
    /// Worker-clock seconds after which the connection is dropped.
    deadline: Cell<u64>,
    /// Set by a shutdown sweep that found the connection idle; cleared by
    /// every [`ConnTimer::arm`], so it survives only while the connection
    /// stays in that same idle period.
    seen_idle: Cell<bool>,
}

impl ConnTimer {
    #[inline]
    pub(crate) fn arm(&self, wait: Wait, deadline: u64) {
        self.wait.set(wait);
        self.deadline.set(deadline);
        self.seen_idle.set(false);
    }
}

/// Per-worker state every connection task holds an `Rc` to.
pub(crate) struct Worker {
    pub(crate) config: Config,
    pub(crate) limits: HeadLimits,
    date: Cell<DateBlock>,
    /// When the first tick ran; later ticks are counted from it.
    first_tick: Cell<Option<Instant>>,
    /// Ticks so far (one a second).
    clock: Cell<u64>,
    conns: RefCell<Slab<Rc<ConnTimer>>>,
    shutting_down: Cell<bool>,
}

impl Worker {
    pub(crate) fn new(config: Config) -> Worker {
        Worker {
            limits: config.head_limits(),
            config,
            date: Cell::new(date_block(SystemTime::now())),
            first_tick: Cell::new(None),
            clock: Cell::new(0),
            conns: RefCell::new(Slab::new()),
            shutting_down: Cell::new(false),
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

    #[inline]
    pub(crate) fn shutting_down(&self) -> bool {
        self.shutting_down.get()
    }

    pub(crate) fn register(&self, fd: RawFd) -> (usize, Rc<ConnTimer>) {
        let timer = Rc::new(ConnTimer {
            fd,
            wait: Cell::new(Wait::Idle),
            deadline: Cell::new(u64::MAX),
            seen_idle: Cell::new(false),
        });
        let key = self.conns.borrow_mut().insert(Rc::clone(&timer));
        (key, timer)
    }

    pub(crate) fn unregister(&self, key: usize) {
        let mut conns = self.conns.borrow_mut();
        if conns.contains(key) {
            conns.remove(key);
        }
    }

    fn connection_count(&self) -> usize {
        self.conns.borrow().len()
    }

    /// Refreshes the clock and the `Date` block, then sweeps.
    fn tick(&self) {
        self.date.set(date_block(SystemTime::now()));
        // Count ticks, catching up if the loop was too busy to tick on time:
        // ticks land just after each wall-clock second, so rounding the time
        // since the first one gives the number of seconds that passed.
        let now = Instant::now();
        let first = self.first_tick.get().unwrap_or(now);
        self.first_tick.set(Some(first));
        let elapsed = (now - first).as_secs_f64().round() as u64;
        self.clock.set((self.clock.get() + 1).max(elapsed + 1));
        self.sweep(false);
    }

    /// Drops connections past their deadline and, during shutdown, idle ones.
    ///
    /// `closing` (shutdown sweeps only, [`SHUTDOWN_SWEEP`] apart) also
    /// closes connections idle since the previous such sweep.
    fn sweep(&self, closing: bool) {
        let now = self.clock.get();
        for (_, timer) in self.conns.borrow().iter() {
            let wait = timer.wait.get();
            let expired = wait != Wait::Busy && timer.deadline.get() <= now;
            if expired || (closing && idle_since_last_sweep(timer)) {
                if expired && wait == Wait::Head {
                    self.send_request_timeout(timer.fd);
                }
                // Ends the connection: its pending read returns end-of-file
                // and its task finishes and closes the socket.
                //
                // SAFETY: `fd` belongs to a live connection: entries are
                // removed (on this thread) before their socket is closed.
                unsafe { libc::shutdown(timer.fd, libc::SHUT_RDWR) };
                timer.deadline.set(u64::MAX);
            }
        }
    }

    /// Best-effort `408` to a client that was too slow to send its head. The
    /// connection is waiting to read and has nothing queued, so a write here
    /// cannot interleave with a response.
    fn send_request_timeout(&self, fd: RawFd) {
        let mut out = Vec::with_capacity(192);
        let date = self.date();
        ResponseWriter::new(&mut out, &date, ConnectionHeader::Close, false).write(
            StatusCode::REQUEST_TIMEOUT,
            crate::response::TEXT_UTF8,
            [],
            b"request header timeout\n",
        );
        // SAFETY: `fd` is a live socket (see `tick`), `out` is a valid
        // buffer of `out.len()` bytes; MSG_DONTWAIT keeps this non-blocking.
        unsafe {
            libc::send(fd, out.as_ptr().cast(), out.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL);
        }
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
fn idle_since_last_sweep(timer: &ConnTimer) -> bool {
    if timer.wait.get() != Wait::Idle || has_pending_input(timer.fd) {
        timer.seen_idle.set(false);
        return false;
    }
    timer.seen_idle.replace(true)
}

/// Interval between shutdown sweeps: how long a connection must stay idle
/// before shutdown closes it.
const SHUTDOWN_SWEEP: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether the socket has received bytes not read yet.
fn has_pending_input(fd: RawFd) -> bool {
    let mut pending: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the valid pointer passed;
    // on a closed or invalid fd it fails and writes nothing.
    let ok = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut pending) } == 0;
    ok && pending > 0
}

/// Removes a connection from its worker's registry when its task ends, on
/// every path (including cancellation at shutdown).
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

/// Runs one worker until shutdown is signalled and its connections drain.
pub(crate) async fn run<S: 'static>(
    listener: TcpListener,
    config: Config,
    router: Router<S>,
    mut shutdown: watch::Receiver<bool>,
) {
    let worker = Rc::new(Worker::new(config));
    let router = Rc::new(router);
    let ticker = tokio::task::spawn_local(tick_forever(Rc::clone(&worker)));

    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => accept(stream, &worker, &router),
                Err(e) => {
                    // Out of file descriptors or memory: back off instead of
                    // spinning on the error.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            },
        }
    }

    // Graceful shutdown: stop accepting, let in-flight requests finish
    // (their responses say `Connection: close`), drop idle connections.
    drop(listener);
    worker.shutting_down.set(true);
    let deadline = Instant::now() + worker.config.shutdown_timeout;
    let mut next_sweep = Instant::now();
    while worker.connection_count() > 0 && Instant::now() < deadline {
        if Instant::now() >= next_sweep {
            worker.sweep(true);
            next_sweep = Instant::now() + SHUTDOWN_SWEEP;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    ticker.abort();
}

fn accept<S: 'static>(stream: TcpStream, worker: &Rc<Worker>, router: &Rc<Router<S>>) {
    if worker.connection_count() >= worker.config.max_connections_per_worker {
        refuse(stream, worker);
        return;
    }
    // Responses are written whole, one write per batch: Nagle would only
    // delay them.
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY failed");
    }
    let (key, timer) = worker.register(stream.as_raw_fd());
    timer.arm(Wait::Idle, worker.deadline_after(worker.config.idle_timeout));
    let registration = Registration::new(Rc::clone(worker), key);
    tokio::task::spawn_local(conn::serve(
        Io::Tcp(stream),
        Rc::clone(worker),
        Rc::clone(router),
        timer,
        registration,
    ));
}

/// Answers a connection over the limit with `503` and closes it, so the
/// client gets a clear answer instead of a hang in the backlog.
fn refuse(stream: TcpStream, worker: &Worker) {
    let mut out = Vec::with_capacity(192);
    let date = worker.date();
    ResponseWriter::new(&mut out, &date, ConnectionHeader::Close, false).write(
        StatusCode::SERVICE_UNAVAILABLE,
        crate::response::TEXT_UTF8,
        [("Retry-After", "1")],
        b"connection limit reached\n",
    );
    let _ = stream.try_write(&out);
    // The client's request is still unread: linger so the 503 is not lost
    // to a reset.
    tokio::task::spawn_local(conn::linger_close(Io::Tcp(stream), std::time::Duration::from_secs(1)));
}

async fn tick_forever(worker: Rc<Worker>) {
    loop {
        tokio::time::sleep(until_next_second(SystemTime::now())).await;
        worker.tick();
    }
}
