//! HttpArena's echo-ws on tokio-tungstenite, as its echo-server example
//! writes it: `accept_async` per connection on a `#[tokio::main]`
//! runtime, and the read half forwarded into the write half, text and
//! binary messages only (tungstenite answers pings and closes itself).
//! It serves the echo on any path.
//!
//! `--addr HOST:PORT` (default 0.0.0.0:8080), `--workers N` (tokio worker
//! threads; default: one per available CPU).

use futures_util::{future, StreamExt, TryStreamExt};
use tokio::net::{TcpListener, TcpStream};

async fn echo(stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else { return };
    let (write, read) = ws.split();
    let _ = read.try_filter(|m| future::ready(m.is_text() || m.is_binary())).forward(write).await;
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() -> std::io::Result<()> {
    let addr = arg("--addr").unwrap_or_else(|| "0.0.0.0:8080".into());
    let workers = arg("--workers")
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()?.block_on(async {
        let listener = TcpListener::bind(&addr).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            tokio::spawn(echo(stream));
        }
    })
}
