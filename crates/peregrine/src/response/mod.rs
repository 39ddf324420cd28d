//! What handlers return: [`IntoResponse`] and the types that implement it.
//!
//! Fast types ([`Json`], [`Html`], [`Content`], string literals) write
//! themselves straight into the connection's output buffer, so the hot path
//! builds no intermediate body. [`Response`] is the general, owned form,
//! used when a handler needs custom headers or runs asynchronously. Both go
//! out through [`ResponseWriter`], which encodes them for whatever protocol
//! the request came on; nothing here knows which.

use std::borrow::Cow;

use serde::Serialize;

use crate::error::Error;
use crate::http::StatusCode;

pub(crate) mod canned;
mod file;
pub(crate) mod headers;
pub(crate) mod json;
mod owned;
mod stream;
mod writer;

pub(crate) use file::FileRange;
pub(crate) use stream::{BodyStream, ChunkStream};
pub use stream::{BoxError, Event, Sse};

use headers::{is_managed_header, is_valid_header};
pub use writer::ResponseWriter;

/// `text/plain; charset=utf-8`
pub const TEXT_UTF8: &str = "text/plain; charset=utf-8";
/// `application/json`
pub const JSON: &str = "application/json";
/// `text/html; charset=utf-8`
pub const HTML_UTF8: &str = "text/html; charset=utf-8";

/// Anything a handler can answer with.
pub trait IntoResponse {
    /// Converts into an owned [`Response`] (used by async handlers, whose
    /// result outlives the request).
    fn into_response(self) -> Response;

    /// Writes the response into the connection's output buffer. The default
    /// goes through [`IntoResponse::into_response`]; fast types override it.
    fn write_to(self, w: &mut ResponseWriter<'_>)
    where
        Self: Sized,
    {
        self.into_response().write_to(w);
    }
}

/// An owned response: status, content type, extra headers and body (in
/// memory, or a stream: [`Response::stream`]).
#[derive(Debug)]
pub struct Response {
    status: StatusCode,
    content_type: Cow<'static, str>,
    headers: Vec<(Cow<'static, str>, Cow<'static, str>)>,
    body: Cow<'static, [u8]>,
    /// A body produced over time, sent instead of `body`.
    stream: Option<BodyStream>,
    /// What few responses carry, boxed so every other response (and every
    /// `Result<_, Response>` on the request path) stays small.
    rare: Option<Box<Rare>>,
}

/// The parts of a [`Response`] that only some protocols' responses use.
#[derive(Debug, Default)]
struct Rare {
    /// Fields sent after the body ([`Response::trailer`],
    /// [`Response::trailers_when_done`]).
    trailers: Trailers,
    /// For a `101`: what takes the connection once the head is sent.
    upgrade: Option<crate::upgrade::OnUpgrade>,
    /// A body that is a range of an open file, sent in place of `body` by
    /// a driver that reads it piece by piece (HTTP/2). Only a driver's own
    /// writer stores one ([`ResponseWriter::owned_with_files`]), so
    /// middleware and the test client always see the bytes in `body`.
    file: Option<FileRange>,
}

/// A header or trailer field.
pub(crate) type Field = (Cow<'static, str>, Cow<'static, str>);

/// Fields sent after a response's body: fixed ones, and ones computed only
/// once the body has been sent in full (a streamed gRPC reply's status is
/// known only when its stream ends).
#[derive(Default)]
pub(crate) struct Trailers {
    fields: Vec<Field>,
    late: Option<Box<dyn FnOnce() -> Vec<Field>>>,
}

impl Trailers {
    pub(crate) fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.late.is_none()
    }

    /// The fields to send, now that the body is sent: the fixed ones, then
    /// the computed ones.
    pub(crate) fn finish(self) -> Vec<Field> {
        let mut fields = self.fields;
        if let Some(late) = self.late {
            fields.extend(late());
        }
        fields
    }
}

impl std::fmt::Debug for Trailers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trailers").field("fields", &self.fields).field("late", &self.late.is_some()).finish()
    }
}

impl Response {
    /// An empty `text/plain` response with `status`.
    pub fn new(status: StatusCode) -> Response {
        Response {
            status,
            content_type: Cow::Borrowed(TEXT_UTF8),
            headers: Vec::new(),
            body: Cow::Borrowed(b""),
            stream: None,
            rare: None,
        }
    }

