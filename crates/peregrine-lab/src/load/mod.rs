//! `peregrine-lab load`: the lab's own load generator ([`crate::rig::load`])
//! from the command line, and `--vs-wrk`, which shows it is not the
//! bottleneck: wrk and this generator alternate over rounds against the same
//! running server with the same connections, and each client process's CPU
//! time (`getrusage(RUSAGE_CHILDREN)` around it, start-up included) gives
//! requests per client CPU-second side by side.

use crate::rig::arena::{self, Profile};
use crate::rig::load::{self, LoadReport, LoadSpec, Template};
use crate::rig::stats::{count, median};
use crate::rig::wrk::WrkCommand;
use crate::rig::{cpu, fdlimit, procfs};
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::{Command, ExitCode};
use std::time::Duration;

#[derive(clap::Args, Debug)]
#[command(after_help = profiles_help())]
pub struct LoadArgs {
    /// Server URL, `http://HOST:PORT[/PATH]`. Without --profile every
    /// request is `GET PATH` (like wrk); with one, PATH is ignored.
    url: String,
    /// Send an HttpArena profile's requests, with its pipelining and
    /// reconnects (see below).
    #[arg(long)]
    profile: Option<String>,
    /// Where the server serves an endpoint a profile needs, `KEY=PATH`
    /// (repeatable); the defaults are peregrine-tfb's (/baseline11,
    /// /pipeline, /json, /upload, /static, /async-db, /crud/items).
    #[arg(long = "endpoint", value_name = "KEY=PATH")]
    endpoints: Vec<String>,
    /// Open connections [default: the profile's first level, or 256].
    #[arg(short = 'c', long)]
    connections: Option<usize>,
    /// Requests per write [default: the profile's, or 1].
    #[arg(long)]
    pipeline: Option<usize>,
    /// Reconnect after this many requests on a connection; 0 never
    /// [default: the profile's, or never].
    #[arg(long)]
    reconnect_every: Option<u64>,
    /// Seconds measured.
    #[arg(short = 'd', long, default_value_t = 5.0)]
    duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Seconds after which an unanswered request is a timeout error.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Extra request header (repeatable), `Name: value`; not with --profile.
    #[arg(short = 'H', long = "header")]
    headers: Vec<String>,
    /// Pin this process to these CPUs (comma-separated) [with --vs-wrk:
    /// where both clients run, default 1].
    #[arg(long)]
    cpu: Option<String>,
    /// Print the report as one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Compare with wrk: alternate wrk and this generator, same URL,
    /// connections and pipeline depth, `--rounds` times, and print
    /// requests/s and requests per client CPU-second of each (plain GETs
    /// only, no --profile).
    #[arg(long)]
    vs_wrk: bool,
    /// Rounds of --vs-wrk.
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// With --vs-wrk: the server's PID, to add requests per server
    /// CPU-second.
    #[arg(long)]
    server_pid: Option<u32>,
    /// With --vs-wrk and --pipeline above 1: the wrk script that pipelines.
    #[arg(long, default_value = "lab/wrk/pipeline.lua")]
    wrk_script: std::path::PathBuf,
}

fn profiles_help() -> String {
    let mut s = String::from(
        "HttpArena profiles (HttpArena's connections; `bench` runs each as far as the open-files limit allows):\n",
    );
    for p in &arena::PROFILES {
        let conns = |v: &[u32]| v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
        s.push_str(&format!(
            "  {:<13} [{}] {}: {}\n",
            p.name,
            p.endpoints.join(","),
            conns(p.arena_connections),
            p.sends
        ));
    }
    s
}

