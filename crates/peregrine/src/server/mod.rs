//! Starting and stopping the server: listeners, worker threads, signals.
//!
//! Thread-per-core: each worker thread binds its own `SO_REUSEPORT`
//! listener (the kernel spreads connections across them), runs a tokio
//! `current_thread` runtime and keeps every connection it accepts for that
//! connection's whole life. Workers share nothing on the request path.

mod accept;

use std::future::Future;
use std::io;
use std::net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::watch;

use crate::config::Config;
use crate::router::Router;
use crate::sys;

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
}

impl Server {
    /// A server with default settings.
    pub fn new() -> Server {
        Server::default()
    }

    /// A server with the given settings.
    pub fn with_config(config: Config) -> Server {
        Server { config }
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

    /// Binds `addr`, starts the workers and serves until SIGINT or SIGTERM,
    /// then shuts down gracefully. `app` runs once on each worker thread to
    /// build that worker's router (and whatever state it owns, such as
    /// database connections).
    pub fn serve<F, Fut, S>(self, addr: impl ToSocketAddrs, app: F) -> io::Result<()>
    where
        F: Fn(WorkerInfo) -> Fut + Send + Sync + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoApp<S>,
        S: 'static,
    {
        let handle = self.spawn(addr, app)?;
        wait_for_signal()?;
        tracing::info!("shutting down");
        handle.shutdown();
        Ok(())
    }

    /// Binds `addr` and starts the workers in the background; returns once
    /// every worker is accepting connections.
    pub fn spawn<F, Fut, S>(self, addr: impl ToSocketAddrs, app: F) -> io::Result<ServerHandle>
    where
        F: Fn(WorkerInfo) -> Fut + Send + Sync + 'static,
        Fut: Future + 'static,
        Fut::Output: IntoApp<S>,
        S: 'static,
    {
        let fd_limit = sys::raise_open_file_limit();
        let mut config = self.config;
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
        let addr = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "address resolved to nothing"))?;
        // Bind every listener before starting anything, so a busy port is
        // reported at once. With port 0 the first bind picks the port and
        // the others join it.
        if addr.port() != 0 {
            ensure_port_free(addr)?;
        }
        let first = bind(addr, config.backlog)?;
        let local_addr = first.local_addr()?;
        let mut listeners = vec![first];
        for _ in 1..count {
            listeners.push(bind(local_addr, config.backlog)?);
        }
        // Only these listeners take connections, even if another process
        // joins the port's group later.
        sys::steer_reuseport_group(listeners[0].as_raw_fd(), count as u32).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot steer connections on {local_addr}: {e}"))
        })?;

        let cpus = allowed_cpus();
        let app = Arc::new(app);
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let mut threads = Vec::with_capacity(count);
        for (index, listener) in listeners.into_iter().enumerate() {
            let app = Arc::clone(&app);
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
                        let listener = match listener
                            .set_nonblocking(true)
                            .and_then(|()| tokio::net::TcpListener::from_std(listener))
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
                        let _ = ready.send(Ok(()));
                        drop(ready);
                        accept::run(listener, config, router, shutdown).await;
                    });
                })?;
            threads.push(thread);
        }
        drop(ready_tx);
        let handle = ServerHandle { local_addr, shutdown: shutdown_tx, threads };
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

/// A running server.
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    /// The address the server listens on (useful after binding port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets in-flight requests finish (up to the
    /// configured shutdown timeout) and waits for the workers to exit.
    /// Dropping the handle does the same, so a test's server stops even
    /// when the test fails half-way.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let _ = self.shutdown.send(true);
        for thread in std::mem::take(&mut self.threads) {
            let _ = thread.join();
        }
    }
}

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

fn bind(addr: SocketAddr, backlog: u32) -> io::Result<StdListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nodelay(true)?;
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

/// Blocks until SIGINT or SIGTERM.
fn wait_for_signal() -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok(())
    })
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
}
