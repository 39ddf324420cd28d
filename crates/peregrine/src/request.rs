//! [`Request`]: a borrowed view of one parsed request.

use std::borrow::Cow;

use crate::http::{Method, Version};
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
    pub(crate) method: Method,
    pub(crate) method_str: &'r str,
    pub(crate) path: &'r str,
    pub(crate) query: Option<&'r str>,
    pub(crate) version: Version,
    pub(crate) headers: &'r [crate::http::Header<'r>],
    /// The matched route's parameters (`None` when no route matched).
    pub(crate) params: Option<Params<'r>>,
    pub(crate) body: &'r [u8],
}

impl<'r> Request<'r> {
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

    /// All headers in order, as (name, value).
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
        self.query.unwrap_or("").split('&').filter(|pair| !pair.is_empty()).map(|pair| {
            match pair.split_once('=') {
                Some((k, v)) => (percent_decode(k, true), percent_decode(v, true)),
                None => (percent_decode(pair, true), Cow::Borrowed("")),
            }
        })
    }

    /// The request body, for routes whose bodies are buffered (all but
    /// streaming routes). Chunked bodies arrive here already decoded.
    pub fn body(&self) -> &'r [u8] {
        self.body
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
}
