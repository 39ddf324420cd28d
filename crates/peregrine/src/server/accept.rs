//! The accept loop of one worker: takes connections from its listeners,
//! hands each to a protocol's connection driver on its own task (after the
//! TLS handshake, on a TLS listener), refuses those over the limit, ticks
//! the worker's clock, and drains at shutdown.
//!
//! Out of file descriptors (`EMFILE`, `ENFILE`), `accept` fails while the
//! connection stays in the backlog; retrying at once would spin. The loop
//! pauses instead until one of this worker's connections closes (freeing a
//! descriptor) or [`ACCEPT_RETRY`] passes (another worker or another part
//! of the process may have freed one), then tries again. It logs once when
//! a pause begins and once when accepting resumes; the listener never stops
//! for good.
//!
//! A cleartext listener whose connections go to the worker's io_uring is
//! polled for readiness and accepted with `accept4` directly
//! ([`Acceptor::Ring`]): the connection never becomes a tokio `TcpStream`,
//! which would register it with epoll only for [`Ring::adopt`] to remove it
//! again, two `epoll_ctl` calls and a registration per connection for
//! nothing.

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::net::{TcpListener as StdListener, TcpStream as StdStream};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::unix::AsyncFd;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::listener::Listener;
use crate::config::{Config, EventLoop};
use crate::http::date::until_next_second;
use crate::proto::{h1, h2};
use crate::router::Router;
use crate::worker::timer::Wait;
use crate::worker::transport::Io;
use crate::worker::uring::Ring;
use crate::worker::{Registration, Worker, SHUTDOWN_SWEEP};

/// How a listener's connections are served, as each worker holds it.
#[derive(Clone)]
pub(crate) struct Role {
    http1: bool,
    h2: bool,
    #[cfg(feature = "tls")]
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Role {
    pub(crate) fn of(listener: &Listener) -> io::Result<Role> {
        Ok(Role {
            http1: listener.http1,
            h2: listener.h2,
            #[cfg(feature = "tls")]
            tls: match &listener.tls {
                Some(tls) => Some(tls.acceptor(listener.alpn())?),
                None => None,
            },
        })
    }

    /// Whether the listener takes cleartext connections.
    fn cleartext(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_none();
        #[cfg(not(feature = "tls"))]
        true
    }

    /// The protocol of a cleartext connection.
    fn cleartext_protocol(&self) -> Protocol {
        // HTTP/1.1 when offered; telling an HTTP/2 prior-knowledge preface
        // apart from it on a shared port is the HTTP/1.1 driver's business.
        if self.http1 || !self.h2 {
            Protocol::Http1 { h2c: self.h2 }
        } else {
            Protocol::H2
        }
    }
}

/// The protocol a connection speaks, settled at accept (cleartext) or by
/// ALPN (TLS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// HTTP/1.x; `h2c`: a connection opening with the HTTP/2 preface is
    /// handed to the HTTP/2 driver (cleartext ports that speak both).
    Http1 {
        h2c: bool,
    },
    H2,
}

/// The worker's io_uring, set up before the worker reports itself ready:
/// `None` when [`Config::event_loop`] is epoll or no listener takes
/// cleartext connections, or when the kernel refuses (then the worker
/// serves with epoll, with a warning if io_uring was asked for).
pub(crate) fn ring_for<'a>(mut roles: impl Iterator<Item = &'a Role>, config: &Config) -> Option<Rc<Ring>> {
    let required = match config.event_loop {
        EventLoop::Epoll => return None,
        EventLoop::IoUring => true,
        EventLoop::Auto => false,
    };
    if !roles.any(Role::cleartext) {
        return None;
    }
    match Ring::new() {
        Ok(ring) => {
            tracing::debug!("serving cleartext connections through io_uring");
            Some(ring)
        }
        Err(e) if required => {
            tracing::warn!(error = %e, "io_uring is not available; serving with epoll");
            None
        }
        Err(e) => {
            tracing::info!(error = %e, "io_uring is not available; serving with epoll");
            None
        }
    }
}

/// A listening socket as the accept loop polls it.
pub(crate) enum Acceptor {
    /// Connections become tokio `TcpStream`s: TLS listeners, and every
    /// listener of a worker on epoll.
    Tokio(TcpListener),
    /// A cleartext listener of a worker on io_uring: accepted with
    /// `accept4` when epoll reports it readable, and handed to the ring as
    /// they are (see the module's doc).
    Ring(AsyncFd<StdListener>),
}

