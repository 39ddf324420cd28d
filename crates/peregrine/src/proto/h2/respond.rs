//! Sends a [`Response`] on an HTTP/2 stream: the head as one HEADERS frame,
//! the body as DATA frames within the flow-control windows, the trailers
//! (if any) as the closing HEADERS frame.
//!
//! A small in-memory body is handed to `h2` at once (it fits the initial
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
//! for the next piece once `h2` has written the one before. Measured on
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
use h2::server::SendResponse;
use h2::SendStream;
use http::header::{HeaderMap, HeaderName, HeaderValue, ALT_SVC, CONTENT_LENGTH, CONTENT_TYPE, DATE, SERVER};

use super::activity::Activity;
use crate::http::date::DateBlock;
use crate::response::canned;
use crate::response::{BodyStream, FileRange, Response, Trailers};

/// Bodies up to this size are queued whole; larger ones wait for window
/// capacity piece by piece. The protocol's initial window is 64 KiB - 1.
const QUEUE_WHOLE: usize = 16 * 1024;

/// The most of a file body read and queued at once.
const FILE_CHUNK: usize = 32 * 1024;

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2); the server writes none of them
/// itself, and drops a handler's rather than break the stream.
fn connection_specific(name: &str) -> bool {
    ["keep-alive", "proxy-connection", "upgrade", "te"].iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// Adds `(name, value)` pairs that passed the response's header checks.
/// Returns `false` if one is still not a valid HTTP/2 field.
fn add_fields<'h>(map: &mut HeaderMap, fields: impl Iterator<Item = (&'h str, &'h str)>) -> bool {
    for (name, value) in fields {
        if connection_specific(name) {
            continue;
        }
        match (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(value)) {
            (Ok(name), Ok(value)) => {
                map.append(name, value);
            }
            _ => return false,
        }
    }
    true
}

/// The response head: status, `server`, `content-type`, the handler's
/// headers, `date` and, for a body in memory, `content-length`.
pub(crate) fn head(
    response: &Response,
    date: &DateBlock,
    length: Option<usize>,
) -> Option<http::Response<()>> {
    let mut head = http::Response::new(());
    *head.status_mut() = http::StatusCode::from(response.status_code());
    let headers = head.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static("peregrine"));
    let content_type = response.header_value("content-type").unwrap_or(crate::response::TEXT_UTF8);
    headers.insert(CONTENT_TYPE, HeaderValue::from_str(content_type).ok()?);
    if !add_fields(headers, response.headers()) {
        return None;
    }
    // The block is `Date: <29 bytes>\r\n\r\n`.
    if let Ok(value) = HeaderValue::from_bytes(&date[6..35]) {
        headers.insert(DATE, value);
    }
    if let Some(length) = length {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    }
    Some(head)
}

/// Whether sending `response` can wait for window capacity: a streamed
/// body, or one too large to queue whole. Any other response is sent at
/// once by [`send_at_once`].
pub(super) fn needs_pacing(response: &Response) -> bool {
    response.is_streaming() || response.has_file() || response.body().len() > QUEUE_WHOLE
}

/// The head for `response`; or, when a header cannot be carried by
/// HTTP/2, `None` after answering the stream with a `500` instead (small:
/// queued at once).
fn head_or_refuse(
    respond: &mut SendResponse<Bytes>,
    response: &Response,
    stamp: &Stamp<'_>,
    length: Option<usize>,
) -> Option<http::Response<()>> {
    let date = &stamp.date;
    if let Some(mut head) = head(response, date, length) {
        if let Some(alt_svc) = stamp.alt_svc {
            head.headers_mut().insert(ALT_SVC, alt_svc.clone());
        }
        return Some(head);
    }
    tracing::error!("refusing a response with a header HTTP/2 cannot carry");
    let canned = Response::canned(canned::INVALID_RESPONSE_HEADER);
    // The `500` has only fixed headers, so its head always builds.
    if let Some(head) = head(&canned, date, Some(canned.body().len())) {
        if let Ok(mut send) = respond.send_response(head, false) {
            let _ = send.send_data(Bytes::copy_from_slice(canned.body()), true);
        }
    }
    None
}

/// Answers an extended `CONNECT` (RFC 8441) whose handler switched
/// protocols: `200` with the handler's headers (`content-type`,
/// `content-length` and the HTTP/1.1 `upgrade` left out), the stream left
/// open. `None` after answering `500` instead, when a header cannot be
/// carried by HTTP/2, or when the client is gone.
pub(super) fn send_tunnel_head(
    respond: &mut SendResponse<Bytes>,
    response: &Response,
    stamp: &Stamp<'_>,
) -> Option<SendStream<Bytes>> {
    let mut head = http::Response::new(());
    let headers = head.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static("peregrine"));
    if !add_fields(headers, response.headers()) {
        tracing::error!("refusing a response with a header HTTP/2 cannot carry");
        send_at_once(respond, Response::canned(canned::INVALID_RESPONSE_HEADER), false, stamp);
        return None;
    }
    // The block is `Date: <29 bytes>\r\n\r\n`.
    if let Ok(value) = HeaderValue::from_bytes(&stamp.date[6..35]) {
        headers.insert(DATE, value);
    }
    if let Some(alt_svc) = stamp.alt_svc {
        headers.insert(ALT_SVC, alt_svc.clone());
    }
    respond.send_response(head, false).ok()
}

