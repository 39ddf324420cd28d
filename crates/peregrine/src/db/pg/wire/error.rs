//! Server errors: turning an `ErrorResponse` into [`Error`].
//!
//! This module owns the one SQLSTATE grouping of the PostgreSQL driver
//! ([`kind_for_sqlstate`]): which server errors mean the database is
//! unavailable (connection exceptions, shutdown, too many connections),
//! which mean the call ran out of time (`statement_timeout`, which the pool
//! sets to its own deadline), and which are the query's own fault. The
//! [`Error`] it builds keeps the SQLSTATE code and the whole response as a
//! [`ServerError`] source, so an application can read the constraint name
//! or the detail line without parsing messages.

use std::fmt;

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::ErrorResponseBody;

use crate::db::{Error, ErrorKind, SqlState};

/// An `ErrorResponse` from the server, the [`std::error::Error::source`]
/// of every [`Error`] built from one. Reach it with
/// `err.source().and_then(|s| s.downcast_ref::<ServerError>())`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    severity: String,
    code: Option<SqlState>,
    message: String,
    detail: Option<String>,
    hint: Option<String>,
    table: Option<String>,
    column: Option<String>,
    constraint: Option<String>,
}

impl ServerError {
    /// Reads the fields of an `ErrorResponse`; fields that fail to parse
    /// end the list (the message is never trusted to be well-formed).
    pub(super) fn parse(body: &ErrorResponseBody) -> ServerError {
        let mut error = ServerError {
            severity: String::from("ERROR"),
            code: None,
            message: String::new(),
            detail: None,
            hint: None,
            table: None,
            column: None,
            constraint: None,
        };
        let mut fields = body.fields();
        while let Ok(Some(field)) = fields.next() {
            let value = || String::from_utf8_lossy(field.value_bytes()).into_owned();
            match field.type_() {
                b'C' => error.code = SqlState::new(&value()),
                b'V' => error.severity = value(),
                b'M' => error.message = value(),
                b'D' => error.detail = Some(value()),
                b'H' => error.hint = Some(value()),
                b't' => error.table = Some(value()),
                b'c' => error.column = Some(value()),
                b'n' => error.constraint = Some(value()),
                _ => {}
            }
        }
        error
    }

    /// `ERROR`, `FATAL` or `PANIC` (not localized).
    pub fn severity(&self) -> &str {
        &self.severity
    }

    /// The SQLSTATE code (absent only from a malformed response).
    pub fn code(&self) -> Option<SqlState> {
        self.code
    }

    /// The primary message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The detail line, e.g. which key already exists.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The server's suggestion.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// The table the error is about.
    pub fn table(&self) -> Option<&str> {
        self.table.as_deref()
    }

    /// The column the error is about.
    pub fn column(&self) -> Option<&str> {
        self.column.as_deref()
    }

    /// The constraint that was violated.
    pub fn constraint(&self) -> Option<&str> {
        self.constraint.as_deref()
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.severity, self.message)
    }
}

impl std::error::Error for ServerError {}

/// Maps a server error onto [`Error`]: kind by [`kind_for_sqlstate`], the
/// code, `SEVERITY: message` as message, the response as source.
pub(super) fn map_error(body: &ErrorResponseBody) -> Error {
    from_server_error(ServerError::parse(body))
}

fn from_server_error(server: ServerError) -> Error {
    let kind = server.code.map_or(ErrorKind::Query, kind_for_sqlstate);
    let mut error = Error::new(kind, server.to_string());
    if let Some(code) = server.code {
        error = error.with_code(code);
    }
    error.with_source(server)
}

/// How a web handler should treat a server error with SQLSTATE `code`.
pub(crate) fn kind_for_sqlstate(code: SqlState) -> ErrorKind {
    let code = code.as_str();
    // 08: connection exception; 57P0x: server shutting down or terminated
    // this backend; 53300: too many connections.
    if code.starts_with("08") || code.starts_with("57P0") || code == "53300" {
        return ErrorKind::Unavailable;
    }
    // 57014: cancelled, in practice by statement_timeout, which the pool
    // sets to its own deadline.
    if code == "57014" {
        return ErrorKind::Timeout;
    }
    ErrorKind::Query
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use postgres_protocol::message::backend::Message;
    use std::error::Error as _;

    fn sqlstate(code: &str) -> SqlState {
        SqlState::new(code).expect("valid SQLSTATE")
    }

    #[test]
    fn sqlstates_group_by_what_a_handler_should_answer() {
        for code in ["08006", "57P01", "57P03", "53300"] {
            assert_eq!(kind_for_sqlstate(sqlstate(code)), ErrorKind::Unavailable, "{code}");
        }
        assert_eq!(kind_for_sqlstate(SqlState::QUERY_CANCELED), ErrorKind::Timeout);
        for code in ["23505", "42601", "22012", "40001"] {
            assert_eq!(kind_for_sqlstate(sqlstate(code)), ErrorKind::Query, "{code}");
        }
    }

    /// An `ErrorResponse` message with `fields`, as the server sends it.
    fn error_response(fields: &[(u8, &str)]) -> ErrorResponseBody {
        let mut body = Vec::new();
        for (kind, value) in fields {
            body.push(*kind);
            body.extend_from_slice(value.as_bytes());
            body.push(0);
        }
        body.push(0);
        let mut buf = BytesMut::new();
        buf.put_u8(b'E');
        buf.put_i32(body.len() as i32 + 4);
        buf.extend_from_slice(&body);
        match Message::parse(&mut buf) {
            Ok(Some(Message::ErrorResponse(body))) => body,
            _ => panic!("not an ErrorResponse"),
        }
    }

    #[test]
    fn server_errors_keep_code_and_fields() {
        let body = error_response(&[
            (b'S', "ERROR"),
            (b'V', "ERROR"),
            (b'C', "23505"),
            (b'M', "duplicate key value violates unique constraint \"t_pkey\""),
            (b'D', "Key (id)=(1) already exists."),
            (b't', "t"),
            (b'n', "t_pkey"),
        ]);
        let err = map_error(&body);
        assert_eq!(err.kind(), ErrorKind::Query);
        assert_eq!(err.code(), Some(SqlState::UNIQUE_VIOLATION));
        assert_eq!(err.message(), "ERROR: duplicate key value violates unique constraint \"t_pkey\"");
        let server = err.source().and_then(|s| s.downcast_ref::<ServerError>()).expect("ServerError source");
        assert_eq!(server.constraint(), Some("t_pkey"));
        assert_eq!(server.table(), Some("t"));
        assert_eq!(server.detail(), Some("Key (id)=(1) already exists."));
        assert_eq!(server.hint(), None);

        let shutdown = map_error(&error_response(&[
            (b'V', "FATAL"),
            (b'C', "57P01"),
            (b'M', "terminating connection due to administrator command"),
        ]));
        assert_eq!(shutdown.kind(), ErrorKind::Unavailable);
        assert_eq!(shutdown.code(), Some(SqlState::ADMIN_SHUTDOWN));
        assert_eq!(shutdown.http_status(), 503);

        // A response without a (valid) code is still a query error.
        let odd = map_error(&error_response(&[(b'C', "nope"), (b'M', "odd")]));
        assert_eq!((odd.kind(), odd.code()), (ErrorKind::Query, None));
    }
}
