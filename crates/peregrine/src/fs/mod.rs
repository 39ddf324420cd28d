//! Static files: [`ServeDir`] serves a directory tree, read from disk per
//! request or, opt-in, from memory.
//!
//! ```no_run
//! use peregrine::fs::ServeDir;
//! use peregrine::{Router, Server};
//!
//! fn main() -> std::io::Result<()> {
//!     let assets = ServeDir::new("public").cache_control("public, max-age=3600");
//!     Server::new().serve("0.0.0.0:8080", move |_worker| {
//!         let assets = assets.clone();
//!         async move { Router::new().get("/static/{*path}", assets) }
//!     })
//! }
//! ```
//!
//! `ServeDir` is a synchronous [`Handler`]: it writes its answer straight
//! into the connection's output buffer. The file served is the route's last
//! path parameter (normally a trailing `{*path}` wildcard); on a route
//! without parameters, the request path without its leading `/`. `HEAD`
//! is served by the same route (the router's rule).
//!
//! # What it answers
//! - `200` with the file, its content type (from the extension, by
//!   `mime_guess`; `; charset=utf-8` on `text/*`, JavaScript, SVG and XML,
//!   not on `application/json`, for which RFC 8259 defines no charset),
//!   `ETag`, `Last-Modified`, `Accept-Ranges: bytes`,
//!   `Vary: Accept-Encoding` (on every answer while precompressed siblings
//!   are enabled, so caches never mix the variants) and `Cache-Control`
//!   if one is set. By default none is: clients then revalidate with the
//!   validators as their heuristics see fit ([`ServeDir::cache_control`]).
//! - `404` (the server's plain-text one, as for an unknown route) for
//!   anything that is not a regular file under the root: missing files,
//!   directories (there is no index file and no listing), and every path
//!   refused as a traversal attempt (see *Paths*). Traversal attempts get
//!   the same `404` as missing files, so an answer says nothing about what
//!   lies outside.
//! - `500` only when the server fails: an I/O error other than "not
//!   there" (out of file descriptors, a disk error), or a file that shrank
//!   while being read.
//!
//! # Precompressed siblings
//! A file `X.br`, `X.zst` or `X.gz` next to `X` is sent instead of `X`,
//! with `Content-Encoding`, when `Accept-Encoding` prefers it; `X` itself
//! must exist. A coding's quality is its own entry's `q`, else that of
//! `*`, else 0 (`x-gzip` is `gzip`); `identity` (the file as it is) is
//! acceptable unless refused by `identity;q=0`, or by `*;q=0` without an
//! `identity` entry. Higher `q` wins; among equal `q`, `br`, then `zstd`,
//! then `gzip`, then `identity`. So `br;q=1, gzip;q=0.8` gets the `.br`.
//! A request without `Accept-Encoding` gets the file itself (RFC 9110
//! would allow any coding, but such clients usually decode none). When
//! the client refuses every variant there is: `406`. A sibling asked for
//! by its own name (`/app.js.gz`) is an ordinary file.
//!
//! # Conditional requests
//! The `ETag` is strong and names the exact bytes sent: size, mtime (to the
//! nanosecond) and coding, so each sibling has its own. `If-None-Match` (a
//! list, or `*`) matches by the weak comparison (`W/"x"` matches `"x"`) and
//! answers `304`; without it, `If-Modified-Since` answers `304` when the
//! mtime, in whole seconds, is not after the date. `If-Match` and
//! `If-Unmodified-Since` are not evaluated (they guard writes).
//!
//! # Ranges
//! One `Range: bytes=` range (`first-last`, `first-`, `-N`) on a `GET`
//! gets `206` with `Content-Range`; an unsatisfiable one (`first` at or
//! past the end, `-0`) gets `416` with `Content-Range: bytes */LEN`.
//! Several ranges (`bytes=0-1,3-4`, overlapping or not), other units and
//! anything malformed are ignored and the whole file sent with `200`, as
//! RFC 9110 allows: a multipart answer would cost more than the whole of
//! the small files this serves. `If-Range` keeps the range only for an
//! equal strong `ETag` or the exact `Last-Modified` date. Ranges apply to
//! the variant sent (the compressed bytes, when a sibling is chosen).
//!
//! # Paths
//! First the server's path rule (the same for every protocol) applies, as it does
//! before routing on HTTP/1.1: a dot segment, an escaped unreserved
//! character (`%2e`, `%41`) or a malformed escape is a `400`, whether or
//! not a protocol's parser refused it already. Then the path is
//! percent-decoded exactly once, and refused (`404`) if it is
//! empty, absolute, has an empty, `.` or `..` segment, holds a backslash
//! or NUL, is not UTF-8, or holds an invalid escape: `..`, `%2e%2e`,
//! `..%2f`, `a%00b` and `/static//etc/passwd` never reach the file system.
//! What passes is opened, and the file's real location (every symlink
//! resolved, as the kernel reports it in `/proc/self/fd`, or by
//! `fs::canonicalize` without `/proc`) must lie under the equally resolved
//! root, or it is closed unread: a symlink inside the tree that leads out
//! of it is a `404`, one that stays inside is followed. Hidden files
//! (`.well-known/...`) are served like any other.
//!
//! # Disk or memory
//! By default every request reads the file from disk (the page cache):
//! nothing of its contents is cached (HttpArena's *production* rule). The
//! I/O is blocking and runs on the worker thread: for web assets the page
//! cache answers in microseconds, less than handing the read to another
//! thread and back would cost; a cold, slow disk stalls that worker's
//! other connections meanwhile. Bodies of 4 KiB and more go to the socket
//! by `sendfile(2)` on cleartext HTTP/1.1, so a large file is never copied
//! through user space nor held in memory; smaller ones, and every body
//! where middleware or the transport must see the bytes, are read into the
//! connection's output buffer after the head. A `HEAD` reads nothing.
//!
//! What a path resolves to (an open, checked descriptor, or nothing there)
//! is kept per worker thread for one second, as nginx's `open_file_cache`
//! does: a request then costs one `fstat` instead of `open`, the root check
//! and `close`. Each request still `fstat`s the descriptor, so a file
//! edited in place is served with its new bytes, length and validators at
//! once; a file replaced by a rename, deleted or newly created is seen
//! within a second. On HttpArena's static profile this cache and
//! `sendfile` together took the server from 48k to 87k requests per
//! CPU-second (nginx, measured beside it: 93k).
//!
//! [`ServeDir::in_memory`] loads the tree once instead, siblings included,
//! and answers without touching the disk (changes are not seen); its
//! bodies are copied into the output buffer.
//!
//! # Where the code is
//! `path` (request path to a safe relative path), `negotiate`
//! (`Accept-Encoding`), `disk` and `memory` (the two sources), `conditional`
//! (validators, `304`, `If-Range`), `range` (`Range`), `mime` (content
//! types), `respond` (status, headers, body).

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use crate::handler::{Handler, RawRequest};
use crate::http::uri;
use crate::request::Request;
use crate::response::canned::{Canned, NOT_FOUND};
use crate::response::{IntoResponse, ResponseWriter};
use crate::Error;

