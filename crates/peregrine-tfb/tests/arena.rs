//! The HttpArena endpoints of the real `peregrine-tfb` binary over real
//! sockets, on the embedded SQLite default (no environment needed):
//! `/pipeline`, `/async-db` and `/crud/items`. `arena_pg.rs` runs the same
//! checks on PostgreSQL.

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
