//! The HTTP/2 connection state machine on arbitrary client bytes, with the
//! server's side played from the input too.
//!
//! The core parses frames from a hostile peer, keeps stream states, both
//! directions' windows and two HPACK contexts: it must never panic, and
//! whatever it writes must be a valid frame sequence a client can follow.
//! Every output byte is parsed here as a client would (frame lengths,
//! header blocks decoded with one client-side HPACK decoder kept for the
//! whole connection, so the server's encoder must stay in step), and the
//! DATA the server sends is checked against the most the client's input
//! ever allowed (65,535 or the largest SETTINGS_INITIAL_WINDOW_SIZE, plus
//! every WINDOW_UPDATE increment): an upper bound that holds however the
//! server interleaved reading and writing.
//!
//! Input layout: a config byte, then operations, each an opcode byte and
//! its arguments (the client preface is taken as already read):
//! - 0 `n` bytes: `n` (u8) client bytes fed to the connection;
//! - 1 `n:u16` bytes: the same, up to 65,535 bytes;
//! - 2 `s status size:u16 mode`: answer the `s`-th open stream;
//! - 3 `s`: read its request body; 4 `s code`: reset it;
//! - 5 `s`: release it; 6 `s`: stop reading its body;
//! - 7 `s len:u16 end`: more response body;
//! - 8 `s`: ask for send capacity;
//! - 9 `n:u16`: let the "socket" take `n` bytes of output (0: all);
//! - 10: graceful GOAWAY; 11: the transport closes.

