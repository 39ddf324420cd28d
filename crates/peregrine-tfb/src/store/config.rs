//! Backend selection: reading `DATABASE_URL` and `DATABASE_MAX_CONN`, and
//! sizing each worker's PostgreSQL connections.
//!
//! This module owns [`StoreConfig`], the one value built at startup and
//! cloned into every worker, and the rules that turn the environment into
//! it: which URL selects which backend, how many connections each worker
//! gets, and how a worker's share is split between reads and writes. It
//! knows no SQL; [`super::pg`], [`super::sqlite`] and [`super::seed`] do.

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use peregrine::db::pg::PgConfig;
use peregrine::db::sqlite::{SqliteConfig, SqlitePool};
use peregrine::db::Error;
use rand::rngs::SmallRng;
use rand::SeedableRng;

use super::pg::{PgStatements, PgStore};
use super::sqlite::SqliteStore;
use super::{seed, Store};

/// Default PostgreSQL connections per worker: 2 for reads, 15 for writes.
const DEFAULT_CONNECTIONS_PER_WORKER: usize = 17;

/// Pipelined read connections per worker, when its share allows them
/// beside at least one write connection.
const READ_CONNECTIONS: usize = 2;

/// Splits a worker's connections into (read, write) counts.
///
/// Reads pipeline: one connection carries any number of concurrent
/// requests, and a deep pipeline costs PostgreSQL less per query than
/// shallow ones. But one read connection per worker puts all of a worker's
/// reads on one backend process, and where PostgreSQL shares cores with
/// other work (the lab runs it on the same two cores as the server and the
/// load) that backend runs only when it gets a core. Measured on the lab's
/// 2-core VM (2026-12-07, peregrine-tfb on CPU 0, the lab's client on CPU 1,
/// 256 connections, `/fortunes`): with one read connection, 88k-92k req/s
/// while the scheduler kept the backend on CPU 0, and 33k-46k, with a p99
/// of 18 ms, while it kept it on CPU 1 beside the client. Left to the
/// scheduler, a bench's five rounds gave 46k-79k. With two read
/// connections, 79k-102k wherever the two backends ran (`/db` 96k-118k,
/// level with one connection's 108k-118k). So a worker reads over two
/// connections, and [`PgPool::get`](peregrine::db::pg::PgPool::get) sends
/// each request to the less busy.
///
/// Commits do not pipeline: with `synchronous_commit` on (the default) each
/// waits for a WAL flush (3.5 ms on this project's VMs), one at a time per
/// connection, and only commits from different connections share a flush.
/// So `/updates` throughput grows with write connections, and its commits
/// must not sit in the read pipelines, where each would stall every read
/// queued behind it. A share of one carries both (`0` write connections);
/// a share of two keeps one of each.
pub fn split_share(share: usize) -> (usize, usize) {
    if share <= 1 {
        return (1, 0);
    }
    let reads = READ_CONNECTIONS.min(share - 1);
    (reads, share - reads)
}

/// Why the store could not be configured from the environment.
#[derive(Debug)]
pub enum ConfigError {
    /// `DATABASE_URL` names no backend we support.
    UnsupportedUrl(String),
    /// `DATABASE_MAX_CONN` is not a positive integer.
    InvalidMaxConn(String),
    /// The database could not be set up (bad URL, unopenable SQLite file).
    Db(Error),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnsupportedUrl(url) => write!(
                f,
                "DATABASE_URL {url:?} is not supported: use postgres://user:pass@host:port/db, \
                 sqlite://PATH, or leave it unset for SQLite in the data directory"
            ),
            ConfigError::InvalidMaxConn(value) => {
                write!(f, "DATABASE_MAX_CONN {value:?} is not a positive integer")
            }
            ConfigError::Db(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Db(e) => Some(e),
            _ => None,
        }
    }
}

/// Which database to use and how; built once at startup, cloned into every
/// worker (`Send + Sync`).
#[derive(Clone)]
pub struct StoreConfig {
    pub(super) backend: BackendConfig,
    workers: usize,
}

