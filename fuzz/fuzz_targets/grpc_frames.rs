//! The gRPC codec on arbitrary request bodies and header values.
//!
//! Splitting a body into messages must never panic, never hand out a
//! message over the limit, and account for every byte: the messages and
//! their prefixes add up to the body unless an error ended the split.
//! Re-framing the messages gives the same bytes back. `grpc-timeout`
//! parsing takes any bytes, and `grpc-message` encoding always yields
//! printable ASCII.
//!
//! Input layout: byte 0 picks the message limit (0..=255 bytes); the rest
//! is the body, also tried as a `grpc-timeout` value and a message.

#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine::grpc::codec::{encode_message, frames, parse_timeout, FrameError, PREFIX_LEN};

fuzz_target!(|data: &[u8]| {
    let [limit, body @ ..] = data else { return };
    let limit = usize::from(*limit);
    let mut consumed = 0;
    let mut reframed = Vec::new();
    let mut failed = false;
    for frame in frames(body, limit) {
        match frame {
            Ok(message) => {
                assert!(message.len() <= limit, "a message over the limit");
                consumed += PREFIX_LEN + message.len();
                reframed.push(0);
                reframed.extend_from_slice(&(message.len() as u32).to_be_bytes());
                reframed.extend_from_slice(message);
            }
            Err(FrameError::TooLarge { len, limit: l }) => {
                assert!(len > l && l == limit);
                failed = true;
            }
            Err(_) => failed = true,
        }
    }
    if !failed {
        assert_eq!(consumed, body.len(), "bytes left over without an error");
        assert_eq!(reframed, body, "re-framing changed the bytes");
    }
    let _ = parse_timeout(body);
    let text = String::from_utf8_lossy(body);
    let encoded = encode_message(&text);
    assert!(encoded.bytes().all(|b| (0x20..0x7f).contains(&b)), "grpc-message not printable ASCII");
});
