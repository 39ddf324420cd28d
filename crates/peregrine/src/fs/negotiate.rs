//! `Accept-Encoding` negotiation (RFC 9110 §12.5.3): which of a file's
//! variants (the file itself, or a precompressed `.br`, `.zst` or `.gz`
//! sibling) the client accepts, best first.
//!
//! Rules:
//! - A coding's quality is its own entry's `q` (default 1), else that of
//!   `*`, else 0 (not acceptable). `x-gzip` is `gzip`.
//! - `identity` (the file as it is) is acceptable unless excluded by
//!   `identity;q=0`, or by `*;q=0` without an `identity` entry.
//! - No `Accept-Encoding` header at all means *identity only*: RFC 9110
//!   would allow any coding, but a client that sends no header usually
//!   cannot decode one (and HttpArena expects the exact on-disk bytes).
//! - Higher `q` wins; among equal `q` the smaller variant wins:
//!   `br`, then `zstd`, then `gzip`, then `identity`.
//! - An entry whose `q` does not parse is ignored; for a coding listed
//!   twice the first entry counts. Only the first `Accept-Encoding` header
//!   is read.

use std::cell::RefCell;

/// A content coding a file can be served with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Coding {
    Br = 0,
    Zstd = 1,
    Gzip = 2,
    Identity = 3,
}

impl Coding {
    /// All codings in the server's order of preference (smallest first).
    pub(crate) const ALL: [Coding; 4] = [Coding::Br, Coding::Zstd, Coding::Gzip, Coding::Identity];

    /// The suffix of the precompressed sibling holding this coding.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Coding::Br => ".br",
            Coding::Zstd => ".zst",
            Coding::Gzip => ".gz",
            Coding::Identity => "",
        }
    }

    /// The `Content-Encoding` value, `None` for identity.
    pub(crate) fn header(self) -> Option<&'static str> {
        match self {
            Coding::Br => Some("br"),
            Coding::Zstd => Some("zstd"),
            Coding::Gzip => Some("gzip"),
            Coding::Identity => None,
        }
    }
}

/// The codings a request accepts, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Preference {
    order: [Coding; 4],
    len: usize,
}

impl Preference {
    /// The acceptable codings, best first; empty when nothing is (a `406`
    /// unless a variant is found).
    pub(crate) fn codings(&self) -> &[Coding] {
        &self.order[..self.len]
    }
}

/// Reads `Accept-Encoding` (the first header's value, if any). With
/// `precompressed` false only identity is considered.
pub(crate) fn negotiate(header: Option<&[u8]>, precompressed: bool) -> Preference {
    // Clients send the same `Accept-Encoding` on every request, so the
    // last answer is kept per thread: comparing ~20 bytes replaces parsing
    // them (700 of a static request's 10,000 instructions, callgrind).
    thread_local! {
        static LAST: RefCell<Option<(Vec<u8>, bool, Preference)>> = const { RefCell::new(None) };
    }
    let Some(value) = header.filter(|v| v.len() <= MEMO_MAX) else { return parse(header, precompressed) };
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((seen, flag, preference)) = &*last {
            if *flag == precompressed && seen.as_slice() == value {
                return *preference;
            }
        }
        let preference = parse(header, precompressed);
        match &mut *last {
            Some((seen, flag, kept)) => {
                seen.clear();
                seen.extend_from_slice(value);
                *flag = precompressed;
                *kept = preference;
            }
            None => *last = Some((value.to_vec(), precompressed, preference)),
        }
        preference
    })
}

/// Longest `Accept-Encoding` value [`negotiate`] remembers.
const MEMO_MAX: usize = 128;

