//! Database access for handlers: a per-worker PostgreSQL pool ([`pg`]) and a
//! shared SQLite pool ([`sqlite`]), both speaking one error type ([`Error`]).
//!
//! This module owns connection lifecycles (connect, prepare, reconnect with
//! backoff), the per-call timeout, and the mapping of driver errors onto the
//! three outcomes a web handler cares about: the database is unreachable,
//! it was too slow, or the query itself failed. It knows nothing about any
//! application schema; applications register their SQL and bring their own
//! row types.
//!
//! The runtime model is peregrine's: one OS thread per worker running a
//! current-thread tokio runtime inside a `LocalSet`. A [`pg::PgPool`] lives
//! on one worker and is `!Send` (`Rc`, `Cell`); a [`sqlite::SqlitePool`] is
//! `Send + Sync` because its blocking threads are shared by all workers.

use std::fmt;
use std::time::Duration;

pub mod pg;
pub mod sqlite;

/// Default bound on one database call (pool checkout excluded; it never
/// waits). Long enough for a loaded database, short enough that a client
/// sees a 503 well before typical client-side timeouts fire.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a database call failed, grouped by how an HTTP server should answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// No connection is up, the connection was lost mid-call, or the server
    /// refused service (shutting down, too many connections, locked file).
    Unavailable,
    /// The call did not finish within the pool's timeout.
    Timeout,
    /// The database answered with an error for this query, or its result did
    /// not have the expected shape (row count, column type).
    Query(String),
    /// The pool was configured wrongly (malformed URL, unopenable path).
    Config(String),
}

impl Error {
    /// HTTP status a server should answer with when a request failed with
    /// this error: 503 for transient outages (`Unavailable`, `Timeout`),
    /// since retrying later can succeed, and 500 for everything else.
    pub fn http_status(&self) -> u16 {
        if self.is_transient() {
            503
        } else {
            500
        }
    }

    /// True when the failure is about the database's availability rather
    /// than the query, so the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unavailable | Error::Timeout)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable => f.write_str("database unavailable"),
            Error::Timeout => f.write_str("database call timed out"),
            Error::Query(msg) => write!(f, "database query failed: {msg}"),
            Error::Config(msg) => write!(f, "database misconfigured: {msg}"),
        }
    }
}

impl std::error::Error for Error {}

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
        Err(_) => Err(Error::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_errors_are_503() {
        assert_eq!(Error::Unavailable.http_status(), 503);
        assert_eq!(Error::Timeout.http_status(), 503);
        assert_eq!(Error::Query("x".into()).http_status(), 500);
        assert_eq!(Error::Config("x".into()).http_status(), 500);
    }

    #[tokio::test]
    async fn with_timeout_maps_elapsed_to_timeout() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok::<(), Error>(())
        };
        let got = with_timeout(Duration::from_millis(10), slow).await;
        assert_eq!(got, Err(Error::Timeout));
    }
}
