//! Per-worker PostgreSQL pool: a fixed set of connection slots, each kept up
//! by its own background task, with statements prepared on every connection.
//!
//! # Model
//!
//! A [`PgPool`] belongs to one worker thread and is created inside that
//! worker's `LocalSet` (its background tasks use `spawn_local`). Each slot's
//! task connects, prepares the configured statements, publishes the
//! connection, and then waits for it to close; when it closes (server
//! restart, `pg_terminate_backend`, network loss) the slot is emptied and the
//! task reconnects, backing off exponentially while the server stays away.
//! [`PgPool::new`] therefore never waits for or fails on the database: calls
//! made while no slot is up fail at once with [`ErrorKind::Unavailable`], so a
//! request is answered with a 503 instead of queueing behind a dead server.
//!
//! # Batching
//!
//! Connections are our own wire-protocol driver (the crate-private `wire`
//! module; its module doc says why tokio-postgres is not used on this path). They are shared, not
//! checked out exclusively: [`PgPool::get`] hands out another `Rc` to the
//! least busy live connection, and any number of tasks may issue queries on
//! it at the same time. A query is queued when its future is first polled
//! and sent when the task yields (or, while the connection has its limit
//! of batches out, when one of them is answered; see "Batches in flight"),
//! together with everything else queued in the meantime, as one pipeline
//! with one `Sync` (one implicit transaction, one round trip). Within one
//! request, build all query futures first and await them together (for
//! example with `futures_util::future::try_join_all`); awaiting them one by
//! one would make one round trip each.
//!
//! Reads of one batch share its implicit transaction, but a failing read
//! fails only its own caller: the reads the server skipped behind it are
//! sent again, so they are answered one round trip later (the connection
//! stays up).
//! Statements registered with [`PgConfig::write_statement`] run in a
//! transaction of their own and are answered only after it committed.
//!
//! Responses on one connection come back in request order, so a slow
//! statement delays everything queued behind it. Every connection therefore
//! runs with the server-side `statement_timeout` set to the pool's timeout:
//! the server aborts a runaway statement at the moment its caller gives up,
//! and the pipeline moves on.
//!
//! Because a connection is shared, session state (`SET`, temporary
//! tables, an explicit `BEGIN`) would leak between tasks: never send it
//! on a [`PgConn`]. Use a [`Transaction`] (below) for work that must commit
//! or roll back together.
//!
//! # Batches in flight
//!
//! A connection keeps at most [`PgConfig::batches_in_flight`] batches sent
//! and unanswered (default 2). Work queued while that many are out stays on
//! the client and goes out as one batch when the oldest is answered. Two is
//! the least that keeps the server busy: while one batch runs, the next is
//! already in its socket, so it never waits a round trip for work. Holding
//! more back costs nothing in latency, since answers on one connection come
//! in order and a batch sent earlier would only wait behind the same two.
//! A lone request finds nothing out and is sent at once. Held work counts
//! its deadline from when it was first held, not from when it is sent, so
//! [`PgConfig::timeout`] still bounds every call: it is sent, at the
//! latest, when the oldest batch out passes its own deadline.
//!
//! Without the bound, every scheduler tick under load sent its own small
//! batch: 3.8 reads per `sendto` on `/db` with 256 connections, each write
//! waking a backend to answer a few rows. With it, `sendto` on the
//! PostgreSQL socket fell from 10.6k-19.2k to 2.7k a second at the same
//! request rate. Measured on this project's 2-core machine with the lab
//! (`peregrine-lab bench`, peregrine-tfb on CPU 0, the lab's client on
//! CPU 1, PostgreSQL on either, 256 connections, 5 alternating rounds,
//! medians; the build before this bound ran as a server of its own), in
//! requests/s and requests per server CPU-second:
//!
//! | test | unbounded | at most 2 in flight |
//! |---|---|---|
//! | `/db` | 74.0k; 101k | 89.9k; 158k |
//! | `/queries?queries=20` | 8.6k; 22.0k | 11.0k; 41.9k |
//! | `/fortunes` | 72.4k; 99k | 79.9k; 115k |
//! | `/updates?queries=20` | 5.5k; 22.1k | 5.3k; 23.2k |
//!
//! # Statements: registered, or SQL text prepared on first use
//!
//! The query methods take anything [`ToStatement`]: a [`StatementId`]
//! registered with [`PgConfig::statement`] before the pool exists, or SQL
//! text (`&str`, `String`). A registered statement is prepared on every
//! connection while it connects, in the same round trip as all the others,
//! so using it never costs a preparation. SQL text is prepared on a
//! connection the first time that connection sees it: a `Parse`+`Describe`
//! (parameter types and result columns are needed to encode the `Bind`),
//! which costs one extra round trip before the statement itself is sent.
//! Later uses find it in the connection's cache (keyed by the exact text,
//! at most 256 statements; the least recently used one is closed on the
//! server to make room) and cost the same as a registered statement. The
//! cache belongs to the connection, so a reconnect starts empty, and each
//! of a worker's connections prepares the text once. A statement that
//! fails to prepare (a syntax error: [`ErrorKind::Query`], SQLSTATE
//! `42601`) fails only its caller and is not cached.
//!
//! SQL text may be a read or a write, and the driver cannot tell, so it
//! runs like a [`PgConfig::write_statement`]: in an implicit transaction of
//! its own (a `Sync` before and after), answered after its commit. It is
//! still pipelined with everything else queued in the same tick (same
//! write, same round trip), but costs a transaction per call instead of
//! sharing the batch's; register hot reads with [`PgConfig::statement`].
//! Measured on this project's 2-core machine (release build, server on
//! the same cores, other builds running, one call at a time, three runs):
//! a single-row `SELECT` as SQL text took 17-41 µs once cached and
//! 74-105 µs on first use, against 14-21 µs for a registered read.
//!
//! # Transactions
//!
//! [`PgPool::transaction`] gives a [`Transaction`]: `BEGIN`, any number of
//! statements (registered ones and SQL text, prepared on that connection
//! too), then [`Transaction::commit`] or [`Transaction::rollback`];
//! dropping it without either rolls back. A transaction is session state,
//! so it cannot run on the shared, pipelined connections; it gets a
//! connection of its own for its whole duration, outside the pool's slots.
//! Up to [`PgConfig::transaction_connections`] such connections per worker
//! are opened on demand and kept idle between transactions; when all are
//! in use, [`PgPool::transaction`] waits for one up to the call timeout.
//! The costs: the first transaction on a worker opens its connection
//! (connect, SCRAM authentication, prepare every registered statement),
//! each transaction adds a round trip for `BEGIN` and one for `COMMIT`,
//! and every transaction connection is one more backend on the server
//! (`connections + transaction_connections` per worker). Measured as
//! above: opening the connection took 6-19 ms (about 300 ms in a debug
//! build, where SCRAM's key derivation is slow), and `BEGIN`, a one-row
//! read and `COMMIT` took 68-88 µs against 14-21 µs for the read alone; a
//! write's commit (1-5 ms here, the WAL flush) dwarfs either. While a
//! transaction is open, the shared connections keep serving other
//! requests, unaffected.
//!
//! After a failed statement PostgreSQL refuses the rest of the transaction
//! (SQLSTATE `25P02`); [`Transaction::commit`] then returns that error
//! (the server rolled back), and [`Transaction::rollback`] ends it cleanly.
//! A dropped transaction cannot await its `ROLLBACK`, so it queues it on
//! the connection before handing the connection back; the next
//! transaction's `BEGIN` is queued behind it and so starts clean.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::rc::{Rc, Weak};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::{with_timeout, Error, ErrorKind, SqlState, DEFAULT_TIMEOUT};

