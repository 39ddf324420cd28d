//! Rules for the header fields a response may carry, shared by every
//! protocol's encoder so that none of them can be made to inject a header.

use crate::http::TCHAR;

/// Whether `name: value` may be written as a response header: the name is
/// an HTTP token and the value holds no CR, LF or NUL (which would end the
/// field early and let the rest be read as another header, or a body).
///
/// Every header of every response passes here, so both checks are cheap: a
/// table lookup per name byte, and a branch-free pass over the value that
/// the compiler vectorizes (`memchr3` cost more on values this short: 620
/// instructions for a static file's five headers, callgrind).
#[inline]
pub(crate) fn is_valid_header(name: &str, value: &str) -> bool {
    let breaks = value.bytes().fold(false, |found, b| found | (b == b'\r') | (b == b'\n') | (b == 0));
    is_token(name) && !breaks
}

/// Whether `s` is an HTTP token (RFC 9110 §5.6.2).
#[inline]
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| TCHAR[b as usize])
}

/// Headers the server writes itself; a handler setting them would produce a
/// duplicate or a lie, so they are ignored.
pub(crate) fn is_managed_header(name: &str) -> bool {
    ["content-length", "transfer-encoding", "date", "server", "connection"]
        .iter()
        .any(|m| name.eq_ignore_ascii_case(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_could_inject() {
        assert!(is_valid_header("X-Id", "abc def\t1"));
        assert!(!is_valid_header("X-Id", "a\r\nSet-Cookie: x"));
        assert!(!is_valid_header("X-Id", "a\nb"));
        assert!(!is_valid_header("X-Id", "a\0b"));
        assert!(!is_valid_header("X Id", "a"));
        assert!(!is_valid_header("X-Id:", "a"));
        assert!(!is_valid_header("", "a"));
    }

    #[test]
    fn the_token_table_is_rfc_9110_tchar() {
        for b in 0..=255u8 {
            let tchar = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(TCHAR[b as usize], tchar, "byte {b}");
        }
    }
}
