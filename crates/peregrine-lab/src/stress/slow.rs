//! Slow clients (slowloris): thousands of connections each sending one byte
//! of a request head per second.
//!
//! Each round: a clean load run; the slow clients connect; a load run while
//! they dribble; the server cuts them at its header timeout. Rounds repeat
//! (`--rounds`) and the median of the rounds' ratios (slow run over the
//! clean run just before it) is compared, because one run against another
//! varies by more than the 10% being measured on a shared 2-core machine.
//! Checked: that median ratio is at least `--min-ratio`, every slow client
//! was cut between the
//! header timeout and three seconds after it (the sweep runs once a second),
//! none got an answer other than `408`, and the load saw no errors. Server
//! requests per CPU-second are reported beside requests/s: the slow clients
//! share the load CPU with the load tool here, so part of any loss is the
//! client's.
//!
//! `--protocol` chooses what is slow and what the normal load speaks (wrk
//! for h1 and tls, h2load for h2 and h2c):
//! - `h1`: an HTTP/1.1 request head, a byte a second; each is cut with
//!   `408`.
//! - `tls`, `h2`: the TLS ClientHello (offering `http/1.1` or `h2`), a
//!   byte a second: a handshake held open. The header timeout bounds the
//!   handshake; the cut is a close, as no HTTP has been spoken.
//! - `h2c`: the connection preface and SETTINGS at once, then the first
//!   HEADERS frame a byte a second. The header timeout bounds an HTTP/2
//!   connection until its first stream; the cut is a close. With
//!   `--h2-attack body` the stream opens at once (a POST to `/upload`) and
//!   its body comes as one-byte DATA frames, one a second; with
//!   `--h2-attack window` a GET for a 300 KB file opens with a 100-byte
//!   stream window, which grows by a 20-byte WINDOW_UPDATE a second. Both
//!   are cut by the minimum data rates (5 s grace, then 240 B/s of DATA
//!   received or window granted), between the grace and the sweep's 3 s
//!   after it; the load runs beside them for at most 3 s of each round.
//! - `ws`: the normal load is `peregrine-lab ws-load` echoing on `/ws`.
//!   Each slow client upgrades at once, then sends a binary frame's header
//!   (declaring 1 MiB) and its payload a byte a second. Every byte is
//!   input, so no read deadline or keepalive ping cuts it: what bounds it
//!   is the minimum request-body rate, which holds a message part-way in
//!   (the server's default: 240 B/s after a 5 s grace). Each is cut with
//!   close `1008` between the grace and the sweep's 3 s after it, plus the
//!   2 s the server waits for the client's answer to its close; the load
//!   runs beside them for at most 3 s of each round, while all are still
//!   connected. Beside them, `--non-readers` clients
//!   upgrade and then send 64 KiB messages without ever reading the echoes
//!   (the smallest receive buffer, 2,304 bytes): the server's writes stall,
//!   and the minimum response rate (240 B/s after a 5 s grace) must reset
//!   each within `--max-non-reader-secs` of its first byte (by default the
//!   grace, the sweep's 3 s, and the 9.6 s at 240 B/s that a full receive
//!   buffer buys, since the server counts what the client's kernel took).

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;

use super::clients::{block_on, non_reader_receive_buffer, slow_clients, SlowOutcome, Slowness};
use super::load::Load;
use super::protocol::{client_hello, Protocol};
use super::target::{measured_run, median, Target, TargetArgs, WS_PATH};
use super::{ratio, Report};
use crate::rig::cpu::pin_self;
use crate::rig::fdlimit;
use crate::rig::stats::percentile;
use crate::rig::wsframe;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Slow connections.
    #[arg(long, default_value_t = 5_000)]
    clients: usize,
    /// Clean/slow rounds; the median of their ratios is compared.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// The server's header timeout (passed as --header-timeout).
    #[arg(long, default_value_t = 15)]
    header_timeout: u64,
    /// Seconds of each load run; must end before the header timeout.
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
    /// h2c only: what the slow clients do slowly. `head`: the first
    /// HEADERS frame, a byte a second (cut at the header timeout).
    /// `body`: a POST's HEADERS at once, then one-byte DATA frames, one a
    /// second (R-U-Dead-Yet in HTTP/2's terms). `window`: a GET for a
    /// 300 KB file with a 100-byte stream window, then a 20-byte
    /// WINDOW_UPDATE a second (slow read). Body and window are cut by the
    /// minimum data rates (240 B/s after a 5 s grace; what the streams
    /// move counts: DATA received, window granted).
    #[arg(long, value_enum, default_value_t = H2Attack::Head)]
    h2_attack: H2Attack,
    /// WebSocket only: clients that flood messages and never read the
    /// echoes, beside the slow ones.
    #[arg(long, default_value_t = 100)]
    non_readers: usize,
    /// WebSocket only: fail when a non-reader is not cut within this many
    /// seconds of its first byte. Default: what the minimum response rate
    /// allows, which is its 5 s grace, the once-a-second sweep up to 3 s
    /// late, and the seconds at 240 B/s that the bytes the client's kernel
    /// took (at most its receive buffer, 2,304 bytes) buy; 17.6 s here.
    #[arg(long)]
    max_non_reader_secs: Option<f64>,
}

