//! From a chosen variant to the answer: evaluates the conditional headers
//! and `Range`, picks the status (`200`, `206`, `304`, `416`), writes the
//! headers, and puts the bytes in the connection's output buffer.
//!
//! Order of evaluation (RFC 9110 §13.2.2): `If-None-Match`, else
//! `If-Modified-Since` (either may answer `304`); then `If-Range` and
//! `Range` (only for `GET`: RFC 9110 defines ranges for no other method, so
//! `HEAD` answers as the `GET` without `Range` would).
//!
//! A body from disk of 4 KiB or more is handed to the connection as a file
//! range ([`FileRange`]): on cleartext HTTP/1.1 it goes from the page cache
//! to the socket by `sendfile(2)`, never through user space and never held
//! in memory, whatever its size. Over TLS HTTP/1.1 and HTTP/2 the driver
//! reads it in bounded pieces as the socket (or the stream's flow-control
//! window) takes them. Where the response goes to middleware that sees the
//! whole of it, and for smaller bodies, the range is read straight into the
//! output buffer after the head with positioned reads (the descriptor may
//! be shared through the open-file cache). A `HEAD` reads nothing. If the
//! file turns out shorter than its metadata said (it changed while being
//! read), a body read into memory is dropped for a `500`; one sent in
//! pieces ends the connection early (HTTP/1.1) or resets the stream
//! (HTTP/2), so the client sees a cut body rather than a misframed one.

use std::io;

use super::conditional;
use super::range::{self, RangeAnswer};
use super::{Settings, Source, Variant};
use crate::error::Error;
use crate::http::{Method, StatusCode};
use crate::request::Request;
use crate::response::{FileRange, IntoResponse, ResponseWriter, TEXT_UTF8};

/// Bodies from this size up are handed to the connection as a file range
/// (`sendfile(2)` on cleartext HTTP/1.1); smaller ones are read into the
/// output buffer, where they go out in one write with the head and with
/// other pipelined responses.
///
/// Measured on HttpArena's static profile (2.4 to 300 KB bodies, one
/// worker, 1,024 connections; requests per server CPU-second, two
/// alternating rounds): 86.9k/86.9k with every body sent by `sendfile`,
/// 86.5k/86.2k from 4 KiB up, 82.9k/80.7k from 16 KiB up, 66.6k/58.1k from
/// 64 KiB up. Keeping the smallest bodies in the buffer costs nothing
/// measurable and lets pipelined responses still leave in one write.
const SENDFILE_MIN: usize = 4 * 1024;

