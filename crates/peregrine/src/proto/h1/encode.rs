//! The HTTP/1.1 response encoder: status line, precomputed heads, the
//! cached `Date` block and a back-filled `Content-Length`, appended to a
//! connection's output buffer.
//!
//! Handlers never see this type: they write through the protocol-neutral
//! [`ResponseWriter`](crate::ResponseWriter), which dispatches here for an
//! HTTP/1.1 connection.
//!
//! Every response produced by one read is appended to the same buffer and
//! written with one syscall. A body serialized in place gets its
//! `Content-Length` back-filled: the writer reserves the number of digits
//! the caller expects and, in the rare case the guess is wrong, shifts the
//! body by the difference — correct for any size, with no per-request
//! allocation.

use std::mem::MaybeUninit;

use crate::http::date::DateBlock;
use crate::http::StatusCode;
use crate::response::headers::is_valid_header;
use crate::response::{BodyStream, FileRange};
use crate::upgrade::OnUpgrade;

/// What the `Connection` header of a response must say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConnectionHeader {
    /// HTTP/1.1 keep-alive: nothing to write.
    Omit,
    /// HTTP/1.0 keep-alive must be confirmed explicitly.
    KeepAlive,
    /// The server closes after this response.
    Close,
}

/// A response whose extra headers were refused (CR, LF or NUL in a value,
/// or a name that is not a token): nothing of it was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InvalidHeader;

/// Why [`Encoder::write_with`] wrote nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum WriteError<E> {
    /// See [`InvalidHeader`].
    InvalidHeader,
    /// The body callback failed.
    Body(E),
}

/// Appends one HTTP/1.1 response to the connection's output buffer.
#[derive(Debug)]
pub(crate) struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    date: &'a DateBlock,
    connection: ConnectionHeader,
    head_only: bool,
    /// Where a streamed or file body goes for the driver to send, if this
    /// writer can stream.
    streams: Option<&'a mut Option<PendingBody>>,
    /// Where a `101`'s continuation goes for the driver to run, if this
    /// writer's connection can switch protocols.
    upgrades: Option<&'a mut Option<OnUpgrade>>,
}

/// A body the driver sends after the head queued in the output buffer.
#[derive(Debug)]
pub(crate) enum PendingBody {
    Stream(PendingStream),
    /// Sent with `sendfile(2)` where the transport allows.
    File(FileRange),
}

/// Why [`Encoder::write_file`] wrote nothing.
#[derive(Debug)]
pub(crate) enum FileRefused {
    InvalidHeader,
    /// This writer cannot hand bodies to its driver: the file comes back
    /// for the caller to read into memory.
    Unsupported(FileRange),
}

/// Why [`Encoder::write_upgrade`] wrote no `101`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpgradeError {
    /// See [`InvalidHeader`]: nothing was written.
    InvalidHeader,
    /// The connection closes after this response, or cannot switch.
    Closing,
}

/// A streamed body whose head is written: the driver sends its chunks.
#[derive(Debug)]
pub(crate) struct PendingStream {
    pub(crate) body: BodyStream,
    /// Chunked transfer coding; otherwise the body ends with the
    /// connection (HTTP/1.0, or a connection closing anyway).
    pub(crate) chunked: bool,
}

const OK_PREAMBLE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: peregrine\r\nContent-Type: ";
const SERVER_LINE: &[u8] = b"Server: peregrine\r\nContent-Type: ";
const SERVER_ONLY_LINE: &[u8] = b"Server: peregrine\r\n";

/// A whole `200` head up to the `Content-Length` value, padded to
/// [`HEAD_BLOCK`] bytes: [`push_small_ok`] copies it with one fixed-size
/// copy (a few vector stores) and keeps `len` of it.
struct KnownHead {
    bytes: [u8; HEAD_BLOCK],
    len: usize,
}

/// Room for the longest known head (93 bytes, `text/plain; charset=utf-8`).
const HEAD_BLOCK: usize = 96;

