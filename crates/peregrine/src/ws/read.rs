//! Turning a client's bytes into messages: frames in, whole messages,
//! pings, pongs and closes out. Pure: the socket hands it its read buffer.
//!
//! A frame whose payload is all in the buffer and which is a whole,
//! uncompressed message is unmasked in place and copied once into the
//! message (the common case), into the buffer of a message the socket has
//! already sent when there is one ([`Reader::recycle`]), so an echo
//! allocates nothing. A final text or binary frame of at most 125 bytes
//! takes a hand-written fast path before the general header decoder, and
//! its text is checked as ASCII before full UTF-8 validation: with the
//! recycled buffer, 2,293 -> 2,146 instructions per 5-byte echo
//! (`scripts/callgrind`). Anything else (fragments, compressed
//! messages, frames larger than the read buffer) is absorbed piece by
//! piece as it arrives into one assembly buffer, which goes to the handler
//! with the message. Text is validated as it arrives, so invalid UTF-8
//! fails the connection at the fragment that carries it, not at the end of
//! the message; sizes are checked at the frame header, before the payload
//! arrives (and while inflating, for compressed messages).

use super::deflate::{InflateError, Inflater};
use super::frame::{decode_header, unmask, OpCode};
use super::{CloseCode, CloseFrame, Message};
use crate::text::utf8;

/// What a completed frame or message produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A whole text or binary message.
    Data(Message),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<CloseFrame>),
}

/// The client broke the protocol: close with `code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProtocolError {
    pub(crate) code: CloseCode,
    pub(crate) reason: &'static str,
}

const fn protocol(reason: &'static str) -> ProtocolError {
    ProtocolError { code: CloseCode::PROTOCOL, reason }
}

const INVALID_UTF8: ProtocolError =
    ProtocolError { code: CloseCode::INVALID_DATA, reason: "invalid UTF-8 in text" };
const MESSAGE_TOO_BIG: ProtocolError =
    ProtocolError { code: CloseCode::TOO_BIG, reason: "message too large" };

/// A data frame whose payload is still arriving.
#[derive(Clone, Copy, Debug)]
struct InFrame {
    mask: [u8; 4],
    remaining: u64,
    /// Payload bytes already unmasked (the mask's phase).
    offset: usize,
    fin: bool,
}

/// A message whose frames are still arriving.
#[derive(Clone, Copy, Debug)]
struct InMessage {
    text: bool,
    compressed: bool,
}

/// One connection's decoding state.
#[derive(Debug)]
pub(crate) struct Reader {
    max_frame: u64,
    max_message: usize,
    inflater: Option<Inflater>,
    frame: Option<InFrame>,
    message: Option<InMessage>,
    assembly: Vec<u8>,
    /// Bytes of `assembly` known to be valid UTF-8 (a text message).
    utf8_valid: usize,
    /// An empty buffer a message the socket sent came back in (see
    /// [`Reader::recycle`]), for the next whole-frame message: an echo
    /// costs no allocation.
    spare: String,
}

/// Largest buffer [`Reader::recycle`] keeps: a whole-frame message is at
/// most the read buffer, 4 KiB by default.
const SPARE_MAX: usize = 4096;

impl Reader {
    pub(crate) fn new(max_frame: usize, max_message: usize, inflater: Option<Inflater>) -> Reader {
        Reader {
            max_frame: max_frame as u64,
            max_message,
            inflater,
            frame: None,
            message: None,
            assembly: Vec::new(),
            utf8_valid: 0,
            spare: String::new(),
        }
    }

    /// Keeps the buffer of a message that has been sent (or otherwise
    /// used up), emptied, for the next message decoded from one frame.
    /// Bounded: only a buffer of at most [`SPARE_MAX`] bytes, and only
    /// one, is kept.
    pub(crate) fn recycle(&mut self, message: Message) {
        let mut buf = match message {
            Message::Text(text) => text.into_bytes(),
            Message::Binary(data) => data,
            _ => return,
        };
        if buf.capacity() > SPARE_MAX || buf.capacity() <= self.spare.capacity() {
            return;
        }
        buf.clear();
        // Empty, so valid UTF-8: this never fails and checks nothing.
        if let Ok(spare) = String::from_utf8(buf) {
            self.spare = spare;
        }
    }

    /// A whole message from one unmasked frame payload, in the spare
    /// buffer when there is one.
    fn whole_message(&mut self, text: bool, payload: &[u8]) -> Result<Message, ProtocolError> {
        // Kept empty by `recycle`.
        let mut buf = std::mem::take(&mut self.spare);
        Ok(if text {
            buf.push_str(utf8(payload).ok_or(INVALID_UTF8)?);
            Message::Text(buf)
        } else {
            let mut data = buf.into_bytes();
            data.extend_from_slice(payload);
            Message::Binary(data)
        })
    }