/// Writes the answer to `req` with `variant`.
pub(crate) fn respond(
    req: &Request<'_>,
    w: &mut ResponseWriter<'_>,
    settings: &Settings,
    variant: Variant<'_>,
) {
    let content_type: &str = &variant.content_type;
    let not_modified = match req.header("if-none-match") {
        Some(tags) => conditional::none_match(tags, &variant.etag),
        None => req
            .header("if-modified-since")
            .is_some_and(|date| conditional::not_modified_since(date, variant.mtime)),
    };
    let range = match req.header("range") {
        _ if not_modified => RangeAnswer::Whole,
        Some(range) if req.method() == Method::Get => {
            let applies = req
                .header("if-range")
                .map_or(true, |v| conditional::if_range_holds(v, &variant.etag, variant.mtime));
            if applies {
                range::parse(range, variant.len)
            } else {
                RangeAnswer::Whole
            }
        }
        _ => RangeAnswer::Whole,
    };
    let content_range = match range {
        RangeAnswer::Whole => None,
        RangeAnswer::Part { start, end } => Some(format!("bytes {start}-{end}/{}", variant.len)),
        RangeAnswer::Unsatisfiable => Some(format!("bytes */{}", variant.len)),
    };

    let mut headers: [(&str, &str); 7] = [("", ""); 7];
    let mut n = 0;
    let mut push = |name, value| {
        headers[n] = (name, value);
        n += 1;
    };
    push("Accept-Ranges", "bytes");
    if settings.precompressed {
        push("Vary", "Accept-Encoding");
    }
    push("ETag", &variant.etag);
    push("Last-Modified", &variant.last_modified);
    if let Some(cache_control) = &settings.cache_control {
        push("Cache-Control", cache_control);
    }
    if let Some(content_range) = &content_range {
        push("Content-Range", content_range);
    }
    // The coding describes the body, so a 304 (no body) and a 416 (a
    // plain-text reason) do not carry it.
    let sends_variant = !not_modified && range != RangeAnswer::Unsatisfiable;
    if let (true, Some(coding)) = (sends_variant, variant.coding.header()) {
        push("Content-Encoding", coding);
    }
    let headers = headers[..n].iter().copied();

    let (status, start, len) = match range {
        _ if not_modified => return w.write(StatusCode::NOT_MODIFIED, content_type, headers, b""),
        RangeAnswer::Unsatisfiable => {
            return w.write(StatusCode::RANGE_NOT_SATISFIABLE, TEXT_UTF8, headers, b"range not satisfiable\n")
        }
        RangeAnswer::Whole => (StatusCode::OK, 0, variant.len),
        RangeAnswer::Part { start, end } => (StatusCode::PARTIAL_CONTENT, start, end - start + 1),
    };
    let Ok(len) = usize::try_from(len) else {
        return Error::internal("file too large for this platform").write_to(w);
    };
    match &variant.source {
        Source::Memory(bytes) => {
            // `start + len` is within the bytes: both come from their length.
            let start = start as usize;
            w.write(status, content_type, headers, &bytes[start..start + len]);
        }
        Source::File(file) if len >= SENDFILE_MIN => {
            let range = FileRange { file: std::rc::Rc::clone(file), offset: start, len: len as u64 };
            if let Err(range) = w.write_file(status, content_type, headers.clone(), range) {
                read_whole(req, w, status, content_type, headers, &range.file, start, len);
            }
        }
        Source::File(file) => read_whole(req, w, status, content_type, headers, file, start, len),
    }
}

/// Writes the response with `len` bytes of `file` from `start`, read into
/// the output buffer.
#[allow(clippy::too_many_arguments)]
fn read_whole<'h>(
    req: &Request<'_>,
    w: &mut ResponseWriter<'_>,
    status: StatusCode,
    content_type: &str,
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
    file: &std::fs::File,
    start: u64,
    len: usize,
) {
    let head = req.method() == Method::Head;
    let written = w.write_with(status, content_type, headers, len, |out| {
        if head {
            // Only the length counts; the writer drops the body.
            out.resize(out.len() + len, 0);
            Ok(())
        } else {
            read_into(file, start, len, out)
        }
    });
    if let Err(e) = written {
        tracing::error!(error = %e, "reading a static file failed");
        Error::internal("reading the file failed").write_to(w);
    }
}

/// Appends `len` bytes of `file` from `start` to `out`, with positioned
/// reads: the descriptor may be shared through the open-file cache, so its
/// own offset means nothing.
fn read_into(file: &std::fs::File, start: u64, len: usize, out: &mut Vec<u8>) -> io::Result<()> {
    let at = out.len();
    match crate::sys::pread_append(file, out, len, start) {
        Ok(read) if read == len => Ok(()),
        Ok(_) => {
            out.truncate(at);
            Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file shrank while being read"))
        }
        Err(e) => {
            out.truncate(at);
            Err(e)
        }
    }
}

/// Writes a `406`: the file exists, but in no coding the client accepts.
pub(crate) fn not_acceptable(w: &mut ResponseWriter<'_>, settings: &Settings) {
    let vary = settings.precompressed.then_some(("Vary", "Accept-Encoding"));
    w.write(StatusCode::NOT_ACCEPTABLE, TEXT_UTF8, vary, b"no acceptable content coding\n");
}
