//! Starting and stopping the server: listeners, worker threads, signals.
//!
//! Thread-per-core: each worker thread binds its own `SO_REUSEPORT` socket
//! for every [`Listener`] (the kernel spreads each address's connections
//! across them), runs a tokio `current_thread` runtime and keeps every
//! connection it accepts for that connection's whole life. Workers share
//! nothing on the request path (TLS listeners share their certificate and
//! session-ticket keys, read without locks).

mod accept;
#[cfg(feature = "tls")]
mod handshake;
mod listener;

use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;

use crate::config::Config;
use crate::router::Router;
use crate::sys;
pub use listener::Listener;

/// Which worker an app factory is building for.
#[derive(Clone, Copy, Debug)]
pub struct WorkerInfo {
    /// This worker's index, `0..count`.
    pub index: usize,
    /// How many workers the server runs.
    pub count: usize,
}

/// What an app factory may produce for a worker: a [`Router`], or a
/// `Result` whose error stops the server's start with that message.
pub trait IntoApp<S> {
    /// The router, or why the worker cannot serve.
    fn into_app(self) -> Result<Router<S>, String>;
}

impl<S> IntoApp<S> for Router<S> {
    fn into_app(self) -> Result<Router<S>, String> {
        Ok(self)
    }
}

impl<S, E: std::fmt::Display> IntoApp<S> for Result<Router<S>, E> {
    fn into_app(self) -> Result<Router<S>, String> {
        self.map_err(|e| e.to_string())
    }
}

/// A configured server, ready to bind and run.
#[derive(Clone, Debug, Default)]
pub struct Server {
    config: Config,
    listeners: Vec<Listener>,
}

impl Server {
    /// A server with default settings.
    pub fn new() -> Server {
        Server::default()
    }

    /// A server with the given settings.
    pub fn with_config(config: Config) -> Server {
        Server { config, listeners: Vec::new() }
    }

    /// The settings, for adjustment.
    pub fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// Sets the number of worker threads (at least 1).
    pub fn workers(mut self, workers: usize) -> Server {
        self.config.workers = workers.max(1);
        self
    }

    /// Adds a listener: an address with its protocols and, optionally, TLS.
    /// Every worker accepts on every listener.
    pub fn listen(mut self, listener: Listener) -> Server {
        self.listeners.push(listener);
        self
    }

    /// Binds `addr` (cleartext HTTP/1.1) and the listeners added with
    /// [`Server::listen`], starts the workers and serves until SIGINT or
    /// SIGTERM, then shuts down gracefully (a second signal ends the
    /// process at once, with status 130 or 143). `app` runs once on each worker
    /// thread to build that worker's router (and whatever state it owns,
    /// such as database connections).
    pub fn serve<F, Fut, S>(self, addr: impl ToSocketAddrs, app: F) -> io::Result<()>
    where
        F: Fn(WorkerInfo) -> Fut + Send + Sync + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoApp<S>,
        S: 'static,
    {
        self.with_first(addr)?.run(app)
    }

    /// Binds `addr` (cleartext HTTP/1.1) and the listeners added with
    /// [`Server::listen`] and starts the workers in the background; returns
    /// once every worker is accepting connections.
    pub fn spawn<F, Fut, S>(self, addr: impl ToSocketAddrs, app: F) -> io::Result<ServerHandle>
    where
        F: Fn(WorkerInfo) -> Fut + Send + Sync + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoApp<S>,
        S: 'static,
    {
        self.with_first(addr)?.start(app)
    }

    /// Like [`Server::serve`], on the listeners added with [`Server::listen`]
    /// only.
    pub fn run<F, Fut, S>(self, app: F) -> io::Result<()>
    where
        F: Fn(WorkerInfo) -> Fut + Send + Sync + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoApp<S>,
        S: 'static,
    {
        let signals = watch_signals()?;
        let handle = self.start(app)?;
        if signals.recv().is_err() {
            // Unreachable in practice (tokio's signal driver lives as long
            // as the watcher's runtime); a server nothing can stop
            // gracefully any more should end and let its supervisor
            // restart it.
            tracing::error!("stopped watching for SIGINT and SIGTERM; shutting down");
            handle.shutdown();
            return Err(io::Error::other("stopped watching for SIGINT and SIGTERM"));
        }
        tracing::info!("shutting down (a second SIGINT or SIGTERM stops at once)");
        handle.shutdown();
        Ok(())
    }

