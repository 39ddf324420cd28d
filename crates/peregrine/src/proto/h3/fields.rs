//! Requests and responses mapped to and from the `http` crate's types,
//! which `h3` speaks: the request's fields as handlers see them, and a
//! [`Response`]'s head as an `http::Response`.

use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, DATE, SERVER};

use crate::http::date::DateBlock;
use crate::proto::h2::connection_specific;
use crate::response::Response;

/// Adds `(name, value)` pairs that passed the response's header checks.
/// Returns `false` if one is still not a valid field.
fn add_fields<'h>(map: &mut HeaderMap, fields: impl Iterator<Item = (&'h str, &'h str)>) -> bool {
    for (name, value) in fields {
        if connection_specific(name.as_bytes()) {
            continue;
        }
        match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            (Ok(name), Ok(value)) => {
                map.append(name, value);
            }
            _ => return false,
        }
    }
    true
}

/// The response head: status, `server`, `content-type`, the handler's
/// headers, `date` and, for a body in memory, `content-length`.
pub(super) fn response_head(
    response: &Response,
    date: &DateBlock,
    length: Option<usize>,
) -> Option<http::Response<()>> {
    let mut head = http::Response::new(());
    *head.status_mut() = http::StatusCode::from(response.status_code());
    let headers = head.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static("peregrine"));
    let content_type = response.header_value("content-type").unwrap_or(crate::response::TEXT_UTF8);
    headers.insert(CONTENT_TYPE, HeaderValue::from_str(content_type).ok()?);
    if !add_fields(headers, response.headers()) {
        return None;
    }
    // The block is `Date: <29 bytes>\r\n\r\n`.
    if let Ok(value) = HeaderValue::from_bytes(&date[6..35]) {
        headers.insert(DATE, value);
    }
    if let Some(length) = length {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    }
    Some(head)
}

/// The request's header fields as handlers see them: `:authority` first,
/// as `host`, when the client sent no `host` field (so code written for
/// HTTP/1.1 finds it), then every field as sent.
pub(super) fn request_fields<'a>(
    uri: &'a http::Uri,
    headers: &'a HeaderMap,
) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
    let host = uri
        .authority()
        .filter(|_| !headers.contains_key(http::header::HOST))
        .map(|authority| ("host", authority.as_str().as_bytes()));
    host.into_iter().chain(headers.iter().map(|(name, value)| (name.as_str(), value.as_bytes())))
}
