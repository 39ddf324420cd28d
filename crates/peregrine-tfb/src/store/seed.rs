//! Schema creation and seeding: the `world` and `fortune` tables, 10,000
//! Worlds with random numbers and the benchmark's 12 fortunes, on either
//! backend.
//!
//! Runs once at startup, before any worker serves, and must be safe when
//! several processes (or a restart) run it at once against one database:
//! PostgreSQL serializes it with an advisory lock, SQLite with an
//! `IMMEDIATE` transaction, and both only fill in missing rows.

use std::time::Duration;

use peregrine::db::pg::{PgConfig, PgConn, PgPool};
use peregrine::db::sqlite::{SqlitePool, TransactionBehavior};
use peregrine::db::Error;
use rand::rngs::SmallRng;
use rand::Rng;

use super::{Fortune, WORLD_ROWS};

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
const FORTUNES_TSV: &str = include_str!("../../data/fortunes.tsv");

/// The two tables, in SQL both PostgreSQL and SQLite accept.
const SCHEMA_SQL: &str = "CREATE TABLE IF NOT EXISTS world (
         id integer PRIMARY KEY,
         randomnumber integer NOT NULL
     );
     CREATE TABLE IF NOT EXISTS fortune (
         id integer PRIMARY KEY,
         message varchar(2048) NOT NULL
     );";

/// The seed fortunes parsed from the embedded TSV (header `id\tmessage`).
pub(super) fn seed_fortunes() -> Vec<Fortune> {
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
pub(super) async fn pg_ensure_schema(base: &PgConfig, rng: &mut SmallRng) -> Result<(), Error> {
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

pub(super) async fn sqlite_ensure_schema(pool: &SqlitePool, rng: &mut SmallRng) -> Result<(), Error> {
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

    #[test]
    fn seed_fortunes_are_the_twelve_rows() {
        let fortunes = seed_fortunes();
        assert_eq!(fortunes.len(), 12);
        assert_eq!(fortunes[0].id, 1);
        assert_eq!(fortunes[0].message, "fortune: No such file or directory");
        assert!(fortunes[10].message.starts_with("<script>"));
        assert_eq!(fortunes[11].message, "フレームワークのベンチマーク");
    }
}
