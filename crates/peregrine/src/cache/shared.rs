//! [`SharedCache`]: a bounded cache with absolute per-entry expiry that every
//! worker of a process shares (`Send + Sync`).
//!
//! [`super::LocalCache`] is the fast choice for data that may be stale for
//! its TTL. When a write on one worker must be seen by a read on any other
//! (update, then invalidate, then read), the cache has to be one for the
//! whole process: this one is split into shards, each a `Mutex` around a
//! `HashMap` and its own CLOCK ring, so workers contend only when their keys
//! hash to the same shard, and a lock is held for one hash lookup.
//!
//! Cache-aside has a race: a reader misses, reads the old row from the
//! database, a writer updates the row and invalidates, and the reader then
//! caches the old row. [`SharedCache::ticket`] and
//! [`SharedCache::insert_if_unchanged`] close it: take a ticket before the
//! database read, and the fill is dropped if any key of that shard was
//! removed in between.

use std::borrow::Borrow;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Shards of [`SharedCache::new`]: enough that a few dozen workers rarely
/// meet on one lock.
const DEFAULT_SHARDS: usize = 64;

struct Entry<V> {
    value: V,
    expires: Instant,
    referenced: bool,
}

struct Shard<K, V> {
    map: HashMap<K, Entry<V>>,
    /// Keys in insertion order: the CLOCK hand walks from the front.
    ring: VecDeque<K>,
    /// Bumped by every removal; see [`Ticket`].
    generation: u64,
}

/// Proof of what a shard looked like before a database read; see
/// [`SharedCache::insert_if_unchanged`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    shard: usize,
    generation: u64,
}

/// A bounded, expiring cache shared by all workers of a process.
///
/// Each entry expires `ttl` after it was inserted (absolute expiry: reading
/// it does not extend its life). The capacity is split evenly over the
/// shards, each evicting with CLOCK (expired entries first, then entries
/// not read since the hand last passed).
///
/// ```
/// use std::time::Duration;
/// use peregrine::cache::SharedCache;
///
/// let cache: SharedCache<u32, String> = SharedCache::new(10_000, Duration::from_millis(200));
/// if let Err(ticket) = cache.get_or_ticket(&7) {
///     // ... read row 7 from the database ...
///     cache.insert_if_unchanged(ticket, 7, "seven".to_string());
/// }
/// assert_eq!(cache.get(&7).as_deref(), Some("seven"));
/// cache.remove(&7); // after writing row 7
/// assert_eq!(cache.get(&7), None);
/// ```
pub struct SharedCache<K, V> {
    shards: Box<[Mutex<Shard<K, V>>]>,
    hasher: RandomState,
    shard_capacity: usize,
    ttl: Duration,
}

