//! Huffman coding of HPACK string literals (RFC 7541 §5.2, Appendix B).
//!
//! This module owns the code of Appendix B (as data: the code and its length
//! for each of the 256 octets, plus the 30-bit EOS) and both directions:
//!
//! - [`decode`] walks the code four bits at a time through a state table
//!   built at compile time from that data ([`DECODE`]): one lookup per nibble
//!   instead of one branch per bit, and no tree to chase at run time. The
//!   states are the 256 internal nodes of the code tree; each entry says
//!   where the nibble leads, whether it completed a symbol (at most one: the
//!   shortest code is five bits) and whether it ran into EOS or off the tree.
//! - [`encode`] packs codes into a 64-bit accumulator and pads the last
//!   octet with ones, which is the prefix of EOS that §5.2 requires.
//!
//! The response encoder writes literals raw (cheaper on CPU than coding
//! them); [`encode`] is for tests and for a later encoder that wants to save
//! bytes. The decoder must accept both, since peers Huffman-code nearly all
//! request strings.

use super::HpackError;

// RFC 7541 Appendix B: the code of each octet, right-aligned, and its
// length in bits. EOS (symbol 256) follows separately.
const CODES: [u32; 256] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8, 0xffffea,
    0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed, 0xfffffee, 0xfffffef,
    0xffffff0, 0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7,
    0xffffff8, 0xffffff9, 0xffffffa, 0xffffffb, 0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa,
    0x3fb, 0xf9, 0x7fb, 0xfa, 0x16, 0x17, 0x18, 0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    0x5c, 0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc, 0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64,
    0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd,
    0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4, 0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74,
    0x75, 0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78, 0x79, 0x7a, 0x7b, 0x7ffe,
    0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3, 0x3fffd4, 0x3fffd5,
    0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf, 0xffffec,
    0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3, 0x7fffe4, 0x1fffdc, 0x3fffd8,
    0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc,
    0x7fffe8, 0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb,
    0x7fffec, 0x1fffe0, 0x1fffe1, 0x3fffe0, 0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea,
    0x3fffe2, 0x3fffe3, 0x3fffe4, 0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb,
    0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8, 0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf,
    0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2, 0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2,
    0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8, 0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4, 0x7ffffe5, 0xfffec,
    0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7, 0x1fffe8, 0x7ffff3, 0x3fffea, 0x3fffeb, 0x1ffffee,
    0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb, 0x7ffffe6, 0x3ffffec, 0x3ffffed,
    0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb, 0xffffffe, 0x7ffffec, 0x7ffffed, 0x7ffffee,
    0x7ffffef, 0x7fffff0, 0x3ffffee,
];

const LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28,
    28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6,
    6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7,
    8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7,
    15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24,
    23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23,
    23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26,
    26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20,
    21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27,
    27, 27, 26,
];

/// EOS, symbol 256: thirty ones. Never valid inside a string (§5.2).
const EOS_CODE: u32 = 0x3fff_ffff;
const EOS_LEN: u8 = 30;

/// Marks a child that is a leaf; the low bits are the symbol (0..=256).
const LEAF: u16 = 0x8000;
/// The number of internal nodes of a complete code over 257 symbols.
const NODES: usize = 256;

/// The code tree: for each internal node, its 0-child and 1-child. A child
/// is either `LEAF | symbol` or the index of another internal node; node 0
/// is the root, which is nobody's child, so 0 also means "no child yet"
/// while building.
const fn build_tree() -> [[u16; 2]; NODES] {
    let mut tree = [[0u16; 2]; NODES];
    let mut used = 1; // node 0 is the root
    let mut sym = 0;
    while sym <= 256 {
        let (code, len) = if sym == 256 { (EOS_CODE, EOS_LEN) } else { (CODES[sym], LENGTHS[sym]) };
        let mut node = 0usize;
        let mut depth = len;
        while depth > 1 {
            depth -= 1;
            let bit = ((code >> depth) & 1) as usize;
            if tree[node][bit] == 0 {
                tree[node][bit] = used as u16;
                used += 1;
            }
            node = tree[node][bit] as usize;
        }
        tree[node][(code & 1) as usize] = LEAF | sym as u16;
        sym += 1;
    }
    tree
}

/// One step of the nibble decoder: the state after the nibble, the symbol
/// it completed (if `EMIT`), and flags.
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    sym: u8,
    flags: u8,
}

/// The nibble completed a symbol: append `sym`.
const EMIT: u8 = 1;
/// The nibble reached EOS (or, defensively, a missing child): the string is
/// malformed.
const FAIL: u8 = 2;

/// For each state, whether input may end there: the bits since the last
/// symbol are padding, which §5.2 allows only if they are at most seven and
/// all ones (the most significant bits of EOS). That is exactly the root and
/// the nodes reached from it by one to seven 1-bits.
const fn build_accept(tree: &[[u16; 2]; NODES]) -> [bool; NODES] {
    let mut accept = [false; NODES];
    accept[0] = true;
    let mut node = 0usize;
    let mut depth = 0;
    while depth < 7 {
        let child = tree[node][1];
        if child & LEAF != 0 {
            break;
        }
        node = child as usize;
        accept[node] = true;
        depth += 1;
    }
    accept
}