pub mod row;
mod wire;

pub use row::Row;
pub use wire::{Params, ServerError, TextRows};

/// What parameters and row decoding need: the traits values are encoded
/// with ([`types::ToSql`], for [`Params`]) and decoded with
/// ([`types::FromSql`], for [`Row::try_get`]), the column [`types::Type`],
/// and what implementing those traits for an application's own types takes.
/// Re-exported from `postgres-types`, so applications use the version the
/// pool was built with without depending on it themselves.
pub mod types {
    pub use postgres_types::{accepts, to_sql_checked, FromSql, IsNull, Kind, ToSql, Type, WrongType};
}

/// A connection that lived at least this long is considered healthy, so its
/// loss resets the backoff and the slot reconnects at once.
const HEALTHY_UPTIME: Duration = Duration::from_secs(1);

/// Settings for one worker's pool. Plain data (`Send + Clone`), so one value
/// can be built at startup and cloned into every worker.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// `postgres://user:pass@host:port/db` or a key=value connection string
    /// (TCP hosts only). The driver speaks plaintext only: `sslmode`
    /// `disable`, `allow` and `prefer` (the default) connect without TLS,
    /// and `require`, `verify-ca` and `verify-full` make [`PgPool::new`]
    /// fail rather than connect without the TLS they ask for.
    pub url: String,
    /// Connections this worker keeps open (at least 1).
    pub connections: usize,
    /// Bound on every query call made through the pool.
    pub timeout: Duration,
    /// Bound on establishing one connection and preparing its statements.
    pub connect_timeout: Duration,
    /// First delay after a failed connection attempt.
    pub backoff_min: Duration,
    /// Ceiling the delay doubles up to while the server stays unreachable.
    pub backoff_max: Duration,
    /// Statements prepared on every connection, in registration order; see
    /// [`PgConfig::statement`] and [`PgConfig::write_statement`].
    pub statements: Vec<StatementSpec>,
    /// Connections this worker may open for [`PgPool::transaction`], on top
    /// of `connections`: each open transaction holds one for its duration,
    /// and idle ones are kept for the next transaction. When all are busy,
    /// [`PgPool::transaction`] waits for one up to the call timeout. `0`
    /// disables transactions.
    pub transaction_connections: usize,
    /// Batches one connection keeps sent and not yet answered (at least 1;
    /// default [`DEFAULT_BATCHES_IN_FLIGHT`]). Work queued while that many
    /// are out waits on the client and goes out as one batch when the
    /// oldest is answered, instead of one small batch per scheduler tick.
    /// See "Batches in flight" in this module's doc.
    pub batches_in_flight: usize,
}

/// Two: one batch running on the server while the next is already in its
/// socket, so the server never waits a round trip between batches, and
/// everything queued behind them is sent together. See "Batches in flight"
/// in this module's doc for the figures.
pub const DEFAULT_BATCHES_IN_FLIGHT: usize = 2;

/// One statement to prepare on every connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementSpec {
    /// The SQL, with `$1`, `$2`, ... for parameters.
    pub sql: String,
    /// Run in an implicit transaction of its own and answer only after the
    /// commit (see [`PgConfig::write_statement`]).
    pub write: bool,
}

/// Handle to a statement registered with [`PgConfig::statement`]; valid for
/// every connection of pools built from that config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatementId(usize);