mod conditional;
mod disk;
mod memory;
mod mime;
mod negotiate;
mod open_files;
mod path;
mod range;
mod respond;

use negotiate::Coding;

/// Numbers every [`ServeDir`] built, for the open-file cache's keys.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Serves the files under a directory; see the [module docs](self).
///
/// Cheap to clone (the settings and, in memory mode, the files are shared),
/// so one value built before the server starts can go to every worker.
#[derive(Clone)]
pub struct ServeDir {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    /// Tells this directory's entries apart in the per-worker open-file
    /// cache (`open_files`).
    id: u64,
    root: PathBuf,
    settings: Settings,
    snapshot: Option<memory::Snapshot>,
}

/// The response settings shared by both sources.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) cache_control: Option<String>,
    pub(crate) precompressed: bool,
}

impl fmt::Debug for ServeDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeDir")
            .field("root", &self.inner.root)
            .field("cache_control", &self.inner.settings.cache_control)
            .field("precompressed", &self.inner.settings.precompressed)
            .field("in_memory_files", &self.inner.snapshot.as_ref().map(memory::Snapshot::len))
            .finish()
    }
}

impl ServeDir {
    /// Serves the files under `root`, read from disk per request, with
    /// precompressed siblings enabled and no `Cache-Control`.
    ///
    /// The root is resolved (made absolute, symlinks followed) now; if it
    /// does not exist yet, every request is a `404`.
    pub fn new(root: impl AsRef<Path>) -> ServeDir {
        let root = root.as_ref();
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        ServeDir {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                root,
                settings: Settings { cache_control: None, precompressed: true },
                snapshot: None,
            }),
        }
    }

    /// Sends `Cache-Control: value` with every file (`200`, `206`, `304`),
    /// e.g. `"public, max-age=31536000, immutable"` for fingerprinted
    /// assets, or `"no-cache"` to make clients revalidate every time.
    ///
    /// # Panics
    /// If `value` holds CR, LF or NUL (it would end the header early).
    pub fn cache_control(mut self, value: impl Into<String>) -> ServeDir {
        let value = value.into();
        assert!(
            !value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0),
            "Cache-Control value holds CR, LF or NUL: {value:?}"
        );
        Arc::make_mut(&mut self.inner).settings.cache_control = Some(value);
        self
    }

    /// Sends no `Cache-Control` (the default).
    pub fn no_cache_control(mut self) -> ServeDir {
        Arc::make_mut(&mut self.inner).settings.cache_control = None;
        self
    }

    /// Whether precompressed siblings (`.br`, `.zst`, `.gz`) are served to
    /// clients that accept them (default: yes). When off, only the files
    /// themselves are served and no `Vary` header is sent.
    pub fn precompressed(mut self, enabled: bool) -> ServeDir {
        Arc::make_mut(&mut self.inner).settings.precompressed = enabled;
        self
    }

    /// Loads every file under the root now, siblings included, and serves
    /// from memory from then on; changes on disk are not seen. Fails if
    /// the tree cannot be read.
    pub fn in_memory(mut self) -> io::Result<ServeDir> {
        let snapshot = memory::Snapshot::load(&self.inner.root)?;
        Arc::make_mut(&mut self.inner).snapshot = Some(snapshot);
        Ok(self)
    }

    /// The root directory, as resolved by [`ServeDir::new`].
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Whether files are served from memory ([`ServeDir::in_memory`]).
    pub fn is_in_memory(&self) -> bool {
        self.inner.snapshot.is_some()
    }

    /// Answers `req` for the file at `raw` (the still percent-encoded path
    /// relative to the root).
    fn serve(&self, req: &Request<'_>, raw: &str, w: &mut ResponseWriter<'_>) {
        // The server's own path rule first, so that a path is answered the
        // same whether or not a protocol's parser applied it already.
        if let Some(why) = uri::path_error(raw.as_bytes()) {
            return w.canned(Canned::bad_request(why));
        }
        let Some(rel) = path::sanitize(raw) else { return w.canned(NOT_FOUND) };
        let settings = &self.inner.settings;
        let preference = negotiate::negotiate(req.header("accept-encoding"), settings.precompressed);
        let found = match &self.inner.snapshot {
            Some(snapshot) => snapshot.select(&rel, preference.codings()),
            None => match disk::select(self.inner.id, &self.inner.root, &rel, preference.codings()) {
                Ok(found) => found,
                Err(e) => {
                    tracing::error!(error = %e, path = %rel, "opening a static file failed");
                    return Error::internal("opening the file failed").write_to(w);
                }
            },
        };
        match found {
            Selected::Variant(variant) => respond::respond(req, w, settings, variant),
            Selected::NotFound => w.canned(NOT_FOUND),
            Selected::NotAcceptable => respond::not_acceptable(w, settings),
        }
    }
}

