//! Result rows of the wire-protocol driver: [`Row`], one binary-format
//! `DataRow` of a prepared statement, decoded column by column on demand.
//!
//! A row keeps the message body it arrived in (a reference-counted slice of
//! the connection's read buffer, so no copy and no per-column allocation)
//! and the statement's columns (types and names from the `RowDescription`
//! the statement was described with), shared by every row of that statement.

use std::rc::Rc;

use bytes::Bytes;
use postgres_types::{FromSql, Type};

use crate::db::Error;

/// The result columns of a prepared statement: their types and names, in
/// `SELECT` order, as the server described them when the statement was
/// prepared on the connection.
#[derive(Debug, Default)]
pub(crate) struct Columns {
    pub(crate) types: Box<[Type]>,
    pub(crate) names: Box<[String]>,
}

impl Columns {
    /// Position of the column called `name`: an exact match first, else
    /// the first ASCII case-insensitive one (the server folds unquoted
    /// identifiers to lower case, so `"ID"` finds `id`).
    fn position(&self, name: &str) -> Option<usize> {
        self.names
            .iter()
            .position(|n| n == name)
            .or_else(|| self.names.iter().position(|n| n.eq_ignore_ascii_case(name)))
    }
}

/// One row returned by a prepared statement.
///
/// Columns are addressed by position (0-based, in `SELECT` order) with
/// [`Row::get`] or by name with [`Row::get_by_name`], and decoded with
/// [`FromSql`], so any type tokio-postgres decodes (`i32`, `String`,
/// `&str`, `Option<T>`, arrays, ...) works here. Looking a name up walks
/// the statement's column names (a few string compares); by position is
/// the cheaper form for hot paths.
#[derive(Clone)]
pub struct Row {
    columns: Rc<Columns>,
    /// The `DataRow` fields: per column an `i32` length (-1 for NULL)
    /// followed by that many bytes.
    body: Bytes,
}

impl Row {
    pub(super) fn new(columns: Rc<Columns>, body: Bytes) -> Row {
        Row { columns, body }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.columns.types.len()
    }

    /// True for a row without columns.
    pub fn is_empty(&self) -> bool {
        self.columns.types.is_empty()
    }

    /// The PostgreSQL types of the columns, in order.
    pub fn column_types(&self) -> &[Type] {
        &self.columns.types
    }

    /// The names of the columns, in order (`?column?` for an unnamed
    /// expression, as the server reports it).
    pub fn column_names(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.columns.names.iter().map(String::as_str)
    }

