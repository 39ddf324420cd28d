//! `peregrine-lab bench`: side-by-side benchmarks of the servers described in
//! `lab/servers.toml`, driven by real `wrk`.
//!
//! This module owns the command line and the run plan. For each test, each
//! round runs every selected server once, in turn (A, B, A, B, ...), so slow
//! drift of the machine falls on all servers alike. Each run starts the
//! server fresh, pinned to the server CPU, warms it up, then measures one wrk
//! run pinned to the client CPU while reading the server's CPU time from
//! `/proc`. The pieces live in submodules:
//!
//! - `config`: the servers file;
//! - `server`: starting, probing and stopping server processes;
//! - `wrk`: wrk command lines and output parsing;
//! - `procfs`: CPU time and peak RSS from `/proc`;
//! - `stats`: run records, medians, spreads and ratios;
//! - `report`: progress lines, the Markdown report and the JSON document.

mod config;
mod procfs;
mod report;
mod server;
mod stats;
mod wrk;

use config::ServerSpec;
use report::{Results, Settings};
use server::RunningServer;
use stats::{Measurement, RunRecord, Summary};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};
use wrk::WrkRun;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// The servers file.
    #[arg(long, default_value = "lab/servers.toml")]
    servers: PathBuf,
    /// Benchmark only these servers (comma-separated names), in this order.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Tests to run (comma-separated), each a key of the servers' `paths`.
    #[arg(long, value_delimiter = ',', default_value = "plaintext,json")]
    tests: Vec<String>,
    /// Rounds per test [default: 3, or 1 with --quick].
    #[arg(long)]
    rounds: Option<u32>,
    /// Seconds of each measured wrk run [default: 5, or 2 with --quick].
    #[arg(long)]
    duration: Option<u32>,
    /// Seconds of wrk warm-up before each measured run, 0 for none
    /// [default: 2, or 1 with --quick].
    #[arg(long)]
    warmup: Option<u32>,
    /// Open connections wrk keeps.
    #[arg(long, default_value_t = 256)]
    connections: u32,
    /// CPU list the server is pinned to (taskset -c syntax).
    #[arg(long, default_value = "0")]
    server_cpu: String,
    /// CPU list wrk is pinned to (taskset -c syntax).
    #[arg(long, default_value = "1")]
    client_cpu: String,
    /// Pipelined requests per write for the plaintext test; 1 disables.
    #[arg(long, default_value_t = 16)]
    pipeline: u32,
    /// Count appended to paths ending in `=` (e.g. /queries?queries=).
    #[arg(long, default_value_t = 20)]
    queries: u32,
    /// The server every other server is compared with.
    #[arg(long, default_value = "floor")]
    baseline: String,
    /// Where the JSON results go; the Markdown report is written beside it.
    #[arg(long, default_value = "target/lab/results.json")]
    out: PathBuf,
    /// Short settings for a smoke run: 1 round, 2 s runs, 1 s warm-up.
    #[arg(long)]
    quick: bool,
    /// Skip the servers' build commands.
    #[arg(long)]
    no_build: bool,
}

pub fn run(args: BenchArgs) -> ExitCode {
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
}

