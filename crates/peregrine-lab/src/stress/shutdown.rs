//! Shutdown under load: SIGTERM while keep-alive clients are busy.
//!
//! Keep-alive clients cycle `/plaintext`, `/json` and `/queries` for
//! `--warmup` seconds; then the server gets SIGTERM and the clients carry on
//! until it has gone. Checked: no client saw a truncated or malformed
//! response, in-flight requests were answered (responses announcing
//! `Connection: close` arrived after the signal), the server exited with
//! status 0 within `--max-exit-secs`, and at most one request per connection
//! went unanswered (a request sent as the server closed that idle
//! connection: the keep-alive race every HTTP/1.1 client must retry).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;

use super::clients::{block_on, keepalive_loops};
use super::target::{Target, TargetArgs};
use super::Report;
use crate::rig::cpu::pin_self;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Keep-alive client connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Seconds of load before the signal.
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Fail when the server takes longer to exit.
    #[arg(long, default_value_t = 5.0)]
    max_exit_secs: f64,
}

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    let mut server = Target::start(target, "shutdown", &[])?;
    let mut report = Report::new("shutdown");
    report.figure("server log", server.log.display());
    println!("shutdown: {} keep-alive clients, SIGTERM after {} s", args.connections, args.warmup);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (addr, conns, cpu) = (server.addr, args.connections, target.load_cpu.clone());
    let (done_tx, done_rx) = mpsc::channel();
    let clients = std::thread::spawn(move || {
        pin_self(&cpu);
        let stats =
            block_on(keepalive_loops(addr, conns, &["/plaintext", "/json", "/queries?queries=10"], stop_rx));
        let _ = done_tx.send(());
        stats
    });
    std::thread::sleep(Duration::from_secs(args.warmup));
    let signalled = Instant::now();
    server.server.send_sigterm().map_err(|e| format!("cannot signal the server: {e}"))?;
    let status = server.server.wait_exit(Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let exit_secs = signalled.elapsed().as_secs_f64();
    // Let the clients notice the closed connections and refused connects.
    std::thread::sleep(Duration::from_millis(500));
    let _ = stop_tx.send(true);
    let _ = done_rx.recv_timeout(Duration::from_secs(15));
    let stats = clients.join().map_err(|_| "client thread panicked".to_string())??;

    report.figure("requests answered 200", stats.ok);
    report.figure("answers announcing Connection: close", stats.close_announced);
    report.figure("truncated responses", stats.truncated);
    report.figure("malformed responses", stats.malformed);
    report.figure("requests unanswered on a closing connection", stats.unanswered);
    report.figure("exit after SIGTERM (s)", format!("{exit_secs:.2}"));
    report.figure("exit status", status.map_or("still running".into(), |s| s.to_string()));
    report.check(stats.truncated == 0, format!("no truncated response ({:?})", stats.first_problem));
    report.check(stats.malformed == 0, "no malformed response");
    report.check(stats.other_status == 0, format!("every answer was 200 ({} were not)", stats.other_status));
    report.check(
        stats.ok > 0 && stats.close_announced > 0,
        "in-flight requests were answered with Connection: close",
    );
    report.check(
        stats.unanswered <= args.connections as u64,
        format!(
            "at most one unanswered request per connection ({} for {})",
            stats.unanswered, args.connections
        ),
    );
    report.check(status.is_some_and(|s| s.success()), "exit status 0");
    report.check(exit_secs <= args.max_exit_secs, format!("exited within {} s", args.max_exit_secs));
    Ok(report.finish())
}
