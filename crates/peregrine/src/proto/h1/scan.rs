//! Vectorized byte-class scans for the request parser.
//!
//! Each function finds the first byte of a class, sixteen bytes per step
//! with SSE2 (part of every x86_64 CPU, so no runtime detection is needed),
//! one byte at a time on other targets and for the last few bytes of a
//! buffer. Measured with
//! callgrind on TechEmpower's pipelined plaintext requests, scanning a head
//! one byte at a time cost about seven instructions per byte; these scans
//! cost under one.
//!
//! The header-name scan also has an SSSE3 form (`pshufb` looks up each
//! byte's nibbles in two 16-byte tables), chosen at run time with a
//! [`Ssse3`] token; the parser asks for the token once per head. On
//! pipelined plaintext (`scripts/callgrind`) it took a request from 1,713
//! to 1,570 instructions, `/json` from 3,290 to 3,158: the SSE2 form's
//! range compares had cost about 60 instructions a name, mostly because
//! it was not inlined. The header-value scan likewise has an AVX2 form, 32
//! bytes a vector, chosen with an [`Avx2`] token (1,133 to 1,081).

/// Index of the first byte at or after `from` that is a control character
/// other than HTAB (below 0x20, or 0x7F), or `None`. Header values may hold
/// anything else. Takes the whole buffer rather than `&bytes[from..]` so
/// that the last few bytes can be read in a block that starts before
/// `from`.
///
/// With an [`Avx2`] token, 32 bytes are classified per vector.
#[inline(always)]
pub(crate) fn find_value_end(bytes: &[u8], from: usize, avx2: Option<Avx2>) -> Option<usize> {
    match simd::find_value_stop(bytes, from, avx2) {
        Ok(found) => Some(found),
        Err(scanned) => bytes[scanned..].iter().position(|&b| is_value_stop(b)).map(|i| scanned + i),
    }
}

/// Index of the first byte outside visible ASCII (0x21..=0x7E), which ends
/// a request target, or `None`; and whether any byte before it is `?`,
/// `#`, `%` or `.`. A target with none of those is a plain path: no query,
/// no fragment, no escapes, no dot segments, so the parser takes it as it
/// is. Finding them in the same pass replaced a byte loop looking for `?`
/// alone, so the stricter target rules cost nothing on plain paths.
#[inline]
pub(crate) fn find_target_end(bytes: &[u8]) -> (Option<usize>, bool) {
    let (scanned, mut special) = match simd::find_target_end(bytes) {
        Ok(found) => return (Some(found.0), found.1),
        Err(partial) => partial,
    };
    for (k, &b) in bytes[scanned..].iter().enumerate() {
        if !is_visible(b) {
            return (Some(scanned + k), special);
        }
        special |= is_target_special(b);
    }
    (None, special)
}

/// Whether the `len` bytes at the start of `bytes` are a plain
/// `name[:port]`: ASCII letters, digits, `-` and `.`, then at most one `:`
/// followed by digits only. Such a value is a valid `Host` (RFC 9112
/// §3.2); `false` only means "not known here" (a value of more than 16
/// bytes, fewer than 16 bytes left in the buffer, or other characters), and
/// the caller then applies the whole grammar.
///
/// One 16-byte block and a few mask operations. Measured with callgrind
/// (`scripts/callgrind`) on pipelined plaintext, this check together with
/// the target scan of `find_target_end` took a request from 1,761-1,764
/// instructions to 1,738-1,740 (the `?` byte loop it replaced cost more
/// than both); a byte loop over the whole grammar had cost +197 (11%).
/// `/json` stayed within noise (3,284-3,290 before, 3,290-3,295 after).
#[inline(always)]
pub(crate) fn is_plain_host(bytes: &[u8], len: usize) -> bool {
    if len > 16 {
        return false;
    }
    let Some((class, colon, digit_or_colon)) = simd::host_classes(bytes) else { return false };
    let within = (1u32 << len) - 1;
    if class & within != within {
        return false;
    }
    let colon = colon & within;
    if colon == 0 {
        return true;
    }
    if colon & (colon - 1) != 0 {
        return false;
    }
    // Every byte after the colon must be a digit.
    let after = within & !((colon << 1) - 1);
    digit_or_colon & !colon & after == after
}

