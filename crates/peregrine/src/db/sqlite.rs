//! Embedded SQLite behind a small pool of blocking threads, so a query never
//! blocks a worker's event loop.
//!
//! rusqlite is synchronous. Each pool thread owns one connection (WAL mode,
//! so readers run in parallel with one writer) and takes jobs from a shared
//! queue; a worker sends a closure and awaits its result on a oneshot
//! channel. Unlike [`super::pg::PgPool`], one `SqlitePool` is shared by all
//! workers: it is created once at startup and cloned into each worker
//! (`Send + Sync`). The queue is the only cross-thread hand-off on the
//! request path, and SQLite is the default for convenience, not the backend
//! benchmarks are run against.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use rusqlite::{ffi, ErrorCode};
use tokio::sync::oneshot;

use super::{Error, ErrorKind, SqlState, DEFAULT_TIMEOUT};

/// What a [`SqlitePool::run`] job works with, from `rusqlite` (so
/// applications use the version the pool was built with without depending
/// on it themselves): the connection it is handed, the statements, rows and
/// transactions it makes, and the error it returns.
pub use rusqlite::{
    params, Connection, Error as SqliteError, OptionalExtension, Row, Statement, Transaction,
    TransactionBehavior,
};

/// Parameter and column conversions ([`types::ToSql`], [`types::FromSql`])
/// and the dynamic [`types::Value`], from `rusqlite`.
pub mod types {
    pub use rusqlite::types::{
        FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, Type, Value, ValueRef,
    };
}

/// Settings for [`SqlitePool::open`].
#[derive(Debug, Clone)]
pub struct SqliteConfig {
    /// Database file; its directory is created if missing.
    pub path: PathBuf,
    /// Blocking threads, each with its own connection (at least 1).
    pub threads: usize,
    /// Bound on one [`SqlitePool::run`] call, queueing included.
    pub timeout: Duration,
    /// How long SQLite itself retries on a locked database before failing
    /// with `SQLITE_BUSY`; kept below `timeout` so the caller sees why.
    pub busy_timeout: Duration,
}

impl SqliteConfig {
    /// Four threads, default timeouts.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SqliteConfig {
            path: path.into(),
            threads: 4,
            timeout: DEFAULT_TIMEOUT,
            busy_timeout: DEFAULT_TIMEOUT.mul_f64(0.75),
        }
    }
}

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// Shared SQLite pool; cloning is cheap (`Arc`). When the last clone is
/// dropped the threads finish their queued jobs and exit.
#[derive(Clone)]
pub struct SqlitePool {
    jobs: mpsc::Sender<Job>,
    timeout: Duration,
    path: Arc<PathBuf>,
}

impl std::fmt::Debug for SqlitePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlitePool")
            .field("path", &self.path)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl SqlitePool {
    /// Opens `config.threads` connections to the file (creating it and its
    /// directory if missing) and starts the threads. Blocking; call it at
    /// startup, not from a worker's event loop.
    pub fn open(config: SqliteConfig) -> Result<SqlitePool, Error> {
        if config.threads == 0 {
            return Err(Error::config("a pool needs at least one thread"));
        }
        if let Some(dir) = config.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::config(format!("cannot create directory {}: {e}", dir.display())))?;
        }
        // Open every connection before starting any thread, so a bad path is
        // reported here rather than by the first query.
        let connections = (0..config.threads)
            .map(|_| open_connection(&config.path, config.busy_timeout))
            .collect::<Result<Vec<_>, _>>()?;

        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for (index, conn) in connections.into_iter().enumerate() {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("peregrine-sqlite-{index}"))
                .spawn(move || serve(conn, &queue))
                .map_err(|e| Error::config(format!("cannot start SQLite thread: {e}")))?;
        }
        Ok(SqlitePool { jobs, timeout: config.timeout, path: Arc::new(config.path) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `f` on a pool thread's connection and awaits its result, within
    /// the pool's timeout. The returned future is safe to poll on any
    /// runtime thread; it never blocks.
    ///
    /// A job whose caller gave up (timeout, dropped request) before a
    /// thread picked it up is skipped; one already running completes and
    /// its result is discarded. A panic inside `f` becomes
    /// [`ErrorKind::Query`] and the thread keeps serving.
    pub fn run<T, F>(&self, f: F) -> impl std::future::Future<Output = Result<T, Error>>
    where
        F: FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<T, Error>>();
        let job: Job = Box::new(move |conn: &mut Connection| {
            if tx.is_closed() {
                return;
            }
            let result = match catch_unwind(AssertUnwindSafe(|| f(conn))) {
                Ok(result) => result.map_err(Error::from),
                Err(_) => Err(Error::query("SQLite job panicked")),
            };
            // The caller may have timed out meanwhile; nothing to do then.
            let _ = tx.send(result);
        });
        // Sending fails only if every thread has exited.
        let queued = self.jobs.send(job).is_ok();
        let timeout = self.timeout;
        async move {
            if !queued {
                return Err(Error::unavailable());
            }
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(result)) => result,
                // The thread dropped the job without answering: it died.
                Ok(Err(_)) => Err(Error::unavailable()),
                Err(_) => Err(Error::timeout()),
            }
        }
    }
}

