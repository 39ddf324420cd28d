//! The grammar checks on a request's `Host` and path that every protocol
//! shares: pure functions over bytes, no I/O, no allocation.
//!
//! # Host (RFC 9112 §3.2, RFC 3986 §3.2.2)
//! A `Host` value must be `uri-host [ ":" port ]`: a `reg-name` (unreserved
//! characters, sub-delims and `%XX` escapes), an IPv4 address (a reg-name
//! too, grammatically) or a bracketed IPv6 / IPvFuture literal, then
//! optionally `:` and digits. An empty value is allowed (a target without
//! an authority). Anything else — `@` userinfo, a path, spaces, a second
//! `:` outside brackets — is refused with `400`.
//!
//! # Paths: refuse, never normalise
//! Two spellings of one path are a classic way past a front proxy's or a
//! router's rules (`/admin` forbidden upstream, `/./admin` or `/%61dmin`
//! served here). Rather than normalise (which would mean copying the path
//! and routing something other than what was sent), a path is refused with
//! `400` when it holds:
//! - a dot segment: `.` or `..` between slashes or at the end
//!   (`/a/./b`, `/a/..`); a name merely containing dots (`/a..b`,
//!   `/.well-known`) is fine;
//! - a percent-encoded unreserved character (`%41` for `A`, `%2E` for `.`,
//!   `%7E` for `~`, ...), which RFC 3986 §2.3 says must be sent decoded;
//! - a malformed escape (`%`, `%4`, `%zz`).
//!
//! Escapes of reserved or non-ASCII bytes (`%2F`, `%20`, `%E6`) pass: they
//! mean something different from the decoded byte. Every path a handler
//! sees is therefore already in the one canonical spelling, and
//! [`ServeDir`](crate::fs::ServeDir) applies the same rule before its own
//! traversal guards.

use super::hex_digit;

/// Why a path breaks the rule of this module.
pub(crate) fn path_error(path: &[u8]) -> Option<&'static str> {
    let mut i = 0;
    // Each iteration starts at a segment's first byte (after a `/`).
    while i < path.len() {
        let end = path[i..].iter().position(|&b| b == b'/').map_or(path.len(), |p| i + p);
        let segment = &path[i..end];
        if segment == b"." || segment == b".." {
            return Some("dot segment in path");
        }
        let mut j = 0;
        while let Some(p) = segment[j..].iter().position(|&b| b == b'%') {
            let at = j + p;
            let (Some(high), Some(low)) = (
                segment.get(at + 1).copied().and_then(hex_digit),
                segment.get(at + 2).copied().and_then(hex_digit),
            ) else {
                return Some("invalid percent-encoding in path");
            };
            if is_unreserved(high << 4 | low) {
                return Some("percent-encoded unreserved character in path");
            }
            j = at + 3;
        }
        i = end + 1;
    }
    None
}

/// `unreserved` of RFC 3986 §2.3.
#[inline]
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `sub-delims` of RFC 3986 §2.2.
#[inline]
fn is_sub_delim(b: u8) -> bool {
    matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=')
}

/// Whether `value` is `uri-host [ ":" port ]` (RFC 9112 §3.2).
pub(crate) fn valid_host(value: &[u8]) -> bool {
    let (host, port) = if let Some(rest) = value.strip_prefix(b"[") {
        let Some(close) = rest.iter().position(|&b| b == b']') else { return false };
        if !valid_ip_literal(&rest[..close]) {
            return false;
        }
        match &rest[close + 1..] {
            [] => return true,
            [b':', port @ ..] => (&[][..], port),
            _ => return false,
        }
    } else {
        match value.iter().position(|&b| b == b':') {
            Some(colon) => (&value[..colon], &value[colon + 1..]),
            None => (value, &[][..]),
        }
    };
    port.iter().all(u8::is_ascii_digit) && valid_reg_name(host)
}

/// `reg-name` of RFC 3986 §3.2.2 (which an IPv4 address also matches).
fn valid_reg_name(name: &[u8]) -> bool {
    let mut i = 0;
    while i < name.len() {
        let b = name[i];
        if b == b'%' {
            if name.get(i + 1).copied().and_then(hex_digit).is_none()
                || name.get(i + 2).copied().and_then(hex_digit).is_none()
            {
                return false;
            }
            i += 3;
        } else if is_unreserved(b) || is_sub_delim(b) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// What is inside `[...]`: an IPv6 address or `v` HEX `.` then
/// unreserved / sub-delims / `:` (IPvFuture).
fn valid_ip_literal(inner: &[u8]) -> bool {
    if let [b'v' | b'V', rest @ ..] = inner {
        let Some(dot) = rest.iter().position(|&b| b == b'.') else { return false };
        return dot > 0
            && rest[..dot].iter().all(u8::is_ascii_hexdigit)
            && rest.len() > dot + 1
            && rest[dot + 1..].iter().all(|&b| is_unreserved(b) || is_sub_delim(b) || b == b':');
    }
    // The standard library's parser takes exactly RFC 4291's text forms
    // (and no zone identifier, which RFC 3986 does not allow either).
    std::str::from_utf8(inner).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_by_the_grammar() {
        for ok in [
            "",
            "localhost",
            "localhost:8080",
            "127.0.0.1:18099",
            "tfb-server:8080",
            "Example.COM",
            "a.b-c_d~e",
            "xn--nxasmq6b.example",
            "%41b.example",
            "sub!$&'()*+,;=delims",
            "host:",
            ":80",
            "[::1]",
            "[::1]:443",
            "[2001:db8::8:800:200c:417a]:8080",
            "[v1.fe80::a+en1]",
        ] {
            assert!(valid_host(ok.as_bytes()), "{ok:?} should be valid");
        }
        for bad in [
            "a b",
            "user@host",
            "host/path",
            "host?x",
            "host#frag",
            "a:b:c",
            "host:8o",
            "host:80:80",
            "[::1",
            "::1",
            "[::1]x",
            "[::1]:8a",
            "[zz::1]",
            "[fe80::1%25eth0]",
            "[v.x]",
            "[v1.]",
            "%4",
            "%zz.example",
            "a\\b",
            "a\"b",
            "a<b>",
            "a{b}",
            "a|b",
            "a^b",
            "a`b",
            "\u{e9}t\u{e9}.example",
        ] {
            assert!(!valid_host(bad.as_bytes()), "{bad:?} should be refused");
        }
    }

    #[test]
    fn path_rule() {
        for ok in [
            "/",
            "/plaintext",
            "/a/b/",
            "/a..b/.hidden/...",
            "/.well-known/x",
            "/a%2Fb",
            "/a%20b",
            "/%E6%97%A5",
            "/a%25b",
            "*",
            "//double",
        ] {
            assert_eq!(path_error(ok.as_bytes()), None, "{ok:?}");
        }
        for bad in [
            "/.",
            "/..",
            "/./a",
            "/a/../b",
            "/a/.",
            "/a/..",
            "/%2e%2e/x",
            "/%2E/x",
            "/%41dmin",
            "/a%7eb",
            "/a%5Fb",
            "/a%2db",
            "/%30",
            "/%",
            "/%4",
            "/%zz",
            "/a%g0",
        ] {
            assert!(path_error(bad.as_bytes()).is_some(), "{bad:?}");
        }
    }
}