    /// Whether a frame or a fragmented message is part-way in.
    pub(crate) fn mid_message(&self) -> bool {
        self.frame.is_some() || self.message.is_some()
    }

    /// Decodes from the start of `buf`, unmasking in place. Returns how
    /// many bytes it consumed and the event they completed, if any;
    /// `(0, None)` means more input is needed.
    pub(crate) fn decode(&mut self, buf: &mut [u8]) -> Result<(usize, Option<Event>), ProtocolError> {
        // The fast path: a whole, final, uncompressed text or binary frame
        // of at most 125 bytes, all in `buf`, between messages (an echo's
        // every message). Checked byte by byte here rather than through
        // `decode_header`'s general form; anything else, including every
        // error, goes the general way below.
        if self.frame.is_none() && self.message.is_none() {
            if let [b0 @ (0x81 | 0x82), b1, m0, m1, m2, m3, ..] = *buf {
                let len = usize::from(b1 & 0x7F);
                let total = 6 + len;
                if b1 & 0x80 != 0
                    && len < 126
                    && buf.len() >= total
                    && len as u64 <= self.max_frame
                    && len <= self.max_message
                {
                    let payload = &mut buf[6..total];
                    unmask(payload, [m0, m1, m2, m3], 0);
                    return Ok((total, Some(Event::Data(self.whole_message(b0 == 0x81, payload)?))));
                }
            }
        }
        if let Some(frame) = self.frame.as_mut() {
            let n = frame.remaining.min(buf.len() as u64) as usize;
            let piece = &mut buf[..n];
            unmask(piece, frame.mask, frame.offset);
            frame.remaining -= n as u64;
            frame.offset += n;
            let (done, fin) = (frame.remaining == 0, frame.fin);
            self.absorb(piece)?;
            if done {
                self.frame = None;
                if fin {
                    return Ok((n, Some(self.finish_message()?)));
                }
            }
            return Ok((n, None));
        }
        let header = decode_header(buf, self.inflater.is_some(), self.max_frame)
            .map_err(|e| ProtocolError { code: e.close_code(), reason: e.reason() })?;
        let Some(h) = header else { return Ok((0, None)) };
        let total = h.header_len as u64 + h.payload_len;

        if h.opcode.is_control() {
            // At most 14 + 125 bytes, which the read buffer always holds.
            let total = total as usize;
            if buf.len() < total {
                return Ok((0, None));
            }
            if h.rsv1 {
                // RFC 7692 §6.1: control frames are never compressed.
                return Err(protocol("compressed control frame"));
            }
            let payload = &mut buf[h.header_len..total];
            unmask(payload, h.mask, 0);
            let event = match h.opcode {
                OpCode::Ping => Event::Ping(payload.to_vec()),
                OpCode::Pong => Event::Pong(payload.to_vec()),
                _ => Event::Close(parse_close(payload)?),
            };
            return Ok((total, Some(event)));
        }

        if h.opcode == OpCode::Continuation {
            if self.message.is_none() {
                return Err(protocol("continuation frame without a message to continue"));
            }
            if h.rsv1 {
                return Err(protocol("RSV1 on a continuation frame"));
            }
        } else {
            if self.message.is_some() {
                return Err(protocol("new message before the previous one ended"));
            }
            let (text, compressed) = (h.opcode == OpCode::Text, h.rsv1);
            if !compressed && h.payload_len > self.max_message as u64 {
                return Err(MESSAGE_TOO_BIG);
            }
            if h.fin && !compressed && buf.len() as u64 >= total {
                // The whole message in one frame, all here.
                let total = total as usize;
                let payload = &mut buf[h.header_len..total];
                unmask(payload, h.mask, 0);
                return Ok((total, Some(Event::Data(self.whole_message(text, payload)?))));
            }
            self.message = Some(InMessage { text, compressed });
            self.assembly = Vec::new();
            self.utf8_valid = 0;
        }
        let compressed = self.message.is_some_and(|m| m.compressed);
        if !compressed && self.assembly.len() as u64 + h.payload_len > self.max_message as u64 {
            return Err(MESSAGE_TOO_BIG);
        }
        if h.payload_len > 0 {
            self.frame = Some(InFrame { mask: h.mask, remaining: h.payload_len, offset: 0, fin: h.fin });
        } else if h.fin {
            return Ok((h.header_len, Some(self.finish_message()?)));
        }
        Ok((h.header_len, None))
    }

