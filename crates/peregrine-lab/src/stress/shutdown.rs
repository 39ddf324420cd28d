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
//!
//! `--protocol tls` runs the same clients over TLS, with the same checks.
//! `--protocol h2` and `h2c` run `--connections / --streams` HTTP/2
//! connections of `--streams` request loops each ([`super::h2client`]),
//! and check instead: the server sent GOAWAY, streams in flight at the
//! signal were answered (200s completed after it), no response was cut
//! short, and every stream left unanswered was refused by GOAWAY or
//! REFUSED_STREAM (never processed, which a client may retry), none reset
//! or dropped with its connection; exit status 0 within the limit as over
//! HTTP/1.1.
//!
//! `--protocol ws` opens `--connections` WebSockets on `/ws`, each echoing
//! 5-byte messages ([`crate::wsload::echo_loops`]), and checks instead:
//! every socket was opened and echoed, each one received a close frame
//! with code `1001` (going away) after the signal, none was dropped without
//! one or left open, and the process exited 0 within `--max-exit-secs`.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;

use super::clients::{block_on, keepalive_loops};
use super::h2client;
use super::protocol::Protocol;
use super::target::{Target, TargetArgs};
use super::Report;
use crate::rig::cpu::pin_self;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Keep-alive client connections (WebSocket: sockets).
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Seconds of load before the signal.
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Fail when the server takes longer to exit.
    #[arg(long, default_value_t = 5.0)]
    max_exit_secs: f64,
    /// HTTP/2 only: concurrent streams per connection (the connections are
    /// --connections / --streams).
    #[arg(long, default_value_t = 4)]
    streams: usize,
}

const PATHS: [&str; 3] = ["/plaintext", "/json", "/queries?queries=10"];

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    let mut server = Target::start(target, "shutdown", &[])?;
    let mut report = Report::new("shutdown");
    report.figure("server log", server.log.display());
    report.figure("protocol", server.protocol.describe());
    if server.protocol.is_h2() {
        return run_h2(target, args, server, report);
    }
    if server.protocol == Protocol::Ws {
        return run_ws(target, args, server, report);
    }
    println!("shutdown: {} keep-alive clients, SIGTERM after {} s", args.connections, args.warmup);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (connector, conns, cpu) =
        (server.connector(server.protocol)?, args.connections, target.load_cpu.clone());
    let (done_tx, done_rx) = mpsc::channel();
    let clients = std::thread::spawn(move || {
        pin_self(&cpu);
        let stats = block_on(keepalive_loops(connector, conns, &PATHS, stop_rx));
        let _ = done_tx.send(());
        stats
    });
    std::thread::sleep(Duration::from_secs(args.warmup));
    let (status, exit_secs) = terminate(&mut server)?;
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

/// Shutdown over HTTP/2: GOAWAY, streams in flight answered, exit 0.
/// Sends SIGTERM and waits (up to 30 s) for the server to exit: its exit
/// status and the seconds it took.
fn terminate(server: &mut Target) -> Result<(Option<std::process::ExitStatus>, f64), String> {
    let signalled = Instant::now();
    server.server.send_sigterm().map_err(|e| format!("cannot signal the server: {e}"))?;
    let status = server.server.wait_exit(Duration::from_secs(30)).map_err(|e| e.to_string())?;
    Ok((status, signalled.elapsed().as_secs_f64()))
}

fn run_h2(
    target: &TargetArgs,
    args: &Args,
    mut server: Target,
    mut report: Report,
) -> Result<Report, String> {
    let streams = args.streams.max(1);
    let conns = (args.connections / streams).max(1);
    println!("shutdown: {conns} HTTP/2 connections x {streams} streams, SIGTERM after {} s", args.warmup);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (signal_tx, signal_rx) = tokio::sync::watch::channel(false);
    let (connector, cpu) = (server.connector(server.protocol)?, target.load_cpu.clone());
    let (done_tx, done_rx) = mpsc::channel();
    let clients = std::thread::spawn(move || {
        pin_self(&cpu);
        let stats = block_on(h2client::loops(connector, conns, streams, &PATHS, signal_rx, stop_rx));
        let _ = done_tx.send(());
        stats
    });
    std::thread::sleep(Duration::from_secs(args.warmup));
    let _ = signal_tx.send(true);
    let (status, exit_secs) = terminate(&mut server)?;
    std::thread::sleep(Duration::from_millis(500));
    let _ = stop_tx.send(true);
    let _ = done_rx.recv_timeout(Duration::from_secs(15));
    let stats = clients.join().map_err(|_| "client thread panicked".to_string())??;

    report.figure("HTTP/2 connections opened", stats.connections);
    report.figure("requests answered 200", stats.ok);
    report.figure("of them completed after SIGTERM", stats.ok_after_signal);
    report.figure("connections told GOAWAY", stats.goaway);
    report.figure("streams refused unprocessed (GOAWAY / REFUSED_STREAM)", stats.refused);
    report.figure("streams reset or dropped unanswered", stats.unanswered);
    report.figure("truncated responses", stats.truncated);
    report.figure("requests timed out", stats.timed_out);
    report.figure("exit after SIGTERM (s)", format!("{exit_secs:.2}"));
    report.figure("exit status", status.map_or("still running".into(), |s| s.to_string()));
    report.check(stats.truncated == 0, format!("no truncated response ({:?})", stats.first_problem));
    report.check(
        stats.unanswered == 0,
        format!("every unanswered stream was refused, none reset or dropped ({:?})", stats.first_problem),
    );
    report.check(stats.timed_out == 0, "no request timed out");
    report.check(stats.other_status == 0, format!("every answer was 200 ({} were not)", stats.other_status));
    report.check(stats.goaway > 0, format!("the server sent GOAWAY ({} connections)", stats.goaway));
    report.check(stats.ok_after_signal > 0, "streams in flight at SIGTERM were answered");
    report.check(status.is_some_and(|s| s.success()), "exit status 0");
    report.check(exit_secs <= args.max_exit_secs, format!("exited within {} s", args.max_exit_secs));
    Ok(report.finish())
}

