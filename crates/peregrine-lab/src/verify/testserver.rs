//! A throwaway reference server for the verifier's own tests.
//!
//! Blocking, one thread per connection, written from SPEC.md so that a full
//! verify run against it must pass; each [`Faults`] flag plants one
//! deliberate bug so tests can assert the verifier notices it. It exists
//! only under `cfg(test)` and shares nothing with the real server.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::checks::DATASET_JSON;
use super::html::{escape, expected_fortunes, render_expected};
use http_probe::date::format_imf_fixdate;
use http_probe::parse_decimal;

/// One planted bug per flag; the default is a correct server.
#[derive(Clone, Copy, Default)]
pub struct Faults {
    pub no_date: bool,
    pub ok_for_unknown_paths: bool,
    pub no_allow: bool,
    pub raw_fortunes: bool,
    pub keep_open_after_400: bool,
    pub zero_means_zero: bool,
    pub stale_date: bool,
    pub content_length_off_by_one: bool,
    /// `/queries` with one `WHERE id = ANY($1)` statement.
    pub batch_select: bool,
    /// `/updates` answers new values without writing them.
    pub skip_update_write: bool,
}

const HEAD_LIMIT: usize = 16 * 1024;
const BODY_LIMIT: usize = 32 * 1024 * 1024;
/// Time a client gets to send a complete head (and to start one when idle).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// Starts the server on an ephemeral loopback port.
pub fn spawn(faults: Faults) -> SocketAddr {
    spawn_with(faults, None)
}

/// Starts the server; with a database, `/db`, `/queries`, `/updates` and
/// `/fortunes` read and write it the way the spec requires.
pub fn spawn_with(faults: Faults, db: Option<Arc<dyn WorldDb>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind test server");
    let addr = listener.local_addr().expect("local addr");
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let db = db.clone();
            thread::spawn(move || serve(stream, faults, db.as_deref()));
        }
    });
    addr
}

/// The database behind the reference server's database routes:
/// PostgreSQL ([`DbPool`]) or a SQLite file ([`SqliteWorld`]), so that
/// `verify --database-url` is tested against both kinds of URL.
pub trait WorldDb: Send + Sync {
    /// Every Fortune row as (id, message).
    fn fortunes(&self) -> Result<Vec<(i32, String)>, String>;
    /// (id, randomNumber) of each id, in order: one single-row statement
    /// each, or one `WHERE id = ANY($1)` statement when `batch`.
    fn worlds(&self, ids: &[i32], batch: bool) -> Result<Vec<(i32, i32)>, String>;
    /// Stores each id's new randomNumber.
    fn write(&self, fresh: &HashMap<i32, i32>) -> Result<(), String>;
}

/// A few PostgreSQL connections shared by all connection threads; each
/// call locks one for its whole duration.
pub struct DbPool {
    conns: Vec<Mutex<PgConn>>,
    next: AtomicUsize,
}

struct PgConn {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl DbPool {
    pub fn connect(dsn: &str, size: usize) -> Result<Arc<DbPool>, String> {
        let conns = (0..size)
            .map(|_| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())?;
                let client = rt.block_on(async {
                    let (client, conn) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
                        .await
                        .map_err(|e| e.to_string())?;
                    tokio::spawn(conn);
                    Ok::<_, String>(client)
                })?;
                Ok(Mutex::new(PgConn { rt, client }))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Arc::new(DbPool { conns, next: AtomicUsize::new(0) }))
    }

    /// Runs `work` on the next connection, on its runtime.
    fn with<T>(
        &self,
        work: impl AsyncFnOnce(&tokio_postgres::Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, String> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        let conn = self.conns[i].lock().unwrap_or_else(|p| p.into_inner());
        conn.rt.block_on(work(&conn.client)).map_err(|e| e.to_string())
    }
}

impl WorldDb for DbPool {
    fn fortunes(&self) -> Result<Vec<(i32, String)>, String> {
        self.with(async |c| {
            let rows = c.query("SELECT id, message FROM fortune", &[]).await?;
            Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        })
    }

