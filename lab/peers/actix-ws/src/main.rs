//! HttpArena's echo-ws on actix-web with actix-ws, written as actix-ws's
//! README shows: `actix_ws::handle` answers the handshake, and a spawned
//! task echoes text and binary messages, answers pings and closes.
//!
//! `--addr HOST:PORT` (default 0.0.0.0:8080), `--workers N` (default: one
//! per available CPU).

use actix_web::{rt, web, App, Error, HttpRequest, HttpResponse, HttpServer};
use actix_ws::Message;
use futures_util::StreamExt;

async fn echo(req: HttpRequest, body: web::Payload) -> Result<HttpResponse, Error> {
    let (response, mut session, mut messages) = actix_ws::handle(&req, body)?;
    rt::spawn(async move {
        while let Some(Ok(message)) = messages.next().await {
            let sent = match message {
                Message::Text(text) => session.text(text).await,
                Message::Binary(data) => session.binary(data).await,
                Message::Ping(data) => session.pong(&data).await,
                Message::Close(reason) => {
                    let _ = session.close(reason).await;
                    return;
                }
                _ => Ok(()),
            };
            if sent.is_err() {
                return;
            }
        }
        let _ = session.close(None).await;
    });
    Ok(response)
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let addr = arg("--addr").unwrap_or_else(|| "0.0.0.0:8080".into());
    let workers = arg("--workers")
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    HttpServer::new(|| App::new().route("/ws", web::get().to(echo)))
        .workers(workers)
        .bind(addr)?
        .run()
        .await
}
