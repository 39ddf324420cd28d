//! Database faults under load: PostgreSQL backends killed, then the whole
//! cluster stopped and started again, while clients keep asking.
//!
//! Load: wrk on `/db`, plus probe connections cycling `/db`, `/queries` and
//! `/fortunes` (each answer timed and stamped), plus one sequential
//! `/updates` client whose every reported row is checked against the table
//! right after the answer (it is the only writer, so the table must hold
//! exactly what it was told). Timeline: backends killed at 4 s and 8 s;
//! every PostgreSQL process frozen (SIGSTOP) from 12 s to 16 s, so queries
//! hang instead of failing and only timeouts can answer them; cluster
//! stopped at 20 s, started at 26 s; load until `--duration`.
//!
//! Checked: every answer is `200` or `503` and well-formed, none took longer
//! than `--max-latency-ms` (the database timeout plus slack), everything
//! answered while the cluster was down was `503`, service is back within
//! `--recovery-secs` of the restart and fully (only `200`) in the last five
//! seconds, the server process is the same one throughout, and no
//! `/updates` answer reported a value the table does not hold.
//!
//! `--protocol tls`, `h2` or `h2c` runs all of it over that protocol: the
//! load is wrk over TLS or h2load (one stream per connection), the probes
//! and the `/updates` client use the lab's TLS connector or its HTTP/2
//! client ([`super::h2client`]), one connection each, reopened when the
//! server closes it. Over HTTP/2 a stream refused or reset before its
//! answer counts as a probe without an answer (status 0), as a closed
//! connection does over HTTP/1.1.

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::clients::{block_on, get, read_response, ReadError, REQUEST_TIMEOUT};
use super::h2client::{self, H2Conn, Outcome};
use super::load::Load;
use super::protocol::{Connector, Io};
use super::target::{Target, TargetArgs};
use super::Report;
use crate::rig::stats::percentile;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Seconds of load in all (at least 38: the faults end at 26 s).
    #[arg(long, default_value_t = 42)]
    duration: u64,
    /// Controls the cluster: run with `stop` and `start`.
    #[arg(long, default_value = "scripts/pg")]
    pg_ctl: PathBuf,
    /// The cluster's postmaster.pid, to find the processes to freeze
    /// (default: $PG_DIR/data/postmaster.pid, or scripts/pg's cluster).
    #[arg(long)]
    pg_pid_file: Option<PathBuf>,
    /// Probe connections.
    #[arg(long, default_value_t = 16)]
    probes: usize,
    /// Load connections on /db (wrk; h2load over HTTP/2, one stream each).
    #[arg(long, default_value_t = 64)]
    connections: u32,
    /// Fail when any answer takes longer (database timeout 2 s + slack).
    #[arg(long, default_value_t = 3500.0)]
    max_latency_ms: f64,
    /// Seconds after the restart within which a 200 must come back.
    #[arg(long, default_value_t = 10.0)]
    recovery_secs: f64,
}

const KILL_AT: [u64; 2] = [4, 8];
const FREEZE_AT: u64 = 12;
const THAW_AT: u64 = 16;
const STOP_AT: u64 = 20;
const START_AT: u64 = 26;

/// One probe answer: seconds since the start, status (0: no answer),
/// latency in ms.
type Sample = (f64, u16, f64);

