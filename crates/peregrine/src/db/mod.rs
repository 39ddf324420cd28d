//! Database access for handlers: a per-worker PostgreSQL pool ([`pg`]) and a
//! shared SQLite pool ([`sqlite`]), both speaking one error type ([`Error`]).
//!
//! This module owns connection lifecycles (connect, prepare, reconnect with
//! backoff), the per-call timeout, and the mapping of driver errors onto the
//! three outcomes a web handler cares about: the database is unreachable,
//! it was too slow, or the query itself failed ([`ErrorKind`]), keeping
//! the SQLSTATE code and the driver's error for the application. It knows nothing about any
//! application schema; applications register their SQL (or, for
//! PostgreSQL, pass SQL text that each connection prepares on first use)
//! and bring their own row types. PostgreSQL transactions run on
//! connections of their own ([`pg::Transaction`]), since the pool's
//! connections are shared.
//!
//! The runtime model is peregrine's: one OS thread per worker running a
//! current-thread tokio runtime inside a `LocalSet`. A [`pg::PgPool`] lives
//! on one worker and is `!Send` (`Rc`, `Cell`); a [`sqlite::SqlitePool`] is
//! `Send + Sync` because its blocking threads are shared by all workers.

use std::time::Duration;

mod error;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "sqlite")]
pub mod sqlite;

pub use error::{Error, ErrorKind, SqlState};

/// Default bound on one database call (pool checkout excluded; it never
/// waits). Long enough for a loaded database, short enough that a client
/// sees a 503 well before typical client-side timeouts fire.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs `fut` with a deadline, mapping both its error and the elapsed
/// deadline onto [`Error`]. Dropping a timed-out driver future is safe for
/// both backends: the PostgreSQL driver reads and drops the late response, and a SQLite job
/// whose caller has gone is skipped or its result dropped.
pub async fn with_timeout<T, E, F>(timeout: Duration, fut: F) -> Result<T, Error>
where
    F: std::future::Future<Output = Result<T, E>>,
    E: Into<Error>,
{
    match tokio::time::timeout(timeout, fut).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(Error::timeout()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn with_timeout_maps_elapsed_to_timeout() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok::<(), Error>(())
        };
        let got = with_timeout(Duration::from_millis(10), slow).await;
        assert_eq!(got.map_err(|e| e.kind()), Err(ErrorKind::Timeout));
    }
}
