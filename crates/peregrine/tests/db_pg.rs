//! Integration tests for `peregrine::db::pg::PgPool` and its wire-protocol
//! driver against a real PostgreSQL server: queries, batching (many
//! statements, one implicit transaction), an error failing only its own
//! statement, writes answered after their commit, timeouts, fail-fast while
//! the database is unreachable, and recovery after connections are killed.
//!
//! They need `DATABASE_URL` (run them through `scripts/test`, or
//! `eval "$(scripts/pg start)"; export DATABASE_URL`). A missing URL fails
//! the tests instead of skipping them, so CI can't pass without a database.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use peregrine::db::pg::{PgConfig, PgPool};
use peregrine::db::{Error, ErrorKind, SqlState};

mod pg_common;

use pg_common::{admin, database_url, ready, run_local, tagged_url};

#[test]
fn prepared_queries_work() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        let add = config.statement("SELECT $1::int4 + 1");
        let echo = config.statement("SELECT $1::text");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        let row = pool.query_one(add, &[&41i32]).await.expect("add");
        assert_eq!(row.get::<i32>(0), 42);
        let conn = pool.get().expect("live connection");
        let rows = conn.query(echo, &[&"héllo"]).await.expect("echo");
        assert_eq!(rows[0].get::<&str>(0), "héllo");
        // Unregistered admin queries over the simple protocol.
        let rows =
            conn.simple_query("SELECT count(*), NULL FROM generate_series(1, 5)").await.expect("simple");
        assert_eq!(rows, [vec![Some("5".to_string()), None]]);
        conn.batch_execute("SELECT 1; SELECT 2").await.expect("script");
        let err = conn.batch_execute("SELECT nonsense_column").await.expect_err("bad script");
        assert_eq!(err.kind(), ErrorKind::Query, "{err}");
        assert_eq!(err.code(), Some(SqlState::UNDEFINED_COLUMN), "{err}");
        assert_eq!(pool.query_one(add, &[&1i32]).await.expect("after script error").get::<i32>(0), 2);
    });
}

#[test]
fn text_columns_borrow_as_str_and_refuse_null_and_other_types() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        let row_of = config.statement("SELECT $1::text, $2::varchar, NULL::text, 7::int4, 'x'::name");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        for (text, varchar) in [("fortune: No such file", "plain"), ("フレームワークのベンチマーク", "héllo")]
        {
            let row = pool.query_one(row_of, &[&text, &varchar]).await.expect("row");
            assert_eq!(row.try_get_str(0).expect("text"), text);
            assert_eq!(row.try_get_str(1).expect("varchar"), varchar);
            assert_eq!(row.try_get_str(4).expect("name"), "x");
            // The same answer as the generic path.
            assert_eq!(row.try_get_str(0).expect("text"), row.get::<&str>(0));
            let null = row.try_get_str(2).expect_err("NULL is not a &str");
            assert!(null.to_string().contains("NULL"), "{null}");
            let int = row.try_get_str(3).expect_err("an int4 is not text");
            assert!(int.to_string().contains("int4"), "{int}");
            let absent = row.try_get_str(5).expect_err("no sixth column");
            assert!(absent.to_string().contains("does not exist"), "{absent}");
        }
    });
}

#[test]
fn query_errors_are_500_and_slow_queries_time_out() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        config.timeout = Duration::from_millis(200);
        let div = config.statement("SELECT 1 / $1::int4");
        let sleep = config.statement("SELECT pg_sleep($1::float8)");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        let err = pool.query_one(div, &[&0i32]).await.expect_err("division by zero");
        assert_eq!(err.kind(), ErrorKind::Query, "{err}");
        assert!(err.message().contains("division by zero"), "{err}");
        assert_eq!(err.code(), Some(SqlState::DIVISION_BY_ZERO), "{err}");
        assert_eq!(err.http_status(), 500);

        let started = Instant::now();
        let err = pool.query_one(sleep, &[&2.0f64]).await.expect_err("must time out");
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        assert_eq!(err.http_status(), 503);
        assert!(started.elapsed() < Duration::from_secs(1));

        // The connection stays usable: the late answer is discarded in order.
        let row = pool.query_one(div, &[&1i32]).await.expect("after timeout");
        assert_eq!(row.get::<i32>(0), 1);
    });
}

