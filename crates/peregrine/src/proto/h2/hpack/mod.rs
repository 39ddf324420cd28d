//! HPACK, the header compression of HTTP/2 (RFC 7541): a pure codec, no I/O.
//!
//! The connection owns one [`Decoder`] (for the peer's header blocks) and
//! one [`Encoder`] (for ours); each keeps a dynamic table that must stay in
//! step with the peer's opposite half, so every block is processed whole and
//! in order, and every failure is a connection error (`COMPRESSION_ERROR`,
//! RFC 9113 §4.3).
//!
//! - `table.rs` owns the static table (Appendix A) and the dynamic table:
//!   one preallocated byte store, eviction oldest first, §4.1 sizes.
//! - `decode.rs` owns the decoder: input is attacker-controlled, so every
//!   integer, index and length is checked and fields are lent out as slices
//!   rather than copied, leaving the header-list limit (the HPACK bomb) to
//!   the caller, which sees every field's size.
//! - `encode.rs` owns the response-side encoder, tuned for speed on the hot
//!   path (raw literals, a small set of indexed names).
//! - `huffman.rs` owns the Huffman code (Appendix B) in both directions.

mod decode;
mod encode;
pub(crate) mod huffman;
mod table;

pub use decode::Decoder;
pub use encode::Encoder;

use std::fmt;

/// Every decoding failure; the connection answers each with
/// COMPRESSION_ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HpackError {
    /// The block ended inside an integer, a string or a representation, or
    /// a string's declared length runs past the block.
    Truncated,
    /// An integer is longer than the decoder accepts (beyond 32 bits).
    IntegerOverflow,
    /// Index 0, or an index past the static and dynamic tables.
    InvalidIndex,
    /// A Huffman-coded string with EOS, or padding that is too long or not
    /// all ones (§5.2).
    InvalidHuffman,
    /// A dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE.
    SizeUpdateTooLarge,
    /// A dynamic table size update after a field of the block (§4.2).
    SizeUpdateNotFirst,
    /// A decoded string longer than its encoding can produce.
    StringTooLong,
}

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HpackError::Truncated => "HPACK block truncated",
            HpackError::IntegerOverflow => "HPACK integer too large",
            HpackError::InvalidIndex => "HPACK index out of range",
            HpackError::InvalidHuffman => "invalid Huffman-coded HPACK string",
            HpackError::SizeUpdateTooLarge => "HPACK dynamic table size update above the limit",
            HpackError::SizeUpdateNotFirst => "HPACK dynamic table size update after a field",
            HpackError::StringTooLong => "HPACK string too long",
        })
    }
}

impl std::error::Error for HpackError {}

/// The tests' random numbers: xorshift64*, deterministic, no dependency.
#[cfg(test)]
pub(super) struct Rng(pub(super) u64);

#[cfg(test)]
impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