/// What an h2c slow client does slowly (`--h2-attack`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum H2Attack {
    Head,
    Body,
    Window,
}

/// The server's default minimum data rate grace, which bounds a WebSocket
/// message trickled a byte a second and an HTTP/2 stream's trickled DATA
/// or window.
const WS_RATE_GRACE_SECS: u64 = 5;
/// The server's default minimum response rate, in bytes a second.
const MIN_RESPONSE_RATE: f64 = 240.0;
/// How late the once-a-second sweep may find a connection below its rate.
const SWEEP_SLACK_SECS: f64 = 3.0;
/// How long the server waits for the client's answer to its close frame
/// (`WebSocketConfig::close_timeout`'s default) before it closes TCP.
const WS_CLOSE_WAIT_SECS: f64 = 2.0;

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    if u64::from(args.duration) + 4 > args.header_timeout {
        return Err(format!(
            "--duration {} leaves no room before --header-timeout {}: the slow clients must still be \
             connected while wrk runs",
            args.duration, args.header_timeout
        ));
    }
    fdlimit::raise();
    let extra = vec!["--header-timeout".to_string(), args.header_timeout.to_string()];
    let mut server = Target::start(target, "slow", &extra)?;
    let pid = server.pid();
    let mut report = Report::new("slow");
    report.figure("server log", server.log.display());
    println!(
        "slow: {} rounds, {} clients at 1 byte/s over {}, header timeout {} s",
        args.rounds,
        args.clients,
        target.protocol.name(),
        args.header_timeout
    );
    let protocol = server.protocol;
    report.figure("protocol", protocol.describe());
    // Slow clients bound by a rate rather than the header timeout (the
    // WebSocket tricklers, h2c's body and window attacks) are cut from the
    // rate's grace on: the load runs while they are all still connected.
    let rate_bound = protocol == Protocol::Ws || args.h2_attack != H2Attack::Head;
    let seconds = if rate_bound { args.duration.min(WS_RATE_GRACE_SECS as u32 - 2) } else { args.duration };
    let load = Load::new(protocol, server.load_url(&args.path), args.connections, seconds);
    report.figure("normal load", load.tool());
    if args.h2_attack != H2Attack::Head && protocol != Protocol::H2c {
        return Err("--h2-attack body|window speaks cleartext HTTP/2: use it with --protocol h2c".into());
    }
    let (prefix, head, piece) = match args.h2_attack {
        H2Attack::Head => {
            let (prefix, head) =
                slow_head(protocol, &args.path, server.certs.as_ref().map(|c| c.ca.as_path()))?;
            (prefix, head, 1)
        }
        H2Attack::Body => h2_slow_body(),
        H2Attack::Window => h2_slow_window(),
    };
    let slowness = Slowness::Dribble { head, piece, interval: Duration::from_secs(1) };
    let non_readers = if protocol == Protocol::Ws { args.non_readers } else { 0 };
    let non_reader_limit = non_reader_limit(args)?;
    let flood = Slowness::Flood { message: wsframe::frame(0x82, &vec![7u8; 64 << 10]) };
    let slow_addr = server.addr_of(protocol);
    let (mut clean, mut slow) = (Vec::new(), Vec::new());
    let (mut clean_cpu, mut slow_cpu) = (Vec::new(), Vec::new());
    let mut outcomes = Vec::new();
    let mut floods = SlowOutcome::default();
    let mut errors = 0;
    // How long each round's slow clients took to connect (and the
    // non-readers to stall) before the load beside them began.
    let mut in_place_after = Vec::new();
    for round in 1..=args.rounds.max(1) {
        let (before, per_cpu) = measured_run(&load, &target.load_cpu, pid)?;
        errors += before.error_count();
        clean.push(before.requests_per_sec);
        clean_cpu.push(per_cpu);

        // The slow clients live on their own thread (pinned with the
        // load), so they keep dribbling while this thread runs wrk.
        let (connected_tx, connected_rx) = mpsc::channel();
        let spawned = Instant::now();
        let (addr, n, cpu) = (slow_addr, args.clients, target.load_cpu.clone());
        let (prefix, slowness, flood) = (prefix.clone(), slowness.clone(), flood.clone());
        let timeout = Duration::from_secs(args.header_timeout);
        let dribbling = std::thread::spawn(move || {
            pin_self(&cpu);
            block_on(async move {
                let (tx, mut rx) = tokio::sync::watch::channel(0usize);
                let (flood_tx, mut flood_rx) = tokio::sync::watch::channel(0usize);
                let forward = tokio::task::spawn_local(async move {
                    let _ = rx.changed().await;
                    if non_readers > 0 {
                        let _ = flood_rx.changed().await;
                    }
                    let _ = connected_tx.send(*rx.borrow() + *flood_rx.borrow());
                });
                let give_up = timeout * 2 + Duration::from_secs(10);
                let slow = slow_clients(addr, n, prefix.clone(), slowness, give_up, tx);
                let flooding = slow_clients(addr, non_readers, prefix, flood, give_up, flood_tx);
                let (slow, flooding) = tokio::join!(slow, flooding);
                let _ = forward.await;
                (slow, flooding)
            })
        });
        let connected = connected_rx.recv_timeout(Duration::from_secs(60)).unwrap_or(0);
        in_place_after.push(spawned.elapsed().as_secs_f64());
        let (during, per_cpu) = measured_run(&load, &target.load_cpu, pid)?;
        errors += during.error_count();
        slow.push(during.requests_per_sec);
        slow_cpu.push(per_cpu);
        let (outcome, flooded) =
            dribbling.join().map_err(|_| "slow-client thread panicked".to_string())??;
        println!(
            "  round {round}: clean {:.0} req/s, with {connected} slow clients {:.0} req/s; {} cut",
            before.requests_per_sec,
            during.requests_per_sec,
            outcome.cut_after.len() + flooded.cut_after.len()
        );
        outcomes.push(outcome);
        floods.absorb(flooded);
    }

    // Each round's slow run follows its clean run within seconds, so its
    // ratio is the steadier figure: this VM's speed drifts by a third over
    // a minute, for clean and slow runs alike.
    let paired = |with: &[f64], without: &[f64]| {
        let ratios: Vec<f64> = with.iter().zip(without).map(|(&w, &c)| ratio(w, c)).collect();
        median(&ratios)
    };
    let kept = paired(&slow, &clean);
    let kept_cpu = paired(&slow_cpu, &clean_cpu);
    let mut all = SlowOutcome::default();
    for o in outcomes {
        all.absorb(o);
    }
    let expected = args.clients * args.rounds.max(1) as usize;
    let mut cuts = all.cut_after.clone();
    let earliest = percentile(&mut cuts, 0.0);
    let latest = percentile(&mut cuts, 100.0);
    // When the slow clients must be cut: the header timeout, or for
    // WebSocket the rate's grace (and the close handshake's wait after it).
    let (t, slack) = if protocol == Protocol::Ws {
        (WS_RATE_GRACE_SECS as f64, SWEEP_SLACK_SECS + WS_CLOSE_WAIT_SECS)
    } else if rate_bound {
        (WS_RATE_GRACE_SECS as f64, SWEEP_SLACK_SECS)
    } else {
        (args.header_timeout as f64, SWEEP_SLACK_SECS)
    };
    report.figure("req/s clean, median (runs)", format!("{:.0} ({})", median(&clean), list(&clean, 0)));
    report.figure(
        "req/s with slow clients, median (runs)",
        format!("{:.0} ({})", median(&slow), list(&slow, 0)),
    );
    report.figure("with / clean, req/s, median of rounds", format!("{kept:.3}"));
    report.figure(
        "server req/CPU-s clean / with slow clients",
        format!("{:.0} / {:.0}", median(&clean_cpu), median(&slow_cpu)),
    );
    report.figure("with / clean, req/CPU-s, median of rounds", format!("{kept_cpu:.3}"));
    report.figure(
        "attack in place after (s), median (runs)",
        format!("{:.2} ({})", median(&in_place_after), list(&in_place_after, 2)),
    );
    report.figure("slow clients connected (all rounds)", all.connected);
    report.figure("slow clients cut", all.cut_after.len());
    report.figure("cut after (s), earliest / latest", format!("{earliest:.1} / {latest:.1}"));
    report.figure("cut with 408", all.got_408);
    report.check(kept >= args.min_ratio, format!("throughput kept {kept:.3} >= {}", args.min_ratio));
    report.check(
        all.connected == expected && all.connect_failed == 0,
        format!("all {expected} slow clients connected ({} failed)", all.connect_failed),
    );
    report
        .check(all.still_open == 0, format!("no slow client outlived the timeout ({} did)", all.still_open));
    report.check(
        !cuts.is_empty() && earliest >= t - 0.5 && latest <= t + slack,
        format!("cut between {t} s and {} s after their first byte", t + slack),
    );
    match protocol {
        Protocol::H1 => report.check(
            all.got_408 == all.cut_after.len(),
            format!("every cut client got a 408 ({} of {})", all.got_408, all.cut_after.len()),
        ),
        Protocol::Ws => {
            report.figure(
                "slow clients upgraded / closed with 1008",
                format!("{} / {}", all.upgraded, all.got_1008),
            );
            report.check(
                all.got_1008 == all.cut_after.len() && all.upgraded == all.cut_after.len(),
                format!(
                    "every cut client was upgraded and got close 1008 ({} and {} of {})",
                    all.upgraded,
                    all.got_1008,
                    all.cut_after.len()
                ),
            );
            check_non_readers(
                &mut report,
                &floods,
                non_readers * args.rounds.max(1) as usize,
                non_reader_limit,
            );
        }
        // No HTTP was spoken on these connections: nothing to answer.
        _ => report.check(all.got_408 == 0, format!("cut without an HTTP answer ({} got 408)", all.got_408)),
    }
    report.check(all.got_other == 0, format!("no slow client got another answer ({})", all.got_other));
    report.check(errors == 0, format!("no errors for normal clients ({errors})"));
    report.check(server.server.check_alive().is_ok(), "server still running");
    Ok(report.finish())
}

