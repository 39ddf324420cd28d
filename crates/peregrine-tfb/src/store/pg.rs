//! The PostgreSQL backend of [`super::Store`]: its SQL, the statements it
//! registers on every connection, and the calls behind each handler.
//!
//! Reads go to two pipelined connections per worker; the one write of an
//! `/updates` request goes to a separate set of connections (see
//! [`super::config::split_share`] for why), registered as a write so it is
//! answered only after its commit.

use futures_util::future::try_join_all;
use peregrine::db::pg::types::{accepts, FromSql, Type};
use peregrine::db::pg::{PgConfig, PgConn, PgPool, Row, StatementId};
use peregrine::db::Error;

use super::{new_values, stored_per_request, Fortune, Item, ItemUpdate, NewItem, Rating, SharedRng, World};

const SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
/// All of one request's new values in one statement; ids arrive sorted so
/// concurrent batches lock rows in the same order. The two-array `unnest`
/// zips ids and values without a subquery: TFB's verifier counts every
/// statement whose text contains `SELECT` as a read, so an update must not
/// contain the word.
const UPDATE_WORLDS: &str = "UPDATE world SET randomnumber = v.r \
     FROM unnest($1::int[], $2::int[]) AS v(id, r) \
     WHERE world.id = v.id";

/// async-db: a range scan (no index on price) cut at `limit` rows.
fn items_by_price_sql() -> String {
    format!("SELECT {} FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3", super::ITEM_COLUMNS)
}

fn items_in_category_sql() -> String {
    format!("SELECT {} FROM items WHERE category = $1 ORDER BY id LIMIT $2 OFFSET $3", super::ITEM_COLUMNS)
}

fn item_sql() -> String {
    format!("SELECT {} FROM items WHERE id = $1", super::ITEM_COLUMNS)
}

/// crud's create: new rows are active, untagged and unrated; an existing
/// row keeps those columns.
fn upsert_item_sql() -> String {
    format!(
        "INSERT INTO items ({c}) VALUES ($1, $2, $3, $4, $5, true, '[]', 0, 0) \
         ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, category = EXCLUDED.category, \
         price = EXCLUDED.price, quantity = EXCLUDED.quantity RETURNING {c}",
        c = super::ITEM_COLUMNS
    )
}

fn update_item_sql() -> String {
    format!(
        "UPDATE items SET name = $2, price = $3, quantity = $4, category = COALESCE($5, category) \
         WHERE id = $1 RETURNING {}",
        super::ITEM_COLUMNS
    )
}

/// Statement handles registered on every PostgreSQL connection.
#[derive(Debug, Clone, Copy)]
pub(super) struct PgStatements {
    world: StatementId,
    fortunes: StatementId,
    update: StatementId,
    items_by_price: StatementId,
    items_in_category: StatementId,
    item: StatementId,
    upsert_item: StatementId,
    update_item: StatementId,
}

impl PgStatements {
    /// Registers the store's statements on `config`.
    pub(super) fn register(config: &mut PgConfig) -> PgStatements {
        PgStatements {
            world: config.statement(SELECT_WORLD),
            fortunes: config.statement(SELECT_FORTUNES),
            update: config.write_statement(UPDATE_WORLDS),
            items_by_price: config.statement(items_by_price_sql()),
            items_in_category: config.statement(items_in_category_sql()),
            item: config.statement(item_sql()),
            upsert_item: config.write_statement(upsert_item_sql()),
            update_item: config.write_statement(update_item_sql()),
        }
    }
}

/// PostgreSQL backend of a [`super::Store`].
#[derive(Clone)]
pub struct PgStore {
    /// Connections for reads (pipelined).
    pub(super) pool: PgPool,
    /// Connections for the commits of `/updates`; see
    /// [`super::config::split_share`].
    writers: PgPool,
    statements: PgStatements,
    pub(super) rng: SharedRng,
}

impl PgStore {
    /// Starts a worker's `reads` read and `writes` write connections (`0`
    /// writes: the read connection carries both). Must run in the worker's
    /// `LocalSet`; does not wait for the database.
    pub(super) fn new(
        config: &PgConfig,
        statements: PgStatements,
        reads: usize,
        writes: usize,
        rng: SharedRng,
    ) -> Result<PgStore, Error> {
        let pool = PgPool::new(PgConfig { connections: reads, ..config.clone() })?;
        let writers = if writes == 0 {
            pool.clone()
        } else {
            PgPool::new(PgConfig { connections: writes, ..config.clone() })?
        };
        Ok(PgStore { pool, writers, statements, rng })
    }

    pub(super) async fn world(&self, id: i32) -> Result<World, Error> {
        world(&self.pool.get_or_wait().await?, self.statements.world, id).await
    }

    pub(super) async fn worlds(&self, ids: &[i32]) -> Result<Vec<World>, Error> {
        worlds(&self.pool.get_or_wait().await?, self.statements.world, ids).await
    }

