//! The HPACK decoder on arbitrary header blocks, and the encoder against it.
//!
//! A connection's decoder sees block after block from the peer, its dynamic
//! table carried from one to the next, and must never panic whatever they
//! hold. Every block it accepts is encoded again with our encoder and
//! decoded by a second decoder kept for the whole input, as the peer's
//! would be: the same fields must come out, which checks that encoder and
//! decoder keep their tables in step (indexing, eviction, size updates).
//!
//! Input layout: a sequence of blocks, each a length byte and that many
//! bytes (the last may be short). A length byte of 255 is not a block: the
//! byte after it times 32 becomes the peer's new SETTINGS_HEADER_TABLE_SIZE
//! for the encoder.

#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine::fuzzing::{Decoder, Encoder};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn decode(decoder: &mut Decoder, block: &[u8]) -> Option<Fields> {
    let mut fields = Vec::new();
    decoder.decode(block, &mut |name, value| fields.push((name.to_vec(), value.to_vec()))).ok()?;
    Some(fields)
}

fuzz_target!(|data: &[u8]| {
    let mut decoder = Decoder::new(4096);
    let mut encoder = Encoder::new();
    let mut peer = Decoder::new(4096);
    let mut out = Vec::new();
    let mut rest = data;
    while let [len, tail @ ..] = rest {
        if *len == 255 {
            let [size, tail @ ..] = tail else { return };
            encoder.set_max_table_size(usize::from(*size) * 32);
            rest = tail;
            continue;
        }
        let (block, tail) = tail.split_at(usize::from(*len).min(tail.len()));
        rest = tail;
        // A failed block ends the connection (COMPRESSION_ERROR).
        let Some(fields) = decode(&mut decoder, block) else { return };
        out.clear();
        encoder.begin_block(&mut out);
        for (name, value) in &fields {
            encoder.field(name, value, &mut out);
        }
        let again = decode(&mut peer, &out).expect("our own block decodes");
        assert_eq!(again, fields, "re-encoded block decodes differently");
    }
});
