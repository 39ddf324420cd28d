//! The WebSocket conformance battery (`--only ws`), over real sockets.
//!
//! Autobahn's testsuite cannot run here (its fuzzing client is Python 2),
//! so this covers its categories against the echo endpoint (HttpArena's
//! echo-ws, `/ws`): 1 framing, 2 pings and pongs, 3 reserved bits,
//! 4 opcodes, 5 fragmentation, 6 UTF-8 (with an invalid-sequence corpus,
//! and failing fast mid-fragment), 7 close codes and the close handshake,
//! 9-style limits, and the opening handshake PROFILES.md asks for. Each
//! case opens its own connection, writes the client's frames (all at once,
//! or a byte at a time) and compares what comes back, frame by frame.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::{Ctx, Reporter};
use crate::rig::wsframe::{frame, handshake, parse_frame, push_length, SAMPLE_ACCEPT};

/// What the client expects next from the server.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Want {
    Text(Vec<u8>),
    Binary(Vec<u8>),
    Pong(Vec<u8>),
    /// A close frame with one of these codes (empty: a close with no
    /// code), after which the server must end the connection once the
    /// client answers.
    Close(&'static [u16]),
}

/// How the client writes its frames.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Write1 {
    AllAtOnce,
    /// One byte per write, each its own TCP segment (Autobahn's "chopped").
    ByteByByte,
}

struct Case {
    name: String,
    frames: Vec<Vec<u8>>,
    write: Write1,
    want: Vec<Want>,
}

fn case(name: impl Into<String>, frames: Vec<Vec<u8>>, want: Vec<Want>) -> Case {
    Case { name: name.into(), frames, write: Write1::AllAtOnce, want }
}

const PROTOCOL_ERROR: &[u16] = &[1002];
const INVALID_DATA: &[u16] = &[1007];
const NORMAL: &[u16] = &[1000];

fn text(s: &[u8]) -> Want {
    Want::Text(s.to_vec())
}

pub fn run(ctx: &Ctx, rep: &mut Reporter) {
    let Some(path) = rep.route("ws", &ctx.routes.ws) else { return };
    let path = format!("{}{path}", ctx.target.prefix);
    handshake_checks(ctx, rep, &path);
    for case in cases() {
        let name = format!("ws {}", case.name);
        rep.record(&name, run_case(ctx, &path, &case));
    }
    super::ws_h2::run(ctx, rep, &path);
}

/// PROFILES.md's handshake rules.
fn handshake_checks(ctx: &Ctx, rep: &mut Reporter, path: &str) {
    let result = (|| {
        let (_, head) = open(ctx, path, "")?;
        if !head.contains(&format!("\r\nsec-websocket-accept: {}\r\n", SAMPLE_ACCEPT.to_ascii_lowercase())) {
            return Err(format!("no correct Sec-WebSocket-Accept in {head:?}"));
        }
        Ok(())
    })();
    rep.record("ws handshake: 101 with the right Sec-WebSocket-Accept", result);
    let plain = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", ctx.target.host);
    let result = refused(ctx, plain.as_bytes(), &["400", "426"]);
    rep.record("ws handshake: a plain GET gets 400 or 426", result.map(drop));
    let v8 = String::from_utf8(handshake(&ctx.target.host, path, ""))
        .unwrap_or_default()
        .replace("Sec-WebSocket-Version: 13", "Sec-WebSocket-Version: 8");
    let result = refused(ctx, v8.as_bytes(), &["426"]).and_then(|head| {
        if head.contains("\r\nsec-websocket-version: 13\r\n") {
            Ok(head)
        } else {
            Err(format!("426 without Sec-WebSocket-Version: 13: {head:?}"))
        }
    });
    rep.record("ws handshake: version 8 gets 426 naming version 13", result.map(drop));
}

/// Sends `request`; the head must have one of `statuses`. Returns the head
/// in lower case.
fn refused(ctx: &Ctx, request: &[u8], statuses: &[&str]) -> Result<String, String> {
    let mut s = connect(ctx)?;
    s.write_all(request).map_err(|e| format!("write: {e}"))?;
    let (head, _) = read_head(&mut s)?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if statuses.contains(&status) {
        Ok(head.to_ascii_lowercase())
    } else {
        Err(format!("expected {statuses:?}, got {:?}", head.lines().next().unwrap_or("")))
    }
}

fn connect(ctx: &Ctx) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&ctx.target.addr, ctx.target.timeout)
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(ctx.target.timeout)).map_err(|e| e.to_string())?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    Ok(s)
}