    /// A `200` with a body of the given content type.
    pub fn with_body(
        content_type: impl Into<Cow<'static, str>>,
        body: impl Into<Cow<'static, [u8]>>,
    ) -> Response {
        Response {
            status: StatusCode::OK,
            content_type: content_type.into(),
            headers: Vec::new(),
            body: body.into(),
            stream: None,
            rare: None,
        }
    }

    /// A `200` whose body is the chunks of `stream`, sent as they come (see
    /// [`stream`](crate::response::Sse) for Server-Sent Events). An `Err`
    /// ends the body early; the client sees it cut short.
    pub fn stream<S, B, E>(content_type: impl Into<Cow<'static, str>>, stream: S) -> Response
    where
        S: futures_util::Stream<Item = Result<B, E>> + 'static,
        B: Into<bytes::Bytes>,
        E: Into<BoxError>,
    {
        use futures_util::StreamExt;
        let chunks = stream.map(|item| item.map(Into::into).map_err(Into::into));
        Response { stream: Some(BodyStream(Box::pin(chunks))), ..Response::with_body(content_type, &b""[..]) }
    }

    /// Reads a streamed body to its end into the in-memory body (the test
    /// client's view); an error ends it where it stopped.
    pub(crate) async fn collect_stream(&mut self) {
        use futures_util::StreamExt;
        let Some(BodyStream(mut chunks)) = self.stream.take() else { return };
        let mut body = self.body.to_vec();
        while let Some(Ok(chunk)) = chunks.next().await {
            body.extend_from_slice(&chunk);
        }
        self.body = Cow::Owned(body);
    }

    /// Takes a streamed body out (for middleware that transforms it).
    pub(crate) fn take_stream(&mut self) -> Option<BodyStream> {
        self.stream.take()
    }

    /// Puts a streamed body (back) in.
    pub(crate) fn put_stream(&mut self, stream: BodyStream) {
        self.stream = Some(stream);
    }

    /// Adds a trailer field, sent after the body (gRPC's `grpc-status` is
    /// one). HTTP/2 sends trailers in a `HEADERS` frame that ends the
    /// stream; HTTP/1.1 responses leave them out, since most HTTP/1.1
    /// clients ignore trailers. An invalid or server-managed name makes the
    /// response a `500`, as [`Response::header`] does.
    pub fn trailer(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Response {
        let (name, value) = (name.into(), value.into());
        if !is_valid_header(&name, &value) || is_managed_header(&name) {
            tracing::error!(trailer = %name, "refusing invalid response trailer");
            return Response::canned(canned::INVALID_RESPONSE_HEADER);
        }
        self.rare_mut().trailers.fields.push((name, value));
        self
    }

    /// Adds trailer fields that `fields` computes once the body has been
    /// sent in full, after those of [`Response::trailer`]: how a streamed
    /// answer reports how its stream ended (gRPC's `grpc-status` after a
    /// server stream). A body that fails sends no trailers (the HTTP/2
    /// stream is reset), and `fields` is not called. An invalid field then
    /// resets the stream, since the body is already out.
    pub fn trailers_when_done(
        mut self,
        fields: impl FnOnce() -> Vec<(Cow<'static, str>, Cow<'static, str>)> + 'static,
    ) -> Response {
        self.rare_mut().trailers.late = Some(Box::new(fields));
        self
    }

    /// The fixed trailer fields ([`Response::trailer`]), in order.
    pub fn trailers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.rare.iter().flat_map(|r| r.trailers.fields.iter()).map(|(n, v)| (n.as_ref(), v.as_ref()))
    }

    /// Takes the trailers out (the HTTP/2 driver sends them).
    pub(crate) fn take_trailers(&mut self) -> Trailers {
        self.rare.as_mut().map(|r| std::mem::take(&mut r.trailers)).unwrap_or_default()
    }

    /// Sets the trailers (the owned writer stores a written response's).
    pub(crate) fn set_trailers(&mut self, trailers: Trailers) {
        self.rare_mut().trailers = trailers;
    }

    /// Sets what takes the connection after a `101`.
    pub(crate) fn set_upgrade(&mut self, on_upgrade: crate::upgrade::OnUpgrade) {
        self.rare_mut().upgrade = Some(on_upgrade);
    }

    /// Takes out what takes the connection after a `101` (the HTTP/2
    /// driver runs it on the stream instead).
    pub(crate) fn take_upgrade(&mut self) -> Option<crate::upgrade::OnUpgrade> {
        self.rare.as_mut().and_then(|r| r.upgrade.take())
    }

    fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// A `101 Switching Protocols` whose connection `on_upgrade` takes
    /// once the head is sent (how [`crate::ws`] hands a socket over).
    pub(crate) fn switching_protocols(on_upgrade: crate::upgrade::OnUpgrade) -> Response {
        let mut response = Response::new(StatusCode::SWITCHING_PROTOCOLS);
        response.set_upgrade(on_upgrade);
        response
    }

    /// Whether this response switches the connection to another protocol.
    pub fn is_upgrade(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.upgrade.is_some())
    }

