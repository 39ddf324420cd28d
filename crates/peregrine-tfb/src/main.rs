//! `peregrine-tfb`: the TechEmpower Framework Benchmarks and HttpArena test
//! application, written only against peregrine's public API.

mod arena;
mod crud;
mod dataset;
mod grpc;
mod item_cache;
mod redis_cache;
mod store;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::Parser;
use peregrine::cache::LocalCache;
use peregrine::fs::ServeDir;
use peregrine::middleware::compression;
use peregrine::tls::Tls;
use peregrine::ws::{Message as WsMessage, WebSocketConfig, WebSocketUpgrade};
use peregrine::ResponseWriter;
use peregrine::{
    Body, Config, Content, Error, EventLoop, FromRequest, Html, IntoResponse, Json, Listener, Path, Query,
    Request, Router, Server, State, StatusCode,
};
use sailfish::TemplateSimple;
use serde::{Deserialize, Serialize};
use store::{Fortune, Store, StoreConfig, World};

/// mimalloc instead of glibc's malloc. The database handlers allocate per
/// row (PostgreSQL rows, fortune messages, the rendered page), and there
/// glibc's allocator was 18% of `/fortunes`' user instructions. A/B on this
/// 2-core VM, one worker on CPU 0, wrk on CPU 1, alternating rounds:
/// callgrind user instructions per request, fortunes 29,025 -> 25,429, db
/// 8,844 -> 8,473, queries=20 88,735 -> 86,614, plaintext level. Requests
/// per server CPU-second, 3 rounds each: with mimalloc's defaults fortunes
/// +10% (+8% requests/s), the other tests level; as configured here
/// fortunes +5% to +10% and db +4% over two runs, json within the runs'
/// spread. Memory: see [`keep_allocator_memory_lean`]. The library
/// itself leaves the choice of allocator to the application.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Keeps mimalloc's memory in line with glibc's: its arenas off
/// transparent huge pages, and what a burst freed handed back within a
/// second. mimalloc purges freed memory only when some thread next calls
/// into it, so after a burst an idle server kept it all: 1,024 idle
/// WebSocket connections, then 64 of them echo 1 MiB each, left RSS at 134
/// MiB 3 s later (glibc with the library's trim: 17-20 MiB), and it started
/// at 40 MiB idle, its arena faulted in 2 MiB pages. Purging at once
/// (`purge_delay` 0) fixed that but cost json 14% and db 7% of their
/// requests per CPU-second, so a thread of its own collects once a second
/// instead (purging is program-wide). With both: 25 MiB idle (glibc 12),
/// 8.1 KiB per idle connection (glibc 7.5), 37 MiB 3 s after the burst.
fn keep_allocator_memory_lean() {
    // mimalloc reserved its first arena before `main`, with
    // `MADV_HUGEPAGE`, so its `allow_thp` option comes too late: this is
    // what that option does. It only stops huge pages for this process,
    // as glibc's allocator never asks for them.
    // SAFETY: prctl with integer arguments only; it changes no memory.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    let purge = std::thread::Builder::new().name("mimalloc-purge".into()).spawn(|| loop {
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: mi_collect may be called from any thread at any time;
        // it frees nothing in use.
        unsafe { libmimalloc_sys::mi_collect(false) };
    });
    if let Err(e) = purge {
        tracing::warn!("no thread to hand freed memory back once a second: {e}");
    }
}

/// `--event-loop`'s values, one for each [`EventLoop`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum EventLoopArg {
    Auto,
    Epoll,
    IoUring,
}

impl From<EventLoopArg> for EventLoop {
    fn from(arg: EventLoopArg) -> EventLoop {
        match arg {
            EventLoopArg::Auto => EventLoop::Auto,
            EventLoopArg::Epoll => EventLoop::Epoll,
            EventLoopArg::IoUring => EventLoop::IoUring,
        }
    }
}

