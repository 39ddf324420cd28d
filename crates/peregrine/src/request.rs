//! [`Request`]: a borrowed view of one parsed request.

use std::borrow::Cow;
use std::net::SocketAddr;

use crate::extensions::Extensions;
use crate::http::{Header, Method, Version};
use crate::pattern::Pattern;
pub use crate::pattern::MAX_PATH_PARAMS;

/// Path parameters of the matched route, as raw (still percent-encoded)
/// slices of the request path.
///
/// Only a view: the values are found again when a handler asks for them,
/// so the common case (a route without parameters, or a handler that does
/// not read them) builds and moves no array per request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Params<'r> {
    /// The pattern of the endpoint that matched, with its parameter names.
    pub(crate) pattern: &'r Pattern,
    pub(crate) path: &'r str,
}

impl<'r> Params<'r> {
    /// The raw values, in pattern order (at most [`MAX_PATH_PARAMS`]).
    pub(crate) fn values(&self) -> ([&'r str; MAX_PATH_PARAMS], usize) {
        self.pattern.capture(self.path).unwrap_or(([""; MAX_PATH_PARAMS], 0))
    }

    /// The raw value of parameter `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&'r str> {
        self.pattern.param(name, self.path)
    }
}

/// One request, borrowed from the connection's read buffer. Handlers get it
/// through extractors or directly as `&Request`.
#[derive(Debug)]
pub struct Request<'r> {
    /// The client's address, when the transport has one.
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) method: Method,
    pub(crate) method_str: &'r str,
    pub(crate) path: &'r str,
    pub(crate) query: Option<&'r str>,
    pub(crate) version: Version,
    pub(crate) headers: &'r [Header<'r>],
    /// The matched route's parameters (`None` when no route matched).
    pub(crate) params: Option<Params<'r>>,
    pub(crate) body: &'r [u8],
    /// What middleware attached (`None` on routes without middleware).
    pub(crate) extensions: Option<&'r Extensions>,
}

impl<'r> Request<'r> {
    /// The client's socket address (the proxy's, behind a proxy).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The method token as sent (useful for [`Method::Other`]).
    pub fn method_str(&self) -> &'r str {
        self.method_str
    }

    /// The path as sent, still percent-encoded, without the query.
    pub fn path(&self) -> &'r str {
        self.path
    }

    /// The raw query string, without the `?`.
    pub fn query_string(&self) -> Option<&'r str> {
        self.query
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The first value of a header, matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&'r [u8]> {
        self.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
    }

    /// The first value of a header as text, if it is valid UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&'r str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// All headers in order, as (name, value). On HTTP/2, an extended
    /// `CONNECT` (RFC 8441, routed as the `GET` it stands for) has its
    /// `:protocol` pseudo-header first.
    pub fn headers(&self) -> impl Iterator<Item = (&'r str, &'r [u8])> + '_ {
        self.headers.iter().map(|h| (h.name, h.value))
    }

    /// A path parameter by name, percent-decoded.
    pub fn param(&self, name: &str) -> Option<Cow<'r, str>> {
        self.raw_param(name).map(|v| percent_decode(v, false))
    }

    /// The raw values of every path parameter, in pattern order.
    pub(crate) fn path_params(&self) -> ([&'r str; MAX_PATH_PARAMS], usize) {
        self.params.map_or(([""; MAX_PATH_PARAMS], 0), |p| p.values())
    }

    pub(crate) fn raw_param(&self, name: &str) -> Option<&'r str> {
        self.params.and_then(|p| p.get(name))
    }

    /// The decoded value of the first query parameter called `name`.
    pub fn query(&self, name: &str) -> Option<Cow<'r, str>> {
        self.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// All query parameters, decoded (`+` is a space).
    pub fn query_pairs(&self) -> impl Iterator<Item = (Cow<'r, str>, Cow<'r, str>)> {
        QueryPairs { rest: self.query.unwrap_or("") }
    }

    /// What middleware attached to the request (empty without middleware).
    pub fn extensions(&self) -> Option<&'r Extensions> {
        self.extensions
    }

    /// The request body, for routes whose bodies are buffered (all but
    /// streaming routes). Chunked bodies arrive here already decoded.
    pub fn body(&self) -> &'r [u8] {
        self.body
    }
}

/// A request that owns its parts, for middleware: it outlives the read
/// buffer, so it can cross `.await`s, and middleware can change it before
/// the handler sees it. Routes without middleware never build one.
#[derive(Debug)]
pub struct OwnedRequest {
    peer: Option<SocketAddr>,
    method: Method,
    method_str: Box<str>,
    path: Box<str>,
    query: Option<Box<str>>,
    version: Version,
    headers: Vec<(Box<str>, Box<[u8]>)>,
    body: Vec<u8>,
    extensions: Extensions,
}

