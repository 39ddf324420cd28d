//! The application in process, through [`TestClient`]: handlers and
//! middleware as a connection would run them, on a fresh SQLite file (and
//! on PostgreSQL too when `DATABASE_URL` is set).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use peregrine::testing::{TestClient, TestRequest, TestResponse};
use serde_json::{json, Value};

use super::*;

const TOKEN: &str = "t0ken";

/// A fresh directory for one test's database.
pub(crate) fn scratch() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("notes-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn static_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/static"))
}

fn client_for(database: Database) -> TestClient<Store> {
    TestClient::with_app(|| async move {
        Ok::<_, db::Error>(app(database.connect().await?, TOKEN, &static_dir()))
    })
    .expect("the app starts")
}

fn sqlite_client() -> (TestClient<Store>, PathBuf) {
    let dir = scratch();
    let database = Database::open(None, dir.join("notes.db")).expect("SQLite opens");
    (client_for(database), dir)
}

fn authed(req: TestRequest) -> TestRequest {
    req.header("authorization", format!("Bearer {TOKEN}"))
}

fn body(r: &TestResponse) -> Value {
    r.json().unwrap_or_else(|e| panic!("a JSON body, got {:?}: {e}", r.text()))
}

/// Create, read, list, replace, conflict and delete, on any backend;
/// titles carry `tag` so runs sharing a database do not collide.
fn crud(client: &TestClient<Store>, tag: &str) {
    let title = format!("groceries {tag}");
    let r =
        client.send(authed(TestRequest::post("/api/notes").json(&json!({"title": title, "body": "milk"}))));
    assert_eq!(r.status().as_u16(), 201, "{}", r.text());
    let created = body(&r);
    let id = created["id"].as_i64().expect("an id");
    assert_eq!(created["title"], title.as_str());
    assert_eq!(r.header("location"), Some(format!("/api/notes/{id}").as_str()));

    let r = client.send(authed(TestRequest::get(&format!("/api/notes/{id}"))));
    assert_eq!((r.status().as_u16(), body(&r)), (200, created.clone()));
    let r = client.send(authed(TestRequest::get("/api/notes?limit=100000")));
    assert_eq!(r.status().as_u16(), 200);
    assert!(body(&r).as_array().expect("a list").len() <= 100, "the limit is capped");

    let changed = json!({"title": title, "body": "oat milk"});
    let r = client.send(authed(TestRequest::put(&format!("/api/notes/{id}")).json(&changed)));
    assert_eq!((r.status().as_u16(), body(&r)["body"].clone()), (200, json!("oat milk")));

    // A second note with the same title: 409, on create and on replace.
    let r = client.send(authed(TestRequest::post("/api/notes").json(&changed)));
    assert_eq!((r.status().as_u16(), body(&r)), (409, json!({"error": "a note with this title exists"})));
    let other = format!("other {tag}");
    let r = client.send(authed(TestRequest::post("/api/notes").json(&json!({"title": other, "body": ""}))));
    let other_id = body(&r)["id"].as_i64().expect("an id");
    let r = client.send(authed(TestRequest::put(&format!("/api/notes/{other_id}")).json(&changed)));
    assert_eq!(r.status().as_u16(), 409);

    for target in [id, other_id] {
        let r = client.send(authed(TestRequest::delete(&format!("/api/notes/{target}"))));
        assert_eq!(r.status().as_u16(), 204);
    }
    let r = client.send(authed(TestRequest::get(&format!("/api/notes/{id}"))));
    assert_eq!((r.status().as_u16(), body(&r)), (404, json!({"error": "no such note"})));
    let r = client.send(authed(TestRequest::delete(&format!("/api/notes/{id}"))));
    assert_eq!(r.status().as_u16(), 404);
}

#[test]
fn crud_on_sqlite() {
    let (client, dir) = sqlite_client();
    crud(&client, "sqlite");
    let _ = std::fs::remove_dir_all(dir);
}

