//! Incremental decoder for the chunked transfer coding (RFC 9112 §7.1).
//!
//! The decoder is a byte-level state machine that can be fed any split of
//! the input, so a body is decoded as it arrives without rescanning, and
//! streamed bodies never need to be buffered whole. It is strict where
//! leniency enables request smuggling: line endings must be CRLF, chunk
//! sizes are bounded, and extensions and trailers are length-limited and
//! discarded.

use std::fmt;

/// Longest chunk-size in hex digits: 15 keeps the value below 2^60.
const MAX_SIZE_DIGITS: u8 = 15;
/// Longest chunk extension we skip before refusing the body.
const MAX_EXTENSION_BYTES: u32 = 4096;
/// Longest trailer section we skip before refusing the body.
const MAX_TRAILER_BYTES: u32 = 16 * 1024;

/// Why a chunked body was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkedError {
    /// The bytes are not a valid chunked body: `400`.
    Invalid(&'static str),
    /// The decoded body exceeds the limit: `413`.
    TooLarge,
}

impl fmt::Display for ChunkedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChunkedError::Invalid(why) => write!(f, "invalid chunked body: {why}"),
            ChunkedError::TooLarge => f.write_str("request body too large"),
        }
    }
}

impl std::error::Error for ChunkedError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading chunk-size hex digits.
    Size,
    /// After the size: optional whitespace and `;extension`, up to CR.
    Extension,
    /// Expecting LF after the size line's CR.
    SizeLf,
    /// Inside chunk data.
    Data,
    /// Expecting CR after chunk data.
    DataCr,
    /// Expecting LF after chunk data.
    DataLf,
    /// At the start of a trailer line (or the final CRLF).
    TrailerStart,
    /// Inside a trailer field line, up to CR.
    TrailerLine,
    /// Expecting LF after a trailer line's CR.
    TrailerLineLf,
    /// Expecting the LF of the final CRLF.
    FinalLf,
    /// The body is complete.
    Done,
}

/// Decodes one chunked body.
#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    state: State,
    /// Size of the chunk being read, or bytes left in it while in `Data`.
    remaining: u64,
    digits: u8,
    skipped: u32,
    decoded: u64,
    limit: u64,
}

/// What one call to [`ChunkedDecoder::decode`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Input bytes consumed.
    pub consumed: usize,
    /// Whether the final chunk and trailers have been read.
    pub done: bool,
}

impl ChunkedDecoder {
    /// A decoder refusing bodies whose decoded size exceeds `limit` bytes.
    pub fn new(limit: u64) -> ChunkedDecoder {
        ChunkedDecoder { state: State::Size, remaining: 0, digits: 0, skipped: 0, decoded: 0, limit }
    }

    /// Whether the whole body has been decoded.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Total decoded bytes so far.
    #[cfg_attr(not(feature = "fuzzing"), allow(dead_code))]
    pub fn decoded(&self) -> u64 {
        self.decoded
    }

    /// Decodes as much of `input` as possible, handing each run of body
    /// bytes to `sink`. Stops right after the body ends; bytes beyond it
    /// (a pipelined request) are not consumed.
    #[cfg_attr(not(feature = "fuzzing"), allow(dead_code))]
    pub fn decode<'a>(
        &mut self,
        input: &'a [u8],
        sink: impl FnMut(&'a [u8]),
    ) -> Result<Progress, ChunkedError> {
        self.decode_limited(input, usize::MAX, sink)
    }

