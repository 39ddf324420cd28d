//! A small service showing the handler styles: sync, async, typed
//! extraction, JSON in and out, a streamed body, and per-worker state.
//!
//! ```sh
//! cargo run --release -p peregrine --example hello
//! curl localhost:8080/hello/world
//! curl -d '{"a":2,"b":3}' localhost:8080/add
//! curl 'localhost:8080/slow?ms=200'
//! curl --data-binary @some-file localhost:8080/count
//! ```

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use peregrine::{Body, Error, Json, Path, Query, Router, Server, State};
use serde::{Deserialize, Serialize};

/// Per-worker state: no locks, because each worker has its own.
#[derive(Clone, Default)]
struct Counters {
    hits: Rc<Cell<u64>>,
}

#[derive(Deserialize)]
struct Operands {
    a: i64,
    b: i64,
}

#[derive(Serialize)]
struct Sum {
    sum: i64,
}

#[derive(Deserialize)]
struct Delay {
    ms: Option<u64>,
}

fn hello(Path(name): Path<String>, State(counters): State<Counters>) -> String {
    counters.hits.set(counters.hits.get() + 1);
    format!("Hello, {name}! (request {} on this worker)\n", counters.hits.get())
}

fn add(Json(ops): Json<Operands>) -> Result<Json<Sum>, Error> {
    let sum = ops.a.checked_add(ops.b).ok_or_else(|| Error::bad_request("overflow"))?;
    Ok(Json(Sum { sum }))
}

async fn slow(Query(delay): Query<Delay>) -> String {
    let ms = delay.ms.unwrap_or(100).min(5_000);
    tokio::time::sleep(Duration::from_millis(ms)).await;
    format!("waited {ms} ms\n")
}

async fn count(body: Body) -> Result<String, Error> {
    Ok(format!("{} bytes\n", body.count().await?))
}

fn main() -> std::io::Result<()> {
    Server::new().serve("127.0.0.1:8080", |worker| async move {
        println!("worker {} of {} ready", worker.index + 1, worker.count);
        Router::with_state(Counters::default())
            .get("/hello/{name}", hello)
            .post("/add", add)
            .get_async("/slow", slow)
            .post_stream("/count", count)
    })
}