#[derive(Default)]
struct UpdateCheck {
    answered: u64,
    ok: u64,
    rows_verified: u64,
    mismatches: Vec<String>,
    unverifiable: u64,
    latencies_ms: Vec<f64>,
    bad_answers: Vec<String>,
}

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    let url = std::env::var("DATABASE_URL").unwrap_or_default();
    if !url.starts_with("postgres") {
        return Err("the fault scenario needs PostgreSQL: set DATABASE_URL (scripts/pg url)".into());
    }
    if args.duration < START_AT + 12 {
        return Err(format!("--duration must be at least {} s", START_AT + 12));
    }
    let mut server = Target::start(target, "faults", &[])?;
    let pid = server.pid();
    let mut report = Report::new("faults");
    report.figure("server log", server.log.display());
    let pid_file = args.pg_pid_file.clone().unwrap_or_else(|| {
        let dir = std::env::var_os("PG_DIR").map_or_else(|| PathBuf::from("target/pg"), PathBuf::from);
        dir.join("data/postmaster.pid")
    });
    let postmaster = read_postmaster_pid(&pid_file)?;
    println!(
        "faults: {} s; backends killed at {KILL_AT:?} s, frozen {FREEZE_AT}-{THAW_AT} s, cluster stopped at \
         {STOP_AT} s, started at {START_AT} s",
        args.duration
    );

    let wrk = {
        let mut load =
            Load::new(server.protocol, server.load_url("/db"), args.connections, args.duration as u32);
        load.timeout_secs = 4;
        load.streams = 1;
        report.figure("protocol", server.protocol.describe());
        report.figure("load", load.tool());
        load.spawn(&target.load_cpu)?
    };
    let connector = Rc::new(server.connector(server.protocol)?);
    let (probes, duration, pg_ctl) = (args.probes, Duration::from_secs(args.duration), args.pg_ctl.clone());
    let outcome = block_on(async move {
        let start = Instant::now();
        let (stop_tx, stop_rx) = watch::channel(false);
        let samples = Rc::new(RefCell::new(Vec::<Sample>::new()));
        let mut tasks = Vec::new();
        for i in 0..probes {
            tasks.push(tokio::task::spawn_local(probe_loop(
                Rc::clone(&connector),
                i,
                start,
                Rc::clone(&samples),
                stop_rx.clone(),
            )));
        }
        let updates =
            tokio::task::spawn_local(update_loop(Rc::clone(&connector), url.clone(), stop_rx.clone()));
        let mut events = Vec::new();
        for at in KILL_AT {
            tokio::time::sleep_until((start + Duration::from_secs(at)).into()).await;
            let killed = kill_backends(&url).await;
            events.push(format!("{:.1} s: terminated {killed:?} backends", start.elapsed().as_secs_f64()));
        }
        tokio::time::sleep_until((start + Duration::from_secs(FREEZE_AT)).into()).await;
        let frozen = signal(&cluster_pids(postmaster), libc::SIGSTOP);
        events.push(format!(
            "{:.1} s: froze {} PostgreSQL processes",
            start.elapsed().as_secs_f64(),
            frozen.len()
        ));
        tokio::time::sleep_until((start + Duration::from_secs(THAW_AT)).into()).await;
        // The processes frozen are the ones to thaw: listing the cluster
        // again raced with a backend that was exiting when frozen (CI saw
        // "froze 25, thawed 24"). A process gone since counts as thawed.
        let thawed = signal(&frozen, libc::SIGCONT);
        let gone = frozen.len() - thawed.len();
        signal(&cluster_pids(postmaster), libc::SIGCONT);
        let unthawed = frozen
            .iter()
            .filter(|pid| !thawed.contains(pid) && std::path::Path::new(&format!("/proc/{pid}")).exists())
            .count();
        events.push(format!(
            "{:.1} s: thawed {} PostgreSQL processes ({gone} gone since, {unthawed} left stopped)",
            start.elapsed().as_secs_f64(),
            thawed.len()
        ));
        tokio::time::sleep_until((start + Duration::from_secs(STOP_AT)).into()).await;
        let stopped = pg(&pg_ctl, "stop").await;
        let down_from = start.elapsed().as_secs_f64();
        events.push(format!("{down_from:.1} s: cluster stopped ({stopped:?})"));
        tokio::time::sleep_until((start + Duration::from_secs(START_AT)).into()).await;
        let down_until = start.elapsed().as_secs_f64();
        let started = pg(&pg_ctl, "start").await;
        let up_at = start.elapsed().as_secs_f64();
        events.push(format!("{up_at:.1} s: cluster started ({started:?})"));
        tokio::time::sleep_until((start + duration).into()).await;
        let _ = stop_tx.send(true);
        for t in tasks {
            let _ = t.await;
        }
        let updates = updates.await.unwrap_or_default();
        let samples = samples.borrow().clone();
        let pg_ok = stopped.is_ok() && started.is_ok() && !frozen.is_empty() && unthawed == 0;
        (samples, updates, events, (down_from, down_until, up_at), pg_ok)
    })?;
    let (samples, updates, events, (down_from, down_until, up_at), pg_ok) = outcome;
    let load = wrk.finish()?;
    for e in &events {
        println!("  {e}");
    }

    let end = args.duration as f64;
    let statuses = |from: f64, to: f64| samples.iter().filter(move |s| s.0 >= from && s.0 < to).map(|s| s.1);
    let bad: Vec<&Sample> = samples.iter().filter(|s| s.1 != 200 && s.1 != 503).collect();
    let mut latencies: Vec<f64> = samples.iter().filter(|s| s.1 != 0).map(|s| s.2).collect();
    latencies.extend(&updates.latencies_ms);
    let max_latency = percentile(&mut latencies, 100.0);
    let p99 = percentile(&mut latencies, 99.0);
    // Answers that began after the stop completed and ended before the
    // start began saw only a dead database.
    let down: Vec<u16> =
        samples.iter().filter(|s| s.0 - s.2 / 1000.0 >= down_from && s.0 < down_until).map(|s| s.1).collect();
    let first_ok_after =
        samples.iter().filter(|s| s.0 >= up_at && s.1 == 200).map(|s| s.0 - up_at).reduce(f64::min);
    let tail: Vec<u16> = statuses(end - 5.0, end).collect();

    report.figure("probe answers", samples.len());
    report.figure("probe answers 200 / 503 / other", {
        let ok = samples.iter().filter(|s| s.1 == 200).count();
        let unavailable = samples.iter().filter(|s| s.1 == 503).count();
        format!("{ok} / {unavailable} / {}", bad.len())
    });
    report.figure("latency ms p99 / max (probes and /updates)", format!("{p99:.1} / {max_latency:.1}"));
    report.figure(
        "answers while down (all 503?)",
        format!("{} ({} not 503)", down.len(), down.iter().filter(|&&s| s != 503).count()),
    );
    report
        .figure("first 200 after restart (s)", first_ok_after.map_or("never".into(), |t| format!("{t:.2}")));
    report.figure(
        "load /db requests, non-2xx, failed",
        format!("{}, {}, {}", load.total_requests, load.non_2xx, load.failed),
    );
    report.figure(
        "/updates answered / 200 / rows verified",
        format!("{} / {} / {}", updates.answered, updates.ok, updates.rows_verified),
    );
    report.check(pg_ok, "the cluster froze, thawed, stopped and started on cue");
    report.check(
        bad.is_empty(),
        format!("every answer is 200 or 503 ({} others, first {:?})", bad.len(), bad.first()),
    );
    report.check(
        max_latency <= args.max_latency_ms,
        format!("no request hung: slowest {max_latency:.0} ms <= {} ms", args.max_latency_ms),
    );
    report.check(load.timeouts == 0, format!("no load request timed out ({})", load.timeouts));
    report.check(!down.is_empty() && down.iter().all(|&s| s == 503), "503 while the cluster was down");
    report.check(
        first_ok_after.is_some_and(|t| t <= args.recovery_secs),
        format!("service back within {} s of the restart", args.recovery_secs),
    );
    report.check(
        !tail.is_empty() && tail.iter().all(|&s| s == 200),
        "only 200s in the last 5 s (full service)",
    );
    report.check(
        server.server.check_alive().is_ok() && server.pid() == pid,
        format!("same server process throughout (PID {pid})"),
    );
    report.check(updates.ok > 0 && updates.rows_verified > 0, "/updates succeeded and was verified");
    report.check(
        updates.mismatches.is_empty(),
        format!(
            "/updates never reported an unpersisted value ({} mismatches {:?})",
            updates.mismatches.len(),
            updates.mismatches.first()
        ),
    );
    report.check(
        updates.bad_answers.is_empty(),
        format!("/updates answered only 200 or 503 ({:?})", updates.bad_answers.first()),
    );
    if updates.unverifiable > 0 {
        report.figure("/updates answers not verifiable (database gone)", updates.unverifiable);
    }
    Ok(report.finish())
}

