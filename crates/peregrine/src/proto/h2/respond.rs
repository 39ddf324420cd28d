//! Sends a [`Response`] on an HTTP/2 stream: the head as one HEADERS frame,
//! the body as DATA frames within the flow-control windows, the trailers
//! (if any) as the closing HEADERS frame.
//!
//! A small in-memory body is queued at once (it fits the initial
//! window, so it leaves in the same write as the head). Larger bodies and
//! streamed ones go out piece by piece, each piece waiting for window
//! capacity, and a stream's next chunk is asked for only when the one
//! before has been taken: a client that does not read holds at most
//! `max_send_buffer_bytes` per stream in the server, then its stream's
//! producer waits.
//!
//! A static file's body ([`FileRange`]) is never read whole: each piece,
//! at most [`FILE_CHUNK`] bytes, is read with `pread` only once the stream
//! has been granted capacity for it, into a buffer whose memory comes back
//! for the next piece once the connection has written the one before. Measured on
//! static-h2 (`scripts/h2-bench`'s profile: files of 3 to 300 KB, 64
//! connections x 32 streams, one worker, loaded machine): reading whole
//! files into a fresh zeroed `Vec` per request peaked at 186 MB RSS, pieces
//! at 81 MB, for about the same requests per server CPU-second (10.2k to
//! 11.4k before, 11.0k to 11.8k after); and only with pieces do glibc's
//! fixed 128 KiB thresholds ([`crate::Config::malloc_release_threshold`],
//! opt-in) cost static files nothing (12.0k/12.4k with them, 11.7k/11.6k
//! without). The piece size was not tuned.

use std::borrow::Cow;
use std::future::poll_fn;
use std::pin::pin;

use bytes::{Bytes, BytesMut};
use futures_util::future::{select, Either};
use futures_util::StreamExt;

use super::activity::Activity;
use super::frame::Reason;
use super::handle::{SendResponse, SendStream, StreamError};
use super::head::CONNECTION_SPECIFIC;
use super::hpack::Encoder;
use crate::http::date::DateBlock;
use crate::response::canned;
use crate::response::{BodyStream, FileRange, Response, Trailers};

/// Bodies up to this size are queued whole; larger ones wait for window
/// capacity piece by piece. The protocol's initial window is 64 KiB - 1.
const QUEUE_WHOLE: usize = 16 * 1024;

/// The most of a file body read and queued at once.
const FILE_CHUNK: usize = 32 * 1024;

/// Headers HTTP/2 (RFC 9113 §8.2.2) and HTTP/3 forbid in a response: the
/// request's connection-specific fields, and `te`. The server writes none
/// of them itself, and drops a handler's rather than break the stream.
pub(crate) fn connection_specific(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"te") || CONNECTION_SPECIFIC.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// Whether `value` is a field value (RFC 9110 §5.5): visible characters,
/// spaces, tabs and obs-text, no other control character.
fn valid_value(value: &[u8]) -> bool {
    value.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80)
}

/// Whether `name` is a field name HTTP/2 can carry (a token; lowercased
/// when sent).
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b > 0x20 && b < 0x7f && b != b':')
}

/// Field names longer than this are lowercased on the heap.
const SHORT_NAME: usize = 64;

/// Encodes one handler field, its name in lowercase as HTTP/2 requires
/// ([`head_is_valid`] has checked it), or drops a connection-specific one.
fn encode_field(enc: &mut Encoder, dst: &mut Vec<u8>, name: &str, value: &str) {
    let name = name.as_bytes();
    if connection_specific(name) {
        return;
    }
    if !name.iter().any(u8::is_ascii_uppercase) {
        enc.field(name, value.as_bytes(), dst);
    } else if name.len() <= SHORT_NAME {
        let mut lower = [0u8; SHORT_NAME];
        lower[..name.len()].copy_from_slice(name);
        lower[..name.len()].make_ascii_lowercase();
        enc.field(&lower[..name.len()], value.as_bytes(), dst);
    } else {
        enc.field(&name.to_ascii_lowercase(), value.as_bytes(), dst);
    }
}

