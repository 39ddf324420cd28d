//! The Redis backend of [`crate::item_cache::ItemCache`], used when
//! `REDIS_URL` is set: items as JSON under `peregrine:crud:item:{id}`,
//! written with `SET key value PX 200`, read with `GET`, invalidated with
//! `DEL`. Every process pointed at the same Redis shares the entries, so
//! an update through one instance makes the next read through any other a
//! miss.
//!
//! Each worker keeps one multiplexed connection (redis' `ConnectionManager`,
//! which reconnects by itself once it has connected). The first connection
//! is made by a background task that retries with backoff, so a worker
//! serves from the start even while Redis is down.
//!
//! Redis is never allowed to fail a request: every command is bounded by
//! [`OP_TIMEOUT`], and a failure (refused, timed out, garbage) is counted,
//! logged (the first, then every 1,000th) and treated as a miss, so the
//! handler reads the database. After a failure the worker leaves Redis
//! alone for [`BACKOFF`], so an outage costs each request nothing rather
//! than a timeout. Invalidations skipped in that window, and a fill that
//! raced an update, can leave an entry stale for at most its 200 ms.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::store::Item;

/// Bound on one Redis command as the request sees it.
pub const OP_TIMEOUT: Duration = Duration::from_millis(100);
/// How long a worker bypasses Redis after a failed command.
pub const BACKOFF: Duration = Duration::from_millis(500);
/// Bounds of the first connection's retry delay.
const CONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);
const CONNECT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Redis failures since start, all workers together.
static FAILURES: AtomicU64 = AtomicU64::new(0);

/// Redis failures since start (commands that failed, timed out or returned
/// something unreadable), all workers together.
pub fn failures() -> u64 {
    FAILURES.load(Ordering::Relaxed)
}

fn key(id: i32) -> String {
    format!("peregrine:crud:item:{id}")
}

/// Checks `REDIS_URL` at startup, so a malformed one stops the process
/// with a clear message instead of silently running without a cache.
pub fn client(url: &str) -> Result<redis::Client, String> {
    redis::Client::open(url).map_err(|e| format!("REDIS_URL {url:?} is not usable: {e}"))
}

/// One worker's Redis cache; cheap to clone (`Rc`), `!Send`.
#[derive(Clone)]
pub struct RedisCache {
    inner: Rc<Inner>,
}

struct Inner {
    conn: RefCell<Option<ConnectionManager>>,
    /// Redis is bypassed until then after a failure.
    down_until: Cell<Option<Instant>>,
}

impl RedisCache {
    /// Starts connecting in the background; must run inside the worker's
    /// `LocalSet`. Never waits for Redis.
    pub fn start(client: redis::Client) -> RedisCache {
        let inner = Rc::new(Inner { conn: RefCell::new(None), down_until: Cell::new(None) });
        let weak = Rc::downgrade(&inner);
        tokio::task::spawn_local(async move {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Duration::from_secs(1))
                .set_response_timeout(OP_TIMEOUT)
                .set_number_of_retries(1)
                .set_max_delay(200);
            let mut delay = CONNECT_BACKOFF_MIN;
            loop {
                match ConnectionManager::new_with_config(client.clone(), config.clone()).await {
                    Ok(conn) => {
                        let Some(inner) = weak.upgrade() else { return };
                        tracing::info!("connected to Redis");
                        *inner.conn.borrow_mut() = Some(conn);
                        return;
                    }
                    Err(e) => {
                        if weak.strong_count() == 0 {
                            return;
                        }
                        if delay == CONNECT_BACKOFF_MIN {
                            tracing::warn!(error = %e, "Redis unreachable; serving from the database meanwhile");
                        }
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(CONNECT_BACKOFF_MAX);
                    }
                }
            }
        });
        RedisCache { inner }
    }

    /// The connection, unless Redis is not connected yet or is being left
    /// alone after a failure.
    fn conn(&self) -> Option<ConnectionManager> {
        if let Some(until) = self.inner.down_until.get() {
            if Instant::now() < until {
                return None;
            }
            self.inner.down_until.set(None);
        }
        self.inner.conn.borrow().clone()
    }

    fn failed(&self, what: &str, error: &dyn std::fmt::Display) {
        let n = FAILURES.fetch_add(1, Ordering::Relaxed) + 1;
        if n == 1 || n % 1000 == 0 {
            tracing::warn!(failures = n, "Redis {what} failed ({error}); falling back to the database");
        }
        self.inner.down_until.set(Some(Instant::now() + BACKOFF));
    }

    async fn run<T: redis::FromRedisValue>(&self, what: &str, cmd: redis::Cmd) -> Option<T> {
        let mut conn = self.conn()?;
        match tokio::time::timeout(OP_TIMEOUT, cmd.query_async::<T>(&mut conn)).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => {
                self.failed(what, &e);
                None
            }
            Err(_) => {
                self.failed(what, &"timed out");
                None
            }
        }
    }

    /// The cached item, or `None` on a miss or any failure.
    pub async fn get(&self, id: i32) -> Option<Item> {
        let json: Option<String> = self.run("GET", redis::Cmd::get(key(id))).await?;
        match serde_json::from_str(&json?) {
            Ok(item) => Some(item),
            Err(e) => {
                self.failed("GET (unreadable entry)", &e);
                None
            }
        }
    }

    /// Caches `item` for `ttl` (the crud profile's 200 ms).
    pub async fn set(&self, item: &Item, ttl: Duration) {
        let Ok(json) = serde_json::to_string(item) else { return };
        let mut cmd = redis::cmd("SET");
        cmd.arg(key(item.id)).arg(json).arg("PX").arg(ttl.as_millis() as u64);
        let _: Option<()> = self.run("SET", cmd).await;
    }

    /// Drops the entry for `id`.
    pub async fn del(&self, id: i32) {
        let _: Option<i64> = self.run("DEL", redis::Cmd::del(key(id))).await;
    }
}