impl Acceptor {
    /// Registers `listener` (non-blocking by now) with the worker's
    /// runtime; `ring` says whether its connections go to an io_uring.
    pub(crate) fn new(listener: StdListener, role: &Role, ring: bool) -> io::Result<Acceptor> {
        if ring && role.cleartext() {
            // SAFETY: the `AsyncFd` owns the listener, whose descriptor
            // stays open, and the same, until it is dropped with it.
            let registered =
                unsafe { AsyncFd::register_with_interest(listener, tokio::io::Interest::READABLE) }?;
            Ok(Acceptor::Ring(registered))
        } else {
            Ok(Acceptor::Tokio(TcpListener::from_std(listener)?))
        }
    }

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(Accepted, SocketAddr)>> {
        match self {
            Acceptor::Tokio(listener) => {
                listener.poll_accept(cx).map_ok(|(stream, peer)| (Accepted::Tokio(stream), peer))
            }
            Acceptor::Ring(listener) => loop {
                let mut ready = std::task::ready!(listener.poll_read_ready(cx))?;
                // `WouldBlock` clears the readiness and polls again.
                if let Ok(result) =
                    ready.try_io(|listener| crate::sys::accept_nonblocking(listener.as_raw_fd()))
                {
                    return Poll::Ready(result.map(|(stream, peer)| (Accepted::Plain(stream), peer)));
                }
            },
        }
    }
}

/// A connection just accepted, in the form its listener gives it.
enum Accepted {
    Tokio(TcpStream),
    /// Non-blocking, registered with nothing yet.
    Plain(StdStream),
}

impl Accepted {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Accepted::Tokio(stream) => stream.as_raw_fd(),
            Accepted::Plain(stream) => stream.as_raw_fd(),
        }
    }

    /// As a tokio stream, registered with epoll; `None` (logged) when the
    /// registration fails, and the connection is dropped.
    fn into_tokio(self) -> Option<TcpStream> {
        match self {
            Accepted::Tokio(stream) => Some(stream),
            Accepted::Plain(stream) => TcpStream::from_std(stream)
                .inspect_err(|e| tracing::debug!(error = %e, "cannot register an accepted connection"))
                .ok(),
        }
    }

    /// As a std stream, registered with nothing.
    fn into_std(self) -> io::Result<StdStream> {
        match self {
            Accepted::Tokio(stream) => stream.into_std(),
            Accepted::Plain(stream) => Ok(stream),
        }
    }
}