/// How soon after its first byte a non-reader must be cut:
/// `--max-non-reader-secs`, or what the minimum response rate allows (see
/// the flag).
fn non_reader_limit(args: &Args) -> Result<f64, String> {
    if let Some(secs) = args.max_non_reader_secs {
        return Ok(secs);
    }
    let taken = non_reader_receive_buffer()
        .map_err(|e| format!("cannot learn a non-reader's receive buffer size: {e}"))?;
    Ok(WS_RATE_GRACE_SECS as f64 + SWEEP_SLACK_SECS + f64::from(taken) / MIN_RESPONSE_RATE)
}

/// The WebSocket clients that never read: all connected, each reset within
/// the limit, none left open.
fn check_non_readers(report: &mut Report, floods: &SlowOutcome, expected: usize, limit: f64) {
    let mut cuts = floods.cut_after.clone();
    let (earliest, latest) = (percentile(&mut cuts, 0.0), percentile(&mut cuts, 100.0));
    let (median, p90) = (percentile(&mut cuts, 50.0), percentile(&mut cuts, 90.0));
    let late = cuts.iter().filter(|&&after| after > limit).count();
    report
        .figure("non-readers connected / cut", format!("{} / {}", floods.connected, floods.cut_after.len()));
    report.figure(
        "non-readers cut after (s), earliest / median / p90 / latest",
        format!("{earliest:.1} / {median:.1} / {p90:.1} / {latest:.1}"),
    );
    report.figure(format!("non-readers cut after {limit:.1} s"), late);
    report.check(
        floods.connected == expected && floods.connect_failed == 0,
        format!("all {expected} non-readers connected ({} failed)", floods.connect_failed),
    );
    report.check(
        floods.still_open == 0 && floods.cut_after.len() == expected,
        format!("every non-reader was cut ({} outlived the wait)", floods.still_open),
    );
    report.check(
        !cuts.is_empty() && latest <= limit,
        format!("non-readers cut within {limit:.1} s of their first byte (latest {latest:.1})"),
    );
}

