//! Overload: far more concurrent connections than a worker is sized for.
//!
//! wrk opens `--connections` (split over several wrk processes, since one
//! process cannot hold more sockets than the open-file limit) against
//! `/plaintext` and then `/json`. The server holds what fits under its
//! connection limit and answers the rest `503` and closes them; wrk counts
//! those as non-2xx and reconnects. Checked: the server stays up, no request
//! waits past wrk's timeout, p99 latency stays under `--max-p99-ms`, every
//! refusal is a clean `503` (no resets, no connect failures), and afterwards
//! a fresh connection is served at once.

use std::time::Duration;

use clap::Args as ClapArgs;

use super::target::{fd_count, percentile, probe, raise_fd_limit, Target, TargetArgs, Wrk};
use super::Report;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Concurrent connections in total.
    #[arg(long, default_value_t = 20_000)]
    connections: u32,
    /// Seconds of load per path.
    #[arg(long, default_value_t = 15)]
    duration: u32,
    /// Paths to load, one after the other.
    #[arg(long, value_delimiter = ',', default_value = "/plaintext,/json")]
    paths: Vec<String>,
    /// Fail when a path's p99 latency exceeds this.
    #[arg(long, default_value_t = 1000.0)]
    max_p99_ms: f64,
    /// Passed to the server as --max-connections (per worker); by default
    /// the server's own, lowered to fit its open-file limit.
    #[arg(long)]
    server_limit: Option<usize>,
}

/// Sockets one wrk process is given, leaving room under the open-file limit.
fn per_wrk(limit: u64) -> u32 {
    u32::try_from(limit.saturating_sub(64).clamp(1, 10_000)).unwrap_or(10_000)
}

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    let fd_limit = raise_fd_limit();
    let mut extra = Vec::new();
    if let Some(limit) = args.server_limit {
        extra.extend(["--max-connections".to_string(), limit.to_string()]);
    }
    let mut server = Target::start(target, "overload", &extra)?;
    let pid = server.pid();
    let mut report = Report::new("overload");
    report.figure("server log", server.log.display());
    println!("overload: {} connections, {} s per path, server PID {pid}", args.connections, args.duration);
    report.figure("open-file limit (server and each wrk)", fd_limit);

    let processes = args.connections.div_ceil(per_wrk(fd_limit)).max(1);
    for path in &args.paths {
        let share = args.connections / processes;
        let mut running = Vec::new();
        for i in 0..processes {
            let conns = if i + 1 == processes { args.connections - share * (processes - 1) } else { share };
            let mut wrk = Wrk::new(server.url(path), conns, args.duration);
            // A request queued behind 20,000 others legitimately takes a
            // while; past this it is counted as a timeout.
            wrk.timeout_secs = 5;
            running.push(wrk.spawn(&target.load_cpu)?);
        }
        // Sample what the server holds while every connection is open.
        std::thread::sleep(Duration::from_secs(u64::from(args.duration) / 2));
        let held = fd_count(pid).unwrap_or(0);
        let mut reports = Vec::new();
        for r in running {
            reports.push(r.finish()?);
        }
        let requests: u64 = reports.iter().map(|r| r.total_requests).sum();
        let rps: f64 = reports.iter().map(|r| r.requests_per_sec).sum();
        let refused: u64 = reports.iter().map(|r| r.non_2xx_3xx).sum();
        let mut p99s: Vec<f64> = reports.iter().filter_map(|r| r.latency_p99_ms).collect();
        let p99 = percentile(&mut p99s, 100.0);
        let connect: u64 = reports.iter().map(|r| r.socket_errors.connect).sum();
        let read: u64 = reports.iter().map(|r| r.socket_errors.read).sum();
        let write: u64 = reports.iter().map(|r| r.socket_errors.write).sum();
        let timeout: u64 = reports.iter().map(|r| r.socket_errors.timeout).sum();
        report.figure(format!("{path} wrk processes"), processes);
        report.figure(format!("{path} server file descriptors mid-run"), held);
        report.figure(format!("{path} requests"), requests);
        report.figure(format!("{path} requests/s"), format!("{rps:.0}"));
        report.figure(format!("{path} p99 latency ms (worst wrk)"), format!("{p99:.1}"));
        report.figure(format!("{path} refused with 503"), refused);
        report.figure(
            format!("{path} socket errors"),
            format!("connect {connect}, read {read}, write {write}, timeout {timeout}"),
        );
        report.check(server.server.check_alive().is_ok(), format!("{path}: server still running"));
        report.check(requests > 0, format!("{path}: requests were served"));
        report.check(p99 <= args.max_p99_ms, format!("{path}: p99 {p99:.1} ms <= {} ms", args.max_p99_ms));
        report.check(timeout == 0, format!("{path}: no request waited past wrk's 5 s timeout ({timeout})"));
        report.check(
            connect + read + write == 0,
            format!("{path}: refusals are clean 503s, no socket errors ({})", connect + read + write),
        );
        // Give the closes a moment, then a newcomer must be served.
        std::thread::sleep(Duration::from_millis(500));
        let after = probe(server.addr, path);
        report
            .check(after == Ok(200), format!("{path}: a fresh connection is served afterwards ({after:?})"));
    }
    report.check(server.server.check_alive().is_ok(), "server survived the whole run");
    Ok(report.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_processes_stay_under_the_file_limit() {
        assert_eq!(per_wrk(20_000), 10_000);
        assert_eq!(per_wrk(4_096), 4_032);
        assert_eq!(20_000u32.div_ceil(per_wrk(20_000)), 2);
        assert_eq!(per_wrk(10), 1);
    }
}