/// Reads a response head; returns it and the bytes after it.
fn read_head(s: &mut TcpStream) -> Result<(String, Vec<u8>), String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
            return Ok((head, buf[end + 4..].to_vec()));
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err("connection closed before a response head".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("reading the response head: {e}")),
        }
    }
}

/// Opens a WebSocket: the stream with what followed the `101`, and the
/// head in lower case.
fn open(ctx: &Ctx, path: &str, extra: &str) -> Result<((TcpStream, Vec<u8>), String), String> {
    let mut s = connect(ctx)?;
    s.write_all(&handshake(&ctx.target.host, path, extra)).map_err(|e| format!("write: {e}"))?;
    let (head, rest) = read_head(&mut s)?;
    if !head.starts_with("HTTP/1.1 101 ") {
        return Err(format!("expected 101, got {:?}", head.lines().next().unwrap_or("")));
    }
    Ok(((s, rest), head.to_ascii_lowercase()))
}

/// What the server sent, message by message (fragments joined).
#[derive(Debug, PartialEq, Eq)]
enum Got {
    Text(Vec<u8>),
    Binary(Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, Vec<u8>),
    End,
}

struct Reader {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    fn next(&mut self) -> Result<Got, String> {
        let mut message: Option<(u8, Vec<u8>)> = None;
        loop {
            if let Some(f) = parse_frame(&self.buf)? {
                let (fin, opcode, payload, len) = (f.fin, f.opcode, f.payload.to_vec(), f.len);
                if f.rsv != 0 {
                    return Err(format!("server frame with RSV bits {:#b} (no extension agreed)", f.rsv));
                }
                self.buf.drain(..len);
                let got = match opcode {
                    0x9 => Got::Ping(payload),
                    0xA => Got::Pong(payload),
                    0x8 => match payload.as_slice() {
                        [] => Got::Close(None, Vec::new()),
                        [hi, lo, reason @ ..] => {
                            Got::Close(Some(u16::from_be_bytes([*hi, *lo])), reason.to_vec())
                        }
                        _ => return Err("server close frame of one byte".into()),
                    },
                    0x1 | 0x2 if message.is_none() => {
                        message = Some((opcode, payload));
                        if !fin {
                            continue;
                        }
                        let (op, data) = message.take().unwrap_or_default();
                        if op == 1 {
                            Got::Text(data)
                        } else {
                            Got::Binary(data)
                        }
                    }
                    0x0 => match message.as_mut() {
                        Some((op, data)) => {
                            data.extend_from_slice(&payload);
                            if !fin {
                                continue;
                            }
                            let (op, data) = (*op, std::mem::take(data));
                            if op == 1 {
                                Got::Text(data)
                            } else {
                                Got::Binary(data)
                            }
                        }
                        None => return Err("server continuation frame without a message".into()),
                    },
                    other => return Err(format!("server frame with opcode {other:#x} where none fits")),
                };
                return Ok(got);
            }
            let mut chunk = [0u8; 65536];
            match self.s.read(&mut chunk) {
                Ok(0) => return Ok(Got::End),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset) => return Ok(Got::End),
                Err(e) => return Err(format!("no answer ({e})")),
            }
        }
    }
}

fn run_case(ctx: &Ctx, path: &str, case: &Case) -> Result<(), String> {
    let ((mut s, rest), _) = open(ctx, path, "")?;
    for f in &case.frames {
        match case.write {
            Write1::AllAtOnce => s.write_all(f),
            Write1::ByteByByte => f.iter().try_for_each(|b| s.write_all(&[*b])),
        }
        .map_err(|e| format!("write: {e}"))?;
    }
    let mut reader = Reader { s, buf: rest };
    for want in &case.want {
        let got = reader.next()?;
        let ok = match (want, &got) {
            (Want::Text(w), Got::Text(g))
            | (Want::Binary(w), Got::Binary(g))
            | (Want::Pong(w), Got::Pong(g)) => w == g,
            (Want::Close(codes), Got::Close(code, reason)) => {
                let code_ok = match code {
                    None => codes.is_empty() || codes.contains(&1000) || codes.contains(&1005),
                    Some(c) => codes.contains(c),
                };
                if code_ok && std::str::from_utf8(reason).is_err() {
                    return Err("close reason is not UTF-8".into());
                }
                code_ok
            }
            _ => false,
        };
        if !ok {
            return Err(format!("expected {}, got {}", describe_want(want), describe_got(&got)));
        }
        if let (Want::Close(_), Got::Close(code, _)) = (want, &got) {
            // Answer, then the server must close TCP (RFC 6455 §7.1.1).
            let answer = code.map(|c| c.to_be_bytes().to_vec()).unwrap_or_default();
            let _ = reader.s.write_all(&frame(0x88, &answer));
            return expect_end(&mut reader, ctx.close_wait);
        }
    }
    Ok(())
}