/// What a slow client of `protocol` sends at once, and what it then
/// dribbles a byte a second (see the module's documentation).
fn slow_head(protocol: Protocol, path: &str, ca: Option<&Path>) -> Result<(Vec<u8>, Vec<u8>), String> {
    match protocol {
        Protocol::H1 => {
            let head = format!("GET {path} HTTP/1.1\r\nHost: lab\r\nX-Slow: {}\r\n\r\n", "s".repeat(120));
            Ok((Vec::new(), head.into_bytes()))
        }
        Protocol::Tls | Protocol::H2 => {
            let ca = ca.ok_or("a TLS slow client needs the test CA")?;
            Ok((Vec::new(), client_hello(protocol, ca)?))
        }
        Protocol::H2c => Ok((h2_hello(), h2_headers(path))),
        Protocol::Ws => {
            // The upgrade at once; then a binary frame's header declaring
            // 1 MiB (64-bit length form, mask key) and its first payload
            // bytes, a byte a second: more than any timeout lasts.
            let upgrade = wsframe::handshake("lab", WS_PATH, "");
            let mut frame = vec![0x82];
            wsframe::push_length(&mut frame, 0x80, 1 << 20);
            frame.extend_from_slice(&[0x5a, 0x1c, 0xe3, 0x07]);
            frame.extend_from_slice(&[b'x'; 120]);
            Ok((upgrade, frame))
        }
    }
}

