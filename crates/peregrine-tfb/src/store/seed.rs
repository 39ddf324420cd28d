//! Schema creation and seeding: the `world` and `fortune` tables, 10,000
//! Worlds with random numbers and the benchmark's 12 fortunes, and
//! HttpArena's `items` table (100,000 rows generated deterministically from
//! `data/dataset.json`), on either backend.
//!
//! Runs once at startup, before any worker serves, and must be safe when
//! several processes (or a restart) run it at once against one database:
//! PostgreSQL serializes it with an advisory lock, SQLite with an
//! `IMMEDIATE` transaction, and both only fill in missing rows.

use std::time::Duration;

use peregrine::db::pg::{PgConfig, PgConn, PgPool};
use peregrine::db::sqlite::{Connection, SqlitePool, TransactionBehavior};
use peregrine::db::Error;
use rand::rngs::SmallRng;
use rand::Rng;

use super::{Fortune, Item, Rating, ITEM_ROWS, WORLD_ROWS};

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

/// HttpArena's `items` table. No index on `price`: the async-db profile
/// measures its range scan. PostgreSQL keeps tags as `jsonb`.
const PG_ITEMS_SQL: &str = "CREATE TABLE IF NOT EXISTS items (
         id integer PRIMARY KEY,
         name text NOT NULL,
         category text NOT NULL,
         price integer NOT NULL,
         quantity integer NOT NULL,
         active boolean NOT NULL,
         tags jsonb NOT NULL,
         rating_score integer NOT NULL,
         rating_count integer NOT NULL
     );";

/// The same table in SQLite: tags as JSON text, the boolean as 0/1.
const SQLITE_ITEMS_SQL: &str = "CREATE TABLE IF NOT EXISTS items (
         id integer PRIMARY KEY,
         name text NOT NULL,
         category text NOT NULL,
         price integer NOT NULL,
         quantity integer NOT NULL,
         active boolean NOT NULL,
         tags text NOT NULL,
         rating_score integer NOT NULL,
         rating_count integer NOT NULL
     );";

/// Seed of the items generator: every run, on either backend, builds the
/// same table.
const ITEMS_SEED: u64 = 0x4874_7470_4172_656e; // "HttpAren"

/// SplitMix64: a tiny generator whose output is fixed by its definition
/// (rand's `SmallRng` may change between versions and platforms, and the
/// seeded table must not).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (the modulo bias is below 1e-16 here).
    fn range(&mut self, lo: i32, hi: i32) -> i32 {
        let span = (i64::from(hi) - i64::from(lo) + 1) as u64;
        (i64::from(lo) + (self.next() % span) as i64) as i32
    }
}

/// The 100,000 seed items, by HttpArena's rule: row `i` takes the name
/// (suffixed with ` i`) and category of dataset item `(i-1) mod 50`, a price
/// in 1..=500, a quantity in 1..=1000, a coin-flip `active`, 1 to 4 distinct
/// tags from the dataset's tag set, a rating score in 1..=50 and count in
/// 1..=500, all from [`SplitMix64`] seeded with [`ITEMS_SEED`].
pub(super) fn seed_items() -> Vec<Item> {
    let dataset = crate::dataset::load().unwrap_or_default();
    let mut tag_set: Vec<&str> = dataset.iter().flat_map(|i| i.tags.iter().map(String::as_str)).collect();
    tag_set.sort_unstable();
    tag_set.dedup();
    let mut rng = SplitMix64(ITEMS_SEED);
    (1..=ITEM_ROWS)
        .map(|id| {
            let shape = dataset.get((id as usize - 1) % dataset.len().max(1));
            let (name, category) = shape.map_or(("Item", "misc"), |s| (s.name.as_str(), s.category.as_str()));
            let price = rng.range(1, 500);
            let quantity = rng.range(1, 1000);
            let active = rng.next() & 1 == 1;
            let wanted = rng.range(1, 4.min(tag_set.len() as i32)) as usize;
            // A partial Fisher-Yates shuffle picks distinct tags.
            let mut pool = tag_set.clone();
            let mut tags = Vec::with_capacity(wanted);
            for k in 0..wanted.min(pool.len()) {
                let j = rng.range(k as i32, pool.len() as i32 - 1) as usize;
                pool.swap(k, j);
                tags.push(pool[k].to_string());
            }
            let rating = Rating { score: rng.range(1, 50), count: rng.range(1, 500) };
            Item {
                id,
                name: format!("{name} {id}"),
                category: category.to_string(),
                price,
                quantity,
                active,
                tags,
                rating,
            }
        })
        .collect()
}

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
    conn.batch_execute(PG_ITEMS_SQL).await?;
    if pg_count(conn, &format!("items WHERE id <= {ITEM_ROWS}")).await? < i64::from(ITEM_ROWS) {
        // One statement: the rows travel as one JSON document, expanded by
        // the server (row-by-row inserts would take a round trip each).
        let rows = serde_json::to_string(&seed_items().iter().map(PgSeedRow::from).collect::<Vec<_>>())
            .map_err(|e| Error::query(format!("serializing the seed items: {e}")))?;
        // Dollar quoting spares escaping 17 MB; the tag cannot occur in the
        // generated JSON (no `$` in the dataset), but check rather than trust.
        let literal = if rows.contains("$seed$") {
            postgres_protocol::escape::escape_literal(&rows)
        } else {
            format!("$seed${rows}$seed$")
        };
        conn.batch_execute(&format!(
            "INSERT INTO items ({columns}) SELECT {columns} \
             FROM jsonb_to_recordset({literal}::jsonb) AS x(id integer, name text, category text, \
             price integer, quantity integer, active boolean, tags jsonb, rating_score integer, \
             rating_count integer) ON CONFLICT (id) DO NOTHING",
            columns = super::ITEM_COLUMNS,
        ))
        .await?;
        tracing::info!("seeded the items table");
    }
    Ok(())
}