/// One client connection of the protocol under test, opened when needed
/// and dropped when the server ends it.
struct Session {
    connector: Rc<Connector>,
    conn: Option<Conn>,
}

enum Conn {
    H1 { io: Box<dyn Io>, buf: Vec<u8> },
    H2(H2Conn),
}

/// How one request on a [`Session`] ended.
enum Answer {
    /// A whole response.
    Response { status: u16, body: Vec<u8> },
    /// No connection could be opened.
    NoConnection,
    /// The connection ended (or the stream was refused or reset) before
    /// any answer began.
    Gone,
    /// An answer that broke off, was malformed, or did not come in time.
    Broken(String),
}

impl Session {
    fn new(connector: Rc<Connector>) -> Session {
        Session { connector, conn: None }
    }

    async fn request(&mut self, path: &str) -> Answer {
        if self.conn.is_none() {
            let opened = if self.connector.protocol.is_h2() {
                h2client::connect(&self.connector).await.map(Conn::H2).ok()
            } else {
                self.connector.connect().await.map(|io| Conn::H1 { io, buf: Vec::new() }).ok()
            };
            let Some(conn) = opened else { return Answer::NoConnection };
            self.conn = Some(conn);
        }
        let answer = match self.conn.as_mut() {
            Some(Conn::H1 { io, buf }) => h1_request(io, buf, path).await,
            Some(Conn::H2(h2)) => {
                let (protocol, authority) = (self.connector.protocol, self.connector.addr.to_string());
                let mut body = Vec::new();
                match h2client::fetch(&h2.send, &authority, protocol.scheme(), path, Some(&mut body)).await {
                    Outcome::Answered(status) => (Answer::Response { status, body }, true),
                    Outcome::NotSent(_) | Outcome::Refused(_) | Outcome::Unanswered(_) => {
                        (Answer::Gone, false)
                    }
                    Outcome::Truncated(why) => (Answer::Broken(format!("truncated: {why}")), false),
                    Outcome::TimedOut => (Answer::Broken("no answer in 10 s".into()), false),
                }
            }
            None => (Answer::NoConnection, false),
        };
        let (answer, keep) = answer;
        if !keep {
            self.conn = None;
        }
        answer
    }
}

