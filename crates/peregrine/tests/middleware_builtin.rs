//! The built-in middleware over real sockets: CORS (preflights answered
//! without routes), timeouts, request ids, body limits, bearer and basic
//! authentication, and request logging.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{config, Client};
use peregrine::middleware::{
    basic_auth, bearer_auth, body_limit, cors, request_id, timeout, trace, RequestId,
};
use peregrine::{Extension, Method, Router, Server, ServerHandle};

#[derive(Clone, Debug)]
struct User(String);

fn router() -> Router {
    let api = Router::new().get("/data", || "data").post("/data", |body: String| body).layer(
        cors().allow_origin("https://app.example").allow_methods(&[Method::Get, Method::Post, Method::Put]),
    );
    let slow = Router::new()
        .get("/slow", || async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            "late"
        })
        .get("/quick", || "quick")
        .layer(timeout(Duration::from_millis(100)));
    let ids =
        Router::new().get("/id", |Extension(RequestId(id)): Extension<RequestId>| id).layer(request_id());
    let limited = Router::new().post("/small", |body: Vec<u8>| body.len().to_string()).layer(body_limit(8));
    let bearer = Router::new()
        .get("/me", |Extension(User(name)): Extension<User>| name)
        .layer(bearer_auth("notes", |token| (token == "t0ken").then(|| User("ada".into()))));
    let basic = Router::new()
        .get("/me", |Extension(User(name)): Extension<User>| name)
        .layer(basic_auth("admin area", |user, pass| {
            (user == "ada" && pass == "p:w").then(|| User(user.into()))
        }));
    let logged = Router::new().get("/logged", || "logged").layer(trace());
    Router::new()
        .nest("/api", api)
        .merge(slow)
        .merge(ids)
        .merge(limited)
        .nest("/bearer", bearer)
        .nest("/basic", basic)
        .merge(logged)
}

fn start() -> ServerHandle {
    Server::with_config(config()).spawn("127.0.0.1:0", |_| async { router() }).expect("test server starts")
}

fn send(c: &mut Client, head: &str) -> common::Response {
    c.roundtrip(format!("{head}\r\n\r\n").as_bytes())
}

#[test]
fn cors_preflights_are_answered_without_routes_and_actual_requests_get_headers() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let r = send(
        &mut c,
        "OPTIONS /api/data HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: PUT\r\nAccess-Control-Request-Headers: content-type, x-token",
    );
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, POST, PUT"));
    assert_eq!(r.header("access-control-allow-headers"), Some("content-type, x-token"));
    assert_eq!(r.header("access-control-max-age"), Some("600"));
    assert_eq!(r.header("vary"), Some("Origin"));

    let r = send(&mut c, "OPTIONS /api/data HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\nAccess-Control-Request-Method: GET");
    assert_eq!(r.status, 403);
    assert_eq!(r.header("access-control-allow-origin"), None);

    let r = send(&mut c, "GET /api/data HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example");
    assert_eq!((r.status, r.text()), (200, "data"));
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
    let r = send(&mut c, "GET /api/data HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example");
    assert_eq!((r.status, r.header("access-control-allow-origin")), (200, None));
    let r = send(&mut c, "GET /api/data HTTP/1.1\r\nHost: x");
    assert_eq!(r.header("access-control-allow-origin"), None);
    // A method the route does not serve, outside a preflight, is still 405.
    let r = send(&mut c, "DELETE /api/data HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, POST, HEAD"));
    server.shutdown();
}

#[test]
fn a_slow_handler_times_out_with_503() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let started = std::time::Instant::now();
    let r = send(&mut c, "GET /slow HTTP/1.1\r\nHost: x");
    assert_eq!((r.status, r.header("retry-after")), (503, Some("1")));
    assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(send(&mut c, "GET /quick HTTP/1.1\r\nHost: x").text(), "quick");
    server.shutdown();
}

