//! The benchmark app's data access: the World and Fortune tables of the TFB
//! test types and the `items` table of HttpArena's async-db and crud
//! profiles, on PostgreSQL or embedded SQLite, built only on
//! `peregrine::db`.
//!
//! This module owns the [`Store`] facade the handlers call and the rules
//! the benchmark checks that do not depend on the backend: one statement per
//! row read (pipelined on PostgreSQL, never `WHERE id IN (...)`), and one
//! batch write per update request whose stored values are what the response
//! shows. Each backend's SQL and calls live in [`pg`] and [`sqlite`],
//! backend selection from the environment in [`config`], schema creation and
//! seeding in [`seed`].
//!
//! Lifecycle: build one [`StoreConfig`] at startup ([`StoreConfig::from_env`]),
//! run [`StoreConfig::ensure_schema`] once before serving, then in each
//! worker's `LocalSet` call [`StoreConfig::build`] to get that worker's
//! [`Store`]. A PostgreSQL store owns the worker's own connections; a SQLite
//! store shares the process-wide blocking pool.

use std::cell::RefCell;
use std::rc::Rc;

use peregrine::db::Error;
use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

mod config;
mod pg;
mod seed;
mod sqlite;

pub use config::StoreConfig;

/// Rows in the World table, and the range of ids and random numbers.
pub const WORLD_ROWS: i32 = 10_000;

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

/// Rows seeded into the `items` table (ids 1..=100000).
pub const ITEM_ROWS: i32 = 100_000;

/// One row of the `items` table, as every HttpArena endpoint answers it:
/// `{"id","name","category","price","quantity","active","tags":[...],
/// "rating":{"score","count"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub id: i32,
    pub name: String,
    pub category: String,
    pub price: i32,
    pub quantity: i32,
    pub active: bool,
    pub tags: Vec<String>,
    pub rating: Rating,
}

/// An item's nested rating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rating {
    pub score: i32,
    pub count: i32,
}

/// The body of `POST /crud/items`: an item to create or replace. Items
/// created this way are `active`, untagged and unrated until seeded data
/// says otherwise; an existing row keeps those columns.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NewItem {
    pub id: i32,
    pub name: String,
    pub category: String,
    pub price: i32,
    pub quantity: i32,
}

/// The body of `PUT /crud/items/{id}`; `category` is optional and kept
/// when absent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ItemUpdate {
    pub name: String,
    pub price: i32,
    pub quantity: i32,
    #[serde(default)]
    pub category: Option<String>,
}

/// One worker's handle on the database. Cheap to clone (`Rc`); `!Send`.
#[derive(Clone)]
pub enum Store {
    Pg(pg::PgStore),
    Sqlite(sqlite::SqliteStore),
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
            Store::Pg(s) => s.world(id).await,
            Store::Sqlite(s) => s.world(id).await,
        }
    }

    /// The World rows for `ids`, in order, each read by its own statement.
    /// On PostgreSQL all reads are in flight at once on one connection.
    pub async fn worlds(&self, ids: &[i32]) -> Result<Vec<World>, Error> {
        match self {
            Store::Pg(s) => s.worlds(ids).await,
            Store::Sqlite(s) => s.worlds(ids).await,
        }
    }

    /// All Fortune rows, in table order.
    pub async fn fortunes(&self) -> Result<Vec<Fortune>, Error> {
        match self {
            Store::Pg(s) => s.fortunes().await,
            Store::Sqlite(s) => s.fortunes().await,
        }
    }

    /// The `/updates` work: reads each requested row with its own statement,
    /// gives each distinct id one new random number (always different from
    /// the one read, so every update changes the table), writes them all in
    /// one statement, and returns per requested id the value now stored.
    pub async fn update_worlds(&self, ids: &[i32]) -> Result<Vec<World>, Error> {
        match self {
            Store::Pg(s) => s.update_worlds(ids).await,
            Store::Sqlite(s) => s.update_worlds(ids).await,
        }
    }
}

impl Store {
    /// Up to `limit` items with `min <= price <= max` (async-db), in the
    /// order the database finds them.
    pub async fn items_by_price(&self, min: i32, max: i32, limit: i64) -> Result<Vec<Item>, Error> {
        match self {
            Store::Pg(s) => s.items_by_price(min, max, limit).await,
            Store::Sqlite(s) => s.items_by_price(min, max, limit).await,
        }
    }