    fn worlds(&self, ids: &[i32], batch: bool) -> Result<Vec<(i32, i32)>, String> {
        self.with(async |c| {
            if batch {
                let found = c.query("SELECT id, randomnumber FROM world WHERE id = ANY($1)", &[&ids]).await?;
                let map: HashMap<i32, i32> = found.iter().map(|r| (r.get(0), r.get(1))).collect();
                return Ok(ids.iter().map(|id| (*id, map.get(id).copied().unwrap_or(0))).collect());
            }
            let stmt = c.prepare("SELECT id, randomnumber FROM world WHERE id = $1").await?;
            let mut rows = Vec::with_capacity(ids.len());
            for id in ids {
                let r = c.query_one(&stmt, &[id]).await?;
                rows.push((r.get(0), r.get(1)));
            }
            Ok(rows)
        })
    }

    fn write(&self, fresh: &HashMap<i32, i32>) -> Result<(), String> {
        self.with(async |c| {
            for (id, v) in fresh {
                c.execute("UPDATE world SET randomnumber = $2 WHERE id = $1", &[id, v]).await?;
            }
            Ok(())
        })
    }
}

/// A SQLite file with TFB's World and Fortune tables, as the embedded
/// default keeps them; `verify --database-url sqlite://PATH` reads its
/// World table beside the server that writes it.
pub struct SqliteWorld {
    conn: Mutex<rusqlite::Connection>,
}

impl SqliteWorld {
    /// Creates `path` with `rows` World rows (Fortune left empty), in
    /// write-ahead-log mode as the embedded default runs it.
    pub fn create(path: &std::path::Path, rows: i32) -> rusqlite::Result<Arc<SqliteWorld>> {
        let conn = rusqlite::Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.execute_batch(
            "CREATE TABLE world (id INTEGER PRIMARY KEY, randomnumber INTEGER NOT NULL);
             CREATE TABLE fortune (id INTEGER PRIMARY KEY, message TEXT NOT NULL);",
        )?;
        {
            let mut insert = conn.prepare("INSERT INTO world (id, randomnumber) VALUES (?1, ?2)")?;
            for id in 1..=rows {
                insert.execute([id, (id * 7919) % 10_000 + 1])?;
            }
        }
        Ok(Arc::new(SqliteWorld { conn: Mutex::new(conn) }))
    }

    fn with<T>(&self, work: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<T>) -> Result<T, String> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        work(&conn).map_err(|e| e.to_string())
    }
}

impl WorldDb for SqliteWorld {
    fn fortunes(&self) -> Result<Vec<(i32, String)>, String> {
        self.with(|c| {
            let mut statement = c.prepare("SELECT id, message FROM fortune")?;
            let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
    }

    /// One statement per id, batched or not (SQLite keeps no statement
    /// counts for `verify` to check).
    fn worlds(&self, ids: &[i32], _batch: bool) -> Result<Vec<(i32, i32)>, String> {
        self.with(|c| {
            let mut statement = c.prepare_cached("SELECT id, randomnumber FROM world WHERE id = ?1")?;
            ids.iter().map(|id| statement.query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))).collect()
        })
    }

    fn write(&self, fresh: &HashMap<i32, i32>) -> Result<(), String> {
        self.with(|c| {
            let mut statement = c.prepare_cached("UPDATE world SET randomnumber = ?2 WHERE id = ?1")?;
            for (id, v) in fresh {
                statement.execute([id, v])?;
            }
            Ok(())
        })
    }
}

struct Request {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    close: bool,
    body: Vec<u8>,
    /// The client accepts gzip (json-comp's `/json/{count}` is compressed).
    gzip: bool,
}

enum Failure {
    /// Answer with this status, then close.
    Status(u16),
    /// Just hang up (timeout, peer gone).
    Hangup,
}

