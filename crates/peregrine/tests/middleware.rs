//! Middleware over real sockets: answering early, changing the request and
//! the response, order of layers, groups, every kind of handler behind a
//! layer, and panics.

mod common;

use common::{config, Client};
use peregrine::middleware::{from_fn, Next};
use peregrine::{
    Body, Extension, OwnedRequest, Path, Request, Response, Router, Server, ServerHandle, StatusCode,
};

#[derive(Clone, Debug)]
struct User(String);

async fn auth(mut req: OwnedRequest, next: Next) -> Response {
    let Some(token) = req.header_str("authorization").and_then(|v| v.strip_prefix("Bearer ")) else {
        return Response::text("who are you?\n")
            .status(StatusCode::UNAUTHORIZED)
            .header("WWW-Authenticate", "Bearer");
    };
    let user = User(token.to_owned());
    req.extensions_mut().insert(user);
    req.set_header("x-seen-by", b"auth");
    let mut response = next.run(req).await;
    response.set_header("x-auth", "checked");
    response
}

fn tag(
    name: &'static str,
) -> impl Fn(OwnedRequest, Next) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response>>> {
    move |req, next| {
        Box::pin(async move {
            let mut response = next.run(req).await;
            let order = match response.header_value("x-order") {
                Some(inner) => format!("{name},{inner}"),
                None => name.to_owned(),
            };
            response.set_header("x-order", order);
            response
        })
    }
}

fn router() -> Router {
    let private = Router::new()
        .get("/me", |Extension(User(name)): Extension<User>| format!("hello {name}"))
        .get("/seen", |req: &Request<'_>| format!("seen by {:?}", req.header_str("x-seen-by")))
        .get("/items/{id}", |Path(id): Path<u32>| async move { format!("item {id}") })
        .post("/upload", |body: Body| async move { body.count().await.map(|n| format!("{n} bytes")) })
        .get("/boom", || -> &'static str { panic!("handler behind middleware panics on purpose") })
        .layer(from_fn(auth));
    Router::new()
        .get("/public", || "public")
        .get("/ordered", || "ordered")
        .layer(from_fn(tag("inner")))
        .layer(from_fn(tag("outer")))
        .nest("/private", private)
}

fn start() -> ServerHandle {
    Server::with_config(config()).spawn("127.0.0.1:0", |_| async { router() }).expect("test server starts")
}

fn get(c: &mut Client, path: &str, auth: Option<&str>) -> common::Response {
    let auth = auth.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    c.roundtrip(format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n").as_bytes())
}

#[test]
fn middleware_answers_early_or_passes_on_with_changes() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let r = get(&mut c, "/private/me", None);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let r = get(&mut c, "/private/me", Some("ada"));
    assert_eq!((r.status, r.text()), (200, "hello ada"));
    assert_eq!(r.header("x-auth"), Some("checked"));
    let r = get(&mut c, "/private/seen", Some("ada"));
    assert_eq!(r.text(), "seen by Some(\"auth\")");
    // Path parameters reach a nested handler behind middleware.
    assert_eq!(get(&mut c, "/private/items/7", Some("ada")).text(), "item 7");
    // Routes outside the group are not behind its middleware.
    let r = get(&mut c, "/public", None);
    assert_eq!((r.status, r.header("x-auth")), (200, None));
    server.shutdown();
}

#[test]
fn later_layers_run_outside_earlier_ones_and_only_on_earlier_routes() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    assert_eq!(get(&mut c, "/ordered", None).header("x-order"), Some("outer,inner"));
    assert_eq!(get(&mut c, "/private/me", Some("x")).header("x-order"), None);
    server.shutdown();
}

#[test]
fn streaming_handlers_and_head_work_behind_middleware() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(b"POST /private/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!((r.status, r.text()), (200, "5 bytes"));
    c.send(b"HEAD /private/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ada\r\n\r\n");
    let r = c.head_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("9"));
    assert!(r.body.is_empty());
    server.shutdown();
}

#[test]
fn a_panic_behind_middleware_is_a_500_and_the_server_goes_on() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(b"GET /private/boom HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\n\r\n");
    assert_eq!(r.status, 500);
    let mut fresh = Client::connect(server.local_addr());
    assert_eq!(get(&mut fresh, "/public", None).status, 200);
    server.shutdown();
}