    /// Adds one unmasked piece of payload to the message being assembled.
    fn absorb(&mut self, piece: &[u8]) -> Result<(), ProtocolError> {
        let Some(message) = self.message else { return Ok(()) };
        match (&mut self.inflater, message.compressed) {
            (Some(inflater), true) => {
                inflater.inflate(piece, &mut self.assembly, self.max_message).map_err(inflate_error)?
            }
            _ => self.assembly.extend_from_slice(piece),
        }
        if message.text {
            self.check_utf8(false)?;
        }
        Ok(())
    }

    /// Validates the text received since the last check. Mid-message, a
    /// sequence cut at the end is fine (the rest may come); a byte that no
    /// continuation can make valid fails at once.
    fn check_utf8(&mut self, at_end: bool) -> Result<(), ProtocolError> {
        match std::str::from_utf8(&self.assembly[self.utf8_valid..]) {
            Ok(_) => self.utf8_valid = self.assembly.len(),
            Err(e) if e.error_len().is_none() && !at_end => self.utf8_valid += e.valid_up_to(),
            Err(_) => return Err(INVALID_UTF8),
        }
        Ok(())
    }

    fn finish_message(&mut self) -> Result<Event, ProtocolError> {
        let Some(message) = self.message.take() else { return Err(protocol("no message to finish")) };
        if let (Some(inflater), true) = (&mut self.inflater, message.compressed) {
            inflater.finish(&mut self.assembly, self.max_message).map_err(inflate_error)?;
        }
        if message.text {
            self.check_utf8(true)?;
        }
        // The assembly buffer leaves with the message: nothing stays large.
        let data = std::mem::take(&mut self.assembly);
        Ok(Event::Data(if message.text {
            Message::Text(String::from_utf8(data).map_err(|_| INVALID_UTF8)?)
        } else {
            Message::Binary(data)
        }))
    }
}

fn inflate_error(e: InflateError) -> ProtocolError {
    match e {
        InflateError::Corrupt => {
            ProtocolError { code: CloseCode::INVALID_DATA, reason: "invalid compressed data" }
        }
        InflateError::TooLarge => MESSAGE_TOO_BIG,
    }
}

