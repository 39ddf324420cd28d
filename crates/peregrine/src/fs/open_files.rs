//! A per-worker cache of open file descriptors for the disk source, as
//! nginx's `open_file_cache` keeps them: what a path resolved to (an open,
//! checked regular file, or nothing there) is remembered for a short while
//! ([`REVALIDATE`]), so a request does not pay for `open`, the root check
//! through `/proc/self/fd` and `close` every time.
//!
//! The contents are still read from disk (the page cache) for every
//! request, and each request `fstat`s the cached descriptor, so a file
//! edited in place is served with its new bytes, length and validators at
//! once. What the cache delays, by up to [`REVALIDATE`], is seeing a path
//! point elsewhere: a file replaced by a rename (an atomic deploy), deleted,
//! or created where nothing was. That is the trade nginx's default
//! `open_file_cache_valid` makes too (with 60 s).
//!
//! Measured on the project's 2-core VM (one worker, HttpArena's static
//! profile, 1,024 connections, other builds running beside it): open,
//! the `/proc` check, the sibling's `stat` and close took 14% of the
//! server's CPU time per request before this cache.
//!
//! Each worker thread has its own cache (no lock); entries are keyed by
//! the [`ServeDir`](super::ServeDir)'s identity, the relative path and the
//! coding. It holds at most [`CAPACITY`] entries, so at most that many
//! descriptors per worker; when full, expired entries go first, then all.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use super::negotiate::Coding;
use super::{conditional, mime};

/// How long a lookup's outcome is trusted before the path is opened again.
pub(crate) const REVALIDATE: Duration = Duration::from_secs(1);
/// Entries (and so open descriptors) per worker thread.
pub(crate) const CAPACITY: usize = 256;

/// What a path resolved to when it was last opened.
#[derive(Clone)]
pub(crate) enum Lookup {
    /// A regular file under the root, open for reading.
    File(Rc<OpenFile>),
    /// Nothing servable there.
    Absent,
}

/// An open file, with its content type and the validators last computed
/// for it. The type comes from the requested path, not the sibling's (see
/// `mime`); `mime_guess`'s lookup took 900 of a static request's 10,800
/// instructions (callgrind), so it is done once per open.
pub(crate) struct OpenFile {
    pub(crate) file: Rc<File>,
    pub(crate) content_type: Rc<str>,
    validators: RefCell<Option<Validators>>,
}

/// A file's `ETag` and `Last-Modified` for one length and mtime: formatting
/// them took about a sixth of the user-space instructions of a static
/// request (2,500 of 14,000, callgrind), so they are kept until the
/// `fstat` of a later request shows another length or mtime.
#[derive(Clone)]
pub(crate) struct Validators {
    len: u64,
    mtime: SystemTime,
    pub(crate) etag: Rc<str>,
    pub(crate) last_modified: Rc<str>,
}

impl OpenFile {
    /// The validators for `len` and `mtime` (as `fstat` reports them now).
    pub(crate) fn validators(&self, len: u64, mtime: SystemTime, coding: Coding) -> Validators {
        let mut cached = self.validators.borrow_mut();
        match &*cached {
            Some(v) if v.len == len && v.mtime == mtime => v.clone(),
            _ => {
                let v = Validators {
                    len,
                    mtime,
                    etag: conditional::etag(len, mtime, coding).into(),
                    last_modified: conditional::last_modified(mtime).into(),
                };
                *cached = Some(v.clone());
                v
            }
        }
    }
}

struct Entry {
    lookup: Lookup,
    checked: Instant,
}

/// Per `ServeDir` (a handful, found by a linear scan), the entries by
/// relative path, one slot per coding: a request hashes its path once
/// whichever variants it looks at. The hasher is aHash with random keys
/// (the paths come from clients, so a fixed-key hash could be flooded
/// with collisions; SipHash took 760 of 10,800 instructions per request).
type Cache = Vec<(u64, HashMap<Box<str>, [Option<Entry>; 4], ahash::RandomState>)>;

thread_local! {
    static CACHE: RefCell<Cache> = const { RefCell::new(Vec::new()) };
}

/// The outcome for `rel` with `coding` under the `ServeDir` numbered `dir`:
/// from the cache while it is fresh, else from `open` (whose outcome is
/// then cached; errors are not).
pub(crate) fn lookup(
    dir: u64,
    rel: &str,
    coding: Coding,
    open: impl FnOnce() -> io::Result<Option<File>>,
) -> io::Result<Lookup> {
    let now = Instant::now();
    let fresh = |entry: &Entry| now.duration_since(entry.checked) < REVALIDATE;
    let cached = CACHE.with(|cache| {
        let cache = cache.borrow();
        let (_, paths) = cache.iter().find(|(id, _)| *id == dir)?;
        let entry = paths.get(rel)?[coding as usize].as_ref()?;
        fresh(entry).then(|| entry.lookup.clone())
    });
    if let Some(lookup) = cached {
        return Ok(lookup);
    }
    let lookup = match open()? {
        Some(file) => Lookup::File(Rc::new(OpenFile {
            file: Rc::new(file),
            content_type: mime::content_type(rel).into(),
            validators: RefCell::new(None),
        })),
        None => Lookup::Absent,
    };
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let at = match cache.iter().position(|(id, _)| *id == dir) {
            Some(at) => at,
            None => {
                cache.push((dir, HashMap::default()));
                cache.len() - 1
            }
        };
        let paths = &mut cache[at].1;
        let held = |paths: &HashMap<_, [Option<Entry>; 4], _>| -> usize {
            paths.values().map(|slots| slots.iter().flatten().count()).sum()
        };
        if held(paths) >= CAPACITY {
            for slots in paths.values_mut() {
                for slot in slots.iter_mut() {
                    if slot.as_ref().is_some_and(|entry| !fresh(entry)) {
                        *slot = None;
                    }
                }
            }
            paths.retain(|_, slots| slots.iter().any(Option::is_some));
            if held(paths) >= CAPACITY {
                paths.clear();
            }
        }
        let entry = Entry { lookup: lookup.clone(), checked: now };
        match paths.get_mut(rel) {
            Some(slots) => slots[coding as usize] = Some(entry),
            None => {
                let mut slots: [Option<Entry>; 4] = Default::default();
                slots[coding as usize] = Some(entry);
                paths.insert(rel.into(), slots);
            }
        }
    });
    Ok(lookup)
}
