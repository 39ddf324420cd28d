//! Integration tests for what applications need from `peregrine::db::pg`
//! beyond registered statements: columns by name, SQL text prepared on
//! first use, and SQLSTATE codes
//! through the pool, against a real PostgreSQL server.
//!
//! They need `DATABASE_URL` (run them through `scripts/test`, or
//! `eval "$(scripts/pg start)"; export DATABASE_URL`). A missing URL fails
//! the tests instead of skipping them, so CI can't pass without a database.

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use peregrine::db::pg::{PgConfig, PgPool, ServerError, Statement};
use peregrine::db::{ErrorKind, SqlState};

fn database_url() -> String {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "DATABASE_URL is not set: run these tests via scripts/test, or start the \
             private cluster with `scripts/pg start` and export the DATABASE_URL it prints"
        ),
    }
}

/// The URL with a distinct application_name, so a test can find (and kill)
/// exactly its own backends while other tests share the server.
fn tagged_url(tag: &str) -> (String, String) {
    let url = database_url();
    let name = format!("peregrine-app-{tag}-{}", std::process::id());
    let sep = if url.contains('?') { '&' } else { '?' };
    (format!("{url}{sep}application_name={name}"), name)
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

/// A separate connection outside any pool, for setup and inspection.
async fn admin() -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(&database_url(), tokio_postgres::NoTls).await.expect("admin connection");
    tokio::task::spawn_local(connection);
    client
}

/// A fresh table `name_<pid>` with an integer primary key and a text column.
async fn table(admin: &tokio_postgres::Client, name: &str) -> String {
    let table = format!("peregrine_app_{name}_{}", std::process::id());
    admin
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {table}; \
             CREATE TABLE {table} (id int CONSTRAINT {table}_pk PRIMARY KEY, note text NOT NULL)"
        ))
        .await
        .expect("test table");
    table
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

        // SQL text rows carry their names too.
        let row = pool.query_one("SELECT 1::int8 AS one, 2::int8", &[]).await.expect("sql text");
        assert_eq!(row.column_names().collect::<Vec<_>>(), ["one", "int8"]);
        assert_eq!(row.get_by_name::<i64>("one"), 1);
    });
}

#[test]
fn duplicate_keys_report_their_sqlstate_and_constraint() {
    run_local(async {
        let admin = admin().await;
        let table = table(&admin, "dup").await;
        let pool = PgPool::new(PgConfig::new(database_url())).expect("pool");
        ready(&pool).await;
        let sql = format!("INSERT INTO {table} (id, note) VALUES ($1, $2)");
        pool.execute(&sql, &[&1i32, &"first"]).await.expect("first insert");
        let dup = pool.execute(&sql, &[&1i32, &"again"]).await.expect_err("duplicate key");
        assert_eq!((dup.kind(), dup.code()), (ErrorKind::Query, Some(SqlState::UNIQUE_VIOLATION)), "{dup}");
        let server = std::error::Error::source(&dup)
            .and_then(|s| s.downcast_ref::<ServerError>())
            .expect("the server's error is the source");
        assert_eq!(server.constraint(), Some(format!("{table}_pk").as_str()));
    });
}