impl KnownHead {
    const fn new(head: &[u8]) -> KnownHead {
        assert!(head.len() <= HEAD_BLOCK);
        let mut bytes = [0u8; HEAD_BLOCK];
        let mut i = 0;
        while i < head.len() {
            bytes[i] = head[i];
            i += 1;
        }
        KnownHead { bytes, len: head.len() }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Whole `200` heads up to the `Content-Length` value for the content types
/// most responses use: one copy instead of five.
///
/// Found by length, then one comparison of constant length (which the
/// compiler inlines): searching a table with `==` cost a `memcmp` call a
/// response. With the digits of small lengths written directly and the
/// head's two steps inlined, a pipelined plaintext request went from
/// 1,489 to 1,383 instructions (`scripts/callgrind`).
#[inline(always)]
fn known_ok_head(content_type: &str) -> Option<&'static KnownHead> {
    static JSON: KnownHead = KnownHead::new(
        b"HTTP/1.1 200 OK\r\nServer: peregrine\r\nContent-Type: application/json\r\nContent-Length: ",
    );
    static PLAIN: KnownHead = KnownHead::new(
        b"HTTP/1.1 200 OK\r\nServer: peregrine\r\nContent-Type: text/plain\r\nContent-Length: ",
    );
    static PLAIN_UTF8: KnownHead = KnownHead::new(
        b"HTTP/1.1 200 OK\r\nServer: peregrine\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ",
    );
    static HTML_UTF8: KnownHead = KnownHead::new(
        b"HTTP/1.1 200 OK\r\nServer: peregrine\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: ",
    );
    static OCTETS: KnownHead = KnownHead::new(
        b"HTTP/1.1 200 OK\r\nServer: peregrine\r\nContent-Type: application/octet-stream\r\nContent-Length: ",
    );
    let ct = content_type.as_bytes();
    match ct.len() {
        10 if ct == b"text/plain" => Some(&PLAIN),
        16 if ct == b"application/json" => Some(&JSON),
        24 if ct == b"application/octet-stream" => Some(&OCTETS),
        24 if ct == b"text/html; charset=utf-8" => Some(&HTML_UTF8),
        25 if ct == b"text/plain; charset=utf-8" => Some(&PLAIN_UTF8),
        _ => None,
    }
}

/// Bodies shorter than this take [`push_small_ok`]: their length is at
/// most three digits.
const SMALL_BODY: usize = 1000;

/// Appends a whole `200` response with a known head, no extra headers, a
/// kept-alive HTTP/1.1 connection and a body under [`SMALL_BODY`] bytes:
/// one capacity check, then fixed-size copies of the padded head, the
/// length line and the `Date` block (each a few vector stores, whatever
/// is kept of it), and the body.
///
/// Why: the general path appends five slices, each with its own capacity
/// check and a `memcpy` call for the body, of a length the compiler cannot
/// see: 112 instructions a pipelined plaintext response, where this takes
/// 102, the whole request 1,044 instead of 1,054 (`scripts/callgrind`).
#[inline(always)]
fn push_small_ok(out: &mut Vec<u8>, head: &KnownHead, date: &DateBlock, body: &[u8]) {
    let n = body.len();
    debug_assert!(n < SMALL_BODY);
    // The digits and the line's CRLF, written as one 8-byte block of which
    // `line_len` bytes are kept. The digits are `push_decimal`'s; a helper
    // shared with it, its digits then placed in this block, cost 8 to 11
    // instructions a response more (`scripts/callgrind`).
    let (line, line_len): ([u8; 8], usize) = if n < 10 {
        ([b'0' + n as u8, b'\r', b'\n', 0, 0, 0, 0, 0], 3)
    } else if n < 100 {
        ([b'0' + (n / 10) as u8, b'0' + (n % 10) as u8, b'\r', b'\n', 0, 0, 0, 0], 4)
    } else {
        let (hundreds, tens, ones) = ((n / 100) as u8, (n / 10 % 10) as u8, (n % 10) as u8);
        ([b'0' + hundreds, b'0' + tens, b'0' + ones, b'\r', b'\n', 0, 0, 0], 5)
    };
    let start = out.len();
    out.reserve(HEAD_BLOCK + line.len() + date.len() + n);
    let spare = out.spare_capacity_mut();
    let mut at = 0;
    at += put_block(&mut spare[at..], &head.bytes, head.len);
    at += put_block(&mut spare[at..], &line, line_len);
    at += put_block(&mut spare[at..], date, date.len());
    at += put_slice(&mut spare[at..], body);
    // SAFETY: the `at` bytes after `start` were all written above (each
    // block writes at least what it keeps), and `reserve` made room for
    // them.
    unsafe { out.set_len(start + at) };
}

/// Writes `src` at the start of `dst` and returns its length. Up to 32
/// bytes go as two overlapping fixed-size copies (a few loads and stores)
/// rather than a `memcpy` call of a length unknown at compile time, about
/// 25 instructions for TechEmpower's 13-byte body.
#[inline(always)]
fn put_slice(dst: &mut [MaybeUninit<u8>], src: &[u8]) -> usize {
    /// `src` (at least `K` bytes) as its first and last `K` bytes.
    #[inline(always)]
    fn pair<const K: usize>(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
        match (src.first_chunk::<K>(), src.last_chunk::<K>()) {
            (Some(first), Some(last)) => {
                copy_into(dst, first);
                copy_into(&mut dst[src.len() - K..], last);
            }
            _ => copy_into(dst, src),
        }
    }
    match src.len() {
        16..=32 => pair::<16>(dst, src),
        8..=15 => pair::<8>(dst, src),
        4..=7 => pair::<4>(dst, src),
        _ => copy_into(dst, src),
    }
    src.len()
}

/// Writes all of `block` at the start of `dst` and returns `keep`, the
/// part of it the caller counts as written (the rest is overwritten by
/// what follows, or left as spare capacity).
#[inline(always)]
fn put_block<const N: usize>(dst: &mut [MaybeUninit<u8>], block: &[u8; N], keep: usize) -> usize {
    debug_assert!(keep <= N);
    copy_into(dst, block);
    keep.min(N)
}

/// Copies `src` to the start of `dst`. A copy of the whole slice, not a
/// loop of `MaybeUninit::write`: LLVM left that loop byte by byte for the
/// `Date` block (78 instructions a response); a copy of a length known at
/// compile time becomes a few vector stores.
#[inline(always)]
fn copy_into(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    let dst = &mut dst[..src.len()];
    // SAFETY: `dst` is `src.len()` bytes; they cannot overlap, as `src` is
    // a shared borrow alive while `dst` is borrowed mutably.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), src.len()) };
}

/// Appends `n` in decimal: lengths under 1,000 (most small responses)
/// digit by digit, larger ones with `itoa`.
#[inline(always)]
fn push_decimal(out: &mut Vec<u8>, n: usize) {
    if n < 10 {
        out.push(b'0' + n as u8);
    } else if n < 100 {
        out.extend_from_slice(&[b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]);
    } else if n < 1000 {
        out.extend_from_slice(&[b'0' + (n / 100) as u8, b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8]);
    } else {
        let mut digits = itoa::Buffer::new();
        out.extend_from_slice(digits.format(n).as_bytes());
    }
}

impl<'a> Encoder<'a> {
    pub(crate) fn new(
        out: &'a mut Vec<u8>,
        date: &'a DateBlock,
        connection: ConnectionHeader,
        head_only: bool,
    ) -> Encoder<'a> {
        Encoder { out, date, connection, head_only, streams: None, upgrades: None }
    }

