//! The framework-independent half of the lab's TFB peers, shared by
//! `lab/peers/actix` and `lab/peers/hyper` so both do the same database work.
//!
//! Each server worker (an actix worker, or one hyper runtime thread) owns one
//! [`Worker`]: one tokio-postgres connection with its statements prepared
//! once, and a small cache for `/cached-queries`. This is how the TFB entries
//! of these frameworks talk to PostgreSQL: the N reads of `/queries` and
//! `/updates` are issued as concurrent futures on the worker's connection, so
//! tokio-postgres writes them all before reading any result (pipelining).
//!
//! The HTTP side (routing, headers) stays in each peer so the comparison is
//! about the framework.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use sailfish::TemplateOnce;
use serde::Serialize;
use tokio_postgres::{Client, NoTls, Statement};

/// Largest `queries`/`count` value; larger values are clamped to it.
pub const MAX_COUNT: usize = 500;
/// Body of the 503 answer when the database cannot be used.
pub const DB_UNAVAILABLE: &str = r#"{"error":"database unavailable"}"#;

const WORLD_ROWS: i32 = 10_000;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const CACHE_TTL: Duration = Duration::from_secs(60);
const CACHE_CAPACITY: usize = 10_000;

const SELECT_WORLD: &str = "SELECT id, randomnumber FROM world WHERE id = $1";
const SELECT_FORTUNES: &str = "SELECT id, message FROM fortune";
const UPDATE_WORLDS: &str = "UPDATE world SET randomnumber = v.r \
     FROM (SELECT unnest($1::int[]) AS id, unnest($2::int[]) AS r) AS v \
     WHERE world.id = v.id";

/// One World row; serializes as `{"id":N,"randomNumber":M}`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct World {
    pub id: i32,
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

/// The `/json` body object.
#[derive(Serialize)]
pub struct Message {
    pub message: &'static str,
}

pub struct Fortune {
    pub id: i32,
    pub message: String,
}

#[derive(TemplateOnce)]
#[template(path = "fortunes.stpl")]
struct FortunesTemplate<'a> {
    fortunes: &'a [Fortune],
}

/// Why a database-backed request could not be answered (the peers map it to
/// a 503 with [`DB_UNAVAILABLE`]).
#[derive(Debug)]
pub enum DbError {
    /// No `DATABASE_URL` was given.
    NotConfigured,
    /// Connecting failed or another request of this worker is connecting.
    Unavailable(String),
    /// A statement failed.
    Query(tokio_postgres::Error),
    /// The template failed to render.
    Render(sailfish::RenderError),
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbError::NotConfigured => f.write_str("DATABASE_URL is not set"),
            DbError::Unavailable(why) => write!(f, "database unavailable: {why}"),
            DbError::Query(e) => write!(f, "query failed: {e}"),
            DbError::Render(e) => write!(f, "template failed: {e}"),
        }
    }
}

impl From<tokio_postgres::Error> for DbError {
    fn from(e: tokio_postgres::Error) -> Self {
        DbError::Query(e)
    }
}

/// A connection with its prepared statements.
struct Db {
    client: Client,
    world: Statement,
    fortunes: Statement,
    update: Statement,
}

impl Db {
    async fn connect(url: &str) -> Result<Db, DbError> {
        let (client, connection) = tokio::time::timeout(CONNECT_TIMEOUT, tokio_postgres::connect(url, NoTls))
            .await
            .map_err(|_| DbError::Unavailable("connect timed out".into()))?
            .map_err(|e| DbError::Unavailable(e.to_string()))?;
        // The connection task runs on the worker's own (current-thread)
        // runtime, next to the requests that use it.
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("postgres connection closed: {e}");
            }
        });
        let (world, fortunes, update) = futures_util::future::try_join3(
            client.prepare(SELECT_WORLD),
            client.prepare(SELECT_FORTUNES),
            client.prepare(UPDATE_WORLDS),
        )
        .await?;
        Ok(Db { client, world, fortunes, update })
    }

    async fn world(&self, id: i32) -> Result<World, tokio_postgres::Error> {
        let row = self.client.query_one(&self.world, &[&id]).await?;
        Ok(World { id: row.try_get(0)?, random_number: row.try_get(1)? })
    }

    /// `n` single-row reads, all in flight at once on this connection.
    async fn worlds(&self, ids: impl Iterator<Item = i32>) -> Result<Vec<World>, tokio_postgres::Error> {
        try_join_all(ids.map(|id| self.world(id))).await
    }
}