/// One HTTP/1.1 request on `io`; whether the connection stays open.
async fn h1_request(io: &mut Box<dyn Io>, buf: &mut Vec<u8>, path: &str) -> (Answer, bool) {
    if io.write_all(&get(path)).await.is_err() {
        return (Answer::Gone, false);
    }
    match tokio::time::timeout(REQUEST_TIMEOUT, read_response(io, buf)).await {
        Ok(Ok(r)) => (Answer::Response { status: r.status, body: r.body }, !r.close),
        Ok(Err(ReadError::Closed | ReadError::Reset(_))) => (Answer::Gone, false),
        Ok(Err(e)) => (Answer::Broken(e.to_string()), false),
        Err(_) => (Answer::Broken("no answer in 10 s".into()), false),
    }
}

async fn probe_loop(
    connector: Rc<Connector>,
    i: usize,
    start: Instant,
    samples: Rc<RefCell<Vec<Sample>>>,
    stop: watch::Receiver<bool>,
) {
    const PATHS: [&str; 3] = ["/db", "/queries?queries=5", "/fortunes"];
    let mut session = Session::new(connector);
    let mut n = i;
    while !*stop.borrow() {
        let sent = Instant::now();
        n += 1;
        let answer = session.request(PATHS[n % PATHS.len()]).await;
        let latency = sent.elapsed().as_secs_f64() * 1000.0;
        let status = match answer {
            Answer::Response { status, .. } => status,
            Answer::NoConnection => {
                samples.borrow_mut().push((start.elapsed().as_secs_f64(), 0, 0.0));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Answer::Gone | Answer::Broken(_) => 0,
        };
        samples.borrow_mut().push((start.elapsed().as_secs_f64(), status, latency));
        // Probes sample, they are not the load.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(serde::Deserialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

async fn update_loop(connector: Rc<Connector>, url: String, stop: watch::Receiver<bool>) -> UpdateCheck {
    let mut check = UpdateCheck::default();
    let mut session = Session::new(connector);
    while !*stop.borrow() {
        let sent = Instant::now();
        let (status, body) = match session.request("/updates?queries=20").await {
            Answer::Response { status, body } => (status, body),
            Answer::NoConnection => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Answer::Gone => continue,
            Answer::Broken(why) => {
                check.bad_answers.push(why);
                continue;
            }
        };
        check.latencies_ms.push(sent.elapsed().as_secs_f64() * 1000.0);
        check.answered += 1;
        match status {
            200 => {}
            503 => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            other => {
                check.bad_answers.push(format!("status {other}"));
                continue;
            }
        }
        check.ok += 1;
        let worlds: Vec<World> = match serde_json::from_slice(&body) {
            Ok(w) => w,
            Err(e) => {
                check.bad_answers.push(format!("body is not a World array: {e}"));
                continue;
            }
        };
        verify(&url, &worlds, &mut check).await;
    }
    check
}

/// Reads the reported rows back from the table. This client is the only
/// writer, so each must hold exactly what was reported. Retries while the
/// database is unreachable (nothing else writes meanwhile).
async fn verify(url: &str, worlds: &[World], check: &mut UpdateCheck) {
    let ids: Vec<i32> = worlds.iter().map(|w| w.id).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(client) = connect(url).await {
            if let Ok(rows) =
                client.query("SELECT id, randomnumber FROM world WHERE id = ANY($1)", &[&ids]).await
            {
                let stored: std::collections::HashMap<i32, i32> =
                    rows.iter().filter_map(|r| Some((r.try_get(0).ok()?, r.try_get(1).ok()?))).collect();
                for w in worlds {
                    check.rows_verified += 1;
                    if stored.get(&w.id) != Some(&w.random_number) {
                        check.mismatches.push(format!(
                            "id {} reported {} but the table holds {:?}",
                            w.id,
                            w.random_number,
                            stored.get(&w.id)
                        ));
                    }
                }
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    check.unverifiable += 1;
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::task::spawn_local(connection);
    Ok(client)
}

/// Terminates every other client backend of the database.
async fn kill_backends(url: &str) -> Result<i64, String> {
    let client = connect(url).await.map_err(|e| e.to_string())?;
    let row = client
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?;
    row.try_get(0).map_err(|e| e.to_string())
}

/// Runs `pg_ctl action` (the scripts/pg interface) without blocking the
/// clients.
async fn pg(pg_ctl: &std::path::Path, action: &'static str) -> Result<(), String> {
    let program = pg_ctl.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(&program)
            .arg(action)
            .stdout(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {} {action}: {e}", program.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} {action} failed: {}",
                program.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The postmaster's PID: the first line of `postmaster.pid`.
fn read_postmaster_pid(path: &std::path::Path) -> Result<i32, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!("cannot read {} (is the cluster running? pass --pg-pid-file): {e}", path.display())
    })?;
    text.lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| format!("{} does not start with a PID", path.display()))
}

/// Sends `signal` to the postmaster and every process it started; returns
/// how many were signalled.
/// The postmaster and its children, as `/proc` lists them now.
fn cluster_pids(postmaster: i32) -> Vec<i32> {
    let mut pids = vec![postmaster];
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            // Field 4 (ppid) follows the `(comm)` field.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
            if ppid == Some(postmaster) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Sends `signal` to each of `pids`; returns the ones it reached.
fn signal(pids: &[i32], signal: libc::c_int) -> Vec<i32> {
    pids.iter()
        .copied()
        // SAFETY: kill takes no pointers; the PIDs were read from /proc.
        .filter(|&pid| unsafe { libc::kill(pid, signal) } == 0)
        .collect()
}
