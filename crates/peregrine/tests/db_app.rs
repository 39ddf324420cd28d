//! Integration tests for what applications need from `peregrine::db::pg`
//! beyond registered statements: transactions on a connection of their
//! own, columns by name, SQL text prepared on first use, and SQLSTATE codes
//! through the pool, against a real PostgreSQL server.
//!
//! They need `DATABASE_URL` (run them through `scripts/test`, or
//! `eval "$(scripts/pg start)"; export DATABASE_URL`). A missing URL fails
//! the tests instead of skipping them, so CI can't pass without a database.

use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use peregrine::db::pg::{PgConfig, PgPool, ServerError, Statement};
use peregrine::db::{ErrorKind, SqlState};

mod pg_common;

use pg_common::{admin, database_url, ready, run_local, tagged_url};

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

async fn count(admin: &tokio_postgres::Client, table: &str) -> i64 {
    admin.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.expect("count").get(0)
}

#[test]
fn commit_persists_while_rollback_and_drop_discard() {
    run_local(async {
        let admin = admin().await;
        let table = table(&admin, "commit").await;
        let mut config = PgConfig::new(database_url());
        let insert = config.statement(format!("INSERT INTO {table} (id, note) VALUES ($1, $2)"));
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        let tx = pool.transaction().await.expect("begin");
        assert_eq!(tx.execute(insert, &[&1i32, &"registered"]).await.expect("insert"), 1);
        let sql = format!("INSERT INTO {table} (id, note) VALUES ($1, $2)");
        assert_eq!(tx.execute(sql.as_str(), &[&2i32, &"sql text"]).await.expect("insert sql"), 1);
        let seen = tx.query_one(format!("SELECT count(*) FROM {table}"), &[]).await.expect("own writes");
        assert_eq!(seen.get::<i64>(0), 2, "a transaction sees its own writes");
        assert_eq!(count(&admin, &table).await, 0, "nobody else does before the commit");
        tx.commit().await.expect("commit");
        assert_eq!(count(&admin, &table).await, 2, "committed");

        let tx = pool.transaction().await.expect("begin");
        tx.execute(insert, &[&3i32, &"rolled back"]).await.expect("insert");
        tx.rollback().await.expect("rollback");
        assert_eq!(count(&admin, &table).await, 2, "rollback discards");

        {
            let tx = pool.transaction().await.expect("begin");
            tx.execute(insert, &[&4i32, &"dropped"]).await.expect("insert");
            // Dropped without commit.
        }
        // The next transaction reuses the connection; the queued ROLLBACK
        // runs before its BEGIN, so it starts clean.
        let tx = pool.transaction().await.expect("begin after drop");
        let rows = tx.query(format!("SELECT id FROM {table} ORDER BY id"), &[]).await.expect("select");
        let ids: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(ids, [1, 2], "the dropped transaction's write is gone");
        tx.commit().await.expect("commit");
        assert_eq!(count(&admin, &table).await, 2);

        // A transaction dropped while its query is in flight rolls back too.
        let tx = pool.transaction().await.expect("begin");
        let insert_then_drop = async {
            tx.execute(insert, &[&5i32, &"in flight"]).await.expect("insert");
            std::future::pending::<()>().await;
        };
        let _ = tokio::time::timeout(Duration::from_millis(50), insert_then_drop).await;
        drop(tx);
        let tx = pool.transaction().await.expect("begin");
        let row = tx.query_opt(format!("SELECT id FROM {table} WHERE id = 5"), &[]).await.expect("q");
        assert!(row.is_none(), "the dropped transaction's write is gone");
        tx.commit().await.expect("commit");
        assert_eq!(count(&admin, &table).await, 2);
    });
}