#[test]
fn concurrent_queries_pipeline_on_one_connection() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let echo = config.statement("SELECT $1::int4, pg_backend_pid()");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        let conn = pool.get().expect("live connection");
        let ids: Vec<i32> = (1..=200).collect();
        // All 200 futures exist before any is awaited, so their requests are
        // queued on the client together and written as one pipeline.
        let conn = &conn;
        let rows = try_join_all(ids.iter().map(|id| async move { conn.query_one(echo, &[id]).await }))
            .await
            .expect("200 concurrent queries");
        let got: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        assert_eq!(got, ids, "answers arrive in request order");
        let pid: i32 = rows[0].get(1);
        assert!(rows.iter().all(|r| r.get::<i32>(1) == pid), "one backend served all");

        // The same through independent tasks sharing the pool.
        let tasks: Vec<_> = (0..200i32)
            .map(|i| {
                let pool = pool.clone();
                tokio::task::spawn_local(async move {
                    let row = pool.query_one(echo, &[&i]).await?;
                    Ok::<i32, Error>(row.get(0))
                })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            let value = task.await.expect("task").expect("query");
            assert_eq!(value, i as i32);
        }
    });
}

/// Answers that span many reads: rows cut across read boundaries, a row
/// larger than the read buffer's growth step, and thousands of pipelined
/// answers behind them, every byte checked. The driver takes the read buffer
/// whole and decodes messages from their headers, carrying a cut message
/// over to the next read.
#[test]
fn answers_cut_across_reads_arrive_whole() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let many = config
            .statement("SELECT g, repeat(chr(65 + g % 26), g % 300) FROM generate_series(1, $1::int4) g");
        let wide = config.statement("SELECT repeat('w', $1::int4), $1::int4");
        let echo = config.statement("SELECT $1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        let conn = pool.get().expect("live connection");
        let conn = &conn;

        let rows = conn.query(many, &[&3000i32]).await.expect("3,000 rows");
        assert_eq!(rows.len(), 3000);
        for (i, row) in rows.iter().enumerate() {
            let g = i as i32 + 1;
            assert_eq!(row.get::<i32>(0), g);
            let text: &str = row.get(1);
            let letter = char::from(b'A' + (g % 26) as u8);
            assert!(
                text.len() == (g % 300) as usize && text.chars().all(|c| c == letter),
                "row {g}: {text:?}"
            );
        }

        // Wide rows and small ones in one pipeline, so the small answers
        // sit behind (and between) messages cut by the reads.
        let widths = [100_000i32, 1, 40_000, 16_384, 0, 250_000];
        let wides = try_join_all(widths.iter().map(|w| async move { conn.query_one(wide, &[w]).await }));
        let echoes = try_join_all((0..2000i32).map(|i| async move { conn.query_one(echo, &[&i]).await }));
        let (wides, echoes) = futures_util::future::try_join(wides, echoes).await.expect("pipelined reads");
        for (row, &w) in wides.iter().zip(&widths) {
            let text: &str = row.get(0);
            assert_eq!((text.len(), row.get::<i32>(1)), (w as usize, w));
            assert!(text.bytes().all(|b| b == b'w'));
        }
        let got: Vec<i32> = echoes.iter().map(|r| r.get(0)).collect();
        assert_eq!(got, (0..2000).collect::<Vec<_>>());
    });
}

#[test]
fn get_or_wait_waits_for_the_first_connection_only() {
    run_local(async {
        // A fresh pool has no connection yet: get() refuses at once, while
        // get_or_wait() waits for the first one.
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let stmt = config.statement("SELECT 1::int4");
        let pool = PgPool::new(config).expect("pool");
        assert_eq!(pool.get().err().map(|e| e.kind()), Some(ErrorKind::Unavailable));
        let conn = pool.get_or_wait().await.expect("first connection");
        let row = conn.query_one(stmt, &[]).await.expect("query");
        assert_eq!(row.get::<i32>(0), 1);

        // Never reachable: get_or_wait gives up after the call timeout,
        // not at once and not later.
        let port =
            TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("ephemeral port").port();
        let mut config = PgConfig::new(format!("postgres://u:p@127.0.0.1:{port}/db"));
        config.timeout = Duration::from_millis(300);
        let pool = PgPool::new(config).expect("pool");
        let started = Instant::now();
        assert_eq!(pool.get_or_wait().await.err().map(|e| e.kind()), Some(ErrorKind::Unavailable));
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(1), "took {took:?}");
    });
}

