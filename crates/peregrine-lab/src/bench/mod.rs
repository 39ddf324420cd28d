//! `peregrine-lab bench`: side-by-side benchmarks of the servers described in
//! `lab/servers.toml`, driven by real `wrk`.
//!
//! This module owns the command line and the run plan. Each test runs at
//! TechEmpower's load levels (see `levels`); at each level, each round runs
//! every selected server once, in turn (A, B, A, B, ...), so slow drift of
//! the machine falls on all servers alike. Each run starts the server fresh,
//! pinned to the server CPU, warms it up, then measures one wrk run pinned to
//! the client CPU while reading the server's CPU time from `/proc`. The
//! pieces live in submodules:
//!
//! - `config`: the servers file;
//! - `levels`: which connection counts and query counts each test runs at;
//! - `load`: the wrk run TechEmpower's harness would make for a test;
//! - `records`: run records and per-level summaries over rounds;
//! - `composite`: the TFB-style weighted score;
//! - `chart`: one SVG chart per test;
//! - `progress`: the status line while running;
//! - `report`: result lines, the Markdown report and the JSON document;
//! - `versus`: the report's section on one server against the best of its
//!   peers and the floors (`--subject`).
//!
//! Starting and stopping servers, running wrk, reading `/proc`, raising the
//! open-files limit and the statistics come from [`crate::rig`], shared with
//! `stress` and `verify`.
//!
//! HttpArena profiles run at HttpArena's connection counts as far as the
//! open-files limit allows (a note says when one is scaled down). For the
//! TFB tests and profiles that use the database, the CPU time of the
//! PostgreSQL cluster at `DATABASE_URL` ([`crate::rig::dbcpu`]) is read
//! around each measured run too, when it runs on this machine.
//!
//! `--report-from FILE` skips running: it reads a results file back and
//! writes its report and charts again.

mod chart;
mod composite;
mod config;
mod levels;
mod load;
mod progress;
mod records;
mod report;
mod versus;

use crate::rig::arena::{self, Profile};
use crate::rig::dbcpu::Postmaster;
use crate::rig::server::{self, RunningServer};
use crate::rig::{fdlimit, procfs, wrk};
use config::ServerSpec;
use levels::{Level, LevelOptions, TestLevels};
use load::{as_wrk_report, run_load_child, TfbClient, TfbRun};
use progress::{Progress, Step};
use records::{Measurement, RunRecord, Summary};
use report::{Database, Results, Settings, NO_DATABASE_WARNING};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The servers file.
    #[arg(long, default_value = "lab/servers.toml")]
    servers: PathBuf,
    /// Benchmark only these servers (comma-separated names), in this order.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// TFB tests to run (comma-separated), each a key of the
    /// servers' `paths`. The default is the seven TFB test types, unless
    /// --profiles is given; the database tests need the servers' database
    /// (e.g. DATABASE_URL from `scripts/pg start`) and are marked as failed
    /// runs for a server that answers them with errors.
    #[arg(long, value_delimiter = ',')]
    tests: Option<Vec<String>>,
    /// The load generator of the TFB tests: `wrk` (one thread, as
    /// TechEmpower runs them) or `lab` (`peregrine-lab load`, the same
    /// requests for 0.7x to 0.8x of wrk's CPU per request, so a server faster
    /// than one wrk thread is measured nearer its own limit). HttpArena
    /// profiles always use the lab's generator.
    #[arg(long, value_enum, default_value_t = TfbClient::Wrk)]
    client: TfbClient,
    /// HttpArena HTTP/1.1 profiles to run under the lab's own load
    /// generator (comma-separated, or `all`): baseline, pipelined,
    /// limited-conn, json, json-comp, upload, static, async-db, crud, api-4.
    /// Each runs at HttpArena's connection counts (up to 16,384), scaled
    /// down only where the open-files limit is lower, with a note; on the
    /// servers whose `[server.arena]` has every endpoint it needs; others
    /// are skipped with a note. Reported as `arena-<profile>`. For
    /// async-db, crud and api-4 (as for the TFB tests db, queries,
    /// fortunes, updates and cached) the PostgreSQL cluster's CPU time
    /// (DATABASE_URL, on this machine) is reported beside the server's.
    #[arg(long, value_delimiter = ',')]
    profiles: Vec<String>,
    /// Rounds per test [default: 3, or 1 with --quick]. Every server runs
    /// once a round, in an order that turns by one each round.
    #[arg(long)]
    rounds: Option<u32>,
    /// Seconds of each measured run [default: 5, or 2 with --quick].
    #[arg(long)]
    duration: Option<u32>,
    /// Seconds of warm-up load before each measured run, 0 for none
    /// [default: 2, or 1 with --quick].
    #[arg(long)]
    warmup: Option<u32>,
    /// Run the connection-level tests at N connections only (default: TFB's
    /// levels), and the query-level tests at N connections (default 256).
    #[arg(long, value_name = "N")]
    connections: Option<u32>,
    /// CPU list the server is pinned to (taskset -c syntax).
    #[arg(long, default_value = "0")]
    server_cpu: String,
    /// CPU list the load generator is pinned to (taskset -c syntax).
    #[arg(long, default_value = "1")]
    client_cpu: String,
    /// Pipelined requests per write for the plaintext test; 1 disables.
    #[arg(long, default_value_t = 16)]
    pipeline: u32,
    /// Run the query-level tests (queries, updates, cached) at this count
    /// only, appended to paths ending in `=` (default: TFB's counts).
    #[arg(long, value_name = "N")]
    queries: Option<u32>,
    /// The server every other server is compared with.
    #[arg(long, default_value = "floor")]
    baseline: String,
    /// Add a section to the report comparing this server, test by test,
    /// with whichever peer did best on each figure (requests/s, requests
    /// per server CPU-second), and with the floors. Peers are all the other
    /// servers run except the floors and the subject's own variants (names
    /// starting with `SUBJECT-`, e.g. `peregrine-epoll`). Also with
    /// --report-from.
    #[arg(long, value_name = "SUBJECT")]
    subject: Option<String>,
    /// The floor responders for --subject (comma-separated): bare servers
    /// that bound what any server can reach and are not counted as peers.
    /// Default: the servers named `floor`, `floor-*`, `c-floor` or
    /// `c-floor-*`.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    floors: Option<Vec<String>>,
    /// Where the JSON results go; the Markdown report is written beside it.
    #[arg(long, default_value = "target/lab/results.json")]
    out: PathBuf,
    /// Short settings for a smoke run: 1 round, 2 s runs, 1 s warm-up, one
    /// level per test (256 connections, 20 queries, count 20).
    #[arg(long)]
    quick: bool,
    /// Skip the servers' build commands.
    #[arg(long)]
    no_build: bool,
    /// Run nothing: read this results file and write its report and charts
    /// again, beside it.
    #[arg(long, value_name = "FILE")]
    report_from: Option<PathBuf>,
}

