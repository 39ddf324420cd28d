//! permessage-deflate (RFC 7692): negotiating its parameters, and the
//! inflate / deflate state of one connection, with memory bounds.
//!
//! Pure: no I/O. flate2's default backend (miniz_oxide) always keeps a
//! 32 KiB window, so the server cannot honour a client's request for a
//! smaller *server* window (`server_max_window_bits` < 15): such an offer
//! is declined and the connection goes on uncompressed, as RFC 7692 §7.1
//! allows. Inflating with a 32 KiB window reads whatever window the client
//! compresses with, so `client_max_window_bits` is always acceptable.
//! Inflated output is bounded by the message limit while it is produced:
//! a small compressed frame cannot expand past it.

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// What the client's offer and the server agreed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Agreed {
    /// The server resets its compressor after every message.
    pub(crate) server_no_context_takeover: bool,
    /// The client resets its compressor after every message, so the
    /// server resets its decompressor too.
    pub(crate) client_no_context_takeover: bool,
}

impl Agreed {
    /// The `Sec-WebSocket-Extensions` value of the `101`.
    pub(crate) fn response_header(self) -> String {
        let mut value = String::from("permessage-deflate");
        if self.server_no_context_takeover {
            value.push_str("; server_no_context_takeover");
        }
        if self.client_no_context_takeover {
            value.push_str("; client_no_context_takeover");
        }
        value
    }
}

/// The first permessage-deflate offer in the `Sec-WebSocket-Extensions`
/// values that the server can accept (RFC 7692 §5: offers are in the
/// client's order of preference). `None`: none offered, or none
/// acceptable.
pub(crate) fn negotiate<'a>(values: impl Iterator<Item = &'a str>) -> Option<Agreed> {
    values.flat_map(|v| v.split(',')).find_map(accept_offer)
}

/// One extension offer: `permessage-deflate; param; param=value`.
fn accept_offer(offer: &str) -> Option<Agreed> {
    let mut parts = offer.split(';').map(str::trim);
    if !parts.next()?.eq_ignore_ascii_case("permessage-deflate") {
        return None;
    }
    let mut agreed = Agreed { server_no_context_takeover: false, client_no_context_takeover: false };
    let mut seen = [false; 4];
    for param in parts {
        let (name, value) = match param.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (param, None),
        };
        let index = match name.to_ascii_lowercase().as_str() {
            "server_no_context_takeover" if value.is_none() => {
                agreed.server_no_context_takeover = true;
                0
            }
            "client_no_context_takeover" if value.is_none() => {
                agreed.client_no_context_takeover = true;
                1
            }
            // Only a full window is possible with this backend.
            "server_max_window_bits" if window_bits(value?)? == 15 => 2,
            // The client may use any window; the server inflates with 15.
            "client_max_window_bits" => {
                if let Some(v) = value {
                    window_bits(v)?;
                }
                3
            }
            _ => return None,
        };
        // A parameter given twice makes the offer invalid (§7.1).
        if std::mem::replace(&mut seen[index], true) {
            return None;
        }
    }
    Some(agreed)
}

fn window_bits(value: &str) -> Option<u8> {
    let bits: u8 = value.parse().ok()?;
    (8..=15).contains(&bits).then_some(bits)
}

/// The four bytes every sync-flushed message ends with, removed by the
/// sender and restored by the receiver (§7.2.1).
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Why inflating failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InflateError {
    /// Not valid DEFLATE data.
    Corrupt,
    /// The output would pass the message limit.
    TooLarge,
}

/// One connection's inflate state.
pub(crate) struct Inflater {
    d: Decompress,
    reset_each_message: bool,
    /// The current message's deflate stream ended with a final block:
    /// any more of its payload is corrupt, however the reads split it.
    /// (Found by the ws_frames fuzz target: a final block ending exactly
    /// at a read boundary used to reset the state and start a new stream
    /// with the next read, where the same bytes in one read failed.)
    ended: bool,
}

impl std::fmt::Debug for Inflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inflater").field("reset_each_message", &self.reset_each_message).finish()
    }
}

impl Inflater {
    pub(crate) fn new(agreed: Agreed) -> Inflater {
        Inflater {
            d: Decompress::new(false),
            reset_each_message: agreed.client_no_context_takeover,
            ended: false,
        }
    }

    /// Inflates one piece of a message's compressed payload, appending to
    /// `out`, which may not grow past `max` bytes.
    pub(crate) fn inflate(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max: usize,
    ) -> Result<(), InflateError> {
        self.run(input, out, max)
    }