pub fn run(args: LoadArgs) -> ExitCode {
    let result = if args.vs_wrk { vs_wrk(&args) } else { run_once(&args) };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("load: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `http://host:port/path?query` -> (`host:port`, address, `/path?query`).
fn parse_url(url: &str) -> Result<(String, SocketAddr, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("`{url}` is not an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let with_port = if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?
        .find(SocketAddr::is_ipv4)
        .ok_or_else(|| format!("{authority} has no IPv4 address"))?;
    Ok((authority.to_string(), addr, path.to_string()))
}

fn spec(args: &LoadArgs) -> Result<LoadSpec, String> {
    let (host, addr, path) = parse_url(&args.url)?;
    let profile: Option<&Profile> = match &args.profile {
        Some(name) => {
            Some(arena::find(name).ok_or_else(|| format!("no profile `{name}`; known: {}", arena::names()))?)
        }
        None => None,
    };
    let templates = match profile {
        Some(p) => {
            let mut endpoints = arena::default_endpoints();
            endpoints.extend(parse_endpoints(&args.endpoints)?);
            p.templates(&endpoints, &host)?
        }
        None => {
            let extra: String = args.headers.iter().map(|h| format!("{h}\r\n")).collect();
            vec![Template::new(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n").into_bytes(), 1)]
        }
    };
    let secs = |s: f64, what: &str| {
        Duration::try_from_secs_f64(s).map_err(|_| format!("--{what} must be a number of seconds"))
    };
    Ok(LoadSpec {
        addr,
        templates,
        connections: args
            .connections
            .unwrap_or_else(|| profile.map_or(256, |p| p.arena_connections[0] as usize)),
        pipeline: args.pipeline.unwrap_or_else(|| profile.map_or(1, |p| p.pipeline)).max(1),
        reconnect_every: match args.reconnect_every {
            Some(0) => None,
            Some(n) => Some(n),
            None => profile.and_then(|p| p.reconnect_every),
        },
        warmup: secs(args.warmup, "warmup")?,
        duration: secs(args.duration, "duration")?,
        timeout: secs(args.timeout, "timeout")?,
    })
}

pub fn parse_endpoints(items: &[String]) -> Result<BTreeMap<String, String>, String> {
    items
        .iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) if !k.is_empty() && v.starts_with('/') => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("--endpoint `{item}` is not KEY=/PATH")),
        })
        .collect()
}

fn run_once(args: &LoadArgs) -> Result<(), String> {
    let spec = spec(args)?;
    if let Some(cpus) = &args.cpu {
        cpu::pin_self(cpus);
    }
    let limit = fdlimit::raise();
    if spec.connections as u64 + 64 > limit {
        return Err(format!(
            "{} connections need more than the open-files limit of {limit}",
            spec.connections
        ));
    }
    let report = load::run(&spec)?;
    if args.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
    } else {
        print_report(&spec, &report);
    }
    Ok(())
}

fn print_report(spec: &LoadSpec, r: &LoadReport) {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2} ms"));
    println!(
        "{} connections, pipeline {}, reconnect every {}, {} template(s), {:.1} s measured",
        spec.connections,
        spec.pipeline,
        spec.reconnect_every.map_or("never".to_string(), |n| n.to_string()),
        spec.templates.len(),
        r.duration_secs
    );
    println!("  requests/s       {}", count(r.requests_per_sec));
    println!("  requests         {} ({} non-2xx/3xx)", r.requests, r.non_2xx_3xx());
    let c = r.status_classes;
    println!("  status classes   1xx {} 2xx {} 3xx {} 4xx {} 5xx {}", c[0], c[1], c[2], c[3], c[4]);
    let e = r.errors;
    println!(
        "  errors           connect {}, read {}, write {}, timeout {}, malformed {}",
        e.connect, e.read, e.write, e.timeout, e.malformed
    );
    println!(
        "  latency          p50 {}, p99 {}, max {}",
        ms(r.latency_p50_ms),
        ms(r.latency_p99_ms),
        ms(r.latency_max_ms)
    );
    println!("  bytes/response   {}", r.bytes_per_response().map_or("-".into(), |b| format!("{b:.0}")));
    println!("  reconnects       {}", r.reconnects);
    let per_cpu = if r.cpu_seconds > 0.0 { count(r.requests as f64 / r.cpu_seconds) } else { "-".into() };
    println!("  client CPU       {:.2} s ({per_cpu} requests per client CPU-second)", r.cpu_seconds);
}

/// One client run in the comparison.
struct ClientRun {
    requests: u64,
    rps: f64,
    client_cpu: f64,
    server_cpu: Option<f64>,
    errors: u64,
}

