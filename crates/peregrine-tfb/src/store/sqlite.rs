//! The embedded SQLite backend of [`super::Store`]: its SQL and the jobs it
//! runs on the process-wide blocking pool.
//!
//! Each call is one job on one pool thread; the reads and the write of an
//! `/updates` request run in one `IMMEDIATE` transaction, since SQLite has
//! one writer at a time anyway.

use peregrine::db::sqlite::{Connection, Row, SqliteError, SqlitePool, TransactionBehavior};
use peregrine::db::Error;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{
    item_columns, new_values, stored_per_request, Fortune, Item, ItemUpdate, NewItem, Rating, SharedRng,
    World,
};

const SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = ?1";
const SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
const UPDATE_WORLD: &str = "UPDATE world SET randomnumber = ?2 WHERE id = ?1";
const SELECT_ITEMS_BY_PRICE: &str =
    concat!("SELECT ", item_columns!(), " FROM items WHERE price BETWEEN ?1 AND ?2 LIMIT ?3");
const SELECT_ITEMS_IN_CATEGORY: &str =
    concat!("SELECT ", item_columns!(), " FROM items WHERE category = ?1 ORDER BY id LIMIT ?2 OFFSET ?3");
const SELECT_ITEM: &str = concat!("SELECT ", item_columns!(), " FROM items WHERE id = ?1");
/// crud's create: new rows are active, untagged and unrated; an existing
/// row keeps those columns.
const UPSERT_ITEM: &str = concat!(
    "INSERT INTO items (",
    item_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, 1, '[]', 0, 0) \
     ON CONFLICT (id) DO UPDATE SET name = excluded.name, category = excluded.category, \
     price = excluded.price, quantity = excluded.quantity RETURNING ",
    item_columns!()
);
const UPDATE_ITEM: &str = concat!(
    "UPDATE items SET name = ?2, price = ?3, quantity = ?4, category = COALESCE(?5, category) \
     WHERE id = ?1 RETURNING ",
    item_columns!()
);

/// SQLite backend of a [`super::Store`].
#[derive(Clone)]
pub struct SqliteStore {
    pub(super) pool: SqlitePool,
    pub(super) rng: SharedRng,
}

impl SqliteStore {
    pub(super) fn new(pool: SqlitePool, rng: SharedRng) -> SqliteStore {
        SqliteStore { pool, rng }
    }

    pub(super) async fn world(&self, id: i32) -> Result<World, Error> {
        self.pool.run(move |c| c.prepare_cached(SELECT_WORLD)?.query_row([id], world_row)).await
    }

    pub(super) async fn worlds(&self, ids: &[i32]) -> Result<Vec<World>, Error> {
        let ids = ids.to_vec();
        self.pool.run(move |c| worlds(c, &ids)).await
    }

    pub(super) async fn fortunes(&self) -> Result<Vec<Fortune>, Error> {
        self.pool
            .run(|c| {
                let mut stmt = c.prepare_cached(SELECT_FORTUNES)?;
                let rows = stmt.query_map([], |r| Ok(Fortune { id: r.get(0)?, message: r.get(1)? }))?;
                rows.collect()
            })
            .await
    }

    pub(super) async fn update_worlds(&self, ids: &[i32]) -> Result<Vec<World>, Error> {
        let ids = ids.to_vec();
        let seed: u64 = self.rng.borrow_mut().gen();
        self.pool
            .run(move |c| {
                // IMMEDIATE takes the write lock up front: a deferred
                // transaction that reads and then writes can fail with
                // SQLITE_BUSY at once instead of waiting.
                let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let read = worlds(&tx, &ids)?;
                let changes = new_values(read, &mut SmallRng::seed_from_u64(seed));
                {
                    let mut update = tx.prepare_cached(UPDATE_WORLD)?;
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

impl SqliteStore {
    pub(super) async fn items_by_price(&self, min: i32, max: i32, limit: i64) -> Result<Vec<Item>, Error> {
        self.pool
            .run(move |c| {
                let mut stmt = c.prepare_cached(SELECT_ITEMS_BY_PRICE)?;
                let rows = stmt.query_map((min, max, limit), item_row)?;
                rows.collect()
            })
            .await
    }

    pub(super) async fn items_in_category(
        &self,
        category: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Item>, Error> {
        let category = category.to_string();
        self.pool
            .run(move |c| {
                let mut stmt = c.prepare_cached(SELECT_ITEMS_IN_CATEGORY)?;
                let rows = stmt.query_map((category, limit, offset), item_row)?;
                rows.collect()
            })
            .await
    }

    pub(super) async fn item(&self, id: i32) -> Result<Option<Item>, Error> {
        self.pool
            .run(move |c| {
                let mut stmt = c.prepare_cached(SELECT_ITEM)?;
                let mut rows = stmt.query_map([id], item_row)?;
                rows.next().transpose()
            })
            .await
    }

    pub(super) async fn upsert_item(&self, item: &NewItem) -> Result<Item, Error> {
        let item = item.clone();
        self.pool
            .run(move |c| {
                let mut stmt = c.prepare_cached(UPSERT_ITEM)?;
                stmt.query_row((item.id, &item.name, &item.category, item.price, item.quantity), item_row)
            })
            .await
    }

    pub(super) async fn update_item(&self, id: i32, update: &ItemUpdate) -> Result<Option<Item>, Error> {
        let update = update.clone();
        self.pool
            .run(move |c| {
                let mut stmt = c.prepare_cached(UPDATE_ITEM)?;
                let mut rows = stmt.query_map(
                    (id, &update.name, update.price, update.quantity, &update.category),
                    item_row,
                )?;
                rows.next().transpose()
            })
            .await
    }
}

/// A row selected with [`super::ITEM_COLUMNS`]; tags are JSON text.
fn item_row(row: &Row<'_>) -> Result<Item, SqliteError> {
    let tags: String = row.get(6)?;
    let tags = serde_json::from_str(&tags).map_err(|e| {
        SqliteError::FromSqlConversionFailure(6, peregrine::db::sqlite::types::Type::Text, Box::new(e))
    })?;
    Ok(Item {
        id: row.get(0)?,
        name: row.get(1)?,
        category: row.get(2)?,
        price: row.get(3)?,
        quantity: row.get(4)?,
        active: row.get(5)?,
        tags,
        rating: Rating { score: row.get(7)?, count: row.get(8)? },
    })
}

fn world_row(row: &Row<'_>) -> Result<World, SqliteError> {
    Ok(World { id: row.get(0)?, random_number: row.get(1)? })
}

fn worlds(c: &Connection, ids: &[i32]) -> Result<Vec<World>, SqliteError> {
    let mut stmt = c.prepare_cached(SELECT_WORLD)?;
    ids.iter().map(|&id| stmt.query_row([id], world_row)).collect()
}

#[cfg(test)]
mod tests {
    use crate::store::tests::{exercise, run_local, scratch};
    use crate::store::{Store, StoreConfig};

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
}