#[test]
fn an_error_fails_the_transaction_until_rollback() {
    run_local(async {
        let admin = admin().await;
        let table = table(&admin, "failed").await;
        let mut config = PgConfig::new(database_url());
        let insert = config.statement(format!("INSERT INTO {table} (id, note) VALUES ($1, $2)"));
        let one = config.statement("SELECT 1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        let tx = pool.transaction().await.expect("begin");
        tx.execute(insert, &[&1i32, &"a"]).await.expect("insert");
        let dup = tx.execute(insert, &[&1i32, &"a"]).await.expect_err("duplicate key");
        assert_eq!(dup.code(), Some(SqlState::UNIQUE_VIOLATION), "{dup}");
        let after = tx.query_one(one, &[]).await.expect_err("the transaction has failed");
        assert_eq!(
            (after.kind(), after.code()),
            (ErrorKind::Query, Some(SqlState::IN_FAILED_SQL_TRANSACTION))
        );
        let commit = tx.commit().await.expect_err("committing a failed transaction");
        assert_eq!(
            (commit.kind(), commit.code()),
            (ErrorKind::Query, Some(SqlState::IN_FAILED_SQL_TRANSACTION))
        );
        assert_eq!(count(&admin, &table).await, 0, "nothing of it committed");

        // Rollback recovers, and the connection serves the next transaction.
        let tx = pool.transaction().await.expect("begin");
        let _ = tx.query_one("SELECT 1 / 0", &[]).await.expect_err("division by zero");
        assert_eq!(
            tx.query_one(one, &[]).await.err().and_then(|e| e.code()),
            Some(SqlState::IN_FAILED_SQL_TRANSACTION)
        );
        tx.rollback().await.expect("rollback of a failed transaction");
        let tx = pool.transaction().await.expect("begin");
        assert_eq!(tx.query_one(one, &[]).await.expect("usable again").get::<i32>(0), 1);
        tx.execute(insert, &[&2i32, &"b"]).await.expect("insert");
        tx.commit().await.expect("commit");
        assert_eq!(count(&admin, &table).await, 1);
    });
}

#[test]
fn transactions_are_isolated_and_leave_pipelined_reads_alone() {
    run_local(async {
        let admin = admin().await;
        let table = table(&admin, "isolation").await;
        admin.execute(&format!("INSERT INTO {table} VALUES (0, 'committed')"), &[]).await.expect("seed");
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let insert = config.statement(format!("INSERT INTO {table} (id, note) VALUES ($1, $2)"));
        let count_stmt = config.statement(format!("SELECT count(*) FROM {table}"));
        let echo = config.statement("SELECT $1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        let a = pool.transaction().await.expect("begin a");
        let b = pool.transaction().await.expect("begin b");
        a.execute(insert, &[&1i32, &"a"]).await.expect("a inserts");
        b.execute(insert, &[&2i32, &"b"]).await.expect("b inserts");
        assert_eq!(a.query_one(count_stmt, &[]).await.expect("a counts").get::<i64>(0), 2);
        assert_eq!(b.query_one(count_stmt, &[]).await.expect("b counts").get::<i64>(0), 2);
        // Other requests on the shared connection: pipelined as before,
        // seeing only committed rows, not blocked by the open transactions.
        let conn = pool.get().expect("shared connection");
        let conn = &conn;
        let started = Instant::now();
        let rows = try_join_all((0..100i32).map(|i| async move { conn.query_one(echo, &[&i]).await }))
            .await
            .expect("pipelined reads");
        assert_eq!(rows.iter().map(|r| r.get::<i32>(0)).collect::<Vec<_>>(), (0..100).collect::<Vec<_>>());
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(pool.query_one(count_stmt, &[]).await.expect("shared counts").get::<i64>(0), 1);

        a.commit().await.expect("commit a");
        assert_eq!(b.query_one(count_stmt, &[]).await.expect("b counts").get::<i64>(0), 3, "read committed");
        b.rollback().await.expect("rollback b");
        assert_eq!(pool.query_one(count_stmt, &[]).await.expect("final").get::<i64>(0), 2);

        // All transaction connections busy: the next one waits, up to the
        // call timeout.
        let mut config = PgConfig::new(database_url());
        config.transaction_connections = 1;
        config.timeout = Duration::from_millis(200);
        let small = PgPool::new(config).expect("pool");
        ready(&small).await;
        let held = small.transaction().await.expect("begin");
        let err = small.transaction().await.expect_err("no connection free");
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        let waiting = tokio::task::spawn_local({
            let small = small.clone();
            async move {
                let tx = small.transaction().await?;
                tx.commit().await
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "waits while the only connection is taken");
        drop(held);
        waiting.await.expect("task").expect("the released connection is reused");

        // Zero transaction connections: transactions are refused, clearly.
        let mut config = PgConfig::new(database_url());
        config.transaction_connections = 0;
        let none = PgPool::new(config).expect("pool");
        let err = none.transaction().await.expect_err("transactions disabled");
        assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    });
}

#[test]
fn transactions_pipeline_and_survive_a_lost_connection() {
    run_local(async {
        let admin = admin().await;
        let table = table(&admin, "lost").await;
        let (url, app_name) = tagged_url("tx-lost");
        let mut config = PgConfig::new(url);
        let insert = config.statement(format!("INSERT INTO {table} (id, note) VALUES ($1, 'x')"));
        let pid = config.statement("SELECT pg_backend_pid()");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        // Statements of one transaction pipeline like any others.
        let tx = pool.transaction().await.expect("begin");
        let tx_pid: i32 = tx.query_one(pid, &[]).await.expect("pid").get(0);
        let tx = &tx;
        let inserted = try_join_all((0..50i32).map(|i| async move { tx.execute(insert, &[&i]).await }))
            .await
            .expect("concurrent inserts");
        assert_eq!(inserted.iter().sum::<u64>(), 50);
        assert_eq!(count(&admin, &table).await, 0);

        // Its backend dies mid-transaction: the caller learns it, nothing
        // was committed, and the next transaction gets a new connection,
        // also when asked for before the old one's loss was noticed.
        admin.execute("SELECT pg_terminate_backend($1)", &[&tx_pid]).await.expect("terminate");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let err = tx.query_one(pid, &[]).await.expect_err("connection lost");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
        assert_eq!(count(&admin, &table).await, 0);
        for _ in 0..2 {
            let tx = pool.transaction().await.expect("begin on a new connection");
            let new_pid: i32 = tx.query_one(pid, &[]).await.expect("pid").get(0);
            assert_ne!(new_pid, tx_pid);
            tx.commit().await.expect("commit");
            admin
                .query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                    &[&app_name],
                )
                .await
                .expect("terminate");
        }
        let tx = pool.transaction().await.expect("begin right after the loss");
        tx.execute(insert, &[&100i32]).await.expect("insert");
        tx.commit().await.expect("commit");
        assert_eq!(count(&admin, &table).await, 1);
    });
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

/// Not a benchmark, a sanity check of the costs the module doc states:
/// prints the time of a transaction (BEGIN, one statement, COMMIT: three
/// round trips on a reused connection) against the same statement on the
/// shared connection, and the cost of first use of SQL text.
#[test]
fn transaction_and_first_use_costs() {
    run_local(async {
        let admin = admin().await;
        let table = table(&admin, "costs").await;
        let mut config = PgConfig::new(database_url());
        let update = config.write_statement(format!("INSERT INTO {table} (id, note) VALUES ($1, 'x')"));
        let one = config.statement("SELECT 1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        const N: i32 = 200;

        let started = Instant::now();
        drop(pool.transaction().await.expect("first transaction opens a connection"));
        let open = started.elapsed();
        let started = Instant::now();
        for i in 0..N {
            pool.execute(update, &[&i]).await.expect("write");
        }
        let plain = started.elapsed() / N as u32;
        let started = Instant::now();
        for i in N..2 * N {
            let tx = pool.transaction().await.expect("begin");
            tx.execute(update, &[&i]).await.expect("write");
            tx.commit().await.expect("commit");
        }
        let in_tx = started.elapsed() / N as u32;
        let read = pool.get().expect("connection");
        read.query_one("SELECT 1::int4", &[]).await.expect("warm up");
        let started = Instant::now();
        for _ in 0..N {
            pool.query_one(one, &[]).await.expect("read");
        }
        let read_alone = started.elapsed() / N as u32;
        let started = Instant::now();
        for _ in 0..N {
            let tx = pool.transaction().await.expect("begin");
            tx.query_one(one, &[]).await.expect("read");
            tx.commit().await.expect("commit");
        }
        let read_in_tx = started.elapsed() / N as u32;
        let conn = pool.get().expect("connection");
        let started = Instant::now();
        for i in 0..N {
            conn.query_one(format!("SELECT {i}::int4"), &[]).await.expect("first use");
        }
        let first_use = started.elapsed() / N as u32;
        let started = Instant::now();
        for i in 0..N {
            conn.query_one(format!("SELECT {i}::int4"), &[]).await.expect("cached use");
        }
        let cached = started.elapsed() / N as u32;
        println!(
            "opening a transaction connection: {open:?}; write alone: {plain:?}; \
             write in BEGIN/COMMIT: {in_tx:?}; read alone: {read_alone:?}; read in BEGIN/COMMIT: \
             {read_in_tx:?}; SQL text first use: {first_use:?}; cached: {cached:?}"
        );
        assert_eq!(count(&admin, &table).await, 2 * N as i64);
    });
}
