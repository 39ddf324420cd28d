//! The bench's records: one record per run, and the summary per (test,
//! level, server) over rounds (median, min–max, ratio to the baseline at the
//! same test and level). The arithmetic itself (medians, spreads, ratios)
//! is the rig's, shared with `stress`.
//!
//! Only clean runs (completed, no error responses, no socket errors) enter
//! medians; runs with errors are counted and listed, never averaged in.

use super::levels::Level;
use crate::rig::procfs::CpuTicks;
use crate::rig::stats::{median, median_interval, per_cpu_second, ratio, spread, MedianInterval, Spread};
use crate::rig::wrk::WrkReport;
use serde::{Deserialize, Serialize};

/// What one measured run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub wrk: WrkReport,
    /// Server CPU time (user + system, all threads) during the measured run.
    pub cpu_seconds: f64,
    /// The system (kernel) part of `cpu_seconds`: on loopback it holds the
    /// socket calls and the TCP work they set off, which user-space
    /// changes cannot touch, so it says how much of a gap to another
    /// server such changes can close.
    #[serde(default)]
    pub kernel_cpu_seconds: Option<f64>,
    /// Total requests / server CPU seconds; absent if no CPU time was seen.
    pub requests_per_cpu_second: Option<f64>,
    /// Server peak RSS (VmHWM) after the run, in KiB.
    pub peak_rss_kib: Option<u64>,
    /// CPU time of the client process (wrk, or `peregrine-lab load`) over
    /// its whole run, from `getrusage(RUSAGE_CHILDREN)`.
    #[serde(default)]
    pub client_cpu_seconds: Option<f64>,
    /// Response bytes (heads included) per answer; measured by the lab's
    /// own load generator only.
    #[serde(default)]
    pub bytes_per_response: Option<f64>,
    /// CPU time of the PostgreSQL cluster (all its processes) during the
    /// measured run, for the tests and profiles that use the database.
    #[serde(default)]
    pub db_cpu_seconds: Option<f64>,
}

impl Measurement {
    /// A run's measurement from the report and the server's CPU time over
    /// the measured run (`cpu`, in clock ticks).
    pub fn new(wrk: WrkReport, cpu: CpuTicks, ticks_per_second: u64, rss: Option<u64>) -> Self {
        let seconds = |ticks: u64| ticks as f64 / ticks_per_second.max(1) as f64;
        let cpu_seconds = seconds(cpu.total());
        Measurement {
            requests_per_cpu_second: per_cpu_second(wrk.total_requests, cpu_seconds),
            wrk,
            cpu_seconds,
            kernel_cpu_seconds: Some(seconds(cpu.stime)),
            peak_rss_kib: rss,
            client_cpu_seconds: None,
            bytes_per_response: None,
            db_cpu_seconds: None,
        }
    }

    /// The kernel's share of the server's CPU time.
    pub fn kernel_cpu_share(&self) -> Option<f64> {
        let kernel = self.kernel_cpu_seconds?;
        (self.cpu_seconds > 0.0).then(|| kernel / self.cpu_seconds)
    }

    /// The database's share of the CPU time the server and the database
    /// used together.
    pub fn db_cpu_share(&self) -> Option<f64> {
        let db = self.db_cpu_seconds?;
        let total = db + self.cpu_seconds;
        (total > 0.0).then(|| db / total)
    }

    /// Requests per CPU-second of the server and the database together.
    pub fn requests_per_server_and_db_cpu_second(&self) -> Option<f64> {
        per_cpu_second(self.wrk.total_requests, self.cpu_seconds + self.db_cpu_seconds?)
    }
}

/// One (test, level, server, round) run: a measurement, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub test: String,
    pub level: Level,
    pub server: String,
    pub round: u32,
    pub measurement: Option<Measurement>,
    pub failure: Option<String>,
}

impl RunRecord {
    /// Completed with answers, no error responses and no socket errors.
    pub fn is_clean(&self) -> bool {
        self.failure.is_none()
            && self.measurement.as_ref().is_some_and(|m| m.wrk.error_count() == 0 && m.wrk.total_requests > 0)
    }

    /// The measurement, if the run is clean.
    pub fn clean_measurement(&self) -> Option<&Measurement> {
        self.measurement.as_ref().filter(|_| self.is_clean())
    }