fn serve(mut s: TcpStream, f: Faults, db: Option<&dyn WorldDb>) {
    let _ = s.set_nodelay(true);
    // Seeded from the clock as well, so separate test runs draw different
    // ids and values (a rerun must still change the stored rows).
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let seed = SEED.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ nanos;
    let mut rng = Rng(seed | 1);
    let mut buf = Vec::new();
    loop {
        let req = match read_request(&mut s, &mut buf) {
            Ok(req) => req,
            Err(Failure::Hangup) => return,
            Err(Failure::Status(code)) => {
                let close = !(code == 400 && f.keep_open_after_400);
                let _ = write_response(&mut s, f, code, Some("text/plain"), b"bad request", &[], close);
                if close {
                    linger_close(s);
                    return;
                }
                buf.clear();
                continue;
            }
        };
        let routed = match db {
            Some(db) => route_db(&req, f, &mut rng, db),
            None => None,
        };
        let (status, ctype, body, extra) = routed.unwrap_or_else(|| route(&req, f, &mut rng));
        if write_response(&mut s, f, status, ctype, &body, &extra, req.close).is_err() || req.close {
            return;
        }
    }
}

static SEED: AtomicU64 = AtomicU64::new(0x1234_5678);

/// Half-close, then drain what the client already sent, so our close does
/// not turn into a reset that destroys the error response in flight.
fn linger_close(mut s: TcpStream) {
    let _ = s.flush();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut scratch = [0u8; 8192];
    while Instant::now() < deadline {
        match s.read(&mut scratch) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

fn fill(s: &mut TcpStream, buf: &mut Vec<u8>, deadline: Option<Instant>) -> Result<(), Failure> {
    let timeout = match deadline {
        Some(d) => d.saturating_duration_since(Instant::now()),
        None => Duration::from_secs(5),
    };
    if timeout.is_zero() {
        return Err(Failure::Hangup);
    }
    let _ = s.set_read_timeout(Some(timeout));
    let mut chunk = [0u8; 8192];
    match s.read(&mut chunk) {
        Ok(0) | Err(_) => Err(Failure::Hangup),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Request, Failure> {
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            if i + 4 > HEAD_LIMIT {
                return Err(Failure::Status(431));
            }
            break i + 4;
        }
        if buf.len() > HEAD_LIMIT {
            return Err(Failure::Status(431));
        }
        fill(s, buf, Some(deadline))?;
    };
    let head: Vec<u8> = buf.drain(..head_end).collect();
    let head = std::str::from_utf8(&head[..head_end - 4]).map_err(|_| Failure::Status(400))?;
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or("");
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts.as_slice() else {
        return Err(Failure::Status(400));
    };
    if method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !target.starts_with('/')
        || !matches!(*version, "HTTP/1.1" | "HTTP/1.0")
    {
        return Err(Failure::Status(400));
    }
    let mut headers = Vec::new();
    for l in lines {
        let (name, value) = l.split_once(':').ok_or(Failure::Status(400))?;
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(Failure::Status(400));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let get = |n: &'static str| headers.iter().filter(move |(k, _)| k == n).map(|(_, v)| v.as_str());
    if *version == "HTTP/1.1" && get("host").count() != 1 {
        return Err(Failure::Status(400));
    }
    let connection = get("connection").next().unwrap_or("").to_ascii_lowercase();
    let close = connection == "close" || (*version == "HTTP/1.0" && connection != "keep-alive");
    let te: Vec<&str> = get("transfer-encoding").collect();
    let cl: Vec<&str> = get("content-length").collect();
    let body = if !te.is_empty() {
        if !cl.is_empty() {
            return Err(Failure::Status(400));
        }
        if te.len() != 1 || !te[0].eq_ignore_ascii_case("chunked") {
            return Err(Failure::Status(501));
        }
        read_chunked(s, buf)?
    } else if cl.is_empty() {
        Vec::new()
    } else {
        let mut n = None;
        for v in &cl {
            let v = parse_decimal(v).ok_or(Failure::Status(400))?;
            if n.is_some_and(|n| n != v) {
                return Err(Failure::Status(400));
            }
            n = Some(v);
        }
        let n = n.unwrap_or(0);
        if n > BODY_LIMIT {
            return Err(Failure::Status(413));
        }
        while buf.len() < n {
            fill(s, buf, None)?;
        }
        buf.drain(..n).collect()
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    let gzip = get("accept-encoding").any(|v| v.split(',').any(|c| c.trim().eq_ignore_ascii_case("gzip")));
    Ok(Request { method: method.to_string(), path: path.to_string(), query, close, body, gzip })
}

fn read_chunked(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Vec<u8>, Failure> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(buf, b"\r\n") {
                break i;
            }
            if buf.len() > 1024 {
                return Err(Failure::Status(400));
            }
            fill(s, buf, None)?;
        };
        let line = String::from_utf8_lossy(&buf[..line_end]).to_string();
        buf.drain(..line_end + 2);
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| Failure::Status(400))?;
        if body.len() + size > BODY_LIMIT {
            return Err(Failure::Status(413));
        }
        if size == 0 {
            while find(buf, b"\r\n").is_none() {
                fill(s, buf, None)?;
            }
            // Trailers are not used by any check; expect none.
            if !buf.starts_with(b"\r\n") {
                return Err(Failure::Status(400));
            }
            buf.drain(..2);
            return Ok(body);
        }
        while buf.len() < size + 2 {
            fill(s, buf, None)?;
        }
        if &buf[size..size + 2] != b"\r\n" {
            return Err(Failure::Status(400));
        }
        body.extend(buf.drain(..size));
        buf.drain(..2);
    }
}

struct Rng(u64);

impl Rng {
    fn world_value(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % 10_000 + 1
    }
}

fn count(req: &Request, name: &str, f: Faults) -> usize {
    let v = req.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("");
    match v.parse::<i64>() {
        Ok(n) if f.zero_means_zero && n == 0 => 0,
        Ok(n) => n.clamp(1, 500) as usize,
        Err(_) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => 500,
        Err(_) => 1,
    }
}

type Routed = (u16, Option<&'static str>, Vec<u8>, Vec<(&'static str, String)>);