/// Runs one worker until shutdown is signalled and its connections drain.
pub(crate) async fn run<S: 'static>(
    listeners: Vec<(Acceptor, Role)>,
    ring: Option<Rc<Ring>>,
    config: Config,
    router: Router<S>,
    mut shutdown: watch::Receiver<bool>,
    alt_svc: Option<http::HeaderValue>,
    others: impl FnOnce(&Rc<Worker>, &Rc<Router<S>>) -> Vec<tokio::task::JoinHandle<()>>,
) {
    let mut worker = Worker::new(config);
    worker.alt_svc = alt_svc;
    worker.ring = ring.clone();
    let worker = Rc::new(worker);
    let ring_task = ring.map(|ring| tokio::task::spawn_local(ring.run()));
    let router = Rc::new(router);
    let others = others(&worker, &router);
    let ticker = tokio::task::spawn_local(tick_forever(Rc::clone(&worker)));
    // Where the next poll starts, so a busy listener cannot starve others.
    let first = Cell::new(0usize);
    let accept_any = || {
        poll_fn(|cx| {
            let n = listeners.len();
            for i in 0..n {
                let at = (first.get() + i) % n;
                if let Poll::Ready(result) = listeners[at].0.poll_accept(cx) {
                    first.set((at + 1) % n);
                    return Poll::Ready((at, result));
                }
            }
            Poll::Pending
        })
    };
    // When accepting began to fail, and how many times it has since.
    let mut paused: Option<(Instant, u64)> = None;
    // When the worker last reached its connection limit (`None` while
    // under it).
    let mut full_since: Option<Instant> = None;

    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            (at, accepted) = accept_any() => match accepted {
                Ok((stream, peer)) => {
                    if let Some((since, failures)) = paused.take() {
                        tracing::info!(paused_ms = since.elapsed().as_millis() as u64, failures, "accepting again");
                    }
                    if worker.connection_count() >= worker.config.max_connections_per_worker {
                        let since = *full_since.get_or_insert_with(Instant::now);
                        if make_room(&worker, since).await {
                            full_since = None;
                        }
                    } else {
                        full_since = None;
                    }
                    accept(stream, peer, &listeners[at].1, &worker, &router);
                }
                Err(e) => {
                    let (_, failures) = paused.get_or_insert_with(|| {
                        tracing::warn!(
                            error = %e,
                            connections = worker.connection_count(),
                            "accept failed (out of file descriptors?); pausing until a connection closes"
                        );
                        (Instant::now(), 0)
                    });
                    *failures += 1;
                    // Whichever comes first: a connection of ours closing,
                    // or the retry interval.
                    let _ = tokio::time::timeout(ACCEPT_RETRY, worker.connection_closed()).await;
                }
            },
        }
    }

    // Graceful shutdown: stop accepting, let in-flight requests finish
    // (their responses say `Connection: close`), drop idle connections.
    drop(listeners);
    worker.begin_shutdown();
    let deadline = Instant::now() + worker.config.shutdown_timeout;
    let mut next_sweep = Instant::now();
    while worker.connection_count() > 0 && Instant::now() < deadline {
        if Instant::now() >= next_sweep {
            worker.sweep(true);
            next_sweep = Instant::now() + SHUTDOWN_SWEEP;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Drivers that own their sockets drain on their own, within the same
    // shutdown timeout.
    for task in others {
        let _ = task.await;
    }
    ticker.abort();
    if let Some(task) = ring_task {
        task.abort();
    }
}

/// Longest pause after a failed `accept` before trying again.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// How long a worker that reaches its connection limit waits for room
/// before it refuses connections (with `503`) until it is under the limit
/// again. With 100 ms, four back-to-back runs of 16,384 connections
/// (`peregrine-lab load --profile json-comp`, open-file limit 20,000) still
/// had 227 to 4,218 requests refused on io_uring; with 250 ms, none on
/// either event loop: closing 16,384 connections takes a worker about
/// 200 ms.
const FULL_GRACE: Duration = Duration::from_millis(250);

/// At the connection limit, waits for connections to close, for at most
/// [`FULL_GRACE`] after `since` (when the limit was reached); whether room
/// was made.
///
/// A client that closes its connections and opens new ones at once (a pool
/// being recycled, a load generator between two runs) has its new
/// connections accepted while the old ones' closes are still queued: read,
/// but not yet run. Refused at once, 2 to 20% of the new connections were
/// answered `503` (64 connections in `tests/http.rs`; 16,384 under
/// `peregrine-lab load`, where io_uring, which reads the closes in longer
/// batches, refused up to 6,298 requests of a run). The grace is counted
/// from when the limit was reached and no room was made since, not per
/// connection: a worker that stays full refuses at once after it, so a
/// flood over the limit still gets prompt answers.
async fn make_room(worker: &Worker, since: Instant) -> bool {
    while worker.connection_count() >= worker.config.max_connections_per_worker {
        let left = FULL_GRACE.saturating_sub(since.elapsed());
        if left.is_zero() {
            return false;
        }
        let _ = tokio::time::timeout(left, worker.connection_closed()).await;
    }
    true
}

fn accept<S: 'static>(
    stream: Accepted,
    peer: SocketAddr,
    role: &Role,
    worker: &Rc<Worker>,
    router: &Rc<Router<S>>,
) {
    if worker.connection_count() >= worker.config.max_connections_per_worker {
        #[cfg(feature = "tls")]
        if role.tls.is_some() {
            // A 503 would need a handshake first, the very work an
            // overloaded worker must not take on: close at once.
            return;
        }
        if let Some(stream) = stream.into_tokio() {
            refuse(stream, worker);
        }
        return;
    }
    // TCP_NODELAY (responses are written whole, one write per batch: Nagle
    // would only delay them) and TCP_NOTSENT_LOWAT come from the listening
    // socket, which accepted ones inherit: no setsockopt per connection
    // (test `server::tests::accepted_sockets_inherit_the_listeners_options`).
    let (key, timer) = worker.register(stream.as_raw_fd());
    let registration = Registration::new(Rc::clone(worker), key);
    #[cfg(feature = "tls")]
    if let Some(acceptor) = &role.tls {
        let Some(stream) = stream.into_tokio() else { return };
        // The handshake is the start of the first request: the header
        // timeout bounds it, from the first byte the client could send.
        timer.arm(Wait::Head, worker.deadline_after(worker.config.header_timeout));
        tokio::task::spawn_local(super::handshake::serve_tls(
            acceptor.clone(),
            stream,
            peer,
            Rc::clone(worker),
            Rc::clone(router),
            timer,
            registration,
        ));
        return;
    }
    timer.arm(Wait::Idle, worker.deadline_after(worker.config.idle_timeout));
    // Each driver is spawned as its own task rather than through `serve`:
    // the extra state machine between the task and the driver cost every
    // poll, so about 40 instructions a request on unpipelined `/json`
    // (callgrind).
    let io = match &worker.ring {
        Some(ring) => match stream.into_std().and_then(|stream| ring.adopt(stream)) {
            Ok(stream) => Io::Uring(stream),
            Err(e) => {
                tracing::debug!(error = %e, "cannot hand an accepted connection to io_uring");
                return;
            }
        },
        None => match stream.into_tokio() {
            Some(stream) => Io::Tcp(stream),
            None => return,
        },
    };
    let (worker, router) = (Rc::clone(worker), Rc::clone(router));
    match role.cleartext_protocol() {
        Protocol::Http1 { h2c } => {
            tokio::task::spawn_local(h1::conn::serve(
                io,
                Some(peer),
                h2c,
                worker,
                router,
                timer,
                registration,
            ));
        }
        Protocol::H2 => {
            tokio::task::spawn_local(h2::serve(io, false, Some(peer), worker, router, timer, registration));
        }
    }
}