    /// Lets this encoder hand streamed bodies to `slot`.
    pub(crate) fn streaming_into(mut self, slot: &'a mut Option<PendingBody>) -> Encoder<'a> {
        self.streams = Some(slot);
        self
    }

    /// Lets this encoder hand a `101`'s continuation to `slot`.
    pub(crate) fn upgrading_into(mut self, slot: &'a mut Option<OnUpgrade>) -> Encoder<'a> {
        self.upgrades = Some(slot);
        self
    }

    /// Writes a `101 Switching Protocols` head (`Connection: Upgrade`,
    /// no body) and leaves `on_upgrade` for the driver, which runs it once
    /// the head is sent. Refused on a connection that closes after this
    /// response: the switch would not happen.
    pub(crate) fn write_upgrade<'h>(
        &mut self,
        status: StatusCode,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        on_upgrade: OnUpgrade,
    ) -> Result<(), UpgradeError> {
        let closing = self.connection == ConnectionHeader::Close || self.head_only;
        let Some(slot) = self.upgrades.as_deref_mut().filter(|_| !closing) else {
            return Err(UpgradeError::Closing);
        };
        *slot = Some(on_upgrade);
        if self.start(status, "", headers, true, false).is_err() {
            if let Some(slot) = self.upgrades.as_deref_mut() {
                *slot = None;
            }
            return Err(UpgradeError::InvalidHeader);
        }
        self.out.extend_from_slice(b"Connection: Upgrade\r\n");
        self.out.extend_from_slice(self.date);
        Ok(())
    }

    /// Writes the head of a response whose body is `stream` and leaves the
    /// stream for the driver: chunked on a connection that stays open,
    /// delimited by the close otherwise (HTTP/1.0 has no chunked coding).
    /// A `HEAD` request, or a status without a body, gets the head only.
    pub(crate) fn write_stream_head<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        stream: BodyStream,
    ) -> Result<(), InvalidHeader> {
        if status.forbids_body() {
            return self.write(status, content_type, headers, b"");
        }
        let Some(slot) = self.streams.as_deref_mut() else {
            // Only the connection's own writers can stream; no other writer
            // is handed a streamed response.
            return Err(InvalidHeader);
        };
        let chunked = self.connection == ConnectionHeader::Omit;
        if !chunked {
            self.connection = ConnectionHeader::Close;
        }
        let head_only = self.head_only;
        if !head_only {
            *slot = Some(PendingBody::Stream(PendingStream { body: stream, chunked }));
        }
        let start = self.out.len();
        if let Err(e) = self.start(status, content_type, headers, false, false) {
            if let Some(slot) = self.streams.as_deref_mut() {
                *slot = None;
            }
            self.out.truncate(start);
            return Err(e);
        }
        if chunked {
            self.out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
        }
        self.finish_head(false);
        Ok(())
    }