    /// A one-line description of what went wrong, if anything did.
    pub fn problem(&self) -> Option<String> {
        if let Some(failure) = &self.failure {
            return Some(format!("failed: {}", first_line(failure)));
        }
        let wrk = &self.measurement.as_ref()?.wrk;
        if wrk.total_requests == 0 && wrk.error_count() == 0 {
            return Some("no answer in the measured window".into());
        }
        let s = &wrk.socket_errors;
        (wrk.error_count() > 0).then(|| {
            format!(
                "{} non-2xx/3xx, socket errors: connect {}, read {}, write {}, timeout {}",
                wrk.non_2xx_3xx, s.connect, s.read, s.write, s.timeout
            )
        })
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// One server's result on one test at one level, over all its rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub test: String,
    pub level: Level,
    pub server: String,
    pub runs: usize,
    pub clean_runs: usize,
    pub requests_per_sec: Option<Spread>,
    pub requests_per_cpu_second: Option<Spread>,
    /// Medians over clean runs.
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// Highest peak RSS seen in any run, in KiB.
    pub peak_rss_kib: Option<u64>,
    /// Median over clean runs of the kernel's share of the server's CPU
    /// time.
    #[serde(default)]
    pub kernel_cpu_share: Option<f64>,
    /// Median over clean runs of requests per client CPU-second.
    #[serde(default)]
    pub requests_per_client_cpu_second: Option<f64>,
    /// Median over clean runs of response bytes per answer.
    #[serde(default)]
    pub bytes_per_response: Option<f64>,
    /// Medians over clean runs of the database's CPU seconds, its share of
    /// the server's and its CPU time together, and requests per CPU-second
    /// of both (profiles that use the database, when it runs here).
    #[serde(default)]
    pub db_cpu_seconds: Option<f64>,
    #[serde(default)]
    pub db_cpu_share: Option<f64>,
    #[serde(default)]
    pub requests_per_server_and_db_cpu_second: Option<f64>,
    /// Error responses plus socket errors, summed over all runs.
    pub errors: u64,
    /// Runs that produced no measurement at all.
    pub failed_runs: usize,
    /// Median requests/s relative to the baseline server's on this test and
    /// level.
    pub ratio_requests_per_sec: Option<f64>,
    /// Median requests per CPU-second relative to the baseline's.
    pub ratio_requests_per_cpu_second: Option<f64>,
    /// The median over rounds of this server's requests/s divided by the
    /// baseline's in the same round (rounds where both ran clean). Servers
    /// alternate within a round, so each round's ratio compares runs
    /// seconds apart, and the machine's slower drift, which moves both
    /// runs of a round alike, cancels; the ratio of medians above can
    /// pair one server's fast round with the other's slow one.
    #[serde(default)]
    pub round_ratio_requests_per_sec: Option<f64>,
    /// The same for requests per CPU-second.
    #[serde(default)]
    pub round_ratio_requests_per_cpu_second: Option<f64>,
    /// How far off those two medians of round ratios could be: a
    /// distribution-free interval holding the median of the round ratios'
    /// distribution with the confidence it gives (see
    /// [`median_interval`]).
    #[serde(default)]
    pub round_ratio_interval_requests_per_sec: Option<MedianInterval>,
    #[serde(default)]
    pub round_ratio_interval_requests_per_cpu_second: Option<MedianInterval>,
}

#[cfg(test)]
impl Summary {
    /// A one-run summary with only a requests/s figure (`None`: the run
    /// failed), for tests of what is computed from summaries.
    pub fn single(test: &str, level: Level, server: &str, rps: Option<f64>) -> Summary {
        Summary {
            test: test.into(),
            level,
            server: server.into(),
            runs: 1,
            clean_runs: usize::from(rps.is_some()),
            requests_per_sec: rps.map(|r| Spread { median: r, min: r, max: r }),
            requests_per_cpu_second: None,
            latency_p50_ms: None,
            latency_p99_ms: None,
            peak_rss_kib: None,
            kernel_cpu_share: None,
            requests_per_client_cpu_second: None,
            bytes_per_response: None,
            db_cpu_seconds: None,
            db_cpu_share: None,
            requests_per_server_and_db_cpu_second: None,
            errors: 0,
            failed_runs: 0,
            ratio_requests_per_sec: None,
            ratio_requests_per_cpu_second: None,
            round_ratio_requests_per_sec: None,
            round_ratio_requests_per_cpu_second: None,
            round_ratio_interval_requests_per_sec: None,
            round_ratio_interval_requests_per_cpu_second: None,
        }
    }
}

/// Summarizes one server's runs on one test and level (ratios are filled in
/// later by [`add_ratios`], once the baseline's summary exists).
pub fn summarize(test: &str, level: Level, server: &str, runs: &[&RunRecord]) -> Summary {
    let clean: Vec<&Measurement> = runs.iter().filter_map(|r| r.clean_measurement()).collect();
    let collect =
        |f: &dyn Fn(&Measurement) -> Option<f64>| -> Vec<f64> { clean.iter().filter_map(|m| f(m)).collect() };
    Summary {
        test: test.to_string(),
        level,
        server: server.to_string(),
        runs: runs.len(),
        clean_runs: clean.len(),
        requests_per_sec: spread(&collect(&|m| Some(m.wrk.requests_per_sec))),
        requests_per_cpu_second: spread(&collect(&|m| m.requests_per_cpu_second)),
        latency_p50_ms: median(&collect(&|m| m.wrk.latency_p50_ms)),
        latency_p99_ms: median(&collect(&|m| m.wrk.latency_p99_ms)),
        peak_rss_kib: runs.iter().filter_map(|r| r.measurement.as_ref()?.peak_rss_kib).max(),
        kernel_cpu_share: median(&collect(&|m| m.kernel_cpu_share())),
        requests_per_client_cpu_second: median(&collect(&|m| {
            per_cpu_second(m.wrk.total_requests, m.client_cpu_seconds?)
        })),
        bytes_per_response: median(&collect(&|m| m.bytes_per_response)),
        db_cpu_seconds: median(&collect(&|m| m.db_cpu_seconds)),
        db_cpu_share: median(&collect(&|m| m.db_cpu_share())),
        requests_per_server_and_db_cpu_second: median(&collect(&|m| {
            m.requests_per_server_and_db_cpu_second()
        })),
        errors: runs.iter().filter_map(|r| r.measurement.as_ref()).map(|m| m.wrk.error_count()).sum(),
        failed_runs: runs.iter().filter(|r| r.measurement.is_none()).count(),
        ratio_requests_per_sec: None,
        ratio_requests_per_cpu_second: None,
        round_ratio_requests_per_sec: None,
        round_ratio_requests_per_cpu_second: None,
        round_ratio_interval_requests_per_sec: None,
        round_ratio_interval_requests_per_cpu_second: None,
    }
}

/// Fills in each summary's per-round ratios to the baseline (see
/// [`Summary::round_ratio_requests_per_sec`]) and their intervals from the
/// clean runs of its test and level; left empty without a round where both
/// ran clean.
pub fn add_round_ratios(summaries: &mut [Summary], runs: &[RunRecord], baseline: &str) {
    for summary in summaries.iter_mut() {
        let (per_sec, per_cpu) =
            round_ratio_samples(runs, &summary.test, summary.level, &summary.server, baseline);
        summary.round_ratio_requests_per_sec = median(&per_sec);
        summary.round_ratio_requests_per_cpu_second = median(&per_cpu);
        summary.round_ratio_interval_requests_per_sec = median_interval(&per_sec);
        summary.round_ratio_interval_requests_per_cpu_second = median_interval(&per_cpu);
    }
}

/// The median over rounds of `server`'s figures divided by `other`'s in
/// the same round, on one test and level: requests/s, then requests per
/// CPU-second. Only rounds where both ran clean count.
pub fn round_ratios(
    runs: &[RunRecord],
    test: &str,
    level: Level,
    server: &str,
    other: &str,
) -> (Option<f64>, Option<f64>) {
    let (per_sec, per_cpu) = round_ratio_samples(runs, test, level, server, other);
    (median(&per_sec), median(&per_cpu))
}

/// `server`'s figures over `other`'s, round by round (rounds where both
/// ran clean): requests/s, then requests per CPU-second. Their medians are
/// [`round_ratios`]; [`median_interval`] gives how far off those could be.
pub fn round_ratio_samples(
    runs: &[RunRecord],
    test: &str,
    level: Level,
    server: &str,
    other: &str,
) -> (Vec<f64>, Vec<f64>) {
    let mut per_sec = Vec::new();
    let mut per_cpu = Vec::new();
    let same_cell = |r: &&RunRecord| r.test == test && r.level == level;
    for run in runs.iter().filter(same_cell).filter(|r| r.server == server) {
        let Some(mine) = run.clean_measurement() else { continue };
        let other_run = runs.iter().filter(same_cell).find(|r| r.server == other && r.round == run.round);
        let Some(theirs) = other_run.and_then(RunRecord::clean_measurement) else { continue };
        per_sec.extend(ratio(Some(mine.wrk.requests_per_sec), Some(theirs.wrk.requests_per_sec)));
        per_cpu.extend(ratio(mine.requests_per_cpu_second, theirs.requests_per_cpu_second));
    }
    (per_sec, per_cpu)
}

/// Fills in each summary's ratios against the baseline server's summary for
/// the same test and level (left empty when the baseline has no clean result
/// there).
pub fn add_ratios(summaries: &mut [Summary], baseline: &str) {
    type Key = (String, Level);
    let base: Vec<(Key, Option<f64>, Option<f64>)> = summaries
        .iter()
        .filter(|s| s.server == baseline)
        .map(|s| {
            (
                (s.test.clone(), s.level),
                s.requests_per_sec.map(|x| x.median),
                s.requests_per_cpu_second.map(|x| x.median),
            )
        })
        .collect();
    for summary in summaries.iter_mut() {
        let found =
            base.iter().find(|((test, level), _, _)| *test == summary.test && *level == summary.level);
        if let Some((_, rps, cpu)) = found {
            summary.ratio_requests_per_sec = ratio(summary.requests_per_sec.map(|x| x.median), *rps);
            summary.ratio_requests_per_cpu_second =
                ratio(summary.requests_per_cpu_second.map(|x| x.median), *cpu);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rig::wrk::SocketErrors;

    const LEVEL: Level = Level { connections: 256, count: None, pipeline: 16 };

    fn run(server: &str, round: u32, rps: f64, requests: u64, ticks: u64, errors: u64) -> RunRecord {
        let wrk = WrkReport {
            requests_per_sec: rps,
            total_requests: requests,
            duration_secs: 1.0,
            latency_p50_ms: Some(rps / 1000.0),
            latency_p99_ms: Some(rps / 100.0),
            non_2xx_3xx: errors,
            socket_errors: SocketErrors::default(),
        };
        // A third of the ticks in user space, the rest in the kernel.
        let cpu = CpuTicks { utime: ticks / 3, stime: ticks - ticks / 3 };
        RunRecord {
            test: "plaintext".into(),
            level: LEVEL,
            server: server.into(),
            round,
            measurement: Some(Measurement::new(wrk, cpu, 100, Some(1000 + round as u64))),
            failure: None,
        }
    }

    #[test]
    fn cpu_seconds_from_ticks() {
        // 150 ticks at 100 Hz = 1.5 CPU-seconds.
        let m = run("a", 1, 1.0, 300, 150, 0).measurement.expect("measured");
        assert_eq!(m.cpu_seconds, 1.5);
        assert_eq!(m.requests_per_cpu_second, Some(200.0));
        // 100 of the 150 ticks were the kernel's.
        assert_eq!(m.kernel_cpu_seconds, Some(1.0));
        assert_eq!(m.kernel_cpu_share(), Some(1.0 / 1.5));
    }

    #[test]
    fn kernel_share_needs_cpu_time_and_an_old_record_has_none() {
        let idle = run("a", 1, 1.0, 300, 0, 0).measurement.expect("measured");
        assert_eq!(idle.kernel_cpu_share(), None);
        let mut old = run("a", 1, 1.0, 300, 150, 0).measurement.expect("measured");
        old.kernel_cpu_seconds = None;
        assert_eq!(old.kernel_cpu_share(), None);
    }

    #[test]
    fn database_share_of_cpu() {
        let mut m = run("a", 1, 1.0, 300, 100, 0).measurement.expect("measured");
        assert_eq!((m.db_cpu_share(), m.requests_per_server_and_db_cpu_second()), (None, None));
        m.db_cpu_seconds = Some(3.0);
        // 1 s of server CPU, 3 s of database CPU: 75 %, 300 / 4 s.
        assert_eq!(m.db_cpu_share(), Some(0.75));
        assert_eq!(m.requests_per_server_and_db_cpu_second(), Some(75.0));
        let record = RunRecord { measurement: Some(m), ..run("a", 1, 1.0, 300, 100, 0) };
        let s = summarize("plaintext", LEVEL, "a", &[&record]);
        assert_eq!((s.db_cpu_seconds, s.db_cpu_share), (Some(3.0), Some(0.75)));
        assert_eq!(s.requests_per_server_and_db_cpu_second, Some(75.0));
    }

    #[test]
    fn errored_and_failed_runs_stay_out_of_medians() {
        let failed = RunRecord {
            failure: Some("server exited\nlog".into()),
            measurement: None,
            ..run("a", 4, 0.0, 0, 0, 0)
        };
        let runs = [
            run("a", 1, 100.0, 100, 100, 0),
            run("a", 2, 300.0, 300, 100, 0),
            run("a", 3, 1e9, 1e9 as u64, 1, 7),
            failed,
        ];
        let refs: Vec<&RunRecord> = runs.iter().collect();
        let s = summarize("plaintext", LEVEL, "a", &refs);
        assert_eq!((s.runs, s.clean_runs, s.failed_runs, s.errors), (4, 2, 1, 7));
        let rps = s.requests_per_sec.expect("clean runs exist");
        assert_eq!((rps.median, rps.min, rps.max), (200.0, 100.0, 300.0));
        assert_eq!(s.peak_rss_kib, Some(1003));
        // 67 of each clean run's 100 ticks were the kernel's; the errored
        // run's (1 tick, all kernel) stays out.
        assert_eq!(s.kernel_cpu_share, Some(0.67));
        assert_eq!(runs[3].problem().as_deref(), Some("failed: server exited"));
        let silent = run("a", 5, 0.0, 0, 100, 0);
        assert!(!silent.is_clean(), "a run without answers measured nothing");
        assert_eq!(silent.problem().as_deref(), Some("no answer in the measured window"));
        assert!(runs[2].problem().is_some_and(|p| p.starts_with("7 non-2xx")));
    }

    #[test]
    fn ratios_against_baseline_at_the_same_level() {
        let other = Level { connections: 1024, ..LEVEL };
        let at = |level: Level, r: RunRecord| RunRecord { level, ..r };
        let runs = [
            run("floor", 1, 200.0, 200, 100, 0),
            run("srv", 1, 100.0, 100, 100, 0),
            at(other, run("floor", 1, 400.0, 400, 100, 0)),
            at(other, run("srv", 1, 100.0, 100, 100, 0)),
        ];
        let mut summaries: Vec<Summary> =
            runs.iter().map(|r| summarize("plaintext", r.level, &r.server, &[r])).collect();
        add_ratios(&mut summaries, "floor");
        assert_eq!(summaries[0].ratio_requests_per_sec, Some(1.0));
        assert_eq!(summaries[1].ratio_requests_per_sec, Some(0.5));
        assert_eq!(summaries[1].ratio_requests_per_cpu_second, Some(0.5));
        assert_eq!(summaries[3].ratio_requests_per_sec, Some(0.25));
    }

    #[test]
    fn round_ratios_pair_runs_of_the_same_round() {
        // The machine halves its speed in round 2 and slows `b` alone in
        // round 3. The ratio of medians pairs a's median (120) with b's
        // (50): 2.4x. Round by round `a` is 1.2x, 1.2x and 2.4x: 1.2x.
        let runs = vec![
            run("a", 1, 120.0, 120, 100, 0),
            run("b", 1, 100.0, 100, 100, 0),
            run("a", 2, 60.0, 60, 100, 0),
            run("b", 2, 50.0, 50, 100, 0),
            run("a", 3, 120.0, 120, 100, 0),
            run("b", 3, 50.0, 50, 100, 0),
            // A round with an error on b is left out of a's ratios.
            run("a", 4, 500.0, 500, 100, 0),
            run("b", 4, 100.0, 100, 100, 7),
        ];
        let a: Vec<&RunRecord> = runs.iter().filter(|r| r.server == "a").collect();
        let b: Vec<&RunRecord> = runs.iter().filter(|r| r.server == "b").collect();
        let mut summaries =
            vec![summarize("plaintext", LEVEL, "a", &a), summarize("plaintext", LEVEL, "b", &b)];
        add_ratios(&mut summaries, "b");
        add_round_ratios(&mut summaries, &runs, "b");
        let ratio_of_medians = summaries[0].ratio_requests_per_sec.expect("ratio");
        assert!((ratio_of_medians - 2.4).abs() < 1e-9, "{ratio_of_medians}");
        // Rounds 1..3: 1.2, 1.2, 2.4.
        assert_eq!(summaries[0].round_ratio_requests_per_sec, Some(1.2));
        // Same ticks for every run: per CPU-second follows requests.
        assert_eq!(summaries[0].round_ratio_requests_per_cpu_second, Some(1.2));
        assert_eq!(summaries[1].round_ratio_requests_per_sec, Some(1.0));
        // Three rounds bound the median by their range, at 1 - 2/8.
        let interval = summaries[0].round_ratio_interval_requests_per_sec.expect("interval");
        assert_eq!((interval.low, interval.high, interval.confidence), (1.2, 2.4, 0.75));
        let (per_sec, _) = round_ratio_samples(&runs, "plaintext", LEVEL, "a", "b");
        assert_eq!(per_sec, vec![1.2, 1.2, 2.4]);
    }
}
