//! Deployment: several `peregrine-tfb` processes behind a load balancer
//! share one PostgreSQL and one Redis (docs/deploy.md). A write through one
//! instance must invalidate the crud cache for all of them, and Redis going
//! away must never fail a request.
//!
//! `two_instances_share_the_crud_cache_through_redis` needs `DATABASE_URL`
//! and `REDIS_URL` (`scripts/test` starts both private servers and sets
//! them) and fails rather than skip without them.
//! `redis_outage_falls_back_to_the_database` runs a redis-server of its own
//! (installed by `scripts/redis start`), so it can kill and restart it
//! without disturbing anything else.

mod common;

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::{free_port, required_env, Server};

/// Fewer PostgreSQL connections than the default: see arena_pg.rs.
const MAX_CONN: (&str, &str) = ("DATABASE_MAX_CONN", "4");

#[test]
fn two_instances_share_the_crud_cache_through_redis() {
    let db = required_env("DATABASE_URL", "`scripts/pg start` and export the DATABASE_URL it prints");
    let redis = required_env("REDIS_URL", "`scripts/redis start` and export the REDIS_URL it prints");
    let env = [("DATABASE_URL", db.as_str()), ("REDIS_URL", redis.as_str()), MAX_CONN];
    let first = Server::start("deploy-a", &env);
    let second = Server::start("deploy-b", &env);
    first.wait_db_ready();
    second.wait_db_ready();
    wait_for_cache(&first, 9_001);
    wait_for_cache(&second, 9_002);

    let id = 10_000 + std::process::id() % 40_000;
    let path = format!("/crud/items/{id}");
    // A fill through one instance is a hit through the other.
    let filled = second.get(&path);
    assert_eq!((filled.status, filled.header("x-cache")), (200, Some("MISS")), "{filled:?}");
    common::checks::hit_after_fill(&second, &first, &path);

    // A PUT through the first makes the next GET through the second a MISS
    // that returns the new value.
    let name = format!("deployed-{}", std::process::id());
    let put = first.send_json("PUT", &path, &format!(r#"{{"name":"{name}","price":123,"quantity":9}}"#));
    assert_eq!(put.status, 200, "{put:?}");
    let after = second.get(&path);
    assert_eq!((after.status, after.header("x-cache")), (200, Some("MISS")), "{after:?}");
    assert_eq!(
        (after.json()["name"].as_str(), after.json()["price"].as_i64()),
        (Some(name.as_str()), Some(123))
    );
    let again = common::checks::hit_after_fill(&second, &first, &path);
    assert_eq!(again.body, after.body);

    // The whole crud battery holds with the cache in Redis too.
    common::checks::crud(&second, 600_000 + i64::from(std::process::id() % 1_000_000) * 7);
}

/// Waits until the instance's workers reach Redis (they connect in the
/// background): two reads in a row of `id` give a HIT.
fn wait_for_cache(server: &Server, id: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        server.get(&format!("/crud/items/{id}"));
        let reply = server.get(&format!("/crud/items/{id}"));
        if reply.header("x-cache") == Some("HIT") {
            return;
        }
        assert!(Instant::now() < deadline, "the cache never answered a HIT: {reply:?}\n{}", server.log());
        thread::sleep(Duration::from_millis(100));
    }
}

/// A redis-server of the test's own on `port`; killed on drop.
struct Redis(Child);

impl Redis {
    fn start(port: u16) -> Redis {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run redis-server ({e}): run scripts/test, or `scripts/redis start` to install it"
                )
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server never listened on {port}");
            thread::sleep(Duration::from_millis(20));
        }
        Redis(child)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn redis_outage_falls_back_to_the_database() {
    let port = free_port();
    let url = format!("redis://127.0.0.1:{port}/");
    let redis = Redis::start(port);
    // The embedded SQLite default: this test is about Redis only.
    let server = Server::start("redis-outage", &[("REDIS_URL", &url)]);
    wait_for_cache(&server, 77);

    drop(redis); // killed mid-test
    for round in 0..20 {
        let id = 100 + round;
        let started = Instant::now();
        let read = server.get(&format!("/crud/items/{id}"));
        assert_eq!((read.status, read.header("x-cache")), (200, Some("MISS")), "round {round}: {read:?}");
        let put = server.send_json(
            "PUT",
            &format!("/crud/items/{id}"),
            r#"{"name":"during the outage","price":5,"quantity":5}"#,
        );
        assert_eq!(put.status, 200, "round {round}: {put:?}");
        let read = server.get(&format!("/crud/items/{id}"));
        assert_eq!((read.status, read.json()["name"].as_str()), (200, Some("during the outage")));
        assert!(started.elapsed() < Duration::from_secs(1), "round {round} took {:?}", started.elapsed());
    }
    assert!(server.log().contains("falling back to the database"), "failure not logged:\n{}", server.log());

    // Redis comes back on the same port: the workers reconnect by
    // themselves and the cache serves hits again.
    let _redis = Redis::start(port);
    wait_for_cache(&server, 78);
}
