//! The benchmark app's data access: the World and Fortune tables of the TFB
//! test types, on PostgreSQL or embedded SQLite, built only on
//! `peregrine::db`.
//!
//! This module owns backend selection from the environment, schema creation
//! and seeding, and the queries behind `/db`, `/queries`, `/fortunes` and
//! `/updates`, including the rules the benchmark checks: one statement per
//! row read (pipelined on PostgreSQL, never `WHERE id IN (...)`), and one
//! batch write per update request whose stored values are what the response
//! shows.
//!
//! Lifecycle: build one [`StoreConfig`] at startup ([`StoreConfig::from_env`]),
//! run [`StoreConfig::ensure_schema`] once before serving, then in each
//! worker's `LocalSet` call [`StoreConfig::build`] to get that worker's
//! [`Store`]. A PostgreSQL store owns the worker's own connections; a SQLite
//! store shares the process-wide blocking pool.

use std::cell::RefCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::try_join_all;
use peregrine::db::pg::{PgConfig, PgConn, PgPool, StatementId};
use peregrine::db::sqlite::{SqliteConfig, SqliteError, SqlitePool, TransactionBehavior};
use peregrine::db::Error;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Rows in the World table, and the range of ids and random numbers.
pub const WORLD_ROWS: i32 = 10_000;

/// How long startup waits for PostgreSQL before giving up on the schema.
const STARTUP_WAIT: Duration = Duration::from_secs(15);

/// Bound on the schema script: seeding writes 10,000 rows, which a cold or
/// busy server may not finish within the request timeout.
const SCHEMA_TIMEOUT: Duration = Duration::from_secs(30);

/// Serializes schema setup across workers and processes sharing a server,
/// since concurrent `CREATE TABLE IF NOT EXISTS` can still collide.
const SCHEMA_LOCK_KEY: i64 = 0x7065_7265_6772_696e; // "peregrin"

/// The 12 fortunes from the benchmark's data (row 11 holds a `<script>` tag,
/// row 12 Japanese text).
const FORTUNES_TSV: &str = include_str!("../data/fortunes.tsv");

/// Default PostgreSQL connections per worker: 1 for reads, 16 for writes.
const DEFAULT_CONNECTIONS_PER_WORKER: usize = 17;

/// Splits a worker's connections into (read, write) counts.
///
/// Reads pipeline: one connection per worker carries any number of
/// concurrent requests, and one deep pipeline costs PostgreSQL less per
/// query than two shallow ones (measured on `/db` at 256 connections with
/// PostgreSQL on the same two cores: 30.6k and 32.1k req/s with one read
/// connection against 22.4k and 29.1k with two). Workers match cores, so
/// this gives PostgreSQL one busy backend per core.
/// Commits do not: with `synchronous_commit` on (the default) each waits for
/// a WAL flush (3.5 ms on this project's VMs), one at a time per connection,
/// and only commits from different connections share a flush. So `/updates`
/// throughput grows with write connections, and its commits must not sit in
/// the read pipelines, where each would stall every read queued behind it.
/// A share of one carries both (`0` write connections).
pub fn split_share(share: usize) -> (usize, usize) {
    if share <= 1 {
        (1, 0)
    } else {
        (1, share - 1)
    }
}

/// The two tables, in SQL both PostgreSQL and SQLite accept.
const SCHEMA_SQL: &str = "CREATE TABLE IF NOT EXISTS world (
         id integer PRIMARY KEY,
         randomnumber integer NOT NULL
     );
     CREATE TABLE IF NOT EXISTS fortune (
         id integer PRIMARY KEY,
         message varchar(2048) NOT NULL
     );";

const PG_SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const PG_SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
/// All of one request's new values in one statement; ids arrive sorted so
/// concurrent batches lock rows in the same order.
const PG_UPDATE_WORLDS: &str = "UPDATE world SET randomnumber = v.r \
     FROM (SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r) AS v \
     WHERE world.id = v.id";

const SQLITE_SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = ?1";
const SQLITE_SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
const SQLITE_UPDATE_WORLD: &str = "UPDATE world SET randomnumber = ?2 WHERE id = ?1";