fn open_connection(path: &Path, busy_timeout: Duration) -> Result<Connection, Error> {
    let open_err =
        |e: rusqlite::Error| Error::config(format!("cannot open SQLite database {}: {e}", path.display()));
    let conn = Connection::open(path).map_err(open_err)?;
    conn.busy_timeout(busy_timeout).map_err(open_err)?;
    // WAL lets the other threads read while one writes; NORMAL sync is
    // durable across application crashes, which is what a web app needs.
    conn.pragma_update(None, "journal_mode", "WAL").map_err(open_err)?;
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(open_err)?;
    Ok(conn)
}

fn serve(mut conn: Connection, queue: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job, by blocking
        // pool threads, never by a worker.
        let job = match queue.lock() {
            Ok(rx) => rx.recv(),
            // A poisoned lock means a thread panicked while receiving,
            // which `recv` does not do; the receiver itself is intact.
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match job {
            Ok(job) => job(&mut conn),
            // Every sender (pool clone) is gone.
            Err(mpsc::RecvError) => return,
        }
    }
}

/// Groups SQLite's result codes by how a handler should answer, and gives
/// constraint violations the SQLSTATE PostgreSQL would send for them, so an
/// application can test for a duplicate key the same way on both backends
/// (`err.code() == Some(SqlState::UNIQUE_VIOLATION)`). Other SQLite errors
/// (syntax, missing table, type mismatch) carry no code: SQLite's primary
/// codes are too coarse to name a SQLSTATE honestly. Every error keeps the
/// `rusqlite::Error` as its source, with SQLite's extended code in it.
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        let kind = match e.sqlite_error_code() {
            // Locked beyond busy_timeout, or the file went away: the
            // database is (for now) unusable, not the query wrong.
            Some(
                ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::CannotOpen
                | ErrorCode::SystemIoFailure
                | ErrorCode::DiskFull,
            ) => ErrorKind::Unavailable,
            _ => ErrorKind::Query,
        };
        let mut error = Error::new(kind, e.to_string());
        if let Some(code) = sqlstate_of(&e) {
            error = error.with_code(code);
        }
        error.with_source(e)
    }
}