fn vs_wrk(args: &LoadArgs) -> Result<(), String> {
    if args.profile.is_some() {
        return Err("--vs-wrk compares plain GETs; leave out --profile".into());
    }
    let (_, _, _) = parse_url(&args.url)?;
    fdlimit::raise();
    let cpu = args.cpu.clone().unwrap_or_else(|| "1".into());
    let connections = args.connections.unwrap_or(256);
    let depth = args.pipeline.unwrap_or(1).max(1);
    if depth > 1 && !args.wrk_script.is_file() {
        return Err(format!("--pipeline {depth} needs wrk's script {}", args.wrk_script.display()));
    }
    let seconds = args.duration.round().max(1.0) as u32;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let server_cpu = |pid: Option<u32>| pid.and_then(|p| procfs::cpu_secs(p).ok());
    let mut wrk_runs = Vec::new();
    let mut own_runs = Vec::new();
    for round in 1..=args.rounds.max(1) {
        let wrk = WrkCommand {
            cpu: cpu.clone(),
            connections: connections as u32,
            seconds,
            timeout_secs: None,
            headers: args.headers.clone(),
            script: (depth > 1).then(|| (args.wrk_script.clone(), vec![depth.to_string()])),
            url: args.url.clone(),
        };
        let (c0, s0) = (load::children_cpu_seconds(), server_cpu(args.server_pid));
        let report = wrk.run()?;
        let (c1, s1) = (load::children_cpu_seconds(), server_cpu(args.server_pid));
        let w = ClientRun {
            requests: report.total_requests,
            rps: report.requests_per_sec,
            client_cpu: c1 - c0,
            server_cpu: s0.zip(s1).map(|(a, b)| b - a),
            errors: report.error_count(),
        };
        eprintln!("round {round}: wrk  {} req/s, client CPU {:.2} s", count(w.rps), w.client_cpu);
        wrk_runs.push(w);

        let mut cmd = Command::new("taskset");
        cmd.arg("-c").arg(&cpu).arg(&exe).args(["load", &args.url, "--json"]);
        cmd.args(["-c", &connections.to_string(), "-d", &seconds.to_string(), "--warmup", "0"]);
        cmd.args(["--pipeline", &depth.to_string()]);
        for h in &args.headers {
            cmd.args(["-H", h]);
        }
        let (c0, s0) = (load::children_cpu_seconds(), server_cpu(args.server_pid));
        let out = cmd.output().map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        let (c1, s1) = (load::children_cpu_seconds(), server_cpu(args.server_pid));
        if !out.status.success() {
            return Err(format!("load child failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        let r: LoadReport =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("load child's JSON: {e}"))?;
        let o = ClientRun {
            requests: r.requests,
            rps: r.requests_per_sec,
            client_cpu: c1 - c0,
            server_cpu: s0.zip(s1).map(|(a, b)| b - a),
            errors: r.non_2xx_3xx() + r.errors.total(),
        };
        eprintln!("round {round}: load {} req/s, client CPU {:.2} s", count(o.rps), o.client_cpu);
        own_runs.push(o);
    }
    println!(
        "\nwrk -t1 and peregrine-lab load against {} with {connections} connections, pipeline depth \
         {depth}, {seconds} s per run, clients on CPU {cpu}; medians of {} round(s)\n",
        args.url,
        args.rounds.max(1)
    );
    println!("| client | requests/s | client CPU s | requests per client CPU-second | requests per server CPU-second | errors |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, runs) in [("wrk", &wrk_runs), ("peregrine-lab load", &own_runs)] {
        let m =
            |f: &dyn Fn(&ClientRun) -> Option<f64>| median(&runs.iter().filter_map(f).collect::<Vec<_>>());
        let fmt = |v: Option<f64>| v.map_or("-".to_string(), count);
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            fmt(m(&|r| Some(r.rps))),
            m(&|r| Some(r.client_cpu)).map_or("-".into(), |v| format!("{v:.2}")),
            fmt(m(&|r| (r.client_cpu > 0.0).then(|| r.requests as f64 / r.client_cpu))),
            fmt(m(&|r| r.server_cpu.filter(|s| *s > 0.0).map(|s| r.requests as f64 / s))),
            runs.iter().map(|r| r.errors).sum::<u64>()
        );
    }
    let per = |runs: &[ClientRun]| {
        median(
            &runs
                .iter()
                .filter(|r| r.client_cpu > 0.0)
                .map(|r| r.requests as f64 / r.client_cpu)
                .collect::<Vec<_>>(),
        )
    };
    if let (Some(w), Some(o)) = (per(&wrk_runs), per(&own_runs)) {
        println!("\nperegrine-lab load sends {:.2}x wrk's requests per client CPU-second", o / w);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_endpoints_parse() {
        let (host, addr, path) = parse_url("http://127.0.0.1:8080/baseline11?a=1&b=2").unwrap();
        assert_eq!(
            (host.as_str(), addr.port(), path.as_str()),
            ("127.0.0.1:8080", 8080, "/baseline11?a=1&b=2")
        );
        assert_eq!(parse_url("http://127.0.0.1:9").unwrap().2, "/");
        assert!(parse_url("https://x").is_err());
        let e = parse_endpoints(&["static=/files".into()]).unwrap();
        assert_eq!(e["static"], "/files");
        assert!(parse_endpoints(&["static".into()]).is_err());
        assert!(parse_endpoints(&["static=files".into()]).is_err());
    }
}
