//! A request head as HPACK decodes it, checked against RFC 9113 §8.2 and
//! §8.3 (field names in lowercase, no connection-specific fields, the
//! pseudo-header fields first, once each, and the ones the method needs),
//! and kept in one byte buffer with ranges into it.
//!
//! The connection keeps a few of these and reuses them: a request answered
//! in the connection's task costs no allocation for its head (the `http`
//! crate's `HeaderMap` and `Uri`, which `h2` built for every request, cost
//! one per field and one per URI).

use std::ops::Range;

/// Why a request head is malformed (a stream error, PROTOCOL_ERROR).
pub(crate) type Malformed = &'static str;

/// The fields HTTP/2 forbids in requests (RFC 9113 §8.2.2).
pub(crate) const CONNECTION_SPECIFIC: [&[u8]; 5] =
    [b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"];

/// A decoded request head (or a trailer section).
#[derive(Default)]
pub(crate) struct RequestHead {
    buf: Vec<u8>,
    method: Option<Range<u32>>,
    scheme: Option<Range<u32>>,
    authority: Option<Range<u32>>,
    path: Option<Range<u32>>,
    protocol: Option<Range<u32>>,
    fields: Vec<(Range<u32>, Range<u32>)>,
    content_length: Option<u64>,
    /// Decoded size as SETTINGS_MAX_HEADER_LIST_SIZE counts it.
    list_size: usize,
    oversized: bool,
    malformed: Option<Malformed>,
    regular_seen: bool,
    has_host: bool,
}

impl RequestHead {
    /// Empties the head for the next block, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.method = None;
        self.scheme = None;
        self.authority = None;
        self.path = None;
        self.protocol = None;
        self.fields.clear();
        self.content_length = None;
        self.list_size = 0;
        self.oversized = false;
        self.malformed = None;
        self.regular_seen = false;
        self.has_host = false;
    }

    fn push(&mut self, bytes: &[u8]) -> Range<u32> {
        let start = self.buf.len() as u32;
        self.buf.extend_from_slice(bytes);
        start..self.buf.len() as u32
    }

    fn get(&self, range: &Range<u32>) -> &[u8] {
        &self.buf[range.start as usize..range.end as usize]
    }

    fn text(&self, range: &Option<Range<u32>>) -> Option<&str> {
        // Every stored name and pseudo-header value was checked to be
        // ASCII, so this never fails.
        range.as_ref().and_then(|r| std::str::from_utf8(self.get(r)).ok())
    }

    fn malformed(&mut self, why: Malformed) {
        if self.malformed.is_none() {
            self.malformed = Some(why);
        }
    }

    /// Takes one decoded field. `trailers`: a trailer section, where
    /// pseudo-header fields are malformed. Past `limit` bytes of list the
    /// fields are only counted (the HPACK bomb costs no memory).
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8], trailers: bool, limit: usize) {
        self.list_size = self.list_size.saturating_add(name.len() + value.len() + 32);
        if self.list_size > limit {
            self.oversized = true;
            return;
        }
        if self.malformed.is_some() {
            return;
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if trailers {
                return self.malformed("a pseudo-header field in trailers");
            }
            if self.regular_seen {
                return self.malformed("a pseudo-header field after a regular one");
            }
            if !value.iter().all(|&b| (0x21..0x7f).contains(&b)) {
                return self.malformed("a pseudo-header field with a byte outside visible ASCII");
            }
            let range = self.push(value);
            let slot = match pseudo {
                b"method" => &mut self.method,
                b"scheme" => &mut self.scheme,
                b"authority" => &mut self.authority,
                b"path" => &mut self.path,
                b"protocol" => &mut self.protocol,
                _ => return self.malformed("an unknown pseudo-header field"),
            };
            if slot.is_some() {
                return self.malformed("a repeated pseudo-header field");
            }
            *slot = Some(range);
            return;
        }
        self.regular_seen = true;
        if name.is_empty()
            || !name.iter().all(|&b| b > 0x20 && b < 0x7f && b != b':' && !b.is_ascii_uppercase())
        {
            return self.malformed("a field name that is empty, not lowercase or not a token");
        }
        if value.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n')
            || value.first().is_some_and(|&b| b == b' ' || b == b'\t')
            || value.last().is_some_and(|&b| b == b' ' || b == b'\t')
        {
            return self.malformed("a field value with NUL, CR, LF or surrounding whitespace");
        }
        if CONNECTION_SPECIFIC.contains(&name) {
            return self.malformed("a connection-specific field");
        }
        if name == b"te" && value != b"trailers" {
            return self.malformed("TE other than trailers");
        }
        if name == b"content-length" {
            let parsed = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()));
            match parsed.and_then(|v| v.parse::<u64>().ok()) {
                Some(n) if self.content_length.map_or(true, |m| m == n) => self.content_length = Some(n),
                _ => return self.malformed("an invalid or conflicting content-length"),
            }
        }
        if name == b"host" {
            self.has_host = true;
        }
        let name = self.push(name);
        let value = self.push(value);
        self.fields.push((name, value));
    }

    /// After the block: checks the pseudo-header fields a request needs
    /// (RFC 9113 §8.3.1, RFC 8441 §4 for the extended `CONNECT`).
    pub(crate) fn finish_request(&mut self, connect_protocol: bool) {
        if self.malformed.is_some() || self.oversized {
            return;
        }
        let Some(method) = self.method.clone() else { return self.malformed("no :method") };
        let connect = self.get(&method) == b"CONNECT";
        // A token is at least one character (RFC 9110 §5.6.2).
        let token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
        if self.get(&method).is_empty() || !self.get(&method).iter().all(token) {
            return self.malformed("a :method that is not a token");
        }
        if self.protocol.is_some() && !(connect && connect_protocol) {
            return self.malformed(":protocol on a request that is not an extended CONNECT");
        }
        if connect && self.protocol.is_none() {
            if self.scheme.is_some() || self.path.is_some() || self.authority.is_none() {
                return self.malformed("a CONNECT with :scheme or :path, or without :authority");
            }
            return;
        }
        if self.scheme.is_none() {
            return self.malformed("no :scheme");
        }
        match self.path.as_ref().map(|p| self.get(p)) {
            None | Some(b"") => self.malformed("no :path or an empty one"),
            Some(b"*") => {}
            Some(path) if path[0] == b'/' => {}
            Some(_) => self.malformed("a :path that is neither origin-form nor *"),
        }
        if connect && self.authority.is_none() {
            self.malformed("an extended CONNECT without :authority");
        }
    }

    /// Why the head is malformed, if it is.
    pub(crate) fn malformed_reason(&self) -> Option<Malformed> {
        self.malformed
    }

    /// Whether the decoded list went past the limit.
    pub(crate) fn oversized(&self) -> bool {
        self.oversized
    }

    pub(crate) fn method(&self) -> &str {
        self.text(&self.method).unwrap_or("")
    }

    /// `:path` up to the query, `/` for `*` requests' sake never empty.
    pub(crate) fn path(&self) -> &str {
        let full = self.text(&self.path).unwrap_or("/");
        match full.find('?') {
            Some(q) => &full[..q],
            None => full,
        }
    }

    pub(crate) fn query(&self) -> Option<&str> {
        let full = self.text(&self.path)?;
        full.find('?').map(|q| &full[q + 1..])
    }

    pub(crate) fn protocol(&self) -> Option<&str> {
        self.text(&self.protocol)
    }

    pub(crate) fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// The fields as handlers see them: `:authority` first, as `host`,
    /// when the client sent no `host` field (so code written for HTTP/1.1
    /// finds it), then every field as sent.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        let host =
            self.authority.as_ref().filter(|_| !self.has_host).map(|authority| ("host", self.get(authority)));
        host.into_iter().chain(self.fields.iter().map(|(name, value)| {
            // Names were checked to be ASCII tokens.
            (std::str::from_utf8(self.get(name)).unwrap_or(""), self.get(value))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(fields: &[(&str, &str)]) -> RequestHead {
        let mut head = RequestHead::default();
        for (n, v) in fields {
            head.field(n.as_bytes(), v.as_bytes(), false, 16 * 1024);
        }
        head.finish_request(true);
        head
    }

    const GET: [(&str, &str); 3] = [(":method", "GET"), (":scheme", "https"), (":path", "/a?b=1")];

    #[test]
    fn a_plain_get_is_well_formed_and_gets_host_from_authority() {
        let mut fields = GET.to_vec();
        fields.push((":authority", "example.com"));
        fields.push(("accept", "*/*"));
        let head = head(&fields);
        assert_eq!(head.malformed_reason(), None);
        assert_eq!((head.method(), head.path(), head.query()), ("GET", "/a", Some("b=1")));
        let got: Vec<_> = head.fields().collect();
        assert_eq!(got, vec![("host", &b"example.com"[..]), ("accept", &b"*/*"[..])]);
    }

    #[test]
    fn each_rule_of_section_8_is_enforced() {
        let cases: Vec<Vec<(&str, &str)>> = vec![
            vec![(":method", "GET"), (":path", "/")],
            vec![(":method", "GET"), (":scheme", "https")],
            vec![(":method", "GET"), (":scheme", "https"), (":path", "")],
            [&GET[..], &[(":method", "GET")]].concat(),
            [&GET[..], &[("Upper", "x")]].concat(),
            [&GET[..], &[("connection", "close")]].concat(),
            [&GET[..], &[("te", "gzip")]].concat(),
            [&GET[..], &[("x", " padded")]].concat(),
            [&GET[..], &[(":unknown", "x")]].concat(),
            vec![(":method", "GET"), ("x", "y"), (":scheme", "https"), (":path", "/")],
            [&GET[..], &[("content-length", "1"), ("content-length", "2")]].concat(),
            vec![(":method", "CONNECT"), (":authority", "a:1"), (":path", "/")],
            [&GET[..], &[(":protocol", "websocket")]].concat(),
            vec![(":method", ""), (":scheme", "https"), (":path", "/")],
        ];
        for case in cases {
            assert!(head(&case).malformed_reason().is_some(), "accepted {case:?}");
        }
        assert!(head(&[(":method", "CONNECT"), (":authority", "a:1")]).malformed_reason().is_none());
        assert!(head(&[("te", "trailers")].iter().chain(GET.iter()).copied().collect::<Vec<_>>())
            .malformed_reason()
            .is_some());
    }

    #[test]
    fn a_list_past_the_limit_is_counted_not_kept() {
        let mut head = RequestHead::default();
        for _ in 0..1000 {
            head.field(b"x-bomb", &[b'b'; 4000], false, 16 * 1024);
        }
        assert!(head.oversized());
        assert!(head.buf.len() < 16 * 1024);
    }
}