impl StatementId {
    /// Position of the statement in [`PgConfig::statements`].
    pub fn index(self) -> usize {
        self.0
    }
}

impl PgConfig {
    /// One connection, default timeouts, 50 ms → 2 s reconnect backoff.
    pub fn new(url: impl Into<String>) -> Self {
        PgConfig {
            url: url.into(),
            connections: 1,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: Duration::from_secs(3),
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(2),
            statements: Vec::new(),
            transaction_connections: 2,
            batches_in_flight: DEFAULT_BATCHES_IN_FLIGHT,
        }
    }

    /// Registers a read (or any statement whose effects may share a
    /// transaction with the reads batched around it) to prepare on every
    /// connection, and returns its handle.
    pub fn statement(&mut self, sql: impl Into<String>) -> StatementId {
        self.statements.push(StatementSpec { sql: sql.into(), write: false });
        StatementId(self.statements.len() - 1)
    }

    /// Registers a write: each call runs in an implicit transaction of its
    /// own (a `Sync` before and after it), so no other statement's error
    /// can roll it back, and its caller is answered only after the commit.
    /// It costs a transaction per call, so register only real writes.
    pub fn write_statement(&mut self, sql: impl Into<String>) -> StatementId {
        self.statements.push(StatementSpec { sql: sql.into(), write: true });
        StatementId(self.statements.len() - 1)
    }
}

/// One worker's PostgreSQL pool; cloning shares it (`Rc`).
#[derive(Clone)]
pub struct PgPool {
    shared: Rc<Shared>,
}

impl std::fmt::Debug for PgPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let up =
            self.shared.slots.iter().filter(|s| s.borrow().as_ref().is_some_and(|c| !c.is_closed())).count();
        f.debug_struct("PgPool")
            .field("slots", &self.shared.slots.len())
            .field("up", &up)
            .field("timeout", &self.shared.timeout)
            .finish()
    }
}

struct Shared {
    /// `None` while the slot's task is (re)connecting.
    slots: Box<[RefCell<Option<Rc<wire::Connection>>>]>,
    /// Round-robin start for [`PgPool::get`], so ties spread over slots.
    next: Cell<usize>,
    timeout: Duration,
    /// Signalled whenever a slot comes up; [`PgPool::ready`] waits on it.
    up: Rc<Notify>,
    /// Whether any slot has ever been up: tells start-up (wait for the
    /// first connection) from an outage (fail fast).
    ever_up: Cell<bool>,
    /// Cuts backoff sleeps short: [`PgPool::retry_now`] and pool drop.
    wake: Rc<Notify>,
    /// Opens the connections of transactions.
    connector: Rc<Connector>,
    /// One permit per transaction connection
    /// ([`PgConfig::transaction_connections`]).
    tx_permits: Arc<Semaphore>,
    /// Transaction connections between transactions.
    tx_idle: RefCell<Vec<Rc<wire::Connection>>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Let sleeping slot tasks notice the pool is gone and exit.
        self.wake.notify_waiters();
    }
}

/// What a slot task needs to (re)connect; owned by the tasks, not the pool,
/// so tasks can outlive a connect attempt without keeping the pool alive.
struct Connector {
    params: wire::ConnectParams,
    statements: Vec<StatementSpec>,
    timeout: Duration,
    connect_timeout: Duration,
    backoff_min: Duration,
    backoff_max: Duration,
    transaction_connections: usize,
    batches_in_flight: usize,
}

/// A live connection and its prepared statements. Cheap to clone; holding it
/// does not block other tasks from using the same connection.
#[derive(Clone)]
pub struct PgConn {
    inner: Rc<wire::Connection>,
    timeout: Duration,
}

impl std::fmt::Debug for PgConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConn")
            .field("closed", &self.inner.is_closed())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Startup parameters and hosts from a parsed URL.
fn connect_params(pg: &tokio_postgres::Config, timeout: Duration) -> Result<wire::ConnectParams, Error> {
    use tokio_postgres::config::Host;
    let user = pg.get_user().ok_or_else(|| Error::config("the PostgreSQL URL names no user"))?;
    let ports = pg.get_ports();
    let mut hosts = Vec::new();
    for (i, host) in pg.get_hosts().iter().enumerate() {
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        match host {
            Host::Tcp(name) => hosts.push((name.clone(), port)),
            #[allow(unreachable_patterns)]
            _ => return Err(Error::config("only TCP hosts are supported, not Unix sockets")),
        }
    }
    if hosts.is_empty() {
        hosts.push(("localhost".to_string(), ports.first().copied().unwrap_or(5432)));
    }
    let mut startup = vec![("client_encoding".to_string(), "UTF8".to_string())];
    startup.push(("database".to_string(), pg.get_dbname().unwrap_or(user).to_string()));
    startup
        .push(("application_name".to_string(), pg.get_application_name().unwrap_or("peregrine").to_string()));
    // Queries on a connection are answered in order, so one runaway
    // statement would stall every query pipelined behind it even after its
    // caller timed out. Have the server abort statements at the same
    // deadline (unless the URL sets its own statement_timeout).
    let mut options = pg.get_options().unwrap_or_default().to_string();
    if !options.contains("statement_timeout") {
        let ms = timeout.as_millis().max(1);
        options = format!("{options} -c statement_timeout={ms}").trim_start().to_string();
    }
    startup.push(("options".to_string(), options));
    Ok(wire::ConnectParams {
        hosts,
        user: user.to_string(),
        password: pg.get_password().map(<[u8]>::to_vec),
        startup,
    })
}