    /// `addr` as a cleartext HTTP/1.1 listener ahead of the others.
    fn with_first(mut self, addr: impl ToSocketAddrs) -> io::Result<Server> {
        let addr = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "address resolved to nothing"))?;
        self.listeners.insert(0, Listener::new(addr));
        Ok(self)
    }

    /// Like [`Server::spawn`], on the listeners added with
    /// [`Server::listen`] only.
    pub fn start<F, Fut, S>(self, app: F) -> io::Result<ServerHandle>
    where
        F: Fn(WorkerInfo) -> Fut + Send + Sync + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoApp<S>,
        S: 'static,
    {
        if self.listeners.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the server has no listener"));
        }
        for listener in &self.listeners {
            listener.check().map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
        }
        let fd_limit = sys::raise_open_file_limit();
        let mut config = self.config;
        if let Some(threshold) = config.malloc_release_threshold {
            let from_env = ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"]
                .iter()
                .any(|name| std::env::var_os(name).is_some());
            if !from_env && !sys::set_malloc_release_threshold(threshold) {
                tracing::debug!(threshold, "could not set the allocator's release thresholds");
            }
        }
        let count = config.workers.max(1);
        let limit = connection_limit(config.max_connections_per_worker, count, fd_limit);
        if limit < config.max_connections_per_worker {
            tracing::info!(
                per_worker = limit,
                configured = config.max_connections_per_worker,
                open_file_limit = fd_limit,
                "connection limit lowered to fit the open-file limit"
            );
            config.max_connections_per_worker = limit;
        }
        // Bind every listener before starting anything, so a busy port is
        // reported at once.
        let mut local_addrs = Vec::with_capacity(self.listeners.len());
        let mut per_worker: Vec<Vec<(StdListener, accept::Role)>> = (0..count).map(|_| Vec::new()).collect();
        #[cfg(feature = "http3")]
        let mut quic_per_worker: Vec<Vec<(std::net::UdpSocket, quinn::ServerConfig)>> =
            (0..count).map(|_| Vec::new()).collect();
        for listener in &self.listeners {
            let mut local = None;
            if listener.speaks_tcp() {
                let role = accept::Role::of(listener)?;
                let (local_addr, group) = bind_group(listener.addr, count, &config)?;
                local = Some(local_addr);
                for (worker, socket) in per_worker.iter_mut().zip(group) {
                    worker.push((socket, role.clone()));
                }
            }
            #[cfg(feature = "http3")]
            if let (true, Some(tls)) = (listener.h3, &listener.tls) {
                let server = crate::proto::h3::server_config(tls, &config)?;
                // UDP on the TCP socket's port (the one port 0 picked).
                let (local_addr, group) = bind_udp_group(local.unwrap_or(listener.addr), count)?;
                local.get_or_insert(local_addr);
                for (worker, socket) in quic_per_worker.iter_mut().zip(group) {
                    worker.push((socket, server.clone()));
                }
            }
            let local = local.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("listener {}: nothing to bind", listener.addr),
                )
            })?;
            local_addrs.push(local);
        }
        #[cfg(feature = "http3")]
        let quic_endpoint = crate::proto::h3::endpoint_config();
        // TLS connections advertise the first HTTP/3 listener's port.
        let alt_svc = self.listeners.iter().zip(&local_addrs).find(|(listener, _)| listener.h3).and_then(
            |(_, addr)| http::HeaderValue::try_from(format!("h3=\":{}\"; ma=86400", addr.port())).ok(),
        );
        #[cfg(feature = "tls")]
        let reloader = {
            let mut stores: Vec<crate::tls::Tls> = Vec::new();
            for tls in self.listeners.iter().filter_map(|l| l.tls.as_ref()) {
                if !stores.iter().any(|known| known.same_store(tls)) {
                    stores.push(tls.clone());
                }
            }
            if stores.is_empty() {
                None
            } else {
                Some(crate::tls::reload::Reloader::start(stores)?)
            }
        };

        let cpus = allowed_cpus();
        let app = Arc::new(app);
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let mut threads = Vec::with_capacity(count);
        #[cfg(feature = "http3")]
        let mut quic_per_worker = quic_per_worker.into_iter();
        for (index, listeners) in per_worker.into_iter().enumerate() {
            #[cfg(feature = "http3")]
            let (quic, quic_endpoint) = (quic_per_worker.next().unwrap_or_default(), quic_endpoint.clone());
            let app = Arc::clone(&app);
            let alt_svc = alt_svc.clone();
            let config = config.clone();
            let shutdown = shutdown_rx.clone();
            let ready = ready_tx.clone();
            let cpu =
                if config.pin_workers && !cpus.is_empty() { Some(cpus[index % cpus.len()]) } else { None };
            let thread =
                std::thread::Builder::new().name(format!("peregrine-worker-{index}")).spawn(move || {
                    if let Some(cpu) = cpu {
                        pin_to_cpu(cpu);
                    }
                    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                        Ok(rt) => rt,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let local = tokio::task::LocalSet::new();
                    local.block_on(&runtime, async move {
                        let ring = accept::ring_for(listeners.iter().map(|(_, role)| role), &config);
                        let listeners = match listeners
                            .into_iter()
                            .map(|(socket, role)| {
                                socket.set_nonblocking(true)?;
                                Ok((accept::Acceptor::new(socket, &role, ring.is_some())?, role))
                            })
                            .collect::<io::Result<Vec<_>>>()
                        {
                            Ok(l) => l,
                            Err(e) => {
                                let _ = ready.send(Err(e));
                                return;
                            }
                        };
                        let router = match app(WorkerInfo { index, count }).await.into_app() {
                            Ok(router) => router,
                            Err(why) => {
                                let _ = ready.send(Err(io::Error::other(format!("worker {index}: {why}"))));
                                return;
                            }
                        };
                        #[cfg(feature = "http3")]
                        let endpoints = match quic
                            .into_iter()
                            .map(|(socket, server)| {
                                crate::proto::h3::endpoint(quic_endpoint.clone(), server, socket)
                            })
                            .collect::<io::Result<Vec<_>>>()
                        {
                            Ok(endpoints) => endpoints,
                            Err(e) => {
                                let _ = ready.send(Err(e));
                                return;
                            }
                        };
                        let _ = ready.send(Ok(()));
                        drop(ready);
                        // Drivers that own their sockets (QUIC endpoints),
                        // started with the worker's state; the accept loop
                        // waits for them at shutdown.
                        let others =
                            move |_worker: &std::rc::Rc<crate::worker::Worker>,
                                  _router: &std::rc::Rc<Router<S>>| {
                                #[cfg(feature = "http3")]
                                return endpoints
                                    .into_iter()
                                    .map(|endpoint| {
                                        tokio::task::spawn_local(crate::proto::h3::serve_endpoint(
                                            endpoint,
                                            std::rc::Rc::clone(_worker),
                                            std::rc::Rc::clone(_router),
                                        ))
                                    })
                                    .collect::<Vec<_>>();
                                #[cfg(not(feature = "http3"))]
                                Vec::new()
                            };
                        accept::run(listeners, ring, config, router, shutdown, alt_svc, others).await;
                    });
                })?;
            threads.push(thread);
        }
        drop(ready_tx);
        let handle = ServerHandle {
            local_addrs,
            shutdown: shutdown_tx,
            threads,
            stop_within: config.shutdown_timeout + WORKER_EXIT_MARGIN,
            #[cfg(feature = "tls")]
            _reloader: reloader,
        };
        for _ in 0..count {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    handle.shutdown();
                    return Err(e);
                }
                Err(_) => {
                    handle.shutdown();
                    return Err(io::Error::other("a worker thread exited during start-up"));
                }
            }
        }
        Ok(handle)
    }
}

