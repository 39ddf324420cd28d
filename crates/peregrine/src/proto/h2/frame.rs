//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte frame header, the
//! payload rules each frame type must satisfy, and the writers for the
//! frames a server sends. Pure: bytes in, values or bytes out.
//!
//! Parsing checks only what the frame alone shows (its length, its stream
//! identifier being zero or not, its padding); what a frame means for the
//! connection's state is `core.rs`'s to judge.

/// The frame header's length.
pub(crate) const HEADER_LEN: usize = 9;

pub(crate) const DATA: u8 = 0x0;
pub(crate) const HEADERS: u8 = 0x1;
pub(crate) const PRIORITY: u8 = 0x2;
pub(crate) const RST_STREAM: u8 = 0x3;
pub(crate) const SETTINGS: u8 = 0x4;
pub(crate) const PUSH_PROMISE: u8 = 0x5;
pub(crate) const PING: u8 = 0x6;
pub(crate) const GOAWAY: u8 = 0x7;
pub(crate) const WINDOW_UPDATE: u8 = 0x8;
pub(crate) const CONTINUATION: u8 = 0x9;

pub(crate) const END_STREAM: u8 = 0x1;
pub(crate) const ACK: u8 = 0x1;
pub(crate) const END_HEADERS: u8 = 0x4;
pub(crate) const PADDED: u8 = 0x8;
pub(crate) const PRIORITY_FLAG: u8 = 0x20;

/// The largest flow-control window (RFC 9113 §6.9.1).
pub(crate) const MAX_WINDOW: i64 = (1 << 31) - 1;
/// The default frame size every peer accepts (RFC 9113 §4.2).
pub(crate) const DEFAULT_MAX_FRAME: usize = 16_384;

/// Error codes (RFC 9113 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reason(pub(crate) u32);

impl Reason {
    pub(crate) const NO_ERROR: Reason = Reason(0x0);
    pub(crate) const PROTOCOL_ERROR: Reason = Reason(0x1);
    pub(crate) const INTERNAL_ERROR: Reason = Reason(0x2);
    pub(crate) const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    pub(crate) const STREAM_CLOSED: Reason = Reason(0x5);
    pub(crate) const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    pub(crate) const REFUSED_STREAM: Reason = Reason(0x7);
    pub(crate) const CANCEL: Reason = Reason(0x8);
    pub(crate) const COMPRESSION_ERROR: Reason = Reason(0x9);
    pub(crate) const ENHANCE_YOUR_CALM: Reason = Reason(0xb);