#[derive(Clone)]
pub(super) enum BackendConfig {
    Pg {
        /// Per-worker settings; `connections` is filled in per worker.
        pool: PgConfig,
        statements: PgStatements,
        total_connections: usize,
    },
    Sqlite(SqlitePool),
}

impl StoreConfig {
    /// Reads `DATABASE_URL` and `DATABASE_MAX_CONN`:
    /// - `DATABASE_URL` unset or empty: SQLite at `<data_dir>/peregrine.db`;
    ///   `postgres://` / `postgresql://`: PostgreSQL; `sqlite://PATH`: that
    ///   SQLite file; anything else is an error.
    /// - `DATABASE_MAX_CONN`: PostgreSQL connections across all workers
    ///   (default 17 per worker; every worker gets at least one). Each
    ///   worker's share is split by [`split_share`]: a few connections carry
    ///   the pipelined reads, the rest the commits of `/updates`.
    ///
    /// Opens the SQLite pool right away (blocking), so call this at startup.
    pub fn from_env(data_dir: &Path, workers: usize) -> Result<StoreConfig, ConfigError> {
        let url = std::env::var("DATABASE_URL").ok();
        let max_conn = std::env::var("DATABASE_MAX_CONN").ok();
        StoreConfig::from_values(url.as_deref(), max_conn.as_deref(), data_dir, workers)
    }

    /// [`StoreConfig::from_env`] with the variables passed in.
    pub fn from_values(
        database_url: Option<&str>,
        max_conn: Option<&str>,
        data_dir: &Path,
        workers: usize,
    ) -> Result<StoreConfig, ConfigError> {
        let workers = workers.max(1);
        let url = database_url.map(str::trim).filter(|u| !u.is_empty());
        let backend = match url {
            None => BackendConfig::Sqlite(open_sqlite(data_dir.join("peregrine.db"), workers)?),
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                let total_connections = match max_conn.map(str::trim).filter(|v| !v.is_empty()) {
                    None => DEFAULT_CONNECTIONS_PER_WORKER * workers,
                    Some(v) => match v.parse::<usize>() {
                        Ok(n) if n > 0 => n,
                        _ => return Err(ConfigError::InvalidMaxConn(v.to_string())),
                    },
                };
                let mut pool = PgConfig::new(url);
                let statements = PgStatements::register(&mut pool);
                BackendConfig::Pg { pool, statements, total_connections }
            }
            Some(url) => match url.strip_prefix("sqlite://") {
                Some(path) if !path.is_empty() => {
                    BackendConfig::Sqlite(open_sqlite(PathBuf::from(path), workers)?)
                }
                _ => return Err(ConfigError::UnsupportedUrl(url.to_string())),
            },
        };
        Ok(StoreConfig { backend, workers })
    }

    /// A short description for the startup log (no password).
    pub fn describe(&self) -> String {
        match &self.backend {
            BackendConfig::Pg { pool, total_connections, .. } => {
                let host = pool.url.rsplit('@').next().unwrap_or_default();
                let (reads, writes) = split_share(self.connections_for(0, *total_connections));
                format!(
                    "PostgreSQL at {host}, {total_connections} connections in total \
                     (worker 0: {reads} for reads, {writes} for writes)"
                )
            }
            BackendConfig::Sqlite(pool) => format!("SQLite at {}", pool.path().display()),
        }
    }

    /// PostgreSQL connections worker `worker` keeps: an even share of the
    /// total, the remainder going to the first workers, at least one.
    fn connections_for(&self, worker: usize, total: usize) -> usize {
        let share = total / self.workers + usize::from(worker % self.workers < total % self.workers);
        share.max(1)
    }

    /// The store for worker `worker` (0-based). For PostgreSQL this starts
    /// the worker's connections in the background, so it must run inside
    /// that worker's `LocalSet`; it does not wait for the database.
    pub fn build(&self, worker: usize) -> Result<Store, Error> {
        let rng = Rc::new(RefCell::new(SmallRng::from_entropy()));
        match &self.backend {
            BackendConfig::Pg { pool, statements, total_connections } => {
                let (reads, writes) = split_share(self.connections_for(worker, *total_connections));
                Ok(Store::Pg(PgStore::new(pool, *statements, reads, writes, rng)?))
            }
            BackendConfig::Sqlite(pool) => Ok(Store::Sqlite(SqliteStore::new(pool.clone(), rng))),
        }
    }

    /// Creates `world` and `fortune` if missing and fills in any missing
    /// rows (10,000 Worlds with random numbers, the 12 fortunes). Existing
    /// rows are left alone, so running it twice, or from two processes at
    /// once, is safe. Meant to run once at startup, before serving.
    /// Needs no worker store, so startup can run it before any worker
    /// connects (inside a `LocalSet` for PostgreSQL).
    pub async fn ensure_schema(&self) -> Result<(), Error> {
        let mut rng = SmallRng::from_entropy();
        match &self.backend {
            BackendConfig::Pg { pool, .. } => seed::pg_ensure_schema(pool, &mut rng).await,
            BackendConfig::Sqlite(pool) => seed::sqlite_ensure_schema(pool, &mut rng).await,
        }
    }
}