impl OwnedRequest {
    /// The client's socket address (the proxy's, behind a proxy).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// A request made by the test client.
    pub(crate) fn for_test(
        method: Method,
        method_str: &str,
        target: &str,
        headers: Vec<(String, Vec<u8>)>,
        body: Vec<u8>,
    ) -> OwnedRequest {
        let (path, query) = match target.split_once('?') {
            Some((path, query)) => (path, Some(query.into())),
            None => (target, None),
        };
        OwnedRequest {
            peer: None,
            method,
            method_str: method_str.into(),
            path: path.into(),
            query,
            version: Version::Http11,
            headers: headers.into_iter().map(|(n, v)| (n.into(), v.into())).collect(),
            body,
            extensions: Extensions::new(),
        }
    }

    /// This request as an `http` crate request (what middleware attached
    /// stays behind: take it first with [`OwnedRequest::extensions_mut`]).
    pub fn into_http(self) -> ::http::Request<Vec<u8>> {
        let target = match &self.query {
            Some(q) => format!("{}?{q}", self.path),
            None => self.path.to_string(),
        };
        let mut builder = ::http::Request::builder().method(self.method_str.as_ref()).uri(target);
        // An HTTP/2 extended CONNECT's `:protocol` is no field `http` can
        // carry (and would empty the whole request): it stays behind.
        for (name, value) in self.headers.iter().filter(|(name, _)| !name.starts_with(':')) {
            builder = builder.header(name.as_ref(), value.as_ref());
        }
        // Method, target and headers came from a request the parser
        // accepted (or middleware set through checked setters), which the
        // `http` types accept too; a request they refuse becomes an empty
        // one rather than a panic.
        builder.body(self.body).unwrap_or_default()
    }

    /// A request from `http` crate parts (back from a tower layer).
    pub(crate) fn from_http(
        parts: ::http::request::Parts,
        body: Vec<u8>,
        extensions: Extensions,
        peer: Option<SocketAddr>,
    ) -> OwnedRequest {
        let path = parts.uri.path();
        OwnedRequest {
            peer,
            method: Method::from(parts.method.clone()),
            method_str: parts.method.as_str().into(),
            path: if path.is_empty() { "/".into() } else { path.into() },
            query: parts.uri.query().map(Into::into),
            version: Version::Http11,
            headers: parts.headers.iter().map(|(n, v)| (n.as_str().into(), v.as_bytes().into())).collect(),
            body,
            extensions,
        }
    }

    /// A request a protocol driver decoded into owned parts (HTTP/2 streams),
    /// with an empty body: the driver fills it in, or streams it.
    pub(crate) fn from_parts(
        peer: Option<SocketAddr>,
        method_str: &str,
        path: &str,
        query: Option<&str>,
        version: Version,
        headers: Vec<(Box<str>, Box<[u8]>)>,
    ) -> OwnedRequest {
        OwnedRequest {
            peer,
            method: Method::from_token(method_str),
            method_str: method_str.into(),
            path: if path.is_empty() { "/".into() } else { path.into() },
            query: query.map(Into::into),
            version,
            headers,
            body: Vec::new(),
            extensions: Extensions::new(),
        }
    }

    /// Copies `req`.
    pub(crate) fn from_request(req: &Request<'_>) -> OwnedRequest {
        OwnedRequest {
            peer: req.peer,
            method: req.method,
            method_str: req.method_str.into(),
            path: req.path.into(),
            query: req.query.map(Into::into),
            version: req.version,
            headers: req.headers.iter().map(|h| (h.name.into(), h.value.into())).collect(),
            body: req.body.to_vec(),
            extensions: Extensions::new(),
        }
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The method token as sent.
    pub fn method_str(&self) -> &str {
        &self.method_str
    }

    /// The path as sent, still percent-encoded, without the query.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The raw query string, without the `?`.
    pub fn query_string(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The first value of a header, matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| &v[..])
    }

