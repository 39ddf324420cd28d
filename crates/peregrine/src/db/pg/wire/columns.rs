//! Result-column descriptions: a statement's column types and names from
//! its `RowDescription`, and the type of an oid. Shared by start-up (which
//! prepares the registered statements) and the driver (which prepares SQL
//! text on first use), so neither imports the other.

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::RowDescriptionBody;
use postgres_types::{Kind, Type};

use super::io_error;
use crate::db::pg::row::Columns;
use crate::db::Error;

/// The types and names of a statement's result columns.
pub(super) fn describe_columns(body: &RowDescriptionBody) -> Result<Columns, Error> {
    let mut types = Vec::new();
    let mut names = Vec::new();
    let mut fields = body.fields();
    while let Some(field) = fields.next().map_err(|e| io_error("bad RowDescription", e))? {
        types.push(type_of(field.type_oid()));
        names.push(field.name().to_string());
    }
    Ok(Columns { types: types.into(), names: names.into() })
}

/// The type for `oid`; types outside the built-in catalog (enums, domains,
/// extensions) get a placeholder that only raw-accepting types decode.
pub(super) fn type_of(oid: u32) -> Type {
    Type::from_oid(oid).unwrap_or_else(|| Type::new(format!("oid{oid}"), oid, Kind::Simple, String::new()))
}
