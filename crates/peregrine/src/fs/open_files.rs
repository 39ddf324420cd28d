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
use std::time::{Duration, Instant};

use super::negotiate::Coding;

/// How long a lookup's outcome is trusted before the path is opened again.
pub(crate) const REVALIDATE: Duration = Duration::from_secs(1);
/// Entries (and so open descriptors) per worker thread.
pub(crate) const CAPACITY: usize = 256;

/// What a path resolved to when it was last opened.
#[derive(Clone)]
pub(crate) enum Lookup {
    /// A regular file under the root, open for reading.
    File(Rc<File>),
    /// Nothing servable there.
    Absent,
}

struct Entry {
    lookup: Lookup,
    checked: Instant,
}

/// Entries by `(ServeDir number, coding)`, then by relative path, so a hit
/// looks up by `&str` without building a key.
type Cache = HashMap<(u64, Coding), HashMap<Box<str>, Entry>>;

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(HashMap::new());
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
        let entry = cache.get(&(dir, coding))?.get(rel)?;
        fresh(entry).then(|| entry.lookup.clone())
    });
    if let Some(lookup) = cached {
        return Ok(lookup);
    }
    let lookup = match open()? {
        Some(file) => Lookup::File(Rc::new(file)),
        None => Lookup::Absent,
    };
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let len: usize = cache.values().map(HashMap::len).sum();
        if len >= CAPACITY {
            for paths in cache.values_mut() {
                paths.retain(|_, entry| fresh(entry));
            }
            if cache.values().map(HashMap::len).sum::<usize>() >= CAPACITY {
                cache.clear();
            }
        }
        let entry = Entry { lookup: lookup.clone(), checked: now };
        cache.entry((dir, coding)).or_default().insert(rel.into(), entry);
    });
    Ok(lookup)
}
