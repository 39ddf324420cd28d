//! HttpArena's `GET /async-db?min=&max=&limit=`: items whose price lies in
//! a range, from the `items` table.
//!
//! Parameter rule (like TFB's for `queries`, never an error, since the
//! profile's answer shape has no error form): `min` and `max` default to 10
//! and 50, `limit` to 50. A value that is missing, empty or not an integer
//! takes its default; an integer beyond the `integer` column's range is
//! saturated to it; `limit` is then clamped to 1..=50. Negative bounds are
//! honoured (they are just bounds), and `min > max` is an empty range.
//! An empty range and a database failure both answer
//! `{"items":[],"count":0}` with `200`; the failure is logged.

use peregrine::{Error, FromRequest, Json, Request, State};
use serde::Serialize;

use crate::store::Item;
use crate::App;

const DEFAULT_MIN: i32 = 10;
const DEFAULT_MAX: i32 = 50;
const DEFAULT_LIMIT: i64 = 50;
const MAX_LIMIT: i64 = 50;

/// The query parameters by the rule in the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriceRange {
    pub min: i32,
    pub max: i32,
    pub limit: i64,
}

/// An integer parameter: its default when missing, empty or not an
/// integer; saturated to `i32` when out of range.
fn int_param(value: Option<&str>, default: i32) -> i32 {
    match value.map(|v| v.trim().parse::<i64>()) {
        Some(Ok(n)) => n.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
        Some(Err(e)) if *e.kind() == std::num::IntErrorKind::PosOverflow => i32::MAX,
        Some(Err(e)) if *e.kind() == std::num::IntErrorKind::NegOverflow => i32::MIN,
        _ => default,
    }
}

impl PriceRange {
    pub fn parse(min: Option<&str>, max: Option<&str>, limit: Option<&str>) -> PriceRange {
        PriceRange {
            min: int_param(min, DEFAULT_MIN),
            max: int_param(max, DEFAULT_MAX),
            limit: i64::from(int_param(limit, DEFAULT_LIMIT as i32)).clamp(1, MAX_LIMIT),
        }
    }
}

impl<S> FromRequest<S> for PriceRange {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        Ok(PriceRange::parse(
            req.query("min").as_deref(),
            req.query("max").as_deref(),
            req.query("limit").as_deref(),
        ))
    }
}

/// `{"items":[...],"count":N}`.
#[derive(Serialize)]
pub struct Items {
    pub items: Vec<Item>,
    pub count: usize,
}

pub async fn async_db(State(app): State<App>, range: PriceRange) -> Json<Items> {
    if range.min > range.max {
        return Json(Items { items: Vec::new(), count: 0 });
    }
    let items = match app.store.items_by_price(range.min, range.max, range.limit).await {
        Ok(items) => items,
        Err(e) => {
            tracing::warn!(error = %e, "async-db query failed; answering an empty list");
            Vec::new()
        }
    };
    Json(Items { count: items.len(), items })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_rule() {
        let p = |min, max, limit| PriceRange::parse(min, max, limit);
        assert_eq!(p(None, None, None), PriceRange { min: 10, max: 50, limit: 50 });
        assert_eq!(p(Some("5"), Some("80"), Some("7")), PriceRange { min: 5, max: 80, limit: 7 });
        assert_eq!(p(Some(""), Some("x"), Some("1.5")), PriceRange { min: 10, max: 50, limit: 50 });
        assert_eq!(
            p(Some("-3"), Some("99999999999"), Some("0")),
            PriceRange { min: -3, max: i32::MAX, limit: 1 }
        );
        assert_eq!(
            p(
                Some("-99999999999999999999999"),
                Some("99999999999999999999999"),
                Some("99999999999999999999")
            ),
            PriceRange { min: i32::MIN, max: i32::MAX, limit: 50 }
        );
        assert_eq!(p(None, None, Some("-7")).limit, 1);
        assert_eq!(p(None, None, Some("51")).limit, 50);
    }
}