/// Serves the TechEmpower test types and the HttpArena profiles.
#[derive(Parser, Debug)]
#[command(name = "peregrine-tfb", version, about, long_about = None, after_help = AFTER_HELP)]
struct Cli {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080")]
    addr: SocketAddr,
    /// Worker threads (default: the CPUs this process may run on).
    #[arg(long)]
    workers: Option<usize>,
    /// Pin each worker thread to its own CPU.
    #[arg(long)]
    pin: bool,
    /// Event loop of cleartext connections. `auto` serves them through an
    /// io_uring per worker (each loop turn's receives and sends in one
    /// system call) where the kernel allows it, and through epoll
    /// readiness where it does not (before Linux 6.12, or under a seccomp
    /// filter such as Docker's default); `io-uring` does the same but
    /// warns when it falls back; `epoll` never tries io_uring. io_uring
    /// measured 1.03x to 1.28x epoll's requests per CPU-second on small
    /// requests and many connections, 0.92x to 0.96x on static files and
    /// uploads. TLS connections use epoll either way.
    #[arg(long, value_enum, value_name = "LOOP", default_value_t = EventLoopArg::Auto)]
    event_loop: EventLoopArg,
    /// The same as `--event-loop io-uring`.
    #[arg(long, conflicts_with = "event_loop")]
    io_uring: bool,
    /// Directory of the embedded SQLite database, used when DATABASE_URL is
    /// unset. Created and seeded on first start.
    #[arg(long, default_value = "peregrine-data")]
    data_dir: PathBuf,
    /// Open connections allowed per worker; beyond it new connections get
    /// `503` and are closed. Lowered automatically to fit the open-file
    /// limit.
    #[arg(long, value_name = "N", default_value_t = Config::default().max_connections_per_worker)]
    max_connections: usize,
    /// Seconds a client may take to send a request's headers before it gets
    /// `408` and is disconnected.
    #[arg(long, value_name = "SECS", default_value_t = Config::default().header_timeout.as_secs())]
    header_timeout: u64,
    /// Seconds an idle keep-alive connection is kept open.
    #[arg(long, value_name = "SECS", default_value_t = Config::default().idle_timeout.as_secs())]
    idle_timeout: u64,
    /// Seconds a WebSocket on /ws may go without a whole data message from
    /// its client before it is closed with 1001
    /// (`WebSocketConfig::idle_timeout`; default: the library's, none). A
    /// client trickling a frame is cut sooner, by the minimum request-body
    /// rate (close 1008).
    #[arg(long, value_name = "SECS")]
    ws_idle_timeout: Option<u64>,
    /// Directory served under /static/ (HttpArena's 20 files and their
    /// .br/.gz siblings ship in the repository), read from disk per request.
    #[arg(long, value_name = "DIR", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/static"))]
    static_dir: PathBuf,
    /// Load --static-dir into memory at start instead (HttpArena's "tuned"
    /// rule; the default is its "production" one).
    #[arg(long)]
    static_in_memory: bool,
    /// TLS certificate chain (PEM). With --tls-key, also serves TLS on
    /// --tls-port and --tls-h2-port (HttpArena's layout). Reloaded when
    /// the file changes or on SIGHUP.
    #[arg(long, env = "TLS_CERT", value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, env = "TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Port for TLS with HTTP/1.1 only (ALPN `http/1.1`), on --addr's IP.
    #[arg(long, value_name = "PORT", default_value_t = 8081)]
    tls_port: u16,
    /// Also serve cleartext HTTP/2 alone (h2c with prior knowledge) on this
    /// port, on --addr's IP (HttpArena's baseline-h2c and json-h2c use
    /// 8082, the default when a certificate opens HttpArena's layout).
    /// --addr takes h2c too, beside HTTP/1.1.
    #[arg(long, value_name = "PORT")]
    h2c_port: Option<u16>,
    /// Port for TLS with HTTP/2 and HTTP/1.1 (ALPN `h2`, `http/1.1`), on
    /// --addr's IP; the same port on UDP serves HTTP/3 (QUIC, ALPN `h3`),
    /// which the TLS ports advertise with Alt-Svc.
    #[arg(long, value_name = "PORT", default_value_t = 8443)]
    tls_h2_port: u16,
    /// Do not serve HTTP/3 on UDP --tls-h2-port.
    #[arg(long)]
    no_http3: bool,
}

impl Cli {
    /// The event loop asked for: `--io-uring` is the old spelling of
    /// `--event-loop io-uring` (clap refuses the two together).
    fn event_loop(&self) -> EventLoop {
        if self.io_uring {
            EventLoop::IoUring
        } else {
            self.event_loop.into()
        }
    }
}

const AFTER_HELP: &str = "\
Environment:
  DATABASE_URL       postgres://USER:PASS@HOST:PORT/DB selects PostgreSQL;
                     sqlite://PATH selects a SQLite file; unset: embedded
                     SQLite in --data-dir. Tables are created and seeded if
                     missing.
  DATABASE_MAX_CONN  PostgreSQL connections across all workers (default:
                     17 per worker: two pipelined connections for reads,
                     the rest for the commits of /updates).
  REDIS_URL          redis://HOST:PORT[/DB]: the /crud/items cache lives in
                     that Redis, shared by every instance using it; unset:
                     one in-process cache shared by the workers. Redis
                     being down never fails a request (the database
                     answers).
  TLS_CERT, TLS_KEY  the same as --tls-cert and --tls-key.
  RUST_LOG           log filter (default: info).