impl<K, V> std::fmt::Debug for SharedCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCache")
            .field("shards", &self.shards.len())
            .field("capacity", &(self.shard_capacity * self.shards.len()))
            .field("ttl", &self.ttl)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a shard leaves it consistent (every mutation is
    // one map or ring call), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K: Hash + Eq + Clone, V: Clone> SharedCache<K, V> {
    /// A cache holding at most about `capacity` entries (rounded up to a
    /// multiple of the shard count), each valid for `ttl` after insertion.
    pub fn new(capacity: usize, ttl: Duration) -> SharedCache<K, V> {
        SharedCache::with_shards(capacity, ttl, DEFAULT_SHARDS)
    }

    /// [`SharedCache::new`] with `shards` shards (at least 1, at most
    /// `capacity`).
    pub fn with_shards(capacity: usize, ttl: Duration, shards: usize) -> SharedCache<K, V> {
        let capacity = capacity.max(1);
        let shards = shards.clamp(1, capacity);
        let shard_capacity = capacity.div_ceil(shards);
        SharedCache {
            shards: (0..shards)
                .map(|_| {
                    Mutex::new(Shard {
                        map: HashMap::with_capacity(shard_capacity),
                        ring: VecDeque::with_capacity(shard_capacity),
                        generation: 0,
                    })
                })
                .collect(),
            hasher: RandomState::new(),
            shard_capacity,
            ttl,
        }
    }

    fn shard_of<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        // The high bits: HashMap inside the shard uses the low ones.
        let hash = self.hasher.hash_one(key);
        ((hash >> 32) as usize) % self.shards.len()
    }

    /// The value for `key` if present and not expired, as of `now`.
    pub fn get_at<Q>(&self, key: &Q, now: Instant) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut shard = lock(&self.shards[self.shard_of(key)]);
        let entry = shard.map.get_mut(key)?;
        if entry.expires <= now {
            return None;
        }
        entry.referenced = true;
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

    /// Inserts or replaces `key`, valid until `now + ttl`, evicting another
    /// entry of its shard if the shard is full.
    pub fn insert_at(&self, key: K, value: V, now: Instant) {
        let mut shard = lock(&self.shards[self.shard_of(&key)]);
        self.insert_locked(&mut shard, key, value, now);
    }

    /// Inserts or replaces `key`, valid for the cache's TTL from now.
    pub fn insert(&self, key: K, value: V) {
        self.insert_at(key, value, Instant::now());
    }

    /// One lock for a cache-aside read: the value for `key` if present and
    /// not expired, else the [`Ticket`] to fill it with after reading the
    /// source.
    pub fn get_or_ticket<Q>(&self, key: &Q) -> Result<V, Ticket>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let index = self.shard_of(key);
        let mut shard = lock(&self.shards[index]);
        let ticket = Ticket { shard: index, generation: shard.generation };
        match shard.map.get_mut(key) {
            Some(entry) if entry.expires > Instant::now() => {
                entry.referenced = true;
                Ok(entry.value.clone())
            }
            _ => Err(ticket),
        }
    }

    /// What [`SharedCache::insert_if_unchanged`] checks against: take it
    /// before reading the value to cache from its source.
    pub fn ticket<Q>(&self, key: &Q) -> Ticket
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let shard = self.shard_of(key);
        Ticket { shard, generation: lock(&self.shards[shard]).generation }
    }

    /// Inserts `key` (as [`SharedCache::insert`]) only if nothing in its
    /// shard was removed since `ticket` was taken, so a value read before a
    /// concurrent write-and-invalidate is not cached after it. Returns
    /// whether it inserted. A removal of another key of the same shard also
    /// drops the fill: that costs a later miss, never a stale hit.
    pub fn insert_if_unchanged(&self, ticket: Ticket, key: K, value: V) -> bool {
        let index = self.shard_of(&key);
        let mut shard = lock(&self.shards[index]);
        if index != ticket.shard || shard.generation != ticket.generation {
            return false;
        }
        self.insert_locked(&mut shard, key, value, Instant::now());
        true
    }

    fn insert_locked(&self, shard: &mut Shard<K, V>, key: K, value: V, now: Instant) {
        let expires = now + self.ttl;
        if let Some(entry) = shard.map.get_mut(&key) {
            entry.value = value;
            entry.expires = expires;
            return;
        }
        while shard.map.len() >= self.shard_capacity {
            let Some(candidate) = shard.ring.pop_front() else { break };
            let keep = match shard.map.get_mut(&candidate) {
                // Expired entries go first; recently read ones get a second chance.
                Some(e) => e.expires > now && std::mem::take(&mut e.referenced),
                None => continue,
            };
            if keep {
                shard.ring.push_back(candidate);
            } else {
                shard.map.remove(&candidate);
            }
        }
        // Keys removed by `remove` linger in the ring until the hand passes;
        // keep the ring bounded when removals outpace evictions.
        if shard.ring.len() >= 2 * self.shard_capacity {
            let Shard { map, ring, .. } = shard;
            ring.retain(|k| map.contains_key(k));
        }
        shard.ring.push_back(key.clone());
        shard.map.insert(key, Entry { value, expires, referenced: false });
    }

    /// Removes `key` (invalidation after a write) and returns whether it
    /// was present. Every worker's next [`SharedCache::get`] misses.
    pub fn remove<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let mut shard = lock(&self.shards[self.shard_of(key)]);
        shard.generation = shard.generation.wrapping_add(1);
        shard.map.remove(key).is_some()
    }

    /// Removes every entry.
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            let mut shard = lock(shard);
            shard.generation = shard.generation.wrapping_add(1);
            shard.map.clear();
            shard.ring.clear();
        }
    }

    /// Entries currently held (expired ones included until evicted).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).map.len()).sum()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most entries it holds: the per-shard bound times the shards.
    pub fn capacity(&self) -> usize {
        self.shard_capacity * self.shards.len()
    }

    /// How long an entry lives after its insertion.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};
    use std::thread;

    #[test]
    fn hits_misses_and_absolute_expiry() {
        let cache = SharedCache::new(10, Duration::from_millis(200));
        let t0 = Instant::now();
        assert_eq!(cache.get_at(&1, t0), None);
        cache.insert_at(1, "one", t0);
        assert_eq!(cache.get_at(&1, t0 + Duration::from_millis(150)), Some("one"));
        // Reading does not extend the life of an entry.
        assert_eq!(cache.get_at(&1, t0 + Duration::from_millis(200)), None, "expired");
        cache.insert_at(1, "uno", t0);
        assert!(cache.remove(&1));
        assert!(!cache.remove(&1));
        assert_eq!(cache.get_at(&1, t0), None);
    }

    #[test]
    fn stays_bounded_and_keeps_hot_entries() {
        let cache = SharedCache::with_shards(100, Duration::from_secs(60), 4);
        assert_eq!(cache.capacity(), 100);
        let t0 = Instant::now();
        cache.insert_at(0, 0, t0);
        for i in 1..5000 {
            assert_eq!(cache.get_at(&0, t0), Some(0), "hot key evicted at {i}");
            cache.insert_at(i, i, t0);
            assert!(cache.len() <= 100);
        }
        assert_eq!(cache.get_at(&4999, t0), Some(4999));
        for i in 0..5000 {
            cache.insert_at(i, i, t0);
            cache.remove(&i);
        }
        assert!(cache.is_empty());
        for shard in cache.shards.iter() {
            assert!(lock(shard).ring.len() <= 2 * cache.shard_capacity, "ring grows with removals");
        }
    }

    #[test]
    fn a_ticket_drops_a_fill_that_raced_an_invalidation() {
        let cache = SharedCache::new(10, Duration::from_secs(60));
        let ticket = cache.ticket(&5);
        cache.remove(&5); // a writer invalidates while the reader reads
        assert!(!cache.insert_if_unchanged(ticket, 5, "old"));
        assert_eq!(cache.get(&5), None);
        let ticket = cache.ticket(&5);
        assert!(cache.insert_if_unchanged(ticket, 5, "new"));
        assert_eq!(cache.get(&5), Some("new"));
        assert_eq!(cache.get_or_ticket(&5), Ok("new"));
        let Err(ticket) = cache.get_or_ticket(&6) else { panic!("6 was never cached") };
        cache.remove(&6);
        assert!(!cache.insert_if_unchanged(ticket, 6, "old"), "removed since the lookup");
    }

    /// A removal on one thread is seen by the next read on every other
    /// thread, as with workers: one updates and invalidates, the others
    /// must miss from then on.
    #[test]
    fn invalidation_is_seen_by_every_thread() {
        const THREADS: usize = 4;
        const ROUNDS: u64 = 200;
        let cache = Arc::new(SharedCache::<u64, u64>::new(1000, Duration::from_secs(60)));
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let cache = Arc::clone(&cache);
                let barrier = Arc::clone(&barrier);
                thread::spawn(move || {
                    for round in 0..ROUNDS {
                        let key = round % 7;
                        // The writer of this round caches the value ...
                        if round as usize % THREADS == t {
                            cache.insert(key, round);
                        }
                        barrier.wait();
                        assert_eq!(cache.get(&key), Some(round), "thread {t} round {round}: fill not seen");
                        barrier.wait();
                        // ... then invalidates it after its "update".
                        if round as usize % THREADS == t {
                            assert!(cache.remove(&key));
                        }
                        barrier.wait();
                        assert_eq!(cache.get(&key), None, "thread {t} round {round}: stale hit");
                        barrier.wait();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread panicked");
        }
    }

    /// Many threads reading, filling and invalidating at once: nothing
    /// deadlocks, the bound holds, and a key removed after the last fill
    /// stays gone.
    #[test]
    fn concurrent_mixed_use_stays_bounded() {
        let cache = Arc::new(SharedCache::<u32, u32>::with_shards(256, Duration::from_secs(60), 8));
        let handles: Vec<_> = (0..4u32)
            .map(|t| {
                let cache = Arc::clone(&cache);
                thread::spawn(move || {
                    for i in 0..20_000u32 {
                        let key = (i * 7 + t) % 1000;
                        match i % 3 {
                            0 => {
                                let ticket = cache.ticket(&key);
                                cache.insert_if_unchanged(ticket, key, i);
                            }
                            1 => {
                                cache.get(&key);
                            }
                            _ => {
                                cache.remove(&key);
                            }
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread panicked");
        }
        assert!(cache.len() <= cache.capacity());
        for key in 0..1000 {
            cache.remove(&key);
        }
        assert!(cache.is_empty());
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<SharedCache<String, Vec<u8>>>();
    }
}
