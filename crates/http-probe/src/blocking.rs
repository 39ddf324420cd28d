//! The reader over any [`std::io::Read`] (a `TcpStream`, a byte slice):
//! reads until [`crate::parse`] says a head or body is complete, reporting
//! how the stream ended when it ends first.

use std::io::{ErrorKind, Read};

use crate::message::{unexpected_bytes, End, ReadError, Response};
use crate::parse::{assemble, take_body, take_head, Head};

impl Response {
    /// Parses the first final response from canned bytes (interim ones
    /// skipped); bytes left after it are recorded as a defect, since nothing
    /// else was asked for. For tests that feed checks hand-made output.
    pub fn parse(bytes: &[u8]) -> Result<Response, ReadError> {
        let mut src = bytes;
        let mut buf = Vec::new();
        loop {
            let mut resp = read_response(&mut src, &mut buf, false)?;
            if resp.is_interim() {
                continue;
            }
            let extra = buf.len() + src.len();
            if extra > 0 {
                resp.defects.push(unexpected_bytes(extra));
            }
            return Ok(resp);
        }
    }
}

/// Reads one response head from `src`, buffering in `buf`, and removes it
/// from `buf` (the body, if any, is next there).
pub fn read_head<R: Read + ?Sized>(src: &mut R, buf: &mut Vec<u8>) -> Result<Head, ReadError> {
    loop {
        if let Some(head) = take_head(buf)? {
            return Ok(head);
        }
        if let Some(end) = fill(src, buf) {
            return Err(ReadError::Ended { end, received: buf.len() });
        }
    }
}

/// Reads the body that follows `head` (`head_request`: it answers a `HEAD`,
/// so there is none). Never fails: a body cut short is returned as far as
/// it arrived, with a defect and [`Response::cut_short`].
pub fn read_body<R: Read + ?Sized>(
    src: &mut R,
    buf: &mut Vec<u8>,
    head: Head,
    head_request: bool,
) -> Response {
    let (framing, defects) = head.framing(head_request);
    let mut end = None;
    loop {
        if let Some(body) = take_body(buf, framing, end.as_ref()) {
            return assemble(head, framing, body.with_defects_first(defects));
        }
        end = fill(src, buf);
    }
}

/// Reads one response, interim ones included: [`read_head`], then
/// [`read_body`].
pub fn read_response<R: Read + ?Sized>(
    src: &mut R,
    buf: &mut Vec<u8>,
    head_request: bool,
) -> Result<Response, ReadError> {
    let head = read_head(src, buf)?;
    Ok(read_body(src, buf, head, head_request))
}

/// Reads once more into `buf`; `Some` when the stream ended or failed.
fn fill<R: Read + ?Sized>(src: &mut R, buf: &mut Vec<u8>) -> Option<End> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match src.read(&mut chunk) {
            Ok(0) => return Some(End::Closed),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return None;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Some(End::of(&e)),
        }
    }
}
