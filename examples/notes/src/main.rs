//! `notes [--addr HOST:PORT] [--workers N]`. `NOTES_TOKEN` is the bearer
//! token of the API (default `dev-token`), `DATABASE_URL=postgres://...`
//! selects PostgreSQL, `NOTES_DB` the SQLite file otherwise (default
//! `notes.db`), `NOTES_STATIC` the directory of `index.html`.

use std::path::PathBuf;

use peregrine::Server;
use tracing_subscriber::EnvFilter;

fn main() -> std::io::Result<()> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let addr = flag("--addr").unwrap_or_else(|| "0.0.0.0:8080".to_owned());
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let token = env("NOTES_TOKEN", "dev-token");
    let static_dir = PathBuf::from(env("NOTES_STATIC", concat!(env!("CARGO_MANIFEST_DIR"), "/static")));
    let url = std::env::var("DATABASE_URL").ok();
    let database =
        notes::Database::open(url.as_deref(), env("NOTES_DB", "notes.db")).map_err(std::io::Error::other)?;

    let mut server = Server::new();
    if let Some(workers) = flag("--workers").and_then(|n| n.parse().ok()) {
        server = server.workers(workers);
    }
    tracing::info!(%addr, "serving notes");
    server.serve(addr, move |_worker| {
        let (database, token, static_dir) = (database.clone(), token.clone(), static_dir.clone());
        async move { Ok::<_, peregrine::db::Error>(notes::app(database.connect().await?, &token, &static_dir)) }
    })
}