/// A bounded per-worker cache of World rows with an absolute expiry.
struct Cache {
    map: HashMap<i32, (World, Instant)>,
}

impl Cache {
    fn get(&self, id: i32, now: Instant) -> Option<World> {
        match self.map.get(&id) {
            Some((w, expires)) if *expires > now => Some(*w),
            _ => None,
        }
    }

    fn insert(&mut self, w: World, now: Instant) {
        if self.map.len() >= CACHE_CAPACITY && !self.map.contains_key(&w.id) {
            self.map.retain(|_, (_, expires)| *expires > now);
            if self.map.len() >= CACHE_CAPACITY {
                if let Some(&victim) = self.map.keys().next() {
                    self.map.remove(&victim);
                }
            }
        }
        self.map.insert(w.id, (w, now + CACHE_TTL));
    }
}

/// Database state of one server worker (not shared between threads).
pub struct Worker {
    url: Option<String>,
    db: RefCell<Option<Rc<Db>>>,
    connecting: Cell<bool>,
    cache: RefCell<Cache>,
}

fn random_id() -> i32 {
    fastrand::i32(1..=WORLD_ROWS)
}

impl Worker {
    /// Creates the worker's state and, if a URL is given, connects. A failed
    /// connection is logged and retried by the next request.
    pub async fn new(url: Option<String>) -> Worker {
        let worker = Worker {
            url,
            db: RefCell::new(None),
            connecting: Cell::new(false),
            cache: RefCell::new(Cache { map: HashMap::new() }),
        };
        if worker.url.is_some() {
            if let Err(e) = worker.conn().await {
                eprintln!("worker starts without a database connection: {e}");
            }
        }
        worker
    }

    /// The live connection, reconnecting if it was lost.
    async fn conn(&self) -> Result<Rc<Db>, DbError> {
        if let Some(db) = &*self.db.borrow() {
            if !db.client.is_closed() {
                return Ok(db.clone());
            }
        }
        let url = self.url.as_deref().ok_or(DbError::NotConfigured)?;
        if self.connecting.replace(true) {
            return Err(DbError::Unavailable("reconnecting".into()));
        }
        let result = Db::connect(url).await.map(Rc::new);
        self.connecting.set(false);
        let db = result?;
        *self.db.borrow_mut() = Some(db.clone());
        Ok(db)
    }

    /// Forgets a connection that failed, so the next request reconnects.
    fn check<T>(&self, result: Result<T, tokio_postgres::Error>) -> Result<T, DbError> {
        result.map_err(|e| {
            let mut db = self.db.borrow_mut();
            if db.as_ref().is_some_and(|db| db.client.is_closed()) {
                *db = None;
            }
            DbError::Query(e)
        })
    }

    /// `/db`: one random row.
    pub async fn single(&self) -> Result<World, DbError> {
        let db = self.conn().await?;
        self.check(db.world(random_id()).await)
    }

    /// `/queries`: `n` random rows, one statement each, pipelined.
    pub async fn queries(&self, n: usize) -> Result<Vec<World>, DbError> {
        let db = self.conn().await?;
        self.check(db.worlds((0..n).map(|_| random_id())).await)
    }

    /// `/updates`: `n` random rows read as in `/queries`, each given a new
    /// randomNumber, written back in one statement with ids sorted (so
    /// concurrent updates lock rows in the same order and cannot deadlock).
    pub async fn updates(&self, n: usize) -> Result<Vec<World>, DbError> {
        let db = self.conn().await?;
        let mut worlds = self.check(db.worlds((0..n).map(|_| random_id())).await)?;
        for w in &mut worlds {
            let old = w.random_number;
            // A new value that differs, so every update really changes the row.
            while w.random_number == old {
                w.random_number = random_id();
            }
        }
        let mut pairs: Vec<(i32, i32)> = worlds.iter().map(|w| (w.id, w.random_number)).collect();
        pairs.sort_unstable_by_key(|p| p.0);
        pairs.dedup_by_key(|p| p.0);
        if pairs.len() != worlds.len() {
            // An id drawn twice: every entry shows the one value stored.
            for w in &mut worlds {
                if let Ok(i) = pairs.binary_search_by_key(&w.id, |p| p.0) {
                    w.random_number = pairs[i].1;
                }
            }
        }
        let (ids, values): (Vec<i32>, Vec<i32>) = pairs.into_iter().unzip();
        self.check(db.client.execute(&db.update, &[&ids, &values]).await)?;
        Ok(worlds)
    }

