//! HttpArena's json processing, `GET /json/{count}?m=M`: the first `count`
//! items of `dataset.json` (loaded once at start, shared by the workers),
//! each with `total = price * quantity * m`, serialized per request as
//! `{"items":[...],"count":N}`.
//!
//! The json-comp profile is the same resource with `Accept-Encoding: gzip,
//! br`: the route is wrapped in actix's own `Compress` middleware (see
//! `main`), which compresses per response (brotli quality 3, gzip level 1:
//! actix-http's settings) and leaves the body alone without
//! `Accept-Encoding`.
//!
//! Rules as peregrine-tfb's: `count` 0 is `400`, above the dataset's 50 it is
//! cut to 50; `m` defaults to 1 and must be an integer (else actix's `Query`
//! extractor answers `400`). A `count` that is not an integer is actix's
//! path-extractor answer, `404`.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};

/// The dataset, embedded from the copy peregrine-tfb ships.
const DATASET_JSON: &str = include_str!("../../../../crates/peregrine-tfb/data/dataset.json");

/// An item's nested rating.
#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
pub struct Rating {
    pub score: i64,
    pub count: i64,
}

/// One item of `dataset.json`.
#[derive(Debug, Deserialize)]
pub struct DatasetItem {
    id: i64,
    name: String,
    category: String,
    price: i64,
    quantity: i64,
    active: bool,
    tags: Vec<String>,
    rating: Rating,
}

/// The dataset, parsed once.
pub type Dataset = Vec<DatasetItem>;

/// Parses the embedded dataset.
pub fn load() -> Result<Dataset, serde_json::Error> {
    serde_json::from_str(DATASET_JSON)
}

/// One item as answered: the dataset's fields plus `total`.
#[derive(Serialize)]
struct Priced<'a> {
    id: i64,
    name: &'a str,
    category: &'a str,
    price: i64,
    quantity: i64,
    active: bool,
    tags: &'a [String],
    rating: Rating,
    total: i64,
}

#[derive(Serialize)]
struct Processed<'a> {
    items: Vec<Priced<'a>>,
    count: usize,
}

#[derive(Deserialize)]
pub struct Multiplier {
    m: Option<i64>,
}

fn process(dataset: &[DatasetItem], count: usize, m: i64) -> Processed<'_> {
    let items: Vec<Priced<'_>> = dataset[..count.min(dataset.len())]
        .iter()
        .map(|i| Priced {
            id: i.id,
            name: &i.name,
            category: &i.category,
            price: i.price,
            quantity: i.quantity,
            active: i.active,
            tags: &i.tags,
            rating: i.rating,
            total: i.price.saturating_mul(i.quantity).saturating_mul(m),
        })
        .collect();
    Processed { count: items.len(), items }
}

/// `GET /json/{count}?m=M`.
pub async fn json_count(
    dataset: web::Data<Dataset>,
    count: web::Path<usize>,
    query: web::Query<Multiplier>,
) -> HttpResponse {
    let count = count.into_inner();
    if count == 0 {
        return HttpResponse::BadRequest().body("count must be at least 1");
    }
    HttpResponse::Ok().json(process(&dataset, count, query.m.unwrap_or(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_counts() {
        let dataset = load().expect("the embedded dataset parses");
        assert_eq!(dataset.len(), 50);
        let p = process(&dataset, 5, 2);
        assert_eq!((p.count, p.items.len()), (5, 5));
        assert_eq!(p.items[0].total, dataset[0].price * dataset[0].quantity * 2);
        assert_eq!(process(&dataset, 500, 1).count, 50);
    }
}
