//! The reader of the crate root over a tokio `AsyncRead`, for clients that
//! run many connections on one runtime (the lab's stress clients). Parsing
//! is [`crate::parse`]'s, as for the blocking reader; only the reads differ.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::message::{End, ReadError, Response};
use crate::parse::{assemble, take_body, take_head, Head};
use std::io::ErrorKind;

/// Reads one response head, buffering in `buf`, and removes it from `buf`.
pub async fn read_head<R: AsyncRead + Unpin + ?Sized>(
    src: &mut R,
    buf: &mut Vec<u8>,
) -> Result<Head, ReadError> {
    loop {
        if let Some(head) = take_head(buf)? {
            return Ok(head);
        }
        if let Some(end) = fill(src, buf).await {
            return Err(ReadError::Ended { end, received: buf.len() });
        }
    }
}

/// Reads the body that follows `head`; as [`crate::read_body`].
pub async fn read_body<R: AsyncRead + Unpin + ?Sized>(
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
        end = fill(src, buf).await;
    }
}

/// Reads one response, interim ones included.
pub async fn read_response<R: AsyncRead + Unpin + ?Sized>(
    src: &mut R,
    buf: &mut Vec<u8>,
    head_request: bool,
) -> Result<Response, ReadError> {
    let head = read_head(src, buf).await?;
    Ok(read_body(src, buf, head, head_request).await)
}

async fn fill<R: AsyncRead + Unpin + ?Sized>(src: &mut R, buf: &mut Vec<u8>) -> Option<End> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match src.read(&mut chunk).await {
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
