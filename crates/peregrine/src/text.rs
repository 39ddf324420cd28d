//! UTF-8 checks for text that is almost always ASCII: WebSocket text
//! messages and PostgreSQL text columns.
//!
//! `str::from_utf8` validates byte by byte until it finds an aligned run
//! it can take a word at a time, so a short string costs a few
//! instructions per byte: 75 of a 5-byte WebSocket echo's, and 1,960 of a
//! `/fortunes` request's 25,788 (its twelve messages, about 660 bytes).
//! `is_ascii` takes the common case a word at a time.

/// `bytes` as text, if they are UTF-8: ASCII checked first, then full
/// validation.
pub(crate) fn utf8(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: every byte is ASCII, and ASCII is valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::utf8;

    #[test]
    fn ascii_multibyte_and_invalid_input_are_told_apart() {
        assert_eq!(utf8(b"fortune: No such file or directory"), Some("fortune: No such file or directory"));
        let japanese = "フレームワークのベンチマーク";
        assert_eq!(utf8(japanese.as_bytes()), Some(japanese));
        assert_eq!(utf8(b""), Some(""));
        // A lone continuation byte, an overlong '/', a truncated sequence,
        // and a surrogate: each invalid, after an ASCII prefix.
        for bad in [&b"abc\x80"[..], b"abc\xc0\xaf", b"abc\xe3\x83", b"abc\xed\xa0\x80"] {
            assert_eq!(utf8(bad), None, "{bad:?}");
        }
    }
}
