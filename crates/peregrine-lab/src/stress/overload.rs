//! Overload: far more concurrent connections than a worker is sized for.
//!
//! `--connections` keep-alive clients (split over several client processes,
//! since one process cannot hold more sockets than its open-file limit) loop
//! on `/plaintext` and then on `/json`. The server holds what fits under its
//! connection limit and answers the rest `503` and closes them; those
//! clients reconnect and try again. Checked: the server stays up, every
//! answer is well-formed (200, or 503 at the limit), no request waits past
//! the client timeout or goes unanswered, p99 latency stays under
//! `--max-p99-ms`, and afterwards a fresh connection is served at once.
//!
//! The clients are ours, not wrk: two or more wrk processes with 10,000
//! connections each stall here (the later ones connect but never send),
//! which measured wrk, not the server.
//!
//! `--protocol tls` runs the same clients over TLS; the server closes a
//! TLS connection past its limit before the handshake (a 503 would cost
//! the handshake it is refusing), so refusals show as failed connects, not
//! 503s. `--protocol h2` and `h2c` run the lab's own HTTP/2 client in the
//! same client processes, one request in flight per connection
//! ([`super::h2client::keepalive_loops`]): a connection past the limit is
//! closed (TLS: before the handshake; h2c: after an HTTP/1.1 `503` an
//! HTTP/2 client cannot read), so refusals show as failed connects there
//! too. `--h2load` loads with h2load instead (see [`super::overload_h2`]),
//! which cannot hold 20,000 connections.
//!
//! `--protocol ws` opens `--connections` WebSockets on `/ws` instead, split
//! over `peregrine-lab ws-load` processes, each socket echoing 5-byte
//! messages for `--duration` (`--paths` does not apply). Checked: the
//! server stays up, echoes flow, the worst process's p99 echo latency is
//! under `--max-p99-ms`, no socket that opened failed (closed, a wrong
//! frame, or no echo within 10 s), and afterwards a fresh socket upgrades
//! and echoes. Sockets refused at the server's connection limit (`503`)
//! are counted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use clap::Args as ClapArgs;

use super::clients::{block_on, keepalive_loops, LoopStats};
use super::load::{finish_ws_load, Load};
use super::protocol::{Connector, Protocol};
use super::target::{probe, Target, TargetArgs};
use super::Report;
use crate::rig::cpu::pin_self;
use crate::rig::fdlimit;
use crate::rig::procfs::{self, fd_count};
use crate::rig::stats::percentile;
use crate::wsload::EchoReport;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Concurrent connections in total (WebSocket: sockets).
    #[arg(long, default_value_t = 20_000)]
    connections: u32,
    /// Seconds of load per path.
    #[arg(long, default_value_t = 15)]
    duration: u64,
    /// Paths to load, one after the other.
    #[arg(long, value_delimiter = ',', default_value = "/plaintext,/json")]
    paths: Vec<String>,
    /// Fail when a path's p99 latency exceeds this.
    #[arg(long, default_value_t = 2000.0)]
    max_p99_ms: f64,
    /// Passed to the server as --max-connections (per worker); by default
    /// the server's own, lowered to fit its open-file limit.
    #[arg(long)]
    server_limit: Option<usize>,
    /// With --protocol h2 or h2c: load with h2load processes (10 streams
    /// per connection possible, but h2load aborts past about 6,600
    /// connections a process) instead of the lab's own HTTP/2 client.
    #[arg(long)]
    h2load: bool,
}

/// One client process of an overload run (started by the scenario itself).
#[derive(ClapArgs, Debug)]
pub struct ClientArgs {
    #[arg(long)]
    addr: SocketAddr,
    #[arg(long)]
    connections: usize,
    #[arg(long)]
    duration: u64,
    #[arg(long)]
    path: String,
    #[arg(long, value_enum, default_value_t = Protocol::H1)]
    protocol: Protocol,
    /// The test CA, for TLS.
    #[arg(long)]
    ca: Option<PathBuf>,
}

/// Runs keep-alive loops and prints their [`LoopStats`] as one JSON line.
pub fn client(args: &ClientArgs) -> ExitCode {
    fdlimit::raise();
    let connector = match Connector::new(args.protocol, args.addr, args.ca.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let (conns, path, duration) = (args.connections, args.path.clone(), args.duration);
    let stats = block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let loops = tokio::task::spawn_local(async move {
            if connector.protocol.is_h2() {
                super::h2client::keepalive_loops(connector, conns, &path, stop_rx).await
            } else {
                keepalive_loops(connector, conns, &[&path], stop_rx).await
            }
        });
        tokio::time::sleep(Duration::from_secs(duration)).await;
        let _ = stop_tx.send(true);
        loops.await.unwrap_or_default()
    });
    match stats.and_then(|s| serde_json::to_string(&s).map_err(|e| e.to_string())) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Sockets one client process is given, leaving room under its open-file