    /// `/fortunes`: all rows plus one, sorted by message, rendered as HTML.
    pub async fn fortunes(&self) -> Result<String, DbError> {
        let db = self.conn().await?;
        let rows = self.check(db.client.query(&db.fortunes, &[]).await)?;
        let mut fortunes = Vec::with_capacity(rows.len() + 1);
        for row in &rows {
            fortunes.push(Fortune { id: self.check(row.try_get(0))?, message: self.check(row.try_get(1))? });
        }
        fortunes.push(Fortune { id: 0, message: "Additional fortune added at request time.".to_string() });
        fortunes.sort_unstable_by(|a, b| a.message.cmp(&b.message));
        FortunesTemplate { fortunes: &fortunes }.render_once().map_err(DbError::Render)
    }

    /// `/cached-queries`: `n` random rows from the cache; misses are read
    /// from the database (concurrently) and cached.
    pub async fn cached(&self, n: usize) -> Result<Vec<World>, DbError> {
        let now = Instant::now();
        let mut out = Vec::with_capacity(n);
        let mut missing = Vec::new();
        {
            let cache = self.cache.borrow();
            for i in 0..n {
                let id = random_id();
                match cache.get(id, now) {
                    Some(w) => out.push(w),
                    None => {
                        missing.push((i, id));
                        out.push(World { id, random_number: 0 });
                    }
                }
            }
        }
        if !missing.is_empty() {
            let db = self.conn().await?;
            let fetched = self.check(db.worlds(missing.iter().map(|&(_, id)| id)).await)?;
            let mut cache = self.cache.borrow_mut();
            let now = Instant::now();
            for (&(i, _), w) in missing.iter().zip(fetched) {
                cache.insert(w, now);
                out[i] = w;
            }
        }
        Ok(out)
    }
}

/// The `queries`/`count` parameter rule: missing, empty or not an integer
/// means 1; below 1 means 1; above 500 means 500 (also when it overflows).
pub fn count_param(query: Option<&str>, name: &str) -> usize {
    let value = query.and_then(|q| {
        q.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k == name).then_some(v)
        })
    });
    let Some(v) = value else { return 1 };
    match v.parse::<i64>() {
        Ok(n) => n.clamp(1, MAX_COUNT as i64) as usize,
        Err(_) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => MAX_COUNT,
        Err(_) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_rule() {
        let c = |q| count_param(q, "queries");
        assert_eq!(c(None), 1);
        assert_eq!(c(Some("queries=20")), 20);
        assert_eq!(c(Some("a=1&queries=7")), 7);
        assert_eq!(c(Some("queries=")), 1);
        assert_eq!(c(Some("queries")), 1);
        assert_eq!(c(Some("queries=foo")), 1);
        assert_eq!(c(Some("queries=0")), 1);
        assert_eq!(c(Some("queries=-5")), 1);
        assert_eq!(c(Some("queries=501")), 500);
        assert_eq!(c(Some("queries=99999999999999999999")), 500);
    }

    #[test]
    fn fortunes_are_escaped() {
        let fortunes = [Fortune { id: 1, message: "<script>&\"'".into() }];
        let html = FortunesTemplate { fortunes: &fortunes }.render_once().unwrap();
        assert!(
            html.ends_with(
                "<tr><td>1</td><td>&lt;script&gt;&amp;&quot;&#039;</td></tr></table></body></html>"
            ),
            "{html}"
        );
    }
}

/// Command line shared by the peers: `--addr HOST:PORT` (or `PORT`) and
/// `--workers N` (default: the CPUs available).
pub struct Args {
    /// Address to listen on.
    pub addr: SocketAddr,
    /// Worker threads.
    pub workers: usize,
}

/// Parses the command line; `program` names the peer in the usage message.
pub fn parse_args(program: &str) -> Result<Args, String> {
    let port = match std::env::var("PORT") {
        Ok(p) => p.parse::<u16>().map_err(|_| format!("PORT is not a port number: {p:?}"))?,
        Err(_) => 8080,
    };
    let mut args = Args {
        addr: SocketAddr::from(([0, 0, 0, 0], port)),
        workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        let mut value = || argv.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--addr" => {
                let v = value()?;
                args.addr = v.parse().map_err(|_| format!("--addr: not HOST:PORT: {v:?}"))?;
            }
            "--workers" => {
                let v = value()?;
                args.workers =
                    v.parse().ok().filter(|&n| n > 0).ok_or(format!("--workers: not a count: {v:?}"))?;
            }
            _ => {
                return Err(format!(
                    "unknown argument {flag:?} (usage: {program} [--addr HOST:PORT] [--workers N])"
                ))
            }
        }
    }
    Ok(args)
}