    /// Sets a file body, sent instead of `body`.
    pub(crate) fn set_file(&mut self, file: FileRange) {
        self.rare_mut().file = Some(file);
    }

    /// Whether the body is a range of a file.
    pub(crate) fn has_file(&self) -> bool {
        self.rare.as_ref().is_some_and(|r| r.file.is_some())
    }

    /// Takes a file body out.
    pub(crate) fn take_file(&mut self) -> Option<FileRange> {
        self.rare.as_mut().and_then(|r| r.file.take())
    }

    /// Whether the body is a stream.
    pub fn is_streaming(&self) -> bool {
        self.stream.is_some()
    }

    /// A `200` `text/plain; charset=utf-8` response.
    pub fn text(body: impl Into<Cow<'static, str>>) -> Response {
        let body = match body.into() {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        };
        Response::with_body(TEXT_UTF8, body)
    }

    /// A `200` JSON response, serialized now. Serialization failures (a map
    /// with non-string keys, say) become a `500`.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Response {
        let mut body = Vec::with_capacity(128);
        match json::write(&mut body, value) {
            Ok(()) => Response::with_body(JSON, body),
            Err(e) => Error::internal(format!("JSON serialization failed: {e}")).into_response(),
        }
    }

    /// Sets the status.
    pub fn status(mut self, status: StatusCode) -> Response {
        self.status = status;
        self
    }

    /// Adds a header. Names must be HTTP tokens and values must not contain
    /// CR, LF or NUL; a response given an invalid header becomes a `500`
    /// rather than emitting it (header injection), and the mistake is logged.
    pub fn header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Response {
        let (name, value) = (name.into(), value.into());
        if !is_valid_header(&name, &value) {
            tracing::error!(header = %name, "refusing invalid response header");
            return Response::canned(canned::INVALID_RESPONSE_HEADER);
        }
        if name.eq_ignore_ascii_case("content-type") {
            self.content_type = value;
        } else if !is_managed_header(&name) {
            self.headers.push((name, value));
        }
        self
    }

    /// A server-generated answer (see [`canned`]) as an owned response.
    pub(crate) fn canned(canned: canned::Canned<'_>) -> Response {
        let mut body = Vec::with_capacity(canned.body_len());
        body.extend_from_slice(canned.reason.as_bytes());
        body.push(b'\n');
        let mut response = Response::with_body(TEXT_UTF8, body).status(canned.status);
        if let Some((name, value)) = canned.header {
            response.headers.push((Cow::Borrowed(name), Cow::Owned(value.to_owned())));
        }
        response
    }

    /// Sets the status in place (for middleware).
    pub fn set_status(&mut self, status: StatusCode) {
        self.status = status;
    }

    /// Sets a header in place, replacing any of the same name (for
    /// middleware). Returns `false`, changing nothing, for a header that
    /// could inject others (see [`Response::header`]) or one the server
    /// writes itself.
    pub fn set_header(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> bool {
        let (name, value) = (name.into(), value.into());
        if !is_valid_header(&name, &value) || is_managed_header(&name) {
            return false;
        }
        if name.eq_ignore_ascii_case("content-type") {
            self.content_type = value;
        } else {
            self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
            self.headers.push((name, value));
        }
        true
    }

    /// Removes every header called `name` (not the content type).
    pub fn remove_header(&mut self, name: &str) {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    }

    /// The extra headers, in order (the content type is
    /// [`Response::header_value`]`("content-type")`).
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers.iter().map(|(n, v)| (n.as_ref(), v.as_ref()))
    }

    /// Replaces the body (for middleware, such as compression).
    pub fn set_body(&mut self, body: impl Into<Cow<'static, [u8]>>) {
        self.body = body.into();
    }

    /// Takes the body out, leaving it empty.
    pub fn take_body(&mut self) -> Cow<'static, [u8]> {
        std::mem::replace(&mut self.body, Cow::Borrowed(b""))
    }

    /// The status.
    pub fn status_code(&self) -> StatusCode {
        self.status
    }

    /// The body bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The value of a header set with [`Response::header`] (or the content type).
    pub fn header_value(&self, name: &str) -> Option<&str> {
        if name.eq_ignore_ascii_case("content-type") {
            return Some(&self.content_type);
        }
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref())
    }
}