#[test]
fn sql_text_is_prepared_once_per_connection() {
    run_local(async {
        let (url, app_name) = tagged_url("first-use");
        let mut config = PgConfig::new(url);
        config.connections = 1;
        let one = config.statement("SELECT 1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        let conn = pool.get().expect("connection");
        let sql = "SELECT $1::int4 * 2 AS doubled";
        let prepared_here = |conn: peregrine::db::pg::PgConn| async move {
            let rows = conn
                .simple_query(&format!(
                    "SELECT count(*) FROM pg_prepared_statements WHERE statement = '{sql}'"
                ))
                .await
                .expect("pg_prepared_statements");
            rows[0][0].clone().unwrap_or_default()
        };
        assert_eq!(conn.cached_statements(), 0);
        assert_eq!(prepared_here(conn.clone()).await, "0");

        // First use prepares (one extra round trip), later uses reuse it,
        // also when many run concurrently.
        assert_eq!(conn.query_one(sql, &[&21i32]).await.expect("first use").get::<i32>(0), 42);
        assert_eq!(conn.cached_statements(), 1);
        let c = &conn;
        let rows = try_join_all((0..50i32).map(|i| async move { c.query_one(sql, &[&i]).await }))
            .await
            .expect("cached uses");
        assert_eq!(
            rows.iter().map(|r| r.get::<i32>(0)).collect::<Vec<_>>(),
            (0..50).map(|i| i * 2).collect::<Vec<_>>()
        );
        assert_eq!(pool.query_one(Statement::Sql(sql), &[&5i32]).await.expect("via pool").get::<i32>(0), 10);
        assert_eq!(conn.cached_statements(), 1, "not prepared again");
        assert_eq!(prepared_here(conn.clone()).await, "1", "one server-side statement");

        // Wrong parameter count: refused before anything is sent.
        let err = conn.query_one(sql, &[]).await.expect_err("missing parameter");
        assert_eq!(err.kind(), ErrorKind::Query, "{err}");

        // A syntax error fails its caller alone, with its SQLSTATE, and
        // caches nothing; the connection and calls batched with it go on.
        let (bad, good, cached) =
            tokio::join!(conn.query("SELEC 1", &[]), conn.query_one(one, &[]), conn.query_one(sql, &[&1i32]));
        let bad = bad.expect_err("syntax error");
        assert_eq!((bad.kind(), bad.code()), (ErrorKind::Query, Some(SqlState::SYNTAX_ERROR)), "{bad}");
        assert_eq!(good.expect("registered statement beside it").get::<i32>(0), 1);
        assert_eq!(cached.expect("cached statement beside it").get::<i32>(0), 2);
        assert_eq!(conn.cached_statements(), 1);
        let err = conn.query_one("SELECT nope_column", &[]).await.expect_err("undefined column");
        assert_eq!(err.code(), Some(SqlState::UNDEFINED_COLUMN), "{err}");
        assert_eq!(conn.query_one(sql, &[&4i32]).await.expect("still fine").get::<i32>(0), 8);

        // Reconnecting starts with an empty cache; first use prepares again.
        let admin = admin().await;
        admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app_name],
            )
            .await
            .expect("terminate");
        let started = Instant::now();
        let fresh = loop {
            match pool.get() {
                Ok(c) if !c.is_closed() && c.query_one(one, &[]).await.is_ok() => break c,
                _ => {
                    assert!(started.elapsed() < Duration::from_secs(5), "no reconnect in 5s");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        assert_eq!(fresh.cached_statements(), 0, "a new connection has no cache");
        assert_eq!(prepared_here(fresh.clone()).await, "0");
        assert_eq!(fresh.query_one(sql, &[&3i32]).await.expect("prepared again").get::<i32>(0), 6);
        assert_eq!(fresh.cached_statements(), 1);
    });
}

#[test]
fn the_statement_cache_is_bounded() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        let conn = pool.get().expect("connection");
        for i in 0..300i32 {
            let row =
                conn.query_one(format!("SELECT {i}::int4 AS n"), &[]).await.expect("distinct statement");
            assert_eq!(row.get_by_name::<i32>("n"), i);
            // Keep the first one hot: least recently used goes first.
            conn.query_one("SELECT 0::int4 AS n", &[]).await.expect("hot statement");
        }
        assert_eq!(conn.cached_statements(), 256);
        let rows = conn
            .simple_query("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'q%'")
            .await
            .expect("pg_prepared_statements");
        assert_eq!(rows[0][0].as_deref(), Some("256"), "evicted statements are closed on the server");
        let hot = conn
            .simple_query(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT 0::int4 AS n'",
            )
            .await
            .expect("pg_prepared_statements");
        assert_eq!(hot[0][0].as_deref(), Some("1"), "the hot statement stayed");
        // Evicted statements are prepared again when used again.
        assert_eq!(conn.query_one("SELECT 1::int4 AS n", &[]).await.expect("re-prepared").get::<i32>(0), 1);
    });
}
