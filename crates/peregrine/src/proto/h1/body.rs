//! The one HTTP/1.1 request-body decoder: empty, `Content-Length` or
//! chunked, with the size limit, as a pure state machine over bytes.
//!
//! Buffered routes (the body is collected before the handler runs) and
//! streaming routes (the handler reads it as it arrives) both decode through
//! [`BodyDecoder`], so a given malformed or oversized body fails the same
//! way whichever kind of route it was sent to, and gets the same answer
//! (see [`BodyError`] and `pipeline::canned`).

use super::chunked::{ChunkedDecoder, ChunkedError};
use super::parse::Framing;

/// Why a request body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// Over the route's limit: `413`.
    TooLarge,
    /// Not a valid body (bad chunked framing): `400`.
    Invalid(&'static str),
}

impl From<ChunkedError> for BodyError {
    fn from(e: ChunkedError) -> BodyError {
        match e {
            ChunkedError::TooLarge => BodyError::TooLarge,
            ChunkedError::Invalid(why) => BodyError::Invalid(why),
        }
    }
}

/// What one call to [`BodyDecoder::decode`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// Input bytes consumed.
    pub(crate) consumed: usize,
    /// Whether the body has ended.
    pub(crate) done: bool,
}

/// Decodes one request body.
#[derive(Clone, Debug)]
pub(crate) enum BodyDecoder {
    /// `remaining` bytes of a `Content-Length` body (0: no body, or done).
    Length { remaining: u64 },
    /// A chunked body.
    Chunked(ChunkedDecoder),
}

impl BodyDecoder {
    /// A decoder for a body framed as `framing`, refusing more than `limit`
    /// decoded bytes. A declared length over the limit is refused at once,
    /// before any of it is read.
    pub(crate) fn new(framing: Framing, limit: u64) -> Result<BodyDecoder, BodyError> {
        match framing {
            Framing::None => Ok(BodyDecoder::Length { remaining: 0 }),
            Framing::Length(n) if n > limit => Err(BodyError::TooLarge),
            Framing::Length(n) => Ok(BodyDecoder::Length { remaining: n }),
            Framing::Chunked => Ok(BodyDecoder::Chunked(ChunkedDecoder::new(limit))),
        }
    }

    /// Whether the body has been read to its end.
    pub(crate) fn is_done(&self) -> bool {
        match self {
            BodyDecoder::Length { remaining } => *remaining == 0,
            BodyDecoder::Chunked(decoder) => decoder.is_done(),
        }
    }

    /// For a `Content-Length` body, the input bytes still needed; `None` for
    /// chunked bodies, whose length is known only at their end.
    pub(crate) fn remaining_length(&self) -> Option<u64> {
        match self {
            BodyDecoder::Length { remaining } => Some(*remaining),
            BodyDecoder::Chunked(_) => None,
        }
    }

    /// Decodes from `input`, handing at most `max_output` body bytes to
    /// `sink` (as slices of `input`). Stops at the end of the body: bytes
    /// beyond it (a pipelined request) are not consumed.
    pub(crate) fn decode<'a>(
        &mut self,
        input: &'a [u8],
        max_output: usize,
        mut sink: impl FnMut(&'a [u8]),
    ) -> Result<Decoded, BodyError> {
        match self {
            BodyDecoder::Length { remaining } => {
                let n = usize::try_from(*remaining).unwrap_or(usize::MAX).min(input.len()).min(max_output);
                if n > 0 {
                    sink(&input[..n]);
                }
                *remaining -= n as u64;
                Ok(Decoded { consumed: n, done: *remaining == 0 })
            }
            BodyDecoder::Chunked(decoder) => {
                let progress = decoder.decode_limited(input, max_output, sink)?;
                Ok(Decoded { consumed: progress.consumed, done: progress.done })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(framing: Framing, limit: u64, input: &[u8]) -> Result<(Vec<u8>, Decoded), BodyError> {
        let mut decoder = BodyDecoder::new(framing, limit)?;
        let mut out = Vec::new();
        let decoded = decoder.decode(input, usize::MAX, |chunk| out.extend_from_slice(chunk))?;
        Ok((out, decoded))
    }

    #[test]
    fn length_bodies_stop_at_their_end() {
        let (body, d) = decode_all(Framing::Length(5), 10, b"helloGET /").unwrap();
        assert_eq!(body, b"hello");
        assert_eq!(d, Decoded { consumed: 5, done: true });
        let (body, d) = decode_all(Framing::None, 10, b"GET /").unwrap();
        assert!(body.is_empty());
        assert_eq!(d, Decoded { consumed: 0, done: true });
    }

    #[test]
    fn one_limit_for_every_framing() {
        assert_eq!(BodyDecoder::new(Framing::Length(11), 10).unwrap_err(), BodyError::TooLarge);
        assert_eq!(
            decode_all(Framing::Chunked, 10, b"b\r\nhello world\r\n0\r\n\r\n").unwrap_err(),
            BodyError::TooLarge
        );
        assert_eq!(
            decode_all(Framing::Chunked, 10, b"zz\r\n").unwrap_err(),
            BodyError::Invalid("missing chunk size")
        );
    }

    #[test]
    fn limited_output_resumes() {
        let mut decoder = BodyDecoder::new(Framing::Length(6), 10).unwrap();
        let mut out = Vec::new();
        let d = decoder.decode(b"abcdef", 4, |c| out.extend_from_slice(c)).unwrap();
        assert_eq!(d, Decoded { consumed: 4, done: false });
        assert_eq!(decoder.remaining_length(), Some(2));
        let d = decoder.decode(b"ef", 4, |c| out.extend_from_slice(c)).unwrap();
        assert_eq!(d, Decoded { consumed: 2, done: true });
        assert_eq!(out, b"abcdef");
        assert!(decoder.is_done());
    }
}