/// limit.
pub fn per_process(limit: u64) -> u32 {
    u32::try_from(limit.saturating_sub(256).clamp(1, 9_000)).unwrap_or(9_000)
}

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    let fd_limit = fdlimit::raise();
    let mut extra = Vec::new();
    if let Some(limit) = args.server_limit {
        extra.extend(["--max-connections".to_string(), limit.to_string()]);
    }
    let mut server = Target::start(target, "overload", &extra)?;
    let pid = server.pid();
    let mut report = Report::new("overload");
    report.figure("server log", server.log.display());
    report.figure("protocol", server.protocol.describe());
    println!("overload: {} connections, {} s per path, server PID {pid}", args.connections, args.duration);
    report.figure("open-file limit (server and each client process)", fd_limit);
    pin_self(&target.load_cpu);
    if server.protocol.is_h2() && args.h2load {
        let load = super::overload_h2::H2Overload {
            connections: args.connections,
            duration: args.duration,
            paths: &args.paths,
            max_p99_ms: args.max_p99_ms,
            fd_limit,
        };
        load.run(target, &mut server, &mut report)?;
        report.check(server.server.check_alive().is_ok(), "server survived the whole run");
        return Ok(report.finish());
    }
    if server.protocol == Protocol::Ws {
        run_ws(target, args, &mut server, &mut report, fd_limit)?;
        report.check(server.server.check_alive().is_ok(), "server survived the whole run");
        return Ok(report.finish());
    }
    let me = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let load_addr = server.addr_of(server.protocol).to_string();
    let ca = server.certs.as_ref().map(|c| c.ca.display().to_string());

    let processes = args.connections.div_ceil(per_process(fd_limit)).max(1);
    for path in &args.paths {
        let share = args.connections / processes;
        let cpu_before = procfs::cpu_secs(pid)?;
        let started = std::time::Instant::now();
        let mut children = Vec::new();
        for i in 0..processes {
            let conns = if i + 1 == processes { args.connections - share * (processes - 1) } else { share };
            let mut command = Command::new("taskset");
            command
                .args(["-c", &target.load_cpu])
                .arg(&me)
                .args(["stress", "client", "--addr", &load_addr])
                .args(["--protocol", server.protocol.name()]);
            if let Some(ca) = &ca {
                command.args(["--ca", ca]);
            }
            let child = command
                .args([
                    "--connections",
                    &conns.to_string(),
                    "--duration",
                    &args.duration.to_string(),
                    "--path",
                    path,
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| format!("cannot start a client process: {e}"))?;
            children.push(child);
        }
        // Sample what the server holds while every connection is open.
        std::thread::sleep(Duration::from_secs(args.duration * 2 / 3));
        let held = fd_count(pid).unwrap_or(0);
        let mut total = LoopStats::default();
        for child in children {
            let out = child.wait_with_output().map_err(|e| format!("client process: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout);
            let stats: LoopStats = serde_json::from_str(text.trim())
                .map_err(|e| format!("client process printed {text:?} ({}): {e}", out.status))?;
            total.absorb(stats);
        }
        // How busy the server was: well under 100% means the clients, not
        // the server, set the throughput and the latency.
        let busy = (procfs::cpu_secs(pid)? - cpu_before) / started.elapsed().as_secs_f64();
        let answered = total.latencies_ms.len();
        let p50 = percentile(&mut total.latencies_ms, 50.0);
        let p99 = percentile(&mut total.latencies_ms, 99.0);
        let max = percentile(&mut total.latencies_ms, 100.0);
        report.figure(format!("{path} client processes"), processes);
        report.figure(format!("{path} server file descriptors mid-run"), held);
        report.figure(format!("{path} server CPU busy"), format!("{:.0}%", busy * 100.0));
        report.figure(
            format!("{path} answers 200 / 503 refusals"),
            format!("{} / {}", total.ok, total.unavailable),
        );
        report.figure(format!("{path} answers/s"), format!("{:.0}", answered as f64 / args.duration as f64));
        report
            .figure(format!("{path} latency ms p50 / p99 / max"), format!("{p50:.1} / {p99:.1} / {max:.1}"));
        report.figure(
            format!("{path} errors: timed out / unanswered / truncated / malformed / connect failed"),
            format!(
                "{} / {} / {} / {} / {}",
                total.timed_out, total.unanswered, total.truncated, total.malformed, total.connect_failed
            ),
        );
        report.check(server.server.check_alive().is_ok(), format!("{path}: server still running"));
        report.check(total.ok > 0, format!("{path}: requests were served"));
        report.check(p99 <= args.max_p99_ms, format!("{path}: p99 {p99:.1} ms <= {} ms", args.max_p99_ms));
        report.check(
            total.other_status == total.unavailable,
            format!(
                "{path}: every answer is 200 or a 503 refusal ({} others)",
                total.other_status - total.unavailable
            ),
        );
        report.check(
            total.timed_out == 0,
            format!("{path}: no request waited 10 s for an answer ({})", total.timed_out),
        );
        report.check(
            total.truncated + total.malformed == 0,
            format!("{path}: no truncated or malformed answer ({})", total.truncated + total.malformed),
        );
        // Each loop may lose the request it sent as the run stopped, and a
        // refused connection closes: at most one per connection per second.
        report.check(
            total.unanswered <= u64::from(args.connections),
            format!("{path}: requests unanswered {} <= connections", total.unanswered),
        );
        // Give the closes a moment, then a newcomer must be served.
        std::thread::sleep(Duration::from_millis(500));
        let after = if server.protocol == Protocol::H1 {
            probe(server.addr, path)
        } else {
            let (connector, path) = (server.connector(server.protocol)?, path.clone());
            block_on(async move { super::h2client::probe(&connector, &path).await })?
        };
        report
            .check(after == Ok(200), format!("{path}: a fresh connection is served afterwards ({after:?})"));
    }
    report.check(server.server.check_alive().is_ok(), "server survived the whole run");
    Ok(report.finish())
}

/// Overload over WebSocket: ws-load processes, each holding its share of
/// the sockets, all echoing at once.
fn run_ws(
    target: &TargetArgs,
    args: &Args,
    server: &mut Target,
    report: &mut Report,
    fd_limit: u64,
) -> Result<(), String> {
    let pid = server.pid();
    let processes = args.connections.div_ceil(per_process(fd_limit)).max(1);
    let share = args.connections / processes;
    let seconds = u32::try_from(args.duration).unwrap_or(u32::MAX);
    let cpu_before = procfs::cpu_secs(pid)?;
    let started = std::time::Instant::now();
    let mut children = Vec::new();
    for i in 0..processes {
        let conns = if i + 1 == processes { args.connections - share * (processes - 1) } else { share };
        let load = Load::new(Protocol::Ws, server.url_of(Protocol::Ws, "/"), conns, seconds);
        children.push(load.spawn_ws_load(&target.load_cpu)?);
    }
    // Sample what the server holds while every socket is open (they open
    // before the timed echoes begin).
    std::thread::sleep(Duration::from_secs(args.duration * 2 / 3 + 2));
    let held = fd_count(pid).unwrap_or(0);
    let mut reports = Vec::new();
    for child in children {
        reports.push(finish_ws_load(child)?);
    }
    let busy = (procfs::cpu_secs(pid)? - cpu_before) / started.elapsed().as_secs_f64();
    let sum = |f: fn(&EchoReport) -> u64| reports.iter().map(f).sum::<u64>();
    let worst = |f: fn(&EchoReport) -> Option<f64>| reports.iter().filter_map(f).fold(0.0, f64::max);
    let (opened, not_opened) =
        (sum(|r| (r.connections - r.open_failed) as u64), sum(|r| r.open_failed as u64));
    let (echoes, failed) = (sum(|r| r.messages), sum(|r| r.errors));
    let rate: f64 = reports.iter().map(|r| r.messages_per_sec).sum();
    let (p99, max) = (worst(|r| r.latency_p99_ms), worst(|r| r.latency_max_ms));
    let first_failure = reports.iter().find_map(|r| r.first_error.clone());
    let first_refusal = reports.iter().find_map(|r| r.first_open_error.clone());
    report.figure("ws-load processes", processes);
    report.figure("server file descriptors mid-run", held);
    report.figure("server CPU busy", format!("{:.0}%", busy * 100.0));
    report.figure("WebSockets opened / not opened", format!("{opened} / {not_opened} ({first_refusal:?})"));
    report.figure("echoes, echoes/s", format!("{echoes}, {rate:.0}"));
    report.figure("echo latency ms, worst process p99 / max", format!("{p99:.1} / {max:.1}"));
    report.figure("sockets failed while echoing", format!("{failed} ({first_failure:?})"));
    report.check(server.server.check_alive().is_ok(), "server still running");
    report.check(echoes > 0, "messages were echoed");
    report.check(p99 <= args.max_p99_ms, format!("p99 {p99:.1} ms <= {} ms", args.max_p99_ms));
    report.check(failed == 0, format!("no open socket failed while echoing ({failed}; {first_failure:?})"));
    std::thread::sleep(Duration::from_millis(500));
    let connector = server.connector(Protocol::Ws)?;
    let after =
        block_on(async move { super::idle::open_websocket(&connector).await.map(|(_, status)| status) })?;
    report.check(after == Ok(101), format!("a fresh socket upgrades and echoes afterwards ({after:?})"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_processes_stay_under_the_file_limit() {
        assert_eq!(per_process(20_000), 9_000);
        assert_eq!(per_process(4_096), 3_840);
        assert_eq!(20_000u32.div_ceil(per_process(20_000)), 3);
        assert_eq!(per_process(10), 1);
    }
}