#[test]
fn unreachable_database_fails_fast() {
    run_local(async {
        // A port nobody listens on: bind one, then release it.
        let port =
            TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("ephemeral port").port();
        let mut config = PgConfig::new(format!("postgres://u:p@127.0.0.1:{port}/db"));
        config.connections = 2;
        let stmt = config.statement("SELECT 1");
        let started = Instant::now();
        let pool = PgPool::new(config).expect("creating a pool must not need the database");

        assert_eq!(pool.get().err().map(|e| e.kind()), Some(ErrorKind::Unavailable));
        let err = pool.query_one(stmt, &[]).await.expect_err("no database");
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert_eq!(err.http_status(), 503);
        assert!(started.elapsed() < Duration::from_millis(100), "failed fast");

        // Let the background tasks fail and back off a few times; calls
        // keep failing fast meanwhile.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        assert_eq!(pool.query_one(stmt, &[]).await.err().map(|e| e.kind()), Some(ErrorKind::Unavailable));
        assert!(started.elapsed() < Duration::from_millis(50));
        assert_eq!(pool.live_connections(), 0);
        assert_eq!(
            pool.ready(Duration::from_millis(100)).await.map_err(|e| e.kind()),
            Err(ErrorKind::Unavailable)
        );
    });
}

#[test]
fn pool_reconnects_after_backends_are_terminated() {
    run_local(async {
        let (url, app_name) = tagged_url("reconnect");
        let mut config = PgConfig::new(url);
        config.connections = 2;
        let pid = config.statement("SELECT pg_backend_pid()");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        // Wait for both slots, so both get killed below.
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.live_connections() < 2 {
            assert!(Instant::now() < deadline, "second connection never came up");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let before: i32 = pool.query_one(pid, &[]).await.expect("before").get(0);

        let admin = admin().await;
        let killed = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app_name],
            )
            .await
            .expect("terminate");
        assert_eq!(killed.len(), 2, "both pooled backends found");

        // Calls may fail while the slots reconnect, but only as 503s, and
        // service must come back on its own within a few seconds.
        let started = Instant::now();
        let after = loop {
            match pool.query_one(pid, &[]).await {
                Ok(row) => break row.get::<i32>(0),
                Err(e) => {
                    assert!(e.is_transient(), "unexpected error while reconnecting: {e}");
                    assert!(started.elapsed() < Duration::from_secs(5), "no recovery in 5s");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        };
        assert_ne!(after, before, "served by a new backend");
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.live_connections() < 2 {
            assert!(Instant::now() < deadline, "not all slots reconnected");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

#[test]
fn concurrent_reads_share_one_sync() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        // transaction_timestamp() is the start of the implicit transaction,
        // which each Sync ends: one value per batch, not per statement.
        let stmt = config.statement("SELECT $1::int4, transaction_timestamp()::text");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        let conn = pool.get().expect("live connection");
        let conn = &conn;
        for round in 0..3 {
            let ids: Vec<i32> = (0..200).collect();
            let rows = try_join_all(ids.iter().map(|id| async move { conn.query_one(stmt, &[id]).await }))
                .await
                .expect("200 reads");
            let got: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
            assert_eq!(got, ids, "round {round}: answers in order");
            let mut starts: Vec<String> = rows.iter().map(|r| r.get(1)).collect();
            starts.dedup();
            assert_eq!(starts.len(), 1, "round {round}: 200 reads queued together ran in one transaction");
        }
    });
}

/// While a connection has its limit of batches out (here a slow statement,
/// plus one batch behind it by default), reads queued over many scheduler
/// ticks wait on the client and go out together, as one batch (one implicit
/// transaction, so one `transaction_timestamp()`), when the slow one is
/// answered. Without the limit every tick sends a batch of its own.
#[test]
fn reads_queued_behind_the_batches_in_flight_go_out_as_one() {
    run_local(async {
        // (limit, distinct transactions among the ten reads)
        for (limit, expected) in [(Some(1), 1), (None, 2), (Some(usize::MAX), 10)] {
            let mut config = PgConfig::new(database_url());
            config.connections = 1;
            if let Some(limit) = limit {
                config.batches_in_flight = limit;
            }
            let slow = config.statement("SELECT 1::int4 FROM pg_sleep(0.3)");
            let read = config.statement("SELECT $1::int4, transaction_timestamp()::text");
            let pool = PgPool::new(config).expect("pool");
            ready(&pool).await;
            let conn = pool.get().expect("live connection");

            let slow_call = {
                let conn = conn.clone();
                tokio::task::spawn_local(async move { conn.query_one(slow, &[]).await })
            };
            tokio::time::sleep(Duration::from_millis(20)).await;
            let mut reads = Vec::new();
            for i in 0..10i32 {
                let conn = conn.clone();
                reads.push(tokio::task::spawn_local(async move {
                    let row = conn.query_one(read, &[&i]).await?;
                    Ok::<(i32, String), Error>((row.get(0), row.get(1)))
                }));
                // Each read is queued in a tick of its own.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            slow_call.await.expect("task").expect("slow statement");
            let mut transactions = Vec::new();
            for (i, task) in reads.into_iter().enumerate() {
                let (value, started) = task.await.expect("task").expect("read");
                assert_eq!(value, i as i32, "limit {limit:?}: answers in order");
                transactions.push(started);
            }
            transactions.dedup();
            assert_eq!(
                transactions.len(),
                expected,
                "limit {limit:?}: distinct transactions among ten reads queued one per tick: {transactions:?}"
            );
        }
    });
}

#[test]
fn an_error_fails_only_its_own_statement() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let div = config.statement("SELECT 10 / $1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        let conn = pool.get().expect("live connection");
        let (a, b, c) = tokio::join!(
            conn.query_one(div, &[&1i32]),
            conn.query_one(div, &[&0i32]),
            conn.query_one(div, &[&2i32])
        );
        assert_eq!(a.expect("answered before the error").get::<i32>(0), 10);
        let b = b.expect_err("division by zero");
        assert_eq!(b.kind(), ErrorKind::Query, "{b}");
        assert!(b.message().contains("division by zero"), "{b}");
        assert_eq!(b.code(), Some(SqlState::DIVISION_BY_ZERO), "{b}");
        // The server skipped the rest of the batch; the driver sent the
        // skipped statement again, so its caller gets its own answer, not
        // the error.
        assert_eq!(c.expect("skipped after the error, then sent again").get::<i32>(0), 5);
        // The next batch, on the same connection, is unaffected.
        let rows = try_join_all((1..=5).map(|n| {
            let conn = &conn;
            async move { conn.query_one(div, &[&n]).await }
        }))
        .await
        .expect("next batch");
        assert_eq!(rows.iter().map(|r| r.get::<i32>(0)).collect::<Vec<_>>(), [10, 5, 3, 2, 2]);
        assert!(!conn.is_closed());
        // Parameter mistakes fail before anything is sent.
        assert_eq!(conn.query_one(div, &[]).await.err().map(|e| e.kind()), Some(ErrorKind::Query));
        assert_eq!(conn.query_one(div, &[&"text"]).await.err().map(|e| e.kind()), Some(ErrorKind::Query));
        assert_eq!(conn.query_one(div, &[&5i32]).await.expect("still fine").get::<i32>(0), 2);
    });
}

#[test]
fn writes_are_answered_after_their_commit_and_alone() {
    run_local(async {
        let admin = admin().await;
        let table = format!("peregrine_wire_write_{}", std::process::id());
        admin
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table};
                 CREATE TABLE {table} (id int PRIMARY KEY,
                     parent int REFERENCES {table} (id) DEFERRABLE INITIALLY DEFERRED)"
            ))
            .await
            .expect("test table");

        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let insert = config.write_statement(format!("INSERT INTO {table} (id, parent) VALUES ($1, $2)"));
        let div = config.statement("SELECT 10 / $1::int4");
        let copy_out = config.statement(format!("COPY {table} TO STDOUT"));
        let copy_in = config.statement(format!("COPY {table} (id) FROM STDIN"));
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        let conn = pool.get().expect("live connection");
        let none: Option<i32> = None;

        // A failing read queued in the same tick neither rolls the write
        // back nor is failed by it.
        let params: [&(dyn peregrine::db::pg::types::ToSql + Sync); 2] = [&1i32, &none];
        let (bad, written, good) = tokio::join!(
            conn.query_one(div, &[&0i32]),
            conn.execute(insert, &params),
            conn.query_one(div, &[&5i32])
        );
        assert!(bad.is_err());
        assert_eq!(written.expect("insert"), 1);
        assert_eq!(good.expect("read after the write").get::<i32>(0), 2);
        // Answered means committed: another connection sees it at once.
        let seen = admin.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.expect("count");
        assert_eq!(seen.get::<_, i64>(0), 1);

        // A write whose commit fails (a deferred foreign key is checked at
        // commit, after the statement itself succeeded) reports the error.
        let err = conn.execute(insert, &[&2i32, &Some(99i32)]).await.expect_err("commit must fail");
        assert_eq!(err.kind(), ErrorKind::Query, "{err}");
        assert!(err.message().contains("foreign key"), "{err}");
        assert_eq!(err.code(), Some(SqlState::FOREIGN_KEY_VIOLATION), "{err}");
        let seen = admin.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.expect("count");
        assert_eq!(seen.get::<_, i64>(0), 1, "nothing of the failed write is stored");

        // Many writes at once: each its own transaction, all committed.
        let writes = try_join_all((10..60).map(|id| {
            let conn = &conn;
            async move { conn.execute(insert, &[&id, &Some(1i32)]).await }
        }))
        .await
        .expect("50 writes");
        assert!(writes.iter().all(|&n| n == 1));
        let seen = admin.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.expect("count");
        assert_eq!(seen.get::<_, i64>(0), 51);
        pool.execute(copy_out, &[]).await.expect("COPY TO STDOUT runs (its data is not kept)");
        let err = pool.execute(copy_in, &[]).await.expect_err("COPY FROM STDIN is refused");
        assert_eq!(err.kind(), ErrorKind::Query, "{err}");
        assert!(err.message().contains("not supported"), "{err}");
        // That connection was dropped; the slot reconnects.
        ready(&pool).await;
        assert_eq!(pool.query_one(div, &[&5i32]).await.expect("reconnected").get::<i32>(0), 2);
        admin.batch_execute(&format!("DROP TABLE {table}")).await.expect("drop test table");
    });
}

