//! The opt-in in-memory source ([`ServeDir::in_memory`](super::ServeDir::in_memory)):
//! the whole tree, precompressed siblings included, read once when the
//! service is built and answered from memory afterwards (HttpArena's
//! *tuned* rule; changes on disk are not seen until it is built again).
//!
//! Loading walks the root recursively. Real directories are entered;
//! symlinks are followed only to regular files, and only when they resolve
//! under the root (the same check as on disk); symlinks to directories,
//! files whose path is not UTF-8, and anything but regular files are
//! skipped. A file `X.br`, `X.zst` or `X.gz` next to a file `X` becomes a
//! variant of `X`, and stays servable under its own name too (the bytes are
//! shared, not copied). Validators (`ETag`, `Last-Modified`) are computed
//! once, from the metadata at load time, by the same rules as on disk.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::negotiate::Coding;
use super::{conditional, disk, mime, Selected, Source, Text, Variant};

/// Every file under a root, by its relative path (`/`-separated).
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    files: HashMap<Box<str>, Entry>,
}

/// A file and its precompressed siblings, indexed by `Coding as usize`.
#[derive(Clone, Debug, Default)]
struct Entry {
    /// From the file's own name: its siblings are served with it.
    content_type: Box<str>,
    variants: [Option<Loaded>; 4],
}

#[derive(Clone, Debug)]
struct Loaded {
    bytes: Arc<[u8]>,
    mtime: SystemTime,
    etag: Box<str>,
    last_modified: Box<str>,
}

impl Snapshot {
    /// Reads every file under `root` (canonical).
    pub(crate) fn load(root: &Path) -> io::Result<Snapshot> {
        let mut plain: HashMap<Box<str>, (Arc<[u8]>, SystemTime)> = HashMap::new();
        walk(root, root, "", &mut plain)?;
        let mut files: HashMap<Box<str>, Entry> = HashMap::with_capacity(plain.len());
        for (name, (bytes, mtime)) in &plain {
            let entry = files.entry(name.clone()).or_default();
            entry.content_type = mime::content_type(name).into();
            entry.variants[Coding::Identity as usize] = Some(Loaded::new(bytes, *mtime, Coding::Identity));
        }
        for (name, (bytes, mtime)) in &plain {
            for coding in [Coding::Br, Coding::Zstd, Coding::Gzip] {
                let Some(base) = name.strip_suffix(coding.suffix()) else { continue };
                if let Some(entry) = files.get_mut(base) {
                    entry.variants[coding as usize] = Some(Loaded::new(bytes, *mtime, coding));
                }
            }
        }
        Ok(Snapshot { files })
    }

    /// Number of files (siblings included) held.
    pub(crate) fn len(&self) -> usize {
        self.files.len()
    }

    /// The variant of `rel` to send: the first of `codings` held.
    pub(crate) fn select(&self, rel: &str, codings: &[Coding]) -> Selected<'_> {
        let Some(entry) = self.files.get(rel) else { return Selected::NotFound };
        for &coding in codings {
            if let Some(loaded) = &entry.variants[coding as usize] {
                return Selected::Variant(Variant {
                    coding,
                    len: loaded.bytes.len() as u64,
                    mtime: loaded.mtime,
                    content_type: Text::Borrowed(&entry.content_type),
                    etag: Text::Borrowed(&loaded.etag),
                    last_modified: Text::Borrowed(&loaded.last_modified),
                    source: Source::Memory(&loaded.bytes),
                });
            }
        }
        Selected::NotAcceptable
    }
}

impl Loaded {
    fn new(bytes: &Arc<[u8]>, mtime: SystemTime, coding: Coding) -> Loaded {
        Loaded {
            bytes: Arc::clone(bytes),
            mtime,
            etag: conditional::etag(bytes.len() as u64, mtime, coding).into(),
            last_modified: conditional::last_modified(mtime).into(),
        }
    }
}

/// Adds the regular files under `dir` (whose relative path is `prefix`).
fn walk(
    root: &Path,
    dir: &Path,
    prefix: &str,
    out: &mut HashMap<Box<str>, (Arc<[u8]>, SystemTime)>,
) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let rel = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            walk(root, &entry.path(), &rel, out)?;
            continue;
        }
        if !file_type.is_file() && !file_type.is_symlink() {
            continue;
        }
        // Symlinks are resolved and checked against the root like on disk;
        // this also skips links to directories (not regular files).
        let Some((file, meta)) = disk::open_under(root, &entry.path())? else { continue };
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        io::Read::read_to_end(&mut &file, &mut bytes)?;
        let mtime = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        out.insert(rel.into(), (bytes.into(), mtime));
    }
    Ok(())
}
