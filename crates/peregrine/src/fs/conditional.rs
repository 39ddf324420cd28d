//! Validators and conditional requests (RFC 9110 §8.8, §13): the `ETag`
//! and `Last-Modified` of a variant, and whether `If-None-Match`,
//! `If-Modified-Since` or `If-Range` hold.
//!
//! - The `ETag` is strong and names the exact bytes sent: size, mtime (to
//!   the nanosecond) and the coding of the variant, e.g. `"3000-6561f0a2.1c9c3800-br"`
//!   (every field hexadecimal), so each precompressed sibling has its own.
//! - `If-None-Match` (a list, or `*`) uses the weak comparison: `W/"x"`
//!   matches `"x"`. A match answers `304`.
//! - `If-Modified-Since` is read only without `If-None-Match`; the file is
//!   unmodified when its mtime, in whole seconds, is not after the date.
//!   A date that does not parse is ignored.
//! - `If-Range` keeps a `Range` only when it holds an entity tag equal to
//!   ours by the strong comparison, or the exact `Last-Modified` date;
//!   otherwise the whole file is sent.
//! - `If-Match` and `If-Unmodified-Since` are not evaluated (they guard
//!   writes; this service only reads).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::negotiate::Coding;

/// The strong entity tag of a variant, quotes included.
pub(crate) fn etag(len: u64, mtime: SystemTime, coding: Coding) -> String {
    let since = mtime.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let mut tag = format!("\"{:x}-{:x}.{:x}", len, since.as_secs(), since.subsec_nanos());
    if let Some(name) = coding.header() {
        tag.push('-');
        tag.push_str(name);
    }
    tag.push('"');
    tag
}

/// `Last-Modified` for `mtime`.
pub(crate) fn last_modified(mtime: SystemTime) -> String {
    httpdate::fmt_http_date(mtime.max(UNIX_EPOCH))
}

/// Whether `If-None-Match: header` matches `etag` (so the answer is `304`).
pub(crate) fn none_match(header: &[u8], etag: &str) -> bool {
    if header.iter().all(|&b| b == b' ' || b == b'\t') {
        return false;
    }
    if trim(header) == b"*" {
        return true;
    }
    let ours = opaque(etag.as_bytes());
    entity_tags(header).any(|(_, tag)| tag == ours)
}

/// Whether `If-Modified-Since: header` says the client's copy is current.
pub(crate) fn not_modified_since(header: &[u8], mtime: SystemTime) -> bool {
    let Some(since) = std::str::from_utf8(header).ok().and_then(|s| httpdate::parse_http_date(s.trim()).ok())
    else {
        return false;
    };
    seconds(mtime) <= seconds(since)
}

/// Whether `If-Range: header` lets the `Range` apply.
pub(crate) fn if_range_holds(header: &[u8], etag: &str, mtime: SystemTime) -> bool {
    let value = trim(header);
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        let mut tags = entity_tags(value);
        return matches!(
            (tags.next(), tags.next()),
            (Some((false, tag)), None) if tag == opaque(etag.as_bytes())
        );
    }
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| httpdate::parse_http_date(s).ok())
        .is_some_and(|date| seconds(date) == seconds(mtime))
}

fn seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The tag between the quotes of `"..."`.
fn opaque(etag: &[u8]) -> &[u8] {
    etag.strip_prefix(b"\"").and_then(|t| t.strip_suffix(b"\"")).unwrap_or(etag)
}

/// The entity tags of a comma-separated list as (weak, opaque tag); stops
/// at the first element that is not an entity tag.
fn entity_tags(list: &[u8]) -> impl Iterator<Item = (bool, &[u8])> {
    let mut rest = list;
    std::iter::from_fn(move || {
        while let [b' ' | b'\t' | b',', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return None;
        }
        let weak = rest.starts_with(b"W/");
        if weak {
            rest = &rest[2..];
        }
        let tail = rest.strip_prefix(b"\"")?;
        let end = tail.iter().position(|&b| b == b'"')?;
        let tag = &tail[..end];
        rest = &tail[end + 1..];
        Some((weak, tag))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "\"10-5-br\"";

    #[test]
    fn etags_name_size_mtime_and_coding() {
        let t = UNIX_EPOCH + Duration::new(0x6561f0a2, 5);
        assert_eq!(etag(0x3000, t, Coding::Br), "\"3000-6561f0a2.5-br\"");
        assert_eq!(etag(16, t, Coding::Identity), "\"10-6561f0a2.5\"");
        assert_ne!(etag(16, t, Coding::Gzip), etag(16, t, Coding::Zstd));
    }

    #[test]
    fn if_none_match_uses_the_weak_comparison() {
        assert!(none_match(b"\"10-5-br\"", TAG));
        assert!(none_match(b"W/\"10-5-br\"", TAG));
        assert!(none_match(b"\"a\", W/\"b\" ,\"10-5-br\"", TAG));
        assert!(none_match(b" * ", TAG));
        assert!(!none_match(b"\"10-5\"", TAG));
        assert!(!none_match(b"", TAG));
        assert!(!none_match(b"10-5-br", TAG));
        assert!(!none_match(b"\"10-5-br", TAG));
        assert!(!none_match(b"garbage, \"10-5-br\"", TAG));
    }

    #[test]
    fn if_modified_since_compares_whole_seconds() {
        let mtime = UNIX_EPOCH + Duration::new(1_700_000_000, 500_000_000);
        let same = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let before = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_699_999_999));
        assert!(not_modified_since(same.as_bytes(), mtime));
        assert!(!not_modified_since(before.as_bytes(), mtime));
        assert!(!not_modified_since(b"yesterday", mtime));
    }

    #[test]
    fn if_range_needs_a_strong_match() {
        let mtime = UNIX_EPOCH + Duration::new(1_700_000_000, 0);
        assert!(if_range_holds(b"\"10-5-br\"", TAG, mtime));
        assert!(!if_range_holds(b"W/\"10-5-br\"", TAG, mtime));
        assert!(!if_range_holds(b"\"other\"", TAG, mtime));
        assert!(!if_range_holds(b"\"10-5-br\", \"x\"", TAG, mtime));
        assert!(if_range_holds(last_modified(mtime).as_bytes(), TAG, mtime));
        let later = last_modified(mtime + Duration::from_secs(1));
        assert!(!if_range_holds(later.as_bytes(), TAG, mtime));
        assert!(!if_range_holds(b"junk", TAG, mtime));
    }
}