#[inline]
fn is_target_special(b: u8) -> bool {
    matches!(b, b'?' | b'#' | b'%' | b'.')
}

/// Proof that the CPU supports SSSE3 (`pshufb`): made only by
/// [`Ssse3::detect`], so code holding one may use SSSE3 instructions.
///
/// The parser asks once per head and passes the answer down: asked per
/// header name (std caches the answer, but a call that checks it could no
/// longer be inlined), detection and the call cost about 20 instructions
/// a name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ssse3(());

impl Ssse3 {
    /// `Some` if this CPU has SSSE3.
    #[inline]
    pub(crate) fn detect() -> Option<Ssse3> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("ssse3") {
            return Some(Ssse3(()));
        }
        None
    }
}

/// Proof that the CPU supports AVX2 (and so SSSE3): made only by
/// [`Avx2::detect`].
///
/// The header-value scan uses it for 32-byte vectors: TechEmpower's
/// 90-byte `Accept` value takes three 32-byte steps either way, at 9
/// instructions each instead of 17. With the parser compiled for AVX2
/// (whose three-operand forms also drop register copies elsewhere), a
/// pipelined plaintext request went from 1,133 to 1,081 instructions and
/// `/json` from 2,948 to 2,880 (`scripts/callgrind`); the parse alone from
/// 612 to 563.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// `Some` if this CPU has AVX2.
    #[inline]
    pub(crate) fn detect() -> Option<Avx2> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Some(Avx2(()));
        }
        None
    }

    /// Every CPU with AVX2 has SSSE3.
    #[inline]
    pub(crate) fn ssse3(self) -> Ssse3 {
        Ssse3(())
    }
}

/// Index of the first byte that is not a `tchar` (RFC 9110 §5.6.2), or
/// `None`: where a header name ends, at its `:` if it is well formed. Every
/// byte before it is a token character, so the caller checks only that
/// byte (checking the name again byte by byte was about 100 of the 1,760
/// instructions of a pipelined plaintext request).
///
/// With a [`Ssse3`] token, each block is classified with `pshufb`.
#[inline(always)]
pub(crate) fn find_name_end(bytes: &[u8], ssse3: Option<Ssse3>) -> Option<usize> {
    match simd::find_name_end(bytes, ssse3) {
        Ok(found) => Some(found),
        Err(scanned) => bytes[scanned..].iter().position(|&b| is_name_stop(b)).map(|i| scanned + i),
    }
}

#[inline]
fn is_name_stop(b: u8) -> bool {
    !crate::http::TCHAR[b as usize]
}

#[inline]
fn is_value_stop(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7f
}

