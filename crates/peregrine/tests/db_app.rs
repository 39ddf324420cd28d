//! Integration tests for what applications need from `peregrine::db::pg`
//! beyond registered statements (columns by name), against a real
//! PostgreSQL server.
//!
//! They need `DATABASE_URL` (run them through `scripts/test`, or
//! `eval "$(scripts/pg start)"; export DATABASE_URL`). A missing URL fails
//! the tests instead of skipping them, so CI can't pass without a database.

use std::future::Future;
use std::time::Duration;

use peregrine::db::pg::{PgConfig, PgPool};
use peregrine::db::ErrorKind;

fn database_url() -> String {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "DATABASE_URL is not set: run these tests via scripts/test, or start the \
             private cluster with `scripts/pg start` and export the DATABASE_URL it prints"
        ),
    }
}

/// Runs `f` the way a peregrine worker runs tasks: current-thread runtime,
/// inside a `LocalSet`.
fn run_local<F: Future<Output = ()>>(f: F) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    tokio::task::LocalSet::new().block_on(&runtime, f);
}

async fn ready(pool: &PgPool) {
    pool.ready(Duration::from_secs(10))
        .await
        .expect("the database at DATABASE_URL did not accept a connection within 10s");
}

#[test]
fn columns_by_name() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        let stmt =
            config.statement("SELECT $1::int4 AS id, 'hello'::text AS \"Message\", NULL::int4 AS missing");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        let row = pool.query_one(stmt, &[&7i32]).await.expect("query");
        assert_eq!(row.column_names().collect::<Vec<_>>(), ["id", "Message", "missing"]);
        assert_eq!(row.get_by_name::<i32>("id"), 7);
        assert_eq!(row.get_by_name::<&str>("Message"), "hello");
        assert_eq!(row.get_by_name::<&str>("message"), "hello", "case-insensitive fallback");
        assert_eq!(row.get_by_name::<Option<i32>>("missing"), None);
        let err = row.try_get_by_name::<i32>("nope").expect_err("no such column");
        assert_eq!(err.kind(), ErrorKind::Query);
        assert!(err.message().contains("nope"), "{err}");
        let err = row.try_get_by_name::<i32>("Message").expect_err("wrong type");
        assert_eq!(err.kind(), ErrorKind::Query);
    });
}