    fn name(self) -> &'static str {
        match self.0 {
            0x0 => "NO_ERROR",
            0x1 => "PROTOCOL_ERROR",
            0x2 => "INTERNAL_ERROR",
            0x3 => "FLOW_CONTROL_ERROR",
            0x4 => "SETTINGS_TIMEOUT",
            0x5 => "STREAM_CLOSED",
            0x6 => "FRAME_SIZE_ERROR",
            0x7 => "REFUSED_STREAM",
            0x8 => "CANCEL",
            0x9 => "COMPRESSION_ERROR",
            0xa => "CONNECT_ERROR",
            0xb => "ENHANCE_YOUR_CALM",
            0xc => "INADEQUATE_SECURITY",
            0xd => "HTTP_1_1_REQUIRED",
            _ => "unknown error code",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({:#x})", self.name(), self.0)
    }
}

/// A frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) len: usize,
    pub(crate) kind: u8,
    pub(crate) flags: u8,
    pub(crate) stream: u32,
}

impl Head {
    /// Reads a frame header; the reserved bit of the stream identifier is
    /// ignored, as RFC 9113 §4.1 requires.
    pub(crate) fn parse(b: &[u8; HEADER_LEN]) -> Head {
        Head {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    pub(crate) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A payload the frame's own rules refuse. Each is a connection error
/// with this code, except where RFC 9113 makes it a stream error
/// ([`FrameError::stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameError {
    pub(crate) reason: Reason,
    /// A stream error on this frame's stream rather than a connection
    /// error (a PRIORITY frame of the wrong length, §6.3).
    pub(crate) stream: bool,
}

const fn connection_error(reason: Reason) -> FrameError {
    FrameError { reason, stream: false }
}

/// A HEADERS frame's priority fields (RFC 9113 §5.3.2, deprecated but
/// still parsed: a stream cannot depend on itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Priority {
    pub(crate) depends_on: u32,
}

/// What is left of a padded payload once the padding is taken off, and
/// the priority fields of a HEADERS frame.
pub(crate) fn unpad(head: &Head, payload: &[u8]) -> Result<(usize, usize), FrameError> {
    let mut start = 0;
    let mut end = payload.len();
    if head.has(PADDED) {
        let Some(&pad) = payload.first() else { return Err(connection_error(Reason::FRAME_SIZE_ERROR)) };
        start = 1;
        // Padding as long as the rest or longer is a PROTOCOL_ERROR
        // (RFC 9113 §6.1, §6.2).
        if usize::from(pad) >= end {
            return Err(connection_error(Reason::PROTOCOL_ERROR));
        }
        end -= usize::from(pad);
    }
    Ok((start, end))
}

/// A HEADERS payload: the priority fields if flagged, and the range of the
/// header block fragment.
pub(crate) fn headers(head: &Head, payload: &[u8]) -> Result<(Option<Priority>, usize, usize), FrameError> {
    if head.stream == 0 {
        return Err(connection_error(Reason::PROTOCOL_ERROR));
    }
    let (mut start, end) = unpad(head, payload)?;
    let mut priority = None;
    if head.has(PRIORITY_FLAG) {
        if end < start + 5 {
            return Err(connection_error(Reason::FRAME_SIZE_ERROR));
        }
        let b = &payload[start..start + 4];
        priority = Some(Priority { depends_on: u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x7fff_ffff });
        start += 5;
    }
    Ok((priority, start, end))
}

/// A PRIORITY payload (RFC 9113 §6.3).
pub(crate) fn priority(head: &Head, payload: &[u8]) -> Result<Priority, FrameError> {
    if head.stream == 0 {
        return Err(connection_error(Reason::PROTOCOL_ERROR));
    }
    if payload.len() != 5 {
        return Err(FrameError { reason: Reason::FRAME_SIZE_ERROR, stream: true });
    }
    Ok(Priority {
        depends_on: u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & 0x7fff_ffff,
    })
}

/// A four-byte payload (RST_STREAM's error code, WINDOW_UPDATE's
/// increment); `Err` with FRAME_SIZE_ERROR for any other length.
pub(crate) fn word(payload: &[u8]) -> Result<u32, FrameError> {
    match payload {
        [a, b, c, d] => Ok(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => Err(connection_error(Reason::FRAME_SIZE_ERROR)),
    }
}

/// A SETTINGS payload's parameters (RFC 9113 §6.5), checked for their
/// framing; an acknowledgement has none.
pub(crate) fn settings<'p>(
    head: &Head,
    payload: &'p [u8],
) -> Result<impl Iterator<Item = (u16, u32)> + 'p, FrameError> {
    if head.stream != 0 {
        return Err(connection_error(Reason::PROTOCOL_ERROR));
    }
    if head.has(ACK) && !payload.is_empty() {
        return Err(connection_error(Reason::FRAME_SIZE_ERROR));
    }
    if payload.len() % 6 != 0 {
        return Err(connection_error(Reason::FRAME_SIZE_ERROR));
    }
    Ok(payload
        .chunks_exact(6)
        .map(|p| (u16::from_be_bytes([p[0], p[1]]), u32::from_be_bytes([p[2], p[3], p[4], p[5]]))))
}

/// Appends a frame header.
pub(crate) fn put_head(dst: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = len as u32;
    let s = stream.to_be_bytes();
    dst.extend_from_slice(&[
        (len >> 16) as u8,
        (len >> 8) as u8,
        len as u8,
        kind,
        flags,
        s[0],
        s[1],
        s[2],
        s[3],
    ]);
}

/// Appends a header block as one HEADERS frame and as many CONTINUATION
/// frames as `max_frame` calls for.
pub(crate) fn put_headers(dst: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max_frame: usize) {
    let flags = if end_stream { END_STREAM } else { 0 };
    let mut chunks = block.chunks(max_frame.max(1));
    let first = chunks.next().unwrap_or(&[]);
    let mut rest = chunks.peekable();
    let last = rest.peek().is_none();
    put_head(dst, first.len(), HEADERS, flags | if last { END_HEADERS } else { 0 }, stream);
    dst.extend_from_slice(first);
    while let Some(chunk) = rest.next() {
        let last = rest.peek().is_none();
        put_head(dst, chunk.len(), CONTINUATION, if last { END_HEADERS } else { 0 }, stream);
        dst.extend_from_slice(chunk);
    }
}

/// Appends a SETTINGS frame with `params`.
pub(crate) fn put_settings(dst: &mut Vec<u8>, params: &[(u16, u32)]) {
    put_head(dst, params.len() * 6, SETTINGS, 0, 0);
    for (id, value) in params {
        dst.extend_from_slice(&id.to_be_bytes());
        dst.extend_from_slice(&value.to_be_bytes());
    }
}

/// Appends a frame whose payload is one four-byte word (RST_STREAM,
/// WINDOW_UPDATE).
pub(crate) fn put_word(dst: &mut Vec<u8>, kind: u8, stream: u32, word: u32) {
    put_head(dst, 4, kind, 0, stream);
    dst.extend_from_slice(&word.to_be_bytes());
}

/// Appends a GOAWAY frame.
pub(crate) fn put_goaway(dst: &mut Vec<u8>, last_stream: u32, reason: Reason, debug: &[u8]) {
    put_head(dst, 8 + debug.len(), GOAWAY, 0, 0);
    dst.extend_from_slice(&last_stream.to_be_bytes());
    dst.extend_from_slice(&reason.0.to_be_bytes());
    dst.extend_from_slice(debug);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_and_ignores_the_reserved_bit() {
        let mut b = Vec::new();
        put_head(&mut b, 0x01_02_03, HEADERS, END_HEADERS, 7);
        let mut arr = [0u8; HEADER_LEN];
        arr.copy_from_slice(&b);
        arr[5] |= 0x80;
        assert_eq!(Head::parse(&arr), Head { len: 0x01_02_03, kind: HEADERS, flags: END_HEADERS, stream: 7 });
    }

    #[test]
    fn padding_as_long_as_the_payload_is_a_protocol_error() {
        let head = Head { len: 3, kind: DATA, flags: PADDED, stream: 1 };
        assert_eq!(unpad(&head, &[3, 0, 0]).unwrap_err().reason, Reason::PROTOCOL_ERROR);
        assert_eq!(unpad(&head, &[2, 0, 0]).unwrap(), (1, 1));
        assert_eq!(unpad(&head, &[1, b'a', 0]).unwrap(), (1, 2));
        assert_eq!(unpad(&head, &[]).unwrap_err().reason, Reason::FRAME_SIZE_ERROR);
    }

    #[test]
    fn a_priority_frame_of_the_wrong_length_is_a_stream_error() {
        let head = Head { len: 4, kind: PRIORITY, flags: 0, stream: 1 };
        let e = priority(&head, &[0, 0, 0, 3]).unwrap_err();
        assert!(e.stream);
        assert_eq!(e.reason, Reason::FRAME_SIZE_ERROR);
    }

    #[test]
    fn settings_are_checked_for_length_and_stream() {
        let head = Head { len: 5, kind: SETTINGS, flags: 0, stream: 0 };
        assert_eq!(settings(&head, &[0; 5]).err().map(|e| e.reason), Some(Reason::FRAME_SIZE_ERROR));
        let ack = Head { len: 6, kind: SETTINGS, flags: ACK, stream: 0 };
        assert_eq!(settings(&ack, &[0; 6]).err().map(|e| e.reason), Some(Reason::FRAME_SIZE_ERROR));
        let on_stream = Head { len: 0, kind: SETTINGS, flags: 0, stream: 1 };
        assert_eq!(settings(&on_stream, &[]).err().map(|e| e.reason), Some(Reason::PROTOCOL_ERROR));
        let ok = Head { len: 6, kind: SETTINGS, flags: 0, stream: 0 };
        assert_eq!(settings(&ok, &[0, 4, 0, 0, 0, 9]).unwrap().collect::<Vec<_>>(), vec![(4, 9)]);
    }

    #[test]
    fn a_large_block_is_split_into_continuations() {
        let block = vec![7u8; 40];
        let mut out = Vec::new();
        put_headers(&mut out, 3, &block, true, 16);
        // 16 + 16 + 8 bytes of block in three frames.
        assert_eq!(out.len(), 3 * HEADER_LEN + 40);
        let first = Head::parse(out[..9].try_into().unwrap());
        assert_eq!((first.len, first.kind, first.flags), (16, HEADERS, END_STREAM));
        let last = Head::parse(out[50..59].try_into().unwrap());
        assert_eq!((last.len, last.kind, last.flags), (8, CONTINUATION, END_HEADERS));
    }
}
