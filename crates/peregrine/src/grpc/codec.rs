//! The gRPC message framing (gRPC over HTTP/2, "Length-Prefixed-Message"):
//! a one-byte compressed flag, a four-byte big-endian length, the message.
//! Pure functions over bytes, fuzzed through the `fuzzing` feature.
//!
//! The server offers no message compression (it sends no
//! `grpc-accept-encoding` but `identity`), so a frame with the compressed
//! flag set is refused as [`FrameError::Compressed`] (`UNIMPLEMENTED`), a
//! flag other than 0 or 1, or a frame cut short, as
//! [`FrameError::Malformed`] (`INTERNAL`), and a message over the limit as
//! [`FrameError::TooLarge`] (`RESOURCE_EXHAUSTED`), as the gRPC spec's
//! status-code table assigns them.

use std::fmt;

/// Bytes of the prefix before each message.
pub const PREFIX_LEN: usize = 5;

/// Why a request body is not a sequence of frames the server can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// The compressed flag is set; this server does not decompress.
    Compressed,
    /// The flag byte is neither 0 nor 1, or the body ends inside a frame.
    Malformed(&'static str),
    /// A message is longer than the limit.
    TooLarge {
        /// The length its prefix declares.
        len: usize,
        /// The largest message accepted.
        limit: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Compressed => f.write_str("compressed messages are not supported (no grpc-encoding)"),
            FrameError::Malformed(why) => write!(f, "malformed message frame: {why}"),
            FrameError::TooLarge { len, limit } => {
                write!(f, "message of {len} bytes is over the limit of {limit}")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Splits a whole request body into its messages.
///
/// Each item borrows from `body`. An empty body has no messages (a unary
/// call then fails for want of its request, which is the caller's rule).
pub fn frames(body: &[u8], limit: usize) -> Frames<'_> {
    Frames { rest: body, limit }
}

/// See [`frames`].
#[derive(Debug)]
pub struct Frames<'a> {
    rest: &'a [u8],
    limit: usize,
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<&'a [u8], FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let result = split_frame(self.rest, self.limit);
        match result {
            Ok((message, rest)) => {
                self.rest = rest;
                Some(Ok(message))
            }
            Err(e) => {
                // One error ends the sequence.
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

fn split_frame(buf: &[u8], limit: usize) -> Result<(&[u8], &[u8]), FrameError> {
    let Some((prefix, rest)) = buf.split_first_chunk::<PREFIX_LEN>() else {
        return Err(FrameError::Malformed("the body ends inside a frame prefix"));
    };
    match prefix[0] {
        0 => {}
        1 => return Err(FrameError::Compressed),
        _ => return Err(FrameError::Malformed("the compressed flag is neither 0 nor 1")),
    }
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if len > limit {
        return Err(FrameError::TooLarge { len, limit });
    }
    if rest.len() < len {
        return Err(FrameError::Malformed("the body ends inside a message"));
    }
    Ok(rest.split_at(len))
}

/// Appends one uncompressed frame holding `message` to `out`.
pub fn encode<M: prost::Message>(message: &M, out: &mut Vec<u8>) {
    let len = message.encoded_len();
    out.reserve(PREFIX_LEN + len);
    out.push(0);
    // A message over 4 GiB cannot be framed; prost messages of that size
    // are not built by this server's handlers (the limit is far lower).
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    // Encoding into a Vec cannot run out of space.
    let _ = message.encode(out);
}

/// Parses a `grpc-timeout` value: 1 to 8 ASCII digits and a unit (`H`,
/// `M`, `S`, `m`, `u`, `n`). `None` for anything else.
pub fn parse_timeout(value: &[u8]) -> Option<std::time::Duration> {
    use std::time::Duration;
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Percent-encodes a `grpc-message` value as the spec asks: bytes outside
/// printable ASCII, and `%`, become `%XX`.
pub fn encode_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for &b in message.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![flag];
        v.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn splits_messages_and_refuses_what_it_cannot_read() {
        let mut body = frame(0, b"abc");
        body.extend(frame(0, b""));
        body.extend(frame(0, b"xy"));
        let got: Vec<_> = frames(&body, 100).collect::<Result<_, _>>().unwrap();
        assert_eq!(got, [&b"abc"[..], b"", b"xy"]);
        assert_eq!(frames(&frame(1, b"abc"), 100).next(), Some(Err(FrameError::Compressed)));
        assert!(matches!(frames(&frame(2, b"abc"), 100).next(), Some(Err(FrameError::Malformed(_)))));
        assert!(matches!(frames(&[0, 0, 0], 100).next(), Some(Err(FrameError::Malformed(_)))));
        let mut cut = frame(0, b"abcdef");
        cut.truncate(8);
        assert!(matches!(frames(&cut, 100).next(), Some(Err(FrameError::Malformed(_)))));
        assert_eq!(
            frames(&frame(0, &[7; 11]), 10).next(),
            Some(Err(FrameError::TooLarge { len: 11, limit: 10 }))
        );
        // A huge declared length is refused by the limit before anything is read.
        assert!(matches!(
            frames(&[0, 0xff, 0xff, 0xff, 0xff], 4 << 20).next(),
            Some(Err(FrameError::TooLarge { .. }))
        ));
        assert_eq!(frames(&[], 10).next(), None);
    }

    #[test]
    fn timeouts_follow_the_spec_grammar() {
        use std::time::Duration;
        assert_eq!(parse_timeout(b"100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_timeout(b"2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout(b"99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in [&b""[..], b"m", b"123456789m", b"10x", b"-1S", b"1.5S", b"10 m"] {
            assert_eq!(parse_timeout(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn messages_are_percent_encoded() {
        assert_eq!(encode_message("bad input: 100%"), "bad input: 100%25");
        assert_eq!(encode_message("é\n"), "%C3%A9%0A");
    }
}