/// The HTTP/2 connection preface and an empty SETTINGS frame.
fn h2_hello() -> Vec<u8> {
    h2_hello_with(&[])
}

/// The HTTP/2 connection preface and a SETTINGS frame with `settings`.
fn h2_hello_with(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (id, value) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(h2_frame(0x4, 0, 0, &payload));
    hello
}

/// One HTTP/2 frame.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut frame = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// `--h2-attack body`: the preface and a POST to `/upload` at once (no
/// END_STREAM), then one-byte DATA frames, one whole frame a second.
fn h2_slow_body() -> (Vec<u8>, Vec<u8>, usize) {
    let mut prefix = h2_hello();
    let mut headers = h2_headers("/upload");
    // `:method POST` (static index 3), and END_HEADERS alone: a body follows.
    headers[9] = 0x83;
    headers[4] = 0x4;
    prefix.extend(headers);
    let data = h2_frame(0x0, 0, 1, b"x");
    (prefix, data.repeat(120), data.len())
}

/// `--h2-attack window`: a 100-byte stream window and a GET for a 300 KB
/// file at once, then a 20-byte WINDOW_UPDATE for the stream a second.
fn h2_slow_window() -> (Vec<u8>, Vec<u8>, usize) {
    // SETTINGS_INITIAL_WINDOW_SIZE (0x4).
    let mut prefix = h2_hello_with(&[(0x4, 100)]);
    prefix.extend(h2_headers("/static/vendor.js"));
    let update = h2_frame(0x8, 0, 1, &20u32.to_be_bytes());
    (prefix, update.repeat(120), update.len())
}

/// A HEADERS frame (stream 1, END_STREAM | END_HEADERS) for `GET path`:
/// `:method GET` and `:scheme http` from HPACK's static table, `:path` and
/// `:authority` as literals without indexing.
fn h2_headers(path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86];
    for (index, value) in [(0x04u8, path.as_bytes()), (0x01, b"lab".as_slice())] {
        block.push(index);
        // Lengths under 127 fit the 7-bit prefix.
        block.push(value.len().min(126) as u8);
        block.extend_from_slice(&value[..value.len().min(126)]);
    }
    h2_frame(0x1, 0x5, 1, &block)
}

/// `values`, comma-separated, each with `decimals` decimals.
fn list(values: &[f64], decimals: usize) -> String {
    values.iter().map(|v| format!("{v:.decimals$}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_h2c_head_is_a_preface_then_one_headers_frame() {
        assert!(h2_hello().starts_with(b"PRI * HTTP/2.0"));
        assert_eq!(h2_hello().len(), 24 + 9);
        let f = h2_headers("/plaintext");
        let len = (f[0] as usize) << 16 | (f[1] as usize) << 8 | f[2] as usize;
        assert_eq!((f.len(), f[3], f[4]), (9 + len, 0x1, 0x5));
        assert_eq!(&f[9..12], &[0x82, 0x86, 0x04]);
        assert_eq!(f[12] as usize, "/plaintext".len());
    }

    #[test]
    fn the_h2c_body_and_window_attacks_send_whole_frames() {
        let (prefix, pieces, piece) = h2_slow_body();
        // The POST's HEADERS: END_HEADERS only, `:method POST` first.
        let headers = &prefix[24 + 9..];
        assert_eq!((headers[3], headers[4], headers[9]), (0x1, 0x4, 0x83));
        assert_eq!(piece, 10);
        assert_eq!(&pieces[..piece], &[0, 0, 1, 0x0, 0, 0, 0, 0, 1, b'x']);
        assert_eq!(pieces.len() % piece, 0);

        let (prefix, pieces, piece) = h2_slow_window();
        // SETTINGS with INITIAL_WINDOW_SIZE 100.
        assert_eq!(&prefix[24..24 + 15], &[0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 100]);
        assert_eq!(piece, 13);
        assert_eq!(&pieces[..piece], &[0, 0, 4, 0x8, 0, 0, 0, 0, 1, 0, 0, 0, 20]);
    }
}
