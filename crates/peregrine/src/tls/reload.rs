//! The reloader: one small thread per running server that has TLS
//! listeners. It reloads every certificate store on `SIGHUP` and polls the
//! files' metadata (a `stat` each, once a second by default) to pick up a
//! renewal without a signal.
//!
//! A thread of its own rather than the workers' tick: a reload parses PEM
//! and loads a key (a few hundred microseconds), which would stall one
//! worker's connections, and `SIGHUP` needs one place that listens.

use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

use super::certs::Reloaded;
use super::Tls;

/// The reloader thread; stops when dropped or [`Reloader::stop`]ped.
#[derive(Debug)]
pub(crate) struct Reloader {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl Reloader {
    /// Starts watching `stores` (the distinct [`Tls`] values of a server's
    /// listeners). Returns once the `SIGHUP` handler is in place, so a
    /// signal sent after the server started can no longer end the process.
    pub(crate) fn start(stores: Vec<Tls>) -> io::Result<Reloader> {
        let (stop, mut stopped) = watch::channel(false);
        let setup = || signal(SignalKind::hangup());
        let watch = |mut hangup: Signal| async move {
            let poll = stores.iter().filter_map(|tls| tls.inner.poll_interval).min();
            let mut ticks = tokio::time::interval(poll.unwrap_or(Duration::from_secs(3600)));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped.changed() => return,
                    Some(()) = hangup.recv() => {
                        tracing::info!("SIGHUP: reloading TLS certificates");
                        reload_all(&stores, true);
                    }
                    _ = ticks.tick(), if poll.is_some() => reload_all(&stores, false),
                }
            }
        };
        let thread = crate::background::spawn("peregrine-tls-reload", setup, watch)?;
        Ok(Reloader { stop, thread: Some(thread) })
    }

    /// Stops the thread and waits for it.
    pub(crate) fn stop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.stop();
    }
}

fn reload_all(stores: &[Tls], force: bool) {
    for tls in stores {
        if !force && tls.inner.poll_interval.is_none() {
            continue;
        }
        let certs = &tls.inner.certs;
        match certs.reload(force) {
            Ok(Reloaded::Unchanged) => {}
            Ok(Reloaded::Replaced) => tracing::info!(files = %certs.describe(), "TLS certificate reloaded"),
            Err(e) => {
                tracing::error!(error = %e, "TLS certificate reload failed; the previous certificate stays in use")
            }
        }
    }
}
