//! The HttpArena endpoints of the real `peregrine-tfb` binary over real
//! sockets, on the embedded SQLite default (no environment needed):
//! `/pipeline`, `/async-db` and `/crud/items`. `arena_pg.rs` runs the same
//! checks on PostgreSQL. Also HttpArena's HTTP/2 endpoints over h2c on the
//! same port (`/baseline2`, `/json/{count}`, `/static/*`).

mod common;

use common::Server;

#[test]
fn pipeline_answers_ok_sixteen_deep() {
    let server = Server::start("pipeline", &[]);
    let one = server.get("/pipeline");
    assert_eq!((one.status, one.body.as_str()), (200, "ok"));
    assert!(one.header("content-type").is_some_and(|v| v.starts_with("text/plain")), "{one:?}");
    let mut burst = "GET /pipeline HTTP/1.1\r\nHost: t\r\n\r\n".repeat(15);
    burst.push_str("GET /pipeline HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let replies = server.raw(burst.as_bytes());
    assert_eq!(replies.len(), 16);
    assert!(replies.iter().all(|r| r.status == 200 && r.body == "ok"), "{replies:?}");
}

#[test]
fn async_db_on_sqlite() {
    let server = Server::start("async-db", &[]);
    common::checks::async_db(&server);
}

#[test]
fn crud_on_sqlite() {
    let server = Server::start("crud", &[]);
    common::checks::crud(&server, 100_001);
}

/// `curl --http2-prior-knowledge URL`: (body, HTTP version, status).
fn curl_h2c(url: &str) -> (String, String) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--http2-prior-knowledge", "-w", "\n%{http_version} %{http_code}", url])
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, meta) = text.rsplit_once('\n').unwrap_or_default();
    (body.to_owned(), meta.to_owned())
}

#[test]
fn http2_endpoints_over_h2c_on_the_main_port() {
    let server = Server::start("h2c", &[]);
    let base = format!("http://{}", server.addr);
    assert_eq!(curl_h2c(&format!("{base}/baseline2?a=13&b=29")), ("42".to_owned(), "2 200".to_owned()));
    let (json, meta) = curl_h2c(&format!("{base}/json/3?m=2"));
    assert_eq!(meta, "2 200");
    assert!(json.contains("\"count\":3"), "{json}");
    let (css, meta) = curl_h2c(&format!("{base}/static/reset.css"));
    assert_eq!(meta, "2 200");
    assert!(!css.is_empty());
    // HTTP/1.1 on the same port, unchanged.
    let one = server.get("/baseline2?a=1&b=2");
    assert_eq!((one.status, one.body.as_str()), (200, "3"));
}
