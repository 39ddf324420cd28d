//! Protocol-neutral HTTP vocabulary: [`Method`], [`Version`],
//! [`StatusCode`], the `Date` value every response carries, and the
//! grammar rules for `Host` and paths every protocol applies ([`uri`]).
//!
//! What any protocol's codec (see [`crate::proto`]) produces and consumes;
//! the router, extractors and handlers see only these types.

// `pub` items for the `fuzzing` feature, as in `proto::h1`.
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
pub(crate) mod date;
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
mod header;
mod method;
mod status;
pub(crate) mod uri;

#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
pub use header::Header;
pub use method::{Method, Version};
pub use status::StatusCode;

/// `tchar` of RFC 9110 §5.6.2: the bytes of methods and header names.
pub(crate) const TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    table
};

/// The value of one hexadecimal digit (either case).
#[inline]
pub(crate) fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}