/// `url` ready for parsing, or why it cannot be served: this driver does
/// not speak TLS, so an `sslmode` that demands TLS (`require`, `verify-ca`,
/// `verify-full`) is refused rather than silently downgraded to plaintext.
/// `disable`, `allow` and `prefer` (the default) connect in plaintext;
/// `allow`, which tokio-postgres's parser does not know, is passed on as the
/// equivalent `disable`.
fn plaintext_url(url: &str) -> Result<Cow<'_, str>, Error> {
    let Some((mode, range)) = find_ssl_mode(url) else { return Ok(Cow::Borrowed(url)) };
    match mode.as_str() {
        "disable" | "prefer" => Ok(Cow::Borrowed(url)),
        "allow" => {
            let mut url = url.to_string();
            url.replace_range(range, "disable");
            Ok(Cow::Owned(url))
        }
        "require" | "verify-ca" | "verify-full" => Err(tls_unsupported(&mode)),
        other => Err(Error::config(format!(
            "invalid sslmode {other:?}: use disable, allow, prefer, require, verify-ca or verify-full"
        ))),
    }
}

fn tls_unsupported(mode: &str) -> Error {
    Error::config(format!(
        "sslmode={mode} is not supported: peregrine's PostgreSQL driver does not speak TLS, and \
         connecting in plaintext would silently drop the protection the URL asks for; use \
         sslmode=disable on a trusted network, or reach the server through a TLS tunnel on localhost"
    ))
}

/// The last `sslmode` a connection string sets (the one libpq obeys): its
/// value, unescaped, and the byte range of the value as written. Reads both
/// forms: `postgres://...?sslmode=...` and `key=value` strings with optional
/// spaces around `=` and single-quoted values.
fn find_ssl_mode(url: &str) -> Option<(String, Range<usize>)> {
    let is_uri = url.starts_with("postgres://") || url.starts_with("postgresql://");
    if is_uri {
        let query = url.find('?')? + 1;
        let mut found = None;
        let mut at = query;
        for pair in url[query..].split('&') {
            if let Some((key, value)) = pair.split_once('=') {
                if percent_decode(key) == "sslmode" {
                    let start = at + key.len() + 1;
                    found = Some((percent_decode(value), start..start + value.len()));
                }
            }
            at += pair.len() + 1;
        }
        return found;
    }
    let bytes = url.as_bytes();
    let skip_spaces = |mut i: usize| {
        while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let mut found = None;
    let mut i = skip_spaces(0);
    while i < bytes.len() {
        let key_start = i;
        while bytes.get(i).is_some_and(|b| *b != b'=' && !b.is_ascii_whitespace()) {
            i += 1;
        }
        let key = &url[key_start..i];
        i = skip_spaces(i);
        if bytes.get(i) != Some(&b'=') {
            // Malformed; the URL parser reports it.
            return found;
        }
        i = skip_spaces(i + 1);
        let (value, range) = if bytes.get(i) == Some(&b'\'') {
            let start = i + 1;
            let mut value = String::new();
            i = start;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'\'' => break,
                    b'\\' => {
                        i += 1;
                        if let Some(&escaped) = bytes.get(i) {
                            value.push(char::from(escaped));
                        }
                    }
                    _ => value.push(char::from(b)),
                }
                i += 1;
            }
            let end = i.min(bytes.len());
            i = (i + 1).min(bytes.len());
            (value, start..end)
        } else {
            let start = i;
            while bytes.get(i).is_some_and(|b| !b.is_ascii_whitespace()) {
                i += 1;
            }
            (url[start..i].to_string(), start..i)
        };
        if key == "sslmode" {
            found = Some((value, range));
        }
        i = skip_spaces(i);
    }
    found
}