/// What the WebSocket clients saw around the signal.
#[derive(Default)]
struct WsEnds {
    opened: usize,
    open_failed: usize,
    first_open_error: Option<String>,
    echoes_before_signal: u64,
    echoes: u64,
    /// Sockets closed by the server with `1001`.
    going_away: usize,
    /// Sockets closed with another code: (code, how many).
    other_codes: Vec<u16>,
    /// Sockets that failed without a close frame.
    dropped: usize,
    first_drop: Option<String>,
    /// Sockets still open when the clients stopped waiting.
    still_open: usize,
}

/// Shutdown over WebSocket: each open socket gets close `1001`, exit 0.
fn run_ws(
    target: &TargetArgs,
    args: &Args,
    mut server: Target,
    mut report: Report,
) -> Result<Report, String> {
    use crate::wsload::{echo_loops, open_all, parse_url, EchoCounts, LoopEnd};
    println!("shutdown: {} WebSockets echoing, SIGTERM after {} s", args.connections, args.warmup);
    let (url, conns, cpu) = (server.url_of(Protocol::Ws, "/"), args.connections, target.load_cpu.clone());
    let (ready_tx, ready_rx) = mpsc::channel();
    let (signal_tx, mut signal_rx) = tokio::sync::watch::channel(false);
    let clients = std::thread::spawn(move || {
        pin_self(&cpu);
        block_on(async move {
            let target = std::rc::Rc::new(parse_url(&url)?);
            let opened = open_all(&target, conns, None).await;
            let mut ends = WsEnds {
                opened: opened.sockets.len(),
                open_failed: opened.failed,
                first_open_error: opened.first_error,
                ..WsEnds::default()
            };
            let counts = std::rc::Rc::new(EchoCounts::new());
            let message = std::rc::Rc::new(crate::rig::wsframe::frame(0x81, b"hello"));
            let loops = echo_loops(opened.sockets, message, 5, &counts);
            let _ = ready_tx.send(());
            let _ = signal_rx.changed().await;
            ends.echoes_before_signal = counts.done.get();
            // The server has its grace (and the close timeout) to close
            // every socket; then whatever is still echoing is open.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
            for handle in loops {
                match tokio::time::timeout_at(deadline, handle).await {
                    Ok(Ok(LoopEnd::Failed { close_code: Some(1001) })) => ends.going_away += 1,
                    Ok(Ok(LoopEnd::Failed { close_code: Some(code) })) => ends.other_codes.push(code),
                    Ok(Ok(LoopEnd::Failed { close_code: None })) | Ok(Err(_)) => ends.dropped += 1,
                    Ok(Ok(LoopEnd::Stopped)) | Err(_) => ends.still_open += 1,
                }
            }
            counts.stop.set(true);
            ends.echoes = counts.done.get();
            if ends.dropped > 0 {
                ends.first_drop = counts.first_error.borrow().clone();
            }
            Ok::<_, String>(ends)
        })
    });
    // Echoes flow for the warm-up once every socket is open.
    let _ = ready_rx.recv_timeout(Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(args.warmup));
    let _ = signal_tx.send(true);
    let (status, exit_secs) = terminate(&mut server)?;
    let ends = clients.join().map_err(|_| "client thread panicked".to_string())???;

    report.figure("WebSockets opened / not opened", format!("{} / {}", ends.opened, ends.open_failed));
    report
        .figure("echoes before SIGTERM / in all", format!("{} / {}", ends.echoes_before_signal, ends.echoes));
    report.figure("sockets closed with 1001", ends.going_away);
    report.figure("sockets closed with another code", format!("{:?}", ends.other_codes));
    report.figure("sockets dropped without a close frame", ends.dropped);
    report.figure("sockets still open after 15 s", ends.still_open);
    report.figure("exit after SIGTERM (s)", format!("{exit_secs:.2}"));
    report.figure("exit status", status.map_or("still running".into(), |s| s.to_string()));
    report.check(
        ends.open_failed == 0 && ends.opened == args.connections,
        format!("all {} WebSockets opened ({:?})", args.connections, ends.first_open_error),
    );
    report.check(ends.echoes_before_signal > 0, "messages were echoed before the signal");
    report.check(
        ends.going_away == ends.opened && ends.opened > 0,
        format!("every socket got close 1001 ({} of {})", ends.going_away, ends.opened),
    );
    report.check(
        ends.dropped == 0 && ends.other_codes.is_empty(),
        format!(
            "no socket dropped without a close frame or closed with another code ({} dropped, first {:?})",
            ends.dropped, ends.first_drop
        ),
    );
    report.check(ends.still_open == 0, format!("no socket left open ({})", ends.still_open));
    report.check(status.is_some_and(|s| s.success()), "exit status 0");
    report.check(exit_secs <= args.max_exit_secs, format!("exited within {} s", args.max_exit_secs));
    Ok(report.finish())
}
