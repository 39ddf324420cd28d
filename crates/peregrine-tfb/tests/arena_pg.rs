//! The HttpArena endpoints of the real `peregrine-tfb` binary on
//! PostgreSQL: the checks of `arena.rs`, with the in-process item cache.
//!
//! Needs `DATABASE_URL` (`scripts/test` starts the private cluster and sets
//! it) and fails rather than skip without it.

mod common;

use common::{required_env, Server};

fn database_url() -> String {
    required_env("DATABASE_URL", "`scripts/pg start` and export the DATABASE_URL it prints")
}

/// Two connections per worker (one read, one write): a debug build spends
/// tens of milliseconds of a worker's thread on each SCRAM handshake, and
/// the default 17 per worker would keep the workers busy for seconds.
pub const MAX_CONN: (&str, &str) = ("DATABASE_MAX_CONN", "4");

#[test]
fn pipeline_and_async_db_on_postgres() {
    let url = database_url();
    let server = Server::start("async-db-pg", &[("DATABASE_URL", &url), MAX_CONN]);
    server.wait_db_ready();
    assert_eq!(server.get("/pipeline").body, "ok");
    common::checks::async_db(&server);
}

#[test]
fn crud_on_postgres() {
    let url = database_url();
    let server = Server::start("crud-pg", &[("DATABASE_URL", &url), MAX_CONN]);
    server.wait_db_ready();
    // A fresh id per run: the database outlives the test.
    let new_id = 200_000 + i64::from(std::process::id() % 1_000_000) * 7;
    common::checks::crud(&server, new_id);
}
