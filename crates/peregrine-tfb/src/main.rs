//! `peregrine-tfb`: the TechEmpower Framework Benchmarks and HttpArena test
//! application, written only against peregrine's public API.

mod dataset;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;

use clap::Parser;
use peregrine::http::writer::ResponseWriter;
use peregrine::{Body, Content, Error, IntoResponse, Json, Path, Query, Request, Router, Server, StatusCode};
use serde::{Deserialize, Serialize};

/// Serves the TechEmpower test types and the HttpArena profiles.
#[derive(Parser, Debug)]
#[command(name = "peregrine-tfb", version, about, long_about = None)]
struct Cli {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080")]
    addr: SocketAddr,
    /// Worker threads (default: the CPUs this process may run on).
    #[arg(long)]
    workers: Option<usize>,
    /// Pin each worker thread to its own CPU.
    #[arg(long)]
    pin: bool,
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// Per-worker state.
#[derive(Clone)]
struct App {
    dataset: Rc<Vec<dataset::Item>>,
}

/// A plain-text integer, formatted without allocating.
struct Number(i64);

impl IntoResponse for Number {
    fn into_response(self) -> peregrine::Response {
        peregrine::Response::with_body("text/plain", self.0.to_string().into_bytes())
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        let mut digits = itoa::Buffer::new();
        w.write(StatusCode::OK, "text/plain", [], digits.format(self.0).as_bytes());
    }
}

/// `/baseline11`: the sum of the integer query parameters, plus the integer
/// body of a POST.
fn baseline(req: &Request<'_>) -> Result<Number, Error> {
    let mut sum: i64 = 0;
    for (_, value) in req.query_pairs() {
        if let Ok(n) = value.parse::<i64>() {
            sum = sum.checked_add(n).ok_or_else(|| Error::bad_request("sum overflows"))?;
        }
    }
    let body = req.body();
    if !body.is_empty() {
        let text = std::str::from_utf8(body).map_err(|_| Error::bad_request("body is not an integer"))?;
        let n: i64 = text.trim().parse().map_err(|_| Error::bad_request("body is not an integer"))?;
        sum = sum.checked_add(n).ok_or_else(|| Error::bad_request("sum overflows"))?;
    }
    Ok(Number(sum))
}

#[derive(Deserialize)]
struct Multiplier {
    m: Option<i64>,
}

fn build_router(dataset: Rc<Vec<dataset::Item>>) -> Router<App> {
    Router::with_state(App { dataset })
        .get("/plaintext", || Content("text/plain", "Hello, World!"))
        .get("/json", || Json(Message { message: "Hello, World!" }))
        .get("/baseline11", baseline)
        .post("/baseline11", baseline)
        .get(
            "/json/{count}",
            |Path(count): Path<usize>,
             Query(q): Query<Multiplier>,
             peregrine::State(app): peregrine::State<App>| {
                if count == 0 {
                    return Err(Error::bad_request("count must be at least 1"));
                }
                Ok(Json(dataset::Processed { items: app.dataset, count, m: q.m.unwrap_or(1) }))
            },
        )
        .post_stream("/upload", |body: Body| async move { body.count().await.map(|n| Number(n as i64)) })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    // Each worker parses its own copy (it is small); check once up front
    // so a broken build fails here with a clear message.
    if let Err(e) = dataset::load() {
        {
            eprintln!("peregrine-tfb: the embedded dataset is invalid: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut server = Server::new();
    if let Some(n) = cli.workers {
        server = server.workers(n);
    }
    server.config_mut().pin_workers = cli.pin;
    tracing::info!(addr = %cli.addr, "peregrine-tfb listening");
    let result = server.serve(cli.addr, move |_worker| async move {
        build_router(Rc::new(dataset::load().unwrap_or_default()))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("peregrine-tfb: {e}");
            ExitCode::FAILURE
        }
    }
}