/// PostgreSQL runs when `DATABASE_URL` names one (scripts/test sets it);
/// without it the test says so loudly rather than pass in silence.
#[test]
fn crud_on_postgres_when_configured() {
    let Some(url) = std::env::var("DATABASE_URL").ok().filter(|u| u.starts_with("postgres")) else {
        eprintln!("NOTE: DATABASE_URL is not a postgres:// URL, so the PostgreSQL run is skipped");
        return;
    };
    let database = Database::open(Some(&url), "unused.db").expect("a valid URL");
    let tag = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    crud(&client_for(database), &tag);
}

#[test]
fn the_api_wants_the_token_and_says_how() {
    let (client, dir) = sqlite_client();
    let r = client.get("/api/notes");
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"notes\""));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(body(&r), json!({"error": "unauthorized"}));
    let r = client.send(TestRequest::post("/api/notes").header("authorization", "Bearer nope"));
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"notes\", error=\"invalid_token\""));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn preflights_are_answered_without_the_token() {
    let (client, dir) = sqlite_client();
    let preflight = TestRequest::new("OPTIONS", "/api/notes/7")
        .header("origin", "https://app.example")
        .header("access-control-request-method", "PUT")
        .header("access-control-request-headers", "authorization, content-type");
    let r = client.send(preflight);
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, POST, PUT, DELETE"));
    assert_eq!(r.header("access-control-allow-headers"), Some("authorization, content-type"));
    let r = client.send(authed(TestRequest::get("/api/notes")).header("origin", "https://app.example"));
    assert_eq!((r.status().as_u16(), r.header("access-control-allow-origin")), (200, Some("*")));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_error_is_json() {
    let (client, dir) = sqlite_client();
    let r = client.get("/no/such/page");
    assert_eq!((r.status().as_u16(), body(&r)), (404, json!({"error": "no such resource"})));
    let r = client.send(TestRequest::new("PATCH", "/api/notes"));
    assert_eq!(r.status().as_u16(), 401, "the API is behind the token for every method");
    let r = client.send(TestRequest::new("PATCH", "/"));
    assert_eq!((r.status().as_u16(), r.header("allow")), (405, Some("GET, HEAD")));
    assert_eq!(body(&r), json!({"error": "method not allowed"}));

    let post = |req: TestRequest| client.send(authed(req));
    let shape = post(TestRequest::post("/api/notes").json(&json!({"title": 3})));
    assert_eq!(shape.status().as_u16(), 422, "wrong shape");
    assert!(body(&shape)["error"].as_str().is_some_and(|e| e.contains("invalid type")), "{}", shape.text());
    let empty = post(TestRequest::post("/api/notes").json(&json!({"title": " ", "body": ""})));
    assert_eq!(
        (empty.status().as_u16(), body(&empty)),
        (422, json!({"error": "the title must not be empty"}))
    );
    let syntax = post(TestRequest::post("/api/notes").header("content-type", "application/json").body("{"));
    assert_eq!(syntax.status().as_u16(), 400, "not JSON at all");
    assert!(body(&syntax)["error"].is_string());
    let untyped = post(TestRequest::post("/api/notes").body(r#"{"title":"a","body":"b"}"#));
    assert_eq!(untyped.status().as_u16(), 415);
    assert!(body(&untyped)["error"].is_string());
    let r = client.send(authed(TestRequest::get("/api/notes/abc")));
    assert_eq!(r.status().as_u16(), 400);
    assert!(body(&r)["error"].as_str().is_some_and(|e| e.contains("abc")));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn requests_get_ids_and_the_page_is_served() {
    let (client, dir) = sqlite_client();
    let r = client.get("/");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(r.text().contains("<title>Notes</title>"));
    assert_eq!(r.header("x-request-id").map(str::len), Some(16));
    let r = client.send(TestRequest::get("/static/index.html").header("x-request-id", "abc-1"));
    assert_eq!((r.status().as_u16(), r.header("x-request-id")), (200, Some("abc-1")));
    // A dot segment is refused as a malformed path (peregrine never
    // normalises one); the rest simply name no file.
    for (sneaky, status) in [
        ("/static/../Cargo.toml", 400),
        ("/static/.hidden", 404),
        ("/static//etc/passwd", 404),
        ("/static/missing.css", 404),
    ] {
        let r = client.get(sneaky);
        assert_eq!(r.status().as_u16(), status, "{sneaky}");
        assert!(r.header("x-request-id").is_some(), "{sneaky}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