fn route(req: &Request, f: Faults, rng: &mut Rng) -> Routed {
    const JSON: Option<&str> = Some("application/json");
    const TEXT: Option<&str> = Some("text/plain");
    let allowed: &str = match req.path.as_str() {
        "/plaintext" | "/json" | "/db" | "/queries" | "/updates" | "/cached-queries" | "/fortunes" => "GET",
        "/baseline11" => "GET, POST",
        "/upload" => "POST",
        p if p.starts_with("/json/") => "GET",
        _ if f.ok_for_unknown_paths => return (200, TEXT, b"ok".to_vec(), vec![]),
        _ => return (404, TEXT, b"not found".to_vec(), vec![]),
    };
    if !allowed.split(", ").any(|m| m == req.method) {
        let extra = if f.no_allow { vec![] } else { vec![("Allow", allowed.to_string())] };
        return (405, TEXT, b"method not allowed".to_vec(), extra);
    }
    let row =
        |rng: &mut Rng| format!("{{\"id\":{},\"randomNumber\":{}}}", rng.world_value(), rng.world_value());
    let rows = |n: usize, rng: &mut Rng| {
        let rows: Vec<String> = (0..n).map(|_| row(rng)).collect();
        format!("[{}]", rows.join(","))
    };
    match req.path.as_str() {
        "/plaintext" => (200, TEXT, b"Hello, World!".to_vec(), vec![]),
        "/json" => (200, JSON, br#"{"message":"Hello, World!"}"#.to_vec(), vec![]),
        "/db" => (200, JSON, row(rng).into_bytes(), vec![]),
        "/queries" => (200, JSON, rows(count(req, "queries", f), rng).into_bytes(), vec![]),
        "/cached-queries" => (200, JSON, rows(count(req, "count", f), rng).into_bytes(), vec![]),
        "/updates" => {
            // One new value per distinct id, shown for every repeat.
            let n = count(req, "queries", f);
            let mut values = std::collections::HashMap::new();
            let rows: Vec<String> = (0..n)
                .map(|_| {
                    let id = rng.world_value();
                    let v = *values.entry(id).or_insert_with(|| rng.world_value());
                    format!("{{\"id\":{id},\"randomNumber\":{v}}}")
                })
                .collect();
            (200, JSON, format!("[{}]", rows.join(",")).into_bytes(), vec![])
        }
        "/fortunes" => {
            let page = if f.raw_fortunes {
                let mut s = String::from("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>");
                for (id, msg) in expected_fortunes() {
                    s.push_str(&format!("<tr><td>{id}</td><td>{msg}</td></tr>"));
                }
                s + "</table></body></html>"
            } else {
                render_expected()
            };
            (200, Some("text/html; charset=utf-8"), page.into_bytes(), vec![])
        }
        "/baseline11" => {
            let mut sum: i64 = req.query.iter().filter_map(|(_, v)| v.parse::<i64>().ok()).sum();
            if req.method == "POST" {
                sum += std::str::from_utf8(&req.body)
                    .ok()
                    .and_then(|b| b.trim().parse::<i64>().ok())
                    .unwrap_or(0);
            }
            (200, TEXT, sum.to_string().into_bytes(), vec![])
        }
        "/upload" => (200, TEXT, req.body.len().to_string().into_bytes(), vec![]),
        p => {
            let n: usize = p["/json/".len()..].parse().unwrap_or(0).clamp(1, 50);
            let m: i64 =
                req.query.iter().find(|(k, _)| k == "m").and_then(|(_, v)| v.parse().ok()).unwrap_or(1);
            let data: serde_json::Value = serde_json::from_str(DATASET_JSON).unwrap_or_default();
            let items: Vec<serde_json::Value> =
                data.as_array().map(|a| a[..n.min(a.len())].to_vec()).unwrap_or_default();
            let items: Vec<serde_json::Value> = items
                .into_iter()
                .map(|mut it| {
                    let total = it["price"].as_i64().unwrap_or(0) * it["quantity"].as_i64().unwrap_or(0) * m;
                    it["total"] = total.into();
                    it
                })
                .collect();
            let body = serde_json::json!({"items": items, "count": n}).to_string();
            if !req.gzip {
                return (200, JSON, body.into_bytes(), vec![]);
            }
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            let compressed = std::io::Write::write_all(&mut gz, body.as_bytes()).and_then(|()| gz.finish());
            match compressed {
                Ok(bytes) => (200, JSON, bytes, vec![("Content-Encoding", "gzip".to_string())]),
                Err(_) => (200, JSON, body.into_bytes(), vec![]),
            }
        }
    }
}

/// Database-backed routes; `None` for anything else (or a GET-less method).
fn route_db(req: &Request, f: Faults, rng: &mut Rng, db: &dyn WorldDb) -> Option<Routed> {
    const JSON: Option<&str> = Some("application/json");
    if req.method != "GET" {
        return None;
    }
    let n = match req.path.as_str() {
        "/db" => 1,
        "/queries" | "/updates" => count(req, "queries", f),
        "/fortunes" => 0,
        _ => return None,
    };
    let ids: Vec<i32> = (0..n).map(|_| rng.world_value() as i32).collect();
    let mut answer = || -> Result<Vec<u8>, String> {
        if req.path == "/fortunes" {
            let mut rows = db.fortunes()?;
            rows.push((0, "Additional fortune added at request time.".into()));
            rows.sort_by(|a, b| a.1.cmp(&b.1));
            let mut page = String::from("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>");
            for (id, msg) in rows {
                page.push_str(&format!("<tr><td>{id}</td><td>{}</td></tr>", escape(&msg)));
            }
            page.push_str("</table></body></html>");
            return Ok(page.into_bytes());
        }
        let mut rows = db.worlds(&ids, f.batch_select)?;
        if req.path == "/updates" {
            let mut fresh = HashMap::new();
            for row in &mut rows {
                row.1 = *fresh.entry(row.0).or_insert_with(|| rng.world_value() as i32);
            }
            if !f.skip_update_write {
                db.write(&fresh)?;
            }
        }
        let json: Vec<String> =
            rows.iter().map(|(id, v)| format!("{{\"id\":{id},\"randomNumber\":{v}}}")).collect();
        Ok(if req.path == "/db" {
            json.concat().into_bytes()
        } else {
            format!("[{}]", json.join(",")).into_bytes()
        })
    };
    let ctype = if req.path == "/fortunes" { Some("text/html; charset=utf-8") } else { JSON };
    Some(match answer() {
        Ok(body) => (200, ctype, body, vec![]),
        Err(e) => (503, JSON, format!("{{\"error\":{e:?}}}").into_bytes(), vec![]),
    })
}

fn write_response(
    s: &mut TcpStream,
    f: Faults,
    status: u16,
    ctype: Option<&str>,
    body: &[u8],
    extra: &[(&str, String)],
    close: bool,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Other",
    };
    let mut head = format!("HTTP/1.1 {status} {reason}\r\nServer: lab-test\r\n");
    if !f.no_date {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        let shown = if f.stale_date { 1_700_000_000 } else { now };
        head.push_str(&format!("Date: {}\r\n", format_imf_fixdate(shown)));
    }
    if let Some(ct) = ctype {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    let len = body.len() + usize::from(f.content_length_off_by_one);
    head.push_str(&format!("Content-Length: {len}\r\n"));
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    s.write_all(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rig::client::Target;
    use crate::verify::config::Routes;
    use crate::verify::{badinput, checks, run_checks, tfb, Ctx, Group, Reporter};

    fn ctx(addr: SocketAddr, timeout_ms: u64) -> Ctx {
        Ctx {
            target: Target::parse(&format!("http://{addr}"), Duration::from_millis(timeout_ms))
                .expect("target"),
            routes: Routes::default(),
            close_wait: Duration::from_millis(500),
            slow_timeout: HEAD_TIMEOUT * 2,
            idle_timeout: HEAD_TIMEOUT * 2,
            concurrency: 64,
        }
    }

    /// Every group but the database's and the strictness corpus (this
    /// reference server's parser is deliberately simple; the corpus runs
    /// against the real server in `scripts/e2e`).
    #[test]
    fn correct_server_passes_every_group() {
        let ctx = ctx(spawn(Faults::default()), 3000);
        let url = format!("http://{}", ctx.target.addr);
        // The reference server has no WebSocket: the battery is checked
        // against peregrine itself (scripts/e2e).
        let rep = run_checks(&ctx, &url, &|g| g != Group::Db && g != Group::Strict && g != Group::Ws, None);
        assert_eq!(rep.failed, 0, "the reference server failed checks (see output)");
        assert!(rep.passed > 60, "only {} checks ran", rep.passed);
    }

    #[test]
    fn skipped_paths_report_skip() {
        let mut c = ctx(spawn(Faults::default()), 3000);
        c.routes.fortunes.clear();
        c.routes.updates.clear();
        let mut rep = Reporter::default();
        tfb::run(&c, &mut rep, false);
        assert_eq!(rep.failed, 0);
        assert_eq!(rep.skipped, 2);
    }

    type GroupFn = fn(&Ctx, &mut Reporter);

    /// Runs a group against a server with one fault and returns the reporter.
    fn with_fault(faults: Faults, timeout_ms: u64, group: GroupFn) -> Reporter {
        let c = ctx(spawn(faults), timeout_ms);
        let mut rep = Reporter::default();
        group(&c, &mut rep);
        rep
    }

    #[test]
    fn each_planted_fault_is_caught() {
        let tfb_run: GroupFn = |c, r| tfb::run(c, r, false);
        let cases: [(&str, Faults, GroupFn); 6] = [
            ("no Date", Faults { no_date: true, ..Faults::default() }, tfb_run),
            (
                "200 for unknown paths",
                Faults { ok_for_unknown_paths: true, ..Faults::default() },
                badinput::run,
            ),
            ("405 without Allow", Faults { no_allow: true, ..Faults::default() }, badinput::run),
            ("unescaped fortunes", Faults { raw_fortunes: true, ..Faults::default() }, tfb_run),
            ("open after 400", Faults { keep_open_after_400: true, ..Faults::default() }, badinput::run),
            ("queries=0 gives 0 rows", Faults { zero_means_zero: true, ..Faults::default() }, tfb_run),
        ];
        for (what, faults, group) in cases {
            let rep = with_fault(faults, 3000, group);
            assert!(rep.failed > 0, "fault not caught: {what}");
            assert!(rep.passed > 0, "a single fault failed everything: {what}");
        }
    }

    /// End to end against PostgreSQL: `DATABASE_URL` names a database
    /// seeded like TFB's with `pg_stat_statements` loaded (scripts/test
    /// starts one with scripts/pg; the test fails rather than skip without
    /// it). It resets that database's statement statistics.
    #[test]
    fn database_checks_pass_and_catch_faults() {
        let dsn = std::env::var("DATABASE_URL")
            .ok()
            .filter(|url| url.starts_with("postgres"))
            .expect("DATABASE_URL must name the test PostgreSQL (scripts/test starts it with scripts/pg)");
        let pool = DbPool::connect(&dsn, 4).expect("test database");
        let good = ctx(spawn_with(Faults::default(), Some(pool.clone())), 5000);
        let mut rep = Reporter::default();
        crate::verify::db::run(&good, &mut rep, &dsn);
        assert_eq!(rep.failed, 0, "database checks failed against a correct server");
        assert_eq!(rep.passed, 4);

        let faults = Faults { batch_select: true, skip_update_write: true, ..Faults::default() };
        let bad = ctx(spawn_with(faults, Some(pool)), 5000);
        let mut rep = Reporter::default();
        crate::verify::db::run(&bad, &mut rep, &dsn);
        assert_eq!(rep.failed, 3, "batch select and unwritten updates must fail");
    }

    /// `--database-url sqlite://PATH`, as scripts/e2e runs it against the
    /// embedded default: the `/updates` check reads the file beside the
    /// server that writes it, passes when the answers are stored and fails
    /// when they are not; a missing file fails the connection.
    #[test]
    fn sqlite_updates_check_passes_and_catches_unwritten_updates() {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("peregrine-lab-sqlite-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let path = dir.join("world.db");
        let world = SqliteWorld::create(&path, 10_000).expect("SQLite World table");
        let url = format!("sqlite://{}", path.display());

        let good = ctx(spawn_with(Faults::default(), Some(world.clone())), 5000);
        let mut rep = Reporter::default();
        crate::verify::db::run(&good, &mut rep, &url);
        assert_eq!(
            (rep.passed, rep.failed, rep.skipped),
            (2, 0, 0),
            "/updates?queries=20 and =500 must pass"
        );

        let bad = ctx(spawn_with(Faults { skip_update_write: true, ..Faults::default() }, Some(world)), 5000);
        let mut rep = Reporter::default();
        crate::verify::db::run(&bad, &mut rep, &url);
        assert_eq!((rep.passed, rep.failed), (0, 2), "unwritten updates must fail both checks");

        let missing = format!("sqlite://{}", dir.join("absent.db").display());
        let mut rep = Reporter::default();
        crate::verify::db::run(&good, &mut rep, &missing);
        assert_eq!((rep.passed, rep.failed), (0, 1), "a missing file must fail the connection");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn wrong_content_length_and_stale_date_are_caught() {
        let c = ctx(spawn(Faults { content_length_off_by_one: true, ..Faults::default() }), 300);
        let err = c.target.get("/plaintext").and_then(|r| checks::check_plaintext(&r)).unwrap_err();
        assert!(err.contains("Content-Length"), "{err}");

        let c = ctx(spawn(Faults { stale_date: true, ..Faults::default() }), 3000);
        let mut rep = Reporter::default();
        tfb::DateProbe::start(&c).finish(&c, &mut rep);
        assert_eq!(rep.failed, 2, "neither advancing nor near the clock");
    }
}
