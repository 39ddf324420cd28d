//! Soak: mixed load over all seven TFB endpoints for a long time.
//!
//! Runs wrk with `lab/wrk/mixed.lua` for `--duration` seconds, sampling the
//! server's resident memory every ten seconds. Checked: memory at the end
//! is within `--max-rss-growth` of its value after the first minute (the
//! warm-up fills caches and buffers; what matters is no growth after), wrk
//! saw no errors and no non-2xx answers, the server is still up, and once
//! the load's connections have closed it has no more file descriptors open
//! than before the load began.
//!
//! `--protocol ws` soaks WebSocket instead: `--connections` sockets echoing
//! 5-byte messages on `/ws` (`peregrine-lab ws-load`), with the same checks
//! (an error is a socket that could not open or failed while echoing).
//!
//! `--all-protocols` soaks every protocol at once: beside the cleartext
//! mixed load, wrk runs the same script over TLS, h2load loads `/json`
//! over h2 and `/plaintext` over h2c, and ws-load echoes on `/ws`, a fifth
//! of `--connections` each (h2load: a quarter of that, 4 streams per
//! connection), with the same checks over all of them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;

use super::load::{Load, LoadReport, RunningLoad};
use super::protocol::Protocol;
use super::target::{Target, TargetArgs, Wrk};
use super::Report;
use crate::rig::procfs::{fd_count, rss_kib};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Seconds of load (the soak is 1800).
    #[arg(long, default_value_t = 1800)]
    duration: u32,
    /// Connections (WebSocket: sockets), split evenly over the protocols.
    #[arg(long, default_value_t = 256)]
    connections: u32,
    /// The mixed-endpoint wrk script.
    #[arg(long, default_value = "lab/wrk/mixed.lua")]
    script: PathBuf,
    /// Fail when memory at the end differs from the one-minute value by
    /// more than this share.
    #[arg(long, default_value_t = 0.10)]
    max_rss_growth: f64,
    /// Run without DATABASE_URL (embedded SQLite) instead of refusing.
    #[arg(long)]
    allow_sqlite: bool,
    /// Load TLS, h2, h2c and WebSocket beside cleartext HTTP/1.1, all at
    /// once.
    #[arg(long)]
    all_protocols: bool,
}

/// What `--all-protocols` loads.
const ALL: [Protocol; 5] = [Protocol::H1, Protocol::Tls, Protocol::H2, Protocol::H2c, Protocol::Ws];

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    let url = std::env::var("DATABASE_URL").unwrap_or_default();
    if !url.starts_with("postgres") && !args.allow_sqlite {
        return Err(
            "the soak runs against PostgreSQL: set DATABASE_URL (scripts/pg url), or pass --allow-sqlite"
                .into(),
        );
    }
    if args.duration < 70 {
        return Err(
            "--duration must be at least 70 s: memory is compared with its value after the first minute"
                .into(),
        );
    }
    let mut server = if args.all_protocols {
        Target::start_serving(target, "soak", &[], &ALL)?
    } else {
        Target::start(target, "soak", &[])?
    };
    let pid = server.pid();
    let mut report = Report::new("soak");
    report.figure("server log", server.log.display());
    println!("soak: {} s of mixed load, {} connections, server PID {pid}", args.duration, args.connections);
    // Let background connections (the database pool) settle first.
    std::thread::sleep(Duration::from_secs(2));
    let fds_before = fd_count(pid).ok_or("cannot count the server's file descriptors")?;
    let rss_start = rss_kib(pid).unwrap_or(0);

    let protocols = if args.all_protocols { &ALL[..] } else { std::slice::from_ref(&server.protocol) };
    let share = (args.connections / protocols.len() as u32).max(1);
    let mut loads: Vec<(Protocol, RunningLoad)> = Vec::new();
    for &protocol in protocols {
        let running = match protocol {
            Protocol::H1 | Protocol::Tls => {
                let wrk = Wrk::new(server.url_of(protocol, "/"), share, args.duration)
                    .script(&args.script, &["20"]);
                RunningLoad::Wrk(wrk.spawn(&target.load_cpu)?)
            }
            Protocol::H2 | Protocol::H2c => {
                let path = if protocol == Protocol::H2 { "/json" } else { "/plaintext" };
                let mut load =
                    Load::new(protocol, server.url_of(protocol, path), (share / 4).max(1), args.duration);
                load.streams = 4;
                load.spawn(&target.load_cpu)?
            }
            Protocol::Ws => Load::new(protocol, server.url_of(protocol, "/"), share, args.duration)
                .spawn(&target.load_cpu)?,
        };
        loads.push((protocol, running));
    }
    let started = Instant::now();
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let mut rss_minute = None;
    while started.elapsed() < Duration::from_secs(u64::from(args.duration)) {
        std::thread::sleep(Duration::from_secs(10));
        if server.server.check_alive().is_err() {
            break;
        }
        let secs = started.elapsed().as_secs();
        let rss = rss_kib(pid).unwrap_or(0);
        samples.push((secs, rss));
        if rss_minute.is_none() && secs >= 60 {
            rss_minute = Some(rss);
        }
        if secs % 60 < 10 {
            println!("  {:>5} s: RSS {} KiB, {} fds", secs, rss, fd_count(pid).unwrap_or(0));
        }
    }
    let mut reports: Vec<(Protocol, LoadReport)> = Vec::new();
    for (protocol, run) in loads {
        reports.push((protocol, run.finish()?));
    }
    let rss_end = rss_kib(pid).unwrap_or(0);
    // The load's sockets close as wrk exits; give the server a moment.
    std::thread::sleep(Duration::from_secs(3));
    let fds_after = fd_count(pid).unwrap_or(usize::MAX);
    let rss_minute = rss_minute.unwrap_or(rss_end);
    let growth = (rss_end as f64 - rss_minute as f64) / (rss_minute.max(1) as f64);
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);

    report.figure("duration s", args.duration);
    let mut errors = 0;
    for (protocol, r) in &reports {
        let name = protocol.name();
        report.figure(
            format!("{name}: requests (ws: echoes), req/s"),
            format!("{}, {:.0}", r.total_requests, r.requests_per_sec),
        );
        report.figure(
            format!("{name}: p99 latency ms"),
            r.latency_p99_ms.map_or("-".into(), |v| format!("{v:.1}")),
        );
        report.figure(
            format!("{name}: non-2xx / failed / timed out"),
            format!("{} / {} / {}", r.non_2xx, r.failed, r.timeouts),
        );
        errors += r.error_count();
    }
    report.figure(
        "RSS KiB: start / 1 min / peak / end",
        format!("{rss_start} / {rss_minute} / {peak} / {rss_end}"),
    );
    report.figure("RSS change after the first minute", format!("{:+.1}%", growth * 100.0));
    report.figure("file descriptors before / after", format!("{fds_before} / {fds_after}"));
    report.check(server.server.check_alive().is_ok(), "server still running");
    report.check(errors == 0, format!("no errors ({errors})"));
    report.check(
        growth.abs() <= args.max_rss_growth,
        format!(
            "RSS within {:.0}% of its one-minute value ({:+.1}%)",
            args.max_rss_growth * 100.0,
            growth * 100.0
        ),
    );
    report
        .check(fds_after <= fds_before, format!("no file descriptors leaked ({fds_before} -> {fds_after})"));
    Ok(report.finish())
}