fn expect_end(reader: &mut Reader, within: Duration) -> Result<(), String> {
    // The read timeout bounds the wait: a server that keeps the connection
    // open makes the read fail.
    let _ = reader.s.set_read_timeout(Some(within));
    match reader.next() {
        Ok(Got::End) => Ok(()),
        Ok(other) => Err(format!("after the close handshake, got {}", describe_got(&other))),
        Err(e) => Err(format!("the server did not close the connection after the close handshake: {e}")),
    }
}

fn describe_want(w: &Want) -> String {
    match w {
        Want::Text(t) => format!("text of {} bytes", t.len()),
        Want::Binary(b) => format!("binary of {} bytes", b.len()),
        Want::Pong(p) => format!("pong of {} bytes", p.len()),
        Want::Close(codes) => format!("close {codes:?}"),
    }
}

fn describe_got(g: &Got) -> String {
    match g {
        Got::Text(t) if t.len() <= 40 => format!("text {:?}", String::from_utf8_lossy(t)),
        Got::Text(t) => format!("text of {} bytes", t.len()),
        Got::Binary(b) => format!("binary of {} bytes", b.len()),
        Got::Ping(p) => format!("ping of {} bytes", p.len()),
        Got::Pong(p) => format!("pong of {} bytes", p.len()),
        Got::Close(code, reason) => format!("close {code:?} {:?}", String::from_utf8_lossy(reason)),
        Got::End => "the end of the connection".into(),
    }
}

/// Invalid UTF-8: Markus Kuhn's stress-test sequences, as Autobahn 6.x
/// uses them (lone continuation bytes, overlong forms, surrogates, code
/// points past U+10FFFF, bytes that never appear).
const INVALID_UTF8: &[(&str, &[u8])] = &[
    ("lone continuation byte", &[0x80]),
    ("lone continuation bytes", &[0xbf, 0x80, 0xbf]),
    ("start byte without continuation", &[0xc0, 0x20]),
    ("4-byte start then space", &[0xf0, 0x20]),
    ("truncated 3-byte sequence at the end", &[0xe2, 0x82]),
    ("overlong slash, 2 bytes", &[0xc0, 0xaf]),
    ("overlong slash, 3 bytes", &[0xe0, 0x80, 0xaf]),
    ("overlong slash, 4 bytes", &[0xf0, 0x80, 0x80, 0xaf]),
    ("overlong NUL", &[0xc0, 0x80]),
    ("UTF-16 surrogate U+D800", &[0xed, 0xa0, 0x80]),
    ("UTF-16 surrogate U+DFFF", &[0xed, 0xbf, 0xbf]),
    ("surrogate pair", &[0xed, 0xa0, 0x80, 0xed, 0xb0, 0x80]),
    ("past U+10FFFF", &[0xf4, 0x90, 0x80, 0x80]),
    ("5-byte form", &[0xf8, 0x88, 0x80, 0x80, 0x80]),
    ("byte 0xfe", &[0xfe]),
    ("byte 0xff", &[0xff]),
    (
        "valid text then invalid",
        &[
            0xce, 0xba, 0xe1, 0xbd, 0xb9, 0xcf, 0x83, 0xce, 0xbc, 0xce, 0xb5, 0xed, 0xa0, 0x80, 0x65, 0x64,
            0x69, 0x74, 0x65, 0x64,
        ],
    ),
];