    pub(super) async fn fortunes(&self) -> Result<Vec<Fortune>, Error> {
        let rows = self.pool.get_or_wait().await?.query(self.statements.fortunes, &[]).await?;
        // Room for the fortune the handler adds, so neither collecting
        // (a fallible iterator gives no size hint) nor that push grows it.
        let mut fortunes = Vec::with_capacity(rows.len() + 1);
        for row in &rows {
            fortunes.push(Fortune { id: row.try_get(0)?, message: row.try_get_str(1)?.to_owned() });
        }
        Ok(fortunes)
    }

    pub(super) async fn update_worlds(&self, ids: &[i32]) -> Result<Vec<World>, Error> {
        let conn = self.pool.get_or_wait().await?;
        let read = worlds(&conn, self.statements.world, ids).await?;
        let changes = {
            let mut rng = self.rng.borrow_mut();
            new_values(read, &mut rng)
        };
        let (change_ids, values): (Vec<i32>, Vec<i32>) =
            changes.iter().map(|w| (w.id, w.random_number)).unzip();
        self.writers.get_or_wait().await?.execute(self.statements.update, &[&change_ids, &values]).await?;
        Ok(stored_per_request(ids, &changes))
    }
}

impl PgStore {
    pub(super) async fn items_by_price(&self, min: i32, max: i32, limit: i64) -> Result<Vec<Item>, Error> {
        let rows = self
            .pool
            .get_or_wait()
            .await?
            .query(self.statements.items_by_price, &[&min, &max, &limit])
            .await?;
        rows.iter().map(item_row).collect()
    }

    pub(super) async fn items_in_category(
        &self,
        category: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Item>, Error> {
        let conn = self.pool.get_or_wait().await?;
        let rows = conn.query(self.statements.items_in_category, &[&category, &limit, &offset]).await?;
        rows.iter().map(item_row).collect()
    }

    pub(super) async fn item(&self, id: i32) -> Result<Option<Item>, Error> {
        let row = self.pool.get_or_wait().await?.query_opt(self.statements.item, &[&id]).await?;
        row.as_ref().map(item_row).transpose()
    }

    pub(super) async fn upsert_item(&self, item: &NewItem) -> Result<Item, Error> {
        let conn = self.writers.get_or_wait().await?;
        let row = conn
            .query_one(
                self.statements.upsert_item,
                &[&item.id, &item.name, &item.category, &item.price, &item.quantity],
            )
            .await?;
        item_row(&row)
    }

    pub(super) async fn update_item(&self, id: i32, update: &ItemUpdate) -> Result<Option<Item>, Error> {
        let conn = self.writers.get_or_wait().await?;
        let row = conn
            .query_opt(
                self.statements.update_item,
                &[&id, &update.name, &update.price, &update.quantity, &update.category],
            )
            .await?;
        row.as_ref().map(item_row).transpose()
    }
}

/// A row selected with [`super::ITEM_COLUMNS`].
fn item_row(row: &Row) -> Result<Item, Error> {
    Ok(Item {
        id: row.try_get(0)?,
        name: row.try_get(1)?,
        category: row.try_get(2)?,
        price: row.try_get(3)?,
        quantity: row.try_get(4)?,
        active: row.try_get(5)?,
        tags: row.try_get::<JsonTags>(6)?.0,
        rating: Rating { score: row.try_get(7)?, count: row.try_get(8)? },
    })
}

/// A `jsonb` (or `json`) array of strings. Binary `jsonb` is a version
/// byte (1) followed by the JSON text.
struct JsonTags(Vec<String>);

impl<'a> FromSql<'a> for JsonTags {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        let text = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, rest)) => rest,
                _ => return Err("unsupported jsonb format version".into()),
            }
        } else {
            raw
        };
        Ok(JsonTags(serde_json::from_slice(text)?))
    }

    accepts!(JSONB, JSON);
}

async fn world(conn: &PgConn, stmt: StatementId, id: i32) -> Result<World, Error> {
    let row = conn.query_one(stmt, &[&id]).await?;
    Ok(World { id: row.try_get(0)?, random_number: row.try_get(1)? })
}

/// Every read is queued before any is awaited, so they go to the server as
/// one pipeline (one round trip, one implicit transaction), each still its
/// own statement.
async fn worlds(conn: &PgConn, stmt: StatementId, ids: &[i32]) -> Result<Vec<World>, Error> {
    try_join_all(ids.iter().map(|&id| world(conn, stmt, id))).await
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::store::tests::{exercise, run_local};
    use crate::store::{Store, StoreConfig};

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
    fn the_update_statement_does_not_read_as_a_select() {
        assert!(!super::UPDATE_WORLDS.to_ascii_uppercase().contains("SELECT"), "{}", super::UPDATE_WORLDS);
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