#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use peregrine::config::Http2Config;
use peregrine::fuzzing::{Decoder, H2Answer, H2CoreHarness};

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// One frame header, parsed independently of the server's own parser.
struct Head {
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

fn head(b: &[u8]) -> Head {
    Head {
        len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
        kind: b[3],
        flags: b[4],
        stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
    }
}

fn word(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// What the client's bytes allowed the server, read from the input.
#[derive(Default)]
struct Allowance {
    unparsed: Vec<u8>,
    /// 65,535 plus every connection WINDOW_UPDATE increment.
    connection: i64,
    /// The largest initial stream window ever announced.
    initial: i64,
    /// Increments per stream.
    streams: HashMap<u32, i64>,
    /// The largest SETTINGS_MAX_FRAME_SIZE ever announced.
    max_frame: usize,
    /// DATA the client sent (flow-controlled length), in all and per
    /// stream: the most the server can give back in WINDOW_UPDATEs.
    data: i64,
    stream_data: HashMap<u32, i64>,
    /// The highest stream the client sent HEADERS on: streams above are
    /// idle, and RST_STREAM must not name them (RFC 9113 §6.4).
    opened: u32,
}

impl Allowance {
    fn new() -> Self {
        Allowance { connection: 65_535, initial: 65_535, max_frame: 16_384, ..Default::default() }
    }

    fn fed(&mut self, bytes: &[u8]) {
        self.unparsed.extend_from_slice(bytes);
        let mut at = 0;
        while self.unparsed.len() - at >= 9 {
            let h = head(&self.unparsed[at..]);
            if self.unparsed.len() - at - 9 < h.len {
                break;
            }
            let payload = &self.unparsed[at + 9..at + 9 + h.len];
            match h.kind {
                SETTINGS if h.flags & 1 == 0 => {
                    for p in payload.chunks_exact(6) {
                        let value = word(&p[2..]);
                        match u16::from_be_bytes([p[0], p[1]]) {
                            0x4 => self.initial = self.initial.max(i64::from(value)),
                            0x5 if (1 << 14..1 << 24).contains(&value) => {
                                self.max_frame = self.max_frame.max(value as usize)
                            }
                            _ => {}
                        }
                    }
                }
                HEADERS => self.opened = self.opened.max(h.stream),
                DATA => {
                    self.data += h.len as i64;
                    *self.stream_data.entry(h.stream).or_default() += h.len as i64;
                }
                WINDOW_UPDATE if h.len == 4 => {
                    let increment = i64::from(word(payload) & 0x7fff_ffff);
                    if h.stream == 0 {
                        self.connection += increment;
                    } else {
                        *self.streams.entry(h.stream).or_default() += increment;
                    }
                }
                _ => {}
            }
            at += 9 + h.len;
        }
        self.unparsed.drain(..at);
    }
}

/// A response stream as the client sees it.
#[derive(Default)]
struct Seen {
    headers: bool,
    ended: bool,
    reset: bool,
    data: i64,
}

/// The client's reading side: parses the server's output and checks it.
struct Client {
    buf: Vec<u8>,
    preface: bool,
    decoder: Decoder,
    /// A header block in progress: its stream, END_STREAM, the fragments.
    block: Option<(u32, bool, Vec<u8>)>,
    streams: HashMap<u32, Seen>,
    data: i64,
    goaway: Option<u32>,
    failed: bool,
    /// WINDOW_UPDATE increments the server granted, beyond its opening
    /// connection window update, in all and per stream.
    granted: i64,
    stream_granted: HashMap<u32, i64>,
    /// Frames read so far.
    frames: usize,
}

impl Client {
    fn read(&mut self, bytes: &[u8], allowed: &Allowance) {
        self.buf.extend_from_slice(bytes);
        let mut at = 0;
        while self.buf.len() - at >= 9 {
            let h = head(&self.buf[at..]);
            assert!(h.len <= allowed.max_frame, "a frame of {} bytes, past the client's maximum", h.len);
            if self.buf.len() - at - 9 < h.len {
                break;
            }
            let payload = self.buf[at + 9..at + 9 + h.len].to_vec();
            at += 9 + h.len;
            self.frame(&h, &payload, allowed);
            self.frames += 1;
        }
        self.buf.drain(..at);
    }

    fn frame(&mut self, h: &Head, payload: &[u8], allowed: &Allowance) {
        if !self.preface {
            assert!(h.kind == SETTINGS && h.flags == 0, "the server's first frame is not its SETTINGS");
            self.preface = true;
        }
        if let Some((stream, _, _)) = &self.block {
            assert!(h.kind == CONTINUATION && h.stream == *stream, "a header block interrupted");
        }
        match h.kind {
            DATA => {
                assert!(!self.failed, "DATA after a GOAWAY with an error");
                let seen = self.streams.entry(h.stream).or_default();
                assert!(h.stream % 2 == 1, "DATA on stream {}", h.stream);
                assert!(
                    seen.headers && !seen.ended && !seen.reset,
                    "DATA on stream {} out of order",
                    h.stream
                );
                seen.data += h.len as i64;
                self.data += h.len as i64;
                let stream_allowed = allowed.initial + allowed.streams.get(&h.stream).copied().unwrap_or(0);
                assert!(
                    seen.data <= stream_allowed,
                    "stream {} sent {} > {stream_allowed}",
                    h.stream,
                    seen.data
                );
                assert!(
                    self.data <= allowed.connection,
                    "connection sent {} > {}",
                    self.data,
                    allowed.connection
                );
                seen.ended = h.flags & END_STREAM != 0;
            }
            HEADERS | CONTINUATION => {
                assert!(!self.failed, "HEADERS after a GOAWAY with an error");
                assert!(h.stream % 2 == 1, "HEADERS on stream {}", h.stream);
                if let Some(last) = self.goaway {
                    assert!(h.stream <= last, "HEADERS on stream {} after GOAWAY({last})", h.stream);
                }
                let (stream, end, mut block) = match self.block.take() {
                    Some(b) => b,
                    None => {
                        assert_eq!(h.kind, HEADERS, "CONTINUATION without HEADERS");
                        (h.stream, h.flags & END_STREAM != 0, Vec::new())
                    }
                };
                block.extend_from_slice(payload);
                if h.flags & END_HEADERS == 0 {
                    self.block = Some((stream, end, block));
                    return;
                }
                let mut fields = Vec::new();
                self.decoder
                    .decode(&block, &mut |n, v| fields.push((n.to_vec(), v.to_vec())))
                    .expect("the server's header block decodes");
                let seen = self.streams.entry(stream).or_default();
                assert!(!seen.ended && !seen.reset, "HEADERS on ended stream {stream}");
                if seen.headers {
                    assert!(end, "trailers without END_STREAM");
                    assert!(fields.iter().all(|(n, _)| !n.starts_with(b":")), "pseudo-header in trailers");
                } else {
                    assert_eq!(
                        fields.first().map(|f| f.0.as_slice()),
                        Some(&b":status"[..]),
                        "no :status first"
                    );
                    seen.headers = true;
                }
                seen.ended = end;
            }
            RST_STREAM => {
                assert!(h.len == 4 && h.stream != 0, "a malformed RST_STREAM");
                assert!(h.stream <= allowed.opened, "RST_STREAM on idle stream {}", h.stream);
                self.streams.entry(h.stream).or_default().reset = true;
            }
            SETTINGS => {
                assert!(h.stream == 0 && h.len % 6 == 0, "a malformed SETTINGS");
                assert!(h.flags & 1 == 0 || h.len == 0, "a SETTINGS ACK with a payload");
            }
            PING => assert!(h.stream == 0 && h.len == 8 && h.flags & 1 != 0, "a PING that is no ACK"),
            GOAWAY => {
                assert!(h.stream == 0 && h.len >= 8, "a malformed GOAWAY");
                let last = word(payload) & 0x7fff_ffff;
                if let Some(before) = self.goaway {
                    assert!(last <= before, "GOAWAY's last stream rose from {before} to {last}");
                }
                self.goaway = Some(last);
                self.failed |= word(&payload[4..]) != 0;
            }
            WINDOW_UPDATE => {
                assert!(h.len == 4, "a malformed WINDOW_UPDATE");
                let increment = i64::from(word(payload) & 0x7fff_ffff);
                assert!(increment > 0, "a WINDOW_UPDATE of 0");
                // What the server gives back was sent to it first.
                if h.stream == 0 {
                    if self.frames == 1 {
                        // The opening one, right after the SETTINGS.
                        return;
                    }
                    self.granted += increment;
                    assert!(
                        self.granted <= allowed.data,
                        "granted {} > {} received",
                        self.granted,
                        allowed.data
                    );
                } else {
                    let granted = self.stream_granted.entry(h.stream).or_default();
                    *granted += increment;
                    let received = allowed.stream_data.get(&h.stream).copied().unwrap_or(0);
                    assert!(
                        *granted <= received,
                        "stream {} granted {granted} > {received} received",
                        h.stream
                    );
                }
            }
            kind => panic!("the server sent frame type {kind}"),
        }
    }
}

/// Takes `n` bytes off the front of `data`, or all there is.
fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, tail) = data.split_at(n.min(data.len()));
    *data = tail;
    head
}

