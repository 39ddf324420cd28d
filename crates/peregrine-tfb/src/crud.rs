//! HttpArena's crud resource, `/crud/items`.
//!
//! - `GET /crud/items?category=&page=&limit=`: one page of a category by
//!   id, `{"items":[...],"total":<items in this page>,"page":P,"limit":L}`.
//!   Defaults `electronics`, 1, 10 (missing or empty means the default);
//!   `limit` above 50 is cut to 50; `page` or `limit` that is not a
//!   positive integer is `400`.
//! - `GET /crud/items/{id}`: cache-aside through [`ItemCache`](crate::item_cache::ItemCache) (200 ms
//!   absolute expiry), `X-Cache: MISS` when read from the database, `HIT`
//!   from the cache; `404` when absent.
//! - `POST /crud/items` with `{id,name,category,price,quantity}`: upsert,
//!   `201` with the stored item; the cached entry is invalidated.
//! - `PUT /crud/items/{id}` with `{name,price,quantity}` (and optionally
//!   `category`): `200` with the updated item and the cached entry
//!   invalidated (the next GET, on any worker, is a MISS); `404` when absent.
//!
//! Bad input: an `{id}` that is not an integer in 1..=2147483647 is `400`.
//! A body that is not JSON (syntax error, truncated, not UTF-8) is `400`; a
//! well-formed body of the wrong shape (missing field, wrong type, number
//! out of range, `id` below 1, JSON that is not an object) is `422`; a body
//! over 64 KiB is `413`. Unknown fields are ignored, and so is the
//! `Content-Type` (the body is parsed as JSON whatever it says). A body
//! sent with a GET is ignored (the server reads it for framing only).
//! Errors are JSON, `{"error":"..."}`. A database failure is `503` (unavailable or slow) or
//! `500`, like the TFB endpoints.

use std::sync::Arc;

use peregrine::{Error, FromRequest, Json, Request, Response, State, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::item_cache::Lookup;
use crate::store::{Item, ItemUpdate, NewItem};
use crate::App;

/// Largest JSON body accepted by POST and PUT.
pub const MAX_BODY: usize = 64 * 1024;
const DEFAULT_CATEGORY: &str = "electronics";
const DEFAULT_LIMIT: i64 = 10;
const MAX_LIMIT: i64 = 50;

/// `{id}` of `/crud/items/{id}`: a positive `i32`, else `400`.
pub struct ItemId(pub i32);

impl<S> FromRequest<S> for ItemId {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        let raw = req.param("id").unwrap_or_default();
        match raw.parse::<i32>() {
            Ok(id) if id >= 1 => Ok(ItemId(id)),
            _ => Err(Error::bad_request("item id must be an integer from 1 to 2147483647")),
        }
    }
}

/// The list's query parameters.
#[derive(Debug, PartialEq, Eq)]
pub struct ListParams {
    pub category: String,
    pub page: i64,
    pub limit: i64,
}

fn positive(value: Option<&str>, name: &str, default: i64) -> Result<i64, Error> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(v) => match v.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(i64::from(n)),
            _ => Err(Error::bad_request(format!("{name} must be an integer from 1 to 4294967295"))),
        },
    }
}

impl ListParams {
    pub fn parse(
        category: Option<&str>,
        page: Option<&str>,
        limit: Option<&str>,
    ) -> Result<ListParams, Error> {
        let category = category.filter(|c| !c.is_empty()).unwrap_or(DEFAULT_CATEGORY).to_string();
        let page = positive(page, "page", 1)?;
        let limit = positive(limit, "limit", DEFAULT_LIMIT)?.min(MAX_LIMIT);
        Ok(ListParams { category, page, limit })
    }
}

impl<S> FromRequest<S> for ListParams {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        ListParams::parse(
            req.query("category").as_deref(),
            req.query("page").as_deref(),
            req.query("limit").as_deref(),
        )
    }
}

#[derive(Serialize)]
pub struct Page {
    pub items: Vec<Item>,
    pub total: usize,
    pub page: i64,
    pub limit: i64,
}

pub async fn list(State(app): State<App>, params: ListParams) -> Result<Json<Page>, Error> {
    // page <= u32::MAX and limit <= 50: the offset cannot overflow.
    let offset = (params.page - 1) * params.limit;
    let items = app.store.items_in_category(&params.category, params.limit, offset).await?;
    Ok(Json(Page { total: items.len(), items, page: params.page, limit: params.limit }))
}