/// Runs the whole bench. `Ok(false)` means it finished but some runs failed.
fn bench(args: BenchArgs) -> Result<bool, String> {
    let plan = prepare(&args)?;
    let s = &plan.settings;
    let runs_total = s.tests.len() * plan.servers.len() * s.rounds as usize;
    let secs_per_run = s.duration_secs + s.warmup_secs + 1;
    println!(
        "bench: {} test(s) x {} server(s) x {} round(s) = {runs_total} runs, about {} s",
        s.tests.len(),
        plan.servers.len(),
        s.rounds,
        runs_total as u32 * secs_per_run
    );

    let mut runs = Vec::new();
    for test in &s.tests {
        for round in 1..=s.rounds {
            for spec in &plan.servers {
                let Some(path) = spec.paths.get(test) else {
                    if round == 1 {
                        println!(
                            "{test:<10} skipping `{}`: it has no path for this test",
                            spec.name
                        );
                    }
                    continue;
                };
                let record = measure(&plan, spec, test, path, round)?;
                println!("{}", report::progress_line(&record, s.rounds));
                runs.push(record);
            }
        }
    }

    let mut summaries: Vec<Summary> = Vec::new();
    for test in &s.tests {
        for spec in &plan.servers {
            let mine: Vec<&RunRecord> = runs
                .iter()
                .filter(|r| &r.test == test && r.server == spec.name)
                .collect();
            if !mine.is_empty() {
                summaries.push(stats::summarize(test, &spec.name, &mine));
            }
        }
    }
    stats::add_ratios(&mut summaries, &s.baseline);

    let all_measured = runs.iter().all(|r| r.failure.is_none());
    let results = Results {
        settings: plan.settings,
        summaries,
        runs,
    };
    let markdown = report::markdown(&results);
    println!("\n{markdown}");
    write_results(&args.out, &results, &markdown)?;
    Ok(all_measured)
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

    let tests: Vec<String> = args
        .tests
        .iter()
        .filter(|t| !t.is_empty())
        .cloned()
        .collect();
    if tests.is_empty() {
        return Err("--tests names no test".into());
    }
    for test in &tests {
        if !servers.iter().any(|s| s.paths.contains_key(test)) {
            return Err(format!(
                "no selected server has a path for test `{test}` (add it under [server.paths])"
            ));
        }
    }
    if args.connections == 0 {
        return Err("--connections must be at least 1".into());
    }
    let (rounds, duration, warmup) = if args.quick { (1, 2, 1) } else { (3, 5, 2) };
    let rounds = args.rounds.unwrap_or(rounds);
    let duration_secs = args.duration.unwrap_or(duration);
    if rounds == 0 || duration_secs == 0 {
        return Err("--rounds and --duration must be at least 1".into());
    }
    if !servers.iter().any(|s| s.name == args.baseline) {
        println!(
            "note: baseline `{}` is not among the servers run, so no ratios",
            args.baseline
        );
    }

    // The Lua script ships beside the servers file: lab/wrk/pipeline.lua.
    let lab_dir = args.servers.parent().unwrap_or(Path::new("."));
    let pipeline_script = lab_dir.join("wrk").join("pipeline.lua");
    if args.pipeline > 1 && tests.iter().any(|t| t == "plaintext") && !pipeline_script.is_file() {
        return Err(format!(
            "pipelined plaintext needs {} (or pass --pipeline 1)",
            pipeline_script.display()
        ));
    }

    // Fail before any run, not halfway through, if a port is already taken.
    for spec in &servers {
        port_free(spec, &args.servers.display().to_string())?;
    }

    let out_dir = args.out.parent().unwrap_or(Path::new("."));
    let logs = out_dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;

    if !args.no_build {
        run_builds(&servers)?;
    }

    let settings = Settings {
        servers_file: args.servers.display().to_string(),
        servers: servers.iter().map(|s| s.name.clone()).collect(),
        tests,
        rounds,
        duration_secs,
        warmup_secs: args.warmup.unwrap_or(warmup),
        connections: args.connections,
        pipeline_depth: args.pipeline.max(1),
        queries: args.queries,
        server_cpu: args.server_cpu.clone(),
        client_cpu: args.client_cpu.clone(),
        baseline: args.baseline.clone(),
        wrk_version: wrk::version().unwrap_or_else(|| "wrk (unknown version)".into()),
        clock_ticks_per_second: procfs::clock_ticks_per_second().map_err(|e| e.to_string())?,
        started_unix_secs: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    Ok(Plan {
        servers,
        settings,
        pipeline_script,
        logs,
    })
}

/// Applies `--only`: those servers in that order, or all of them.
fn select(all: Vec<ServerSpec>, only: &[String]) -> Result<Vec<ServerSpec>, String> {
    let only: Vec<&String> = only.iter().filter(|n| !n.is_empty()).collect();
    if only.is_empty() {
        return Ok(all);
    }
    only.iter()
        .map(|name| {
            all.iter()
                .find(|s| &&s.name == name)
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
                    format!(
                        "--only: no server named `{name}` (known: {})",
                        known.join(", ")
                    )
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

/// One (test, server, round) run. Problems of the server under test become a
/// failed record; problems that would spoil every run (port taken) are errors.
fn measure(
    plan: &Plan,
    spec: &ServerSpec,
    test: &str,
    path: &str,
    round: u32,
) -> Result<RunRecord, String> {
    let addr = port_free(spec, &plan.settings.servers_file)?;
    let outcome = measure_started(plan, spec, addr, test, path, round);
    let (measurement, failure) = match outcome {
        Ok(m) => (Some(m), None),
        Err(e) => (None, Some(e)),
    };
    Ok(RunRecord {
        test: test.to_string(),
        server: spec.name.clone(),
        round,
        measurement,
        failure,
    })
}

/// Resolves the server's address and checks nothing listens there yet:
/// something else on the port would silently be measured instead.
fn port_free(spec: &ServerSpec, servers_file: &str) -> Result<SocketAddr, String> {
    let addr = server::resolve(spec)?;
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
    path: &str,
    round: u32,
) -> Result<Measurement, String> {
    let s = &plan.settings;
    let log = plan.logs.join(format!("{test}-{}-r{round}.log", spec.name));
    let mut srv = RunningServer::start(spec, addr, &s.server_cpu, &log)?;

    let path = if path.ends_with('=') {
        format!("{path}{}", s.queries)
    } else {
        path.to_string()
    };
    let pipelined = test == "plaintext" && s.pipeline_depth > 1;
    let mut load = WrkRun {
        url: format!("http://{addr}{path}"),
        test: test.to_string(),
        connections: s.connections,
        duration_secs: s.warmup_secs,
        cpu: s.client_cpu.clone(),
        pipeline: pipelined.then(|| (plan.pipeline_script.clone(), s.pipeline_depth)),
    };
    if s.warmup_secs > 0 {
        load.run().map_err(|e| format!("warm-up: {e}"))?;
    }
    srv.check_alive()?;

    load.duration_secs = s.duration_secs;
    let pid = srv.pid();
    let before = procfs::read_cpu(pid).map_err(|e| e.to_string())?;
    let mut report = load.run()?;
    if pipelined {
        // wrk times a whole pipelined batch as one sample, so its latency
        // percentiles mean little there (p99 can even come out below p50).
        report.latency_p50_ms = None;
        report.latency_p99_ms = None;
    }
    srv.check_alive()?;
    let after = procfs::read_cpu(pid).map_err(|e| e.to_string())?;
    let rss = procfs::read_peak_rss_kib(pid);
    if let Err(e) = srv.stop() {
        eprintln!("warning: stopping `{}`: {e}", spec.name);
    }
    let ticks = after.total().saturating_sub(before.total());
    Ok(Measurement::new(
        report,
        ticks,
        s.clock_ticks_per_second,
        rss,
    ))
}

fn write_results(out: &Path, results: &Results, markdown: &str) -> Result<(), String> {
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let json =
        serde_json::to_string_pretty(results).map_err(|e| format!("encoding results: {e}"))?;
    std::fs::write(out, json + "\n").map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    let md_path = out.with_extension("md");
    std::fs::write(&md_path, markdown)
        .map_err(|e| format!("cannot write {}: {e}", md_path.display()))?;
    println!("bench: wrote {} and {}", out.display(), md_path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            build: None,
            run: vec!["x".into()],
            port: 1,
            host: "127.0.0.1".into(),
            env: Default::default(),
            paths: [("json".to_string(), "/json".to_string())].into(),
        }
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
}