/// One row of the World table. Serializes as `{"id":N,"randomNumber":M}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct World {
    pub id: i32,
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

/// One row of the Fortune table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fortune {
    pub id: i32,
    pub message: String,
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

/// Statement handles registered on every PostgreSQL connection.
#[derive(Debug, Clone, Copy)]
struct PgStatements {
    world: StatementId,
    fortunes: StatementId,
    update: StatementId,
}

/// Which database to use and how; built once at startup, cloned into every
/// worker (`Send + Sync`).
#[derive(Clone)]
pub struct StoreConfig {
    backend: BackendConfig,
    workers: usize,
}

#[derive(Clone)]
enum BackendConfig {
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
                let statements = PgStatements {
                    world: pool.statement(PG_SELECT_WORLD),
                    fortunes: pool.statement(PG_SELECT_FORTUNES),
                    update: pool.write_statement(PG_UPDATE_WORLDS),
                };
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
                let readers = PgPool::new(PgConfig { connections: reads, ..pool.clone() })?;
                let writers = if writes == 0 {
                    readers.clone()
                } else {
                    PgPool::new(PgConfig { connections: writes, ..pool.clone() })?
                };
                Ok(Store::Pg(PgStore { pool: readers, writers, statements: *statements, rng }))
            }
            BackendConfig::Sqlite(pool) => Ok(Store::Sqlite(SqliteStore { pool: pool.clone(), rng })),
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
            BackendConfig::Pg { pool, .. } => pg_ensure_schema(pool, &mut rng).await,
            BackendConfig::Sqlite(pool) => sqlite_ensure_schema(pool, &mut rng).await,
        }
    }
}

fn open_sqlite(path: PathBuf, workers: usize) -> Result<SqlitePool, ConfigError> {
    let config = SqliteConfig { threads: workers.clamp(2, 8), ..SqliteConfig::new(path) };
    SqlitePool::open(config).map_err(ConfigError::Db)
}

/// One worker's handle on the database. Cheap to clone (`Rc`); `!Send`.
#[derive(Clone)]
pub enum Store {
    Pg(PgStore),
    Sqlite(SqliteStore),
}

/// PostgreSQL backend of a [`Store`].
#[derive(Clone)]
pub struct PgStore {
    /// Connections for reads (pipelined).
    pool: PgPool,
    /// Connections for the commits of `/updates`; see [`split_share`].
    writers: PgPool,
    statements: PgStatements,
    rng: Rc<RefCell<SmallRng>>,
}

/// SQLite backend of a [`Store`].
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    rng: Rc<RefCell<SmallRng>>,
}

impl Store {
    fn rng(&self) -> &RefCell<SmallRng> {
        match self {
            Store::Pg(s) => &s.rng,
            Store::Sqlite(s) => &s.rng,
        }
    }

    /// A uniformly random World id (1..=10000) from this worker's generator.
    pub fn random_id(&self) -> i32 {
        self.rng().borrow_mut().gen_range(1..=WORLD_ROWS)
    }

    /// The World row `id`.
    pub async fn world(&self, id: i32) -> Result<World, Error> {
        match self {
            Store::Pg(s) => pg_world(&s.pool.get_or_wait().await?, s.statements.world, id).await,
            Store::Sqlite(s) => {
                s.pool.run(move |c| c.prepare_cached(SQLITE_SELECT_WORLD)?.query_row([id], world_row)).await
            }
        }
    }

    /// The World rows for `ids`, in order, each read by its own statement.
    /// On PostgreSQL all reads are in flight at once on one connection.
    pub async fn worlds(&self, ids: &[i32]) -> Result<Vec<World>, Error> {
        match self {
            Store::Pg(s) => pg_worlds(&s.pool.get_or_wait().await?, s.statements.world, ids).await,
            Store::Sqlite(s) => {
                let ids = ids.to_vec();
                s.pool.run(move |c| sqlite_worlds(c, &ids)).await
            }
        }
    }

