//! Database-side checks, run only with `--database-url`.
//!
//! Owns what can only be seen from inside the database: that `/updates`
//! really persists what it answers (table read before and after), on
//! PostgreSQL or on a SQLite file (`sqlite://PATH`, the embedded default);
//! and, on PostgreSQL, the statement counts in `pg_stat_statements` that
//! prove `/queries` issues one single-row statement per row and
//! `/fortunes` reads the table on every request (SQLite keeps no such
//! counts). HTTP traffic goes through the same blocking client as every
//! other check; only the database side uses tokio-postgres, on a
//! current-thread runtime driven just while a query runs.

use std::collections::HashMap;

use tokio::runtime::Runtime;
use tokio_postgres::{Client, NoTls, Row};

use super::checks::{self, Check};
use super::tfb::concurrent_gets;
use super::{Ctx, Reporter};

/// Rows per request in the statement-count load, as in TFB.
const QUERIES_PER_REQUEST: usize = 20;
/// Sequential `/fortunes` requests counted against `pg_stat_statements`.
const FORTUNE_REQUESTS: usize = 32;
const FORTUNE_ROWS: i64 = 12;

/// World-table statements that `pg_stat_statements` recorded, with whether
/// each fetches by a single id parameter. Query texts are normalized by
/// PostgreSQL (`$1` for constants), so a pattern on the text is reliable.
const WORLD_STATS: &str = r#"
SELECT query,
       calls::bigint,
       rows::bigint,
       query ~* 'where\s+("?world"?\.)?"?id"?\s*=\s*\$[0-9]+' AS by_id
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query ~* '^\s*select'
  AND query ~* '\mworld\M'
  AND query !~* 'pg_stat_statements'
ORDER BY calls DESC"#;

const FORTUNE_STATS: &str = r#"
SELECT query, calls::bigint, rows::bigint
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query ~* '^\s*select'
  AND query ~* '\mfortune\M'
  AND query !~* 'pg_stat_statements'
ORDER BY calls DESC"#;

struct Db {
    rt: Runtime,
    client: Client,
}

impl Db {
    fn connect(dsn: &str) -> Result<Db, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let client = rt.block_on(async {
            let (client, connection) = tokio_postgres::connect(dsn, NoTls)
                .await
                .map_err(|e| format!("cannot connect to the database: {}", with_cause(&e)))?;
            // The connection task only makes progress inside `block_on`,
            // which is exactly when we wait for a query.
            tokio::spawn(connection);
            Ok::<_, String>(client)
        })?;
        Ok(Db { rt, client })
    }

    fn query(&self, sql: &str) -> Result<Vec<Row>, String> {
        self.rt.block_on(self.client.query(sql, &[])).map_err(|e| {
            format!("{}: {}", sql.split_whitespace().collect::<Vec<_>>().join(" "), with_cause(&e))
        })
    }

    fn reset_stats(&self) -> Result<(), String> {
        let reset = || self.rt.block_on(self.client.batch_execute("SELECT pg_stat_statements_reset()"));
        if reset().is_ok() {
            return Ok(());
        }
        // The library may be preloaded without the extension created in
        // this database (TFB's setup creates it); creating it is harmless.
        let _ =
            self.rt.block_on(self.client.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"));
        reset().map_err(|e| {
            format!(
                "cannot reset pg_stat_statements (is it in shared_preload_libraries, and may this user reset it?): {}",
                with_cause(&e)
            )
        })
    }

    /// Every World row as id -> randomNumber, whichever way the schema was
    /// spelled (`world`/`randomnumber` unquoted, or quoted mixed case).
    fn world(&self) -> Result<HashMap<i64, i64>, String> {
        let rows = self.query("SELECT * FROM world").or_else(|_| self.query("SELECT * FROM \"World\""))?;
        let Some(first) = rows.first() else {
            return Err("the World table is empty".into());
        };
        let column = |name: &str| {
            first
                .columns()
                .iter()
                .position(|c| c.name().eq_ignore_ascii_case(name))
                .ok_or_else(|| format!("World has no column {name}"))
        };
        let (id_col, value_col) = (column("id")?, column("randomnumber")?);
        rows.iter().map(|row| Ok((int(row, id_col)?, int(row, value_col)?))).collect()
    }
}

