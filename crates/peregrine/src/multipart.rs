//! `multipart/form-data` request bodies (file uploads), read field by field
//! as they arrive, through the `multer` crate.
//!
//! A streaming handler takes the request [`Body`] and the `Content-Type`:
//!
//! ```no_run
//! use peregrine::multipart::Multipart;
//! use peregrine::{Body, Error, Router};
//!
//! let app = Router::new().post("/upload", |headers: http::HeaderMap, body: Body| async move {
//!     let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
//!     let mut form = Multipart::new(content_type, body)?;
//!     let mut sizes = Vec::new();
//!     while let Some(mut field) = form.next_field().await? {
//!         let name = field.name().unwrap_or("").to_owned();
//!         let mut size = 0;
//!         while let Some(chunk) = field.chunk().await? {
//!             size += chunk.len();
//!         }
//!         sizes.push(format!("{name}={size}"));
//!     }
//!     Ok::<_, Error>(sizes.join(","))
//! });
//! ```
//!
//! The body is never held whole: each field's bytes come in chunks as the
//! client sends them, within the server's streaming body limit.

use std::fmt;

use bytes::Bytes;

use crate::body::Body;
use crate::error::Error;
use crate::http::StatusCode;

/// Size of each read from the body.
const READ_SIZE: usize = 16 * 1024;

/// A `multipart/form-data` body being read. Must be made on a worker (or
/// the test client): it reads the body on a task of the current worker.
pub struct Multipart {
    inner: multer::Multipart<'static>,
    /// The task reading the body; awaited after the last field, so the
    /// body is back with its connection when the handler returns.
    pump: Option<tokio::task::JoinHandle<()>>,
}

impl fmt::Debug for Multipart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Multipart")
    }
}

/// One field of a [`Multipart`] body.
pub struct Field {
    inner: multer::Field<'static>,
}

impl fmt::Debug for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Field").field("name", &self.name()).field("file_name", &self.file_name()).finish()
    }
}

/// A multipart error as the answer to give: `413` over a limit, `400` for
/// a malformed body.
fn error(e: multer::Error) -> Error {
    match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            Error::payload_too_large("multipart body too large")
        }
        multer::Error::StreamReadFailed(source) => match source.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::bad_request(format!("multipart body unreadable: {other}")),
        },
        other => Error::bad_request(format!("malformed multipart body: {other}")),
    }
}

impl Multipart {
    /// Reads `body` as `multipart/form-data` with the boundary in
    /// `content_type`; `415` for another content type, `400` without a
    /// boundary.
    pub fn new(content_type: &str, body: Body) -> Result<Multipart, Error> {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        if !essence.eq_ignore_ascii_case("multipart/form-data") {
            return Err(Error::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "expected a multipart/form-data body",
            ));
        }
        let boundary = multer::parse_boundary(content_type)
            .map_err(|_| Error::bad_request("multipart/form-data without a boundary"))?;
        // multer wants a `Send` stream and a `Body` is bound to its worker:
        // a local task reads the body into a channel of one chunk, so the
        // client's pace still sets the parser's (backpressure), and the
        // channel's receiver is the stream multer reads.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, Error>>(1);
        let pump = tokio::task::spawn_local(async move {
            let mut body = body;
            loop {
                let mut buf = vec![0u8; READ_SIZE];
                let next = match body.read(&mut buf).await {
                    Ok(0) => return,
                    Ok(n) => {
                        buf.truncate(n);
                        Ok(Bytes::from(buf))
                    }
                    Err(e) => Err(e),
                };
                let failed = next.is_err();
                if tx.send(next).await.is_err() || failed {
                    return;
                }
            }
        });
        let chunks = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        Ok(Multipart { inner: multer::Multipart::new(chunks, boundary), pump: Some(pump) })
    }

    /// The next field, or `None` after the last.
    pub async fn next_field(&mut self) -> Result<Option<Field>, Error> {
        let next = self.inner.next_field().await.map_err(error)?;
        if next.is_none() {
            if let Some(pump) = self.pump.take() {
                // After the closing boundary the body ends at once.
                let _ = pump.await;
            }
        }
        Ok(next.map(|inner| Field { inner }))
    }
}

impl Field {
    /// The field's name (`name=` in its `Content-Disposition`).
    pub fn name(&self) -> Option<&str> {
        self.inner.name()
    }

    /// The uploaded file's name, for a file field.
    pub fn file_name(&self) -> Option<&str> {
        self.inner.file_name()
    }

    /// The field's `Content-Type`.
    pub fn content_type(&self) -> Option<String> {
        self.inner.content_type().map(ToString::to_string)
    }

    /// The next chunk of the field's bytes, or `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, Error> {
        self.inner.chunk().await.map_err(error)
    }

    /// The whole field, refusing more than `limit` bytes with `413`.
    pub async fn bytes(mut self, limit: usize) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            if out.len() + chunk.len() > limit {
                return Err(Error::payload_too_large("multipart field too large"));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// The whole field as UTF-8 text, at most `limit` bytes.
    pub async fn text(self, limit: usize) -> Result<String, Error> {
        String::from_utf8(self.bytes(limit).await?)
            .map_err(|_| Error::bad_request("multipart field is not UTF-8"))
    }
}