/// What the server adds to every response head of a connection: the
/// `Date`, and on TLS connections of a server with an HTTP/3 listener the
/// `Alt-Svc` that advertises it.
pub(super) struct Stamp<'a> {
    pub(super) date: DateBlock,
    pub(super) alt_svc: Option<&'a [u8]>,
}

impl Stamp<'_> {
    fn encode(&self, enc: &mut Encoder, dst: &mut Vec<u8>) {
        // The block is `Date: <29 bytes>\r\n\r\n`.
        enc.field(b"date", &self.date[6..35], dst);
        if let Some(alt_svc) = self.alt_svc {
            enc.field(b"alt-svc", alt_svc, dst);
        }
    }
}

/// Encodes the response head: status, `server`, `content-type`, the
/// handler's headers, `date` and, for a body in memory, `content-length`.
/// The response passed [`head_is_valid`].
fn encode_head(
    enc: &mut Encoder,
    dst: &mut Vec<u8>,
    response: &Response,
    stamp: &Stamp<'_>,
    length: Option<usize>,
) {
    enc.status(response.status_code().as_u16(), dst);
    enc.field(b"server", b"peregrine", dst);
    let content_type = response.header_value("content-type").unwrap_or(crate::response::TEXT_UTF8);
    encode_field(enc, dst, "content-type", content_type);
    for (name, value) in response.headers() {
        encode_field(enc, dst, name, value);
    }
    stamp.encode(enc, dst);
    if let Some(length) = length {
        enc.field(b"content-length", itoa::Buffer::new().format(length).as_bytes(), dst);
    }
}

/// Whether a response's headers can all be carried by HTTP/2.
fn head_is_valid(response: &Response) -> bool {
    let ok = |name: &str, value: &str| valid_name(name.as_bytes()) && valid_value(value.as_bytes());
    ok("content-type", response.header_value("content-type").unwrap_or(crate::response::TEXT_UTF8))
        && response.headers().all(|(n, v)| ok(n, v))
}

/// Whether sending `response` can wait for window capacity: a streamed
/// body, or one too large to queue whole. Any other response is sent at
/// once by [`send_at_once`].
pub(super) fn needs_pacing(response: &Response) -> bool {
    response.is_streaming() || response.has_file() || response.body().len() > QUEUE_WHOLE
}

/// Sends the head of `response`; or, when a header cannot be carried by
/// HTTP/2, answers the stream with a `500` instead (small: queued at once)
/// and gives `None`.
fn send_head(
    respond: &mut SendResponse,
    response: &Response,
    stamp: &Stamp<'_>,
    length: Option<usize>,
    end_stream: bool,
) -> Option<SendStream> {
    if head_is_valid(response) {
        return respond
            .send_response(end_stream, |enc, dst| {
                encode_head(enc, dst, response, stamp, length);
            })
            .ok();
    }
    tracing::error!("refusing a response with a header HTTP/2 cannot carry");
    let canned = Response::canned(canned::INVALID_RESPONSE_HEADER);
    let body = canned.body();
    if let Ok(mut send) = respond.send_response(false, |enc, dst| {
        encode_head(enc, dst, &canned, stamp, Some(body.len()));
    }) {
        let _ = send.send_data(Bytes::copy_from_slice(body), true);
    }
    None
}

/// Answers an extended `CONNECT` (RFC 8441) whose handler switched
/// protocols: `200` with the handler's headers (`content-type`,
/// `content-length` and the HTTP/1.1 `upgrade` left out), the stream left
/// open. `None` after answering `500` instead, when a header cannot be
/// carried by HTTP/2, or when the client is gone.
pub(super) fn send_tunnel_head(
    respond: &mut SendResponse,
    response: &Response,
    stamp: &Stamp<'_>,
) -> Option<SendStream> {
    if !head_is_valid(response) {
        tracing::error!("refusing a response with a header HTTP/2 cannot carry");
        send_at_once(respond, Response::canned(canned::INVALID_RESPONSE_HEADER), false, stamp);
        return None;
    }
    respond
        .send_response(false, |enc, dst| {
            enc.status(200, dst);
            enc.field(b"server", b"peregrine", dst);
            for (name, value) in response.headers() {
                if !name.eq_ignore_ascii_case("content-length") {
                    encode_field(enc, dst, name, value);
                }
            }
            stamp.encode(enc, dst);
        })
        .ok()
}

