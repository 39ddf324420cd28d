//! The HTTP/1.1 wire format: request-head parsing, chunked decoding,
//! response writing and the cached `Date` header.

pub mod chunked;
pub mod date;
pub mod parse;
mod scan;
mod status;
pub mod writer;

pub use parse::{Method, Version};
pub use status::StatusCode;