fn parse(header: Option<&[u8]>, precompressed: bool) -> Preference {
    // Quality in thousandths per coding (indexed by `Coding as usize`),
    // `None` when not listed.
    let mut listed: [Option<u16>; 4] = [None; 4];
    let mut star: Option<u16> = None;
    if let Some(value) = header.and_then(|v| std::str::from_utf8(v).ok()) {
        for element in value.split(',') {
            let mut parts = element.split(';');
            let name = parts.next().unwrap_or("").trim();
            if name.is_empty() {
                continue;
            }
            let Some(q) = quality(parts) else { continue };
            let slot = if name.eq_ignore_ascii_case("*") {
                &mut star
            } else if name.eq_ignore_ascii_case("br") {
                &mut listed[Coding::Br as usize]
            } else if name.eq_ignore_ascii_case("zstd") {
                &mut listed[Coding::Zstd as usize]
            } else if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
                &mut listed[Coding::Gzip as usize]
            } else if name.eq_ignore_ascii_case("identity") {
                &mut listed[Coding::Identity as usize]
            } else {
                continue;
            };
            slot.get_or_insert(q);
        }
    }
    let q_of = |c: Coding| match (listed[c as usize], star) {
        (Some(q), _) | (None, Some(q)) => q,
        (None, None) if c == Coding::Identity => 1000,
        (None, None) => 0,
    };
    let mut order = [Coding::Identity; 4];
    let mut len = 0;
    for c in Coding::ALL {
        if (precompressed || c == Coding::Identity) && q_of(c) > 0 {
            order[len] = c;
            len += 1;
        }
    }
    // Stable: equal qualities keep the server's order.
    order[..len].sort_by_key(|&c| std::cmp::Reverse(q_of(c)));
    Preference { order, len }
}

/// The `q` parameter among `params` in thousandths (1000 without one);
/// `None` when it does not parse.
fn quality<'a>(params: impl Iterator<Item = &'a str>) -> Option<u16> {
    for param in params {
        let Some((name, value)) = param.split_once('=') else { continue };
        if name.trim().eq_ignore_ascii_case("q") {
            return parse_qvalue(value.trim());
        }
    }
    Some(1000)
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`.
fn parse_qvalue(s: &str) -> Option<u16> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths: u16 = 0;
    for (i, b) in frac.bytes().enumerate() {
        thousandths += u16::from(b - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::Coding::*;
    use super::*;

    fn order(header: Option<&str>) -> Vec<Coding> {
        negotiate(header.map(str::as_bytes), true).codings().to_vec()
    }

    #[test]
    fn qualities_order_the_variants() {
        assert_eq!(order(None), [Identity]);
        assert_eq!(order(Some("")), [Identity]);
        assert_eq!(order(Some("br;q=1, gzip;q=0.8")), [Br, Identity, Gzip]);
        assert_eq!(order(Some("gzip, br")), [Br, Gzip, Identity]);
        assert_eq!(order(Some("gzip;q=0.5, br;q=0.9, identity;q=0.1")), [Br, Gzip, Identity]);
        assert_eq!(order(Some("gzip;q=0, br")), [Br, Identity]);
        assert_eq!(order(Some("x-gzip")), [Gzip, Identity]);
        assert_eq!(order(Some("*")), [Br, Zstd, Gzip, Identity]);
        assert_eq!(order(Some("*;q=0.5, gzip")), [Gzip, Br, Zstd, Identity]);
        assert_eq!(order(Some("deflate, compress")), [Identity]);
        assert_eq!(order(Some("GZIP ; Q=0.7 ,Br")), [Br, Identity, Gzip]);
    }

    #[test]
    fn identity_can_be_refused() {
        assert_eq!(order(Some("identity;q=0")), []);
        assert_eq!(order(Some("gzip, identity;q=0")), [Gzip]);
        assert_eq!(order(Some("*;q=0")), []);
        assert_eq!(order(Some("*;q=0, identity")), [Identity]);
        assert_eq!(order(Some("br, *;q=0")), [Br]);
    }

    #[test]
    fn malformed_qualities_are_ignored() {
        assert_eq!(order(Some("gzip;q=2")), [Identity]);
        assert_eq!(order(Some("gzip;q=0.1234")), [Identity]);
        assert_eq!(order(Some("gzip;q=abc, br")), [Br, Identity]);
        assert_eq!(order(Some("identity;q=x")), [Identity]);
        assert_eq!(order(Some(",,, ;q=1")), [Identity]);
        assert_eq!(parse_qvalue("1.000"), Some(1000));
        assert_eq!(parse_qvalue("1.001"), None);
        assert_eq!(parse_qvalue("0.25"), Some(250));
    }

    #[test]
    fn without_precompressed_only_identity_counts() {
        assert_eq!(negotiate(Some(b"br, gzip"), false).codings(), [Identity]);
        assert_eq!(negotiate(Some(b"br, identity;q=0"), false).codings(), []);
    }
}
