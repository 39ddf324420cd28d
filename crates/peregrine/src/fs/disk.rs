//! The default source: files are read from disk for every request, so
//! nothing of their contents is kept between requests (HttpArena's
//! *production* rule). What a path resolves to is kept for a second by the
//! per-worker [open-file cache](super::open_files).
//!
//! A file is opened read-only (with `O_NONBLOCK`, so a FIFO in the tree
//! cannot stall the worker in `open`), and then its real location, every
//! symlink resolved, must lie under the root (itself resolved when the
//! `ServeDir` was built): otherwise it is closed unread and the answer is
//! `404`. A symlink inside the root that leads out of it is thus refused,
//! one that stays inside is followed. The real location comes from
//! `/proc/self/fd/N`, where the kernel keeps the path of every open file:
//! one `readlink`, where `fs::canonicalize` takes one per path component
//! of the whole path, root included (14 per request for a file and its
//! sibling in this repository's `crates/peregrine-tfb/data/static`).
//! Without `/proc`, `fs::canonicalize` is the fallback. Siblings are looked for
//! next to the requested name (`X.br` for `X`) and checked the same way,
//! since the sibling could be the link. Anything but a regular file
//! (directories, devices, FIFOs) is a `404`.
//!
//! The I/O is blocking and runs on the worker thread: for the files a web
//! site serves (kilobytes to a few hundred) the page cache answers in
//! microseconds, faster than handing the read to another thread and back.
//! A cold, slow disk stalls the worker's other connections for that long.
//!
//! Before the open-file cache and `sendfile`, measured on the project's
//! 2-core VM (one worker, 64 connections,
//! HttpArena's `Accept-Encoding: br;q=1, gzip;q=0.8`, other builds running
//! beside it): `reset.css` (a 2.4 KB `.br`) cost about 15 µs of server CPU
//! per request from disk against 6 µs from memory (68k and 158k requests
//! per CPU-second), `app.js` (a 47 KB `.br`) 23 µs against 15 µs. The p99
//! latency was 18 to 58 ms in both modes, set by the queue of 64
//! connections on a shared CPU, not by the file I/O.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::rc::Rc;

use super::negotiate::Coding;
use super::open_files::{self, Lookup};
use super::{Selected, Source, Text, Variant};

/// Finds the variant of `rel` (already sanitized) to send: the first of
/// `codings` that exists under `root`. `dir` numbers the `ServeDir` for the
/// [open-file cache](open_files).
///
/// A sibling is sent only if the file itself is servable too. Every
/// variant sent is `fstat`ed now, so its length and validators are those of
/// the bytes on disk even when the descriptor came from the cache.
pub(crate) fn select(dir: u64, root: &Path, rel: &str, codings: &[Coding]) -> io::Result<Selected<'static>> {
    let open = |coding: Coding| {
        open_files::lookup(dir, rel, coding, || {
            let mut path = root.join(rel).into_os_string();
            path.push(coding.suffix());
            Ok(open_under(root, Path::new(&path))?.map(|(file, _)| file))
        })
    };
    for &coding in codings {
        match open(coding)? {
            Lookup::File(open_file) => {
                if coding != Coding::Identity && matches!(open(Coding::Identity)?, Lookup::Absent) {
                    return Ok(Selected::NotFound);
                }
                let meta = open_file.file.metadata()?;
                let mtime = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                let validators = open_file.validators(meta.len(), mtime, coding);
                return Ok(Selected::Variant(Variant {
                    coding,
                    len: meta.len(),
                    mtime,
                    content_type: Text::Shared(Rc::clone(&open_file.content_type)),
                    etag: Text::Shared(validators.etag),
                    last_modified: Text::Shared(validators.last_modified),
                    source: Source::File(Rc::clone(&open_file.file)),
                }));
            }
            Lookup::Absent if coding == Coding::Identity => return Ok(Selected::NotFound),
            Lookup::Absent => {}
        }
    }
    Ok(match open(Coding::Identity)? {
        Lookup::File(_) => Selected::NotAcceptable,
        Lookup::Absent => Selected::NotFound,
    })
}

/// Opens `path` if it resolves to a regular file under `root`. Errors that
/// mean "no such file here" are `Ok(None)`; others (out of descriptors,
/// I/O errors) are returned.
pub(crate) fn open_under(root: &Path, path: &Path) -> io::Result<Option<(File, Metadata)>> {
    let file = match OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if means_absent(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    let real = match fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
        Ok(real) => real,
        Err(_) => match fs::canonicalize(path) {
            Ok(real) => real,
            Err(e) if means_absent(&e) => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    if !real.starts_with(root) {
        return Ok(None);
    }
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(None);
    }
    Ok(Some((file, meta)))
}

/// Whether an error from resolving or opening a path means the file is not
/// there to serve (rather than the server failing).
fn means_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied | io::ErrorKind::InvalidInput
    ) || matches!(
        e.raw_os_error(),
        Some(libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG | libc::EISDIR | libc::ENXIO)
    )
}
