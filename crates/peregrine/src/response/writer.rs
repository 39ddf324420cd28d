//! [`ResponseWriter`]: the one way a response leaves the pipeline, whatever
//! protocol carries it.
//!
//! Handlers and [`IntoResponse`](crate::IntoResponse) implementations write
//! status, content type, headers and a body; the writer hands them to the
//! encoder of the connection's protocol, which serializes them in place into
//! that connection's output buffer (no intermediate response object on the
//! fast path).
//!
//! # Adding a protocol
//! A protocol plugs in here with one variant of [`Encoding`] wrapping its
//! encoder, which must provide `write` (a body in memory), `write_with` (a
//! body serialized in place, sized afterwards), `closes_connection`, and
//! refuse headers that [`is_valid_header`](super::headers::is_valid_header)
//! refuses. Everything above this type (router, extractors, handlers,
//! middleware) stays unchanged. With one variant the `match`es compile to
//! direct calls.

use std::convert::Infallible;
use std::fmt;

use std::cell::Cell;

use super::canned::{Canned, INVALID_RESPONSE_HEADER};
use super::owned::OwnedEncoder;
use super::TEXT_UTF8;
use crate::http::StatusCode;
use crate::proto::h1::encode::{Encoder as Http1Encoder, FileRefused, UpgradeError, WriteError};

/// The largest body [`LAST_OWNED_BODY`] starts the next one at.
const OWNED_BODY_HINT_MAX: usize = 64 * 1024;

thread_local! {
    /// Length of the last body serialized into an owned response on this
    /// thread: the next one starts with that much room. An owned body
    /// (HTTP/2, HTTP/3, async handlers) gets a fresh `Vec`, and from a
    /// 32-byte hint an 8 KB JSON response grew through nine reallocations;
    /// their copies were 2% of the server's CPU on json-h2c, and endpoints
    /// tend to answer alike, so the last size is a good guess.
    static LAST_OWNED_BODY: Cell<usize> = const { Cell::new(0) };
}

/// Writes one response into the connection's output.
///
/// Handlers see this type only if they implement
/// [`IntoResponse::write_to`](crate::IntoResponse::write_to) for their own
/// types. Header names must be HTTP tokens and values must not contain CR,
/// LF or NUL: a response that breaks this is replaced by a `500` and the
/// mistake logged, so no handler can inject a header.
pub struct ResponseWriter<'a> {
    encoding: Encoding<'a>,
}

/// The protocol a response is encoded for.
enum Encoding<'a> {
    Http1(Http1Encoder<'a>),
    /// Not a protocol: an owned [`Response`](super::Response) for
    /// middleware to see before the connection's encoder writes it.
    Owned(OwnedEncoder<'a>),
}

impl fmt::Debug for ResponseWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let protocol = match self.encoding {
            Encoding::Http1(_) => "HTTP/1.1",
            Encoding::Owned(_) => "owned",
        };
        f.debug_struct("ResponseWriter").field("protocol", &protocol).finish_non_exhaustive()
    }
}

