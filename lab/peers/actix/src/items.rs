//! HttpArena's `items` table on a deadpool-postgres pool, and the async-db
//! endpoint, `GET /async-db?min=&max=&limit=`.
//!
//! The pool is the one actix's examples use (`databases/postgres`): one
//! `deadpool_postgres::Pool` built in `main` from `DATABASE_URL` and shared
//! by every worker through `web::Data`, at most `DATABASE_MAX_CONN`
//! connections (HttpArena's variable; deadpool's default when unset), each
//! statement prepared once per connection by `prepare_cached`. The peer
//! does not create or seed `items`: peregrine-tfb does at its start, with
//! the same 100,000 rows on every run.
//!
//! Parameter rule, as peregrine-tfb's: `min` and `max` default to 10 and 50,
//! `limit` to 50; a value that is missing or not an integer takes its
//! default, one beyond `i32` saturates, and `limit` is then clamped to
//! 1..=50. An empty range and a database failure both answer
//! `{"items":[],"count":0}` (the failure is logged).

use actix_web::{web, HttpResponse};
use deadpool_postgres::{ManagerConfig, Pool, PoolConfig, RecyclingMethod, Runtime};
use serde::{Deserialize, Serialize};
use tokio_postgres::types::Json;
use tokio_postgres::{NoTls, Row};

/// The columns every item query reads, in [`Item::from_row`]'s order (a
/// macro, so statements are built with `concat!` at compile time).
macro_rules! item_columns {
    () => {
        "id, name, category, price, quantity, active, tags, rating_score, rating_count"
    };
}
pub(crate) use item_columns;

/// async-db's range scan (no index on price) cut at `limit` rows.
const BY_PRICE: &str =
    concat!("SELECT ", item_columns!(), " FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3");

/// One row of `items` as every endpoint answers it.
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Rating {
    pub score: i32,
    pub count: i32,
}

impl Item {
    /// Reads a row selected with `item_columns!()`.
    pub fn from_row(row: &Row) -> Result<Item, tokio_postgres::Error> {
        Ok(Item {
            id: row.try_get(0)?,
            name: row.try_get(1)?,
            category: row.try_get(2)?,
            price: row.try_get(3)?,
            quantity: row.try_get(4)?,
            active: row.try_get(5)?,
            tags: row.try_get::<_, Json<Vec<String>>>(6)?.0,
            rating: Rating { score: row.try_get(7)?, count: row.try_get(8)? },
        })
    }
}

/// Why a database call failed.
#[derive(Debug)]
pub enum DbError {
    /// No `DATABASE_URL`.
    NotConfigured,
    /// No connection from the pool (database down, pool closed).
    Pool(deadpool_postgres::PoolError),
    /// The statement failed.
    Query(tokio_postgres::Error),
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::NotConfigured => f.write_str("DATABASE_URL is not set"),
            DbError::Pool(e) => write!(f, "no database connection: {e}"),
            DbError::Query(e) => write!(f, "query failed: {e}"),
        }
    }
}

impl From<deadpool_postgres::PoolError> for DbError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        DbError::Pool(e)
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError::Query(e)
    }
}

/// The shared pool; `None` without `DATABASE_URL`.
#[derive(Clone)]
pub struct Db(pub Option<Pool>);

impl Db {
    /// Builds the pool (no connection is opened until a request needs one).
    pub fn from_env() -> Result<Db, String> {
        let Some(url) = std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) else {
            return Ok(Db(None));
        };
        let mut config = deadpool_postgres::Config::new();
        config.url = Some(url);
        config.manager = Some(ManagerConfig { recycling_method: RecyclingMethod::Fast });
        if let Ok(max) = std::env::var("DATABASE_MAX_CONN") {
            let max: usize = max
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(format!("DATABASE_MAX_CONN: not a count: {max:?}"))?;
            config.pool = Some(PoolConfig::new(max));
        }
        let pool =
            config.create_pool(Some(Runtime::Tokio1), NoTls).map_err(|e| format!("database pool: {e}"))?;
        Ok(Db(Some(pool)))
    }

    /// Runs `sql` (prepared once per connection) and maps each row to an item.
    pub async fn items(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Item>, DbError> {
        let pool = self.0.as_ref().ok_or(DbError::NotConfigured)?;
        let client = pool.get().await?;
        let statement = client.prepare_cached(sql).await?;
        let rows = client.query(&statement, params).await?;
        Ok(rows.iter().map(Item::from_row).collect::<Result<_, _>>()?)
    }
}

const DEFAULT_MIN: i32 = 10;
const DEFAULT_MAX: i32 = 50;
const DEFAULT_LIMIT: i32 = 50;
const MAX_LIMIT: i64 = 50;

/// The raw query string; the rule in the module doc turns it into numbers.
#[derive(Deserialize)]
pub struct RangeQuery {
    min: Option<String>,
    max: Option<String>,
    limit: Option<String>,
}

fn int_param(value: Option<&str>, default: i32) -> i32 {
    match value.map(|v| v.trim().parse::<i64>()) {
        Some(Ok(n)) => n.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
        Some(Err(e)) if *e.kind() == std::num::IntErrorKind::PosOverflow => i32::MAX,
        Some(Err(e)) if *e.kind() == std::num::IntErrorKind::NegOverflow => i32::MIN,
        _ => default,
    }
}

/// `(min, max, limit)` by the rule in the module doc.
fn price_range(q: &RangeQuery) -> (i32, i32, i64) {
    let limit = i64::from(int_param(q.limit.as_deref(), DEFAULT_LIMIT)).clamp(1, MAX_LIMIT);
    (int_param(q.min.as_deref(), DEFAULT_MIN), int_param(q.max.as_deref(), DEFAULT_MAX), limit)
}

#[derive(Serialize)]
struct Items {
    items: Vec<Item>,
    count: usize,
}

/// `GET /async-db?min=&max=&limit=`.
pub async fn async_db(db: web::Data<Db>, query: web::Query<RangeQuery>) -> HttpResponse {
    let (min, max, limit) = price_range(&query);
    let items = if min > max {
        Vec::new()
    } else {
        match db.items(BY_PRICE, &[&min, &max, &limit]).await {
            Ok(items) => items,
            Err(e) => {
                eprintln!("async-db: {e}; answering an empty list");
                Vec::new()
            }
        }
    };
    HttpResponse::Ok().json(Items { count: items.len(), items })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_rule() {
        let q = |min: &str, max: &str, limit: &str| {
            let some = |v: &str| (!v.is_empty()).then(|| v.to_string());
            price_range(&RangeQuery { min: some(min), max: some(max), limit: some(limit) })
        };
        assert_eq!(q("", "", ""), (10, 50, 50));
        assert_eq!(q("5", "80", "7"), (5, 80, 7));
        assert_eq!(q("x", "1.5", "0"), (10, 50, 1));
        assert_eq!(q("-99999999999999999999", "99999999999", "51"), (i32::MIN, i32::MAX, 50));
    }
}
