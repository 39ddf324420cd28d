//! [`Error`]: a failure a handler answers with an HTTP status.

use std::borrow::Cow;
use std::fmt;

use crate::http::StatusCode;

/// An error that becomes an HTTP response: its status and a short message,
/// sent as `{"error":"message"}`.
///
/// Extractors reject requests with it, and handlers return it (usually
/// through `?`) for anything they cannot serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: StatusCode,
    message: Cow<'static, str>,
    /// Headers the status requires (`426` names the protocol to upgrade
    /// to); constants, so an error stays cheap to build.
    headers: &'static [(&'static str, &'static str)],
}

impl Error {
    /// An error with any status.
    pub fn new(status: StatusCode, message: impl Into<Cow<'static, str>>) -> Error {
        Error { status, message: message.into(), headers: &[] }
    }

    /// `400 Bad Request`.
    pub fn bad_request(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(StatusCode::BAD_REQUEST, message)
    }

    /// `404 Not Found`.
    pub fn not_found(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(StatusCode::NOT_FOUND, message)
    }

    /// `413 Content Too Large`.
    pub fn payload_too_large(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }

    /// `500 Internal Server Error`.
    pub fn internal(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// `503 Service Unavailable`.
    pub fn unavailable(message: impl Into<Cow<'static, str>>) -> Error {
        Error::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// Adds headers the response must carry (a `426` its `Upgrade`, a
    /// `405` its `Allow`...). Only constants: nothing a client sent can end
    /// up in them.
    pub fn with_headers(mut self, headers: &'static [(&'static str, &'static str)]) -> Error {
        self.headers = headers;
        self
    }

    /// The headers added with [`Error::with_headers`].
    pub fn headers(&self) -> &'static [(&'static str, &'static str)] {
        self.headers
    }

    /// The status this error is answered with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Writes `{"error":"message"}`, the body it is answered with.
    pub(crate) fn write_json_body(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        out.extend_from_slice(b"{\"error\":");
        serde_json::to_writer(&mut *out, self.message.as_ref())?;
        out.push(b'}');
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

/// Database failures answer with the status [`crate::db::Error::http_status`]
/// picks (`503` when the database is unavailable or slow, so retrying can
/// succeed; `500` otherwise). The client learns only the kind of failure;
/// query details go to the log, not to the client.
impl From<crate::db::Error> for Error {
    fn from(e: crate::db::Error) -> Error {
        let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if e.is_transient() {
            Error::new(status, e.kind().as_str())
        } else {
            tracing::error!(error = %e, "database error");
            Error::new(status, "database error")
        }
    }
}
