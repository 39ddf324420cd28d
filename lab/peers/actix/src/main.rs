//! The seven TFB test types on actix-web 4, a peer for peregrine's lab, and
//! HttpArena's HTTP/1.1 endpoints: `/baseline11`, `/pipeline`,
//! `/json/{count}` (behind actix's `Compress`), `/upload`, `/static/{file}`
//! (actix-files), `/async-db` and `/crud/items` (deadpool-postgres, a moka
//! cache).
//!
//! Usage: `peer-actix [--addr HOST:PORT] [--workers N]`. Without `--addr` it
//! listens on `0.0.0.0:$PORT` (8080 if `PORT` is unset); without `--workers`
//! it runs one worker per available CPU. `DATABASE_URL` (postgres://...)
//! enables the database tests; without it they answer 503 (async-db: an
//! empty list). `DATABASE_MAX_CONN` caps the HttpArena endpoints' pool.
//! `STATIC_DIR` is the directory served under `/static/` (default:
//! peregrine-tfb's copy of HttpArena's files, relative to the workspace
//! root the lab runs from).
//!
//! HTTP/2, for the HTTP/2 profiles (`/baseline2`, `/static/{file}`,
//! `/json/{count}`), as actix's documentation enables it: `H2C_ADDR` adds a
//! listener that speaks HTTP/1.1 and h2c with prior knowledge
//! (`bind_auto_h2c`); `TLS_ADDR` with `TLS_CERT` and `TLS_KEY` (PEM) adds a
//! rustls listener whose ALPN offers `h2` and `http/1.1` (`bind_rustls_0_23`).
//!
//! Each actix worker builds its own App, and with it (through
//! `data_factory`) its own tokio-postgres connection and cache for the TFB
//! types. The HttpArena endpoints share what actix's examples share across
//! workers: one deadpool-postgres pool, one moka cache, the parsed dataset.

mod crud;
mod items;
mod json_items;

use peer_common as tfb;

use actix_files::Files;
use actix_web::http::header::{self, ContentType, HeaderValue};
use actix_web::middleware::{Compress, DefaultHeaders};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use futures_util::StreamExt;
use serde::Serialize;
use tfb::{count_param, DbError, Message, Worker, DB_UNAVAILABLE};

type State = web::Data<Worker>;

async fn plaintext() -> HttpResponse {
    HttpResponse::Ok().content_type(ContentType::plaintext()).body("Hello, World!")
}

async fn json() -> HttpResponse {
    json_response(&Message { message: "Hello, World!" })
}

async fn db(state: State) -> HttpResponse {
    reply(state.single().await)
}

async fn queries(state: State, req: HttpRequest) -> HttpResponse {
    reply(state.queries(count_param(Some(req.query_string()), "queries")).await)
}

async fn updates(state: State, req: HttpRequest) -> HttpResponse {
    reply(state.updates(count_param(Some(req.query_string()), "queries")).await)
}

async fn cached_queries(state: State, req: HttpRequest) -> HttpResponse {
    reply(state.cached(count_param(Some(req.query_string()), "count")).await)
}