/// `ServeDir` is a synchronous handler taking the whole request.
impl<S> Handler<S, RawRequest> for ServeDir {
    fn call(&self, req: &Request<'_>, _state: &S, w: &mut ResponseWriter<'_>) {
        let (params, n) = req.path_params();
        let raw = match n {
            0 => req.path().strip_prefix('/').unwrap_or(req.path()),
            n => params[n - 1],
        };
        self.serve(req, raw, w);
    }
}

/// The outcome of looking a file up.
pub(crate) enum Selected<'a> {
    Variant(Variant<'a>),
    /// No regular file there (or not one we may serve).
    NotFound,
    /// The file exists, but in no coding the client accepts.
    NotAcceptable,
}

/// One variant of a file, chosen to answer a request.
pub(crate) struct Variant<'a> {
    pub(crate) coding: Coding,
    pub(crate) len: u64,
    pub(crate) mtime: SystemTime,
    pub(crate) content_type: Text<'a>,
    pub(crate) etag: Text<'a>,
    pub(crate) last_modified: Text<'a>,
    pub(crate) source: Source<'a>,
}

/// A validator's text: borrowed from the in-memory snapshot, or shared
/// with the open-file cache's entry.
pub(crate) enum Text<'a> {
    Borrowed(&'a str),
    Shared(Rc<str>),
}

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Shared(s) => s,
        }
    }
}

/// Where a variant's bytes are.
pub(crate) enum Source<'a> {
    File(Rc<File>),
    Memory(&'a [u8]),
}