    /// All Fortune rows, in table order.
    pub async fn fortunes(&self) -> Result<Vec<Fortune>, Error> {
        match self {
            Store::Pg(s) => {
                let rows = s.pool.get_or_wait().await?.query(s.statements.fortunes, &[]).await?;
                rows.iter().map(|row| Ok(Fortune { id: row.try_get(0)?, message: row.try_get(1)? })).collect()
            }
            Store::Sqlite(s) => {
                s.pool
                    .run(|c| {
                        let mut stmt = c.prepare_cached(SQLITE_SELECT_FORTUNES)?;
                        let rows =
                            stmt.query_map([], |r| Ok(Fortune { id: r.get(0)?, message: r.get(1)? }))?;
                        rows.collect()
                    })
                    .await
            }
        }
    }

    /// The `/updates` work: reads each requested row with its own statement,
    /// gives each distinct id one new random number (always different from
    /// the one read, so every update changes the table), writes them all in
    /// one statement, and returns per requested id the value now stored.
    pub async fn update_worlds(&self, ids: &[i32]) -> Result<Vec<World>, Error> {
        match self {
            Store::Pg(s) => {
                let conn = s.pool.get_or_wait().await?;
                let read = pg_worlds(&conn, s.statements.world, ids).await?;
                let changes = {
                    let mut rng = s.rng.borrow_mut();
                    new_values(read, &mut rng)
                };
                let (change_ids, values): (Vec<i32>, Vec<i32>) =
                    changes.iter().map(|w| (w.id, w.random_number)).unzip();
                s.writers.get_or_wait().await?.execute(s.statements.update, &[&change_ids, &values]).await?;
                Ok(stored_per_request(ids, &changes))
            }
            Store::Sqlite(s) => {
                let ids = ids.to_vec();
                let seed: u64 = s.rng.borrow_mut().gen();
                s.pool
                    .run(move |c| {
                        // IMMEDIATE takes the write lock up front: a deferred
                        // transaction that reads and then writes can fail
                        // with SQLITE_BUSY at once instead of waiting.
                        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                        let read = sqlite_worlds(&tx, &ids)?;
                        let changes = new_values(read, &mut SmallRng::seed_from_u64(seed));
                        {
                            let mut update = tx.prepare_cached(SQLITE_UPDATE_WORLD)?;
                            for w in &changes {
                                update.execute([w.id, w.random_number])?;
                            }
                        }
                        tx.commit()?;
                        Ok(stored_per_request(&ids, &changes))
                    })
                    .await
            }
        }
    }
}

/// One new value per distinct id, sorted by id, each different from the
/// value read.
fn new_values(mut read: Vec<World>, rng: &mut SmallRng) -> Vec<World> {
    read.sort_unstable_by_key(|w| w.id);
    read.dedup_by_key(|w| w.id);
    for w in &mut read {
        let old = w.random_number;
        while w.random_number == old {
            w.random_number = rng.gen_range(1..=WORLD_ROWS);
        }
    }
    read
}

/// The response rows: per requested id (repeats included) the value stored.
fn stored_per_request(ids: &[i32], changes: &[World]) -> Vec<World> {
    ids.iter().filter_map(|id| changes.binary_search_by_key(id, |w| w.id).ok().map(|i| changes[i])).collect()
}

async fn pg_world(conn: &PgConn, stmt: StatementId, id: i32) -> Result<World, Error> {
    let row = conn.query_one(stmt, &[&id]).await?;
    Ok(World { id: row.try_get(0)?, random_number: row.try_get(1)? })
}

/// Every read is queued before any is awaited, so they go to the server as
/// one pipeline (one round trip, one implicit transaction), each still its
/// own statement.
async fn pg_worlds(conn: &PgConn, stmt: StatementId, ids: &[i32]) -> Result<Vec<World>, Error> {
    try_join_all(ids.iter().map(|&id| pg_world(conn, stmt, id))).await
}

fn world_row(row: &peregrine::db::sqlite::Row<'_>) -> Result<World, SqliteError> {
    Ok(World { id: row.get(0)?, random_number: row.get(1)? })
}