/// The SQLSTATE matching a constraint violation's extended result code.
fn sqlstate_of(e: &rusqlite::Error) -> Option<SqlState> {
    let rusqlite::Error::SqliteFailure(failure, _) = e else { return None };
    if failure.code != ErrorCode::ConstraintViolation {
        return None;
    }
    Some(match failure.extended_code {
        ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => SqlState::UNIQUE_VIOLATION,
        ffi::SQLITE_CONSTRAINT_FOREIGNKEY => SqlState::FOREIGN_KEY_VIOLATION,
        ffi::SQLITE_CONSTRAINT_NOTNULL => SqlState::NOT_NULL_VIOLATION,
        ffi::SQLITE_CONSTRAINT_CHECK => SqlState::CHECK_VIOLATION,
        _ => SqlState::INTEGRITY_CONSTRAINT_VIOLATION,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory under target/, since tests must not touch /tmp
    /// state shared with others and must leave nothing outside the build
    /// directory.
    fn scratch(name: &str) -> PathBuf {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/test-scratch/db-sqlite")
            .join(format!("{name}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn pool(name: &str) -> (SqlitePool, PathBuf) {
        let dir = scratch(name);
        let config = SqliteConfig { threads: 2, ..SqliteConfig::new(dir.join("nested/test.db")) };
        (SqlitePool::open(config).expect("open pool"), dir)
    }

    #[tokio::test]
    async fn creates_directory_and_runs_queries() {
        let (pool, dir) = pool("basic");
        assert!(pool.path().exists());
        pool.run(|c| c.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
            .await
            .expect("create");
        let inserted = pool
            .run(|c| {
                let tx = c.transaction()?;
                for i in 1..=10 {
                    tx.execute("INSERT INTO t VALUES (?1, ?2)", (i, format!("v{i}")))?;
                }
                tx.commit()?;
                Ok(10)
            })
            .await
            .expect("insert");
        assert_eq!(inserted, 10);
        let v: String = pool
            .run(|c| c.query_row("SELECT v FROM t WHERE id = ?1", [7], |r| r.get(0)))
            .await
            .expect("select");
        assert_eq!(v, "v7");
        let mode: String =
            pool.run(|c| c.query_row("PRAGMA journal_mode", [], |r| r.get(0))).await.expect("pragma");
        assert_eq!(mode.to_lowercase(), "wal");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn many_concurrent_jobs_complete() {
        let (pool, dir) = pool("concurrent");
        let futures = (0..200)
            .map(|i: i64| pool.run(move |c| c.query_row("SELECT ?1 * 2", [i], |r| r.get::<_, i64>(0))));
        let results = futures_util::future::try_join_all(futures).await.expect("all jobs");
        assert_eq!(results, (0..200).map(|i| i * 2).collect::<Vec<_>>());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn errors_are_mapped() {
        let (pool, dir) = pool("errors");
        let err = pool.run(|c| c.execute_batch("SELECT * FROM missing_table")).await.expect_err("must fail");
        assert_eq!(err.kind(), ErrorKind::Query, "{err}");
        assert!(err.message().contains("missing_table"), "{err}");
        assert_eq!(err.code(), None, "SQLite errors other than constraints carry no SQLSTATE");
        assert!(std::error::Error::source(&err).is_some_and(|s| s.is::<rusqlite::Error>()), "cause kept");
        assert_eq!(err.http_status(), 500);
        let panicked = pool.run(|_| -> Result<(), rusqlite::Error> { panic!("boom") }).await;
        assert_eq!(panicked.map_err(|e| e.kind()), Err(ErrorKind::Query));
        // The thread that caught the panic still serves.
        let ok = pool.run(|c| c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))).await;
        assert_eq!(ok, Ok(1));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn slow_jobs_time_out() {
        let dir = scratch("timeout");
        let config = SqliteConfig {
            threads: 1,
            timeout: Duration::from_millis(50),
            ..SqliteConfig::new(dir.join("t.db"))
        };
        let pool = SqlitePool::open(config).expect("open");
        let slow = pool
            .run(|_| {
                std::thread::sleep(Duration::from_millis(300));
                Ok(())
            })
            .await;
        assert_eq!(slow.map_err(|e| e.kind()), Err(ErrorKind::Timeout));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn unopenable_path_is_a_config_error() {
        let dir = scratch("unopenable");
        std::fs::create_dir_all(dir.join("a-directory.db")).expect("mkdir");
        let result = SqlitePool::open(SqliteConfig::new(dir.join("a-directory.db")));
        assert_eq!(result.err().map(|e| e.kind()), Some(ErrorKind::Config));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn constraint_violations_carry_their_sqlstate() {
        let (pool, dir) = pool("constraints");
        pool.run(|c| {
            c.execute_batch(
                "PRAGMA foreign_keys = ON;
                 CREATE TABLE parent (id INTEGER PRIMARY KEY);
                 CREATE TABLE t (
                     id INTEGER PRIMARY KEY,
                     name TEXT NOT NULL UNIQUE,
                     n INTEGER CHECK (n > 0),
                     parent INTEGER REFERENCES parent (id)
                 );
                 INSERT INTO parent VALUES (1);
                 INSERT INTO t VALUES (1, 'a', 1, 1);",
            )
        })
        .await
        .expect("schema");
        let cases = [
            ("INSERT INTO t VALUES (1, 'b', 1, 1)", SqlState::UNIQUE_VIOLATION),
            ("INSERT INTO t VALUES (2, 'a', 1, 1)", SqlState::UNIQUE_VIOLATION),
            ("INSERT INTO t VALUES (2, NULL, 1, 1)", SqlState::NOT_NULL_VIOLATION),
            ("INSERT INTO t VALUES (2, 'b', 0, 1)", SqlState::CHECK_VIOLATION),
            (
                "PRAGMA foreign_keys = ON; INSERT INTO t VALUES (2, 'b', 1, 9)",
                SqlState::FOREIGN_KEY_VIOLATION,
            ),
        ];
        for (sql, code) in cases {
            let err = pool.run(move |c| c.execute_batch(sql)).await.expect_err(sql);
            assert_eq!(err.kind(), ErrorKind::Query, "{sql}: {err}");
            assert_eq!(err.code(), Some(code), "{sql}: {err}");
            assert_eq!(err.http_status(), 500);
            let source = std::error::Error::source(&err).and_then(|s| s.downcast_ref::<rusqlite::Error>());
            assert!(
                matches!(source, Some(rusqlite::Error::SqliteFailure(f, _)) if f.code == ErrorCode::ConstraintViolation),
                "{sql}: rusqlite error kept as source"
            );
        }
        let syntax = pool.run(|c| c.execute_batch("SELEC 1")).await.expect_err("syntax error");
        assert_eq!((syntax.kind(), syntax.code()), (ErrorKind::Query, None));
        let _ = std::fs::remove_dir_all(dir);
    }
}