/// An error with its causes; tokio-postgres puts the useful part (refused,
/// bad password...) in the source.
fn with_cause(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    // Server errors carry DETAIL/HINT lines; a report line stays one line.
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn int(row: &Row, idx: usize) -> Result<i64, String> {
    row.try_get::<_, i32>(idx)
        .map(i64::from)
        .or_else(|_| row.try_get::<_, i64>(idx))
        .map_err(|e| format!("column {idx} is not an integer: {e}"))
}

/// The SQLite file a `sqlite://PATH` URL names, or `None` for any other
/// URL (PostgreSQL).
pub fn sqlite_path(url: &str) -> Option<&str> {
    url.strip_prefix("sqlite://")
}

/// A SQLite database file, opened read-only beside the server that writes
/// it (the embedded default keeps it in write-ahead-log mode, so reading
/// does not block the server).
struct SqliteDb {
    conn: rusqlite::Connection,
}

impl SqliteDb {
    fn open(path: &str) -> Result<SqliteDb, String> {
        let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|e| format!("cannot open the SQLite database {path}: {e}"))?;
        Ok(SqliteDb { conn })
    }
}

/// Where `updates_persist` reads the World table from.
trait WorldTable {
    /// Every World row as id -> randomNumber.
    fn world(&self) -> Result<HashMap<i64, i64>, String>;
}

impl WorldTable for Db {
    fn world(&self) -> Result<HashMap<i64, i64>, String> {
        Db::world(self)
    }
}

impl WorldTable for SqliteDb {
    fn world(&self) -> Result<HashMap<i64, i64>, String> {
        let read = || -> rusqlite::Result<HashMap<i64, i64>> {
            let mut statement = self.conn.prepare("SELECT id, randomnumber FROM world")?;
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect()
        };
        let rows = read().map_err(|e| format!("SELECT id, randomnumber FROM world: {e}"))?;
        if rows.is_empty() {
            return Err("the World table is empty".into());
        }
        Ok(rows)
    }
}

pub fn run(ctx: &Ctx, rep: &mut Reporter, url: &str) {
    if let Some(path) = sqlite_path(url) {
        match SqliteDb::open(path) {
            Ok(db) => updates_persist_checks(ctx, rep, &db),
            Err(e) => rep.fail("database connection", &e),
        }
        return;
    }
    let db = match Db::connect(url) {
        Ok(db) => db,
        Err(e) => {
            rep.fail("database connection", &e);
            return;
        }
    };
    updates_persist_checks(ctx, rep, &db);
    if let Some(path) = rep.route("queries statement count", &ctx.routes.queries) {
        let uri = format!("{path}?{}={QUERIES_PER_REQUEST}", ctx.routes.queries_param);
        let clients = ctx.concurrency;
        let name = format!("{clients} concurrent GET {uri}: one single-row statement per row");
        rep.record(&name, queries_statements(ctx, &db, &uri, clients));
    }
    if let Some(path) = rep.route("fortunes statement count", &ctx.routes.fortunes) {
        let name = format!("{FORTUNE_REQUESTS} x GET {path}: one 12-row Fortune read each");
        rep.record(&name, fortunes_statements(ctx, &db, path));
    }
}

fn updates_persist_checks(ctx: &Ctx, rep: &mut Reporter, db: &dyn WorldTable) {
    if let Some(path) = rep.route("updates persist", &ctx.routes.updates) {
        for n in [20, 500] {
            let uri = format!("{path}?{}={n}", ctx.routes.updates_param);
            rep.record(&format!("GET {uri} persists what it answers"), updates_persist(ctx, db, &uri, n));
        }
    }
}