fn open_sqlite(path: PathBuf, workers: usize) -> Result<SqlitePool, ConfigError> {
    let config = SqliteConfig { threads: workers.clamp(2, 8), ..SqliteConfig::new(path) };
    SqlitePool::open(config).map_err(ConfigError::Db)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::scratch;

    #[test]
    fn config_selects_backend_from_url() {
        let dir = scratch("config");
        let default = StoreConfig::from_values(None, None, &dir, 4).expect("default");
        assert!(default.describe().ends_with("peregrine.db"), "{}", default.describe());
        let empty = StoreConfig::from_values(Some(""), None, &dir, 4).expect("empty url");
        assert!(matches!(empty.backend, BackendConfig::Sqlite(_)));

        let file = dir.join("other/x.db");
        let url = format!("sqlite://{}", file.display());
        let sqlite = StoreConfig::from_values(Some(&url), None, &dir, 4).expect("sqlite url");
        assert!(matches!(sqlite.backend, BackendConfig::Sqlite(ref p) if p.path() == file));

        let pg = "postgres://u:secret@db:5432/hello_world";
        let config = StoreConfig::from_values(Some(pg), None, &dir, 3).expect("pg");
        assert!(!config.describe().contains("secret"));
        match &config.backend {
            BackendConfig::Pg { total_connections, .. } => assert_eq!(*total_connections, 51),
            BackendConfig::Sqlite(_) => panic!("expected PostgreSQL"),
        }
        let config = StoreConfig::from_values(Some(pg), Some("7"), &dir, 3).expect("pg");
        let shares: Vec<usize> = (0..3).map(|w| config.connections_for(w, 7)).collect();
        assert_eq!(shares, [3, 2, 2]);
        assert_eq!(config.connections_for(5, 2), 1, "at least one per worker");
        assert_eq!(split_share(1), (1, 0), "one connection carries both");
        assert_eq!(split_share(2), (1, 1), "a commit never waits behind reads");
        assert_eq!(split_share(3), (2, 1));
        assert_eq!(split_share(17), (2, 15));

        assert!(matches!(
            StoreConfig::from_values(Some("mysql://x"), None, &dir, 1),
            Err(ConfigError::UnsupportedUrl(_))
        ));
        assert!(matches!(
            StoreConfig::from_values(Some("sqlite://"), None, &dir, 1),
            Err(ConfigError::UnsupportedUrl(_))
        ));
        for bad in ["0", "-1", "many"] {
            assert!(matches!(
                StoreConfig::from_values(Some(pg), Some(bad), &dir, 1),
                Err(ConfigError::InvalidMaxConn(_))
            ));
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