const fn build_decode(tree: &[[u16; 2]; NODES]) -> [[Step; 16]; NODES] {
    let mut table = [[Step { next: 0, sym: 0, flags: 0 }; 16]; NODES];
    let mut state = 0;
    while state < NODES {
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut step = Step { next: 0, sym: 0, flags: 0 };
            let mut bit = 4;
            while bit > 0 {
                bit -= 1;
                let child = tree[node][(nibble >> bit) & 1];
                if child & LEAF != 0 {
                    let sym = child & !LEAF;
                    if sym == 256 {
                        step.flags |= FAIL;
                    } else {
                        step.flags |= EMIT;
                        step.sym = sym as u8;
                    }
                    node = 0;
                } else if child == 0 {
                    step.flags |= FAIL;
                    node = 0;
                } else {
                    node = child as usize;
                }
            }
            step.next = node as u8;
            table[state][nibble] = step;
            nibble += 1;
        }
        state += 1;
    }
    table
}

const TREE: [[u16; 2]; NODES] = build_tree();
/// The nibble decoder's transitions, `DECODE[state][nibble]`.
static DECODE: [[Step; 16]; NODES] = build_decode(&TREE);
static ACCEPT: [bool; NODES] = build_accept(&TREE);

/// The most octets `len` coded octets can decode to: every code is at least
/// five bits long.
pub(crate) const fn max_decoded_len(len: usize) -> usize {
    len / 5 * 8 + (len % 5) * 8 / 5
}

/// Decodes the Huffman-coded `src`, appending to `dst`.
///
/// Fails with [`HpackError::InvalidHuffman`] on EOS in the input and on
/// padding that is longer than seven bits or not all ones (§5.2). `dst` may
/// hold part of the string on error.
pub(crate) fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), HpackError> {
    // One reservation up front: the output cannot exceed this bound, so the
    // loop never reallocates.
    dst.reserve(max_decoded_len(src.len()));
    let mut state = 0usize;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0x0f] {
            let step = DECODE[state][usize::from(nibble)];
            if step.flags & FAIL != 0 {
                return Err(HpackError::InvalidHuffman);
            }
            if step.flags & EMIT != 0 {
                dst.push(step.sym);
            }
            state = usize::from(step.next);
        }
    }
    // A final state off the all-ones path means padding with a zero in it or
    // a truncated symbol; eight or more ones leave the all-ones path's first
    // seven nodes, since the path's nodes past depth seven are not accepting.
    if ACCEPT[state] {
        Ok(())
    } else {
        Err(HpackError::InvalidHuffman)
    }
}

/// The length of `src` Huffman-coded, in octets.
#[cfg(test)]
pub(crate) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| usize::from(LENGTHS[usize::from(b)])).sum();
    bits.div_ceil(8)
}

/// Huffman-codes `src`, appending to `dst`, padded with ones (§5.2).
/// The encoder writes literals raw (see `encode.rs`); tests code with it.
#[cfg(test)]
pub(crate) fn encode(src: &[u8], dst: &mut Vec<u8>) {
    dst.reserve(encoded_len(src));
    // Codes are at most 30 bits; the accumulator holds fewer than 8 pending
    // bits between symbols, so 38 bits at most: a u64 never overflows.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in src {
        let len = u32::from(LENGTHS[usize::from(b)]);
        acc = (acc << len) | u64::from(CODES[usize::from(b)]);
        bits += len;
        while bits >= 8 {
            bits -= 8;
            dst.push((acc >> bits) as u8);
        }
        acc &= (1u64 << bits) - 1;
    }
    if bits > 0 {
        let pad = 8 - bits;
        dst.push(((acc << pad) | ((1u64 << pad) - 1)) as u8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn code_is_complete() {
        // Kraft sum of exactly one: every internal node has two children.
        let sum: u64 = LENGTHS.iter().map(|&l| 1u64 << (30 - l)).sum::<u64>() + 1;
        assert_eq!(sum, 1 << 30);
    }

    #[test]
    fn rfc_strings() {
        for (coded, plain) in [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", &b"www.example.com"[..]),
            ("a8eb 1064 9cbf", b"no-cache"),
            ("25a8 49e9 5ba9 7d7f", b"custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", b"custom-value"),
            ("640e ff", b"307"),
            ("07", b"0"),
            ("", b""),
        ] {
            let mut out = Vec::new();
            decode(&hex(coded), &mut out).unwrap();
            assert_eq!(out, plain);
            let mut enc = Vec::new();
            encode(plain, &mut enc);
            assert_eq!(enc, hex(coded));
            assert_eq!(encoded_len(plain), enc.len());
        }
    }

    #[test]
    fn every_octet_round_trips() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        let mut out = Vec::new();
        decode(&enc, &mut out).unwrap();
        assert_eq!(out, all);
        assert!(out.len() <= max_decoded_len(enc.len()));
    }

    #[test]
    fn eos_and_bad_padding_are_refused() {
        let mut out = Vec::new();
        // EOS itself (30 ones) padded with two more ones.
        assert_eq!(decode(&hex("ffff ffff"), &mut out), Err(HpackError::InvalidHuffman));
        // "0" (00000) then 3 bits of ones is fine; a full octet more of padding is not.
        assert_eq!(decode(&hex("07 ff"), &mut out), Err(HpackError::InvalidHuffman));
        assert_eq!(decode(&hex("ff"), &mut out), Err(HpackError::InvalidHuffman));
        // Padding with a zero in it: "0" then 011.
        assert_eq!(decode(&hex("03"), &mut out), Err(HpackError::InvalidHuffman));
        // A lone zero octet: a symbol's code cut short ('0' is 00000, then 000 pads).
        assert_eq!(decode(&hex("00"), &mut out), Err(HpackError::InvalidHuffman));
    }

    #[test]
    fn max_decoded_len_is_tight() {
        assert_eq!(max_decoded_len(0), 0);
        assert_eq!(max_decoded_len(5), 8);
        assert_eq!(max_decoded_len(1), 1);
        assert_eq!(max_decoded_len(4), 6);
    }
}
