//! [`Error`], the one error type of both pools: what kind of failure it was
//! (the part an HTTP server acts on), the SQLSTATE code when the database
//! sent one (the part an application acts on: a unique-key violation is not
//! a syntax error), and the driver's own error as [`std::error::Error::source`].
//!
//! This module owns the rule that turns a failure into an HTTP status
//! ([`Error::http_status`]); `impl From<db::Error> for peregrine::Error`
//! uses it, so there is one place that decides 503 against 500. How a
//! driver's errors are classified lives with the driver: the SQLSTATE
//! grouping of PostgreSQL in `pg::wire::error`, SQLite's result codes in
//! [`super::sqlite`].

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Why a database call failed, grouped by how an HTTP server should answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No connection is up, the connection was lost mid-call, or the server
    /// refused service (shutting down, too many connections, locked file).
    Unavailable,
    /// The call did not finish within the pool's timeout.
    Timeout,
    /// The database answered with an error for this query, or its result did
    /// not have the expected shape (row count, column type).
    Query,
    /// The pool was configured wrongly (malformed URL, unopenable path).
    Config,
}

impl ErrorKind {
    /// A short description that reveals nothing about the query, fit for
    /// a client.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Unavailable => "database unavailable",
            ErrorKind::Timeout => "database call timed out",
            ErrorKind::Query => "database query failed",
            ErrorKind::Config => "database misconfigured",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A five-character SQLSTATE code (`23505`), as PostgreSQL sends it and as
/// the SQL standard defines its classes: the first two characters are the
/// class (`23`: integrity constraint violation).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SqlState([u8; 5]);

impl SqlState {
    /// `23000`: integrity constraint violation (the class; SQLite constraint
    /// failures without a more specific code map here).
    pub const INTEGRITY_CONSTRAINT_VIOLATION: SqlState = SqlState(*b"23000");
    /// `23502`: a `NOT NULL` column got a NULL.
    pub const NOT_NULL_VIOLATION: SqlState = SqlState(*b"23502");
    /// `23503`: a foreign key points nowhere.
    pub const FOREIGN_KEY_VIOLATION: SqlState = SqlState(*b"23503");
    /// `23505`: a unique or primary key already exists.
    pub const UNIQUE_VIOLATION: SqlState = SqlState(*b"23505");
    /// `23514`: a `CHECK` constraint failed.
    pub const CHECK_VIOLATION: SqlState = SqlState(*b"23514");
    /// `22012`: division by zero.
    pub const DIVISION_BY_ZERO: SqlState = SqlState(*b"22012");
    /// `25P02`: in failed SQL transaction: an earlier statement of the
    /// transaction failed, so the server refuses the rest until `ROLLBACK`.
    pub const IN_FAILED_SQL_TRANSACTION: SqlState = SqlState(*b"25P02");
    /// `40001`: serialization failure; retrying the transaction can succeed.
    pub const SERIALIZATION_FAILURE: SqlState = SqlState(*b"40001");
    /// `40P01`: deadlock detected; retrying the transaction can succeed.
    pub const DEADLOCK_DETECTED: SqlState = SqlState(*b"40P01");
    /// `42601`: syntax error.
    pub const SYNTAX_ERROR: SqlState = SqlState(*b"42601");
    /// `42P01`: undefined table.
    pub const UNDEFINED_TABLE: SqlState = SqlState(*b"42P01");
    /// `42703`: undefined column.
    pub const UNDEFINED_COLUMN: SqlState = SqlState(*b"42703");
    /// `53300`: too many connections.
    pub const TOO_MANY_CONNECTIONS: SqlState = SqlState(*b"53300");
    /// `57014`: query canceled (in practice by `statement_timeout`).
    pub const QUERY_CANCELED: SqlState = SqlState(*b"57014");
    /// `57P01`: the server is shutting down (admin shutdown).
    pub const ADMIN_SHUTDOWN: SqlState = SqlState(*b"57P01");

    /// Parses a code: exactly five ASCII digits or upper-case letters.
    pub fn new(code: &str) -> Option<SqlState> {
        let bytes: [u8; 5] = code.as_bytes().try_into().ok()?;
        bytes.iter().all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()).then_some(SqlState(bytes))
    }

    /// The code, e.g. `"23505"`.
    pub fn as_str(&self) -> &str {
        // `new` admits ASCII only, so this never falls back.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// The class: the first two characters (`"23"` for every integrity
    /// constraint violation).
    pub fn class(&self) -> &str {
        self.as_str().get(..2).unwrap_or_default()
    }
}

impl fmt::Display for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SqlState({})", self.as_str())
    }
}

/// The cause of an [`Error`]: the driver's error, shared so that [`Error`]
/// stays `Clone` (one failed batch answers many callers).
type Source = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A failed database call: its [`ErrorKind`], a message for logs, the
/// SQLSTATE code when the database sent one, and the underlying error.
///
/// Two errors are equal when kind, code and message are; the source is not
/// compared.
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    code: Option<SqlState>,
    message: Cow<'static, str>,
    source: Option<Source>,
}