/// `%XX` escapes decoded (invalid ones kept as written); enough to compare
/// a URL's option names and values with known ASCII words.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl PgPool {
    /// Creates the pool and starts connecting every slot in the background.
    ///
    /// Fails only on configuration errors (unparsable URL, zero
    /// connections, a Unix-socket host, an `sslmode` that demands TLS),
    /// never because the database is down.
    ///
    /// # Panics
    ///
    /// Must be called inside a `tokio::task::LocalSet` (tokio panics in
    /// `spawn_local` otherwise), which is where peregrine runs workers.
    pub fn new(config: PgConfig) -> Result<PgPool, Error> {
        if config.connections == 0 {
            return Err(Error::config("a pool needs at least one connection"));
        }
        let url = plaintext_url(&config.url)?;
        let pg = tokio_postgres::Config::from_str(&url)
            .map_err(|e| Error::config(format!("invalid PostgreSQL URL: {e}")).with_source(e))?;
        // What the scan above missed (an unusual spelling), the parser saw.
        if matches!(pg.get_ssl_mode(), tokio_postgres::config::SslMode::Require) {
            return Err(tls_unsupported("require"));
        }
        let params = connect_params(&pg, config.timeout)?;

        let up = Rc::new(Notify::new());
        let wake = Rc::new(Notify::new());
        let connector = Rc::new(Connector {
            params,
            statements: config.statements,
            timeout: config.timeout,
            connect_timeout: config.connect_timeout,
            backoff_min: config.backoff_min,
            backoff_max: config.backoff_max.max(config.backoff_min),
            transaction_connections: config.transaction_connections,
            batches_in_flight: config.batches_in_flight,
        });
        let shared = Rc::new(Shared {
            slots: (0..config.connections).map(|_| RefCell::new(None)).collect(),
            next: Cell::new(0),
            timeout: config.timeout,
            up,
            ever_up: Cell::new(false),
            wake: wake.clone(),
            connector: connector.clone(),
            tx_permits: Arc::new(Semaphore::new(config.transaction_connections)),
            tx_idle: RefCell::new(Vec::new()),
        });
        for index in 0..config.connections {
            tokio::task::spawn_local(run_slot(
                index,
                connector.clone(),
                Rc::downgrade(&shared),
                wake.clone(),
            ));
        }
        Ok(PgPool { shared })
    }

    /// The least busy live connection (fewest outstanding handles; ties go
    /// round-robin). Never waits: with no live connection it returns
    /// [`ErrorKind::Unavailable`] at once.
    pub fn get(&self) -> Result<PgConn, Error> {
        let slots = &self.shared.slots;
        let start = self.shared.next.get();
        self.shared.next.set((start + 1) % slots.len());
        let mut best: Option<(usize, Rc<wire::Connection>)> = None;
        for k in 0..slots.len() {
            let slot = slots[(start + k) % slots.len()].borrow();
            let Some(conn) = slot.as_ref() else { continue };
            // The slot task clears a dead slot only after it notices; the
            // connection knows sooner.
            if conn.is_closed() {
                continue;
            }
            // One reference is the slot's own; the rest are in-flight users.
            let load = Rc::strong_count(conn);
            if load == 1 {
                return Ok(self.conn(conn.clone()));
            }
            match &best {
                Some((best_load, _)) if *best_load <= load => {}
                _ => best = Some((load, conn.clone())),
            }
        }
        best.map(|(_, conn)| self.conn(conn)).ok_or_else(Error::unavailable)
    }

    /// [`PgPool::get`] for request handlers. While the pool has never had a
    /// connection (the server just started), waits for the first one, at
    /// most the call timeout, so requests arriving during start-up are not
    /// refused; once it has been up, an outage fails fast with
    /// [`ErrorKind::Unavailable`] (a `503`) instead of making every request wait.
    pub async fn get_or_wait(&self) -> Result<PgConn, Error> {
        match self.get() {
            Err(e) if e.kind() == ErrorKind::Unavailable && !self.shared.ever_up.get() => {
                self.ready(self.shared.timeout).await?;
                self.get()
            }
            other => other,
        }
    }

    fn conn(&self, inner: Rc<wire::Connection>) -> PgConn {
        PgConn { inner, timeout: self.shared.timeout }
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.shared.timeout
    }

    /// Runs `fut` under the pool's timeout, mapping errors onto [`Error`].
    pub async fn timed<T, E, F>(&self, fut: F) -> Result<T, Error>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<Error>,
    {
        with_timeout(self.shared.timeout, fut).await
    }

    /// Number of slots the pool keeps.
    pub fn size(&self) -> usize {
        self.shared.slots.len()
    }

    /// Number of slots whose connection is currently up.
    pub fn live_connections(&self) -> usize {
        self.shared
            .slots
            .iter()
            .filter(|slot| slot.borrow().as_ref().is_some_and(|conn| !conn.is_closed()))
            .count()
    }

    /// Waits until at least one connection is up, for at most `within`;
    /// returns [`ErrorKind::Unavailable`] if none came up. Meant for startup
    /// (schema checks before serving), not for the request path.
    pub async fn ready(&self, within: Duration) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            // Registered before checking, so a slot coming up in between
            // still wakes us.
            let up = self.shared.up.notified();
            if self.live_connections() > 0 {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, up).await.is_err() {
                return Err(Error::unavailable());
            }
        }
    }

    /// Makes slots that are backing off try to connect now, e.g. after the
    /// application created tables its statements need.
    pub fn retry_now(&self) {
        self.shared.wake.notify_waiters();
    }

    /// [`PgConn::query_one`] on a connection from [`PgPool::get`].
    pub async fn query_one(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Row, Error> {
        self.get()?.query_one(stmt, params).await
    }

    /// [`PgConn::query_opt`] on a connection from [`PgPool::get`].
    pub async fn query_opt(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Option<Row>, Error> {
        self.get()?.query_opt(stmt, params).await
    }

    /// [`PgConn::query`] on a connection from [`PgPool::get`].
    pub async fn query(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Vec<Row>, Error> {
        self.get()?.query(stmt, params).await
    }

    /// [`PgConn::execute`] on a connection from [`PgPool::get`].
    pub async fn execute(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<u64, Error> {
        self.get()?.execute(stmt, params).await
    }

    /// Starts a transaction on a connection of its own (see the module
    /// doc): takes an idle transaction connection, or opens one (connect,
    /// authenticate, prepare the registered statements) if none is idle,
    /// and sends `BEGIN`. Waits up to the call timeout when all
    /// [`PgConfig::transaction_connections`] are in use
    /// ([`ErrorKind::Timeout`]).
    ///
    /// Finish with [`Transaction::commit`] or [`Transaction::rollback`];
    /// dropping the transaction without either rolls it back.
    pub async fn transaction(&self) -> Result<Transaction, Error> {
        let shared = &self.shared;
        if shared.connector.transaction_connections == 0 {
            return Err(Error::config("transactions are disabled: PgConfig::transaction_connections is 0"));
        }
        let permit =
            match tokio::time::timeout(shared.timeout, shared.tx_permits.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                Ok(Err(_)) => return Err(Error::unavailable().context("the pool is closing")),
                Err(_) => return Err(Error::timeout().context("every transaction connection stayed busy")),
            };
        let mut permit = Some(permit);
        loop {
            let idle =
                std::iter::from_fn(|| shared.tx_idle.borrow_mut().pop()).find(|conn| !conn.is_closed());
            let reused = idle.is_some();
            let inner = match idle {
                Some(conn) => conn,
                None => open_detached(&shared.connector).await?,
            };
            let mut tx = Transaction {
                conn: self.conn(inner),
                pool: shared.clone(),
                permit: permit.take(),
                open: true,
            };
            let begun = match tx.conn.inner.start_simple("BEGIN") {
                Ok(call) => call.await,
                Err(e) => Err(e),
            };
            match begun {
                Ok(_) => return Ok(tx),
                // An idle connection can die between transactions before
                // its driver notices (server restart, terminated backend):
                // try the next one, or a new one.
                Err(e) if reused && e.kind() == ErrorKind::Unavailable => permit = tx.permit.take(),
                Err(e) => return Err(e),
            }
        }
    }

    /// [`PgConn::batch_execute`] on a connection from [`PgPool::get`].
    pub async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.get()?.batch_execute(sql).await
    }
}

impl PgConn {
    /// The per-call timeout, which the connection's driver enforces for
    /// every call (no timer per call).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `fut` under the pool's timeout, mapping errors onto [`Error`].
    pub async fn timed<T, E, F>(&self, fut: F) -> Result<T, Error>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<Error>,
    {
        with_timeout(self.timeout, fut).await
    }

    /// Whether this connection has been lost (calls on it fail with
    /// [`ErrorKind::Unavailable`]; get another from the pool).
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    async fn run(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<wire::Outcome, Error> {
        match stmt.to_statement() {
            Statement::Registered(id) => self.inner.start(id.0, params)?.await,
            Statement::Sql(sql) => {
                let prepared = match self.inner.cached(sql) {
                    Some(prepared) => prepared,
                    None => self.prepare(sql).await?,
                };
                self.inner.start_prepared(&prepared, params, || format!("statement {sql:?}"))?.await
            }
        }
    }

    /// Prepares `sql` on this connection (one round trip) and caches it.
    async fn prepare(&self, sql: &str) -> Result<Rc<wire::Prepared>, Error> {
        let (name, call) = self.inner.start_prepare(sql)?;
        let outcome = call.await.map_err(|e| e.context(format_args!("preparing {sql:?}")))?;
        let (params, columns) = outcome
            .into_description()
            .ok_or_else(|| Error::query(format!("preparing {sql:?}: no description")))?;
        // SQL text runs like a registered write: in an implicit transaction
        // of its own, answered after the commit (see the module doc).
        Ok(self.inner.insert_cached(sql, wire::Prepared::new(name, params, columns, true)))
    }

    /// Number of statements prepared on first use ([`Statement::Sql`]) that
    /// this connection currently holds (at most 256; a new connection
    /// starts with none).
    pub fn cached_statements(&self) -> usize {
        self.inner.cached_len()
    }

    /// Runs a statement expected to return exactly one row.
    pub async fn query_one(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Row, Error> {
        let outcome = self.run(stmt, params).await?;
        match (outcome.first, outcome.rest.len()) {
            (Some(row), 0) => Ok(row),
            (None, _) => Err(Error::query("query returned no row, expected one")),
            (Some(_), more) => Err(Error::query(format!("query returned {} rows, expected one", more + 1))),
        }
    }

    /// Runs a statement returning zero or one row.
    pub async fn query_opt(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Option<Row>, Error> {
        let outcome = self.run(stmt, params).await?;
        match outcome.rest.len() {
            0 => Ok(outcome.first),
            more => Err(Error::query(format!("query returned {} rows, expected at most one", more + 1))),
        }
    }

    /// Runs a statement and collects all rows.
    pub async fn query(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Vec<Row>, Error> {
        Ok(self.run(stmt, params).await?.into_rows())
    }

    /// Runs a statement and returns the number of rows affected. For a
    /// statement registered with [`PgConfig::write_statement`], and for SQL
    /// text, this returns after the write committed (outside a
    /// [`Transaction`]).
    pub async fn execute(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<u64, Error> {
        Ok(self.run(stmt, params).await?.affected)
    }

    /// Runs a script of `;`-separated statements (simple protocol, no
    /// parameters). A script without explicit `BEGIN`/`COMMIT` runs as one
    /// implicit transaction, which keeps it atomic on a shared connection.
    pub async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.inner.start_simple(sql)?.await.map(drop)
    }

    /// Runs a script like [`PgConn::batch_execute`] and returns the rows
    /// of its statements as text, for administrative queries (counts,
    /// settings) that are not worth registering.
    pub async fn simple_query(&self, sql: &str) -> Result<TextRows, Error> {
        Ok(self.inner.start_simple(sql)?.await?.into_text())
    }
}

/// What the query methods run: a statement registered with the pool's
/// [`PgConfig`] (prepared on every connection when it connects), or SQL
/// text, prepared on a connection the first time that connection sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statement<'a> {
    /// A statement registered with [`PgConfig::statement`] or
    /// [`PgConfig::write_statement`].
    Registered(StatementId),
    /// SQL text with `$1`, `$2`, ... for parameters; see the module doc
    /// for what first use costs.
    Sql(&'a str),
}

/// Anything the query methods accept as a statement: a [`StatementId`] or
/// SQL text (`&str`, `String`).
pub trait ToStatement {
    /// The statement to run.
    fn to_statement(&self) -> Statement<'_>;
}

impl ToStatement for StatementId {
    fn to_statement(&self) -> Statement<'_> {
        Statement::Registered(*self)
    }
}

impl ToStatement for str {
    fn to_statement(&self) -> Statement<'_> {
        Statement::Sql(self)
    }
}

impl ToStatement for String {
    fn to_statement(&self) -> Statement<'_> {
        Statement::Sql(self)
    }
}

impl ToStatement for Statement<'_> {
    fn to_statement(&self) -> Statement<'_> {
        *self
    }
}

impl<T: ToStatement + ?Sized> ToStatement for &T {
    fn to_statement(&self) -> Statement<'_> {
        (**self).to_statement()
    }
}