Endpoints: /plaintext /json /db /queries?queries=N /fortunes
/updates?queries=N /cached-queries?count=N /baseline11 /baseline2 /pipeline
/json/{count}?m=M /upload /static/{file} /async-db?min=&max=&limit=
/crud/items[?category=&page=&limit=] /crud/items/{id}

Listeners: --addr (cleartext HTTP/1.1, and HTTP/2 for clients that open
with its preface: h2c with prior knowledge); --h2c-port (h2c only); with a
certificate, HttpArena's layout: TLS HTTP/1.1 on --tls-port (8081), h2c
on --h2c-port (8082), TLS h2 + HTTP/1.1 on --tls-h2-port (8443) and
HTTP/3 on UDP --tls-h2-port (8443; off with --no-http3). gRPC
(benchmark.BenchmarkService, proto/benchmark.proto) answers over HTTP/2 on
every port that speaks it.

Stopping: SIGTERM or SIGINT stops accepting and lets requests in flight
finish (up to 4.5 s), then exits 0; a second signal exits at once (status
130 for SIGINT, 143 for SIGTERM).";

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// Per-worker state: everything is `Rc`, cloning it is a few increments.
#[derive(Clone)]
struct App {
    dataset: Rc<Vec<dataset::Item>>,
    store: Store,
    cache: Rc<LocalCache<i32, World>>,
    /// crud's item cache, shared across workers (and processes, on Redis).
    items: item_cache::ItemCache,
}

/// Rows the per-worker World cache holds (the whole table fits).
const CACHE_CAPACITY: usize = 10_000;
/// How long a cached row is served before it is read again.
const CACHE_TTL: Duration = Duration::from_secs(60);

/// The TFB parameter rule: missing, empty or not an integer means 1; below
/// 1 means 1; above 500 means 500. Never an error.
fn clamp_count(value: Option<&str>) -> usize {
    match value.map(str::parse::<i64>) {
        Some(Ok(n)) => n.clamp(1, 500) as usize,
        Some(Err(e)) if *e.kind() == std::num::IntErrorKind::PosOverflow => 500,
        _ => 1,
    }
}

/// `?queries=N` by the TFB parameter rule.
struct Queries(usize);

impl<S> FromRequest<S> for Queries {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        Ok(Queries(clamp_count(req.query("queries").as_deref())))
    }
}

/// `?count=N` by the TFB parameter rule.
struct CacheCount(usize);

impl<S> FromRequest<S> for CacheCount {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        Ok(CacheCount(clamp_count(req.query("count").as_deref())))
    }
}

#[derive(TemplateSimple)]
#[template(path = "fortunes.stpl")]
struct FortunesPage<'a> {
    fortunes: &'a [Fortune],
}

async fn db(State(app): State<App>) -> Result<Json<World>, Error> {
    let id = app.store.random_id();
    Ok(Json(app.store.world(id).await?))
}

async fn queries(State(app): State<App>, Queries(n): Queries) -> Result<Json<Vec<World>>, Error> {
    let ids: Vec<i32> = (0..n).map(|_| app.store.random_id()).collect();
    Ok(Json(app.store.worlds(&ids).await?))
}

async fn updates(State(app): State<App>, Queries(n): Queries) -> Result<Json<Vec<World>>, Error> {
    let ids: Vec<i32> = (0..n).map(|_| app.store.random_id()).collect();
    Ok(Json(app.store.update_worlds(&ids).await?))
}

async fn fortunes_handler(State(app): State<App>) -> Result<Html<String>, Error> {
    let mut fortunes = app.store.fortunes().await?;
    fortunes.push(Fortune { id: 0, message: "Additional fortune added at request time.".into() });
    fortunes.sort_unstable_by(|a, b| by_message(&a.message, &b.message));
    let page = FortunesPage { fortunes: &fortunes }
        .render_once()
        .map_err(|e| Error::internal(format!("template failed: {e}")))?;
    Ok(Html(page))
}