/// A close frame's payload: nothing, or a code and a UTF-8 reason.
fn parse_close(payload: &[u8]) -> Result<Option<CloseFrame>, ProtocolError> {
    match payload {
        [] => Ok(None),
        [_] => Err(protocol("close frame of one byte")),
        [hi, lo, reason @ ..] => {
            let code = CloseCode(u16::from_be_bytes([*hi, *lo]));
            if !code.is_allowed_on_wire() {
                return Err(protocol("invalid close code"));
            }
            let reason = std::str::from_utf8(reason).map_err(|_| ProtocolError {
                code: CloseCode::INVALID_DATA,
                reason: "close reason is not UTF-8",
            })?;
            Ok(Some(CloseFrame { code, reason: reason.to_owned() }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A masked client frame.
    fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [0xa1, 0xb2, 0xc3, 0xd4];
        let mut f = vec![b0];
        match payload.len() {
            n @ 0..=125 => f.push(0x80 | n as u8),
            n @ 126..=0xFFFF => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&mask);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        f
    }

    /// Feeds `input` `step` bytes at a time, as reads would bring it.
    fn feed(reader: &mut Reader, input: &[u8], step: usize) -> Result<Vec<Event>, ProtocolError> {
        let mut events = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        loop {
            let (n, event) = reader.decode(&mut buf)?;
            buf.drain(..n);
            if let Some(e) = event {
                events.push(e);
            } else if n == 0 {
                if fed == input.len() {
                    return Ok(events);
                }
                let end = (fed + step).min(input.len());
                buf.extend_from_slice(&input[fed..end]);
                fed = end;
            }
        }
    }

    fn reader() -> Reader {
        Reader::new(1 << 20, 1 << 20, None)
    }

    #[test]
    fn whole_and_fragmented_messages_with_control_frames_between() {
        let mut input = frame(0x81, b"hello");
        input.extend(frame(0x02, b"ab"));
        input.extend(frame(0x89, b"p"));
        input.extend(frame(0x00, b"cd"));
        input.extend(frame(0x80, b"e"));
        input.extend(frame(0x82, &[9; 70_000]));
        input.extend(frame(0x88, &[0x03, 0xe8, b'b', b'y', b'e']));
        for step in [1, 3, 64, 4096, usize::MAX] {
            let events = feed(&mut reader(), &input, step).unwrap();
            assert_eq!(
                events,
                vec![
                    Event::Data(Message::Text("hello".into())),
                    Event::Ping(b"p".to_vec()),
                    Event::Data(Message::Binary(b"abcde".to_vec())),
                    Event::Data(Message::Binary(vec![9; 70_000])),
                    Event::Close(Some(CloseFrame { code: CloseCode::NORMAL, reason: "bye".into() })),
                ],
                "step {step}"
            );
        }
    }

    #[test]
    fn invalid_utf8_fails_at_the_fragment_that_carries_it() {
        // The first fragment ends mid-sequence (fine); the second holds a
        // byte no sequence allows: refused before the message ends.
        let mut input = frame(0x01, "h\u{e9}".as_bytes().split_last().unwrap().1);
        input.extend(frame(0x00, &[0xA9, 0xFF]));
        let mut r = reader();
        assert_eq!(feed(&mut r, &input, usize::MAX), Err(INVALID_UTF8));
        // Cut mid-sequence at the end of the message: refused at the end.
        let input = frame(0x81, &[b'a', 0xE2, 0x82]);
        assert_eq!(feed(&mut reader(), &input, usize::MAX), Err(INVALID_UTF8));
        // Split across fragments, valid.
        let euro = "\u{20ac}".as_bytes();
        let mut input = frame(0x01, &euro[..1]);
        input.extend(frame(0x00, &euro[1..2]));
        input.extend(frame(0x80, &euro[2..]));
        assert_eq!(
            feed(&mut reader(), &input, 1).unwrap(),
            vec![Event::Data(Message::Text("\u{20ac}".into()))]
        );
    }

    #[test]
    fn protocol_errors() {
        let cases: &[(Vec<u8>, CloseCode)] = &[
            (frame(0x80, b"x"), CloseCode::PROTOCOL),
            ([frame(0x01, b"a"), frame(0x81, b"b")].concat(), CloseCode::PROTOCOL),
            (frame(0x88, &[0x03]), CloseCode::PROTOCOL),
            (frame(0x88, &[0x03, 0xed]), CloseCode::PROTOCOL),
            (frame(0x88, &[0x03, 0xe8, 0xff]), CloseCode::INVALID_DATA),
            (frame(0xC1, b"x"), CloseCode::PROTOCOL),
            (frame(0x82, &[0; 2000]), CloseCode::TOO_BIG),
            ([frame(0x02, &[0; 600]), frame(0x80, &[0; 600])].concat(), CloseCode::TOO_BIG),
        ];
        for (input, code) in cases {
            let mut r = Reader::new(1 << 20, 1000, None);
            assert_eq!(feed(&mut r, input, usize::MAX).map_err(|e| e.code), Err(*code), "{input:?}");
        }
    }

    #[test]
    fn the_small_frame_fast_path_keeps_every_check() {
        // Limits below 125 bytes, invalid UTF-8, and a fast-path frame
        // while a fragmented message is open.
        let mut r = Reader::new(50, 1000, None);
        assert_eq!(
            feed(&mut r, &frame(0x82, &[0; 60]), usize::MAX).map_err(|e| e.code),
            Err(CloseCode::TOO_BIG)
        );
        let mut r = Reader::new(1000, 50, None);
        assert_eq!(
            feed(&mut r, &frame(0x81, &[b'a'; 60]), usize::MAX).map_err(|e| e.code),
            Err(CloseCode::TOO_BIG)
        );
        assert_eq!(feed(&mut reader(), &frame(0x81, &[b'a', 0xFF]), usize::MAX), Err(INVALID_UTF8));
        let input = [frame(0x01, b"a"), frame(0x81, b"b")].concat();
        assert_eq!(feed(&mut reader(), &input, usize::MAX).map_err(|e| e.code), Err(CloseCode::PROTOCOL));
        // Recycled buffers carry later messages, text and binary alike,
        // and nothing of what they held before.
        let mut r = reader();
        r.recycle(Message::Binary(vec![0xFF; 64]));
        let input = [frame(0x81, "h\u{e9}".as_bytes()), frame(0x82, b"xy")].concat();
        let events = feed(&mut r, &input, usize::MAX).unwrap();
        assert_eq!(
            events,
            vec![Event::Data(Message::Text("h\u{e9}".into())), Event::Data(Message::Binary(b"xy".to_vec()))]
        );
        r.recycle(Message::Binary(vec![0; SPARE_MAX + 1]));
        assert_eq!(r.spare.capacity(), 0, "a large buffer is not kept");
    }
}