    /// Writes the head of a response whose body is `file` (its whole range,
    /// with that `Content-Length`) and leaves the range for the driver to
    /// send. A `HEAD` request gets the head only.
    pub(crate) fn write_file<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        file: FileRange,
    ) -> Result<(), FileRefused> {
        if self.streams.is_none() || status.forbids_body() {
            return Err(FileRefused::Unsupported(file));
        }
        self.start(status, content_type, headers, false, true)
            .map_err(|InvalidHeader| FileRefused::InvalidHeader)?;
        let mut digits = itoa::Buffer::new();
        self.out.extend_from_slice(digits.format(file.len).as_bytes());
        self.finish_head(true);
        if !self.head_only {
            if let Some(slot) = self.streams.as_deref_mut() {
                *slot = Some(PendingBody::File(file));
            }
        }
        Ok(())
    }

    /// Bytes in the output buffer.
    #[inline]
    pub(crate) fn written(&self) -> usize {
        self.out.len()
    }

    /// Cuts the output buffer back to `len` bytes.
    pub(crate) fn truncate(&mut self, len: usize) {
        self.out.truncate(len);
    }

    /// Makes this response the connection's last.
    pub(crate) fn close_connection(&mut self) {
        self.connection = ConnectionHeader::Close;
    }

    /// Whether the connection closes after this response.
    pub(crate) fn closes_connection(&self) -> bool {
        self.connection == ConnectionHeader::Close
    }

    /// Writes a complete response whose body is already in memory.
    pub(crate) fn write<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        body: &[u8],
    ) -> Result<(), InvalidHeader> {
        let mut headers = headers.into_iter().peekable();
        if status == StatusCode::OK
            && self.connection == ConnectionHeader::Omit
            && !self.head_only
            && body.len() < SMALL_BODY
            && headers.peek().is_none()
        {
            if let Some(head) = known_ok_head(content_type) {
                push_small_ok(self.out, head, self.date, body);
                return Ok(());
            }
        }
        let forbids_body = status.forbids_body();
        self.start(status, content_type, headers, forbids_body, !forbids_body)?;
        if forbids_body {
            self.finish_head(false);
            return Ok(());
        }
        push_decimal(self.out, body.len());
        self.finish_head(true);
        if !self.head_only {
            self.out.extend_from_slice(body);
        }
        Ok(())
    }

    /// Writes a response whose body is produced in place by `write_body`.
    ///
    /// `size_hint` is the expected body length; a good hint avoids moving
    /// the body once to fit its `Content-Length`. If `write_body` fails,
    /// everything it and this call wrote is removed and the error returned,
    /// so the caller can write an error response instead.
    pub(crate) fn write_with<'h, E>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        size_hint: usize,
        write_body: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), WriteError<E>> {
        let response_start = self.out.len();
        let forbids_body = status.forbids_body();
        self.start(status, content_type, headers, forbids_body, !forbids_body)
            .map_err(|InvalidHeader| WriteError::InvalidHeader)?;
        if forbids_body {
            self.finish_head(false);
            return Ok(());
        }
        let digits_at = self.out.len();
        let guess = decimal_len(size_hint);
        self.out.resize(digits_at + guess, b'0');
        self.finish_head(true);
        let body_at = self.out.len();
        if let Err(e) = write_body(self.out) {
            self.out.truncate(response_start);
            return Err(WriteError::Body(e));
        }
        let body_len = self.out.len() - body_at;
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(body_len).as_bytes();
        let after_guess = digits_at + guess;
        let end = self.out.len();
        if digits.len() > guess {
            let grow = digits.len() - guess;
            self.out.resize(end + grow, 0);
            self.out.copy_within(after_guess..end, after_guess + grow);
        } else if digits.len() < guess {
            let shrink = guess - digits.len();
            self.out.copy_within(after_guess..end, after_guess - shrink);
            self.out.truncate(end - shrink);
        }
        self.out[digits_at..digits_at + digits.len()].copy_from_slice(digits);
        if self.head_only {
            self.out.truncate(self.out.len() - body_len);
        }
        Ok(())
    }

    /// Status line, `Server`, `Content-Type`, extra headers and, unless the
    /// status forbids a body, `Content-Length: ` (digits follow). Writes
    /// nothing and fails if a header could inject others.
    #[inline(always)]
    fn start<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        forbids_body: bool,
        length_line: bool,
    ) -> Result<(), InvalidHeader> {
        // Extra headers go between `Content-Type` and `Content-Length`, so
        // only a known head without them is whole.
        let mut headers = headers.into_iter().peekable();
        if status == StatusCode::OK && length_line && headers.peek().is_none() {
            if let Some(head) = known_ok_head(content_type) {
                self.out.extend_from_slice(head.as_bytes());
                return Ok(());
            }
        }
        self.start_general(status, content_type, headers, forbids_body, length_line)
    }

    /// [`Encoder::start`] for heads not in [`known_ok_head`], or with extra
    /// headers.
    fn start_general<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        forbids_body: bool,
        length_line: bool,
    ) -> Result<(), InvalidHeader> {
        let response_start = self.out.len();
        if forbids_body {
            // No content, so nothing to type (RFC 9110 §8.3).
            write_status_line(self.out, status);
            self.out.extend_from_slice(SERVER_ONLY_LINE);
        } else {
            if !is_valid_header("content-type", content_type) {
                return Err(InvalidHeader);
            }
            if status == StatusCode::OK {
                self.out.extend_from_slice(OK_PREAMBLE);
            } else {
                write_status_line(self.out, status);
                self.out.extend_from_slice(SERVER_LINE);
            }
            self.out.extend_from_slice(content_type.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        }
        for (name, value) in headers {
            if !is_valid_header(name, value) {
                self.out.truncate(response_start);
                return Err(InvalidHeader);
            }
            self.out.extend_from_slice(name.as_bytes());
            self.out.extend_from_slice(b": ");
            self.out.extend_from_slice(value.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        }
        if length_line {
            self.out.extend_from_slice(b"Content-Length: ");
        }
        Ok(())
    }

    /// Ends the `Content-Length` line (if any), adds `Connection` and the
    /// cached `Date` block, which carries the blank line.
    #[inline(always)]
    fn finish_head(&mut self, length_line_open: bool) {
        if length_line_open {
            self.out.extend_from_slice(b"\r\n");
        }
        match self.connection {
            ConnectionHeader::Omit => {}
            ConnectionHeader::KeepAlive => self.out.extend_from_slice(b"Connection: keep-alive\r\n"),
            ConnectionHeader::Close => self.out.extend_from_slice(b"Connection: close\r\n"),
        }
        self.out.extend_from_slice(self.date);
    }
}

/// Writes `HTTP/1.1 NNN Reason\r\n`.
fn write_status_line(out: &mut Vec<u8>, status: StatusCode) {
    out.extend_from_slice(b"HTTP/1.1 ");
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(status.as_u16()).as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Number of decimal digits of `n`.
fn decimal_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::date::date_block;
    use std::time::{Duration, UNIX_EPOCH};

    fn date() -> DateBlock {
        date_block(UNIX_EPOCH + Duration::from_secs(1_795_236_051))
    }

    #[test]
    fn static_body() {
        let d = date();
        let mut out = Vec::new();
        Encoder::new(&mut out, &d, ConnectionHeader::Omit, false)
            .write(StatusCode::OK, "text/plain", [], b"Hello, World!")
            .unwrap();
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: peregrine\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nDate: Sat, 21 Nov 2026 04:40:51 GMT\r\n\r\nHello, World!"
        );
    }

    /// The precomputed heads and the digit fast path write what the
    /// general path writes, for every known type and around each digit
    /// boundary; extra headers still come before `Content-Length`.
    #[test]
    fn known_heads_match_the_general_form() {
        let d = date();
        for ct in [
            "application/json",
            "text/plain",
            "text/plain; charset=utf-8",
            "text/html; charset=utf-8",
            "application/octet-stream",
            "text/plainx",
            "text/plaiN",
        ] {
            // Every length the small-body copies treat apart (0 to 3, 4 to
            // 7, 8 to 15, 16 to 32, longer), each digit count, and the
            // general path from 1,000 up; after earlier output too, so the
            // buffer grows in the middle of a response.
            for len in [0usize, 1, 3, 4, 7, 8, 13, 15, 16, 17, 31, 32, 33, 99, 100, 999, 1000, 12_345] {
                let body: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                for previous in [&b""[..], b"HTTP/1.1 200 OK\r\n\r\n"] {
                    let mut out = previous.to_vec();
                    Encoder::new(&mut out, &d, ConnectionHeader::Omit, false)
                        .write(StatusCode::OK, ct, [], &body)
                        .unwrap();
                    let mut expected = previous.to_vec();
                    expected.extend_from_slice(
                        format!(
                            "HTTP/1.1 200 OK\r\nServer: peregrine\r\nContent-Type: {ct}\r\nContent-Length: {len}\r\n"
                        )
                        .as_bytes(),
                    );
                    expected.extend_from_slice(&d);
                    expected.extend_from_slice(&body);
                    assert_eq!(
                        String::from_utf8_lossy(&out),
                        String::from_utf8_lossy(&expected),
                        "{ct} {len}"
                    );
                }
            }
            let mut out = Vec::new();
            Encoder::new(&mut out, &d, ConnectionHeader::Close, false)
                .write(StatusCode::OK, ct, [("X-A", "b")], b"hi")
                .unwrap();
            let text = String::from_utf8(out).unwrap();
            let expected =
                format!("Content-Type: {ct}\r\nX-A: b\r\nContent-Length: 2\r\nConnection: close\r\n");
            assert!(text.contains(&expected), "{text}");
        }
    }

    #[test]
    fn backfilled_length_is_right_for_every_guess() {
        let d = date();
        for body_len in [0usize, 1, 9, 10, 99, 100, 9999, 10_000, 123_456] {
            for hint in [0usize, 10, 1000, 1_000_000] {
                let mut out = b"previous".to_vec();
                let mut w = Encoder::new(&mut out, &d, ConnectionHeader::Close, false);
                w.write_with(StatusCode::NOT_FOUND, "application/json", [("X-A", "b")], hint, |o| {
                    o.extend(std::iter::repeat_n(b'x', body_len));
                    Ok::<(), ()>(())
                })
                .unwrap();
                let text = &out[8..];
                let head_end = text.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                let head = std::str::from_utf8(&text[..head_end]).unwrap();
                assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"));
                assert!(head.contains(&format!("\r\nContent-Length: {body_len}\r\n")), "{head}");
                assert!(head.contains("\r\nX-A: b\r\nContent-Length"));
                assert!(head.contains("\r\nConnection: close\r\n"));
                assert_eq!(text.len() - head_end, body_len);
            }
        }
    }

    #[test]
    fn failed_body_rolls_back() {
        let d = date();
        let mut out = b"keep".to_vec();
        let r = Encoder::new(&mut out, &d, ConnectionHeader::Omit, false).write_with(
            StatusCode::OK,
            "a/b",
            [],
            4,
            |o| {
                o.extend_from_slice(b"partial");
                Err("boom")
            },
        );
        assert_eq!(r, Err(WriteError::Body("boom")));
        assert_eq!(out, b"keep");
    }

    #[test]
    fn head_requests_get_length_but_no_body() {
        let d = date();
        let mut out = Vec::new();
        Encoder::new(&mut out, &d, ConnectionHeader::Omit, true)
            .write_with(StatusCode::OK, "a/b", [], 1, |o| {
                o.extend_from_slice(b"hello world");
                Ok::<(), ()>(())
            })
            .unwrap();
        assert!(out.ends_with(b"Content-Length: 11\r\nDate: Sat, 21 Nov 2026 04:40:51 GMT\r\n\r\n"));
    }

    #[test]
    fn headers_that_could_inject_are_refused_and_nothing_is_written() {
        let d = date();
        for (name, value) in
            [("X-A", "b\r\nSet-Cookie: x"), ("X-A", "b\nc"), ("X-A", "b\0"), ("X A", "b"), ("", "b")]
        {
            let mut out = b"keep".to_vec();
            let mut w = Encoder::new(&mut out, &d, ConnectionHeader::Omit, false);
            assert_eq!(w.write(StatusCode::OK, "text/plain", [(name, value)], b"x"), Err(InvalidHeader));
            let r = w.write_with(StatusCode::OK, "text/plain", [(name, value)], 1, |o| {
                o.push(b'x');
                Ok::<(), ()>(())
            });
            assert_eq!(r, Err(WriteError::InvalidHeader));
            assert_eq!(w.write(StatusCode::CREATED, "text/plain\r\nX: y", [], b"x"), Err(InvalidHeader));
            assert_eq!(out, b"keep", "{name:?}: {value:?}");
        }
    }

    #[test]
    fn no_content_has_no_length() {
        let d = date();
        let mut out = Vec::new();
        Encoder::new(&mut out, &d, ConnectionHeader::Omit, false)
            .write(StatusCode::NO_CONTENT, "text/plain", [], b"ignored")
            .unwrap();
        let s = String::from_utf8(out).unwrap();
        assert!(!s.contains("Content-Length"));
        assert!(!s.contains("Content-Type"));
        assert!(s.ends_with("GMT\r\n\r\n"));
    }
}