/// The order of two messages (byte order, as `str`'s `Ord`), with their
/// first eight bytes compared as one big-endian integer before anything
/// else: most messages differ there, and sorting `/fortunes`' 13 rows by
/// `str::cmp` alone took about 1,500 instructions a request, most of them
/// in `memcmp` calls.
fn by_message(a: &str, b: &str) -> std::cmp::Ordering {
    fn prefix(s: &str) -> u64 {
        if let Some(word) = s.as_bytes().first_chunk::<8>() {
            return u64::from_be_bytes(*word);
        }
        let mut word = [0u8; 8];
        for (w, b) in word.iter_mut().zip(s.bytes()) {
            *w = b;
        }
        u64::from_be_bytes(word)
    }
    // Equal prefixes (or one a zero-padded prefix of the other) fall
    // through to the full comparison, so the order is exactly `str`'s.
    prefix(a).cmp(&prefix(b)).then_with(|| a.cmp(b))
}

/// Serves rows from the worker's cache, reading the misses from the
/// database (pipelined, one statement per distinct id) and caching them.
async fn cached_queries(
    State(app): State<App>,
    CacheCount(n): CacheCount,
) -> Result<Json<Vec<World>>, Error> {
    let now = Instant::now();
    let ids: Vec<i32> = (0..n).map(|_| app.store.random_id()).collect();
    let mut rows: Vec<Option<World>> = ids.iter().map(|id| app.cache.get_at(id, now)).collect();
    let mut missing: Vec<i32> =
        ids.iter().zip(&rows).filter(|(_, row)| row.is_none()).map(|(id, _)| *id).collect();
    if !missing.is_empty() {
        missing.sort_unstable();
        missing.dedup();
        let loaded = app.store.worlds(&missing).await?;
        for world in &loaded {
            app.cache.insert(world.id, *world);
        }
        for (row, id) in rows.iter_mut().zip(&ids) {
            if row.is_none() {
                *row = missing.binary_search(id).ok().and_then(|i| loaded.get(i)).copied();
            }
        }
    }
    rows.into_iter()
        .map(|row| row.ok_or_else(|| Error::internal("cache fill returned fewer rows than asked")))
        .collect::<Result<Vec<_>, _>>()
        .map(Json)
}

/// A plain-text integer, formatted without allocating.
struct Number(i64);

impl IntoResponse for Number {
    fn into_response(self) -> peregrine::Response {
        peregrine::Response::with_body("text/plain", self.0.to_string().into_bytes())
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        let mut digits = itoa::Buffer::new();
        w.write(StatusCode::OK, "text/plain", [], digits.format(self.0).as_bytes());
    }
}

/// `/baseline11` and `/baseline2`: the sum of the integer query parameters, plus the integer
/// body of a POST.
fn baseline(req: &Request<'_>) -> Result<Number, Error> {
    let mut sum: i64 = 0;
    for (_, value) in req.query_pairs() {
        if let Ok(n) = value.parse::<i64>() {
            sum = sum.checked_add(n).ok_or_else(|| Error::bad_request("sum overflows"))?;
        }
    }
    let body = req.body();
    if !body.is_empty() {
        let text = std::str::from_utf8(body).map_err(|_| Error::bad_request("body is not an integer"))?;
        let n: i64 = text.trim().parse().map_err(|_| Error::bad_request("body is not an integer"))?;
        sum = sum.checked_add(n).ok_or_else(|| Error::bad_request("sum overflows"))?;
    }
    Ok(Number(sum))
}

#[derive(Deserialize)]
struct Multiplier {
    m: Option<i64>,
}

/// `/json/{count}?m=M`: the dataset's first `count` items, processed.
fn json_count(
    Path(count): Path<usize>,
    Query(q): Query<Multiplier>,
    peregrine::State(app): peregrine::State<App>,
) -> Result<Json<dataset::Processed>, Error> {
    if count == 0 {
        return Err(Error::bad_request("count must be at least 1"));
    }
    Ok(Json(dataset::Processed { items: app.dataset, count, m: q.m.unwrap_or(1) }))
}

/// HttpArena's echo-ws: every text and binary message back, in order.
/// `feed` queues the echo; `recv` writes what is queued before it waits
/// for more input, so a burst of messages is answered with one write.
/// `idle` is `--ws-idle-timeout`.
fn echo_ws(ws: WebSocketUpgrade, idle: Option<Duration>) -> peregrine::Response {
    let ws = match idle {
        Some(idle) => ws.config(WebSocketConfig { idle_timeout: Some(idle), ..WebSocketConfig::default() }),
        None => ws,
    };
    ws.on_upgrade(|mut socket| async move {
        while let Some(Ok(message)) = socket.recv().await {
            if matches!(message, WsMessage::Text(_) | WsMessage::Binary(_))
                && socket.feed(message).await.is_err()
            {
                break;
            }
        }
    })
}