async fn fortunes(state: State) -> HttpResponse {
    match state.fortunes().await {
        Ok(html) => HttpResponse::Ok()
            .insert_header((header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")))
            .body(html),
        Err(e) => unavailable(e),
    }
}

/// `/baseline11` (HttpArena): the sum of the integer query parameters plus,
/// for a POST, the integer body. The query through actix's `web::Query`
/// extractor (serde_urlencoded), the body through `web::Bytes`, which actix
/// has already de-chunked.
async fn baseline(query: web::Query<Vec<(String, String)>>, body: web::Bytes) -> HttpResponse {
    let mut sum: i64 = 0;
    for n in query.iter().filter_map(|(_, v)| v.parse::<i64>().ok()) {
        match sum.checked_add(n) {
            Some(s) => sum = s,
            None => return HttpResponse::BadRequest().body("sum overflows"),
        }
    }
    if !body.is_empty() {
        let n = std::str::from_utf8(&body).ok().and_then(|t| t.trim().parse::<i64>().ok());
        match n.and_then(|n| sum.checked_add(n)) {
            Some(s) => sum = s,
            None => return HttpResponse::BadRequest().body("body is not an integer"),
        }
    }
    HttpResponse::Ok().content_type(ContentType::plaintext()).body(sum.to_string())
}

/// `/pipeline` (HttpArena's pipelined profile): `ok`.
async fn pipeline() -> HttpResponse {
    HttpResponse::Ok().content_type(ContentType::plaintext()).body("ok")
}

/// `/upload` (HttpArena): the number of body bytes read, counted chunk by
/// chunk from actix's `web::Payload` stream so no more than a chunk is held.
/// actix answers `Expect: 100-continue` itself before the body is read.
async fn upload(mut body: web::Payload) -> Result<HttpResponse, actix_web::Error> {
    let mut read: u64 = 0;
    while let Some(chunk) = body.next().await {
        read += chunk?.len() as u64;
    }
    Ok(HttpResponse::Ok().content_type(ContentType::plaintext()).body(read.to_string()))
}

/// Where `/static/` is served from.
const DEFAULT_STATIC_DIR: &str = "crates/peregrine-tfb/data/static";

fn json_response<T: Serialize>(value: &T) -> HttpResponse {
    match serde_json::to_vec(value) {
        Ok(body) => HttpResponse::Ok().content_type(ContentType::json()).body(body),
        Err(_) => HttpResponse::InternalServerError().finish(),
    }
}

fn reply<T: Serialize>(result: Result<T, DbError>) -> HttpResponse {
    match result {
        Ok(value) => json_response(&value),
        Err(e) => unavailable(e),
    }
}

fn unavailable(e: DbError) -> HttpResponse {
    eprintln!("{e}");
    HttpResponse::ServiceUnavailable().content_type(ContentType::json()).body(DB_UNAVAILABLE)
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let args = tfb::parse_args("peer-actix")
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let url = std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("DATABASE_URL is not set: the database tests will answer 503");
    }
    let pool = items::Db::from_env().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let dataset = web::Data::new(
        json_items::load().map_err(|e| std::io::Error::other(format!("the embedded dataset: {e}")))?,
    );
    let item_cache = web::Data::new(crud::new_cache());
    let static_dir = std::env::var("STATIC_DIR").unwrap_or_else(|_| DEFAULT_STATIC_DIR.into());
    if !std::path::Path::new(&static_dir).is_dir() {
        eprintln!("STATIC_DIR {static_dir} is not a directory: /static/ will answer 404");
    }
    let h2c_addr = std::env::var("H2C_ADDR").ok().filter(|a| !a.is_empty());
    let tls = tls_listener().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    eprintln!("peer-actix listening on {} with {} workers", args.addr, args.workers);
    let mut server = HttpServer::new(move || {
        let url = url.clone();
        App::new()
            .app_data(web::Data::new(pool.clone()))
            .app_data(dataset.clone())
            .app_data(item_cache.clone())
            // One Worker (connection + cache) per actix worker thread.
            .data_factory(move || {
                let url = url.clone();
                async move { Ok::<_, ()>(Worker::new(url).await) }
            })
            .wrap(DefaultHeaders::new().add((header::SERVER, "actix")))
            // A resource per path: a known path with another method is a 405.
            .service(web::resource("/plaintext").route(web::get().to(plaintext)))
            .service(web::resource("/json").route(web::get().to(json)))
            .service(web::resource("/db").route(web::get().to(db)))
            .service(web::resource("/queries").route(web::get().to(queries)))
            .service(web::resource("/fortunes").route(web::get().to(fortunes)))
            .service(web::resource("/updates").route(web::get().to(updates)))
            .service(web::resource("/cached-queries").route(web::get().to(cached_queries)))
            .service(
                web::resource("/baseline11").route(web::get().to(baseline)).route(web::post().to(baseline)),
            )
            .service(
                web::resource("/baseline2").route(web::get().to(baseline)).route(web::post().to(baseline)),
            )
            .service(web::resource("/pipeline").route(web::get().to(pipeline)))
            // json-comp: compressed per response when the client accepts it.
            .service(
                web::resource("/json/{count}")
                    .wrap(Compress::default())
                    .route(web::get().to(json_items::json_count)),
            )
            .service(web::resource("/upload").route(web::post().to(upload)))
            .service(web::resource("/async-db").route(web::get().to(items::async_db)))
            .configure(crud::services)
            // Read from disk per request; content types by mime_guess,
            // ETag and Last-Modified, `..` refused.
            .service(Files::new("/static", &static_dir))
    })
    .workers(args.workers)
    // Keep-alive stays on with actix's default idle timeout (5 s).
    .backlog(4096)
    .bind(args.addr)?;
    if let Some(addr) = h2c_addr {
        eprintln!("peer-actix: HTTP/1.1 and h2c on {addr}");
        server = server.bind_auto_h2c(addr)?;
    }
    if let Some((addr, config)) = tls {
        eprintln!("peer-actix: TLS (h2, http/1.1) on {addr}");
        server = server.bind_rustls_0_23(addr, config)?;
    }
    server.run().await
}

/// `TLS_ADDR`, `TLS_CERT` and `TLS_KEY`, read into a rustls server config
/// (actix sets its ALPN protocols itself), or `None` without `TLS_ADDR`.
fn tls_listener() -> Result<Option<(String, rustls::ServerConfig)>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let Some(addr) = std::env::var("TLS_ADDR").ok().filter(|a| !a.is_empty()) else { return Ok(None) };
    let var = |name: &str| std::env::var(name).map_err(|_| format!("TLS_ADDR needs {name}"));
    let (cert, key) = (var("TLS_CERT")?, var("TLS_KEY")?);
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("TLS_CERT {cert}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(&key).map_err(|e| format!("TLS_KEY {key}: {e}"))?;
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS certificate: {e}"))?;
    Ok(Some((addr, config)))
}