/// One connection with the client-side call `timeout`. The server-side
/// statement_timeout is the pool's own; a longer one (`server_ms`) is set in
/// the URL so the client-side deadline is what fires.
fn client_deadline_config(tag: &str, timeout: Duration, server_ms: u64) -> PgConfig {
    let (url, _) = tagged_url(tag);
    let sep = if url.contains('?') { '&' } else { '?' };
    let mut config = PgConfig::new(format!("{url}{sep}options=-c%20statement_timeout%3D{server_ms}"));
    config.connections = 1;
    config.timeout = timeout;
    config
}

#[test]
fn a_timed_out_batch_does_not_disturb_later_ones() {
    run_local(async {
        let mut config = client_deadline_config("timeout", Duration::from_millis(200), 1000);
        let sleep = config.statement("SELECT pg_sleep($1::float8)::text, $2::int4");
        let echo = config.statement("SELECT $1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        let conn = pool.get().expect("live connection");

        let started = Instant::now();
        let (slow, fast) =
            tokio::join!(conn.query_one(sleep, &[&0.35f64, &1i32]), conn.query_one(echo, &[&7i32]));
        assert_eq!(slow.expect_err("slow").kind(), ErrorKind::Timeout);
        assert_eq!(fast.expect_err("queued behind the slow one").kind(), ErrorKind::Timeout);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(150) && took < Duration::from_millis(340), "took {took:?}");

        // Queued while the late answers are still on their way: answered
        // in order once they have been read and dropped (within its own
        // deadline, since the sleep ends 150 ms after the timeout).
        let row = conn.query_one(echo, &[&8i32]).await.expect("after the timeout");
        assert_eq!(row.get::<i32>(0), 8);
        assert!(started.elapsed() >= Duration::from_millis(300), "waited for the late answers");
        assert!(!conn.is_closed());
    });
}

