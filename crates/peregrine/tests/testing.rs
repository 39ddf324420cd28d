//! The in-process test client runs requests through the same router,
//! middleware and handlers as a connection; the fallback answers unmatched
//! paths; a dropped server handle stops its server.

mod common;

use std::net::TcpStream;
use std::rc::Rc;
use std::time::Duration;

use peregrine::middleware::{from_fn, Next};
use peregrine::testing::{TestClient, TestRequest};
use peregrine::{Body, Json, OwnedRequest, Path, Response, Router, Server, State, StatusCode};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Note {
    id: u32,
    title: String,
}

async fn stamp(req: OwnedRequest, next: Next) -> Response {
    let mut r = next.run(req).await;
    r.set_header("x-stamped", "1");
    r
}

fn app(counter: Rc<std::cell::Cell<u32>>) -> Router<Rc<std::cell::Cell<u32>>> {
    Router::with_state(counter)
        .get("/notes/{id}", |Path(id): Path<u32>| Json(Note { id, title: format!("note {id}") }))
        .post("/notes", |Json(n): Json<Note>| async move { (StatusCode::CREATED, Json(n)) })
        .post("/count", |State(c): State<Rc<std::cell::Cell<u32>>>| {
            c.set(c.get() + 1);
            c.get().to_string()
        })
        .post("/upload", |body: Body| async move { body.count().await.map(|n| n.to_string()) })
        .get("/boom", || -> &'static str { panic!("panics on purpose") })
        .fallback(|Path(rest): Path<String>| {
            (StatusCode::NOT_FOUND, Json(serde_json::json!({ "missing": rest })))
        })
        .layer(from_fn(stamp))
}

#[test]
fn the_test_client_runs_routes_middleware_and_state_without_a_socket() {
    let counter = Rc::new(std::cell::Cell::new(0));
    let client = TestClient::new(app(Rc::clone(&counter)));
    let r = client.get("/notes/7");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.header("x-stamped"), Some("1"));
    assert_eq!(r.json::<Note>().unwrap(), Note { id: 7, title: "note 7".into() });

    let r = client.send(TestRequest::post("/notes").json(&Note { id: 1, title: "a".into() }));
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(client.send(TestRequest::post("/notes").body("{}")).status().as_u16(), 415);

    client.send(TestRequest::post("/count"));
    assert_eq!(client.send(TestRequest::post("/count")).text(), "2");
    assert_eq!(counter.get(), 2);

    assert_eq!(client.send(TestRequest::post("/upload").body(vec![1u8; 1000])).text(), "1000");
    assert_eq!(client.get("/boom").status().as_u16(), 500);
    assert_eq!(client.send(TestRequest::delete("/notes/7")).status().as_u16(), 405);
    let head = client.send(TestRequest::new("HEAD", "/notes/7"));
    assert_eq!((head.status().as_u16(), head.bytes().len()), (200, 0));
}

#[test]
fn the_fallback_answers_unmatched_paths_over_a_socket_too() {
    let client = TestClient::new(app(Rc::default()));
    let r = client.get("/nowhere/else");
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(r.header("x-stamped"), Some("1"), "layers wrap the fallback");
    assert_eq!(r.json::<serde_json::Value>().unwrap(), serde_json::json!({ "missing": "nowhere/else" }));

    let server =
        Server::with_config(common::config()).spawn("127.0.0.1:0", |_| async { app(Rc::default()) }).unwrap();
    let mut c = common::Client::connect(server.local_addr());
    let r = c.roundtrip(&common::get("/nope"));
    assert_eq!((r.status, r.header("content-type")), (404, Some("application/json")));
    assert_eq!(r.text(), r#"{"missing":"nope"}"#);
}

#[test]
fn with_app_builds_per_worker_state_on_the_clients_runtime() {
    let client = TestClient::with_app(|| async {
        // Something that needs the runtime, as a database pool would.
        tokio::task::spawn_local(async {}).await.map(|()| app(Rc::new(std::cell::Cell::new(10))))
    })
    .expect("the app builds");
    assert_eq!(client.send(TestRequest::post("/count")).text(), "11");
}

#[test]
fn dropping_the_server_handle_stops_the_server() {
    let server = Server::with_config(common::config())
        .spawn("127.0.0.1:0", |_| async { Router::new().get("/", || "up") })
        .expect("starts");
    let addr = server.local_addr();
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok());
    drop(server);
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(), "still listening after drop");
}