/// A transaction on a connection of its own, from [`PgPool::transaction`].
///
/// Its queries run inside `BEGIN` ... `COMMIT` and see its own uncommitted
/// writes; other requests keep using the pool's shared connections and
/// don't see them until [`Transaction::commit`]. After an error the server
/// fails every further statement with SQLSTATE `25P02` (in failed SQL
/// transaction) until [`Transaction::rollback`]; committing a failed
/// transaction returns that error and rolls back. Dropping the transaction
/// without committing rolls it back: the `ROLLBACK` is queued on its
/// connection, ahead of whatever the connection's next transaction sends.
pub struct Transaction {
    conn: PgConn,
    pool: Rc<Shared>,
    /// Held for the transaction's life; `None` only while
    /// [`PgPool::transaction`] hands it to another connection.
    permit: Option<OwnedSemaphorePermit>,
    /// `BEGIN` was (or may have been) sent and neither `COMMIT` nor
    /// `ROLLBACK` has been answered.
    open: bool,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction").field("conn", &self.conn).field("open", &self.open).finish()
    }
}

impl Transaction {
    /// [`PgConn::query_one`] inside the transaction.
    pub async fn query_one(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Row, Error> {
        self.conn.query_one(stmt, params).await
    }

    /// [`PgConn::query_opt`] inside the transaction.
    pub async fn query_opt(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Option<Row>, Error> {
        self.conn.query_opt(stmt, params).await
    }

    /// [`PgConn::query`] inside the transaction.
    pub async fn query(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<Vec<Row>, Error> {
        self.conn.query(stmt, params).await
    }

    /// [`PgConn::execute`] inside the transaction; the rows it changed are
    /// visible to others only after [`Transaction::commit`].
    pub async fn execute(&self, stmt: impl ToStatement, params: &Params<'_>) -> Result<u64, Error> {
        self.conn.execute(stmt, params).await
    }

    /// [`PgConn::batch_execute`] inside the transaction (a script here does
    /// not get an implicit transaction of its own).
    pub async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.conn.batch_execute(sql).await
    }

    /// [`PgConn::simple_query`] inside the transaction.
    pub async fn simple_query(&self, sql: &str) -> Result<TextRows, Error> {
        self.conn.simple_query(sql).await
    }

    /// Commits. If a statement of the transaction failed, the server rolls
    /// back instead, and this returns [`ErrorKind::Query`] with SQLSTATE
    /// `25P02`; a failure of the commit itself (a deferred constraint, a
    /// serialization failure) is returned as the server reports it.
    pub async fn commit(mut self) -> Result<(), Error> {
        let outcome = self.conn.inner.start_simple("COMMIT")?.await?;
        self.open = false;
        if outcome.tag() == "ROLLBACK" {
            return Err(Error::query("the transaction had failed, so COMMIT rolled it back")
                .with_code(SqlState::IN_FAILED_SQL_TRANSACTION));
        }
        Ok(())
    }

    /// Rolls back, discarding the transaction's writes.
    pub async fn rollback(mut self) -> Result<(), Error> {
        self.conn.inner.start_simple("ROLLBACK")?.await?;
        self.open = false;
        Ok(())
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if self.open {
            // Queued, not awaited: the connection sends it before anything
            // its next user queues, and the driver discards the answer.
            // Should BEGIN never have run, the server only warns.
            drop(self.conn.inner.start_simple("ROLLBACK"));
        }
        if !self.conn.is_closed() {
            self.pool.tx_idle.borrow_mut().push(self.conn.inner.clone());
        }
    }
}

/// Opens a connection outside the slots (for a transaction), with its
/// driver running in a task of its own that ends when the connection is
/// dropped or lost.
async fn open_detached(connector: &Connector) -> Result<Rc<wire::Connection>, Error> {
    let (conn, driver) = match tokio::time::timeout(connector.connect_timeout, open(connector)).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(Error::timeout()
                .context(format_args!("no connection within {:?}", connector.connect_timeout)))
        }
    };
    tokio::task::spawn_local(async move {
        if let Err(e) = driver.await {
            tracing::debug!(error = %e, "PostgreSQL transaction connection lost");
        }
    });
    Ok(conn)
}