/// Serves a connection past its TLS handshake with the driver of
/// `protocol` (cleartext connections spawn their driver directly).
#[cfg(feature = "tls")]
pub(crate) async fn serve<S: 'static>(
    protocol: Protocol,
    io: Io,
    peer: SocketAddr,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
    timer: Rc<crate::worker::timer::ConnTimer>,
    registration: Registration,
) {
    match protocol {
        Protocol::Http1 { h2c } => {
            h1::conn::serve(io, Some(peer), h2c, worker, router, timer, registration).await
        }
        Protocol::H2 => h2::serve(io, true, Some(peer), worker, router, timer, registration).await,
    }
}

/// Answers a connection over the limit with `503` and closes it, so the
/// client gets a clear answer instead of a hang in the backlog.
fn refuse(stream: TcpStream, worker: &Worker) {
    tokio::task::spawn_local(h1::conn::refuse(Io::Tcp(stream), worker.date()));
}

async fn tick_forever(worker: Rc<Worker>) {
    loop {
        tokio::time::sleep(until_next_second(SystemTime::now())).await;
        worker.tick();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(fd: RawFd, which: libc::c_int) -> libc::c_int {
        // SAFETY: `fcntl` with F_GETFL or F_GETFD only reads the flags of
        // a descriptor the caller keeps open.
        unsafe { libc::fcntl(fd, which) }
    }

    #[test]
    fn ring_connections_are_accepted_non_blocking_and_close_on_exec() {
        let listener = StdListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let fd = listener.as_raw_fd();
        // Nothing waiting: `WouldBlock`, the signal to clear readiness.
        let empty = crate::sys::accept_nonblocking(fd).map(|_| ()).unwrap_err();
        assert_eq!(empty.kind(), io::ErrorKind::WouldBlock);

        let client = StdStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = crate::sys::accept_nonblocking(fd).unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        assert_eq!(stream.peer_addr().unwrap(), client.local_addr().unwrap());
        assert_ne!(
            flags(stream.as_raw_fd(), libc::F_GETFL) & libc::O_NONBLOCK,
            0,
            "must not block the worker"
        );
        assert_ne!(flags(stream.as_raw_fd(), libc::F_GETFD) & libc::FD_CLOEXEC, 0);
    }
}