/// Work held back behind the batches in flight keeps the call timeout from
/// when it was held: when the server stops answering, it fails within its
/// own deadline, not one counted from when it was finally sent.
#[test]
fn held_back_work_times_out_within_its_own_deadline() {
    run_local(async {
        let mut config = client_deadline_config("held", Duration::from_millis(300), 2000);
        config.batches_in_flight = 1;
        let sleep = config.statement("SELECT pg_sleep($1::float8)::text");
        let echo = config.statement("SELECT $1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        let conn = pool.get().expect("live connection");

        let slow = {
            let conn = conn.clone();
            tokio::task::spawn_local(async move { conn.query_one(sleep, &[&0.8f64]).await })
        };
        tokio::time::sleep(Duration::from_millis(150)).await;
        // Held until the slow batch's deadline (300 ms after it was sent,
        // 150 ms from now); its own ends 300 ms from now. A deadline counted
        // from the send would end 450 ms from now.
        let queued = Instant::now();
        let err = conn.query_one(echo, &[&7i32]).await.expect_err("held behind the slow statement");
        let waited = queued.elapsed();
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert!(
            waited >= Duration::from_millis(250) && waited < Duration::from_millis(390),
            "failed {waited:?} after it was queued"
        );
        assert_eq!(slow.await.expect("task").expect_err("slow").kind(), ErrorKind::Timeout);

        // The sleep ends about 800 ms in; once its late answer and the
        // echo's have been read and dropped, the connection serves again.
        tokio::time::sleep(Duration::from_millis(450)).await;
        let row = conn.query_one(echo, &[&8i32]).await.expect("after the timeouts");
        assert_eq!(row.get::<i32>(0), 8);
        assert!(!conn.is_closed());
    });
}

/// A TCP proxy in front of the real server, to cut every connection at
/// once (an outage) without stopping the shared cluster.
struct Proxy {
    port: u16,
    tasks: std::rc::Rc<std::cell::RefCell<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(port: u16) -> Proxy {
        let config: tokio_postgres::Config = database_url().parse().expect("DATABASE_URL");
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
            _ => panic!("the proxy test needs a TCP DATABASE_URL"),
        };
        let upstream = (host, config.get_ports().first().copied().unwrap_or(5432));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("proxy port");
        let port = listener.local_addr().expect("proxy address").port();
        let tasks = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let inner = tasks.clone();
        let accept = tokio::task::spawn_local(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                inner.borrow_mut().push(tokio::task::spawn_local(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                }));
            }
        });
        tasks.borrow_mut().push(accept);
        Proxy { port, tasks }
    }

    fn url(&self) -> String {
        let config: tokio_postgres::Config = database_url().parse().expect("DATABASE_URL");
        let user = config.get_user().expect("user");
        let password = String::from_utf8_lossy(config.get_password().expect("password")).into_owned();
        let db = config.get_dbname().expect("database");
        format!("postgres://{user}:{password}@127.0.0.1:{}/{db}", self.port)
    }

    /// Drops the listener and every proxied connection.
    fn cut(&self) {
        for task in self.tasks.borrow_mut().drain(..) {
            task.abort();
        }
    }
}

