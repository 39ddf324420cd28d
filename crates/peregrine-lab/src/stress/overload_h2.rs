//! Overload over HTTP/2 with h2load (`overload --protocol h2 --h2load`, or
//! `h2c`); without `--h2load` the lab's own client runs instead: the
//! connections are h2load's, split over as many h2load processes as the
//! open-file limit needs, each connection keeping [`STREAMS`] request in
//! flight on one path, then the next. Over TLS the first seconds are the
//! handshakes of every connection at once, and are inside the measurement
//! as they are for HTTP/1.1: give it `--duration` 10 or more.
//!
//! Checked as over HTTP/1.1, adapted to what h2load can tell: the server
//! stays up, requests are served, p99 latency (from h2load's per-request
//! log) stays under the limit, every answer is 2xx or a 503, no request
//! timed out, and afterwards a fresh HTTP/2 connection is served. A
//! connection past the server's limit is closed (h2c: after a cleartext
//! HTTP/1.1 503 an HTTP/2 client cannot read; TLS: before the handshake),
//! so h2load counts refusals as failed or errored requests: a figure, not
//! a limit.
//!
//! Known limit: h2load 1.52 aborts as a run ends (libev assertion "invalid
//! fd found in epoll_ctl") when one process holds about 6,600 connections
//! or more, with or without its log, so the 20,000 does not run
//! over HTTP/2 with h2load; 5,000 (one process) does. The lab's own h2
//! client in the overload client processes (the default) lifts it.

use std::time::Duration;

use super::h2client;
use super::load::{Load, LoadReport};
use super::overload::per_process;
use super::target::{Target, TargetArgs};
use super::Report;
use crate::rig::procfs::fd_count;
use crate::rig::stats::percentile;

/// Concurrent streams per connection: one, as the HTTP/1.1 clients, so the
/// requests in flight equal the connections and the p99 limit means the
/// same thing (latency here is the closed-loop queue, in flight divided by
/// throughput: 5,000 connections x 10 streams over TLS measured p99 2.4 s
/// for that reason alone).
const STREAMS: u32 = 1;

pub struct H2Overload<'a> {
    pub connections: u32,
    pub duration: u64,
    pub paths: &'a [String],
    pub max_p99_ms: f64,
    pub fd_limit: u64,
}

impl H2Overload<'_> {
    pub fn run(&self, target: &TargetArgs, server: &mut Target, report: &mut Report) -> Result<(), String> {
        let pid = server.pid();
        let processes = self.connections.div_ceil(per_process(self.fd_limit)).max(1);
        let seconds = u32::try_from(self.duration).unwrap_or(u32::MAX);
        std::fs::create_dir_all(&target.work_dir)
            .map_err(|e| format!("{}: {e}", target.work_dir.display()))?;
        for path in self.paths {
            let share = self.connections / processes;
            let mut running = Vec::new();
            for i in 0..processes {
                let conns =
                    if i + 1 == processes { self.connections - share * (processes - 1) } else { share };
                let mut load = Load::new(server.protocol, server.load_url(path), conns, seconds);
                load.streams = STREAMS;
                load.log_file = Some(target.work_dir.join(format!("overload-h2load-{i}.tsv")));
                running.push(load.spawn(&target.load_cpu)?);
            }
            std::thread::sleep(Duration::from_secs(self.duration * 2 / 3));
            let held = fd_count(pid).unwrap_or(0);
            let mut total = LoadReport::default();
            let mut latencies = Vec::new();
            let mut slowest: f64 = 0.0;
            for (i, run) in running.into_iter().enumerate() {
                let (r, mut l) = run.finish_with_latencies()?;
                latencies.append(&mut l);
                slowest = slowest.max(r.latency_max_ms.unwrap_or(0.0));
                total.total_requests += r.total_requests;
                total.requests_per_sec += r.requests_per_sec;
                total.non_2xx += r.non_2xx;
                *total.unavailable.get_or_insert(0) += r.unavailable.unwrap_or(0);
                total.failed += r.failed;
                total.timeouts += r.timeouts;
                let _ = std::fs::remove_file(target.work_dir.join(format!("overload-h2load-{i}.tsv")));
            }
            let logged = !latencies.is_empty();
            let p50 = percentile(&mut latencies, 50.0);
            let (p99, max) = if logged {
                (percentile(&mut latencies, 99.0), percentile(&mut latencies, 100.0))
            } else {
                (slowest, slowest)
            };
            let unavailable = total.unavailable.unwrap_or(0);
            report.figure(
                format!("{path} h2load processes x streams per connection"),
                format!("{processes} x {STREAMS}"),
            );
            report.figure(format!("{path} server file descriptors mid-run"), held);
            report.figure(
                format!("{path} answers 2xx / 503"),
                format!("{} / {unavailable}", total.total_requests - total.non_2xx),
            );
            report.figure(format!("{path} answers/s"), format!("{:.0}", total.requests_per_sec));
            if logged {
                report.figure(
                    format!("{path} latency ms p50 / p99 / max"),
                    format!("{p50:.1} / {p99:.1} / {max:.1}"),
                );
            } else {
                report.figure(
                    format!("{path} latency ms max (bounds the p99; no per-request log)"),
                    format!("{max:.1}"),
                );
            }
            report.figure(
                format!("{path} requests failed or errored (refused connections among them) / timed out"),
                format!("{} / {}", total.failed, total.timeouts),
            );
            report.check(server.server.check_alive().is_ok(), format!("{path}: server still running"));
            report.check(total.total_requests > total.non_2xx, format!("{path}: requests were served"));
            report
                .check(p99 <= self.max_p99_ms, format!("{path}: p99 {p99:.1} ms <= {} ms", self.max_p99_ms));
            report.check(
                total.non_2xx == unavailable,
                format!(
                    "{path}: every answer is 2xx or a 5xx refusal ({} others)",
                    total.non_2xx - unavailable
                ),
            );
            report.check(
                total.timeouts == 0,
                format!("{path}: no connection sat 5 s with requests unanswered ({})", total.timeouts),
            );
            std::thread::sleep(Duration::from_millis(500));
            let connector = server.connector(server.protocol)?;
            let path_owned = path.clone();
            let after =
                super::clients::block_on(async move { h2client::probe(&connector, &path_owned).await })?;
            report.check(
                after == Ok(200),
                format!("{path}: a fresh HTTP/2 connection is served afterwards ({after:?})"),
            );
        }
        Ok(())
    }
}
