//! The cache in front of `GET /crud/items/{id}`: one API over two backends.
//!
//! - In-process (default): one [`SharedCache`] for the whole process, so an
//!   update on any worker invalidates what every worker serves. Fills are
//!   ticketed, so a read that raced an update never caches the old row.
//! - Redis (`REDIS_URL` set): shared by every process using that Redis, so
//!   several instances behind a load balancer see each other's
//!   invalidations. See [`crate::redis_cache`].
//!
//! Entries expire 200 ms after they were written (absolute expiry), as the
//! crud profile asks. A cache failure never fails a request: the handler
//! falls through to the database.

use std::sync::Arc;
use std::time::Duration;

use peregrine::cache::{SharedCache, Ticket};

use crate::redis_cache::RedisCache;
use crate::store::Item;

/// How long a cached item is served after it was cached.
pub const ITEM_TTL: Duration = Duration::from_millis(200);
/// Items the in-process cache holds (the crud load reads 50,000 ids).
pub const ITEM_CAPACITY: usize = 65_536;

/// What a lookup found.
pub enum Lookup {
    Hit(Arc<Item>),
    /// Not cached: read the database, then [`ItemCache::fill`] with this.
    Miss(Fill),
}

/// What a fill needs from the lookup that missed.
pub struct Fill(Option<Ticket>);

/// Which cache to use, chosen once at startup and cloned into every
/// worker (`Send + Sync`).
#[derive(Clone)]
pub enum CacheConfig {
    Process(Arc<SharedCache<i32, Arc<Item>>>),
    Redis(redis::Client),
}

impl CacheConfig {
    /// `REDIS_URL` set and not empty: Redis at that URL; otherwise one
    /// in-process cache for all workers.
    pub fn from_env() -> Result<CacheConfig, String> {
        match std::env::var("REDIS_URL").ok().map(|u| u.trim().to_string()).filter(|u| !u.is_empty()) {
            Some(url) => crate::redis_cache::client(&url).map(CacheConfig::Redis),
            None => Ok(CacheConfig::Process(Arc::new(SharedCache::new(ITEM_CAPACITY, ITEM_TTL)))),
        }
    }

    /// For the startup log (no password).
    pub fn describe(&self) -> String {
        match self {
            CacheConfig::Process(_) => "in-process, shared by the workers".to_string(),
            CacheConfig::Redis(client) => {
                let info = client.get_connection_info();
                format!("Redis at {}", info.addr)
            }
        }
    }

    /// The worker's cache; for Redis this starts connecting in the
    /// background, so it must run in the worker's `LocalSet`.
    pub fn build(&self) -> ItemCache {
        match self {
            CacheConfig::Process(cache) => ItemCache::Process(Arc::clone(cache)),
            CacheConfig::Redis(client) => ItemCache::Redis(RedisCache::start(client.clone())),
        }
    }
}

/// The crud item cache of one worker; cheap to clone.
#[derive(Clone)]
pub enum ItemCache {
    Process(Arc<SharedCache<i32, Arc<Item>>>),
    Redis(RedisCache),
}

impl ItemCache {
    pub async fn get(&self, id: i32) -> Lookup {
        match self {
            ItemCache::Process(cache) => {
                // The ticket comes from the lookup, so an invalidation after
                // it (during the database read) drops the fill.
                match cache.get_or_ticket(&id) {
                    Ok(item) => Lookup::Hit(item),
                    Err(ticket) => Lookup::Miss(Fill(Some(ticket))),
                }
            }
            ItemCache::Redis(redis) => match redis.get(id).await {
                Some(item) => Lookup::Hit(Arc::new(item)),
                None => Lookup::Miss(Fill(None)),
            },
        }
    }

    pub async fn fill(&self, fill: Fill, item: Arc<Item>) {
        match self {
            ItemCache::Process(cache) => {
                if let Some(ticket) = fill.0 {
                    cache.insert_if_unchanged(ticket, item.id, item);
                }
            }
            ItemCache::Redis(redis) => redis.set(&item, ITEM_TTL).await,
        }
    }

    /// Drops `id` after a write: every worker's next read of it misses.
    pub async fn invalidate(&self, id: i32) {
        match self {
            ItemCache::Process(cache) => {
                cache.remove(&id);
            }
            ItemCache::Redis(redis) => redis.del(id).await,
        }
    }
}