/// Binds `count` sockets of one `SO_REUSEPORT` group on `addr`, one per
/// worker, and steers the group's connections to them alone. With port 0
/// the first bind picks the port and the others join it.
fn bind_group(addr: SocketAddr, count: usize, config: &Config) -> io::Result<(SocketAddr, Vec<StdListener>)> {
    if addr.port() != 0 {
        ensure_port_free(addr)?;
    }
    let notsent_lowat = config.tcp_notsent_lowat;
    let first = bind(addr, config.backlog, notsent_lowat)?;
    let local_addr = first.local_addr()?;
    let mut group = vec![first];
    for _ in 1..count {
        group.push(bind(local_addr, config.backlog, notsent_lowat)?);
    }
    // Only these listeners take connections, even if another process
    // joins the port's group later.
    sys::steer_reuseport_group(group[0].as_raw_fd(), count as u32)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot steer connections on {local_addr}: {e}")))?;
    Ok((local_addr, group))
}

/// Binds `count` UDP sockets of one `SO_REUSEPORT` group on `addr`, one
/// per worker's QUIC endpoint. Unlike TCP's, the group gets no steering
/// program: the kernel's default choice (a hash of the 4-tuple) keeps a
/// connection's datagrams on one socket, which QUIC needs.
#[cfg(feature = "http3")]
fn bind_udp_group(addr: SocketAddr, count: usize) -> io::Result<(SocketAddr, Vec<std::net::UdpSocket>)> {
    if addr.port() != 0 {
        ensure_udp_port_free(addr)?;
    }
    let first = bind_udp(addr)?;
    let local_addr = first.local_addr()?;
    let mut group = vec![first];
    for _ in 1..count {
        group.push(bind_udp(local_addr)?);
    }
    Ok((local_addr, group))
}

