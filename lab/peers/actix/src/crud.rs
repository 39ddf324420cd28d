//! HttpArena's crud resource, `/crud/items`, as actix users write one:
//! `web::Query`, `web::Path` and `web::Json` extractors, the shared
//! deadpool-postgres pool of [`crate::items`], and a moka cache.
//!
//! - `GET /crud/items?category=&page=&limit=`: one page of a category by id,
//!   `{"items":[...],"total":<items in this page>,"page":P,"limit":L}`;
//!   defaults `electronics`, 1, 10; `limit` above 50 is cut to 50; a `page`
//!   or `limit` that is not a positive integer is `400` (peregrine-tfb's
//!   rule).
//! - `GET /crud/items/{id}`: cache-aside through a `moka::future::Cache`
//!   shared by every worker, entries expiring 200 ms after insertion
//!   (`time_to_live`: HttpArena's absolute expiry); `X-Cache: MISS` when
//!   read from the database, `HIT` from the cache; `404` when absent.
//! - `POST /crud/items` with `{id,name,category,price,quantity}`: upsert,
//!   `201` with the stored item; the cached entry is invalidated.
//! - `PUT /crud/items/{id}` with `{name,price,quantity}` (`category`
//!   optional): `200` with the updated item, the cached entry invalidated so
//!   the next GET on any worker is a MISS; `404` when absent.
//!
//! Bad input is actix's: an `{id}` that is not an `i32` is `404` (its path
//! extractor), a body that is not JSON or has the wrong shape is `400`,
//! one over 64 KiB `413`, one without `Content-Type: application/json`
//! `400`; the errors are JSON (`{"error":"..."}`) through `JsonConfig`'s
//! error handler, as actix's documentation shows. An `id` below 1 in a POST
//! is `422`. A database failure is `503` (no connection) or `500`.

use std::sync::Arc;
use std::time::Duration;

use actix_web::error::InternalError;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse, ResponseError};
use moka::future::Cache;
use serde::{Deserialize, Serialize};

use crate::items::{item_columns, Db, DbError, Item};

/// How long a cached item is served (HttpArena: 200 ms, absolute).
const CACHE_TTL: Duration = Duration::from_millis(200);
/// Entries the cache holds at most (the profile reads ids 1..=50,000).
const CACHE_CAPACITY: u64 = 100_000;
/// Largest JSON body accepted by POST and PUT.
pub const MAX_BODY: usize = 64 * 1024;
const DEFAULT_CATEGORY: &str = "electronics";
const DEFAULT_LIMIT: i64 = 10;
const MAX_LIMIT: i64 = 50;

const LIST: &str =
    concat!("SELECT ", item_columns!(), " FROM items WHERE category = $1 ORDER BY id LIMIT $2 OFFSET $3");
const ONE: &str = concat!("SELECT ", item_columns!(), " FROM items WHERE id = $1");
/// Created items are active, untagged and unrated; an existing row keeps
/// those columns.
const UPSERT: &str = concat!(
    "INSERT INTO items (",
    item_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, true, '[]', 0, 0) \
     ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, category = EXCLUDED.category, \
     price = EXCLUDED.price, quantity = EXCLUDED.quantity RETURNING ",
    item_columns!()
);
const UPDATE: &str = concat!(
    "UPDATE items SET name = $2, price = $3, quantity = $4, category = COALESCE($5, category) \
     WHERE id = $1 RETURNING ",
    item_columns!()
);

/// The item cache, shared by every worker (moka is thread-safe).
pub type ItemCache = Cache<i32, Arc<Item>>;

/// A new cache with crud's expiry.
pub fn new_cache() -> ItemCache {
    Cache::builder().max_capacity(CACHE_CAPACITY).time_to_live(CACHE_TTL).build()
}

/// `web::Json`'s limits and JSON error bodies for the resource.
fn json_config() -> web::JsonConfig {
    web::JsonConfig::default().limit(MAX_BODY).error_handler(|err, _req| {
        let response = error(err.status_code(), &err.to_string());
        InternalError::from_response(err, response).into()
    })
}

fn error(status: StatusCode, message: &str) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({ "error": message }))
}

fn db_error(e: DbError) -> HttpResponse {
    eprintln!("crud: {e}");
    match e {
        DbError::Query(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "database query failed"),
        DbError::NotConfigured | DbError::Pool(_) => {
            error(StatusCode::SERVICE_UNAVAILABLE, "database unavailable")
        }
    }
}

/// The list's raw query; [`list_params`] applies the rule.
#[derive(Deserialize)]
pub struct ListQuery {
    category: Option<String>,
    page: Option<String>,
    limit: Option<String>,
}

fn positive(value: Option<&str>, name: &str, default: i64) -> Result<i64, String> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(i64::from(n)),
            _ => Err(format!("{name} must be an integer from 1 to 4294967295")),
        },
    }
}

