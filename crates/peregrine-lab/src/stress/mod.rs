//! `peregrine-lab stress`: shows that a server holds up, not only that it is
//! fast: overload, noisy traffic, slow clients, a long soak, database faults
//! and shutdown under load.
//!
//! Every scenario starts the server binary itself (one worker, pinned to the
//! server CPU; the load runs on the load CPU), drives it with `wrk` (or
//! `h2load` for HTTP/2) and with purpose-built clients ([`clients`],
//! [`h2client`]), prints its figures, and exits 1 when a limit is broken.
//! `--protocol` ([`protocol`]) chooses cleartext HTTP/1.1, TLS, h2, h2c or
//! WebSocket for overload, noisy, slow and shutdown, h1, tls, h2 or h2c for
//! faults, h1 or ws for soak (whose `--all-protocols` runs all five); idle
//! measures all five. WebSocket load is `peregrine-lab ws-load`
//! ([`crate::wsload`]). The limits are
//! flags with the numbers as defaults, so a run on slower hardware
//! can state what it held to.

mod clients;
mod faults;
mod h2client;
mod idle;
mod load;
mod noisy;
mod overload;
mod overload_h2;
mod protocol;
mod shutdown;
mod slow;
mod soak;
mod target;

use std::fmt::Display;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

pub use target::TargetArgs;

#[derive(Args)]
pub struct StressArgs {
    #[command(subcommand)]
    scenario: Scenario,
    #[command(flatten)]
    target: TargetArgs,
    /// Also write the figures and the verdict as JSON to this file.
    #[arg(long, global = true, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Scenario {
    /// 20,000 concurrent connections on /plaintext and /json (ws: 20,000
    /// WebSockets echoing on /ws): the server stays up, refuses cleanly
    /// past its connection limit, and answers the connections it holds with
    /// bounded latency.
    Overload(overload::Args),
    /// Valid load (ws: echoes) mixed with bad methods, unknown paths and
    /// garbage connections: valid throughput stays within 90% of a clean
    /// run.
    Noisy(noisy::Args),
    /// 5,000 clients sending one header byte a second (over TLS: one
    /// ClientHello byte; over h2c: one HEADERS byte after the preface; over
    /// ws: one frame byte after the upgrade, beside 100 clients that never
    /// read their echoes): normal clients lose at most 10% throughput and
    /// the slow ones are cut at the header (ws: idle) timeout.
    Slow(slow::Args),
    /// Mixed load over all seven TFB endpoints (ws: echoes; with
    /// --all-protocols all five protocols at once) for a long time:
    /// resident memory stays flat, no errors, no file descriptors leaked.
    Soak(soak::Args),
    /// Kill PostgreSQL backends and stop and start the cluster under load
    /// (over h1, tls, h2 or h2c): 503 while down, no hung request, full
    /// service after, no restart, and every value /updates reports is in
    /// the table.
    Faults(faults::Args),
    /// SIGTERM under load: in-flight requests finish (no truncated
    /// response; ws: every socket gets close 1001) and the server exits 0
    /// within 5 s.
    Shutdown(shutdown::Args),
    /// 2,000 idle connections per protocol (h1, tls, h2, h2c, ws), one request
    /// each: resident memory per idle connection, and every file
    /// descriptor back after they close.
    Idle(idle::Args),
    /// One client process of an overload run (started by `overload`).
    #[command(hide = true)]
    Client(overload::ClientArgs),
}

pub fn run(args: StressArgs) -> ExitCode {
    if let Scenario::Client(a) = &args.scenario {
        return overload::client(a);
    }
    let protocol = args.target.protocol;
    let refusal = match &args.scenario {
        Scenario::Faults(_) if protocol == protocol::Protocol::Ws => {
            Some("faults speaks h1, tls, h2 and h2c: its probes and /updates checks are HTTP requests")
        }
        Scenario::Soak(_) if !protocol.on_main_port() => {
            Some("soak speaks h1 or ws alone; --all-protocols soaks h1, tls, h2, h2c and ws at once")
        }
        _ => None,
    };
    if let Some(why) = refusal {
        eprintln!("peregrine-lab stress: {why}");
        return ExitCode::from(2);
    }
    let result = match &args.scenario {
        Scenario::Overload(a) => overload::run(&args.target, a),
        Scenario::Noisy(a) => noisy::run(&args.target, a),
        Scenario::Slow(a) => slow::run(&args.target, a),
        Scenario::Soak(a) => soak::run(&args.target, a),
        Scenario::Faults(a) => faults::run(&args.target, a),
        Scenario::Shutdown(a) => shutdown::run(&args.target, a),
        Scenario::Idle(a) => idle::run(&args.target, a),
        Scenario::Client(_) => unreachable!("handled above"),
    };
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            eprintln!("peregrine-lab stress: {e}");
            return ExitCode::from(2);
        }
    };
    report.print();
    if let Some(path) = &args.json {
        let written = serde_json::to_string_pretty(&report)
            .map_err(|e| e.to_string())
            .and_then(|text| std::fs::write(path, text + "\n").map_err(|e| e.to_string()));
        if let Err(e) = written {
            eprintln!("peregrine-lab stress: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What a scenario measured and which of its limits held.
#[derive(Debug, Serialize)]
pub struct Report {
    scenario: &'static str,
    /// When the run ended (RFC 3339, UTC).
    finished: String,
    figures: Vec<(String, String)>,
    /// One line per broken limit; empty when the scenario passed.
    failures: Vec<String>,
}

impl Report {
    fn new(scenario: &'static str) -> Report {
        Report { scenario, finished: String::new(), figures: Vec::new(), failures: Vec::new() }
    }

    /// Records a figure, printed in the order recorded.
    fn figure(&mut self, name: impl Into<String>, value: impl Display) {
        let (name, value) = (name.into(), value.to_string());
        println!("  {name}: {value}");
        self.figures.push((name, value));
    }

    /// Records a limit: `ok` false fails the scenario with `what`.
    fn check(&mut self, ok: bool, what: impl Into<String>) {
        let what = what.into();
        if ok {
            println!("  ok   {what}");
        } else {
            println!("  FAIL {what}");
            self.failures.push(what);
        }
    }

    fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    fn print(&self) {
        if self.passed() {
            println!("{}: PASS ({} figures)", self.scenario, self.figures.len());
        } else {
            println!("{}: FAIL", self.scenario);
            for f in &self.failures {
                println!("  - {f}");
            }
        }
    }

    fn finish(mut self) -> Report {
        self.finished = utc_timestamp_now();
        self
    }
}

/// The current time as `YYYY-MM-DDTHH:MM:SSZ`, without a date crate.
fn utc_timestamp_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// `part / whole` as a ratio, 0 when `whole` is 0.
fn ratio(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part / whole
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_fails_on_any_broken_limit() {
        let mut r = Report::new("t");
        r.check(true, "fine");
        assert!(r.passed());
        r.check(false, "broken");
        assert!(!r.passed());
        assert_eq!(r.failures, ["broken"]);
    }

    #[test]
    fn timestamp_has_the_rfc3339_shape() {
        let t = utc_timestamp_now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }

    #[test]
    fn ratio_of_nothing_is_zero() {
        assert_eq!(ratio(1.0, 0.0), 0.0);
        assert_eq!(ratio(9.0, 10.0), 0.9);
    }
}