    /// Position of the column called `name` (exact match first, then ASCII
    /// case-insensitive; the first of duplicate names wins), or `None`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.position(name)
    }

    /// Decodes the column called `name` as `T`: [`Row::try_get`] after
    /// [`Row::column_index`]. A missing column is an
    /// [`ErrorKind::Query`](crate::db::ErrorKind::Query) error naming it.
    pub fn try_get_by_name<'a, T: FromSql<'a>>(&'a self, name: &str) -> Result<T, Error> {
        let Some(idx) = self.columns.position(name) else {
            return Err(Error::query(format!(
                "no column named {name:?}: the row has {:?}",
                self.columns.names
            )));
        };
        self.try_get(idx).map_err(|e| e.context(format_args!("column {name:?}")))
    }

    /// [`Row::try_get_by_name`] for columns whose shape the caller knows.
    ///
    /// # Panics
    ///
    /// When [`Row::try_get_by_name`] would fail.
    pub fn get_by_name<'a, T: FromSql<'a>>(&'a self, name: &str) -> T {
        match self.try_get_by_name(name) {
            Ok(value) => value,
            Err(e) => panic!("Row::get_by_name({name:?}): {e}"),
        }
    }

    /// Decodes column `idx` as `T`. Fails with [`ErrorKind::Query`](crate::db::ErrorKind::Query) when the
    /// column does not exist, `T` does not accept its type, or the value is
    /// NULL and `T` is not an `Option`.
    pub fn try_get<'a, T: FromSql<'a>>(&'a self, idx: usize) -> Result<T, Error> {
        let ty = self.column_type_for::<T>(idx)?;
        let raw = self.raw(idx)?;
        T::from_sql_nullable(ty, raw)
            .map_err(|e| Error::query(format!("decoding column {idx}: {e}")).with_source(e))
    }

    /// The type of column `idx`, when the column exists and `T` accepts it.
    fn column_type_for<'a, T: FromSql<'a>>(&self, idx: usize) -> Result<&Type, Error> {
        let Some(ty) = self.columns.types.get(idx) else {
            return Err(Error::query(format!(
                "column {idx} does not exist: the row has {} columns",
                self.columns.types.len()
            )));
        };
        if !T::accepts(ty) {
            return Err(Error::query(format!(
                "column {idx} has type {ty}, which {} cannot decode",
                std::any::type_name::<T>()
            )));
        }
        Ok(ty)
    }

    /// [`Row::try_get`] for columns whose shape the caller knows.
    ///
    /// # Panics
    ///
    /// When [`Row::try_get`] would fail.
    pub fn get<'a, T: FromSql<'a>>(&'a self, idx: usize) -> T {
        match self.try_get(idx) {
            Ok(value) => value,
            Err(e) => panic!("Row::get({idx}): {e}"),
        }
    }

    /// Column `idx`, a text column (`text`, `varchar`, `char`, `name`, as
    /// `&str` accepts), borrowed from the row: [`Row::try_get`]`::<&str>`
    /// with the UTF-8 check made ASCII-first. Text from the server is
    /// almost always ASCII, and there `str::from_utf8` cost `/fortunes`
    /// 1,960 of its 25,788 instructions a request. NULL is an error, as
    /// for `&str`.
    pub fn try_get_str(&self, idx: usize) -> Result<&str, Error> {
        self.column_type_for::<&str>(idx)?;
        let raw = self.raw(idx)?.ok_or_else(|| Error::query(format!("decoding column {idx}: it is NULL")))?;
        crate::text::utf8(raw).ok_or_else(|| Error::query(format!("decoding column {idx}: not UTF-8")))
    }

    /// The raw bytes of column `idx` (`None` for NULL), found by walking the
    /// length prefixes: rows are narrow, so this beats building an index.
    fn raw(&self, idx: usize) -> Result<Option<&[u8]>, Error> {
        let malformed = || Error::query("malformed DataRow from the server");
        let mut rest: &[u8] = &self.body;
        for i in 0..=idx {
            let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(malformed)?;
            let len = i32::from_be_bytes(*len);
            rest = tail;
            let value = if len < 0 {
                None
            } else {
                let len = len as usize;
                if rest.len() < len {
                    return Err(malformed());
                }
                let (value, tail) = rest.split_at(len);
                rest = tail;
                Some(value)
            };
            if i == idx {
                return Ok(value);
            }
        }
        Err(malformed())
    }
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Row")
            .field("columns", &self.columns.names)
            .field("types", &self.columns.types)
            .field("bytes", &self.body.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::ErrorKind;

    fn row(fields: &[Option<&[u8]>], types: &[Type]) -> Row {
        let mut body = Vec::new();
        for field in fields {
            match field {
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(bytes) => {
                    body.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
                    body.extend_from_slice(bytes);
                }
            }
        }
        let names = (0..types.len()).map(|i| format!("c{i}")).collect();
        Row::new(Rc::new(Columns { types: types.into(), names }), Bytes::from(body))
    }

    #[test]
    fn decodes_columns_by_position() {
        let r = row(&[Some(&7i32.to_be_bytes()), None, Some(b"hi")], &[Type::INT4, Type::INT4, Type::TEXT]);
        assert_eq!(r.len(), 3);
        assert_eq!(r.get::<i32>(0), 7);
        assert_eq!(r.get::<Option<i32>>(1), None);
        assert_eq!(r.get::<&str>(2), "hi");
        assert_eq!(r.try_get::<i32>(1).err().map(|e| e.kind()), Some(ErrorKind::Query), "NULL into i32");
        assert_eq!(
            r.try_get::<String>(0).err().map(|e| e.kind()),
            Some(ErrorKind::Query),
            "int4 into String"
        );
        assert_eq!(r.try_get::<i32>(3).err().map(|e| e.kind()), Some(ErrorKind::Query), "no such column");
    }

    #[test]
    fn decodes_columns_by_name() {
        let r = row(&[Some(&7i32.to_be_bytes()), Some(b"hi")], &[Type::INT4, Type::TEXT]);
        assert_eq!(r.column_names().collect::<Vec<_>>(), ["c0", "c1"]);
        assert_eq!(r.get_by_name::<i32>("c0"), 7);
        assert_eq!(r.get_by_name::<&str>("C1"), "hi", "case-insensitive fallback");
        assert_eq!(r.column_index("c1"), Some(1));
        let missing = r.try_get_by_name::<i32>("nope").expect_err("no such column");
        assert_eq!(missing.kind(), ErrorKind::Query);
        assert!(missing.message().contains("\"nope\""), "{missing}");
        let wrong = r.try_get_by_name::<i32>("c1").expect_err("text into i32");
        assert!(wrong.message().starts_with("column \"c1\""), "{wrong}");
    }

    #[test]
    fn truncated_rows_are_errors_not_panics() {
        let columns =
            Columns { types: [Type::INT4, Type::INT4].into(), names: ["a".into(), "b".into()].into() };
        let r = Row::new(Rc::new(columns), Bytes::from_static(&[0, 0, 0, 4, 0, 0, 0, 1, 0, 0]));
        assert_eq!(r.get::<i32>(0), 1);
        assert_eq!(r.try_get::<i32>(1).err().map(|e| e.kind()), Some(ErrorKind::Query));
    }
}
