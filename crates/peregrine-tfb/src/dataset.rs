//! The HttpArena JSON-processing dataset, parsed once at start-up.

use std::rc::Rc;

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

/// The items served by `/json/{count}`, from `data/dataset.json`.
const DATASET_JSON: &str = include_str!("../data/dataset.json");

#[derive(Debug, Deserialize, Serialize)]
pub struct Rating {
    pub score: i64,
    pub count: i64,
}

#[derive(Debug, Deserialize)]
pub struct Item {
    pub id: i64,
    pub name: String,
    pub category: String,
    pub price: i64,
    pub quantity: i64,
    pub active: bool,
    pub tags: Vec<String>,
    pub rating: Rating,
}

/// An item with its computed `total`, borrowing the loaded data.
#[derive(Serialize)]
struct Priced<'a> {
    id: i64,
    name: &'a str,
    category: &'a str,
    price: i64,
    quantity: i64,
    active: bool,
    tags: &'a [String],
    rating: &'a Rating,
    total: i64,
}

/// `{"items":[...],"count":N}` for the first `count` items with multiplier
/// `m`, serialized per request without building an intermediate list.
pub struct Processed {
    pub items: Rc<Vec<Item>>,
    pub count: usize,
    pub m: i64,
}

impl Serialize for Processed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let items = &self.items[..self.count.min(self.items.len())];
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("items", &PricedItems { items, m: self.m })?;
        map.serialize_entry("count", &items.len())?;
        map.end()
    }
}

struct PricedItems<'a> {
    items: &'a [Item],
    m: i64,
}

impl Serialize for PricedItems<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.m;
        s.collect_seq(self.items.iter().map(|i| Priced {
            id: i.id,
            name: &i.name,
            category: &i.category,
            price: i.price,
            quantity: i.quantity,
            active: i.active,
            tags: &i.tags,
            rating: &i.rating,
            total: i.price.saturating_mul(i.quantity).saturating_mul(m),
        }))
    }
}

/// Parses the embedded dataset.
pub fn load() -> Result<Vec<Item>, serde_json::Error> {
    serde_json::from_str(DATASET_JSON)
}