/// Socket buffers of a QUIC endpoint: room for the bursts of datagrams
/// many connections send at once (the kernel caps it at `rmem_max`).
#[cfg(feature = "http3")]
const UDP_BUFFER_BYTES: usize = 4 * 1024 * 1024;

#[cfg(feature = "http3")]
fn bind_udp(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_port(true)?;
    if let Err(e) = socket.set_recv_buffer_size(UDP_BUFFER_BYTES) {
        tracing::debug!(error = %e, "cannot enlarge the UDP receive buffer");
    }
    if let Err(e) = socket.set_send_buffer_size(UDP_BUFFER_BYTES) {
        tracing::debug!(error = %e, "cannot enlarge the UDP send buffer");
    }
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on UDP {addr}: {e}")))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// [`ensure_port_free`] for UDP.
#[cfg(feature = "http3")]
fn ensure_udp_port_free(addr: SocketAddr) -> io::Result<()> {
    let probe = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    probe.bind(&addr.into()).map_err(|e| {
        let why = if e.kind() == io::ErrorKind::AddrInUse {
            "the address is already in use (is another server running on it?)".to_owned()
        } else {
            e.to_string()
        };
        io::Error::new(e.kind(), format!("cannot listen on UDP {addr}: {why}"))
    })
}

/// A running server.
#[derive(Debug)]
pub struct ServerHandle {
    local_addrs: Vec<SocketAddr>,
    shutdown: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
    /// How long [`ServerHandle::stop`] waits for the workers: the
    /// shutdown timeout plus [`WORKER_EXIT_MARGIN`].
    stop_within: Duration,
    /// Reloads the TLS listeners' certificates; stops with the handle.
    #[cfg(feature = "tls")]
    _reloader: Option<crate::tls::reload::Reloader>,
}

impl ServerHandle {
    /// The address of the server's first listener (useful after binding
    /// port 0): the `addr` given to [`Server::spawn`], or else the first
    /// added with [`Server::listen`].
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addrs[0]
    }

    /// Every listener's address, in the order they were added (after
    /// `spawn`'s `addr`, which comes first).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// Stops accepting, lets in-flight requests finish (up to the
    /// configured shutdown timeout) and waits for the workers to exit.
    /// Dropping the handle does the same, so a test's server stops even
    /// when the test fails half-way.
    ///
    /// The wait is bounded: a worker whose thread is still busy a moment
    /// after the shutdown timeout (a handler that blocks its thread, or a
    /// worker stuck in a loop) is logged as an error and left behind, so
    /// that [`Server::serve`] still returns and the process exits, and a
    /// test whose server hangs fails instead of hanging too.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.shutdown.send(true);
        let deadline = Instant::now() + self.stop_within;
        for thread in std::mem::take(&mut self.threads) {
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(EXIT_POLL);
            }
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                tracing::error!(
                    worker = thread.thread().name().unwrap_or("unnamed"),
                    waited = ?self.stop_within,
                    "worker did not stop in time (is a handler blocking its thread?); leaving it behind"
                );
            }
        }
    }
}

/// How long after the shutdown timeout a worker gets to close what is
/// left and exit before [`ServerHandle::stop`] gives up on it. Closing
/// 16,384 connections takes a worker about 200 ms.
const WORKER_EXIT_MARGIN: Duration = Duration::from_secs(2);

/// How often [`ServerHandle::stop`] looks whether a worker has exited.
const EXIT_POLL: Duration = Duration::from_millis(2);

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Fails if anything listens on `addr` already. Our listeners share the
/// port through `SO_REUSEPORT`, which would let a second server of the same
/// user bind it without error and take half the connections; a probe bound
/// without that option meets the conflict the kernel would otherwise hide.
fn ensure_port_free(addr: SocketAddr) -> io::Result<()> {
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Connections of an earlier run waiting in TIME_WAIT do not make the
    // port busy.
    probe.set_reuse_address(true)?;
    probe.bind(&addr.into()).map_err(|e| {
        let why = if e.kind() == io::ErrorKind::AddrInUse {
            "the address is already in use (is another server running on it?)".to_owned()
        } else {
            e.to_string()
        };
        io::Error::new(e.kind(), format!("cannot listen on {addr}: {why}"))
    })
}