#[test]
fn an_outage_fails_pending_calls_at_once_and_service_returns() {
    run_local(async {
        let proxy = Proxy::start(0).await;
        let mut config = PgConfig::new(proxy.url());
        config.connections = 2;
        let sleep = config.statement("SELECT pg_sleep($1::float8)::text");
        let one = config.statement("SELECT 1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        assert_eq!(pool.query_one(one, &[]).await.expect("through the proxy").get::<i32>(0), 1);

        // A call in flight when the connection drops fails with
        // Unavailable at once, not at its timeout (2 s) or never.
        let conn = pool.get().expect("live connection");
        let started = Instant::now();
        let pending = conn.query_one(sleep, &[&1.0f64]);
        let cut = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            proxy.cut();
        };
        let (result, ()) = tokio::join!(pending, cut);
        assert_eq!(result.expect_err("connection cut").kind(), ErrorKind::Unavailable);
        assert!(started.elapsed() < Duration::from_millis(800), "failed at once: {:?}", started.elapsed());

        // While the server is away, calls fail fast.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let started = Instant::now();
        assert_eq!(pool.query_one(one, &[]).await.err().map(|e| e.kind()), Some(ErrorKind::Unavailable));
        assert!(started.elapsed() < Duration::from_millis(50));
        assert_eq!(pool.live_connections(), 0);

        // Back on the same address: the pool reconnects by itself.
        let _proxy = Proxy::start(proxy.port).await;
        let started = Instant::now();
        loop {
            match pool.query_one(one, &[]).await {
                Ok(row) => break assert_eq!(row.get::<i32>(0), 1),
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
                    assert!(started.elapsed() < Duration::from_secs(5), "no recovery in 5s");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    });
}

#[test]
fn sqlstate_codes_tell_a_duplicate_key_from_a_syntax_error() {
    run_local(async {
        let admin = admin().await;
        let table = format!("peregrine_sqlstate_{}", std::process::id());
        admin
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int CONSTRAINT {table}_pk PRIMARY KEY)"
            ))
            .await
            .expect("test table");
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let insert = config.write_statement(format!("INSERT INTO {table} (id) VALUES ($1)"));
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;

        assert_eq!(pool.execute(insert, &[&1i32]).await.expect("first insert"), 1);
        let dup = pool.execute(insert, &[&1i32]).await.expect_err("duplicate key");
        assert_eq!((dup.kind(), dup.code()), (ErrorKind::Query, Some(SqlState::UNIQUE_VIOLATION)), "{dup}");
        assert_eq!(dup.http_status(), 500);
        let server = std::error::Error::source(&dup)
            .and_then(|s| s.downcast_ref::<peregrine::db::pg::ServerError>())
            .expect("the server's error is the source");
        assert_eq!(server.constraint(), Some(format!("{table}_pk").as_str()));
        assert_eq!(server.table(), Some(table.as_str()));
        assert!(server.detail().is_some_and(|d| d.contains("(id)=(1)")), "{server:?}");

        let syntax = pool.batch_execute("SELEC 1").await.expect_err("syntax error");
        assert_eq!(
            (syntax.kind(), syntax.code()),
            (ErrorKind::Query, Some(SqlState::SYNTAX_ERROR)),
            "{syntax}"
        );
        assert_ne!(syntax.code(), dup.code());
        admin.batch_execute(&format!("DROP TABLE {table}")).await.expect("drop test table");
    });
}