impl<'a> ResponseWriter<'a> {
    /// A writer for an HTTP/1.x connection.
    #[inline]
    pub(crate) fn http1(encoder: Http1Encoder<'a>) -> ResponseWriter<'a> {
        ResponseWriter { encoding: Encoding::Http1(encoder) }
    }

    /// A writer that builds an owned response into `slot`.
    pub(crate) fn owned(slot: &'a mut Option<super::Response>) -> ResponseWriter<'a> {
        ResponseWriter { encoding: Encoding::Owned(OwnedEncoder::new(slot)) }
    }

    /// A writer that builds an owned response into `slot` for a driver
    /// that sends a file body itself, piece by piece (HTTP/2): a static
    /// file stays a file instead of being read into memory whole.
    pub(crate) fn owned_with_files(slot: &'a mut Option<super::Response>) -> ResponseWriter<'a> {
        ResponseWriter { encoding: Encoding::Owned(OwnedEncoder::with_files(slot)) }
    }

    /// Whether the connection closes after this response.
    pub fn closes_connection(&self) -> bool {
        match &self.encoding {
            Encoding::Http1(e) => e.closes_connection(),
            Encoding::Owned(_) => false,
        }
    }

    /// Writes a complete response whose body is already in memory.
    #[inline]
    pub fn write<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        body: &[u8],
    ) {
        let valid = match &mut self.encoding {
            Encoding::Http1(e) => e.write(status, content_type, headers, body).is_ok(),
            Encoding::Owned(e) => e.write(status, content_type, headers, body.to_vec()).is_ok(),
        };
        if !valid {
            self.refuse_invalid_header();
        }
    }

    /// Writes the head of a response whose body is `stream`, and hands the
    /// stream to the connection, which sends its chunks as they come.
    pub(crate) fn write_stream<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        stream: super::BodyStream,
    ) {
        let valid = match &mut self.encoding {
            Encoding::Http1(e) => e.write_stream_head(status, content_type, headers, stream).is_ok(),
            Encoding::Owned(e) => e.write_stream(status, content_type, headers, stream).is_ok(),
        };
        if !valid {
            self.refuse_invalid_header();
        }
    }

    /// Writes a response whose body is `file`, for the connection to send
    /// from the file: with `sendfile(2)` (cleartext HTTP/1.1), or read in
    /// bounded pieces (TLS HTTP/1.1, HTTP/2). A writer that cannot (one
    /// whose response middleware or a test looks at) gives the range back,
    /// and the caller reads it into memory.
    pub(crate) fn write_file<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        file: super::FileRange,
    ) -> Result<(), super::FileRange> {
        let refused = match &mut self.encoding {
            Encoding::Http1(e) => e.write_file(status, content_type, headers, file),
            Encoding::Owned(e) => match e.write_file(status, content_type, headers, file) {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) => Err(FileRefused::InvalidHeader),
                Err(file) => Err(FileRefused::Unsupported(file)),
            },
        };
        match refused {
            Ok(()) => Ok(()),
            Err(FileRefused::Unsupported(file)) => Err(file),
            Err(FileRefused::InvalidHeader) => {
                self.refuse_invalid_header();
                Ok(())
            }
        }
    }

    /// Writes a `101 Switching Protocols` head and hands `on_upgrade` to
    /// the connection, which runs it with the transport once the head is
    /// sent. A connection that cannot switch now (it is closing: shutdown
    /// began) answers `503` instead.
    pub(crate) fn write_upgrade<'h>(
        &mut self,
        status: StatusCode,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        on_upgrade: crate::upgrade::OnUpgrade,
    ) {
        let written = match &mut self.encoding {
            Encoding::Http1(e) => e.write_upgrade(status, headers, on_upgrade),
            Encoding::Owned(e) => {
                e.write_upgrade(status, headers, on_upgrade).map_err(|_| UpgradeError::InvalidHeader)
            }
        };
        match written {
            Ok(()) => {}
            Err(UpgradeError::InvalidHeader) => self.refuse_invalid_header(),
            Err(UpgradeError::Closing) => self.canned(super::canned::CANNOT_UPGRADE),
        }
    }

    /// Writes a response whose body is produced in place by `write_body`.
    ///
    /// `size_hint` is the expected body length; a good hint avoids moving
    /// the body once to fit its length. If `write_body` fails, everything it
    /// and this call wrote is removed and the error returned, so the caller
    /// can write an error response instead.
    #[inline]
    pub fn write_with<'h, E>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        size_hint: usize,
        write_body: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let written = match &mut self.encoding {
            Encoding::Http1(e) => e.write_with(status, content_type, headers, size_hint, write_body),
            Encoding::Owned(e) => {
                let mut body = Vec::with_capacity(size_hint.max(LAST_OWNED_BODY.get()));
                match write_body(&mut body) {
                    Err(err) => Err(WriteError::Body(err)),
                    Ok(()) => {
                        LAST_OWNED_BODY.set(body.len().min(OWNED_BODY_HINT_MAX));
                        e.write(status, content_type, headers, body).map_err(|_| WriteError::InvalidHeader)
                    }
                }
            }
        };
        match written {
            Ok(()) => Ok(()),
            Err(WriteError::Body(e)) => Err(e),
            Err(WriteError::InvalidHeader) => {
                self.refuse_invalid_header();
                Ok(())
            }
        }
    }

    /// Attaches trailer fields to the response just written. Only owned
    /// responses keep them (the HTTP/2 driver sends those); HTTP/1.1
    /// leaves them out.
    pub(crate) fn trailers(&mut self, trailers: super::Trailers) {
        match &mut self.encoding {
            Encoding::Http1(_) => {}
            Encoding::Owned(e) => e.set_trailers(trailers),
        }
    }

    /// Where the next response starts, for [`ResponseWriter::rollback`].
    #[inline]
    pub(crate) fn checkpoint(&self) -> usize {
        match &self.encoding {
            Encoding::Http1(e) => e.written(),
            Encoding::Owned(e) => e.written(),
        }
    }

    /// Removes everything written since `checkpoint` (a handler that
    /// panicked half-way through its response).
    pub(crate) fn rollback(&mut self, checkpoint: usize) {
        match &mut self.encoding {
            Encoding::Http1(e) => e.truncate(checkpoint),
            Encoding::Owned(e) => e.truncate(checkpoint),
        }
    }

    /// Makes this response the connection's last.
    pub(crate) fn close_connection(&mut self) {
        match &mut self.encoding {
            Encoding::Http1(e) => e.close_connection(),
            // The connection's own writer decides; a panic behind
            // middleware answers 500 and the connection goes on.
            Encoding::Owned(_) => {}
        }
    }

    /// Writes a server-generated response (see [`super::canned`]).
    pub(crate) fn canned(&mut self, canned: Canned<'_>) {
        let reason = canned.reason.as_bytes();
        let header = canned.header;
        let _ = self.write_with(canned.status, TEXT_UTF8, header, canned.body_len(), |body| {
            body.extend_from_slice(reason);
            body.push(b'\n');
            Ok::<(), Infallible>(())
        });
    }

    #[cold]
    fn refuse_invalid_header(&mut self) {
        tracing::error!("refusing a response with an invalid header");
        self.canned(INVALID_RESPONSE_HEADER);
    }
}
