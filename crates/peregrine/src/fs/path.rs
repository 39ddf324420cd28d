//! From the request's path to a relative file path that cannot leave the
//! root: the first of the two guards against traversal (the second,
//! symlinks, is checked against the file system in `disk` and `memory`).
//!
//! The raw (still percent-encoded) wildcard value is decoded exactly once
//! into bytes, so `%2e%2e`, `%2E%2e` and `..%2f` are judged as the `..` and
//! `/` they stand for, and `%252e` stays the literal name `%2e`. The
//! decoded path is refused when it:
//! - is empty (the root directory itself) or starts with `/` (absolute);
//! - has an empty segment (`a//b`, or a trailing `/`: a directory);
//! - has a `.` or `..` segment;
//! - holds a backslash or a NUL byte, or is not UTF-8 once decoded;
//! - holds an invalid escape (`%zz`, a lone `%`).
//!
//! What is left is a sequence of plain names joined by `/`, which
//! `Path::join` can only append under the root.

use std::borrow::Cow;

/// The decoded, checked relative path of `raw`, or `None` when `raw`
/// cannot name a file under the root.
pub(crate) fn sanitize(raw: &str) -> Option<Cow<'_, str>> {
    let path = if raw.as_bytes().contains(&b'%') {
        Cow::Owned(String::from_utf8(decode(raw)?).ok()?)
    } else {
        // Nothing escaped: the common case borrows (no allocation).
        Cow::Borrowed(raw)
    };
    if path.is_empty() || path.bytes().any(|b| b == b'\\' || b == 0) {
        return None;
    }
    if path.split('/').any(|segment| matches!(segment, "" | "." | "..")) {
        return None;
    }
    Some(path)
}

fn decode(raw: &str) -> Option<Vec<u8>> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let high = hex(*bytes.get(i + 1)?)?;
            let low = hex(*bytes.get(i + 2)?)?;
            out.push(high << 4 | low);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn plain_names_pass_decoded() {
        assert_eq!(sanitize("app.js").as_deref(), Some("app.js"));
        assert_eq!(sanitize("css/site%20a.css").as_deref(), Some("css/site a.css"));
        assert_eq!(sanitize("%252e%252e").as_deref(), Some("%2e%2e"));
        assert_eq!(sanitize("a..b/.hidden").as_deref(), Some("a..b/.hidden"));
        assert_eq!(sanitize("%E6%97%A5.txt").as_deref(), Some("日.txt"));
    }

    #[test]
    fn anything_that_could_leave_the_root_is_refused() {
        for raw in [
            "",
            "..",
            "../Cargo.toml",
            "a/../../x",
            "%2e%2e/x",
            "%2E%2e/x",
            "..%2fx",
            "..%2Fx",
            "a/%2e%2e%2f%2e%2e/x",
            ".",
            "./x",
            "a/./b",
            "/etc/passwd",
            "%2fetc/passwd",
            "a//b",
            "dir/",
            "a\\..\\b",
            "a%5c..%5cb",
            "a%00b",
            "a\0b",
            "%",
            "%4",
            "%zz",
            "%ff",
        ] {
            assert_eq!(sanitize(raw), None, "{raw:?}");
        }
    }
}