fn updates_persist(ctx: &Ctx, db: &dyn WorldTable, uri: &str, n: usize) -> Check {
    let before = db.world()?;
    let resp = ctx.target.get(uri)?;
    checks::check_updates(&resp, n)?;
    let rows = checks::update_rows(&resp, n)?;
    let after = db.world()?;
    let mut distinct: Vec<i64> = rows.iter().map(|&(id, _)| id).collect();
    distinct.sort_unstable();
    distinct.dedup();
    for &(id, shown) in &rows {
        let stored = after.get(&id).copied();
        if stored != Some(shown) {
            return Err(format!(
                "expected row {id} to hold {shown} as answered, got {}",
                stored.map_or("no row".into(), |v| v.to_string())
            ));
        }
    }
    // A new random value equals the old one with probability 1/10000, so
    // nearly all must change; "most" leaves room for that.
    let changed = distinct.iter().filter(|id| before.get(id) != after.get(id)).count();
    if changed * 4 >= distinct.len() * 3 {
        Ok(())
    } else {
        Err(format!(
            "expected most of the {} distinct rows to change in the table, got {changed} changed",
            distinct.len()
        ))
    }
}

/// One `pg_stat_statements` entry.
struct Stat {
    query: String,
    calls: i64,
    rows: i64,
    /// Fetches World by a single id parameter (only for World queries).
    by_id: bool,
}

impl Db {
    fn stats(&self, sql: &str) -> Result<Vec<Stat>, String> {
        let bad = |e: tokio_postgres::Error| format!("unexpected pg_stat_statements row: {e}");
        self.query(sql)?
            .iter()
            .map(|r| {
                Ok(Stat {
                    // NULL for statements of users whose text we may not see.
                    query: r.try_get::<_, Option<String>>(0).map_err(bad)?.unwrap_or_default(),
                    calls: r.try_get(1).map_err(bad)?,
                    rows: r.try_get(2).map_err(bad)?,
                    by_id: r.len() > 3 && r.try_get(3).map_err(bad)?,
                })
            })
            .collect()
    }
}

fn describe(stats: &[Stat]) -> String {
    let shown: Vec<String> = stats
        .iter()
        .take(4)
        .map(|s| {
            let q = s.query.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("{q:?} calls={} rows={}", s.calls, s.rows)
        })
        .collect();
    if shown.is_empty() {
        "no matching statements (does the verifier see the server's statements? a non-superuser sees only its own query texts)".into()
    } else {
        shown.join(" | ")
    }
}

fn queries_statements(ctx: &Ctx, db: &Db, uri: &str, clients: usize) -> Check {
    db.reset_stats()?;
    concurrent_gets(&ctx.target, uri, clients, &|resp| checks::check_rows(resp, QUERIES_PER_REQUEST))?;
    let stats = db.stats(WORLD_STATS)?;
    let by_id = stats.iter().filter(|s| s.by_id);
    let (calls, rows) = by_id.fold((0, 0), |(c, r), s| (c + s.calls, r + s.rows));
    let want = (clients * QUERIES_PER_REQUEST) as i64;
    if calls >= want && rows >= want {
        Ok(())
    } else {
        Err(format!(
            "expected >= {want} single-id World selects reading >= {want} rows, got {calls} calls reading {rows} rows ({})",
            describe(&stats)
        ))
    }
}

fn fortunes_statements(ctx: &Ctx, db: &Db, path: &str) -> Check {
    db.reset_stats()?;
    for i in 0..FORTUNE_REQUESTS {
        let resp = ctx.target.get(path).map_err(|e| format!("request {i}: {e}"))?;
        checks::check_fortunes(&resp).map_err(|e| format!("request {i}: {e}"))?;
    }
    let stats = db.stats(FORTUNE_STATS)?;
    let (calls, rows) = stats.iter().fold((0, 0), |(c, r), s| (c + s.calls, r + s.rows));
    let want = FORTUNE_REQUESTS as i64;
    if calls >= want && rows == calls * FORTUNE_ROWS {
        Ok(())
    } else {
        Err(format!(
            "expected >= {want} Fortune selects of {FORTUNE_ROWS} rows each, got {calls} calls reading {rows} rows ({})",
            describe(&stats)
        ))
    }
}
