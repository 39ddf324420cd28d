//! Shared by the PostgreSQL integration tests (`db_pg.rs`, `db_app.rs`):
//! the database URL, per-test connection names, a worker-like runtime, and
//! an admin connection outside any pool.

// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use peregrine::db::pg::PgPool;

pub fn database_url() -> String {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "DATABASE_URL is not set: run these tests via scripts/test, or start the \
             private cluster with `scripts/pg start` and export the DATABASE_URL it prints"
        ),
    }
}

/// The URL with a distinct application_name (naming the test binary, the
/// tag and the process), so a test can find (and kill) exactly its own
/// backends while other tests share the server.
pub fn tagged_url(tag: &str) -> (String, String) {
    let url = database_url();
    let name = format!("peregrine-{}-{tag}-{}", env!("CARGO_CRATE_NAME"), std::process::id());
    let sep = if url.contains('?') { '&' } else { '?' };
    (format!("{url}{sep}application_name={name}"), name)
}

/// Runs `f` the way a peregrine worker runs tasks: current-thread runtime,
/// inside a `LocalSet`.
pub fn run_local<F: Future<Output = ()>>(f: F) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    tokio::task::LocalSet::new().block_on(&runtime, f);
}

pub async fn ready(pool: &PgPool) {
    pool.ready(Duration::from_secs(10))
        .await
        .expect("the database at DATABASE_URL did not accept a connection within 10s");
}

/// A separate connection outside any pool, for setup, inspection and
/// sabotage.
pub async fn admin() -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&database_url(), tokio_postgres::NoTls).await.expect("admin connection");
    tokio::task::spawn_local(connection);
    client
}
