//! `Range: bytes=` requests (RFC 9110 §14.2): one range is answered with a
//! `206`; everything else the RFC lets a server ignore is ignored, and the
//! whole file is sent with a `200`.
//!
//! Rules:
//! - One range-spec: `first-last`, `first-` (to the end) or `-N` (the
//!   last N bytes). `last` past the end is cut to the end, `-N` longer than
//!   the file means the whole file (still a `206`).
//! - Unsatisfiable (`first` at or past the end, or `-0`): `416` with
//!   `Content-Range: bytes */LEN`.
//! - Ignored, whole file with `200`: a unit other than `bytes`, anything
//!   that does not parse (`bytes=abc`, `bytes=5-2`, `bytes=`), and
//!   several ranges (`bytes=0-1,3-4`, overlapping or not: a multipart
//!   answer would cost more than the whole file for the small files this
//!   serves, and RFC 9110 allows ignoring `Range` altogether).
//! - A suffix range of an empty file is answered with the whole (empty)
//!   file.
//! - Numbers too long for 64 bits saturate, so `bytes=99999999999999999999-`
//!   is unsatisfiable rather than garbage.

/// What to do about a request's `Range`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeAnswer {
    /// Send the whole file (no `Range`, or one to ignore).
    Whole,
    /// Send bytes `start..=end`.
    Part { start: u64, end: u64 },
    /// `416`.
    Unsatisfiable,
}

/// Decides the answer to `Range: header` for a file of `len` bytes.
pub(crate) fn parse(header: &[u8], len: u64) -> RangeAnswer {
    let Ok(value) = std::str::from_utf8(header) else { return RangeAnswer::Whole };
    let Some((unit, set)) = value.trim().split_once('=') else { return RangeAnswer::Whole };
    if !unit.trim().eq_ignore_ascii_case("bytes") || set.contains(',') {
        return RangeAnswer::Whole;
    }
    let Some((first, last)) = set.trim().split_once('-') else { return RangeAnswer::Whole };
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        let Some(suffix) = number(last) else { return RangeAnswer::Whole };
        return match (suffix, len) {
            (0, _) => RangeAnswer::Unsatisfiable,
            (_, 0) => RangeAnswer::Whole,
            _ => RangeAnswer::Part { start: len.saturating_sub(suffix), end: len - 1 },
        };
    }
    let Some(first) = number(first) else { return RangeAnswer::Whole };
    let last = if last.is_empty() {
        u64::MAX
    } else {
        match number(last) {
            Some(last) if last >= first => last,
            _ => return RangeAnswer::Whole,
        }
    };
    if first >= len {
        return RangeAnswer::Unsatisfiable;
    }
    RangeAnswer::Part { start: first, end: last.min(len - 1) }
}

/// A run of ASCII digits, saturating at `u64::MAX`.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, b| n.saturating_mul(10).saturating_add(u64::from(b - b'0'))))
}

#[cfg(test)]
mod tests {
    use super::RangeAnswer::*;
    use super::*;

    fn p(h: &str, len: u64) -> RangeAnswer {
        parse(h.as_bytes(), len)
    }

    #[test]
    fn single_ranges() {
        assert_eq!(p("bytes=0-0", 10), Part { start: 0, end: 0 });
        assert_eq!(p("bytes=2-5", 10), Part { start: 2, end: 5 });
        assert_eq!(p("bytes=2-50", 10), Part { start: 2, end: 9 });
        assert_eq!(p("bytes=7-", 10), Part { start: 7, end: 9 });
        assert_eq!(p("bytes=-3", 10), Part { start: 7, end: 9 });
        assert_eq!(p("bytes=-30", 10), Part { start: 0, end: 9 });
        assert_eq!(p("Bytes = 1 - 2 ", 10), Part { start: 1, end: 2 });
        assert_eq!(p("bytes=0-99999999999999999999999", 10), Part { start: 0, end: 9 });
    }

    #[test]
    fn unsatisfiable() {
        assert_eq!(p("bytes=10-", 10), Unsatisfiable);
        assert_eq!(p("bytes=10-20", 10), Unsatisfiable);
        assert_eq!(p("bytes=-0", 10), Unsatisfiable);
        assert_eq!(p("bytes=0-", 0), Unsatisfiable);
        assert_eq!(p("bytes=99999999999999999999999-", 10), Unsatisfiable);
    }

    #[test]
    fn ignored() {
        for h in [
            "",
            "bytes",
            "bytes=",
            "bytes=-",
            "bytes=abc",
            "bytes=5-2",
            "bytes=a-b",
            "bytes=1-2-3",
            "bytes=+1-2",
            "items=0-1",
            "bytes=0-1,3-4",
            "bytes=0-5,2-8",
            "bytes=0-1,",
        ] {
            assert_eq!(p(h, 10), Whole, "{h:?}");
        }
        assert_eq!(p("bytes=-5", 0), Whole);
        assert_eq!(parse(b"bytes=\xff-1", 10), Whole);
    }
}
