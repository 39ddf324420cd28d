//! The WebSocket message reader on arbitrary client bytes.
//!
//! The reader sees whatever the socket delivered, so what it decodes (each
//! message, ping, pong and close, and the close code of the error that
//! stops it) must not depend on how the bytes were split into reads. Each
//! input is decoded whole and in reads of a size the first byte picks;
//! both must agree, with and without permessage-deflate (the second byte),
//! and nothing may panic or allocate past the message limit.
//!
//! Input layout: byte 0 the read size, byte 1 bit 0 deflate; the rest is
//! what the client sent after the handshake.

#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine::fuzzing::ws_read;

fuzz_target!(|data: &[u8]| {
    let [step, flags, input @ ..] = data else { return };
    let deflate = flags & 1 == 1;
    let whole = ws_read(input, input.len().max(1), deflate);
    let split = ws_read(input, usize::from(*step).max(1), deflate);
    assert_eq!(whole, split, "decoding depends on how the input was split");
});