    /// The first value of a header as text, if it is valid UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// All headers in order, as (name, value).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.headers.iter().map(|(n, v)| (&n[..], &v[..]))
    }

    /// Sets a header, replacing every field of that name. Returns `false`,
    /// changing nothing, for a name that is not a token or a value with CR,
    /// LF or NUL.
    pub fn set_header(&mut self, name: &str, value: &[u8]) -> bool {
        let value_ok = !value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0);
        if !crate::response::headers::is_token(name) || !value_ok {
            return false;
        }
        self.remove_header(name);
        self.headers.push((name.into(), value.into()));
        true
    }

    /// Removes every header called `name`.
    pub fn remove_header(&mut self, name: &str) {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    }

    /// The body (routes with middleware always have it in memory).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body, to change.
    pub fn body_mut(&mut self) -> &mut Vec<u8> {
        &mut self.body
    }

    /// What earlier middleware attached.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// Attach values for later middleware and the handler
    /// ([`Extension`](crate::extract::Extension)).
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }

    /// Runs `f` on a borrowed view of this request, as handlers see it.
    pub(crate) fn with_view<T>(&self, params: Option<Params<'_>>, f: impl FnOnce(&Request<'_>) -> T) -> T {
        let headers: Vec<Header<'_>> =
            self.headers.iter().map(|(n, v)| Header { name: n, value: v }).collect();
        let view = Request {
            peer: self.peer,
            method: self.method,
            method_str: &self.method_str,
            path: &self.path,
            query: self.query.as_deref(),
            version: self.version,
            headers: &headers,
            params,
            body: &self.body,
            extensions: Some(&self.extensions),
        };
        f(&view)
    }
}

/// The `name=value` pairs of a query string, split on `&` and the first
/// `=` by byte scans; empty pairs are skipped.
///
/// `str::split('&')` with `split_once('=')` did the same through the
/// generic char searcher: callgrind counted 3,765 instructions per
/// HttpArena baseline request (`/baseline11?a=13&b=42`, 16 connections),
/// about 290 of them in that searcher.
struct QueryPairs<'r> {
    rest: &'r str,
}

impl<'r> Iterator for QueryPairs<'r> {
    type Item = (Cow<'r, str>, Cow<'r, str>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            // `&` and `=` are ASCII, so the split points are char boundaries.
            let (pair, rest) = match self.rest.bytes().position(|b| b == b'&') {
                Some(amp) => (&self.rest[..amp], &self.rest[amp + 1..]),
                None => (self.rest, ""),
            };
            self.rest = rest;
            if pair.is_empty() {
                continue;
            }
            let (name, value) = match pair.bytes().position(|b| b == b'=') {
                Some(eq) => (&pair[..eq], &pair[eq + 1..]),
                None => (pair, ""),
            };
            // One look at the pair spares the decoder two when nothing is
            // escaped, the common case.
            if !pair.bytes().any(|b| b == b'%' || b == b'+') {
                return Some((Cow::Borrowed(name), Cow::Borrowed(value)));
            }
            return Some((percent_decode(name, true), percent_decode(value, true)));
        }
    }
}

/// Decodes `%XX` escapes (and `+` as space when `plus_is_space`). Invalid
/// escapes are kept as they are; bytes that do not form UTF-8 become U+FFFD.
/// Borrows when there is nothing to decode.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Cow<'_, str> {
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| b == b'%' || (plus_is_space && b == b'+')) {
        return Cow::Borrowed(s);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match (crate::http::hex_digit(bytes[i + 1]), crate::http::hex_digit(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push(h << 4 | l);
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        assert_eq!(percent_decode("a%20b+c", true), "a b c");
        assert_eq!(percent_decode("a%20b+c", false), "a b+c");
        assert_eq!(percent_decode("%", true), "%");
        assert_eq!(percent_decode("%4", true), "%4");
        assert_eq!(percent_decode("%zz%41", true), "%zzA");
        assert_eq!(percent_decode("%E6%97%A5", true), "日");
        assert_eq!(percent_decode("%FF", true), "\u{FFFD}");
        assert!(matches!(percent_decode("plain", true), Cow::Borrowed(_)));
    }

    #[test]
    fn query_pairs_split_on_amp_and_the_first_equals() {
        let pairs: Vec<(String, String)> = QueryPairs { rest: "a=1&&b=2&c&=x&d=1=2&%41+b=c%20d&" }
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let expected = [("a", "1"), ("b", "2"), ("c", ""), ("", "x"), ("d", "1=2"), ("A b", "c d")];
        assert_eq!(pairs, expected.map(|(k, v)| (k.to_string(), v.to_string())));
        assert_eq!(QueryPairs { rest: "" }.count(), 0);
        assert_eq!(QueryPairs { rest: "&&" }.count(), 0);
        let non_ascii: Vec<_> = QueryPairs { rest: "é=ü&ß" }.collect();
        assert_eq!(
            non_ascii,
            [(Cow::Borrowed("é"), Cow::Borrowed("ü")), (Cow::Borrowed("ß"), Cow::Borrowed(""))]
        );
    }
}