impl IntoResponse for Response {
    fn into_response(self) -> Response {
        self
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        let headers = self.headers.iter().map(|(n, v)| (n.as_ref(), v.as_ref()));
        let Rare { trailers, upgrade, file } = self.rare.map(|r| *r).unwrap_or_default();
        if let Some(on_upgrade) = upgrade {
            return w.write_upgrade(self.status, headers, on_upgrade);
        }
        match (self.stream, file) {
            (Some(stream), _) => w.write_stream(self.status, &self.content_type, headers, stream),
            (None, Some(file)) => {
                if let Err(file) = w.write_file(self.status, &self.content_type, headers.clone(), file) {
                    // A writer that takes no file: the bytes, read now.
                    let mut body = Vec::new();
                    let read = usize::try_from(file.len).ok().and_then(|len| {
                        crate::sys::pread_append(&file.file, &mut body, len, file.offset)
                            .ok()
                            .filter(|&n| n == len)
                    });
                    match read {
                        Some(_) => w.write(self.status, &self.content_type, headers, &body),
                        None => Error::internal("reading the file failed").write_to(w),
                    }
                }
            }
            (None, None) => w.write(self.status, &self.content_type, headers, &self.body),
        }
        if !trailers.is_empty() {
            w.trailers(trailers);
        }
    }
}

/// A JSON response body, serialized per request straight into the output
/// buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        Response::json(&self.0)
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        let written = w.write_with(StatusCode::OK, JSON, [], 32, |out| json::write(out, &self.0));
        if let Err(e) = written {
            Error::internal(format!("JSON serialization failed: {e}")).write_to(w);
        }
    }
}

/// An HTML response body (`text/html; charset=utf-8`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Html<T>(pub T);

impl<T: AsRef<str>> IntoResponse for Html<T> {
    fn into_response(self) -> Response {
        Response::with_body(HTML_UTF8, self.0.as_ref().as_bytes().to_vec())
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        w.write(StatusCode::OK, HTML_UTF8, [], self.0.as_ref().as_bytes());
    }
}

/// A body with an explicit content type, e.g. `Content("text/plain", "Hello")`.
#[derive(Clone, Copy, Debug)]
pub struct Content<B>(pub &'static str, pub B);

impl<B: AsRef<[u8]>> IntoResponse for Content<B> {
    fn into_response(self) -> Response {
        Response::with_body(self.0, self.1.as_ref().to_vec())
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        w.write(StatusCode::OK, self.0, [], self.1.as_ref());
    }
}

impl IntoResponse for &'static str {
    fn into_response(self) -> Response {
        Response::text(self)
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        w.write(StatusCode::OK, TEXT_UTF8, [], self.as_bytes());
    }
}

impl IntoResponse for String {
    fn into_response(self) -> Response {
        Response::text(self)
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        w.write(StatusCode::OK, TEXT_UTF8, [], self.as_bytes());
    }
}

impl IntoResponse for StatusCode {
    fn into_response(self) -> Response {
        Response::new(self)
    }
}

impl IntoResponse for () {
    fn into_response(self) -> Response {
        Response::new(StatusCode::OK)
    }
}

impl<T: IntoResponse> IntoResponse for (StatusCode, T) {
    fn into_response(self) -> Response {
        self.1.into_response().status(self.0)
    }
}