/// An item as a flat record for `jsonb_to_recordset`.
#[derive(serde::Serialize)]
struct PgSeedRow<'a> {
    id: i32,
    name: &'a str,
    category: &'a str,
    price: i32,
    quantity: i32,
    active: bool,
    tags: &'a [String],
    rating_score: i32,
    rating_count: i32,
}

impl<'a> From<&'a Item> for PgSeedRow<'a> {
    fn from(i: &'a Item) -> Self {
        PgSeedRow {
            id: i.id,
            name: &i.name,
            category: &i.category,
            price: i.price,
            quantity: i.quantity,
            active: i.active,
            tags: &i.tags,
            rating_score: i.rating.score,
            rating_count: i.rating.count,
        }
    }
}

/// `SELECT count(*)` of `table` (ours, never user input; may carry a
/// `WHERE`).
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
    let path = pool.path().to_path_buf();
    // A connection of its own, off the pool: seeding 100,000 items (and a
    // racing caller waiting its turn) may outlast the pool's per-call
    // timeout, which is sized for requests.
    let job = move || -> Result<(), Error> {
        let mut c = Connection::open(&path)?;
        c.busy_timeout(SCHEMA_TIMEOUT)?;
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
        tx.execute_batch(SQLITE_ITEMS_SQL)?;
        let items: i64 =
            tx.query_row("SELECT count(*) FROM items WHERE id <= ?1", [ITEM_ROWS], |r| r.get(0))?;
        if items < i64::from(ITEM_ROWS) {
            let mut insert = tx.prepare(&format!(
                "INSERT OR IGNORE INTO items ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                super::ITEM_COLUMNS
            ))?;
            for i in seed_items() {
                let tags = serde_json::to_string(&i.tags).unwrap_or_else(|_| "[]".to_string());
                insert.execute((
                    i.id,
                    &i.name,
                    &i.category,
                    i.price,
                    i.quantity,
                    i.active,
                    tags,
                    i.rating.score,
                    i.rating.count,
                ))?;
            }
        }
        tx.commit()?;
        Ok(())
    };
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|e| Error::query(format!("SQLite set-up did not finish: {e}")))?
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

    #[test]
    fn seed_items_follow_the_rules_and_never_change() {
        let items = seed_items();
        assert_eq!(items.len(), ITEM_ROWS as usize);
        let dataset = crate::dataset::load().expect("dataset");
        for item in &items {
            let shape = &dataset[(item.id as usize - 1) % 50];
            assert_eq!(item.name, format!("{} {}", shape.name, item.id));
            assert_eq!(item.category, shape.category);
            assert!((1..=500).contains(&item.price));
            assert!((1..=1000).contains(&item.quantity));
            assert!((1..=4).contains(&item.tags.len()));
            let mut tags = item.tags.clone();
            tags.sort();
            tags.dedup();
            assert_eq!(tags.len(), item.tags.len(), "distinct tags");
            assert!((1..=50).contains(&item.rating.score));
            assert!((1..=500).contains(&item.rating.count));
        }
        assert_eq!(items, seed_items(), "deterministic");
        // Pinned: a change to the generator changes every run's table.
        let first = &items[0];
        assert_eq!(
            (first.price, first.quantity, first.rating, first.tags.as_slice()),
            (
                35,
                543,
                Rating { score: 24, count: 370 },
                ["heavy-duty", "popular"].map(String::from).as_slice()
            )
        );
        assert!(items.iter().any(|i| i.active) && items.iter().any(|i| !i.active));
    }
}