#[test]
fn one_callers_error_never_fails_another_callers_statement() {
    run_local(async {
        let mut config = PgConfig::new(database_url());
        config.connections = 1;
        let div = config.statement("SELECT 100 / $1::int4");
        let pool = PgPool::new(config).expect("pool");
        ready(&pool).await;
        // Independent tasks (requests) whose statements are queued in the
        // same scheduler tick, so they share one pipeline and one Sync;
        // every seventh divides by zero.
        for round in 0..3 {
            let tasks: Vec<_> = (0..60i32)
                .map(|i| {
                    let pool = pool.clone();
                    let divisor = if i % 7 == 3 { 0 } else { 1 + i % 5 };
                    tokio::task::spawn_local(async move { (divisor, pool.query_one(div, &[&divisor]).await) })
                })
                .collect();
            for task in tasks {
                let (divisor, result) = task.await.expect("task");
                if divisor == 0 {
                    let err = result.expect_err("division by zero");
                    assert_eq!(err.code(), Some(SqlState::DIVISION_BY_ZERO), "round {round}: {err}");
                } else {
                    let row = result.unwrap_or_else(|e| {
                        panic!("round {round}: 100 / {divisor} failed because another caller's statement did: {e}")
                    });
                    assert_eq!(row.get::<i32>(0), 100 / divisor, "round {round}");
                }
            }
        }
    });
}

#[test]
fn plaintext_sslmodes_connect_and_tls_sslmodes_are_refused() {
    run_local(async {
        let url = database_url();
        let sep = if url.contains('?') { '&' } else { '?' };
        for mode in ["disable", "allow", "prefer"] {
            let mut config = PgConfig::new(format!("{url}{sep}sslmode={mode}"));
            let one = config.statement("SELECT 1::int4");
            let pool = PgPool::new(config).expect(mode);
            ready(&pool).await;
            assert_eq!(pool.query_one(one, &[]).await.expect(mode).get::<i32>(0), 1, "{mode}");
        }
        for mode in ["require", "verify-ca", "verify-full"] {
            // Refused when the pool is created, before any connection: a
            // pool that connected in plaintext would be a silent downgrade.
            let err = PgPool::new(PgConfig::new(format!("{url}{sep}sslmode={mode}"))).expect_err(mode);
            assert_eq!(err.kind(), ErrorKind::Config, "{mode}: {err}");
            assert!(err.message().starts_with(&format!("sslmode={mode} is not supported: ")), "{err}");
        }
    });
}