    /// Like [`ChunkedDecoder::decode`], but hands at most `max_output` body
    /// bytes to `sink`, stopping early (with input left over) once it has.
    pub fn decode_limited<'a>(
        &mut self,
        input: &'a [u8],
        max_output: usize,
        mut sink: impl FnMut(&'a [u8]),
    ) -> Result<Progress, ChunkedError> {
        let mut produced = 0usize;
        let mut i = 0;
        while i < input.len() {
            let b = input[i];
            match self.state {
                State::Size => match crate::http::hex_digit(b) {
                    Some(v) => {
                        if self.digits == MAX_SIZE_DIGITS {
                            return Err(ChunkedError::Invalid("chunk size too long"));
                        }
                        self.digits += 1;
                        self.remaining = (self.remaining << 4) | u64::from(v);
                        i += 1;
                    }
                    None if self.digits == 0 => {
                        return Err(ChunkedError::Invalid("missing chunk size"));
                    }
                    None => match b {
                        b'\r' => {
                            self.state = State::SizeLf;
                            i += 1;
                        }
                        b';' | b' ' | b'\t' => {
                            self.state = State::Extension;
                            self.skipped = 0;
                            i += 1;
                        }
                        _ => return Err(ChunkedError::Invalid("invalid chunk size")),
                    },
                },
                State::Extension => {
                    // Extensions are ignored; only their length and the
                    // absence of bare LF matter.
                    let rest = &input[i..];
                    let end = memchr::memchr2(b'\r', b'\n', rest).unwrap_or(rest.len());
                    self.skipped = self.skipped.saturating_add(end as u32);
                    if self.skipped > MAX_EXTENSION_BYTES {
                        return Err(ChunkedError::Invalid("chunk extension too long"));
                    }
                    i += end;
                    if end < rest.len() {
                        if rest[end] == b'\n' {
                            return Err(ChunkedError::Invalid("bare LF in chunk extension"));
                        }
                        self.state = State::SizeLf;
                        i += 1;
                    }
                }
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(ChunkedError::Invalid("expected LF after chunk size"));
                    }
                    i += 1;
                    if self.remaining == 0 {
                        self.state = State::TrailerStart;
                        self.skipped = 0;
                    } else {
                        if self.decoded.saturating_add(self.remaining) > self.limit {
                            return Err(ChunkedError::TooLarge);
                        }
                        self.state = State::Data;
                    }
                }
                State::Data => {
                    if produced == max_output {
                        break;
                    }
                    let available = (input.len() - i).min(max_output - produced) as u64;
                    let take = available.min(self.remaining) as usize;
                    sink(&input[i..i + take]);
                    produced += take;
                    i += take;
                    self.remaining -= take as u64;
                    self.decoded += take as u64;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                }
                State::DataCr => {
                    if b != b'\r' {
                        return Err(ChunkedError::Invalid("expected CRLF after chunk data"));
                    }
                    self.state = State::DataLf;
                    i += 1;
                }
                State::DataLf => {
                    if b != b'\n' {
                        return Err(ChunkedError::Invalid("expected CRLF after chunk data"));
                    }
                    self.state = State::Size;
                    self.digits = 0;
                    self.remaining = 0;
                    i += 1;
                }
                State::TrailerStart => {
                    if b == b'\r' {
                        self.state = State::FinalLf;
                    } else if b == b'\n' {
                        return Err(ChunkedError::Invalid("bare LF in trailer"));
                    } else {
                        self.state = State::TrailerLine;
                        self.skipped = self.skipped.saturating_add(1);
                    }
                    i += 1;
                }
                State::TrailerLine => {
                    let rest = &input[i..];
                    let end = memchr::memchr2(b'\r', b'\n', rest).unwrap_or(rest.len());
                    self.skipped = self.skipped.saturating_add(end as u32);
                    if self.skipped > MAX_TRAILER_BYTES {
                        return Err(ChunkedError::Invalid("trailer section too long"));
                    }
                    i += end;
                    if end < rest.len() {
                        if rest[end] == b'\n' {
                            return Err(ChunkedError::Invalid("bare LF in trailer"));
                        }
                        self.state = State::TrailerLineLf;
                        i += 1;
                    }
                }
                State::TrailerLineLf => {
                    if b != b'\n' {
                        return Err(ChunkedError::Invalid("expected LF in trailer"));
                    }
                    self.state = State::TrailerStart;
                    i += 1;
                }
                State::FinalLf => {
                    if b != b'\n' {
                        return Err(ChunkedError::Invalid("expected LF at end of body"));
                    }
                    self.state = State::Done;
                    return Ok(Progress { consumed: i + 1, done: true });
                }
                State::Done => break,
            }
        }
        Ok(Progress { consumed: i, done: self.state == State::Done })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8], limit: u64) -> Result<(Vec<u8>, usize), ChunkedError> {
        let mut dec = ChunkedDecoder::new(limit);
        let mut out = Vec::new();
        let p = dec.decode(input, |c| out.extend_from_slice(c))?;
        assert!(p.done, "incomplete");
        Ok((out, p.consumed))
    }

    #[test]
    fn decodes_and_stops_at_end() {
        let body = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nGET /";
        let (out, consumed) = decode_all(body, 1 << 20).unwrap();
        assert_eq!(out, b"Wikipedia in\r\n\r\nchunks.");
        assert_eq!(&body[consumed..], b"GET /");
    }

    #[test]
    fn any_split_gives_the_same_result() {
        let body = b"4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n";
        for cut in 0..=body.len() {
            let mut dec = ChunkedDecoder::new(1 << 20);
            let mut out = Vec::new();
            let p1 = dec.decode(&body[..cut], |c| out.extend_from_slice(c)).unwrap();
            assert_eq!(p1.consumed, cut);
            let p2 = dec.decode(&body[cut..], |c| out.extend_from_slice(c)).unwrap();
            assert!(p2.done || p1.done);
            assert_eq!(out, b"Wikipedia", "cut at {cut}");
        }
    }

    #[test]
    fn rejects_bad_bodies() {
        let bad: &[&[u8]] = &[
            b"x\r\n",
            b"\r\n",
            b"4\nWiki\r\n0\r\n\r\n",
            b"4\r\nWikiX\r\n0\r\n\r\n",
            b"1234567890abcdef0\r\n",
            b"0\r\nX: y\n\r\n",
            b"-1\r\n",
        ];
        for b in bad {
            let mut dec = ChunkedDecoder::new(1 << 20);
            assert!(
                matches!(dec.decode(b, |_| {}), Err(ChunkedError::Invalid(_))),
                "{:?}",
                String::from_utf8_lossy(b)
            );
        }
    }

    #[test]
    fn limited_output_resumes_where_it_stopped() {
        let body = b"a\r\n0123456789\r\n3\r\nabc\r\n0\r\n\r\n";
        let mut dec = ChunkedDecoder::new(1 << 20);
        let mut out = Vec::new();
        let mut at = 0;
        while !dec.is_done() {
            let p = dec.decode_limited(&body[at..], 4, |c| out.extend_from_slice(c)).unwrap();
            at += p.consumed;
        }
        assert_eq!(out, b"0123456789abc");
        assert_eq!(at, body.len());
    }

    #[test]
    fn enforces_limit_before_reading_data() {
        let mut dec = ChunkedDecoder::new(8);
        assert_eq!(dec.decode(b"9\r\n", |_| {}), Err(ChunkedError::TooLarge));
        let mut dec = ChunkedDecoder::new(8);
        assert_eq!(dec.decode(b"5\r\nhello\r\n4\r\n", |_| {}), Err(ChunkedError::TooLarge));
    }
}