/// Sends a response that does not [need pacing](needs_pacing): every
/// frame is queued now, nothing waits. `head_only` for `HEAD`.
pub(super) fn send_at_once(
    respond: &mut SendResponse,
    mut response: Response,
    head_only: bool,
    stamp: &Stamp<'_>,
) {
    debug_assert!(!needs_pacing(&response));
    let body = response.take_body();
    let trailers = response.take_trailers();
    let ends_with_head = head_only || (body.is_empty() && trailers.is_empty());
    let Some(mut send) = send_head(respond, &response, stamp, Some(body.len()), ends_with_head) else {
        return;
    };
    if ends_with_head {
        return;
    }
    if trailers.is_empty() {
        let _ = send.send_data(into_bytes(body), true);
    } else if send.send_data(into_bytes(body), false).is_ok() {
        finish(&mut send, trailers);
    }
}

/// Sends `response` on the stream `respond` answers. `head_only` for
/// `HEAD`: the head with the body's length, no body.
pub(super) async fn send(
    respond: &mut SendResponse,
    mut response: Response,
    head_only: bool,
    stamp: &Stamp<'_>,
    activity: &Activity,
) {
    if !needs_pacing(&response) {
        return send_at_once(respond, response, head_only, stamp);
    }
    let stream = response.take_stream();
    let file = response.take_file();
    let body = response.take_body();
    let trailers = response.take_trailers();
    let length = match (&stream, &file) {
        (Some(_), _) => None,
        (None, Some(file)) => usize::try_from(file.len).ok(),
        (None, None) => Some(body.len()),
    };
    if head_only {
        send_head(respond, &response, stamp, length, true);
        return;
    }
    if let (None, Some(file)) = (&stream, file) {
        let ends_with_head = file.len == 0 && trailers.is_empty();
        let Some(mut send) = send_head(respond, &response, stamp, length, ends_with_head) else { return };
        let trailers_follow = !trailers.is_empty();
        if !ends_with_head
            && send_file(&mut send, file, trailers_follow, activity).await.is_ok()
            && trailers_follow
        {
            finish(&mut send, trailers);
        }
        return;
    }
    match stream {
        Some(stream) => {
            let Some(mut send) = send_head(respond, &response, stamp, length, false) else { return };
            if send_stream(&mut send, stream, activity).await.is_ok() {
                finish(&mut send, trailers);
            }
        }
        None => {
            let ends_with_head = body.is_empty() && trailers.is_empty();
            let Some(mut send) = send_head(respond, &response, stamp, length, ends_with_head) else { return };
            if ends_with_head {
                return;
            }
            let trailers_follow = !trailers.is_empty();
            if send_data(&mut send, into_bytes(body), !trailers_follow, activity).await.is_ok()
                && trailers_follow
            {
                finish(&mut send, trailers);
            }
        }
    }
}

fn into_bytes(body: Cow<'static, [u8]>) -> Bytes {
    match body {
        Cow::Borrowed(b) => Bytes::from_static(b),
        Cow::Owned(v) => Bytes::from(v),
    }
}

/// Ends the stream, with the trailers if there are any (computed ones
/// computed now that the body is sent).
fn finish(send: &mut SendStream, trailers: Trailers) {
    let trailers = trailers.finish();
    if trailers.is_empty() {
        let _ = send.send_data(Bytes::new(), true);
        return;
    }
    let mut fields = Vec::with_capacity(trailers.len());
    for (name, value) in &trailers {
        let (name, value) = (name.as_bytes(), value.as_bytes());
        if !valid_name(name) || !valid_value(value) {
            // The body is sent: a reset is how the client learns it failed.
            send.send_reset(Reason::INTERNAL_ERROR);
            return;
        }
        if !connection_specific(name) {
            fields.push((name.to_ascii_lowercase(), value.to_vec()));
        }
    }
    let _ = send.send_trailers(fields);
}