/// What the server adds to every response head of a connection: the
/// `Date`, and on TLS connections of a server with an HTTP/3 listener the
/// `Alt-Svc` that advertises it.
pub(super) struct Stamp<'a> {
    pub(super) date: DateBlock,
    pub(super) alt_svc: Option<&'a HeaderValue>,
}

/// Sends a response that does not [need pacing](needs_pacing): every
/// frame is queued now, nothing waits. `head_only` for `HEAD`.
pub(super) fn send_at_once(
    respond: &mut SendResponse<Bytes>,
    mut response: Response,
    head_only: bool,
    date: &Stamp<'_>,
) {
    debug_assert!(!needs_pacing(&response));
    let body = response.take_body();
    let trailers = response.take_trailers();
    let Some(head) = head_or_refuse(respond, &response, date, Some(body.len())) else { return };
    if head_only {
        let _ = respond.send_response(head, true);
        return;
    }
    let ends_with_head = body.is_empty() && trailers.is_empty();
    let Ok(mut send) = respond.send_response(head, ends_with_head) else { return };
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
    respond: &mut SendResponse<Bytes>,
    mut response: Response,
    head_only: bool,
    date: &Stamp<'_>,
    activity: &Activity,
) {
    if !needs_pacing(&response) {
        return send_at_once(respond, response, head_only, date);
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
    let Some(head) = head_or_refuse(respond, &response, date, length) else { return };
    if head_only {
        let _ = respond.send_response(head, true);
        return;
    }
    if let (None, Some(file)) = (&stream, file) {
        let ends_with_head = file.len == 0 && trailers.is_empty();
        let Ok(mut send) = respond.send_response(head, ends_with_head) else { return };
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
            let Ok(mut send) = respond.send_response(head, false) else { return };
            if send_stream(&mut send, stream, activity).await.is_ok() {
                finish(&mut send, trailers);
            }
        }
        None if trailers.is_empty() => send_whole(respond, head, body, activity).await,
        None => {
            let Ok(mut send) = respond.send_response(head, false) else { return };
            if send_data(&mut send, into_bytes(body), false, activity).await.is_ok() {
                finish(&mut send, trailers);
            }
        }
    }
}

/// A head and a body in memory, ending the stream.
async fn send_whole(
    respond: &mut SendResponse<Bytes>,
    head: http::Response<()>,
    body: Cow<'static, [u8]>,
    activity: &Activity,
) {
    let Ok(mut send) = respond.send_response(head, body.is_empty()) else { return };
    if !body.is_empty() {
        let _ = send_data(&mut send, into_bytes(body), true, activity).await;
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
fn finish(send: &mut SendStream<Bytes>, trailers: Trailers) {
    let trailers = trailers.finish();
    if trailers.is_empty() {
        let _ = send.send_data(Bytes::new(), true);
        return;
    }
    let mut map = HeaderMap::with_capacity(trailers.len());
    if add_fields(&mut map, trailers.iter().map(|(n, v)| (n.as_ref(), v.as_ref()))) {
        let _ = send.send_trailers(map);
    } else {
        // The body is sent: a reset is how the client learns it failed.
        send.send_reset(h2::Reason::INTERNAL_ERROR);
    }
}

/// Sends a body in memory: small at once, large piece by piece as the
/// windows open.
async fn send_data(
    send: &mut SendStream<Bytes>,
    data: Bytes,
    end: bool,
    activity: &Activity,
) -> Result<(), h2::Error> {
    if data.len() <= QUEUE_WHOLE {
        return send.send_data(data, end);
    }
    send_paced(send, data, end, activity).await
}

/// Sends `data` piece by piece, each piece once the windows and the
/// stream's send buffer have room for it.
async fn send_paced(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    activity: &Activity,
) -> Result<(), h2::Error> {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(granted) => granted?,
            // The stream closed (the client reset it).
            None => return Err(h2::Error::from(h2::Reason::CANCEL)),
        };
        if granted == 0 {
            continue;
        }
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
    send: &mut SendStream<Bytes>,
    file: FileRange,
    trailers_follow: bool,
    activity: &Activity,
) -> Result<(), ()> {
    let mut buf = BytesMut::new();
    let mut offset = file.offset;
    let end = file.offset + file.len;
    while offset < end {
        let left = (end - offset).min(FILE_CHUNK as u64) as usize;
        send.reserve_capacity(left);
        let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(Ok(granted)) => granted,
            // The stream closed (the client reset it) or the connection failed.
            Some(Err(_)) | None => return Err(()),
        };
        if granted == 0 {
            continue;
        }
        activity.progress(granted);
        let want = granted.min(left);
        // Once `h2` has written and dropped the piece before, `buf` takes
        // its memory back instead of allocating.
        buf.reserve(want);
        match crate::sys::pread_append(&file.file, &mut buf, want, offset) {
            Ok(read) if read == want => {}
            Ok(_) => {
                tracing::warn!("a file shrank while being sent; resetting the stream");
                send.send_reset(h2::Reason::INTERNAL_ERROR);
                return Err(());
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading a file response body failed");
                send.send_reset(h2::Reason::INTERNAL_ERROR);
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
async fn send_stream(
    send: &mut SendStream<Bytes>,
    stream: BodyStream,
    activity: &Activity,
) -> Result<(), ()> {
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
                send.send_reset(h2::Reason::INTERNAL_ERROR);
                return Err(());
            }
            None => return Ok(()),
        }
    }
}