impl<T: IntoResponse, E: IntoResponse> IntoResponse for Result<T, E> {
    fn into_response(self) -> Response {
        match self {
            Ok(v) => v.into_response(),
            Err(e) => e.into_response(),
        }
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        match self {
            Ok(v) => v.write_to(w),
            Err(e) => e.write_to(w),
        }
    }
}

/// An [`Error`] is answered with its status and `{"error":"message"}`.
impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(self.message().len() + 12);
        // Serializing a &str cannot fail.
        let _ = self.write_json_body(&mut body);
        let mut response = Response::with_body(JSON, body).status(self.status());
        for &(name, value) in self.headers() {
            response = response.header(name, value);
        }
        response
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        // Serializing a &str into a Vec cannot fail.
        let headers = self.headers().iter().copied();
        let _ = w.write_with(self.status(), JSON, headers, self.message().len() + 12, |out| {
            self.write_json_body(out)
        });
    }
}

/// An `http` crate response: status, headers (those that could inject
/// others, or are not UTF-8, make it a `500`) and body.
impl<B: Into<Vec<u8>>> IntoResponse for ::http::Response<B> {
    fn into_response(self) -> Response {
        let (parts, body) = self.into_parts();
        let mut response = Response::with_body(TEXT_UTF8, body.into()).status(parts.status.into());
        let mut typed = false;
        for (name, value) in &parts.headers {
            let Ok(value) = value.to_str() else {
                return Response::canned(canned::INVALID_RESPONSE_HEADER);
            };
            typed |= name == ::http::header::CONTENT_TYPE;
            response = response.header(name.as_str().to_owned(), value.to_owned());
        }
        if !typed {
            response.content_type = Cow::Borrowed("application/octet-stream");
        }
        response
    }
}

impl Response {
    /// This response as an `http` crate response (a streamed body is left
    /// out: it cannot be read without awaiting).
    pub fn into_http(self) -> ::http::Response<Vec<u8>> {
        let mut builder = ::http::Response::builder()
            .status(::http::StatusCode::from(self.status))
            .header(::http::header::CONTENT_TYPE, self.content_type.as_ref());
        for (name, value) in &self.headers {
            builder = builder.header(name.as_ref(), value.as_ref());
        }
        // Every header here passed `is_valid_header`, which `http` accepts.
        builder.body(self.body.into_owned()).unwrap_or_default()
    }
}

/// A redirect: `Location` and the status that says how to follow it.
#[derive(Clone, Debug)]
pub struct Redirect {
    status: StatusCode,
    location: String,
}

impl Redirect {
    /// `303 See Other`: fetch `location` with `GET` (after a form post).
    pub fn to(location: impl Into<String>) -> Redirect {
        Redirect { status: StatusCode::SEE_OTHER, location: location.into() }
    }

    /// `307 Temporary Redirect`: repeat the request, same method and body,
    /// at `location`.
    pub fn temporary(location: impl Into<String>) -> Redirect {
        Redirect { status: StatusCode::TEMPORARY_REDIRECT, location: location.into() }
    }

    /// `308 Permanent Redirect`: as temporary, and remember it.
    pub fn permanent(location: impl Into<String>) -> Redirect {
        Redirect { status: StatusCode::PERMANENT_REDIRECT, location: location.into() }
    }
}

impl IntoResponse for Redirect {
    fn into_response(self) -> Response {
        Response::new(self.status).header("Location", self.location)
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        w.write(self.status, TEXT_UTF8, [("Location", self.location.as_str())], b"");
    }
}

/// A `Set-Cookie` to add to a response ([`Response::cookie`]): the `cookie`
/// crate's builder, re-exported.
pub use cookie::Cookie;

impl Response {
    /// Adds a `Set-Cookie` header (one per call; `Set-Cookie` is the one
    /// header that repeats). The value is percent-encoded.
    pub fn cookie(mut self, cookie: Cookie<'_>) -> Response {
        let value = cookie.encoded().to_string();
        if !is_valid_header("set-cookie", &value) {
            return Response::canned(canned::INVALID_RESPONSE_HEADER);
        }
        self.headers.push((Cow::Borrowed("Set-Cookie"), Cow::Owned(value)));
        self
    }
}