    /// One page of a category, by id (`GET /crud/items`).
    pub async fn items_in_category(
        &self,
        category: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Item>, Error> {
        match self {
            Store::Pg(s) => s.items_in_category(category, limit, offset).await,
            Store::Sqlite(s) => s.items_in_category(category, limit, offset).await,
        }
    }

    /// The item `id`, if it exists.
    pub async fn item(&self, id: i32) -> Result<Option<Item>, Error> {
        match self {
            Store::Pg(s) => s.item(id).await,
            Store::Sqlite(s) => s.item(id).await,
        }
    }

    /// Creates the item or replaces its name, category, price and quantity;
    /// returns the row as stored (committed).
    pub async fn upsert_item(&self, item: &NewItem) -> Result<Item, Error> {
        match self {
            Store::Pg(s) => s.upsert_item(item).await,
            Store::Sqlite(s) => s.upsert_item(item).await,
        }
    }

    /// Updates the item `id`; `None` when there is no such item.
    pub async fn update_item(&self, id: i32, update: &ItemUpdate) -> Result<Option<Item>, Error> {
        match self {
            Store::Pg(s) => s.update_item(id, update).await,
            Store::Sqlite(s) => s.update_item(id, update).await,
        }
    }
}

/// The columns every item query selects, in [`Item`] order (tags before
/// the two rating columns); a macro so SQL can be built with `concat!`.
macro_rules! item_columns {
    () => {
        "id, name, category, price, quantity, active, tags, rating_score, rating_count"
    };
}
use item_columns;

/// [`item_columns!`] as a value.
const ITEM_COLUMNS: &str = item_columns!();

/// A worker's random number generator, shared by its store's clones.
type SharedRng = Rc<RefCell<SmallRng>>;

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

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::future::try_join_all;
    use rand::SeedableRng;
    use std::future::Future;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    pub(super) fn run_local<F: Future<Output = ()>>(f: F) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        tokio::task::LocalSet::new().block_on(&runtime, f);
    }

    /// A fresh directory under target/ for one test's SQLite file.
    pub(super) fn scratch(name: &str) -> PathBuf {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/test-scratch/tfb-store")
            .join(format!("{name}-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        dir
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

    /// The checks both backends must pass, on a store whose schema exists.
    pub(super) async fn exercise(store: &Store) {
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
        assert_eq!(fortunes, seed::seed_fortunes());

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

        // The items table: seeded rows, the range scan, a page, the writes.
        let seeded = seed::seed_items();
        assert_eq!(store.item(7).await.expect("item 7"), Some(seeded[6].clone()));
        assert_eq!(store.item(ITEM_ROWS + 50_000).await.expect("absent item"), None);
        for (min, max, limit) in [(5, 80, 7), (20, 150, 18), (100, 400, 33), (10, 50, 50)] {
            let items = store.items_by_price(min, max, limit).await.expect("async-db");
            assert_eq!(items.len() as i64, limit);
            assert!(items.iter().all(|i| (min..=max).contains(&i.price)));
        }
        assert!(store.items_by_price(9999, 9999, 50).await.expect("empty range").is_empty());
        let page = store.items_in_category("office", 10, 10).await.expect("page 2");
        let want: Vec<&Item> = seeded.iter().filter(|i| i.category == "office").skip(10).take(10).collect();
        assert_eq!(page.iter().collect::<Vec<_>>(), want);
        let new =
            NewItem { id: ITEM_ROWS + 7, name: "n".into(), category: "office".into(), price: 3, quantity: 4 };
        let created = store.upsert_item(&new).await.expect("create");
        assert_eq!(
            (created.id, created.name.as_str(), created.price, created.active),
            (new.id, "n", 3, true)
        );
        let again = NewItem { price: 9, ..new.clone() };
        assert_eq!(store.upsert_item(&again).await.expect("upsert").price, 9);
        let update = ItemUpdate { name: "u".into(), price: 5, quantity: 6, category: None };
        let updated = store.update_item(new.id, &update).await.expect("update").expect("present");
        assert_eq!((updated.name.as_str(), updated.category.as_str(), updated.quantity), ("u", "office", 6));
        assert_eq!(store.item(new.id).await.expect("read back"), Some(updated));
        let moved = ItemUpdate { category: Some("toys".into()), ..update };
        assert_eq!(
            store.update_item(new.id, &moved).await.expect("move").map(|i| i.category),
            Some("toys".into())
        );
        assert_eq!(store.update_item(ITEM_ROWS + 60_000, &moved).await.expect("absent"), None);
    }
}
