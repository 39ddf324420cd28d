//! `peregrine-lab verify`: checks a running server against the shared SPEC.md.
//!
//! ```text
//! peregrine-lab verify http://127.0.0.1:8080
//! peregrine-lab verify http://127.0.0.1:8080 --database-url postgres://u:p@host/hello_world --slow
//! peregrine-lab verify http://peer:8080 --config peer.toml --path plaintext=/pt --only tfb,bad-input
//! ```
//!
//! This module owns the command line, the run order and the report (`PASS`,
//! `FAIL name: expected X, got Y`, `SKIP`, then a summary; the exit status is
//! non-zero on any failure). The work is split by concern:
//! - the raw-socket HTTP/1.1 client is the rig's ([`crate::rig::client`]);
//! - [`checks`]: pure checks over one parsed response;
//! - [`html`]: the fortunes document (IMF-fixdate validation is
//!   [`http_probe::date`]'s);
//! - [`config`]: per-server paths and parameter names;
//! - [`tfb`], [`arena`], [`arena_rules`], [`static_files`], [`badinput`], [`db`]: which requests to send for the
//!   TFB test types, the HttpArena profiles, the bad-input battery, and the
//!   database-side checks (`pg_stat_statements`, persisted updates);
//! - [`ws`]: the WebSocket conformance battery (Autobahn's categories),
//!   and [`ws_h2`]: WebSocket over HTTP/2 (RFC 8441) at the same endpoint.

mod arena;
mod arena_rules;
mod badinput;
mod checks;
mod config;
mod db;
mod html;
mod static_files;
#[cfg(test)]
mod testserver;
mod tfb;
mod ws;
mod ws_h2;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::rig::client::Target;
use checks::Check;
use config::Routes;

/// Groups of checks that `--only` can select.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The seven TFB test types, the parameter rule, Date, keep-alive.
    Tfb,
    /// Pipelined requests on one connection.
    Pipelining,
    /// HttpArena baseline, json processing, upload and static files.
    Arena,
    /// Malformed, oversized and smuggling requests.
    BadInput,
    /// The RFC 9110/9112 strictness corpus (request line, Host, header
    /// fields, request smuggling), each case with the answer the RFCs
    /// call for.
    Strict,
    /// The WebSocket conformance battery (Autobahn's categories) at `/ws`.
    Ws,
    /// Database-side checks (needs --database-url; PostgreSQL or SQLite).
    Db,
    /// Slow and idle clients (long; also enabled by --slow).
    Slow,
}

#[derive(clap::Args)]
pub struct VerifyArgs {
    /// Base URL of the server under test, e.g. http://127.0.0.1:8080.
    url: String,
    /// The server's database: a PostgreSQL DSN enables the checks that
    /// compare the World table and `pg_stat_statements` with what was
    /// served; `sqlite://PATH` (a SQLite file, such as peregrine-tfb's
    /// `--data-dir`/peregrine.db) the World table check alone.
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// TOML file with `[paths]` and `[params]` tables overriding route paths
    /// and parameter names (an empty path skips its checks).
    #[arg(long, alias = "paths", value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Override one route path, e.g. `--path plaintext=/pt` (repeatable;
    /// names: plaintext json db queries fortunes updates cached_queries
    /// baseline json_items upload).
    #[arg(long = "path", value_name = "NAME=PATH")]
    path: Vec<String>,
    /// Override one query parameter name, e.g. `--param cached_queries=n`
    /// (names: queries updates cached_queries multiplier).
    #[arg(long = "param", value_name = "NAME=PARAM")]
    param: Vec<String>,
    /// Run only these groups (comma separated).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Group>,
    /// Also run the slow-header and idle-client checks (they take up to
    /// the larger of --slow-timeout and --idle-timeout).
    #[arg(long)]
    slow: bool,
    /// How long the slow-header check waits for the server to disconnect.
    #[arg(long, default_value_t = 15, value_name = "SECS")]
    slow_timeout: u64,
    /// How long the idle-client check (connect, send nothing) waits for the
    /// server to disconnect. Idle keep-alive timeouts are usually longer
    /// than header timeouts (nginx: 75 s), hence the separate default.
    #[arg(long, default_value_t = 75, value_name = "SECS")]
    idle_timeout: u64,
    /// Timeout of every socket read and write.
    #[arg(long, default_value_t = 5, value_name = "SECS")]
    timeout: u64,
    /// How long to wait for the server to close a connection it must close.
    #[arg(long, default_value_t = 3, value_name = "SECS")]
    close_wait: u64,
    /// Concurrent connections for the `/queries` statement-count load.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
}