fn build_router(
    dataset: Rc<Vec<dataset::Item>>,
    store: Store,
    items: item_cache::ItemCache,
    files: ServeDir,
    ws_idle: Option<Duration>,
) -> Router<App> {
    let cache = Rc::new(LocalCache::new(CACHE_CAPACITY, CACHE_TTL));
    let app = App { dataset, store, cache, items };
    // Compressed when the client accepts it (HttpArena's json-comp), by the
    // library's middleware, per response.
    let compressed = Router::with_state(app.clone()).get("/json/{count}", json_count).layer(compression());
    let router = Router::with_state(app)
        .get("/plaintext", || Content("text/plain", "Hello, World!"))
        .get("/json", || Json(Message { message: "Hello, World!" }))
        .get("/pipeline", || Content("text/plain", "ok"))
        .get("/baseline11", baseline)
        .post("/baseline11", baseline)
        // HttpArena's HTTP/2 profiles (h2c on this port, by the preface).
        .get("/baseline2", baseline)
        .merge(compressed)
        .post_stream("/upload", |body: Body| async move { body.count().await.map(|n| Number(n as i64)) })
        .get_async("/db", db)
        .get_async("/queries", queries)
        .get_async("/updates", updates)
        .get_async("/fortunes", fortunes_handler)
        .get_async("/cached-queries", cached_queries)
        .get_async("/async-db", arena::async_db)
        .get("/static/{*file}", files)
        .get("/ws", move |ws: WebSocketUpgrade| echo_ws(ws, ws_idle));
    // gRPC (HTTP/2 only: h2c on this port, or TLS with ALPN h2).
    let router = grpc::service().add_to(router);
    crud::routes(router)
}

/// The service behind `/static/`, from `--static-dir` and `--static-in-memory`.
fn static_files(cli: &Cli) -> Result<ServeDir, String> {
    let files = ServeDir::new(&cli.static_dir);
    if !files.root().is_dir() {
        return Err(format!("--static-dir {} is not a directory", cli.static_dir.display()));
    }
    if !cli.static_in_memory {
        return Ok(files);
    }
    files.in_memory().map_err(|e| format!("cannot load --static-dir {}: {e}", cli.static_dir.display()))
}

/// HttpArena's TLS ports when a certificate is given: HTTP/1.1 only on
/// --tls-port, h2 and HTTP/1.1 on --tls-h2-port, HTTP/3 on UDP
/// --tls-h2-port (its baseline-h3 and static-h3), on --addr's IP.
fn tls_listeners(cli: &Cli) -> Result<Vec<Listener>, String> {
    let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) else { return Ok(Vec::new()) };
    let tls = Tls::from_pem_files(cert, key).map_err(|e| format!("TLS certificate: {e}"))?;
    let ip = cli.addr.ip();
    Ok(vec![
        Listener::new((ip, cli.tls_port)).tls(tls.clone()).h2(false),
        Listener::new((ip, cli.tls_h2_port)).tls(tls).http3(!cli.no_http3),
    ])
}