fn sqlite_worlds(c: &peregrine::db::sqlite::Connection, ids: &[i32]) -> Result<Vec<World>, SqliteError> {
    let mut stmt = c.prepare_cached(SQLITE_SELECT_WORLD)?;
    ids.iter().map(|&id| stmt.query_row([id], world_row)).collect()
}

/// The seed fortunes parsed from the embedded TSV (header `id\tmessage`).
fn seed_fortunes() -> Vec<Fortune> {
    FORTUNES_TSV
        .lines()
        .skip(1)
        .filter_map(|line| {
            let (id, message) = line.trim_end_matches('\r').split_once('\t')?;
            Some(Fortune { id: id.trim().parse().ok()?, message: message.to_string() })
        })
        .collect()
}

fn seed_worlds(rng: &mut SmallRng) -> (Vec<i32>, Vec<i32>) {
    (1..=WORLD_ROWS).map(|id| (id, rng.gen_range(1..=WORLD_ROWS))).unzip()
}

/// Runs on a private, statement-less connection: the worker pools prepare
/// statements against these tables, so they cannot connect before the
/// tables exist.
async fn pg_ensure_schema(base: &PgConfig, rng: &mut SmallRng) -> Result<(), Error> {
    let config = PgConfig { connections: 1, timeout: SCHEMA_TIMEOUT, statements: Vec::new(), ..base.clone() };
    let pool = PgPool::new(config)?;
    pool.ready(STARTUP_WAIT).await?;
    let conn = pool.get()?;
    conn.batch_execute(&format!("SELECT pg_advisory_lock({SCHEMA_LOCK_KEY})")).await?;
    let result = pg_create_and_seed(&conn, rng).await;
    // Closing the connection (pool drop) would release the lock too; this
    // just releases it sooner.
    let unlocked = conn.batch_execute(&format!("SELECT pg_advisory_unlock({SCHEMA_LOCK_KEY})")).await;
    result.and(unlocked)
}

async fn pg_create_and_seed(conn: &PgConn, rng: &mut SmallRng) -> Result<(), Error> {
    conn.batch_execute(SCHEMA_SQL).await?;
    if pg_count(conn, "world").await? < i64::from(WORLD_ROWS) {
        let (ids, values) = seed_worlds(rng);
        conn.batch_execute(&format!(
            "INSERT INTO world (id, randomnumber) \
             SELECT * FROM unnest('{}'::int[], '{}'::int[]) ON CONFLICT (id) DO NOTHING",
            int_array(&ids),
            int_array(&values)
        ))
        .await?;
        tracing::info!("seeded the world table");
    }
    let seed = seed_fortunes();
    if pg_count(conn, "fortune").await? < seed.len() as i64 {
        // Simple protocol, so values are SQL literals, escaped.
        let rows: Vec<String> = seed
            .iter()
            .map(|f| format!("({}, {})", f.id, postgres_protocol::escape::escape_literal(&f.message)))
            .collect();
        conn.batch_execute(&format!(
            "INSERT INTO fortune (id, message) VALUES {} ON CONFLICT (id) DO NOTHING",
            rows.join(", ")
        ))
        .await?;
        tracing::info!("seeded the fortune table");
    }
    Ok(())
}

/// `SELECT count(*)` of `table` (one of ours, never user input).
async fn pg_count(conn: &PgConn, table: &str) -> Result<i64, Error> {
    let rows = conn.simple_query(&format!("SELECT count(*) FROM {table}")).await?;
    rows.first()
        .and_then(|row| row.first())
        .and_then(|value| value.as_deref())
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| Error::query(format!("unexpected answer to counting {table}")))
}

/// A PostgreSQL array literal body: `{1,2,3}`.
fn int_array(values: &[i32]) -> String {
    let items: Vec<String> = values.iter().map(i32::to_string).collect();
    format!("{{{}}}", items.join(","))
}