/// Everything a check needs to know about the server under test.
pub struct Ctx {
    pub target: Target,
    pub routes: Routes,
    pub close_wait: Duration,
    pub slow_timeout: Duration,
    pub idle_timeout: Duration,
    pub concurrency: usize,
}

/// Prints results as they come and counts them.
#[derive(Default)]
pub struct Reporter {
    passed: usize,
    failed: usize,
    skipped: usize,
}

impl Reporter {
    fn line(&self, text: &str) {
        // Rust's stdout is line-buffered even into a pipe, so progress shows
        // while long checks run; `println!` also lets tests capture it.
        println!("{text}");
    }

    pub fn pass(&mut self, name: &str) {
        self.passed += 1;
        self.line(&format!("PASS {name}"));
    }

    pub fn fail(&mut self, name: &str, why: &str) {
        self.failed += 1;
        self.line(&format!("FAIL {name}: {why}"));
    }

    pub fn skip(&mut self, name: &str, why: &str) {
        self.skipped += 1;
        self.line(&format!("SKIP {name}: {why}"));
    }

    pub fn record(&mut self, name: &str, result: Check) {
        match result {
            Ok(()) => self.pass(name),
            Err(why) => self.fail(name, &why),
        }
    }

    /// `Some(path)` if the route is configured, else records a `SKIP`.
    pub fn route<'a>(&mut self, label: &str, path: &'a str) -> Option<&'a str> {
        if path.is_empty() {
            self.skip(label, "path not configured");
            None
        } else {
            Some(path)
        }
    }

    fn summary(&self) {
        self.line(&format!("{} passed, {} failed, {} skipped", self.passed, self.failed, self.skipped));
    }
}

pub fn run(args: VerifyArgs) -> ExitCode {
    let ctx = match build_ctx(&args) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("verify: {e}");
            return ExitCode::from(2);
        }
    };
    let only = args.only.clone();
    let slow = args.slow;
    let enabled = move |g: Group| {
        if only.is_empty() {
            g != Group::Slow || slow
        } else {
            only.contains(&g)
        }
    };
    let rep = run_checks(&ctx, &args.url, &enabled, args.database_url.as_deref());
    if rep.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs the enabled groups in order and prints the summary.
fn run_checks(ctx: &Ctx, url: &str, enabled: &dyn Fn(Group) -> bool, database_url: Option<&str>) -> Reporter {
    let mut rep = Reporter::default();
    rep.line(&format!("verifying {url} ({})", ctx.target.addr));
    if let Err(e) = ctx.target.connect() {
        rep.fail("connect", &e);
        rep.summary();
        return rep;
    }
    // The Date-advances check needs two samples two seconds apart; taking
    // the first now and the second at the end hides the wait behind the
    // other checks.
    let probe = enabled(Group::Tfb).then(|| tfb::DateProbe::start(ctx));
    if enabled(Group::Tfb) {
        // The statement-count check runs the concurrent load on PostgreSQL.
        let counts_statements = database_url.is_some_and(|url| db::sqlite_path(url).is_none());
        tfb::run(ctx, &mut rep, !counts_statements);
    }
    if enabled(Group::Pipelining) {
        tfb::pipelining(ctx, &mut rep);
    }
    if enabled(Group::Arena) {
        arena::run(ctx, &mut rep);
        arena_rules::run(ctx, &mut rep);
        static_files::run(ctx, &mut rep);
    }
    if enabled(Group::BadInput) {
        badinput::run(ctx, &mut rep);
    }
    if enabled(Group::Strict) {
        badinput::strict(ctx, &mut rep);
    }
    if enabled(Group::Ws) {
        ws::run(ctx, &mut rep);
    }
    if enabled(Group::Db) {
        match database_url {
            Some(dsn) => db::run(ctx, &mut rep, dsn),
            None => rep.skip("database checks", "no --database-url given"),
        }
    }
    if enabled(Group::Slow) {
        badinput::slow(ctx, &mut rep);
    }
    if let Some(probe) = probe {
        probe.finish(ctx, &mut rep);
    }
    rep.summary();
    rep
}

fn build_ctx(args: &VerifyArgs) -> Result<Ctx, String> {
    let toml_text = match &args.config {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?),
        None => None,
    };
    let routes = Routes::load(toml_text.as_deref(), &args.path, &args.param)?;
    let target = Target::parse(&args.url, Duration::from_secs(args.timeout.max(1)))?;
    Ok(Ctx {
        target,
        routes,
        close_wait: Duration::from_secs(args.close_wait),
        slow_timeout: Duration::from_secs(args.slow_timeout),
        idle_timeout: Duration::from_secs(args.idle_timeout),
        concurrency: args.concurrency.max(1),
    })
}