/// `(category, page, limit)` by the rule in the module doc.
fn list_params(q: &ListQuery) -> Result<(&str, i64, i64), String> {
    let category = q.category.as_deref().filter(|c| !c.is_empty()).unwrap_or(DEFAULT_CATEGORY);
    let page = positive(q.page.as_deref(), "page", 1)?;
    let limit = positive(q.limit.as_deref(), "limit", DEFAULT_LIMIT)?.min(MAX_LIMIT);
    Ok((category, page, limit))
}

#[derive(Serialize)]
struct Page {
    items: Vec<Item>,
    total: usize,
    page: i64,
    limit: i64,
}

/// `GET /crud/items`.
pub async fn list(db: web::Data<Db>, query: web::Query<ListQuery>) -> HttpResponse {
    let (category, page, limit) = match list_params(&query) {
        Ok(p) => p,
        Err(why) => return error(StatusCode::BAD_REQUEST, &why),
    };
    // page <= u32::MAX and limit <= 50: the offset cannot overflow.
    let offset = (page - 1) * limit;
    match db.items(LIST, &[&category, &limit, &offset]).await {
        Ok(items) => HttpResponse::Ok().json(Page { total: items.len(), items, page, limit }),
        Err(e) => db_error(e),
    }
}

/// `GET /crud/items/{id}`: cache-aside.
pub async fn get(db: web::Data<Db>, cache: web::Data<ItemCache>, id: web::Path<i32>) -> HttpResponse {
    let id = id.into_inner();
    if let Some(item) = cache.get(&id).await {
        return HttpResponse::Ok().insert_header(("X-Cache", "HIT")).json(&*item);
    }
    match db.items(ONE, &[&id]).await {
        Ok(mut rows) => match rows.pop() {
            Some(item) => {
                let item = Arc::new(item);
                cache.insert(id, item.clone()).await;
                HttpResponse::Ok().insert_header(("X-Cache", "MISS")).json(&*item)
            }
            None => error(StatusCode::NOT_FOUND, "no such item"),
        },
        Err(e) => db_error(e),
    }
}

/// The body of `POST /crud/items`.
#[derive(Deserialize)]
pub struct NewItem {
    id: i32,
    name: String,
    category: String,
    price: i32,
    quantity: i32,
}

/// The body of `PUT /crud/items/{id}`.
#[derive(Deserialize)]
pub struct ItemUpdate {
    name: String,
    price: i32,
    quantity: i32,
    #[serde(default)]
    category: Option<String>,
}

/// `POST /crud/items`: upsert, `201`.
pub async fn create(
    db: web::Data<Db>,
    cache: web::Data<ItemCache>,
    body: web::Json<NewItem>,
) -> HttpResponse {
    let item = body.into_inner();
    if item.id < 1 {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "id must be at least 1");
    }
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&item.id, &item.name, &item.category, &item.price, &item.quantity];
    match db.items(UPSERT, &params).await {
        Ok(mut rows) => {
            cache.invalidate(&item.id).await;
            match rows.pop() {
                Some(stored) => HttpResponse::Created().json(stored),
                None => error(StatusCode::INTERNAL_SERVER_ERROR, "upsert returned no row"),
            }
        }
        Err(e) => db_error(e),
    }
}

/// `PUT /crud/items/{id}`: update, `200`, or `404`.
pub async fn update(
    db: web::Data<Db>,
    cache: web::Data<ItemCache>,
    id: web::Path<i32>,
    body: web::Json<ItemUpdate>,
) -> HttpResponse {
    let id = id.into_inner();
    let u = body.into_inner();
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&id, &u.name, &u.price, &u.quantity, &u.category];
    let result = db.items(UPDATE, &params).await;
    // Invalidate even when absent or failed: nothing to lose.
    cache.invalidate(&id).await;
    match result {
        Ok(mut rows) => match rows.pop() {
            Some(item) => HttpResponse::Ok().json(item),
            None => error(StatusCode::NOT_FOUND, "no such item"),
        },
        Err(e) => db_error(e),
    }
}

/// The two resources, with their JSON limits (a `web::resource` per path,
/// so another method on it is a `405`).
pub fn services(cfg: &mut web::ServiceConfig) {
    cfg.app_data(json_config())
        .service(web::resource("/crud/items").route(web::get().to(list)).route(web::post().to(create)))
        .service(web::resource("/crud/items/{id}").route(web::get().to(get)).route(web::put().to(update)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_rule() {
        let q = |page: Option<&str>, limit: Option<&str>| ListQuery {
            category: None,
            page: page.map(String::from),
            limit: limit.map(String::from),
        };
        assert_eq!(list_params(&q(None, None)), Ok(("electronics", 1, 10)));
        assert_eq!(list_params(&q(Some("3"), Some("500"))), Ok(("electronics", 3, 50)));
        for (page, limit) in [("0", "5"), ("-1", "5"), ("x", "5"), ("99999999999", "5"), ("1", "0")] {
            assert!(list_params(&q(Some(page), Some(limit))).is_err(), "page={page} limit={limit}");
        }
    }
}
