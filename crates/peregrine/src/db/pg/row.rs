//! Result rows of the wire-protocol driver: [`Row`], one binary-format
//! `DataRow` of a prepared statement, decoded column by column on demand.
//!
//! A row keeps the message body it arrived in (a reference-counted slice of
//! the connection's read buffer, so no copy and no per-column allocation)
//! and the statement's column types, shared by every row of that statement.

use std::rc::Rc;

use bytes::Bytes;
use postgres_types::{FromSql, Type};

use crate::db::Error;

/// One row returned by a prepared statement.
///
/// Columns are addressed by position (0-based, in `SELECT` order) and
/// decoded with [`FromSql`], so any type tokio-postgres
/// decodes (`i32`, `String`, `&str`, `Option<T>`, arrays, ...) works here.
#[derive(Clone)]
pub struct Row {
    columns: Rc<[Type]>,
    /// The `DataRow` fields: per column an `i32` length (-1 for NULL)
    /// followed by that many bytes.
    body: Bytes,
}

impl Row {
    pub(super) fn new(columns: Rc<[Type]>, body: Bytes) -> Row {
        Row { columns, body }
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// True for a row without columns.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The PostgreSQL types of the columns, in order.
    pub fn column_types(&self) -> &[Type] {
        &self.columns
    }

    /// Decodes column `idx` as `T`. Fails with [`ErrorKind::Query`](crate::db::ErrorKind::Query) when the
    /// column does not exist, `T` does not accept its type, or the value is
    /// NULL and `T` is not an `Option`.
    pub fn try_get<'a, T: FromSql<'a>>(&'a self, idx: usize) -> Result<T, Error> {
        let Some(ty) = self.columns.get(idx) else {
            return Err(Error::query(format!(
                "column {idx} does not exist: the row has {} columns",
                self.columns.len()
            )));
        };
        if !T::accepts(ty) {
            return Err(Error::query(format!(
                "column {idx} has type {ty}, which {} cannot decode",
                std::any::type_name::<T>()
            )));
        }
        let raw = self.raw(idx)?;
        T::from_sql_nullable(ty, raw)
            .map_err(|e| Error::query(format!("decoding column {idx}: {e}")).with_source(e))
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
        f.debug_struct("Row").field("columns", &self.columns).field("bytes", &self.body.len()).finish()
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
        Row::new(types.into(), Bytes::from(body))
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
    fn truncated_rows_are_errors_not_panics() {
        let r =
            Row::new([Type::INT4, Type::INT4].into(), Bytes::from_static(&[0, 0, 0, 4, 0, 0, 0, 1, 0, 0]));
        assert_eq!(r.get::<i32>(0), 1);
        assert_eq!(r.try_get::<i32>(1).err().map(|e| e.kind()), Some(ErrorKind::Query));
    }
}