/// Keeps slot `index` connected for as long as the pool exists.
async fn run_slot(index: usize, connector: Rc<Connector>, pool: Weak<Shared>, wake: Rc<Notify>) {
    let mut backoff = connector.backoff_min;
    let mut failures: u32 = 0;
    loop {
        if pool.strong_count() == 0 {
            return;
        }
        let attempt = tokio::time::timeout(connector.connect_timeout, open(&connector)).await;
        let failure = match attempt {
            Ok(Ok((conn, driver))) => {
                let Some(shared) = pool.upgrade() else { return };
                *shared.slots[index].borrow_mut() = Some(conn);
                shared.ever_up.set(true);
                shared.up.notify_waiters();
                // Only the slot may keep the pool alive; the task must not.
                drop(shared);
                if failures > 0 {
                    tracing::info!(slot = index, "PostgreSQL connection restored");
                }
                failures = 0;
                let since = Instant::now();
                let outcome = driver.await;
                let Some(shared) = pool.upgrade() else { return };
                *shared.slots[index].borrow_mut() = None;
                drop(shared);
                match &outcome {
                    Ok(()) => tracing::warn!(slot = index, "PostgreSQL connection closed"),
                    Err(e) => tracing::warn!(slot = index, error = %e, "PostgreSQL connection lost"),
                }
                if since.elapsed() >= HEALTHY_UPTIME {
                    backoff = connector.backoff_min;
                    continue;
                }
                // A connection that dies right after connecting is a failure
                // too; back off instead of hammering the server.
                match outcome {
                    Ok(()) => Error::unavailable().context("connection dropped right after connecting"),
                    Err(e) => e.context("connection dropped right after connecting"),
                }
            }
            Ok(Err(e)) => e,
            Err(_) => {
                Error::timeout().context(format_args!("no connection within {:?}", connector.connect_timeout))
            }
        };
        failures += 1;
        // The first failure is news; repeats while the server stays down
        // are not, so they are logged quietly.
        if failures == 1 {
            tracing::warn!(slot = index, error = %failure, "PostgreSQL connect failed; retrying with backoff");
        } else {
            tracing::debug!(slot = index, error = %failure, failures, "PostgreSQL connect failed");
        }
        let delay = jitter(backoff);
        backoff = (backoff * 2).min(connector.backoff_max);
        let woken = wake.notified();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = woken => {}
        }
    }
}