async fn sqlite_ensure_schema(pool: &SqlitePool, rng: &mut SmallRng) -> Result<(), Error> {
    let (ids, values) = seed_worlds(rng);
    let fortunes = seed_fortunes();
    pool.run(move |c| {
        // One IMMEDIATE transaction: racing callers take turns, and a crash
        // midway leaves nothing half-seeded.
        let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(SCHEMA_SQL)?;
        let worlds: i64 = tx.query_row("SELECT count(*) FROM world", [], |r| r.get(0))?;
        if worlds < i64::from(WORLD_ROWS) {
            let mut insert = tx.prepare("INSERT OR IGNORE INTO world (id, randomnumber) VALUES (?1, ?2)")?;
            for (id, value) in ids.iter().zip(&values) {
                insert.execute([id, value])?;
            }
        }
        let count: i64 = tx.query_row("SELECT count(*) FROM fortune", [], |r| r.get(0))?;
        if count < fortunes.len() as i64 {
            let mut insert = tx.prepare("INSERT OR IGNORE INTO fortune (id, message) VALUES (?1, ?2)")?;
            for f in &fortunes {
                insert.execute((f.id, &f.message))?;
            }
        }
        tx.commit()
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn run_local<F: Future<Output = ()>>(f: F) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        tokio::task::LocalSet::new().block_on(&runtime, f);
    }

    /// A fresh directory under target/ for one test's SQLite file.
    fn scratch(name: &str) -> PathBuf {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/test-scratch/tfb-store")
            .join(format!("{name}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn seed_fortunes_are_the_twelve_rows() {
        let fortunes = seed_fortunes();
        assert_eq!(fortunes.len(), 12);
        assert_eq!(fortunes[0].id, 1);
        assert_eq!(fortunes[0].message, "fortune: No such file or directory");
        assert!(fortunes[10].message.starts_with("<script>"));
        assert_eq!(fortunes[11].message, "フレームワークのベンチマーク");
    }

    #[test]
    fn world_serializes_with_tfb_names() {
        let json = serde_json::to_string(&World { id: 7, random_number: 4242 }).expect("serialize");
        assert_eq!(json, r#"{"id":7,"randomNumber":4242}"#);
    }

    #[test]
    fn new_values_dedupe_and_always_change() {
        let mut rng = SmallRng::seed_from_u64(1);
        let read = vec![
            World { id: 9, random_number: 1 },
            World { id: 3, random_number: 5 },
            World { id: 9, random_number: 1 },
        ];
        let changes = new_values(read, &mut rng);
        assert_eq!(changes.iter().map(|w| w.id).collect::<Vec<_>>(), [3, 9]);
        assert_ne!(changes[0].random_number, 5);
        assert_ne!(changes[1].random_number, 1);
        let response = stored_per_request(&[9, 3, 9], &changes);
        assert_eq!(response, [changes[1], changes[0], changes[1]]);
    }

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
        assert_eq!(split_share(2), (1, 1));
        assert_eq!(split_share(17), (1, 16));

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

    /// The checks both backends must pass, on a store whose schema exists.
    async fn exercise(store: &Store) {
        let one = store.world(1).await.expect("world 1");
        assert_eq!(one.id, 1);
        assert!((1..=WORLD_ROWS).contains(&one.random_number));
        let last = store.world(WORLD_ROWS).await.expect("last world");
        assert_eq!(last.id, WORLD_ROWS);

        let ids = [5, 17, 5, 9999];
        let worlds = store.worlds(&ids).await.expect("worlds");
        assert_eq!(worlds.iter().map(|w| w.id).collect::<Vec<_>>(), ids);
        assert_eq!(worlds[0], worlds[2]);

        let many: Vec<i32> = (0..500).map(|_| store.random_id()).collect();
        assert_eq!(store.worlds(&many).await.expect("500 worlds").len(), 500);

        let mut fortunes = store.fortunes().await.expect("fortunes");
        fortunes.sort_by_key(|f| f.id);
        assert_eq!(fortunes, seed_fortunes());

        // Updates change the stored rows, and a repeated id shows the one
        // value that was stored.
        let ids = [42, 7, 42, 1000, 42];
        let before = store.worlds(&ids).await.expect("before");
        let updated = store.update_worlds(&ids).await.expect("update");
        assert_eq!(updated.iter().map(|w| w.id).collect::<Vec<_>>(), ids);
        assert_eq!(updated[0], updated[2]);
        assert_eq!(updated[0], updated[4]);
        for (old, new) in before.iter().zip(&updated) {
            assert_ne!(old.random_number, new.random_number, "row {} unchanged", old.id);
            assert!((1..=WORLD_ROWS).contains(&new.random_number));
        }
        let after = store.worlds(&ids).await.expect("after");
        assert_eq!(after, updated, "response shows the stored values");

        // Concurrent batches touching the same rows all succeed.
        let batches = (0..8).map(|_| {
            let store = store.clone();
            async move { store.update_worlds(&[1, 2, 3, 4, 5, 3]).await }
        });
        try_join_all(batches).await.expect("concurrent updates");
    }

    #[test]
    fn sqlite_store_end_to_end() {
        run_local(async {
            let dir = scratch("sqlite");
            let config = StoreConfig::from_values(None, None, &dir, 2).expect("config");
            // Two racing setups, then a third: all succeed, nothing doubles.
            let (a, b) = futures_util::future::join(config.ensure_schema(), config.ensure_schema()).await;
            a.expect("first schema run");
            b.expect("second schema run");
            let store = config.build(0).expect("store");
            config.ensure_schema().await.expect("third schema run");
            let counts: (i64, i64) = match &store {
                Store::Sqlite(s) => s
                    .pool
                    .run(|c| {
                        c.query_row(
                            "SELECT (SELECT count(*) FROM world), (SELECT count(*) FROM fortune)",
                            [],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                    })
                    .await
                    .expect("counts"),
                Store::Pg(_) => panic!("expected SQLite"),
            };
            assert_eq!(counts, (10_000, 12));
            exercise(&store).await;
            let _ = std::fs::remove_dir_all(dir);
        });
    }

    /// The PostgreSQL test needs `DATABASE_URL` (scripts/test starts the
    /// private cluster and sets it) and fails rather than skip without it,
    /// like the library's db_pg tests. It works in a private schema so it
    /// neither sees nor disturbs the real tables.
    fn pg_url() -> String {
        match std::env::var("DATABASE_URL") {
            Ok(url) if !url.is_empty() => url,
            _ => panic!(
                "DATABASE_URL is not set: run scripts/test, \
                 or `scripts/pg start` and export the DATABASE_URL it prints"
            ),
        }
    }

    #[test]
    fn pg_store_end_to_end() {
        let url = pg_url();
        run_local(async move {
            let schema = format!("peregrine_store_test_{}", std::process::id());
            let (admin, connection) =
                tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("admin connection");
            tokio::task::spawn_local(connection);
            admin
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"))
                .await
                .expect("test schema");

            // search_path puts the fresh schema first, so the store creates
            // and seeds its own world and fortune tables there.
            let sep = if url.contains('?') { '&' } else { '?' };
            let scoped = format!("{url}{sep}options=-c%20search_path%3D{schema}");
            let config =
                StoreConfig::from_values(Some(&scoped), Some("2"), Path::new("."), 1).expect("config");
            let (a, b) = futures_util::future::join(config.ensure_schema(), config.ensure_schema()).await;
            a.expect("first schema run");
            b.expect("second schema run");
            let store = config.build(0).expect("store");
            config.ensure_schema().await.expect("third schema run");
            match &store {
                Store::Pg(s) => s.pool.ready(Duration::from_secs(5)).await.expect("ready"),
                Store::Sqlite(_) => panic!("expected PostgreSQL"),
            }
            let counts = admin
                .query_one(
                    &format!(
                        "SELECT (SELECT count(*) FROM {schema}.world), \
                         (SELECT count(*) FROM {schema}.fortune)"
                    ),
                    &[],
                )
                .await
                .expect("counts");
            assert_eq!((counts.get::<_, i64>(0), counts.get::<_, i64>(1)), (10_000, 12));
            exercise(&store).await;
            admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).await.expect("drop test schema");
        });
    }
}
