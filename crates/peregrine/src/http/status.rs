//! HTTP status codes and their reason phrases.

use std::fmt;

/// An HTTP status code (100..=999).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StatusCode(u16);

macro_rules! statuses {
    ($($name:ident = $code:expr, $reason:expr;)*) => {
        impl StatusCode {
            $(
                #[doc = concat!("`", stringify!($code), " ", $reason, "`")]
                pub const $name: StatusCode = StatusCode($code);
            )*

            /// The reason phrase written on the status line.
            pub fn reason(self) -> &'static str {
                match self.0 {
                    $($code => $reason,)*
                    _ => "Unknown",
                }
            }
        }
    };
}

statuses! {
    CONTINUE = 100, "Continue";
    SWITCHING_PROTOCOLS = 101, "Switching Protocols";
    OK = 200, "OK";
    CREATED = 201, "Created";
    ACCEPTED = 202, "Accepted";
    NO_CONTENT = 204, "No Content";
    PARTIAL_CONTENT = 206, "Partial Content";
    MOVED_PERMANENTLY = 301, "Moved Permanently";
    FOUND = 302, "Found";
    SEE_OTHER = 303, "See Other";
    NOT_MODIFIED = 304, "Not Modified";
    TEMPORARY_REDIRECT = 307, "Temporary Redirect";
    PERMANENT_REDIRECT = 308, "Permanent Redirect";
    BAD_REQUEST = 400, "Bad Request";
    UNAUTHORIZED = 401, "Unauthorized";
    FORBIDDEN = 403, "Forbidden";
    NOT_FOUND = 404, "Not Found";
    METHOD_NOT_ALLOWED = 405, "Method Not Allowed";
    NOT_ACCEPTABLE = 406, "Not Acceptable";
    REQUEST_TIMEOUT = 408, "Request Timeout";
    CONFLICT = 409, "Conflict";
    GONE = 410, "Gone";
    LENGTH_REQUIRED = 411, "Length Required";
    PAYLOAD_TOO_LARGE = 413, "Content Too Large";
    URI_TOO_LONG = 414, "URI Too Long";
    UNSUPPORTED_MEDIA_TYPE = 415, "Unsupported Media Type";
    RANGE_NOT_SATISFIABLE = 416, "Range Not Satisfiable";
    EXPECTATION_FAILED = 417, "Expectation Failed";
    UNPROCESSABLE_ENTITY = 422, "Unprocessable Content";
    UPGRADE_REQUIRED = 426, "Upgrade Required";
    TOO_MANY_REQUESTS = 429, "Too Many Requests";
    REQUEST_HEADER_FIELDS_TOO_LARGE = 431, "Request Header Fields Too Large";
    INTERNAL_SERVER_ERROR = 500, "Internal Server Error";
    NOT_IMPLEMENTED = 501, "Not Implemented";
    BAD_GATEWAY = 502, "Bad Gateway";
    SERVICE_UNAVAILABLE = 503, "Service Unavailable";
    GATEWAY_TIMEOUT = 504, "Gateway Timeout";
    HTTP_VERSION_NOT_SUPPORTED = 505, "HTTP Version Not Supported";
}

impl StatusCode {
    /// A status from its number; `None` outside 100..=999.
    pub fn from_u16(code: u16) -> Option<StatusCode> {
        (100..=999).contains(&code).then_some(StatusCode(code))
    }

    /// The numeric code.
    pub fn as_u16(self) -> u16 {
        self.0
    }

    /// Whether a response with this status carries no body by definition
    /// (1xx, 204, 304).
    pub fn forbids_body(self) -> bool {
        self.0 < 200 || self.0 == 204 || self.0 == 304
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0, self.reason())
    }
}

/// Into the `http` crate's status code (every code here, 100 to 999, is one
/// there too).
impl From<StatusCode> for ::http::StatusCode {
    fn from(s: StatusCode) -> ::http::StatusCode {
        ::http::StatusCode::from_u16(s.0).unwrap_or(::http::StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// From the `http` crate's status code.
impl From<::http::StatusCode> for StatusCode {
    fn from(s: ::http::StatusCode) -> StatusCode {
        StatusCode(s.as_u16())
    }
}