/// Connects and prepares every statement; the returned driver must be
/// polled for the connection to work and completes when it closes.
async fn open(connector: &Connector) -> Result<(Rc<wire::Connection>, wire::Driver), Error> {
    let (conn, driver) = wire::connect(
        &connector.params,
        &connector.statements,
        connector.timeout,
        connector.batches_in_flight,
    )
    .await?;
    Ok((Rc::new(conn), driver))
}

/// Scales `d` by a random factor in [0.5, 1.0) so the slots of many workers
/// don't reconnect in lock-step after an outage.
fn jitter(d: Duration) -> Duration {
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    let factor = 0.5 + (random % 1000) as f64 / 2000.0;
    d.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..100 {
            let d = jitter(Duration::from_millis(100));
            assert!(d >= Duration::from_millis(50) && d < Duration::from_millis(100));
        }
    }

    #[test]
    fn statement_ids_follow_registration_order() {
        let mut config = PgConfig::new("postgres://u:p@127.0.0.1:1/db");
        let a = config.statement("SELECT 1");
        let b = config.statement("SELECT 2");
        assert_eq!((a.index(), b.index()), (0, 1));
        let w = config.write_statement("UPDATE t SET x = 1");
        assert_eq!(w.index(), 2);
        let sql: Vec<_> = config.statements.iter().map(|s| (s.sql.as_str(), s.write)).collect();
        assert_eq!(sql, [("SELECT 1", false), ("SELECT 2", false), ("UPDATE t SET x = 1", true)]);
    }

    #[tokio::test]
    async fn bad_config_is_rejected() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let zero = PgConfig { connections: 0, ..PgConfig::new("postgres://u:p@127.0.0.1:1/db") };
                assert_eq!(PgPool::new(zero).err().map(|e| e.kind()), Some(ErrorKind::Config));
                let garbage = PgConfig::new("postgres://u:p@127.0.0.1:notaport/db");
                assert_eq!(PgPool::new(garbage).err().map(|e| e.kind()), Some(ErrorKind::Config));
            })
            .await;
    }

    #[tokio::test]
    async fn sslmodes_that_demand_tls_are_refused_never_downgraded() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                for mode in ["require", "verify-ca", "verify-full"] {
                    for url in [
                        format!("postgres://u:p@127.0.0.1:1/db?sslmode={mode}"),
                        format!("postgres://u:p@127.0.0.1:1/db?application_name=x&sslmode={mode}"),
                        format!("host=127.0.0.1 port=1 user=u sslmode={mode}"),
                        format!("host=127.0.0.1 port=1 user=u sslmode = '{mode}'"),
                    ] {
                        let err = PgPool::new(PgConfig::new(url.as_str())).expect_err(&url);
                        assert_eq!(err.kind(), ErrorKind::Config, "{url}: {err}");
                        let want = format!("sslmode={mode} is not supported");
                        assert!(err.message().starts_with(&want), "{url}: {err}");
                    }
                }
                // The last sslmode wins, as in libpq: a later require is
                // not hidden behind an earlier disable.
                let err = PgPool::new(PgConfig::new(
                    "postgres://u:p@127.0.0.1:1/db?sslmode=disable&sslmode=require",
                ))
                .expect_err("require wins");
                assert_eq!(err.kind(), ErrorKind::Config, "{err}");
                let err = PgPool::new(PgConfig::new("postgres://u:p@127.0.0.1:1/db?sslmode=bogus"))
                    .expect_err("unknown mode");
                assert_eq!(err.kind(), ErrorKind::Config, "{err}");
                // Modes that allow plaintext connect in plaintext.
                for mode in ["disable", "allow", "prefer"] {
                    for url in [
                        format!("postgres://u:p@127.0.0.1:1/db?sslmode={mode}"),
                        format!("host=127.0.0.1 port=1 user=u sslmode={mode}"),
                    ] {
                        assert!(PgPool::new(PgConfig::new(url.as_str())).is_ok(), "{url}");
                    }
                }
            })
            .await;
    }
}