#[inline]
fn is_visible(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::{
        __m128i, __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8, _mm_add_epi8, _mm_and_si128, _mm_andnot_si128, _mm_cmpeq_epi8,
        _mm_cmplt_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_setzero_si128, _mm_shuffle_epi8, _mm_srli_epi16, _mm_sub_epi8,
    };

    /// `Ok(index)` of the first value stop at or after `from`, or
    /// `Err(scanned)`: no stop from `from` up to `scanned`, and the bytes
    /// left after it (fewer than 16) are for the caller's byte loop; that
    /// happens only in a buffer of fewer than 16 bytes.
    ///
    /// Two blocks a step while 32 bytes remain, and HTAB is sifted out
    /// only when a block holds a candidate (it is rare in values): per
    /// 16 bytes that is half the loop and two vector operations fewer.
    #[inline(always)]
    pub(crate) fn find_value_stop(
        bytes: &[u8],
        from: usize,
        avx2: Option<super::Avx2>,
    ) -> Result<usize, usize> {
        match avx2 {
            // SAFETY: an `Avx2` is made only where the CPU has AVX2.
            Some(_) => unsafe { find_value_stop_avx2(bytes, from) },
            None => find_value_stop_sse2(bytes, from),
        }
    }

    /// The first candidate in `mask` (bytes from `at`) that is not HTAB,
    /// if any.
    #[inline(always)]
    fn first_stop(bytes: &[u8], at: usize, mut mask: u32) -> Option<usize> {
        while mask != 0 {
            let k = at + mask.trailing_zeros() as usize;
            if bytes[k] != b'\t' {
                return Some(k);
            }
            mask &= mask - 1;
        }
        None
    }

    /// [`find_value_stop`] with 32-byte AVX2 vectors while 32 bytes
    /// remain, then the SSE2 form for the rest. Not a `target_feature`
    /// function, for the reason given at `find_name_end_ssse3`: inlined
    /// into `parse_in_avx2`.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[inline(always)]
    unsafe fn find_value_stop_avx2(bytes: &[u8], from: usize) -> Result<usize, usize> {
        let mut i = from;
        while i + 32 <= bytes.len() {
            // SAFETY: `i + 32 <= bytes.len()`, so the 32 bytes read are in
            // bounds; `_mm256_loadu_si256` has no alignment requirement;
            // AVX2 is available (this function's contract).
            let mask = unsafe {
                let v = _mm256_loadu_si256(bytes.as_ptr().add(i).cast::<__m256i>());
                // b <= 0x1F  <=>  min(b, 0x1F) == b (unsigned).
                let ctl = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1f)), v);
                let del = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(0x7f));
                _mm256_movemask_epi8(_mm256_or_si256(ctl, del)) as u32
            };
            if mask != 0 {
                if let Some(found) = first_stop(bytes, i, mask) {
                    return Ok(found);
                }
            }
            i += 32;
        }
        find_value_stop_sse2(bytes, i)
    }

    /// [`find_value_stop`] with SSE2.
    #[inline(always)]
    fn find_value_stop_sse2(bytes: &[u8], from: usize) -> Result<usize, usize> {
        // Control characters (HTAB included) and DEL, as a bit mask.
        #[inline(always)]
        fn candidates(v: __m128i) -> u32 {
            // SAFETY: SSE2 is part of the x86_64 baseline.
            unsafe {
                // b <= 0x1F  <=>  min(b, 0x1F) == b (unsigned).
                let ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
                let del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
                _mm_movemask_epi8(_mm_or_si128(ctl, del)) as u32
            }
        }
        let mut i = from;
        while i + 32 <= bytes.len() {
            // SAFETY: `i + 32 <= bytes.len()`, so both 16-byte reads are in
            // bounds; `_mm_loadu_si128` has no alignment requirement.
            let (a, b) = unsafe {
                let p = bytes.as_ptr().add(i);
                (_mm_loadu_si128(p.cast::<__m128i>()), _mm_loadu_si128(p.add(16).cast::<__m128i>()))
            };
            let mask = candidates(a) | candidates(b) << 16;
            if mask != 0 {
                if let Some(found) = first_stop(bytes, i, mask) {
                    return Ok(found);
                }
            }
            i += 32;
        }
        while i + 16 <= bytes.len() {
            // SAFETY: `i + 16 <= bytes.len()`, so the 16 bytes read are in
            // bounds; `_mm_loadu_si128` has no alignment requirement.
            let v = unsafe { _mm_loadu_si128(bytes.as_ptr().add(i).cast::<__m128i>()) };
            let mask = candidates(v);
            if mask != 0 {
                if let Some(found) = first_stop(bytes, i, mask) {
                    return Ok(found);
                }
            }
            i += 16;
        }
        // Fewer than 16 bytes left: where the buffer holds 16 in all, the
        // last block ends at its end and overlaps bytes before `i`, which
        // the shift drops. A head ends this way whenever nothing
        // follows it in the buffer (every unpipelined request), and the
        // byte loop this replaced cost about 110 instructions there.
        if i < bytes.len() && bytes.len() >= 16 {
            let last_block = bytes.len() - 16;
            // SAFETY: `last_block + 16 == bytes.len()`, so the 16 bytes read
            // are in bounds; `_mm_loadu_si128` has no alignment requirement.
            let v = unsafe { _mm_loadu_si128(bytes.as_ptr().add(last_block).cast::<__m128i>()) };
            let mask = candidates(v) >> (i - last_block);
            return match first_stop(bytes, i, mask) {
                Some(found) => Ok(found),
                None => Err(bytes.len()),
            };
        }
        Err(i)
    }

    /// Like [`find_value_stop`], for the first byte that is not a tchar:
    /// outside 0x21..=0x7E, or one of the delimiters `"(),/:;<=>?@[\]{}`.
    /// With SSSE3, a table lookup of each nibble classifies a block in
    /// eight vector operations; without it, range compares take about
    /// twenty-five.
    #[inline(always)]
    pub(crate) fn find_name_end(bytes: &[u8], ssse3: Option<super::Ssse3>) -> Result<usize, usize> {
        match ssse3 {
            // SAFETY: a `Ssse3` is made only where the CPU has SSSE3.
            Some(_) => unsafe { find_name_end_ssse3(bytes) },
            None => find_name_end_sse2(bytes),
        }
    }

    /// For each low nibble, the high nibbles (bit `h` for `0..=7`) that
    /// make a tchar with it: `b` is a tchar iff
    /// `NAME_BY_LOW[b & 15] & NAME_HIGH_BIT[b >> 4] != 0`.
    const NAME_BY_LOW: [u8; 16] = {
        let mut table = [0u8; 16];
        let mut b = 0;
        while b < 128 {
            if crate::http::TCHAR[b] {
                table[b & 15] |= 1 << (b >> 4);
            }
            b += 1;
        }
        table
    };
    /// `1 << h` for the high nibbles of ASCII, 0 for the rest (no byte
    /// of 0x80 and above is a tchar).
    const NAME_HIGH_BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 0, 0, 0, 0, 0, 0, 0, 0];

    /// [`find_name_end`] with `pshufb`. Not a `target_feature` function,
    /// which could not be inlined into the header loop: always inlined
    /// instead, into a caller compiled for SSSE3 (`parse_in_ssse3`),
    /// where the intrinsics inline too.
    ///
    /// # Safety
    /// The CPU must support SSSE3.
    #[inline(always)]
    unsafe fn find_name_end_ssse3(bytes: &[u8]) -> Result<usize, usize> {
        // SAFETY: SSSE3 is available (this function's contract); the
        // tables are 16 bytes each, and loads have no alignment
        // requirement.
        let (by_low, high_bit, nibble) = unsafe {
            (
                _mm_loadu_si128(NAME_BY_LOW.as_ptr().cast::<__m128i>()),
                _mm_loadu_si128(NAME_HIGH_BIT.as_ptr().cast::<__m128i>()),
                _mm_set1_epi8(0x0f),
            )
        };
        let mut i = 0;
        while i + 16 <= bytes.len() {
            // SAFETY: `i + 16 <= bytes.len()`, so the 16 bytes read are in
            // bounds; SSSE3 is available (this function's contract).
            let stops = unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr().add(i).cast::<__m128i>());
                let low = _mm_shuffle_epi8(by_low, _mm_and_si128(v, nibble));
                let high = _mm_shuffle_epi8(high_bit, _mm_and_si128(_mm_srli_epi16(v, 4), nibble));
                _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(low, high), _mm_setzero_si128()))
            };
            if stops != 0 {
                return Ok(i + stops.trailing_zeros() as usize);
            }
            i += 16;
        }
        Err(i)
    }

    /// [`find_name_end`] with SSE2 alone: range and equality compares.
    fn find_name_end_sse2(bytes: &[u8]) -> Result<usize, usize> {
        let mut i = 0;
        while i + 16 <= bytes.len() {
            // SAFETY: as in `find_value_stop`.
            let name = unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr().add(i).cast::<__m128i>());
                let eq = |b: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8));
                // `lo..=hi`: v - lo <= hi - lo, unsigned.
                let within = |lo: u8, hi: u8| {
                    let shifted = _mm_sub_epi8(v, _mm_set1_epi8(lo as i8));
                    _mm_cmpeq_epi8(_mm_min_epu8(shifted, _mm_set1_epi8((hi - lo) as i8)), shifted)
                };
                let visible = within(0x21, 0x7e);
                let delimiters = _mm_or_si128(
                    _mm_or_si128(
                        _mm_or_si128(eq(b'"'), within(b'(', b')')),
                        _mm_or_si128(eq(b','), eq(b'/')),
                    ),
                    _mm_or_si128(
                        _mm_or_si128(within(b':', b'@'), within(b'[', b']')),
                        _mm_or_si128(eq(b'{'), eq(b'}')),
                    ),
                );
                _mm_movemask_epi8(_mm_andnot_si128(delimiters, visible))
            };
            if name != 0xffff {
                return Ok(i + (!name).trailing_zeros() as usize);
            }
            i += 16;
        }
        Err(i)
    }

    /// Like [`find_value_stop`], for the first byte outside 0x21..=0x7E,
    /// with whether a `?`, `#`, `%` or `.` comes before it (in `Err` too:
    /// whether one came in the bytes scanned).
    #[inline]
    pub(crate) fn find_target_end(bytes: &[u8]) -> Result<(usize, bool), (usize, bool)> {
        let mut i = 0;
        let mut special = false;
        while i + 16 <= bytes.len() {
            // SAFETY: as in `find_value_stop`.
            let (visible, marks) = unsafe {
                let v = _mm_loadu_si128(bytes.as_ptr().add(i).cast::<__m128i>());
                let at_least = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x21)), v);
                let at_most = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x7e)), v);
                let query_or_fragment = _mm_or_si128(
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'?' as i8)),
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'#' as i8)),
                );
                let escape_or_dot = _mm_or_si128(
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'%' as i8)),
                    _mm_cmpeq_epi8(v, _mm_set1_epi8(b'.' as i8)),
                );
                (
                    _mm_movemask_epi8(_mm_and_si128(at_least, at_most)),
                    _mm_movemask_epi8(_mm_or_si128(query_or_fragment, escape_or_dot)),
                )
            };
            if visible != 0xffff {
                let end = (!visible).trailing_zeros();
                let before = marks & ((1 << end) - 1);
                return Ok((i + end as usize, special || before != 0));
            }
            special |= marks != 0;
            i += 16;
        }
        Err((i, special))
    }

    /// For the first 16 bytes of `bytes` (`None` if there are fewer): the
    /// masks of bytes that are letters, digits, `-`, `.` or `:`; of `:`;
    /// and of digits or `:`.
    #[inline(always)]
    pub(crate) fn host_classes(bytes: &[u8]) -> Option<(u32, u32, u32)> {
        if bytes.len() < 16 {
            return None;
        }
        // SAFETY: the 16 bytes read are in bounds (checked above);
        // `_mm_loadu_si128` has no alignment requirement; SSE2 is part of
        // the x86_64 baseline.
        let masks = unsafe {
            let v = _mm_loadu_si128(bytes.as_ptr().cast::<__m128i>());
            // `lo..=hi` in one add and one signed compare: the add moves
            // `lo` to -128, so the range becomes -128..-128 + (hi - lo + 1).
            let in_range = |lo: u8, hi: u8, x: __m128i| {
                _mm_cmplt_epi8(
                    _mm_add_epi8(x, _mm_set1_epi8(0x80u8.wrapping_sub(lo) as i8)),
                    _mm_set1_epi8((hi - lo) as i8 - 127),
                )
            };
            // OR-ing 0x20 folds upper-case letters onto lower-case ones and
            // moves no other byte into `a..=z`.
            let letter = in_range(b'a', b'z', _mm_or_si128(v, _mm_set1_epi8(0x20)));
            let digit_or_colon = in_range(b'0', b':', v);
            let dash_or_dot = in_range(b'-', b'.', v);
            let colon = _mm_cmpeq_epi8(v, _mm_set1_epi8(b':' as i8));
            (
                _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(letter, digit_or_colon), dash_or_dot)) as u32,
                _mm_movemask_epi8(colon) as u32,
                _mm_movemask_epi8(digit_or_colon) as u32,
            )
        };
        Some(masks)
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    #[inline(always)]
    pub(crate) fn find_value_stop(_: &[u8], from: usize, _: Option<super::Avx2>) -> Result<usize, usize> {
        Err(from)
    }

    #[inline]
    pub(crate) fn find_target_end(_: &[u8]) -> Result<(usize, bool), (usize, bool)> {
        Err((0, false))
    }

    #[inline(always)]
    pub(crate) fn host_classes(_: &[u8]) -> Option<(u32, u32, u32)> {
        None
    }

    #[inline]
    pub(crate) fn find_name_end(_: &[u8], _: Option<super::Ssse3>) -> Result<usize, usize> {
        Err(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_and_scalar_agree_for_every_byte_at_every_position() {
        for len in [1usize, 15, 16, 17, 31, 32, 33, 64] {
            for pos in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[pos] = b;
                    assert_value_scans_agree(&bytes);
                    assert_name_paths_agree(&bytes);
                    let scalar_end = bytes.iter().position(|&c| !is_visible(c));
                    let scalar_special =
                        bytes[..scalar_end.unwrap_or(len)].iter().any(|&c| is_target_special(c));
                    assert_eq!(
                        find_target_end(&bytes),
                        (scalar_end, scalar_special),
                        "target: byte {b:#x} at {pos} of {len}"
                    );
                }
            }
        }
    }

    /// The value scan from every offset against the byte rule, with and
    /// (where the CPU has it) without AVX2.
    fn assert_value_scans_agree(bytes: &[u8]) {
        for from in 0..=bytes.len() {
            let scalar = bytes[from..].iter().position(|&c| is_value_stop(c)).map(|k| from + k);
            assert_eq!(find_value_end(bytes, from, None), scalar, "value from {from}: {bytes:?}");
            if let Some(token) = Avx2::detect() {
                assert_eq!(find_value_end(bytes, from, Some(token)), scalar, "AVX2, from {from}: {bytes:?}");
            }
        }
    }

    /// Every implementation of the name scan (SSE2 without a token, and
    /// SSSE3 with one where the CPU has it) against the byte rule.
    fn assert_name_paths_agree(bytes: &[u8]) {
        let scalar = bytes.iter().position(|&c| is_name_stop(c));
        assert_eq!(find_name_end(bytes, None), scalar, "without SSSE3: {bytes:?}");
        if let Some(token) = Ssse3::detect() {
            assert_eq!(find_name_end(bytes, Some(token)), scalar, "with SSSE3: {bytes:?}");
        }
    }

    /// Random buffers, mostly tchars with now and then anything, so stops
    /// land at every offset of a block and past it.
    #[test]
    fn name_scans_agree_on_random_input() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = (next() % 80) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = next();
                    if r % 23 == 0 {
                        (r >> 8) as u8
                    } else {
                        b"abcXYZ019!#$%&'*+-.^_`|~"[(r >> 8) as usize % 24]
                    }
                })
                .collect();
            assert_name_paths_agree(&bytes);
            assert_value_scans_agree(&bytes);
        }
    }

    /// The grammar's verdict on a value that passes the fast check is
    /// always "valid", and every byte at every position of a plain
    /// `name:port` is classified as the scalar rule would.
    #[test]
    fn plain_host_agrees_with_the_grammar() {
        let mut candidates: Vec<Vec<u8>> = Vec::new();
        for base in ["localhost:8080", "a.b-c:1", "tfb-server:8080", "127.0.0.1:18099", "abcdefghijklmnop"] {
            for pos in 0..base.len() {
                for b in 0..=255u8 {
                    let mut v = base.as_bytes().to_vec();
                    v[pos] = b;
                    candidates.push(v);
                }
            }
        }
        for value in candidates {
            let mut buf = value.clone();
            buf.extend_from_slice(b"\r\n\r\nGET / HTTP/1.1\r\n");
            let plain = is_plain_host(&buf, value.len());
            let simple = {
                let (name, port) = match value.iter().position(|&b| b == b':') {
                    Some(c) => (&value[..c], Some(&value[c + 1..])),
                    None => (&value[..], None),
                };
                name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
                    && port.is_none_or(|p| p.iter().all(u8::is_ascii_digit))
            };
            #[cfg(target_arch = "x86_64")]
            assert_eq!(plain, simple, "{:?}", String::from_utf8_lossy(&value));
            if plain {
                assert!(crate::http::uri::valid_host(&value), "{:?}", String::from_utf8_lossy(&value));
            }
        }
        // Too little buffer left, or too long a value: not decided here.
        assert!(!is_plain_host(b"localhost", 9));
        assert!(!is_plain_host(b"a-very-long-host-name.example:8080\r\n\r\n", 34));
    }
}
