//! Caches for handlers: [`LocalCache`], owned by one worker, and
//! [`SharedCache`], shared by every worker of the process.
//!
//! Pick [`LocalCache`] when a value may be stale for its TTL (every worker
//! fills its own copy); pick [`SharedCache`] when a write on one worker must
//! invalidate what every worker serves (cache-aside in front of rows that
//! change).
//!
//! # `LocalCache`
//!
//! Each worker keeps its own cache, so lookups take no lock and touch no
//! atomic: the cost of a hit is one hash lookup and one clock comparison.
//! Eviction is CLOCK (second chance), which approximates LRU without
//! reordering anything on a hit: a hit only sets a flag.

use std::borrow::Borrow;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::time::{Duration, Instant};

mod shared;

pub use shared::{SharedCache, Ticket};

struct Entry<V> {
    value: V,
    expires: Instant,
    referenced: Cell<bool>,
}

struct Inner<K, V> {
    map: HashMap<K, Entry<V>>,
    /// Keys in insertion order: the CLOCK hand walks from the front.
    ring: VecDeque<K>,
}

/// A bounded, expiring cache for one worker (`!Sync` by design).
pub struct LocalCache<K, V> {
    inner: RefCell<Inner<K, V>>,
    capacity: usize,
    ttl: Duration,
}

impl<K, V> std::fmt::Debug for LocalCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCache")
            .field("len", &self.inner.borrow().map.len())
            .field("capacity", &self.capacity)
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> LocalCache<K, V> {
    /// A cache holding at most `capacity` entries, each valid for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> LocalCache<K, V> {
        let capacity = capacity.max(1);
        LocalCache {
            inner: RefCell::new(Inner {
                map: HashMap::with_capacity(capacity),
                ring: VecDeque::with_capacity(capacity),
            }),
            capacity,
            ttl,
        }
    }

    /// The value for `key` if present and not expired, as of `now`.
    pub fn get_at<Q>(&self, key: &Q, now: Instant) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let inner = self.inner.borrow();
        let entry = inner.map.get(key)?;
        if entry.expires <= now {
            return None;
        }
        entry.referenced.set(true);
        Some(entry.value.clone())
    }

    /// The value for `key` if present and not expired.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_at(key, Instant::now())
    }

    /// Inserts or replaces `key`, evicting another entry if the cache is full.
    pub fn insert_at(&self, key: K, value: V, now: Instant) {
        let mut inner = self.inner.borrow_mut();
        let expires = now + self.ttl;
        if let Some(entry) = inner.map.get_mut(&key) {
            entry.value = value;
            entry.expires = expires;
            return;
        }
        while inner.map.len() >= self.capacity {
            let Some(candidate) = inner.ring.pop_front() else { break };
            let keep = match inner.map.get(&candidate) {
                // Expired entries go first; recently used ones get a second chance.
                Some(e) if e.expires > now && e.referenced.replace(false) => true,
                Some(_) => false,
                None => continue,
            };
            if keep {
                inner.ring.push_back(candidate);
            } else {
                inner.map.remove(&candidate);
            }
        }
        inner.ring.push_back(key.clone());
        inner.map.insert(key, Entry { value, expires, referenced: Cell::new(false) });
    }

    /// Inserts or replaces `key`.
    pub fn insert(&self, key: K, value: V) {
        self.insert_at(key, value, Instant::now());
    }

    /// Removes `key` (for invalidation after a write).
    pub fn remove<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        // The ring keeps the key until the hand reaches it; it is skipped then.
        self.inner.borrow_mut().map.remove(key);
    }

    /// Entries currently held (expired ones included until evicted).
    pub fn len(&self) -> usize {
        self.inner.borrow().map.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The configured capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_misses_and_expiry() {
        let cache = LocalCache::new(10, Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(cache.get_at(&1, t0), None);
        cache.insert_at(1, "one", t0);
        assert_eq!(cache.get_at(&1, t0 + Duration::from_secs(4)), Some("one"));
        assert_eq!(cache.get_at(&1, t0 + Duration::from_secs(5)), None, "expired");
        cache.remove(&1);
        assert_eq!(cache.get_at(&1, t0), None);
    }

    #[test]
    fn stays_bounded_and_keeps_hot_entries() {
        let cache = LocalCache::new(100, Duration::from_secs(60));
        let t0 = Instant::now();
        cache.insert_at(0, 0, t0);
        for i in 1..1000 {
            // Key 0 is used constantly: CLOCK must keep giving it a second chance.
            assert_eq!(cache.get_at(&0, t0), Some(0), "hot key evicted at {i}");
            cache.insert_at(i, i, t0);
            assert!(cache.len() <= 100);
        }
        assert_eq!(cache.len(), 100);
        assert_eq!(cache.get_at(&999, t0), Some(999));
        assert_eq!(cache.get_at(&1, t0), None, "cold key evicted");
    }

    #[test]
    fn replacing_does_not_grow() {
        let cache = LocalCache::new(2, Duration::from_secs(60));
        for _ in 0..10 {
            cache.insert(7, 1);
        }
        assert_eq!(cache.len(), 1);
    }
}
