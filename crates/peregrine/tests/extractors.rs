//! Extractors and response helpers over real sockets: JSON's 415/400/422
//! rule, forms, headers (plain, `http`'s map, typed), cookies, the client's
//! address, the owned request in async handlers, redirects, `Set-Cookie`,
//! and `http` crate responses.

mod common;

use common::{config, Client};
use peregrine::{
    ClientAddr, Cookie, Cookies, Form, Json, OwnedRequest, Redirect, Response, Router, Server, ServerHandle,
    TypedHeader,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Note {
    title: String,
    stars: u8,
}

fn router() -> Router {
    Router::new()
        .post("/json", |Json(n): Json<Note>| format!("{} {}", n.title, n.stars))
        .post("/form", |Form(n): Form<Note>| format!("{} {}", n.title, n.stars))
        .get("/agent", |TypedHeader(agent): TypedHeader<headers::UserAgent>| agent.as_str().to_owned())
        .get("/map", |map: http::HeaderMap| format!("{:?}", map.get_all("x-tag").iter().collect::<Vec<_>>()))
        .get("/cookies", |c: Cookies| format!("{:?} {:?}", c.get("session"), c.get("theme")))
        .get("/addr", |ClientAddr(addr): ClientAddr| addr.ip().to_string())
        .post("/owned", |req: OwnedRequest| async move { format!("{} {}", req.path(), req.body().len()) })
        .get("/go", || Redirect::to("/json"))
        .get("/login", || {
            Response::text("hi").cookie(Cookie::build(("session", "a b;c")).path("/").http_only(true).build())
        })
        .get("/http", || http::Response::builder().status(201).header("x-from", "http").body("made").unwrap())
}

fn start() -> ServerHandle {
    Server::with_config(config()).spawn("127.0.0.1:0", |_| async { router() }).expect("test server starts")
}

fn post(c: &mut Client, path: &str, content_type: Option<&str>, body: &str) -> common::Response {
    let ct = content_type.map(|t| format!("Content-Type: {t}\r\n")).unwrap_or_default();
    let req = format!("POST {path} HTTP/1.1\r\nHost: x\r\n{ct}Content-Length: {}\r\n\r\n{body}", body.len());
    c.roundtrip(req.as_bytes())
}

#[test]
fn json_bodies_are_checked_for_type_syntax_and_shape() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let ok = post(&mut c, "/json", Some("application/json; charset=utf-8"), r#"{"title":"a","stars":3}"#);
    assert_eq!((ok.status, ok.text()), (200, "a 3"));
    assert_eq!(
        post(&mut c, "/json", Some("application/vnd.api+json"), r#"{"title":"a","stars":3}"#).status,
        200
    );
    assert_eq!(post(&mut c, "/json", None, r#"{"title":"a","stars":3}"#).status, 415);
    assert_eq!(post(&mut c, "/json", Some("text/plain"), r#"{"title":"a","stars":3}"#).status, 415);
    assert_eq!(post(&mut c, "/json", Some("application/json"), r#"{"title":"a","#).status, 400);
    assert_eq!(post(&mut c, "/json", Some("application/json"), "not json").status, 400);
    assert_eq!(post(&mut c, "/json", Some("application/json"), r#"{"title":"a"}"#).status, 422);
    let r = post(&mut c, "/json", Some("application/json"), r#"{"title":"a","stars":"many"}"#);
    assert_eq!(r.status, 422);
    assert_eq!(r.header("content-type"), Some("application/json"));
    server.shutdown();
}

#[test]
fn forms_headers_cookies_and_addresses_are_extracted() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let form = "application/x-www-form-urlencoded";
    assert_eq!(post(&mut c, "/form", Some(form), "title=a+b&stars=4").text(), "a b 4");
    assert_eq!(post(&mut c, "/form", Some("application/json"), "title=a&stars=4").status, 415);
    assert_eq!(post(&mut c, "/form", Some(form), "title=a&stars=lots").status, 422);
    let r = c.roundtrip(b"GET /agent HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/8.0\r\n\r\n");
    assert_eq!((r.status, r.text()), (200, "curl/8.0"));
    assert_eq!(c.roundtrip(b"GET /agent HTTP/1.1\r\nHost: x\r\n\r\n").status, 400);
    let r = c.roundtrip(b"GET /map HTTP/1.1\r\nHost: x\r\nX-Tag: one\r\nx-tag: two\r\n\r\n");
    assert_eq!(r.text(), r#"["one", "two"]"#);
    let r =
        c.roundtrip(b"GET /cookies HTTP/1.1\r\nHost: x\r\nCookie: session=abc%20d; =bad; theme=dark\r\n\r\n");
    assert_eq!(r.text(), r#"Some("abc d") Some("dark")"#);
    assert_eq!(c.roundtrip(b"GET /addr HTTP/1.1\r\nHost: x\r\n\r\n").text(), "127.0.0.1");
    assert_eq!(post(&mut c, "/owned", None, "12345").text(), "/owned 5");
    server.shutdown();
}

#[test]
fn redirects_cookies_and_http_crate_responses_are_written() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(b"GET /go HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((r.status, r.header("location")), (303, Some("/json")));
    let r = c.roundtrip(b"GET /login HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.header("set-cookie"), Some("session=a%20b%3Bc; HttpOnly; Path=/"));
    let r = c.roundtrip(b"GET /http HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((r.status, r.text(), r.header("x-from")), (201, "made", Some("http")));
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    server.shutdown();
}
