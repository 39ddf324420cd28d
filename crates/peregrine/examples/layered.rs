//! What middleware costs: the same JSON handler on a plain route and behind
//! one pass-through `from_fn` layer, to load side by side.
//!
//! ```sh
//! cargo run --release -p peregrine --example layered -- 127.0.0.1:8090
//! peregrine-lab load http://127.0.0.1:8090/plain ...   # and /layered
//! ```
//!
//! A route without middleware answers from the read buffer into the output
//! buffer with no allocation; a layered one copies its request into an
//! `OwnedRequest` and its answer into a `Response` first. The README gives
//! the measured difference.

use peregrine::middleware::{from_fn, Next};
use peregrine::{Json, OwnedRequest, Router, Server};
use serde::Serialize;

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

fn hello() -> Json<Message> {
    Json(Message { message: "Hello, World!" })
}

async fn pass_through(req: OwnedRequest, next: Next) -> peregrine::Response {
    next.run(req).await
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8090".to_owned());
    Server::new().workers(1).serve(addr, |_| async {
        let layered = Router::new().get("/layered", hello).layer(from_fn(pass_through));
        Router::new().get("/plain", hello).merge(layered)
    })
}
