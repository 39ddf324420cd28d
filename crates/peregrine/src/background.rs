//! Helper threads beside the workers (the signal watcher, the TLS
//! reloader), each on a current-thread tokio runtime of its own.
//!
//! A helper is started in two steps, and [`spawn`] returns only after the
//! first: `setup` (registering a signal handler, say) runs in the
//! runtime's context and its failure is the caller's start-up error; then
//! `run` drives what it set up. So a signal sent after the server has
//! started is always caught, never left to its default action (which for
//! `SIGHUP`, `SIGINT` and `SIGTERM` ends the process).

use std::future::Future;
use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Starts the thread `name`: `setup`, then `run` on what it returned.
/// Returns once `setup` has succeeded, or with its error.
pub(crate) fn spawn<T, Fut>(
    name: &str,
    setup: impl FnOnce() -> io::Result<T> + Send + 'static,
    run: impl FnOnce(T) -> Fut + Send + 'static,
) -> io::Result<JoinHandle<()>>
where
    Fut: Future<Output = ()>,
{
    let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
    let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        let state = {
            let _context = runtime.enter();
            setup()
        };
        match state {
            Ok(state) => {
                let _ = ready_tx.send(Ok(()));
                runtime.block_on(run(state));
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
            }
        }
    })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(io::Error::other(format!("thread {name} exited during start-up"))),
    }
}
