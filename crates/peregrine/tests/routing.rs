//! Routing over real sockets: every method shorthand, sync, async and
//! streaming handlers registered the same way, `any`, and nesting.

mod common;

use common::{config, Client};
use peregrine::{Body, Path, Request, Router, Server, ServerHandle, State};

fn api(prefix_note: &'static str) -> Router<&'static str> {
    Router::with_state(prefix_note)
        .get("/", |State(s): State<&'static str>| format!("api root ({s})"))
        .get("/notes/{id}", |Path(id): Path<u32>| format!("note {id}"))
        .delete("/notes/{id}", |Path(id): Path<u32>| async move { format!("deleted {id}") })
}

fn router() -> Router<&'static str> {
    Router::with_state("outer")
        // The same `get` takes a sync handler...
        .get("/sync", || "sync")
        // ...an async one...
        .get("/async", || async { "async" })
        // ...and `post` a streaming one.
        .post("/stream", |body: Body| async move { body.count().await.map(|n| format!("{n} bytes")) })
        .put("/m", || "put")
        .delete("/m", || "delete")
        .patch("/m", || "patch")
        .options("/m", || "options")
        .get("/m", |req: &Request<'_>| format!("get via {}", req.method().as_str()))
        .any("/anything", |req: &Request<'_>| format!("any {}", req.method_str()))
        .post("/anything", || "the POST route wins over any")
        .nest("/api", api("ignored"))
}

fn start() -> ServerHandle {
    Server::with_config(config()).spawn("127.0.0.1:0", |_| async { router() }).expect("test server starts")
}

fn call(c: &mut Client, method: &str, path: &str, body: &str) -> (u16, String) {
    let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    let r = c.roundtrip(req.as_bytes());
    (r.status, r.text().to_owned())
}

#[test]
fn every_method_shorthand_routes_its_method() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    assert_eq!(call(&mut c, "GET", "/sync", ""), (200, "sync".into()));
    assert_eq!(call(&mut c, "GET", "/async", ""), (200, "async".into()));
    assert_eq!(call(&mut c, "POST", "/stream", "hello"), (200, "5 bytes".into()));
    for (method, want) in [("PUT", "put"), ("DELETE", "delete"), ("PATCH", "patch"), ("OPTIONS", "options")] {
        assert_eq!(call(&mut c, method, "/m", ""), (200, want.into()), "{method}");
    }
    assert_eq!(call(&mut c, "GET", "/m", ""), (200, "get via GET".into()));
    let r = c.roundtrip(b"POST /m HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("PUT, DELETE, PATCH, OPTIONS, GET, HEAD"));
    server.shutdown();
}

#[test]
fn any_takes_every_method_a_specific_route_does_not() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    for method in ["GET", "PUT", "DELETE", "PROPFIND"] {
        assert_eq!(call(&mut c, method, "/anything", ""), (200, format!("any {method}")), "{method}");
    }
    assert_eq!(call(&mut c, "POST", "/anything", ""), (200, "the POST route wins over any".into()));
    server.shutdown();
}

#[test]
fn nested_routes_live_under_the_prefix_with_the_outer_state() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    assert_eq!(call(&mut c, "GET", "/api", ""), (200, "api root (outer)".into()));
    assert_eq!(call(&mut c, "GET", "/api/notes/7", ""), (200, "note 7".into()));
    assert_eq!(call(&mut c, "DELETE", "/api/notes/7", ""), (200, "deleted 7".into()));
    assert_eq!(call(&mut c, "GET", "/notes/7", "").0, 404);
    assert_eq!(call(&mut c, "GET", "/api/", "").0, 404);
    server.shutdown();
}

/// A route behind middleware answers a method it lacks with a `405` whose
/// `Allow` lists what the route serves after everything was merged, not
/// what it served when the layer went on.
#[test]
fn a_layered_route_lists_methods_added_after_the_layer() {
    let app = || {
        let layered = Router::with_state("outer")
            .get("/r", || "get")
            .layer(peregrine::middleware::from_fn(|req, next: peregrine::middleware::Next| next.run(req)));
        layered.merge(Router::with_state("outer").post("/r", || "post")).put("/r", || "put")
    };
    let server = Server::with_config(config())
        .spawn("127.0.0.1:0", move |_| async move { app() })
        .expect("test server starts");
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(b"DELETE /r HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, POST, PUT, HEAD"));
    assert_eq!(call(&mut c, "POST", "/r", ""), (200, "post".into()));
    assert_eq!(call(&mut c, "PUT", "/r", ""), (200, "put".into()));
}
