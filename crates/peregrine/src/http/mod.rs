//! The HTTP/1.1 wire format: request-head parsing, chunked decoding,
//! response writing and the cached `Date` header.

pub mod chunked;
pub mod date;
pub mod parse;
mod scan;
mod status;
pub mod writer;

pub use parse::{Method, Version};

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
pub use status::StatusCode;
