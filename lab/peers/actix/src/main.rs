//! The seven TFB test types on actix-web 4, a peer for peregrine's lab, and
//! HttpArena's `/baseline11` and `/pipeline`.
//!
//! Usage: `peer-actix [--addr HOST:PORT] [--workers N]`. Without `--addr` it
//! listens on `0.0.0.0:$PORT` (8080 if `PORT` is unset); without `--workers`
//! it runs one worker per available CPU. `DATABASE_URL` (postgres://...)
//! enables the database tests; without it they answer 503.
//!
//! Each actix worker builds its own App, and with it (through
//! `data_factory`) its own tokio-postgres connection and cache.

use peer_common as tfb;

use actix_web::http::header::{self, ContentType, HeaderValue};
use actix_web::middleware::DefaultHeaders;
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
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
    eprintln!("peer-actix listening on {} with {} workers", args.addr, args.workers);
    HttpServer::new(move || {
        let url = url.clone();
        App::new()
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
            .service(web::resource("/pipeline").route(web::get().to(pipeline)))
    })
    .workers(args.workers)
    // Keep-alive stays on with actix's default idle timeout (5 s).
    .backlog(4096)
    .bind(args.addr)?
    .run()
    .await
}
