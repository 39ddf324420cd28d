//! The encoder that builds an owned [`Response`] instead of bytes: what a
//! handler behind middleware writes into, so the middleware can look at and
//! change the response before the connection's own encoder writes it.

use super::headers::{is_managed_header, is_valid_header};
use super::Response;
use crate::http::StatusCode;

/// A response written into memory, not onto a connection.
#[derive(Debug)]
pub(crate) struct OwnedEncoder<'a> {
    slot: &'a mut Option<Response>,
    /// Whether a file body may stay a file: only where the slot goes
    /// straight to a driver that sends it piece by piece (HTTP/2), never
    /// where middleware or a test looks at the body's bytes.
    files: bool,
}

/// A header that could inject others: nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InvalidHeader;

impl<'a> OwnedEncoder<'a> {
    pub(crate) fn new(slot: &'a mut Option<Response>) -> OwnedEncoder<'a> {
        OwnedEncoder { slot, files: false }
    }

    /// An encoder whose response goes straight to a driver that sends a
    /// file body itself, in pieces, so [`OwnedEncoder::write_file`] keeps
    /// the file rather than refusing it.
    pub(crate) fn with_files(slot: &'a mut Option<Response>) -> OwnedEncoder<'a> {
        OwnedEncoder { slot, files: true }
    }

    /// Stores a response whose body is `file`, if this encoder
    /// [keeps files](OwnedEncoder::with_files) and the status has a body;
    /// otherwise gives the file back for the caller to read into memory.
    pub(crate) fn write_file<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        file: super::FileRange,
    ) -> Result<Result<(), InvalidHeader>, super::FileRange> {
        if !self.files || status.forbids_body() {
            return Err(file);
        }
        if let Err(e) = self.write(status, content_type, headers, Vec::new()) {
            return Ok(Err(e));
        }
        if let Some(response) = self.slot.as_mut() {
            response.set_file(file);
        }
        Ok(Ok(()))
    }

    /// Whether a response has been written.
    pub(crate) fn written(&self) -> usize {
        usize::from(self.slot.is_some())
    }

    /// Forgets the response if `checkpoint` says none was written then.
    pub(crate) fn truncate(&mut self, checkpoint: usize) {
        if checkpoint == 0 {
            *self.slot = None;
        }
    }

    /// Stores a `101` with its continuation (middleware and the test
    /// client see the status and headers).
    pub(crate) fn write_upgrade<'h>(
        &mut self,
        status: StatusCode,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        on_upgrade: crate::upgrade::OnUpgrade,
    ) -> Result<(), InvalidHeader> {
        self.write(status, super::TEXT_UTF8, headers, Vec::new())?;
        if let Some(response) = self.slot.as_mut() {
            response.set_upgrade(on_upgrade);
        }
        Ok(())
    }

    /// Stores a streamed response whole (middleware and the test client
    /// see it as a `Response` with its stream).
    pub(crate) fn write_stream<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        stream: super::BodyStream,
    ) -> Result<(), InvalidHeader> {
        self.write(status, content_type, headers, Vec::new())?;
        if let Some(response) = self.slot.as_mut() {
            response.stream = Some(stream);
        }
        Ok(())
    }

    /// Sets the trailers of the response written (none written: ignored).
    pub(crate) fn set_trailers(&mut self, trailers: super::Trailers) {
        if let Some(response) = self.slot.as_mut() {
            response.set_trailers(trailers);
        }
    }

    pub(crate) fn write<'h>(
        &mut self,
        status: StatusCode,
        content_type: &str,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        body: Vec<u8>,
    ) -> Result<(), InvalidHeader> {
        if !is_valid_header("content-type", content_type) {
            return Err(InvalidHeader);
        }
        let mut response = Response::with_body(content_type.to_owned(), body).status(status);
        for (name, value) in headers {
            if !is_valid_header(name, value) {
                return Err(InvalidHeader);
            }
            if !is_managed_header(name) {
                response.headers.push((name.to_owned().into(), value.to_owned().into()));
            }
        }
        *self.slot = Some(response);
        Ok(())
    }
}