#[test]
fn request_ids_are_kept_or_made_and_reach_the_handler() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let r = send(&mut c, "GET /id HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc-123");
    assert_eq!((r.text(), r.header("x-request-id")), ("abc-123", Some("abc-123")));
    let r = send(&mut c, "GET /id HTTP/1.1\r\nHost: x\r\nX-Request-Id: not acceptable!");
    let made = r.header("x-request-id").expect("an id").to_owned();
    assert_eq!(made.len(), 16);
    assert_eq!(r.text(), made);
    let again = send(&mut c, "GET /id HTTP/1.1\r\nHost: x");
    assert_ne!(again.header("x-request-id"), Some(made.as_str()));
    server.shutdown();
}

#[test]
fn a_group_body_limit_refuses_larger_bodies() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(b"POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n12345678");
    assert_eq!((r.status, r.text()), (200, "8"));
    let r = c.roundtrip(b"POST /small HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n123456789");
    assert_eq!(r.status, 413);
    server.shutdown();
}

#[test]
fn bearer_and_basic_rejections_carry_their_challenges() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let r = send(&mut c, "GET /bearer/me HTTP/1.1\r\nHost: x");
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("Bearer realm=\"notes\"")));
    let r = send(&mut c, "GET /bearer/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong");
    assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"notes\", error=\"invalid_token\""));
    let r = send(&mut c, "GET /bearer/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t0ken");
    assert_eq!((r.status, r.text()), (200, "ada"));

    let r = send(&mut c, "GET /basic/me HTTP/1.1\r\nHost: x");
    assert_eq!(
        (r.status, r.header("www-authenticate")),
        (401, Some("Basic realm=\"admin area\", charset=\"UTF-8\""))
    );
    // "ada:p:w": the password may hold colons.
    let r = send(&mut c, "GET /basic/me HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWRhOnA6dw==");
    assert_eq!((r.status, r.text()), (200, "ada"));
    for bad in ["Basic YWRhOndyb25n", "Basic !!!", "Basic YWRh", "Bearer t0ken"] {
        let r = send(&mut c, &format!("GET /basic/me HTTP/1.1\r\nHost: x\r\nAuthorization: {bad}"));
        assert_eq!(r.status, 401, "{bad}");
    }
    server.shutdown();
}

/// Collects what the fmt subscriber writes.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn trace_logs_method_path_status_latency_and_client() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber in this test binary");
    let server = start();
    let mut c = Client::connect(server.local_addr());
    assert_eq!(send(&mut c, "GET /logged?x=1 HTTP/1.1\r\nHost: x").status, 200);
    server.shutdown();
    let log = String::from_utf8(captured.0.lock().expect("log buffer").clone()).expect("UTF-8 log");
    let line = log
        .lines()
        .find(|l| l.contains("peregrine::request"))
        .unwrap_or_else(|| panic!("no request event in {log:?}"));
    for want in ["method=GET", "path=/logged", "status=200", "micros=", "client=127.0.0.1:"] {
        assert!(line.contains(want), "{want} missing from {line:?}");
    }
}

#[test]
fn a_tower_http_layer_runs_as_middleware() {
    use http::header::{HeaderValue, AUTHORIZATION};
    use peregrine::middleware::tower;
    use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
    use tower_http::set_header::SetResponseHeaderLayer;

    fn app() -> Router {
        Router::new()
            .get(
                "/towered/{name}",
                |peregrine::Path(name): peregrine::Path<String>, req: peregrine::OwnedRequest| async move {
                    format!("{name} {}", req.header_str("authorization").unwrap_or("-"))
                },
            )
            .layer(tower(SetResponseHeaderLayer::if_not_present(
                http::HeaderName::from_static("x-layer"),
                HeaderValue::from_static("yes"),
            )))
            .layer(tower(SetSensitiveRequestHeadersLayer::new([AUTHORIZATION])))
            .layer(request_id())
    }
    let server = Server::with_config(config()).spawn("127.0.0.1:0", |_| async { app() }).expect("starts");
    let mut c = Client::connect(server.local_addr());
    let r = send(&mut c, "GET /towered/ada?x=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "ada Bearer t", "path parameters and headers pass through the tower layers");
    assert_eq!(r.header("x-layer"), Some("yes"));
    assert!(r.header("x-request-id").is_some(), "peregrine middleware outside tower layers still runs");
    server.shutdown();
}
