//! WebSocket frames as a client writes and reads them (RFC 6455 §5.2):
//! the verifier's conformance battery and the echo load client share it.
//! Pure functions over bytes.

/// The handshake request for `path`: version 13, the RFC's sample key.
pub fn handshake(host: &str, path: &str, extra_headers: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {SAMPLE_KEY}\r\nSec-WebSocket-Version: 13\r\n{extra_headers}\r\n"
    )
    .into_bytes()
}

/// RFC 6455 §1.3's sample key, and the accept value it must produce.
pub const SAMPLE_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
pub const SAMPLE_ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// Appends a masked client frame: `b0` is FIN, RSV and opcode as sent.
pub fn push_frame(out: &mut Vec<u8>, b0: u8, payload: &[u8]) {
    const MASK: [u8; 4] = [0x5a, 0x1c, 0xe3, 0x07];
    out.push(b0);
    push_length(out, 0x80, payload.len() as u64);
    out.extend_from_slice(&MASK);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
}

/// A masked client frame.
pub fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    push_frame(&mut out, b0, payload);
    out
}

/// The length field in its shortest form, with `mask_bit` (0x80 or 0).
pub fn push_length(out: &mut Vec<u8>, mask_bit: u8, len: u64) {
    if len < 126 {
        out.push(mask_bit | len as u8);
    } else if len <= 0xFFFF {
        out.push(mask_bit | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(mask_bit | 127);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// A server frame decoded from the start of `buf`.
#[derive(Debug, PartialEq, Eq)]
pub struct ServerFrame<'a> {
    pub fin: bool,
    pub rsv: u8,
    pub opcode: u8,
    pub payload: &'a [u8],
    /// Bytes the frame took.
    pub len: usize,
}

/// Decodes a server frame; `Ok(None)` until it is all in `buf`. Server
/// frames must not be masked (§5.1).
pub fn parse_frame(buf: &[u8]) -> Result<Option<ServerFrame<'_>>, String> {
    let [b0, b1, ..] = *buf else { return Ok(None) };
    if b1 & 0x80 != 0 {
        return Err("the server masked a frame".into());
    }
    let (len, at) = match b1 & 0x7f {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match buf.get(2..10) {
            Some(b) => (u64::from_be_bytes(b.try_into().map_err(|_| "length")?), 10),
            None => return Ok(None),
        },
        n => (u64::from(n), 2),
    };
    let end = at as u64 + len;
    if (buf.len() as u64) < end {
        return Ok(None);
    }
    Ok(Some(ServerFrame {
        fin: b0 & 0x80 != 0,
        rsv: (b0 >> 4) & 0x7,
        opcode: b0 & 0x0f,
        payload: &buf[at..end as usize],
        len: end as usize,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_through_the_length_forms() {
        for len in [0usize, 125, 126, 65535, 65536] {
            let payload = vec![3u8; len];
            let mut server = vec![0x82];
            push_length(&mut server, 0, len as u64);
            server.extend_from_slice(&payload);
            for cut in 0..server.len() {
                assert_eq!(parse_frame(&server[..cut]), Ok(None));
            }
            let f = parse_frame(&server).unwrap().unwrap();
            assert_eq!((f.fin, f.opcode, f.payload.len(), f.len), (true, 2, len, server.len()));
            let client = frame(0x82, &payload);
            assert!(parse_frame(&client).is_err(), "client frames are masked");
        }
    }
}
