//! The HPACK tables (RFC 7541 §2.3): the static table of Appendix A and the
//! dynamic table both ends keep in step.
//!
//! The dynamic table stores its entries' bytes in one buffer allocated once
//! at twice the table's largest size, entries appended at its end; an
//! eviction only forgets the oldest entry's position. When an insertion
//! would run past the end, the live bytes (at most the table size, since
//! every entry counts 32 octets more than its bytes) are moved to the front
//! first. So inserting never allocates, an entry is always one contiguous
//! slice that can be lent out, and a name taken from an entry that the
//! insertion itself evicts (§4.4) is still there to copy.

use std::collections::VecDeque;

/// The per-entry overhead of §4.1.
pub(super) const ENTRY_OVERHEAD: usize = 32;

/// Appendix A, index 1 first.
pub(super) const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The first static index whose name is `name`, if any. A `match` on the
/// name compiles to a length switch and a few comparisons: this runs for
/// every field the encoder writes.
pub(super) fn static_name_index(name: &[u8]) -> Option<usize> {
    Some(match name {
        b":authority" => 1,
        b":method" => 2,
        b":path" => 4,
        b":scheme" => 6,
        b":status" => 8,
        b"accept-charset" => 15,
        b"accept-encoding" => 16,
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return None,
    })
}

/// Where a new entry's name comes from.
#[derive(Clone, Copy)]
pub(super) enum Name<'a> {
    /// Bytes outside the table (a literal, or the static table).
    Bytes(&'a [u8]),
    /// The name of the dynamic entry at this 0-based position, newest first.
    Entry(usize),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Offset of the name in `buf`; the value follows it.
    start: usize,
    name_len: usize,
    value_len: usize,
}

/// The dynamic table (§2.3.2, §4): entries newest first by index, sized per
/// §4.1, evicted oldest first.
#[derive(Debug)]
pub(super) struct Dynamic {
    /// Entries oldest first (`push_back` inserts, `pop_front` evicts).
    entries: VecDeque<Entry>,
    /// Name and value bytes of the entries, see the module docs.
    buf: Vec<u8>,
    /// The §4.1 size of the entries.
    size: usize,
    /// The current maximum size (changed by size updates).
    max_size: usize,
    /// The largest `max_size` this table may ever be given: `buf` holds
    /// twice this.
    capacity: usize,
}

impl Dynamic {
    /// An empty table of `max_size`, which is also the most it can grow to.
    pub(super) fn new(max_size: usize) -> Dynamic {
        Dynamic {
            // Grown as entries come, not allocated up front: an idle
            // connection's two tables then hold a few hundred bytes rather
            // than 2 x (8 KiB + the entry ring).
            entries: VecDeque::new(),
            buf: Vec::new(),
            size: 0,
            max_size,
            capacity: max_size,
        }
    }

    /// The number of entries.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The §4.1 size of the entries.
    #[cfg(test)]
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The current maximum size.
    pub(super) fn max_size(&self) -> usize {
        self.max_size
    }

    /// Name and value of the entry at 0-based `pos`, newest first.
    pub(super) fn get(&self, pos: usize) -> Option<(&[u8], &[u8])> {
        let back = self.entries.len().checked_sub(pos)?.checked_sub(1)?;
        let e = self.entries.get(back)?;
        let name = self.buf.get(e.start..e.start + e.name_len)?;
        let value = self.buf.get(e.start + e.name_len..e.start + e.name_len + e.value_len)?;
        Some((name, value))
    }

    /// Sets the maximum size (clamped to the capacity) and evicts down to it.
    pub(super) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size.min(self.capacity);
        self.evict_to(self.max_size);
    }

    /// Forgets the oldest entries until the size is at most `limit`. Their
    /// bytes stay in `buf` until the next compaction or until the table is
    /// empty when an insertion starts.
    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            match self.entries.pop_front() {
                Some(e) => self.size -= e.name_len + e.value_len + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }

    /// Inserts `name: value` as the newest entry (§4.4): evicts what it
    /// must; an entry larger than the whole table empties it and is not
    /// inserted. A `Name::Entry` that does not exist inserts nothing
    /// (callers check the index first).
    pub(super) fn insert(&mut self, name: Name<'_>, value: &[u8]) {
        let (mut name_start, name_len) = match name {
            Name::Bytes(bytes) => (None, bytes.len()),
            Name::Entry(pos) => {
                let back = self.entries.len().checked_sub(pos).and_then(|b| b.checked_sub(1));
                match back.and_then(|b| self.entries.get(b)) {
                    Some(e) => (Some(e.start), e.name_len),
                    None => return,
                }
            }
        };
        // Both lengths are of slices already in memory, so the sum cannot
        // overflow in practice; saturate anyway rather than wrap.
        let bytes = name_len.saturating_add(value.len());
        let entry_size = bytes.saturating_add(ENTRY_OVERHEAD);
        if entry_size > self.max_size {
            self.evict_to(0);
            return;
        }
        if self.entries.is_empty() {
            // Nothing live (and so no name to copy from): start at the front.
            self.buf.clear();
        }
        // Make room at the end of `buf` before anything is evicted, so a
        // name taken from an entry is still among the live bytes. Live bytes
        // are under `max_size` and the new ones too, so after moving them
        // to the front both fit in `2 * capacity`. Compacting also comes
        // before the buffer would grow while half of it is dead (evicted
        // entries' bytes), so a table that churns few entries (the
        // encoder's `date`, once a second) stays as small as its entries.
        let live_from = self.entries.front().map_or(self.buf.len(), |e| e.start);
        let would_grow = self.buf.len() + bytes > self.buf.capacity();
        if self.buf.len() + bytes > self.capacity * 2 || (would_grow && live_from >= self.buf.len() / 2) {
            self.buf.copy_within(live_from.., 0);
            self.buf.truncate(self.buf.len() - live_from);
            for e in self.entries.iter_mut() {
                e.start -= live_from;
            }
            name_start = name_start.map(|s| s - live_from);
        }
        if self.buf.len() + bytes > self.buf.capacity() {
            // Doubling, but never past the `2 * capacity` bound.
            let target = (self.buf.capacity() * 2).max(self.buf.len() + bytes).min(self.capacity * 2);
            self.buf.reserve_exact(target.saturating_sub(self.buf.len()));
        }
        let start = self.buf.len();
        match (name, name_start) {
            (Name::Bytes(bytes), _) => self.buf.extend_from_slice(bytes),
            (Name::Entry(_), Some(s)) => self.buf.extend_from_within(s..s + name_len),
            // An entry always has a start (resolved above).
            (Name::Entry(_), None) => return,
        }
        self.buf.extend_from_slice(value);
        self.evict_to(self.max_size - entry_size);
        self.entries.push_back(Entry { start, name_len, value_len: value.len() });
        self.size += entry_size;
    }

    /// The capacity of the byte store, for tests that check it never grows.
    #[cfg(test)]
    pub(super) fn buf_capacity(&self) -> usize {
        self.buf.capacity()
    }
}