pub fn run(args: BenchArgs) -> ExitCode {
    if let Some(path) = &args.report_from {
        return match rewrite_report(path, &args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match bench(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("bench: some runs failed; see the report");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Everything fixed for the whole bench, shared by every run.
struct Plan {
    servers: Vec<ServerSpec>,
    settings: Settings,
    pipeline_script: PathBuf,
    logs: PathBuf,
    /// The database whose CPU time the database tests and profiles report.
    postmaster: Option<Postmaster>,
}

/// Reads a results file and writes its report and charts beside it. The
/// composite and the per-round ratios are recomputed, so a file from
/// before a scoring fix gets the current one. `--subject` and `--floors`
/// given now replace the ones the file was written with.
fn rewrite_report(path: &Path, args: &BenchArgs) -> Result<(), String> {
    let mut results = report::read(path)?;
    if args.subject.is_some() {
        results.settings.subject.clone_from(&args.subject);
    }
    if args.floors.is_some() {
        results.settings.floors.clone_from(&args.floors);
    }
    results.composite = composite::compute(&results.settings.servers, &results.summaries);
    // Files from before the bench kept per-round ratios get them here.
    records::add_round_ratios(&mut results.summaries, &results.runs, &results.settings.baseline);
    let written = report::write(path, &results, false)?;
    for p in written {
        println!("bench: wrote {}", p.display());
    }
    Ok(())
}

/// How a server is loaded in one test.
enum Target<'a> {
    /// A TFB test: wrk on this path.
    Wrk(&'a str),
    /// An HttpArena profile: the lab's load generator with these endpoints.
    Arena(&'static Profile),
}

/// How `spec` runs `test`, or why it does not.
fn target<'a>(spec: &'a ServerSpec, test: &str) -> Result<Target<'a>, String> {
    if let Some(profile) = levels::arena_profile(test) {
        let missing = profile.missing(&spec.arena);
        if missing.is_empty() {
            return Ok(Target::Arena(profile));
        }
        return Err(format!("it has no `{}` endpoint under [server.arena]", missing.join("`, `")));
    }
    spec.paths.get(test).map(|p| Target::Wrk(p.as_str())).ok_or_else(|| "it has no path for this test".into())
}

/// How many runs the plan makes: per test and level, a round of every
/// server that has a path (or the endpoints) for the test.
fn count_runs(plan: &Plan) -> usize {
    let s = &plan.settings;
    s.tests
        .iter()
        .map(|t| {
            let servers = plan.servers.iter().filter(|spec| target(spec, &t.test).is_ok()).count();
            t.levels.len() * servers * s.rounds as usize
        })
        .sum()
}

/// Runs the whole bench. `Ok(false)` means it finished but some runs failed.
fn bench(args: BenchArgs) -> Result<bool, String> {
    let plan = prepare(&args)?;
    let s = &plan.settings;
    let runs_total = count_runs(&plan);
    let secs_per_run = s.duration_secs + s.warmup_secs + 1;
    let levels_total: usize = s.tests.iter().map(|t| t.levels.len()).sum();
    println!(
        "bench: {} test(s), {levels_total} level(s), {} server(s), {} round(s): {runs_total} runs, about {}",
        s.tests.len(),
        plan.servers.len(),
        s.rounds,
        progress::format_duration(Duration::from_secs(u64::from(secs_per_run) * runs_total as u64))
    );
    for t in &s.tests {
        for spec in &plan.servers {
            if let Err(why) = target(spec, &t.test) {
                println!("bench: {}: skipping `{}`: {why}", t.test, spec.name);
            }
        }
    }

    let mut progress = Progress::new(runs_total, Duration::from_secs(secs_per_run.into()));
    let mut runs = Vec::new();
    for t in &s.tests {
        for level in &t.levels {
            let label = t.label(level);
            for round in 1..=s.rounds {
                for spec in round_order(&plan.servers, round) {
                    let Ok(how) = target(spec, &t.test) else { continue };
                    let step =
                        Step { test: &t.test, level: &label, server: &spec.name, round, rounds: s.rounds };
                    progress.start(&step);
                    let record = match measure(&plan, spec, &t.test, *level, &how, round) {
                        Ok(record) => record,
                        Err(e) => {
                            progress.clear();
                            return Err(e);
                        }
                    };
                    let line = report::progress_line(&record, s.rounds, t);
                    progress.finish(&line, report::short_result(&record), record.problem().is_some());
                    runs.push(record);
                }
            }
        }
    }
    progress.clear();

    let summaries = summarize_all(&plan, &runs);
    let all_measured = runs.iter().all(|r| r.failure.is_none());
    let results = Results {
        composite: composite::compute(&s.servers, &summaries),
        settings: plan.settings,
        summaries,
        runs,
    };
    println!("\n{}", report::markdown(&results));
    let written = report::write(&args.out, &results, true)?;
    let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    println!("bench: wrote {}", names.join(", "));
    Ok(all_measured)
}

/// One summary per (test, level, server) that ran, in run order, with
/// ratios to the baseline.
fn summarize_all(plan: &Plan, runs: &[RunRecord]) -> Vec<Summary> {
    let mut summaries = Vec::new();
    for t in &plan.settings.tests {
        for level in &t.levels {
            for spec in &plan.servers {
                let mine: Vec<&RunRecord> = runs
                    .iter()
                    .filter(|r| r.test == t.test && r.level == *level && r.server == spec.name)
                    .collect();
                if !mine.is_empty() {
                    summaries.push(records::summarize(&t.test, *level, &spec.name, &mine));
                }
            }
        }
    }
    records::add_ratios(&mut summaries, &plan.settings.baseline);
    records::add_round_ratios(&mut summaries, runs, &plan.settings.baseline);
    summaries
}

/// Checks tools and arguments, loads and selects servers, runs the builds.
fn prepare(args: &BenchArgs) -> Result<Plan, String> {
    for tool in ["wrk", "taskset"] {
        if wrk::find_on_path(tool).is_none() {
            return Err(format!(
                "`{tool}` is not on PATH; run scripts/install-tools (or `apt-get install wrk`)"
            ));
        }
    }
    let all = config::load(&args.servers).map_err(|e| e.to_string())?;
    let servers = select(all, &args.only)?;

    let profiles = arena_profiles(&args.profiles)?;
    let tests: Vec<String> = match &args.tests {
        Some(tests) => tests.iter().filter(|t| !t.is_empty()).cloned().collect(),
        None if profiles.is_empty() => TFB_TESTS.iter().map(|t| t.to_string()).collect(),
        None => Vec::new(),
    };
    if tests.is_empty() && profiles.is_empty() {
        return Err("--tests and --profiles name no test".into());
    }
    for test in &tests {
        if !servers.iter().any(|s| s.paths.contains_key(test)) {
            return Err(format!(
                "no selected server has a path for test `{test}` (add it under [server.paths])"
            ));
        }
    }
    if args.connections == Some(0) || args.queries == Some(0) {
        return Err("--connections and --queries must be at least 1".into());
    }
    let (rounds, duration, warmup) = if args.quick { (1, 2, 1) } else { (3, 5, 2) };
    let rounds = args.rounds.unwrap_or(rounds);
    let duration_secs = args.duration.unwrap_or(duration);
    if rounds == 0 || duration_secs == 0 {
        return Err("--rounds and --duration must be at least 1".into());
    }
    if !servers.iter().any(|s| s.name == args.baseline) {
        println!("note: baseline `{}` is not among the servers run, so no ratios", args.baseline);
    }
    if let Some(subject) = &args.subject {
        // Checked now rather than when the report is written, after the runs.
        let names: Vec<String> = servers.iter().map(|s| s.name.clone()).collect();
        versus::Sides::split(&names, subject, args.floors.as_deref())?;
    }

    // The Lua script ships beside the servers file: lab/wrk/pipeline.lua.
    let lab_dir = args.servers.parent().unwrap_or(Path::new("."));
    let pipeline_script = lab_dir.join("wrk").join("pipeline.lua");
    // Raise the open-files limit first: it decides how many of HttpArena's
    // connections the profiles can open.
    let fd_limit = fdlimit::raise();
    let max_connections = u32::try_from(fd_limit.saturating_sub(FD_SLACK)).unwrap_or(u32::MAX);
    let level_opts = LevelOptions {
        quick: args.quick,
        connections: args.connections,
        queries: args.queries,
        pipeline: args.pipeline.max(1),
    };
    let mut tests: Vec<TestLevels> = tests
        .iter()
        .map(|test| {
            let counted = servers.iter().any(|s| s.paths.get(test).is_some_and(|p| p.ends_with('=')));
            levels::plan(test, counted, &level_opts)
        })
        .collect();
    for profile in profiles {
        let t = levels::arena_plan(profile, &level_opts, max_connections);
        if servers.iter().all(|s| target(s, &t.test).is_err()) {
            println!(
                "bench: {}: no selected server has the endpoint(s) {} under [server.arena]; skipped",
                t.test,
                profile.endpoints.join(", ")
            );
            continue;
        }
        let scaled = profile.scaled(max_connections);
        if args.connections.is_none() && !scaled.is_empty() {
            println!(
                "bench: {}: HttpArena's {} connections scaled down to {max_connections}: the open-files \
                 limit is {fd_limit} (raise `ulimit -Hn` to run them)",
                t.test,
                scaled.iter().map(u32::to_string).collect::<Vec<_>>().join(" and ")
            );
        }
        tests.push(t);
    }
    if tests.is_empty() {
        return Err("no selected server serves any of the profiles asked for".into());
    }
    let pipelined = tests
        .iter()
        .filter(|t| levels::arena_profile(&t.test).is_none())
        .flat_map(|t| &t.levels)
        .any(|l| l.pipeline > 1);
    if pipelined && args.client == TfbClient::Wrk && !pipeline_script.is_file() {
        return Err(format!(
            "pipelined plaintext needs {} (or pass --pipeline 1)",
            pipeline_script.display()
        ));
    }

    // Fail before any run, not halfway through, if a port is already taken.
    for spec in &servers {
        port_free(spec, &args.servers.display().to_string())?;
    }

    let most_connections = tests.iter().flat_map(|t| &t.levels).map(|l| l.connections).max().unwrap_or(0);
    raise_fd_limit(most_connections)?;

    let out_dir = args.out.parent().unwrap_or(Path::new("."));
    let logs = out_dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;

    if !args.no_build {
        run_builds(&servers)?;
    }
    // Only servers some test runs on: a peer the run does not use (nginx
    // in a TFB-only bench) need not be installed. Identical commands (after
    // `{port}` is filled in; `c-floor` and `c-floor-uring` share one) run
    // once, as builds do.
    let mut prepared: Vec<Vec<String>> = Vec::new();
    for spec in servers.iter().filter(|spec| tests.iter().any(|t| target(spec, &t.test).is_ok())) {
        let Some(argv) = spec.prepare_argv() else { continue };
        if prepared.contains(&argv) {
            continue;
        }
        println!("bench: preparing `{}`: {}", spec.name, argv.join(" "));
        server::build(&argv).map_err(|e| format!("server `{}`: {e}", spec.name))?;
        prepared.push(argv);
    }

    let uses_database = tests.iter().any(|t| levels::uses_database(&t.test));
    let database_url = std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty());
    let database = Database::of(uses_database, database_url.as_deref());
    let postmaster = match (&database, &database_url) {
        (Database::Url(_), Some(url)) => find_postmaster(url),
        (Database::Unset, _) => {
            println!("bench: warning: {NO_DATABASE_WARNING}");
            println!("bench: the database's CPU time is not reported");
            None
        }
        _ => None,
    };

    let settings = Settings {
        servers_file: args.servers.display().to_string(),
        servers: servers.iter().map(|s| s.name.clone()).collect(),
        tests,
        rounds,
        duration_secs,
        warmup_secs: args.warmup.unwrap_or(warmup),
        server_cpu: args.server_cpu.clone(),
        client_cpu: args.client_cpu.clone(),
        baseline: args.baseline.clone(),
        wrk_version: wrk::version().unwrap_or_else(|| "wrk (unknown version)".into()),
        tfb_client: args.client,
        clock_ticks_per_second: procfs::clock_ticks_per_second().map_err(|e| e.to_string())?,
        started_unix_secs: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        subject: args.subject.clone(),
        floors: args.floors.clone(),
        database,
    };
    Ok(Plan { servers, settings, pipeline_script, logs, postmaster })
}

/// The PostgreSQL cluster at `url` (`DATABASE_URL`), whose CPU time the
/// database tests and profiles report; `None`, with a note, when it is not
/// on this machine.
fn find_postmaster(url: &str) -> Option<Postmaster> {
    match Postmaster::find(url) {
        Ok(p) => {
            println!("bench: the database's CPU time is PostgreSQL's postmaster {} and its children", p.pid);
            Some(p)
        }
        Err(e) => {
            println!("bench: the database's CPU time is not reported: {e}");
            None
        }
    }
}

/// Open files kept beside the sockets (the process's own files, logs,
/// pipes to children).
const FD_SLACK: u64 = 128;

/// Makes sure `connections` sockets (plus slack for the process's own
/// files) fit under the open-files limit, raising the soft limit to the hard
/// one. wrk and the servers inherit the limit, and wrk at 1024 connections
/// needs more than the common default of 1024.
fn raise_fd_limit(connections: u32) -> Result<(), String> {
    let needed = u64::from(connections) + FD_SLACK;
    let limit = fdlimit::raise();
    if limit < needed {
        return Err(format!(
            "{connections} connections need about {needed} open files, but the limit is {limit}; \
             raise the hard limit (ulimit -Hn) or pass a smaller --connections"
        ));
    }
    Ok(())
}

/// Applies `--only`: those servers in that order, or all of them.
fn select(all: Vec<ServerSpec>, only: &[String]) -> Result<Vec<ServerSpec>, String> {
    let only: Vec<&String> = only.iter().filter(|n| !n.is_empty()).collect();
    if only.is_empty() {
        return Ok(all);
    }
    only.iter()
        .map(|name| {
            all.iter().find(|s| &&s.name == name).cloned().ok_or_else(|| {
                let known: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
                format!("--only: no server named `{name}` (known: {})", known.join(", "))
            })
        })
        .collect()
}

/// Runs each distinct build command once, in server order.
fn run_builds(servers: &[ServerSpec]) -> Result<(), String> {
    let mut done: Vec<&Vec<String>> = Vec::new();
    for spec in servers {
        let Some(build) = &spec.build else { continue };
        if done.contains(&build) {
            continue;
        }
        println!("bench: building `{}`: {}", spec.name, build.join(" "));
        server::build(build).map_err(|e| format!("server `{}`: {e}", spec.name))?;
        done.push(build);
    }
    Ok(())
}

/// One (test, level, server, round) run. Problems of the server under test
/// become a failed record; problems that would spoil every run (port taken)
/// are errors.
fn measure(
    plan: &Plan,
    spec: &ServerSpec,
    test: &str,
    level: Level,
    how: &Target,
    round: u32,
) -> Result<RunRecord, String> {
    let addr = port_free(spec, &plan.settings.servers_file)?;
    let outcome = match how {
        Target::Wrk(path) => measure_started(plan, spec, addr, test, level, path, round),
        Target::Arena(profile) => measure_arena(plan, spec, addr, profile, level, round),
    };
    let (measurement, failure) = match outcome {
        Ok(m) => (Some(m), None),
        Err(e) => (None, Some(e)),
    };
    Ok(RunRecord { test: test.to_string(), level, server: spec.name.clone(), round, measurement, failure })
}

/// The request path at `level`: the count appended to a path ending in `=`.
fn level_path(path: &str, level: &Level) -> String {
    match level.count {
        Some(n) if path.ends_with('=') => format!("{path}{n}"),
        _ => path.to_string(),
    }
}

/// A log file name for one run, e.g. `json-c256-peregrine-r1.log`.
fn log_name(test: &str, level: &Level, server: &str, round: u32) -> String {
    let mut name = format!("{test}-c{}", level.connections);
    if let Some(n) = level.count {
        name.push_str(&format!("-n{n}"));
    }
    if level.pipeline > 1 {
        name.push_str(&format!("-p{}", level.pipeline));
    }
    format!("{name}-{server}-r{round}.log")
}

/// Resolves the server's address and checks nothing listens there yet:
/// something else on the port would silently be measured instead.
fn port_free(spec: &ServerSpec, servers_file: &str) -> Result<SocketAddr, String> {
    let addr = spec.resolve()?;
    if server::accepts(addr) {
        return Err(format!(
            "port {} is already in use before starting `{}`; stop whatever listens there \
             or change its port in {servers_file}",
            spec.port, spec.name
        ));
    }
    Ok(addr)
}

fn measure_started(
    plan: &Plan,
    spec: &ServerSpec,
    addr: SocketAddr,
    test: &str,
    level: Level,
    path: &str,
    round: u32,
) -> Result<Measurement, String> {
    let s = &plan.settings;
    let log = plan.logs.join(log_name(test, &level, &spec.name, round));
    let mut srv =
        RunningServer::start(&spec.name, &spec.run_argv(), &spec.run_env(), addr, &s.server_cpu, &log)?;

    let mut load = TfbRun {
        client: s.tfb_client,
        url: format!("http://{addr}{}", level_path(path, &level)),
        test: test.to_string(),
        connections: level.connections,
        duration_secs: s.warmup_secs,
        cpu: s.client_cpu.clone(),
        pipeline: level.pipeline,
        script: plan.pipeline_script.clone(),
    };
    if s.warmup_secs > 0 {
        load.run().map_err(|e| format!("warm-up: {e}"))?;
    }
    srv.check_alive()?;

    load.duration_secs = s.duration_secs;
    let pid = srv.pid();
    let db = DbClock::start(plan, test);
    let before = procfs::read_cpu(pid).map_err(|e| e.to_string())?;
    let (report, client_cpu) = load.run()?;
    srv.check_alive()?;
    let after = procfs::read_cpu(pid).map_err(|e| e.to_string())?;
    let db_cpu_seconds = db.stop(s.clock_ticks_per_second);
    let rss = procfs::read_peak_rss_kib(pid);
    if let Err(e) = srv.stop() {
        eprintln!("warning: stopping `{}`: {e}", spec.name);
    }
    let cpu = after.since(before);
    let mut m = Measurement::new(report, cpu, s.clock_ticks_per_second, rss);
    m.client_cpu_seconds = Some(client_cpu);
    m.db_cpu_seconds = db_cpu_seconds;
    Ok(m)
}

/// The argv of one `peregrine-lab load` child for `profile` at `level`.
fn arena_argv(
    exe: &Path,
    spec: &ServerSpec,
    addr: SocketAddr,
    profile: &Profile,
    level: Level,
    cpu: &str,
    secs: u32,
) -> Vec<String> {
    let mut argv: Vec<String> = vec!["taskset".into(), "-c".into(), cpu.into(), exe.display().to_string()];
    argv.extend(["load".into(), format!("http://{addr}/"), "--profile".into(), profile.name.into()]);
    for (key, path) in &spec.arena {
        argv.extend(["--endpoint".into(), format!("{key}={path}")]);
    }
    argv.extend([
        "-c".into(),
        level.connections.to_string(),
        "--pipeline".into(),
        level.pipeline.to_string(),
    ]);
    argv.extend(["-d".into(), secs.to_string(), "--warmup".into(), "0".into(), "--json".into()]);
    argv
}

/// One run of an HttpArena profile: the server fresh, a warm-up child, then
/// the measured child (both `peregrine-lab load` pinned to the client CPU),
/// with the server's CPU time read around the measured one.
fn measure_arena(
    plan: &Plan,
    spec: &ServerSpec,
    addr: SocketAddr,
    profile: &Profile,
    level: Level,
    round: u32,
) -> Result<Measurement, String> {
    let s = &plan.settings;
    let test = format!("{}{}", levels::ARENA_PREFIX, profile.name);
    let log = plan.logs.join(log_name(&test, &level, &spec.name, round));
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut srv =
        RunningServer::start(&spec.name, &spec.run_argv(), &spec.run_env(), addr, &s.server_cpu, &log)?;
    if s.warmup_secs > 0 {
        let argv = arena_argv(&exe, spec, addr, profile, level, &s.client_cpu, s.warmup_secs);
        run_load_child(&argv).map_err(|e| format!("warm-up: {e}"))?;
    }
    srv.check_alive()?;
    let pid = srv.pid();
    let db = DbClock::start(plan, &test);
    let before = procfs::read_cpu(pid).map_err(|e| e.to_string())?;
    let argv = arena_argv(&exe, spec, addr, profile, level, &s.client_cpu, s.duration_secs);
    let (report, client_cpu) = run_load_child(&argv)?;
    srv.check_alive()?;
    let after = procfs::read_cpu(pid).map_err(|e| e.to_string())?;
    let db_cpu_seconds = db.stop(s.clock_ticks_per_second);
    let rss = procfs::read_peak_rss_kib(pid);
    if let Err(e) = srv.stop() {
        eprintln!("warning: stopping `{}`: {e}", spec.name);
    }
    let cpu = after.since(before);
    let mut m =
        Measurement::new(as_wrk_report(&report, level.pipeline > 1), cpu, s.clock_ticks_per_second, rss);
    m.client_cpu_seconds = Some(client_cpu);
    m.bytes_per_response = report.bytes_per_response();
    m.db_cpu_seconds = db_cpu_seconds;
    Ok(m)
}

/// PostgreSQL's CPU time over one measured run, for tests whose requests
/// reach it ([`levels::uses_database`]): the issue asked how much of the
/// machine the database takes, and a server can look cheap per CPU-second
/// by leaving work to it.
struct DbClock<'a> {
    started: Option<(&'a Postmaster, u64)>,
}

impl<'a> DbClock<'a> {
    /// Reads the cluster's ticks now, if `test` uses it and there is one.
    fn start(plan: &'a Plan, test: &str) -> DbClock<'a> {
        let started = plan
            .postmaster
            .as_ref()
            .filter(|_| levels::uses_database(test))
            .and_then(|p| read_db_cpu(p).map(|ticks| (p, ticks)));
        DbClock { started }
    }

    /// The seconds of CPU the cluster used since [`DbClock::start`].
    fn stop(self, ticks_per_second: u64) -> Option<f64> {
        let (postmaster, before) = self.started?;
        let after = read_db_cpu(postmaster)?;
        Some(after.saturating_sub(before) as f64 / ticks_per_second.max(1) as f64)
    }
}

/// The database's CPU ticks so far; a failed read (the cluster went away)
/// leaves the run's figure out rather than failing the run.
fn read_db_cpu(postmaster: &Postmaster) -> Option<u64> {
    postmaster.cpu_ticks().map_err(|e| eprintln!("warning: the database's CPU time: {e}")).ok()
}

/// The seven TFB test types, the default of `--tests`.
const TFB_TESTS: [&str; 7] = ["plaintext", "json", "db", "queries", "fortunes", "updates", "cached"];

/// `--profiles`: the named HttpArena profiles (`all` for every one).
fn arena_profiles(names: &[String]) -> Result<Vec<&'static Profile>, String> {
    let mut out = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if name == "all" {
            out.extend(arena::PROFILES.iter());
            continue;
        }
        let profile = arena::find(name)
            .ok_or_else(|| format!("--profiles: no profile `{name}` (known: {}, or all)", arena::names()))?;
        out.push(profile);
    }
    let mut seen = Vec::new();
    out.retain(|p| {
        let first = !seen.contains(&p.name);
        seen.push(p.name);
        first
    });
    Ok(out)
}

/// The servers in the order they run in `round` (from 1): the order turns
/// by one each round, so that no server always runs right after the same
/// one. This VM's slow spells last seconds, and a fixed order lets one
/// server draw them more often than the others.
fn round_order<T>(servers: &[T], round: u32) -> impl Iterator<Item = &T> {
    let turn = (round as usize).saturating_sub(1) % servers.len().max(1);
    servers[turn..].iter().chain(&servers[..turn])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rig::load::{self as rig_load, LoadReport};

    fn spec(name: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            build: None,
            prepare: None,
            run: vec!["x".into()],
            port: 1,
            host: "127.0.0.1".into(),
            env: Default::default(),
            paths: [("json".to_string(), "/json".to_string())].into(),
            arena: Default::default(),
        }
    }

    #[test]
    fn round_order_turns_by_one_each_round() {
        let servers = ["a", "b", "c"];
        let order = |round| round_order(&servers, round).copied().collect::<Vec<_>>();
        assert_eq!(order(1), ["a", "b", "c"]);
        assert_eq!(order(2), ["b", "c", "a"]);
        assert_eq!(order(3), ["c", "a", "b"]);
        assert_eq!(order(4), ["a", "b", "c"]);
        assert!(round_order::<&str>(&[], 2).next().is_none());
    }

    #[test]
    fn only_selects_in_given_order() {
        let all = vec![spec("a"), spec("b"), spec("c")];
        let picked = select(all.clone(), &["c".into(), "a".into()]).expect("known names");
        let names: Vec<&str> = picked.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["c", "a"]);
        assert_eq!(select(all.clone(), &[]).map(|v| v.len()), Ok(3));
        let err = select(all, &["zz".into()]).expect_err("unknown name");
        assert!(err.contains("zz") && err.contains("a, b, c"), "{err}");
    }

    #[test]
    fn paths_and_log_names_carry_the_level() {
        let q = Level { connections: 256, count: Some(15), pipeline: 1 };
        assert_eq!(level_path("/queries?queries=", &q), "/queries?queries=15");
        assert_eq!(level_path("/db", &q), "/db");
        let c = Level { connections: 64, count: None, pipeline: 1 };
        assert_eq!(level_path("/queries?queries=", &c), "/queries?queries=");
        assert_eq!(log_name("queries", &q, "floor", 2), "queries-c256-n15-floor-r2.log");
        let p = Level { connections: 1024, count: None, pipeline: 16 };
        assert_eq!(log_name("plaintext", &p, "x", 1), "plaintext-c1024-p16-x-r1.log");
    }

    #[test]
    fn profiles_run_on_servers_with_their_endpoints() {
        let mut a = spec("a");
        a.arena = arena::default_endpoints();
        let mut b = spec("b");
        b.arena.insert("static".into(), "/static".into());
        assert!(matches!(target(&a, "arena-api-4"), Ok(Target::Arena(p)) if p.name == "api-4"));
        let why = target(&b, "arena-api-4").err().expect("b lacks endpoints");
        assert!(why.contains("`baseline`, `json`, `async-db`"), "{why}");
        assert!(matches!(target(&b, "arena-static"), Ok(Target::Arena(_))));
        assert!(matches!(target(&b, "json"), Ok(Target::Wrk("/json"))));
        assert!(target(&b, "plaintext").is_err());

        let names = |v: &[&str]| arena_profiles(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let picked = names(&["crud", "json-comp", "crud"]).expect("known");
        assert_eq!(picked.iter().map(|p| p.name).collect::<Vec<_>>(), ["crud", "json-comp"]);
        assert_eq!(names(&["all"]).expect("all").len(), 10);
        assert!(names(&["jsonn"]).unwrap_err().contains("jsonn"));

        let level = Level { connections: 512, count: None, pipeline: 16 };
        let addr: SocketAddr = "127.0.0.1:9".parse().expect("address");
        let pipelined = arena::find("pipelined").expect("profile");
        let argv = arena_argv(Path::new("/x/lab"), &b, addr, pipelined, level, "1", 5).join(" ");
        assert_eq!(
            argv,
            "taskset -c 1 /x/lab load http://127.0.0.1:9/ --profile pipelined --endpoint static=/static \
             -c 512 --pipeline 16 -d 5 --warmup 0 --json"
        );
    }

    #[test]
    fn load_reports_become_records() {
        let r = LoadReport {
            requests: 100,
            duration_secs: 2.0,
            requests_per_sec: 50.0,
            status_classes: [0, 90, 0, 7, 3],
            errors: rig_load::LoadErrors { connect: 1, read: 2, write: 3, timeout: 4, malformed: 5 },
            response_bytes: 1000,
            reconnects: 0,
            latency_p50_ms: Some(1.0),
            latency_p99_ms: Some(2.0),
            latency_max_ms: Some(3.0),
            cpu_seconds: 0.5,
        };
        let w = as_wrk_report(&r, false);
        assert_eq!((w.total_requests, w.non_2xx_3xx, w.error_count()), (100, 10, 25));
        assert_eq!(w.latency_p99_ms, Some(2.0));
        assert_eq!(as_wrk_report(&r, true).latency_p50_ms, None);
    }

    #[test]
    fn counts_runs_per_level_and_server_with_a_path() {
        let mut other = spec("b");
        other.paths.insert("plaintext".into(), "/plaintext".into());
        let opts = LevelOptions { pipeline: 16, ..LevelOptions::default() };
        let plan = Plan {
            servers: vec![spec("a"), other],
            settings: Settings {
                servers_file: String::new(),
                servers: vec!["a".into(), "b".into()],
                tests: vec![levels::plan("json", false, &opts), levels::plan("plaintext", false, &opts)],
                rounds: 3,
                duration_secs: 1,
                warmup_secs: 0,
                server_cpu: "0".into(),
                client_cpu: "1".into(),
                baseline: "a".into(),
                wrk_version: String::new(),
                tfb_client: TfbClient::Wrk,
                clock_ticks_per_second: 100,
                started_unix_secs: 0,
                subject: None,
                floors: None,
                database: Database::NotUsed,
            },
            pipeline_script: PathBuf::new(),
            logs: PathBuf::new(),
            postmaster: None,
        };
        // json: 6 levels x 2 servers x 3 rounds; plaintext: 2 levels x 1 x 3.
        assert_eq!(count_runs(&plan), 36 + 6);
    }
}