/// Sends a body in memory: small at once, large piece by piece as the
/// windows open.
async fn send_data(
    send: &mut SendStream,
    data: Bytes,
    end: bool,
    activity: &Activity,
) -> Result<(), StreamError> {
    if data.len() <= QUEUE_WHOLE {
        return send.send_data(data, end);
    }
    send_paced(send, data, end, activity).await
}

/// Sends `data` piece by piece, each piece once the windows and the
/// connection's send buffer have room for it.
async fn send_paced(
    send: &mut SendStream,
    mut data: Bytes,
    end: bool,
    activity: &Activity,
) -> Result<(), StreamError> {
    while !data.is_empty() {
        let want = data.len();
        let granted = poll_fn(|cx| send.poll_capacity(want, cx)).await?;
        activity.progress(granted);
        let piece = data.split_to(granted.min(data.len()));
        send.send_data(piece, end && data.is_empty())?;
    }
    Ok(())
}

/// Sends a file body piece by piece, each piece read once the stream has
/// capacity for it; ends the stream with the last unless `trailers_follow`.
/// A file that turns out shorter than its head said (it shrank), or fails
/// to read, resets the stream: the client sees an error, not a body that
/// ends early and looks whole.
async fn send_file(
    send: &mut SendStream,
    file: FileRange,
    trailers_follow: bool,
    activity: &Activity,
) -> Result<(), ()> {
    let mut buf = BytesMut::new();
    let mut offset = file.offset;
    let end = file.offset + file.len;
    while offset < end {
        let left = (end - offset).min(FILE_CHUNK as u64) as usize;
        let granted = poll_fn(|cx| send.poll_capacity(left, cx)).await.map_err(|_| ())?;
        activity.progress(granted);
        let want = granted.min(left);
        // Once the connection has written and dropped the piece before,
        // `buf` takes its memory back instead of allocating.
        buf.reserve(want);
        match crate::sys::pread_append(&file.file, &mut buf, want, offset) {
            Ok(read) if read == want => {}
            Ok(_) => {
                tracing::warn!("a file shrank while being sent; resetting the stream");
                send.send_reset(Reason::INTERNAL_ERROR);
                return Err(());
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading a file response body failed");
                send.send_reset(Reason::INTERNAL_ERROR);
                return Err(());
            }
        }
        offset += want as u64;
        let last = offset == end && !trailers_follow;
        send.send_data(buf.split().freeze(), last).map_err(|_| ())?;
    }
    Ok(())
}

/// Sends a streamed body: a chunk is asked for only after the one before
/// was granted window capacity. A reset from the client ends it at once,
/// even while the producer waits.
async fn send_stream(send: &mut SendStream, stream: BodyStream, activity: &Activity) -> Result<(), ()> {
    let mut chunks = stream.0;
    loop {
        let next = {
            let _busy = activity.busy();
            let next = pin!(chunks.next());
            let reset = pin!(poll_fn(|cx| send.poll_reset(cx)));
            match select(next, reset).await {
                Either::Left((next, _)) => next,
                Either::Right(_) => return Err(()),
            }
        };
        match next {
            Some(Ok(chunk)) if chunk.is_empty() => {}
            Some(Ok(chunk)) => send_paced(send, chunk, false, activity).await.map_err(|_| ())?,
            Some(Err(e)) => {
                // The status is sent: a reset is how the client learns the
                // body is cut.
                tracing::warn!(error = %e, "streamed response body failed");
                send.send_reset(Reason::INTERNAL_ERROR);
                return Err(());
            }
            None => return Ok(()),
        }
    }
}