/// Creates and seeds the tables if they are missing, before any worker
/// serves (workers prepare statements against them).
fn prepare_database(config: &StoreConfig) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, config.ensure_schema()).map_err(|e| format!("cannot prepare the database: {e}"))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    // After the subscriber, so a failure to start its thread is logged.
    keep_allocator_memory_lean();
    let cli = Cli::parse();
    // Each worker parses its own copy (it is small); check once up front
    // so a broken build fails here with a clear message.
    if let Err(e) = dataset::load() {
        {
            eprintln!("peregrine-tfb: the embedded dataset is invalid: {e}");
            return ExitCode::FAILURE;
        }
    }
    let files = match static_files(&cli) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("peregrine-tfb: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut server = Server::new();
    if let Some(n) = cli.workers {
        server = server.workers(n);
    }
    let config = server.config_mut();
    config.pin_workers = cli.pin;
    config.event_loop = cli.event_loop();
    config.max_connections_per_worker = cli.max_connections.max(1);
    config.header_timeout = Duration::from_secs(cli.header_timeout.max(1));
    config.idle_timeout = Duration::from_secs(cli.idle_timeout.max(1));
    let workers = server.config_mut().workers;
    let store_config = match StoreConfig::from_env(&cli.data_dir, workers) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("peregrine-tfb: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(database = %store_config.describe(), "preparing database");
    if let Err(e) = prepare_database(&store_config) {
        eprintln!("peregrine-tfb: {e}");
        return ExitCode::FAILURE;
    }
    // Filling a new database freed about 10 MB on this thread, which
    // mimalloc keeps in the thread's own heap (the purge thread cannot
    // reach it) and this thread allocates little from now on: hand it
    // back. A first start with one worker went from 24.6 MiB resident
    // to 14.6 MiB (epoll 24.4 to 14.3), level with a start on an
    // existing database.
    // SAFETY: mi_collect may be called from any thread at any time; it
    // frees nothing in use.
    unsafe { libmimalloc_sys::mi_collect(true) };
    let items = match item_cache::CacheConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("peregrine-tfb: {e}");
            return ExitCode::FAILURE;
        }
    };
    let h2c_port = cli.h2c_port.or(cli.tls_cert.as_ref().map(|_| 8082));
    if let Some(port) = h2c_port {
        tracing::info!(port, "h2c listener");
        server = server.listen(Listener::new((cli.addr.ip(), port)).http1(false));
    }
    match tls_listeners(&cli) {
        Ok(listeners) => {
            for listener in listeners {
                tracing::info!(addr = %listener.addr(), h2 = listener.speaks_h2(), "TLS listener");
                server = server.listen(listener);
            }
        }
        Err(e) => {
            eprintln!("peregrine-tfb: {e}");
            return ExitCode::FAILURE;
        }
    }
    tracing::info!(addr = %cli.addr, workers, cache = %items.describe(), "peregrine-tfb listening");
    let ws_idle = cli.ws_idle_timeout.map(|secs| Duration::from_secs(secs.max(1)));
    let result = server.serve(cli.addr, move |worker| {
        let store = store_config.build(worker.index);
        let files = files.clone();
        let items = items.build();
        async move {
            // No waiting for the database here: a worker that is not yet
            // accepting leaves connections the kernel gave it stuck in its
            // backlog. Requests arriving before the pool's first connection
            // wait for it instead (`PgPool::get_or_wait`).
            let store = store?;
            Ok::<_, peregrine::db::Error>(build_router(
                Rc::new(dataset::load().unwrap_or_default()),
                store,
                items,
                files,
                ws_idle,
            ))
        }
    });
    if redis_cache::failures() > 0 {
        tracing::warn!(
            failures = redis_cache::failures(),
            "Redis commands failed while serving (answered from the database)"
        );
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("peregrine-tfb: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use peregrine::EventLoop;

    use super::{by_message, Cli};

    /// The event loop each spelling of the command line asks for: io_uring
    /// where the kernel allows it unless told otherwise.
    #[test]
    fn event_loop_flags() {
        let chosen = |args: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("peregrine-tfb").chain(args.iter().copied()))
                .map_err(|e| e.kind())?;
            Ok::<_, clap::error::ErrorKind>(cli.event_loop())
        };
        assert_eq!(chosen(&[]), Ok(EventLoop::Auto));
        assert_eq!(chosen(&["--event-loop", "epoll"]), Ok(EventLoop::Epoll));
        assert_eq!(chosen(&["--event-loop", "io-uring"]), Ok(EventLoop::IoUring));
        assert_eq!(chosen(&["--event-loop", "auto"]), Ok(EventLoop::Auto));
        assert_eq!(chosen(&["--io-uring"]), Ok(EventLoop::IoUring));
        assert_eq!(
            chosen(&["--io-uring", "--event-loop", "epoll"]),
            Err(clap::error::ErrorKind::ArgumentConflict)
        );
        assert_eq!(chosen(&["--event-loop", "kqueue"]), Err(clap::error::ErrorKind::InvalidValue));
    }

    #[test]
    fn messages_sort_exactly_as_str_orders_them() {
        let messages = [
            "fortune: No such file or directory",
            "A computer scientist is someone who fixes things that aren't broken.",
            "A computer program does what you tell it to do, not what you want it to do.",
            "<script>alert(\"This should not be displayed in a browser alert box.\");</script>",
            "フレームワークのベンチマーク",
            "Additional fortune added at request time.",
            "A",
            "A\0",
            "A\0\0\0\0\0\0\0x",
            "A computer",
            "A comput",
            "",
            "é",
        ];
        for a in messages {
            for b in messages {
                assert_eq!(by_message(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }
}
