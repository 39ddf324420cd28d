//! The accept loop of one worker: takes connections from its listener,
//! hands each to a protocol's connection driver on its own task, refuses
//! those over the limit, ticks the worker's clock, and drains at shutdown.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::{Instant, SystemTime};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::config::Config;
use crate::http::date::until_next_second;
use crate::proto::h1;
use crate::router::Router;
use crate::worker::timer::Wait;
use crate::worker::transport::Io;
use crate::worker::{Registration, Worker, SHUTDOWN_SWEEP};

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
                Ok((stream, peer)) => accept(stream, peer, &worker, &router),
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
    ticker.abort();
}

fn accept<S: 'static>(stream: TcpStream, peer: SocketAddr, worker: &Rc<Worker>, router: &Rc<Router<S>>) {
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
    tokio::task::spawn_local(h1::conn::serve(
        Io::Tcp(stream),
        Some(peer),
        Rc::clone(worker),
        Rc::clone(router),
        timer,
        registration,
    ));
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
