//! Server errors: turning an `ErrorResponse` onto [`Error`].
//!
//! This module owns the one SQLSTATE grouping of the PostgreSQL driver:
//! which server errors mean the database is unavailable (connection
//! exceptions, shutdown, too many connections), which mean the call ran out
//! of time (`statement_timeout`, which the pool sets to its own deadline),
//! and which are the query's own fault. Both the driver and start-up read
//! error fields through here, so every message has the same shape.

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::ErrorResponseBody;

use crate::db::Error;

/// Code and message of an `ErrorResponse`.
fn error_fields(body: &ErrorResponseBody) -> (String, String) {
    let (mut code, mut severity, mut message) = (String::new(), String::from("ERROR"), String::new());
    let mut fields = body.fields();
    while let Ok(Some(field)) = fields.next() {
        let value = || String::from_utf8_lossy(field.value_bytes()).into_owned();
        match field.type_() {
            b'C' => code = value(),
            b'V' => severity = value(),
            b'M' => message = value(),
            _ => {}
        }
    }
    (code, format!("{severity}: {message}"))
}

pub(super) fn error_text(body: &ErrorResponseBody) -> String {
    let (code, text) = error_fields(body);
    format!("{text} (SQLSTATE {code})")
}

/// Maps a server error onto [`Error`].
pub(super) fn map_error(body: &ErrorResponseBody) -> Error {
    let (code, text) = error_fields(body);
    error_for_sqlstate(&code, text)
}

/// How a web handler should treat a server error with SQLSTATE `code`; the
/// one grouping for the pool's own errors and for tokio-postgres's.
pub(crate) fn error_for_sqlstate(code: &str, message: String) -> Error {
    // 08: connection exception; 57P0x: server shutting down or terminated
    // this backend; 53300: too many connections.
    if code.starts_with("08") || code.starts_with("57P0") || code == "53300" {
        return Error::Unavailable;
    }
    // 57014: cancelled, in practice by statement_timeout, which the pool
    // sets to its own deadline.
    if code == "57014" {
        return Error::Timeout;
    }
    Error::Query(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_group_by_what_a_handler_should_answer() {
        for code in ["08006", "57P01", "57P03", "53300"] {
            assert_eq!(error_for_sqlstate(code, "x".into()), Error::Unavailable, "{code}");
        }
        assert_eq!(error_for_sqlstate("57014", "x".into()), Error::Timeout);
        assert_eq!(error_for_sqlstate("23505", "duplicate".into()), Error::Query("duplicate".into()));
    }
}