    /// Ends a message: inflates the removed tail, and resets the state if
    /// the client does not keep its context.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>, max: usize) -> Result<(), InflateError> {
        // After a final block the removed tail is not part of any stream.
        let result = if self.ended { Ok(()) } else { self.run(&TAIL, out, max) };
        self.ended = false;
        if self.reset_each_message || result.is_err() {
            self.d.reset(false);
        }
        result
    }

    fn run(&mut self, mut input: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), InflateError> {
        if self.ended {
            return if input.is_empty() { Ok(()) } else { Err(InflateError::Corrupt) };
        }
        loop {
            if out.len() == out.capacity() {
                if out.len() >= max {
                    // Full at the limit: any more output is too much.
                    let probe = self.probe(input)?;
                    return if probe { Err(InflateError::TooLarge) } else { Ok(()) };
                }
                // Exact, so the buffer never holds more than `max`; doubling
                // (at least 64 KiB) keeps large messages linear.
                out.reserve_exact((max - out.len()).min(out.len().max(64 << 10)));
            }
            let (in_before, out_before) = (self.d.total_in(), out.len());
            let status = self
                .d
                .decompress_vec(input, out, FlushDecompress::Sync)
                .map_err(|_| InflateError::Corrupt)?;
            let consumed = (self.d.total_in() - in_before) as usize;
            input = &input[consumed..];
            if out.len() > max {
                return Err(InflateError::TooLarge);
            }
            let room_left = out.len() < out.capacity();
            match status {
                // A final block ends the stream: anything after it is not
                // part of a permessage-deflate payload.
                Status::StreamEnd if !input.is_empty() => return Err(InflateError::Corrupt),
                Status::StreamEnd => {
                    self.d.reset(false);
                    self.ended = true;
                    return Ok(());
                }
                _ if input.is_empty() && room_left => return Ok(()),
                _ if consumed == 0 && out.len() == out_before && room_left => {
                    return Err(InflateError::Corrupt)
                }
                _ => {}
            }
        }
    }

    /// Whether `input` still inflates to at least one byte.
    fn probe(&mut self, input: &[u8]) -> Result<bool, InflateError> {
        let mut byte = [0u8; 1];
        let before = self.d.total_out();
        self.d.decompress(input, &mut byte, FlushDecompress::Sync).map_err(|_| InflateError::Corrupt)?;
        Ok(self.d.total_out() > before)
    }
}

/// One connection's deflate state, made on the first compressed message.
pub(crate) struct Deflater {
    c: Option<Box<Compress>>,
    reset_each_message: bool,
}

impl std::fmt::Debug for Deflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deflater").field("started", &self.c.is_some()).finish()
    }
}

impl Deflater {
    pub(crate) fn new(agreed: Agreed) -> Deflater {
        Deflater { c: None, reset_each_message: agreed.server_no_context_takeover }
    }

    /// Compresses one whole message into `out` (appended), without the
    /// sync-flush tail.
    pub(crate) fn deflate(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        let c = self.c.get_or_insert_with(|| Box::new(Compress::new(Compression::fast(), false)));
        let start = out.len();
        out.reserve(input.len() / 2 + 64);
        loop {
            let before = c.total_in();
            // Compressing into a Vec with room cannot fail.
            let _ = c.compress_vec(input, out, FlushCompress::Sync);
            input = &input[(c.total_in() - before) as usize..];
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity().max(256));
        }
        if out.len() >= start + 4 && out[out.len() - 4..] == TAIL {
            out.truncate(out.len() - 4);
        }
        if self.reset_each_message {
            c.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agreed(server: bool, client: bool) -> Agreed {
        Agreed { server_no_context_takeover: server, client_no_context_takeover: client }
    }

    #[test]
    fn negotiates_the_first_acceptable_offer() {
        assert_eq!(negotiate(["permessage-deflate"].into_iter()), Some(agreed(false, false)));
        assert_eq!(
            negotiate(["permessage-deflate; client_max_window_bits"].into_iter()),
            Some(agreed(false, false))
        );
        assert_eq!(
            negotiate(["permessage-deflate; server_max_window_bits=10, permessage-deflate; client_no_context_takeover"].into_iter()),
            Some(agreed(false, true))
        );
        assert_eq!(negotiate(["permessage-deflate; server_max_window_bits=10"].into_iter()), None);
        assert_eq!(negotiate(["permessage-deflate; bogus"].into_iter()), None);
        assert_eq!(
            negotiate(
                ["permessage-deflate; server_no_context_takeover; server_no_context_takeover"].into_iter()
            ),
            None
        );
        assert_eq!(negotiate(["x-webkit-deflate-frame"].into_iter()), None);
        assert_eq!(
            agreed(true, true).response_header(),
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        );
    }

    #[test]
    fn round_trips_across_messages_and_context_modes() {
        for (server, client) in [(false, false), (true, true)] {
            let a = agreed(server, client);
            let (mut tx, mut rx) =
                (Deflater::new(a), Inflater::new(Agreed { client_no_context_takeover: server, ..a }));
            for msg in [&b"hello hello hello hello"[..], &[7u8; 100_000], b"", b"hello hello hello hello"] {
                let mut wire = Vec::new();
                tx.deflate(msg, &mut wire);
                let mut out = Vec::new();
                // In pieces, as frames arrive.
                for piece in wire.chunks(7) {
                    rx.inflate(piece, &mut out, 1 << 20).unwrap();
                }
                rx.finish(&mut out, 1 << 20).unwrap();
                assert_eq!(out, msg);
            }
        }
    }

    #[test]
    fn output_is_bounded_and_garbage_refused() {
        let mut tx = Deflater::new(agreed(false, false));
        let mut wire = Vec::new();
        tx.deflate(&[0u8; 1 << 20], &mut wire);
        assert!(wire.len() < 8192, "a MiB of zeros compresses small: {}", wire.len());
        let mut rx = Inflater::new(agreed(false, false));
        let mut out = Vec::new();
        let r = rx.inflate(&wire, &mut out, 1000).and_then(|()| rx.finish(&mut out, 1000));
        assert_eq!(r, Err(InflateError::TooLarge));
        assert!(out.len() <= 1000);
        let mut exact = Vec::new();
        let mut rx = Inflater::new(agreed(false, false));
        let r = rx.inflate(&wire, &mut exact, 1 << 20).and_then(|()| rx.finish(&mut exact, 1 << 20));
        assert_eq!((r, exact.len()), (Ok(()), 1 << 20));
        let mut rx = Inflater::new(agreed(false, false));
        let r = rx.inflate(&[0xff; 64], &mut Vec::new(), 1 << 20);
        assert_eq!(r, Err(InflateError::Corrupt));
    }
}
