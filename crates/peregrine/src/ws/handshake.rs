//! The opening handshake (RFC 6455 §4.2, and RFC 8441 §5 over HTTP/2):
//! checking a client's request and computing the server's answer. Pure
//! functions over header values.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha1::{Digest, Sha1};

use crate::error::Error;
use crate::http::{Method, StatusCode, Version};
use crate::request::Request;

/// The GUID every accept key is hashed with (§1.3).
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// What `426` carries: the protocol and the version the server speaks.
const UPGRADE_HEADERS: &[(&str, &str)] = &[("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13")];

/// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key`.
pub(crate) fn accept_key(key: &str) -> String {
    let mut sha = Sha1::new();
    sha.update(key.as_bytes());
    sha.update(GUID.as_bytes());
    STANDARD.encode(sha.finalize())
}

/// Whether any value of header `name` lists `token` (comma-separated,
/// any case).
fn has_token(req: &Request<'_>, name: &'static str, token: &str) -> bool {
    values(req, name).flat_map(|v| v.split(',')).any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Every value of header `name` that is text.
pub(crate) fn values<'a, 'r: 'a>(
    req: &'a Request<'r>,
    name: &'static str,
) -> impl Iterator<Item = &'r str> + 'a {
    req.headers()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
        .filter_map(|(_, v)| std::str::from_utf8(v).ok())
}

/// What HTTP/2 refuses a version other than 13 with: the version the
/// server speaks (RFC 6455 §4.4; `426` means nothing without `Upgrade`).
const VERSION_HEADERS: &[(&str, &str)] = &[("Sec-WebSocket-Version", "13")];

/// Checks a handshake request; `Ok` holds the client's key, or `None` for
/// an HTTP/2 extended `CONNECT`, which has none.
///
/// A request that does not ask for a WebSocket at all (no `Upgrade:
/// websocket` with `Connection: upgrade`; on HTTP/2 no `:protocol`), or
/// asks for a version other than 13 on HTTP/1.1, gets `426 Upgrade
/// Required` naming what the server speaks (§4.4); a WebSocket request
/// that is malformed gets `400`.
pub(crate) fn check<'r>(req: &Request<'r>) -> Result<Option<&'r str>, Error> {
    if req.version() == Version::Http2 {
        return check_extended_connect(req).map(|()| None);
    }
    if !has_token(req, "upgrade", "websocket") || !has_token(req, "connection", "upgrade") {
        return Err(Error::new(StatusCode::UPGRADE_REQUIRED, "this resource speaks WebSocket only")
            .with_headers(UPGRADE_HEADERS));
    }
    if req.method() != Method::Get {
        return Err(Error::bad_request("a WebSocket handshake must be a GET"));
    }
    if req.version() != Version::Http11 {
        return Err(Error::bad_request("a WebSocket handshake needs HTTP/1.1"));
    }
    let mut versions = values(req, "sec-websocket-version");
    if versions.next().map(str::trim) != Some("13") || versions.next().is_some() {
        return Err(Error::new(
            StatusCode::UPGRADE_REQUIRED,
            "unsupported WebSocket version: this server speaks 13",
        )
        .with_headers(UPGRADE_HEADERS));
    }
    let mut keys = values(req, "sec-websocket-key");
    let key = match (keys.next().map(str::trim), keys.next()) {
        (Some(key), None) => key,
        (None, _) => return Err(Error::bad_request("missing Sec-WebSocket-Key")),
        (Some(_), Some(_)) => return Err(Error::bad_request("more than one Sec-WebSocket-Key")),
    };
    match STANDARD.decode(key) {
        Ok(nonce) if nonce.len() == 16 => Ok(Some(key)),
        _ => Err(Error::bad_request("Sec-WebSocket-Key is not 16 bytes in base64")),
    }
}

/// Checks an extended `CONNECT` (RFC 8441 §5), which the HTTP/2 driver
/// routes as a `GET` with its `:protocol` first among the fields. There is
/// no key and no accept: the stream is the proof that the client speaks
/// the protocol (a `Sec-WebSocket-Key` sent anyway is ignored).
fn check_extended_connect(req: &Request<'_>) -> Result<(), Error> {
    if !req.header_str(":protocol").is_some_and(|p| p.eq_ignore_ascii_case("websocket")) {
        return Err(Error::new(
            StatusCode::UPGRADE_REQUIRED,
            "this resource speaks WebSocket only (over HTTP/2: an extended CONNECT, RFC 8441)",
        )
        .with_headers(VERSION_HEADERS));
    }
    if req.method() != Method::Get {
        return Err(Error::bad_request("a WebSocket handshake must stand for a GET"));
    }
    let mut versions = values(req, "sec-websocket-version");
    if versions.next().map(str::trim) != Some("13") || versions.next().is_some() {
        return Err(Error::bad_request("unsupported WebSocket version: this server speaks 13")
            .with_headers(VERSION_HEADERS));
    }
    Ok(())
}

/// The first of `ours` (in our order of preference) that the client
/// offered in `Sec-WebSocket-Protocol`.
pub(crate) fn choose_protocol<'a>(offered: &[String], ours: &'a [String]) -> Option<&'a String> {
    ours.iter().find(|p| offered.iter().any(|o| o == *p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_of_the_rfc_example() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn protocol_is_ours_in_our_order() {
        let offered = vec!["chat".to_owned(), "superchat".to_owned()];
        let ours = vec!["superchat".to_owned(), "chat".to_owned()];
        assert_eq!(choose_protocol(&offered, &ours).map(String::as_str), Some("superchat"));
        assert_eq!(choose_protocol(&offered, &["mqtt".to_owned()]), None);
    }
}