fn bind(addr: SocketAddr, backlog: u32, notsent_lowat: Option<u32>) -> io::Result<StdListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nodelay(true)?;
    if let Some(bytes) = notsent_lowat {
        // Accepted sockets inherit it: no call per connection.
        sys::set_tcp_notsent_lowat(socket.as_raw_fd(), bytes)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot set TCP_NOTSENT_LOWAT on {addr}: {e}")))?;
    }
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    socket.listen(backlog.min(i32::MAX as u32) as i32)?;
    Ok(socket.into())
}

/// File descriptors kept out of the connection budget: listeners, epoll and
/// event fds, database connections, log and data files. Running out of them
/// would make `accept` fail, which leaves the client hanging in the backlog
/// instead of answered.
const RESERVED_FDS: u64 = 256;

/// The per-worker connection limit that fits in `fd_limit` open files: the
/// configured one, lowered so that every worker at its limit still leaves
/// [`RESERVED_FDS`] free. A worker at its limit accepts one more socket only
/// to answer it `503` and close it, so refusals stay clean.
fn connection_limit(configured: usize, workers: usize, fd_limit: Option<u64>) -> usize {
    let Some(fd_limit) = fd_limit else { return configured };
    let budget = fd_limit.saturating_sub(RESERVED_FDS) / workers.max(1) as u64;
    configured.min(usize::try_from(budget).unwrap_or(usize::MAX)).max(1)
}

/// Watches for SIGINT and SIGTERM on a thread of its own, from before the
/// workers start, so that no signal falls between two listeners. The first
/// is sent on the returned channel, to begin the graceful shutdown. A second
/// one ends the process at once, with the shell's status for death by that
/// signal (130 for SIGINT, 143 for SIGTERM): an operator who presses Ctrl-C
/// twice does not want to wait for slow requests to drain.
fn watch_signals() -> io::Result<mpsc::Receiver<i32>> {
    use tokio::signal::unix::{signal, Signal, SignalKind};
    let (first_tx, first_rx) = mpsc::channel();
    let setup = || Ok((signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?));
    let watch = |(mut term, mut int): (Signal, Signal)| async move {
        let mut first = Some(first_tx);
        loop {
            let (signo, name) = tokio::select! {
                Some(()) = term.recv() => (libc::SIGTERM, "SIGTERM"),
                Some(()) = int.recv() => (libc::SIGINT, "SIGINT"),
                // The signal driver is gone: nothing more can arrive.
                else => return,
            };
            match first.take() {
                Some(first) => {
                    let _ = first.send(signo);
                }
                None => {
                    tracing::warn!(
                        signal = name,
                        "second signal: exiting without waiting for requests in flight"
                    );
                    std::process::exit(128 + signo);
                }
            }
        }
    };
    crate::background::spawn("peregrine-signals", setup, watch)?;
    Ok(first_rx)
}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    sys::allowed_cpus()
}

fn pin_to_cpu(cpu: usize) {
    if !sys::pin_current_thread(cpu) {
        tracing::warn!(cpu, "could not pin worker");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fd_limit_is_raised_to_the_hard_limit() {
        use crate::sys;
        let (_, hard) = sys::open_file_limits();
        // Lower the soft limit first so the test shows the raise happening
        // even where soft already equals hard (as on CI machines).
        sys::set_open_file_soft_limit(hard.min(512));
        assert_eq!(sys::raise_open_file_limit(), Some(hard));
        assert_eq!(sys::open_file_limits().0, hard);
    }

    #[test]
    fn connection_limit_leaves_file_descriptors_in_reserve() {
        use super::{connection_limit, RESERVED_FDS};
        // 20,000 open files, 2 workers: each gets half of what the reserve
        // leaves.
        assert_eq!(connection_limit(25_000, 2, Some(20_000)), (20_000 - RESERVED_FDS as usize) / 2);
        assert_eq!(connection_limit(1_000, 2, Some(20_000)), 1_000);
        assert_eq!(connection_limit(1_000, 4, None), 1_000);
        assert_eq!(connection_limit(1_000, 1, Some(10)), 1);
    }

    /// The accept path sets no socket options: it relies on Linux copying
    /// TCP_NODELAY and TCP_NOTSENT_LOWAT from the listening socket.
    #[test]
    fn accepted_sockets_inherit_the_listeners_options() {
        use std::os::fd::AsRawFd;
        let listener = super::bind("127.0.0.1:0".parse().unwrap(), 16, Some(96 * 1024)).unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let socket = socket2::SockRef::from(&accepted);
        assert!(socket.nodelay().unwrap(), "TCP_NODELAY not inherited");
        let mut lowat: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes to `lowat`.
        let rc = unsafe {
            libc::getsockopt(
                accepted.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                (&mut lowat as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!((rc, lowat), (0, 96 * 1024), "TCP_NOTSENT_LOWAT not inherited");
    }
}