fn byte(data: &mut &[u8]) -> u8 {
    take(data, 1).first().copied().unwrap_or(0)
}

fn short(data: &mut &[u8]) -> u16 {
    (u16::from(byte(data)) << 8) | u16::from(byte(data))
}

fn config(choice: u8) -> Http2Config {
    let mut config = Http2Config::default();
    if choice & 1 != 0 {
        // Small limits, so the fuzzer reaches them.
        config.max_concurrent_streams = 3;
        config.max_pending_accept_reset_streams = 2;
        config.max_local_error_reset_streams = 4;
        config.max_header_list_bytes = 512;
        config.max_send_buffer_bytes = 4096;
    }
    if choice & 2 != 0 {
        config.initial_stream_window = 100;
        config.initial_connection_window = 1000;
    }
    config
}

fuzz_target!(|input: &[u8]| {
    let mut data = input;
    let mut server = H2CoreHarness::new(&config(byte(&mut data)));
    let mut allowed = Allowance::new();
    let mut client = Client {
        buf: Vec::new(),
        preface: false,
        decoder: Decoder::new(4096),
        block: None,
        streams: HashMap::new(),
        data: 0,
        goaway: None,
        failed: false,
        granted: 0,
        stream_granted: HashMap::new(),
        frames: 0,
    };
    let pick = |server: &H2CoreHarness, s: u8| -> Option<u32> {
        let streams = server.streams();
        (!streams.is_empty()).then(|| streams[usize::from(s) % streams.len()])
    };
    while !data.is_empty() {
        match byte(&mut data) % 12 {
            op @ (0 | 1) => {
                let n = if op == 0 { usize::from(byte(&mut data)) } else { usize::from(short(&mut data)) };
                let bytes = take(&mut data, n);
                allowed.fed(bytes);
                server.feed(bytes);
            }
            2 => {
                let (s, status) = (byte(&mut data), byte(&mut data));
                let (size, mode) = (usize::from(short(&mut data)), byte(&mut data));
                let answer =
                    [H2Answer::HeadOnly, H2Answer::Body, H2Answer::BodyAndTrailers, H2Answer::Unfinished]
                        [usize::from(mode % 4)];
                if let Some(id) = pick(&server, s) {
                    server.respond(id, 200 + u16::from(status) * 2, size, answer);
                }
            }
            3 => {
                if let Some(id) = pick(&server, byte(&mut data)) {
                    server.read_body(id);
                }
            }
            4 => {
                let (s, code) = (byte(&mut data), byte(&mut data));
                if let Some(id) = pick(&server, s) {
                    server.reset(id, u32::from(code % 14));
                }
            }
            5 => {
                if let Some(id) = pick(&server, byte(&mut data)) {
                    server.release(id);
                }
            }
            6 => {
                if let Some(id) = pick(&server, byte(&mut data)) {
                    server.stop_reading(id);
                }
            }
            7 => {
                let (s, len, end) = (byte(&mut data), usize::from(short(&mut data)), byte(&mut data));
                if let Some(id) = pick(&server, s) {
                    server.send_data(id, len, end & 1 != 0);
                }
            }
            8 => {
                if let Some(id) = pick(&server, byte(&mut data)) {
                    server.capacity(id, 1 << 20);
                }
            }
            9 => {
                let n = short(&mut data);
                let n = if n == 0 { usize::MAX } else { usize::from(n) };
                let out = server.drain(n);
                client.read(&out, &allowed);
                // Output drained below the high-water mark: parsing resumes.
                server.feed(&[]);
            }
            10 => server.go_away(),
            _ => server.close(),
        }
    }
    let out = server.drain(usize::MAX);
    client.read(&out, &allowed);
});
