//! Soak: mixed load over all seven TFB endpoints for a long time.
//!
//! Runs wrk with `lab/wrk/mixed.lua` for `--duration` seconds, sampling the
//! server's resident memory every ten seconds. Checked: memory at the end
//! is within `--max-rss-growth` of its value after the first minute (the
//! warm-up fills caches and buffers; what matters is no growth after), wrk
//! saw no errors and no non-2xx answers, the server is still up, and once
//! the load's connections have closed it has no more file descriptors open
//! than before the load began.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;

use super::target::{Target, TargetArgs, Wrk};
use super::Report;
use crate::rig::procfs::{fd_count, rss_kib};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Seconds of load (the soak is 1800).
    #[arg(long, default_value_t = 1800)]
    duration: u32,
    /// wrk connections.
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
}

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
    let mut server = Target::start(target, "soak", &[])?;
    let pid = server.pid();
    let mut report = Report::new("soak");
    report.figure("server log", server.log.display());
    println!("soak: {} s of mixed load, {} connections, server PID {pid}", args.duration, args.connections);
    // Let background connections (the database pool) settle first.
    std::thread::sleep(Duration::from_secs(2));
    let fds_before = fd_count(pid).ok_or("cannot count the server's file descriptors")?;
    let rss_start = rss_kib(pid).unwrap_or(0);

    let wrk = Wrk::new(server.url("/"), args.connections, args.duration).script(&args.script, &["20"]);
    let running = wrk.spawn(&target.load_cpu)?;
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
    let load = running.finish()?;
    let rss_end = rss_kib(pid).unwrap_or(0);
    // The load's sockets close as wrk exits; give the server a moment.
    std::thread::sleep(Duration::from_secs(3));
    let fds_after = fd_count(pid).unwrap_or(usize::MAX);
    let rss_minute = rss_minute.unwrap_or(rss_end);
    let growth = (rss_end as f64 - rss_minute as f64) / (rss_minute.max(1) as f64);
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);

    report.figure("duration s", args.duration);
    report.figure("requests", load.total_requests);
    report.figure("requests/s", format!("{:.0}", load.requests_per_sec));
    report.figure("p99 latency ms", load.latency_p99_ms.map_or("-".into(), |v| format!("{v:.1}")));
    report.figure("non-2xx answers", load.non_2xx_3xx);
    report.figure("socket errors", load.socket_errors.total());
    report.figure(
        "RSS KiB: start / 1 min / peak / end",
        format!("{rss_start} / {rss_minute} / {peak} / {rss_end}"),
    );
    report.figure("RSS change after the first minute", format!("{:+.1}%", growth * 100.0));
    report.figure("file descriptors before / after", format!("{fds_before} / {fds_after}"));
    report.check(server.server.check_alive().is_ok(), "server still running");
    report.check(load.error_count() == 0, format!("no errors ({})", load.error_count()));
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