fn item_response(item: &Item, status: StatusCode) -> Response {
    Response::json(item).status(status)
}

pub async fn get(State(app): State<App>, ItemId(id): ItemId) -> Result<Response, Error> {
    let fill = match app.items.get(id).await {
        Lookup::Hit(item) => return Ok(item_response(&item, StatusCode::OK).header("X-Cache", "HIT")),
        Lookup::Miss(fill) => fill,
    };
    let Some(item) = app.store.item(id).await? else {
        return Err(Error::not_found("no such item"));
    };
    let item = Arc::new(item);
    let response = item_response(&item, StatusCode::OK).header("X-Cache", "MISS");
    app.items.fill(fill, item).await;
    Ok(response)
}

/// Parses a JSON body by the rule in the module doc.
pub fn json_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    if body.len() > MAX_BODY {
        return Err(Error::payload_too_large(format!("body over {MAX_BODY} bytes")));
    }
    serde_json::from_slice(body).map_err(|e| {
        if e.is_data() {
            Error::new(StatusCode::UNPROCESSABLE_ENTITY, format!("invalid item: {e}"))
        } else {
            Error::bad_request(format!("body is not valid JSON: {e}"))
        }
    })
}

pub async fn create(State(app): State<App>, body: Vec<u8>) -> Result<Response, Error> {
    let item: NewItem = json_body(&body)?;
    if item.id < 1 {
        return Err(Error::new(StatusCode::UNPROCESSABLE_ENTITY, "id must be at least 1"));
    }
    let stored = app.store.upsert_item(&item).await?;
    app.items.invalidate(stored.id).await;
    Ok(item_response(&stored, StatusCode::CREATED))
}

pub async fn update(State(app): State<App>, ItemId(id): ItemId, body: Vec<u8>) -> Result<Response, Error> {
    let update: ItemUpdate = json_body(&body)?;
    let updated = app.store.update_item(id, &update).await?;
    // Invalidate even when absent: nothing to lose, and no stale entry
    // can survive a concurrent create.
    app.items.invalidate(id).await;
    match updated {
        Some(item) => Ok(item_response(&item, StatusCode::OK)),
        None => Err(Error::not_found("no such item")),
    }
}

/// Routes of the resource.
pub fn routes(router: peregrine::Router<App>) -> peregrine::Router<App> {
    router
        .get_async("/crud/items", list)
        .post_async("/crud/items", create)
        .get_async("/crud/items/{id}", get)
        .route_async(peregrine::Method::Put, "/crud/items/{id}", update)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_parameter_rule() {
        let ok = ListParams::parse(None, None, None).expect("defaults");
        assert_eq!(ok, ListParams { category: "electronics".into(), page: 1, limit: 10 });
        let ok = ListParams::parse(Some("office"), Some("3"), Some("500")).expect("cut");
        assert_eq!((ok.page, ok.limit), (3, 50));
        assert_eq!(ListParams::parse(Some(""), Some(""), Some("")).expect("empty").limit, 10);
        for (page, limit) in
            [("0", "5"), ("-1", "5"), ("x", "5"), ("99999999999", "5"), ("1", "0"), ("1", "1.5")]
        {
            let err = ListParams::parse(None, Some(page), Some(limit)).expect_err("bad");
            assert_eq!(err.status(), StatusCode::BAD_REQUEST, "page={page} limit={limit}");
        }
    }

    #[test]
    fn body_rule() {
        let status =
            |body: &str| json_body::<NewItem>(body.as_bytes()).map(|_| ()).map_err(|e| e.status().as_u16());
        assert_eq!(status(r#"{"id":1,"name":"a","category":"b","price":2,"quantity":3,"x":[]}"#), Ok(()));
        assert_eq!(status(r#"{"id":1,"name":"a""#), Err(400));
        assert_eq!(status("not json"), Err(400));
        assert_eq!(status(""), Err(400));
        assert_eq!(status(r#"{"id":1,"name":"a","category":"b","price":"2","quantity":3}"#), Err(422));
        assert_eq!(status(r#"{"id":1,"name":"a","category":"b","price":2}"#), Err(422));
        assert_eq!(status(r#"{"id":1,"name":"a","category":"b","price":2,"quantity":3000000000}"#), Err(422));
        assert_eq!(status("[1,2]"), Err(422));
        assert_eq!(status(&" ".repeat(MAX_BODY + 1)), Err(413));
        assert_eq!(json_body::<NewItem>(b"\xff").map(|_| ()).map_err(|e| e.status().as_u16()), Err(400));
    }
}