/// Valid UTF-8 that must echo unchanged, including the edges.
const VALID_UTF8: &[(&str, &str)] = &[
    ("Greek", "\u{3ba}\u{1f79}\u{3c3}\u{3bc}\u{3b5}"),
    ("last 1-byte", "\u{7f}"),
    ("first 2-byte", "\u{80}"),
    ("last 3-byte before surrogates", "\u{d7ff}"),
    ("first after surrogates", "\u{e000}"),
    ("U+FFFD", "\u{fffd}"),
    ("last code point", "\u{10ffff}"),
    ("emoji", "hello \u{1f600} world"),
];

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // 1. Framing: every length form, text and binary.
    for len in [0usize, 125, 126, 127, 128, 65535, 65536, 1 << 20] {
        let payload = vec![b'*'; len];
        cases.push(case(
            format!("1 framing: text of {len} bytes"),
            vec![frame(0x81, &payload)],
            vec![text(&payload)],
        ));
        let payload: Vec<u8> = (0..len).map(|i| (i % 256) as u8).collect();
        cases.push(case(
            format!("1 framing: binary of {len} bytes"),
            vec![frame(0x82, &payload)],
            vec![Want::Binary(payload)],
        ));
    }
    let chopped = Case {
        name: "1 framing: a 300-byte text written a byte at a time".into(),
        frames: vec![frame(0x81, &[b'c'; 300])],
        write: Write1::ByteByByte,
        want: vec![text(&[b'c'; 300])],
    };
    cases.push(chopped);
    cases.push(case(
        "1 framing: 100 messages in one write come back in order",
        vec![(0..100).flat_map(|i| frame(0x81, format!("m{i}").as_bytes())).collect()],
        (0..100).map(|i| text(format!("m{i}").as_bytes())).collect(),
    ));
    // 2. Pings and pongs.
    cases.push(case("2 ping: empty, answered", vec![frame(0x89, b"")], vec![Want::Pong(vec![])]));
    cases.push(case(
        "2 ping: 125 bytes, echoed",
        vec![frame(0x89, &[0xfe; 125])],
        vec![Want::Pong(vec![0xfe; 125])],
    ));
    cases.push(case(
        "2 ping: 126 bytes is a protocol error",
        vec![frame(0x89, &[0; 126])],
        vec![Want::Close(PROTOCOL_ERROR)],
    ));
    cases.push(case(
        "2 pong: unsolicited, ignored",
        vec![frame(0x8A, b"unsolicited"), frame(0x81, b"after")],
        vec![text(b"after")],
    ));
    cases.push(case(
        "2 ping: ten in a row, ten pongs",
        vec![(0..10u8).flat_map(|i| frame(0x89, &[i])).collect()],
        (0..10u8).map(|i| Want::Pong(vec![i])).collect(),
    ));
    cases.push(Case {
        name: "2 ping: written a byte at a time".into(),
        frames: vec![frame(0x89, b"chopped")],
        write: Write1::ByteByByte,
        want: vec![Want::Pong(b"chopped".to_vec())],
    });
    // 3. Reserved bits, with no extension agreed.
    for (bits, name) in [(0x40u8, "RSV1"), (0x20, "RSV2"), (0x10, "RSV3"), (0x70, "all three")] {
        cases.push(case(
            format!("3 reserved bits: {name} on a text frame"),
            vec![frame(0x81 | bits, b"x")],
            vec![Want::Close(PROTOCOL_ERROR)],
        ));
    }
    cases.push(case(
        "3 reserved bits: RSV2 on a ping, after an echo",
        vec![frame(0x81, b"first"), frame(0x89 | 0x20, b"")],
        vec![text(b"first"), Want::Close(PROTOCOL_ERROR)],
    ));
    // 4. Opcodes.
    for op in [3u8, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
        cases.push(case(
            format!("4 opcode {op:#x} is reserved"),
            vec![frame(0x80 | op, b"")],
            vec![Want::Close(PROTOCOL_ERROR)],
        ));
    }
    // 5. Fragmentation.
    cases.push(case(
        "5 fragments: text in three, joined",
        vec![frame(0x01, b"frag"), frame(0x00, b"men"), frame(0x80, b"ted")],
        vec![text(b"fragmented")],
    ));
    cases.push(case(
        "5 fragments: a ping between them is answered first",
        vec![frame(0x02, b"ab"), frame(0x89, b"ping"), frame(0x80, b"cd")],
        vec![Want::Pong(b"ping".to_vec()), Want::Binary(b"abcd".to_vec())],
    ));
    cases.push(case(
        "5 fragments: 100 of one byte",
        vec![(0..100)
            .flat_map(|i| {
                frame(
                    if i == 0 {
                        0x01
                    } else if i == 99 {
                        0x80
                    } else {
                        0x00
                    },
                    b"z",
                )
            })
            .collect()],
        vec![text(&[b'z'; 100])],
    ));
    cases.push(case(
        "5 fragments: empty fragments",
        vec![frame(0x01, b""), frame(0x00, b""), frame(0x80, b"")],
        vec![text(b"")],
    ));
    cases.push(case(
        "5 fragments: a continuation with nothing to continue",
        vec![frame(0x80, b"x")],
        vec![Want::Close(PROTOCOL_ERROR)],
    ));
    cases.push(case(
        "5 fragments: a fragmented ping",
        vec![frame(0x09, b"a"), frame(0x80, b"b")],
        vec![Want::Close(PROTOCOL_ERROR)],
    ));
    cases.push(case(
        "5 fragments: a new message before the last ended",
        vec![frame(0x01, b"a"), frame(0x81, b"b")],
        vec![Want::Close(PROTOCOL_ERROR)],
    ));
    // 6. UTF-8.
    for (name, s) in VALID_UTF8 {
        cases.push(case(
            format!("6 utf-8 valid: {name}"),
            vec![frame(0x81, s.as_bytes())],
            vec![text(s.as_bytes())],
        ));
    }
    let euro = "\u{20ac}".as_bytes();
    cases.push(case(
        "6 utf-8 valid: a code point split across fragments",
        vec![frame(0x01, &euro[..1]), frame(0x00, &euro[1..2]), frame(0x80, &euro[2..])],
        vec![text(euro)],
    ));
    for (name, bytes) in INVALID_UTF8 {
        cases.push(case(
            format!("6 utf-8 invalid: {name}"),
            vec![frame(0x81, bytes)],
            vec![Want::Close(INVALID_DATA)],
        ));
    }
    // Fail fast: the final fragment is never sent, so a server that waits
    // for the end of the message before validating times out here.
    cases.push(case(
        "6 utf-8 invalid: refused mid-message, at the fragment that carries it",
        vec![frame(0x01, b"fine so far "), frame(0x00, &[0xed, 0xa0, 0x80])],
        vec![Want::Close(INVALID_DATA)],
    ));
    // 7. Close.
    cases.push(case(
        "7 close: 1000 is answered with 1000",
        vec![frame(0x88, &1000u16.to_be_bytes())],
        vec![Want::Close(NORMAL)],
    ));
    cases.push(case("7 close: without a code", vec![frame(0x88, b"")], vec![Want::Close(&[])]));
    cases.push(case(
        "7 close: with a reason",
        vec![frame(0x88, &[&1000u16.to_be_bytes()[..], b"bye"].concat())],
        vec![Want::Close(NORMAL)],
    ));
    cases.push(case(
        "7 close: data after the close is ignored",
        vec![frame(0x88, &1000u16.to_be_bytes()), frame(0x81, b"late")],
        vec![Want::Close(NORMAL)],
    ));
    cases.push(case(
        "7 close: payload of one byte",
        vec![frame(0x88, &[0x03])],
        vec![Want::Close(PROTOCOL_ERROR)],
    ));
    cases.push(case(
        "7 close: reason not UTF-8",
        vec![frame(0x88, &[0x03, 0xe8, 0xce, 0xba, 0xed, 0xa0, 0x80])],
        vec![Want::Close(&[1002, 1007])],
    ));
    for code in [1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999] {
        cases.push(case(
            format!("7 close: valid code {code}"),
            vec![frame(0x88, &code.to_be_bytes())],
            vec![Want::Close(&[
                1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
            ])],
        ));
    }
    for code in [0u16, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999, 5000, 65535] {
        cases.push(case(
            format!("7 close: invalid code {code}"),
            vec![frame(0x88, &code.to_be_bytes())],
            vec![Want::Close(PROTOCOL_ERROR)],
        ));
    }
    // 9-style limits: a length with the top bit set, and a frame declared
    // far larger than any server accepts, refused at the header.
    let mut msb = vec![0x82, 0x80 | 127];
    msb.extend_from_slice(&(1u64 << 63).to_be_bytes());
    msb.extend_from_slice(&[0, 0, 0, 0]);
    cases.push(case(
        "9 limits: a 64-bit length with its top bit set",
        vec![msb],
        vec![Want::Close(&[1002, 1009])],
    ));
    let mut huge = vec![0x82];
    push_length(&mut huge, 0x80, 1 << 40);
    huge.extend_from_slice(&[0, 0, 0, 0]);
    cases.push(case(
        "9 limits: a 1 TiB frame is refused at its header",
        vec![huge],
        vec![Want::Close(&[1009])],
    ));
    // Masking: a server must refuse unmasked client frames.
    cases.push(case(
        "1 framing: an unmasked client frame",
        vec![vec![0x81, 0x02, b'h', b'i']],
        vec![Want::Close(PROTOCOL_ERROR)],
    ));
    cases
}
