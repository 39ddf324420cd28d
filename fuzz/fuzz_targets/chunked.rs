//! The chunked-body decoder on arbitrary bytes.
//!
//! The decoder is fed whatever the socket delivered, so its result must not
//! depend on how the body was split into reads, nor on how much output the
//! caller accepts per call (streaming bodies use `decode_limited`). Each
//! input is decoded three ways — whole, split in two, and in small output
//! steps — and all three must agree on the decoded bytes, the bytes
//! consumed, and whether the body ended or why it was refused.
//!
//! Input layout: byte 0 picks the split point, byte 1 the body-size limit,
//! byte 2 the per-call output cap; the rest is the chunked body.

#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine::fuzzing::{ChunkedDecoder, ChunkedError};

/// How a decode ended: bytes consumed (complete bodies only) or the error.
/// An incomplete body is `Ok(None)`: the decoder wants more input.
type Ending = Result<Option<usize>, ChunkedError>;

struct Decoded {
    out: Vec<u8>,
    ending: Ending,
}

/// Checks what must hold after any `decode*` call and turns its result into
/// an `Ending`, given how much input the caller had fed in total.
fn check_step(
    decoder: &ChunkedDecoder,
    result: Result<peregrine::fuzzing::Progress, ChunkedError>,
    fed_before: usize,
    piece_len: usize,
    out_len: usize,
    limit: u64,
) -> Option<Ending> {
    assert!(out_len as u64 <= limit, "decoded {out_len} bytes over a limit of {limit}");
    assert_eq!(decoder.decoded(), out_len as u64);
    match result {
        Err(e) => Some(Err(e)),
        Ok(p) => {
            assert!(p.consumed <= piece_len);
            assert_eq!(p.done, decoder.is_done());
            if p.done {
                Some(Ok(Some(fed_before + p.consumed)))
            } else {
                None
            }
        }
    }
}

fn whole(body: &[u8], limit: u64) -> Decoded {
    let mut decoder = ChunkedDecoder::new(limit);
    let mut out = Vec::new();
    let result = decoder.decode(body, |c| out.extend_from_slice(c));
    if let Ok(p) = result {
        // Without an output cap the decoder stops early only at the end.
        assert!(p.done || p.consumed == body.len());
    }
    let ending = check_step(&decoder, result, 0, body.len(), out.len(), limit).unwrap_or(Ok(None));
    if let Ok(Some(_)) = ending {
        // A finished decoder ignores whatever follows (a pipelined request).
        let mut more = Vec::new();
        let again = decoder.decode(b"0\r\n\r\n", |c| more.extend_from_slice(c)).unwrap();
        assert_eq!((again.consumed, again.done, more.len()), (0, true, 0));
    }
    Decoded { out, ending }
}

fn split(body: &[u8], cut: usize, limit: u64) -> Decoded {
    let mut decoder = ChunkedDecoder::new(limit);
    let mut out = Vec::new();
    let (first, second) = body.split_at(cut);
    let result = decoder.decode(first, |c| out.extend_from_slice(c));
    if let Ok(p) = result {
        assert!(p.done || p.consumed == first.len());
    }
    if let Some(ending) = check_step(&decoder, result, 0, first.len(), out.len(), limit) {
        return Decoded { out, ending };
    }
    let result = decoder.decode(second, |c| out.extend_from_slice(c));
    if let Ok(p) = result {
        assert!(p.done || p.consumed == second.len());
    }
    let ending = check_step(&decoder, result, cut, second.len(), out.len(), limit).unwrap_or(Ok(None));
    Decoded { out, ending }
}

fn stepped(body: &[u8], max_output: usize, limit: u64) -> Decoded {
    let mut decoder = ChunkedDecoder::new(limit);
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let before = out.len();
        let result = decoder.decode_limited(&body[at..], max_output, |c| out.extend_from_slice(c));
        assert!(out.len() - before <= max_output, "handed out more than {max_output} bytes");
        if let Some(ending) = check_step(&decoder, result, at, body.len() - at, out.len(), limit) {
            return Decoded { out, ending };
        }
        let consumed = result.unwrap().consumed;
        at += consumed;
        if at == body.len() {
            return Decoded { out, ending: Ok(None) };
        }
        // With input left and a cap of at least one byte, every call must
        // make progress, or the connection would spin.
        assert!(consumed > 0, "no progress at offset {at} of {}", body.len());
    }
}

fuzz_target!(|data: &[u8]| {
    let [cut_byte, limit_byte, cap_byte, body @ ..] = data else { return };

    // Mostly a generous limit; sometimes a tiny one so `TooLarge` is common.
    let limit = if limit_byte & 0x80 == 0 { 1 << 20 } else { u64::from(limit_byte & 0x7f) };
    let cut = usize::from(*cut_byte) * (body.len() + 1) / 256;
    let max_output = 1 + usize::from(cap_byte % 16);

    let reference = whole(body, limit);
    let parts = split(body, cut, limit);
    assert_eq!(parts.ending, reference.ending, "split at {cut}");
    assert_eq!(parts.out, reference.out, "split at {cut}");

    let steps = stepped(body, max_output, limit);
    assert_eq!(steps.ending, reference.ending, "output cap {max_output}");
    assert_eq!(steps.out, reference.out, "output cap {max_output}");
});