impl Error {
    /// An error of `kind` with a message for logs (may be empty).
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Error {
        Error { kind, code: None, message: message.into(), source: None }
    }

    /// [`ErrorKind::Unavailable`] without further detail.
    pub fn unavailable() -> Error {
        Error::new(ErrorKind::Unavailable, "")
    }

    /// [`ErrorKind::Timeout`].
    pub fn timeout() -> Error {
        Error::new(ErrorKind::Timeout, "")
    }

    /// [`ErrorKind::Query`] with `message`.
    pub fn query(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(ErrorKind::Query, message)
    }

    /// [`ErrorKind::Config`] with `message`.
    pub fn config(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(ErrorKind::Config, message)
    }

    /// The same error with SQLSTATE `code`.
    pub fn with_code(mut self, code: SqlState) -> Error {
        self.code = Some(code);
        self
    }

    /// The same error caused by `source` (any error, or a boxed one).
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Error {
        self.source = Some(Arc::from(source.into()));
        self
    }

    /// The same error with `context` in front of its message ("preparing
    /// ...: message").
    pub fn context(mut self, context: impl fmt::Display) -> Error {
        self.message = if self.message.is_empty() {
            context.to_string().into()
        } else {
            format!("{context}: {}", self.message).into()
        };
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The SQLSTATE code, when the database sent one (PostgreSQL always
    /// does for server errors; SQLite errors carry one only for constraint
    /// violations, see [`super::sqlite`]).
    pub fn code(&self) -> Option<SqlState> {
        self.code
    }

    /// The message, for logs: the server's text for query errors, empty
    /// when the kind says it all.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// HTTP status a server should answer with when a request failed with
    /// this error: 503 for transient outages (`Unavailable`, `Timeout`),
    /// since retrying later can succeed, and 500 for everything else.
    pub fn http_status(&self) -> u16 {
        if self.is_transient() {
            503
        } else {
            500
        }
    }

    /// True when the failure is about the database's availability rather
    /// than the query, so the same call may succeed later.
    pub fn is_transient(&self) -> bool {
        matches!(self.kind, ErrorKind::Unavailable | ErrorKind::Timeout)
    }
}

impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.kind == other.kind && self.code == other.code && self.message == other.message
    }
}

impl Eq for Error {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind.as_str())?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        if let Some(code) = self.code {
            write!(f, " (SQLSTATE {code})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn transient_errors_are_503() {
        assert_eq!(Error::unavailable().http_status(), 503);
        assert_eq!(Error::timeout().http_status(), 503);
        assert_eq!(Error::query("x").http_status(), 500);
        assert_eq!(Error::config("x").http_status(), 500);
        assert_eq!(Error::query("dup").with_code(SqlState::UNIQUE_VIOLATION).http_status(), 500);
    }

    #[test]
    fn sqlstate_parses_only_five_code_characters() {
        let code = SqlState::new("23505").expect("valid");
        assert_eq!(code, SqlState::UNIQUE_VIOLATION);
        assert_eq!((code.as_str(), code.class()), ("23505", "23"));
        assert_eq!(SqlState::new("40P01"), Some(SqlState::DEADLOCK_DETECTED));
        for bad in ["", "2350", "235050", "2350x", "23 05", "235é"] {
            assert_eq!(SqlState::new(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn errors_keep_code_and_source() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer");
        let err = Error::unavailable().context("reading from server").with_source(io);
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert_eq!(err.to_string(), "database unavailable: reading from server");
        let source = err.source().expect("source kept");
        assert_eq!(source.to_string(), "reset by peer");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        // Clones share the source.
        assert!(err.clone().source().is_some());

        let dup = Error::query("duplicate key").with_code(SqlState::UNIQUE_VIOLATION);
        assert_eq!(dup.code(), Some(SqlState::UNIQUE_VIOLATION));
        assert_eq!(dup.to_string(), "database query failed: duplicate key (SQLSTATE 23505)");
        assert_ne!(dup, Error::query("duplicate key"), "the code is part of equality");
        assert_eq!(Error::timeout().to_string(), "database call timed out");
    }

    #[test]
    fn http_errors_follow_the_db_rule_and_hide_query_details() {
        use crate::http::StatusCode;
        let cases = [
            (Error::unavailable().context("reading from server: reset"), 503, "database unavailable"),
            (Error::timeout(), 503, "database call timed out"),
            (Error::query("ERROR: secret_table").with_code(SqlState::UNDEFINED_TABLE), 500, "database error"),
            (Error::config("bad URL"), 500, "database error"),
        ];
        for (db, status, message) in cases {
            assert_eq!(db.http_status(), status);
            let http = crate::Error::from(db);
            assert_eq!(http.status(), StatusCode::from_u16(status).expect("valid status"));
            assert_eq!(http.message(), message);
        }
    }
}
