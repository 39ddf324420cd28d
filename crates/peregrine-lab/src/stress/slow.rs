//! Slow clients (slowloris): thousands of connections each sending one byte
//! of a request head per second.
//!
//! Sequence: a clean wrk run; the slow clients connect; a wrk run while
//! they dribble; the server cuts them at its header timeout; a second clean
//! run. Checked: throughput with the slow clients is at least
//! `--min-ratio` of the clean runs' mean, every slow client was cut between
//! the header timeout and two seconds after it (the sweep runs once a
//! second) with a `408`, none got any other answer, and wrk saw no errors.

use std::sync::mpsc;
use std::time::Duration;

use clap::Args as ClapArgs;

use super::clients::{block_on, slow_clients};
use super::noisy::pin_self;
use super::target::{percentile, Target, TargetArgs, Wrk};
use super::{ratio, Report};

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Slow connections.
    #[arg(long, default_value_t = 5_000)]
    clients: usize,
    /// The server's header timeout (passed as --header-timeout).
    #[arg(long, default_value_t = 15)]
    header_timeout: u64,
    /// Seconds of each wrk run; must end before the header timeout.
    #[arg(long, default_value_t = 8)]
    duration: u32,
    /// Normal load: path and connections.
    #[arg(long, default_value = "/plaintext")]
    path: String,
    #[arg(long, default_value_t = 256)]
    connections: u32,
    /// Fail when throughput with slow clients falls below this share.
    #[arg(long, default_value_t = 0.90)]
    min_ratio: f64,
}

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    if u64::from(args.duration) + 4 > args.header_timeout {
        return Err(format!(
            "--duration {} leaves no room before --header-timeout {}: the slow clients must still be \
             connected while wrk runs",
            args.duration, args.header_timeout
        ));
    }
    super::target::raise_fd_limit();
    let extra = ["--header-timeout".to_string(), args.header_timeout.to_string()];
    let mut server = Target::start(target, "slow", &extra)?;
    let mut report = Report::new("slow");
    report.figure("server log", server.log.display());
    println!("slow: {} clients at 1 byte/s, header timeout {} s", args.clients, args.header_timeout);
    let wrk = Wrk::new(server.url(&args.path), args.connections, args.duration);

    let before = wrk.run(&target.load_cpu)?;
    println!("  clean: {:.0} req/s", before.requests_per_sec);

    // The slow clients live on their own thread (pinned with the load), so
    // they keep dribbling while this thread runs wrk.
    let (connected_tx, connected_rx) = mpsc::channel();
    let (addr, n, cpu) = (server.addr, args.clients, target.load_cpu.clone());
    let timeout = Duration::from_secs(args.header_timeout);
    let head = format!("GET {} HTTP/1.1\r\nHost: lab\r\nX-Slow: {}\r\n\r\n", args.path, "s".repeat(120))
        .into_bytes();
    let slow = std::thread::spawn(move || {
        pin_self(&cpu);
        block_on(async move {
            let (tx, mut rx) = tokio::sync::watch::channel(0usize);
            let forward = tokio::task::spawn_local(async move {
                let _ = rx.changed().await;
                let _ = connected_tx.send(*rx.borrow());
            });
            let outcome = slow_clients(
                addr,
                n,
                head,
                Duration::from_secs(1),
                timeout * 2 + Duration::from_secs(10),
                tx,
            )
            .await;
            let _ = forward.await;
            outcome
        })
    });
    let connected = connected_rx.recv_timeout(Duration::from_secs(60)).unwrap_or(0);
    println!("  {connected} slow clients connected");
    let during = wrk.run(&target.load_cpu)?;
    println!("  with slow clients: {:.0} req/s", during.requests_per_sec);
    let outcome = slow.join().map_err(|_| "slow-client thread panicked".to_string())??;
    let after = wrk.run(&target.load_cpu)?;
    println!("  clean again: {:.0} req/s", after.requests_per_sec);

    let clean = (before.requests_per_sec + after.requests_per_sec) / 2.0;
    let kept = ratio(during.requests_per_sec, clean);
    let mut cuts = outcome.cut_after.clone();
    let earliest = percentile(&mut cuts, 0.0);
    let latest = percentile(&mut cuts, 100.0);
    let t = args.header_timeout as f64;
    report.figure("req/s clean (mean of before and after)", format!("{clean:.0}"));
    report.figure("req/s with slow clients", format!("{:.0}", during.requests_per_sec));
    report.figure("with / clean", format!("{kept:.3}"));
    report.figure("slow clients connected", outcome.connected);
    report.figure("slow clients cut", outcome.cut_after.len());
    report.figure("cut after (s), earliest / latest", format!("{earliest:.1} / {latest:.1}"));
    report.figure("cut with 408", outcome.got_408);
    report.check(kept >= args.min_ratio, format!("throughput kept {kept:.3} >= {}", args.min_ratio));
    report.check(
        outcome.connected == args.clients && outcome.connect_failed == 0,
        format!("all {} slow clients connected ({} failed)", args.clients, outcome.connect_failed),
    );
    report.check(
        outcome.still_open == 0,
        format!("no slow client outlived the timeout ({} did)", outcome.still_open),
    );
    report.check(
        !cuts.is_empty() && earliest >= t - 0.5 && latest <= t + 3.0,
        format!("cut between {t} s and {} s after their first byte", t + 3.0),
    );
    report.check(
        outcome.got_408 == outcome.cut_after.len(),
        format!("every cut client got a 408 ({} of {})", outcome.got_408, outcome.cut_after.len()),
    );
    report
        .check(outcome.got_other == 0, format!("no slow client got another answer ({})", outcome.got_other));
    let errors = before.error_count() + during.error_count() + after.error_count();
    report.check(errors == 0, format!("no errors for normal clients ({errors})"));
    report.check(server.server.check_alive().is_ok(), "server still running");
    Ok(report.finish())
}
