//! Driving `h2load` (nghttp2's HTTP/2 load generator) as [`super::wrk`]
//! drives wrk: the command line for one timed run (`https://` negotiates
//! h2 by ALPN, `http://` speaks h2c with prior knowledge), running it, and
//! parsing its summary and its per-request log into numbers. Parsing is
//! free of I/O and tested on canned output.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// One h2load run: `taskset -c CPU h2load -t1 -cN -mS -D SECS
/// [--connection-inactivity-timeout T] [--log-file F] URL`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct H2loadCommand {
    pub cpu: String,
    pub connections: u32,
    /// Concurrent streams per connection.
    pub streams: u32,
    pub seconds: u32,
    /// A connection with nothing received for this long is dropped and its
    /// outstanding requests count as timed out.
    pub inactivity_timeout_secs: Option<u32>,
    /// Per-request log (start, status, duration), for latency percentiles.
    pub log_file: Option<PathBuf>,
    /// Requests per second each connection starts (h2load's `--rps`):
    /// an open-loop pace rather than as fast as answers come back.
    pub rps_per_connection: Option<u32>,
    pub url: String,
}

impl H2loadCommand {
    pub fn argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            "taskset".into(),
            "-c".into(),
            self.cpu.clone(),
            "h2load".into(),
            "-t1".into(),
            format!("-c{}", self.connections),
            format!("-m{}", self.streams.max(1)),
            "-D".into(),
            self.seconds.to_string(),
        ];
        if let Some(t) = self.inactivity_timeout_secs {
            argv.push(format!("--connection-inactivity-timeout={t}"));
        }
        if let Some(log) = &self.log_file {
            argv.push(format!("--log-file={}", log.display()));
        }
        if let Some(rps) = self.rps_per_connection {
            argv.push(format!("--rps={rps}"));
        }
        argv.push(self.url.clone());
        argv
    }

    /// Starts h2load in the background.
    pub fn spawn(&self) -> Result<RunningH2load, String> {
        let argv = self.argv();
        let (program, args) = argv.split_first().ok_or("empty h2load command")?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!("cannot run `{}` (is h2load installed? scripts/install-tools): {e}", argv.join(" "))
            })?;
        Ok(RunningH2load { child, argv, log_file: self.log_file.clone() })
    }
}

/// An h2load process started by [`H2loadCommand::spawn`].
pub struct RunningH2load {
    child: Child,
    argv: Vec<String>,
    log_file: Option<PathBuf>,
}

impl RunningH2load {
    /// Waits for h2load to end and parses its summary (and its log, when
    /// one was asked for). h2load exits non-zero when it could not connect
    /// at all; that is an error here, as for wrk.
    pub fn finish(self) -> Result<H2loadReport, String> {
        let output = self.child.wait_with_output().map_err(|e| format!("waiting for h2load: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut report = parse_output(&stdout).map_err(|e| {
            let stderr = String::from_utf8_lossy(&output.stderr);
            format!(
                "`{}` ({}): {e}\n--- h2load printed ---\n{stdout}{stderr}",
                self.argv.join(" "),
                output.status
            )
        })?;
        if !output.status.success() && report.succeeded == 0 {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!("`{}` failed ({}): {}", self.argv.join(" "), output.status, stderr.trim()));
        }
        if let Some(log) = &self.log_file {
            let text =
                std::fs::read_to_string(log).map_err(|e| format!("cannot read {}: {e}", log.display()))?;
            report.latencies_ms = parse_log(&text);
        }
        Ok(report)
    }
}

/// What one h2load run counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct H2loadReport {
    pub duration_secs: f64,
    pub requests_per_sec: f64,
    /// Requests finished (any status).
    pub done: u64,
    pub succeeded: u64,
    /// Requests that got no complete answer: the stream was reset or the
    /// connection ended first.
    pub failed: u64,
    /// Requests that failed before being sent (the connection failed).
    pub errored: u64,
    pub timeout: u64,
    /// Answers by status class: 2xx, 3xx, 4xx, 5xx.
    pub status: [u64; 4],
    /// Latency of every answered request, in milliseconds, from the log.
    pub latencies_ms: Vec<f64>,
    /// The slowest request (`time for request:` max), in milliseconds.
    pub request_max_ms: Option<f64>,
}

/// h2load's output did not have the shape this parser knows.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unexpected h2load output: {}", self.0)
    }
}

/// Parses h2load's summary: the `finished in`, `requests:` and `status
/// codes:` lines.
pub fn parse_output(text: &str) -> Result<H2loadReport, ParseError> {
    let mut report = H2loadReport::default();
    let (mut finished, mut requests, mut codes) = (false, false, false);
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            // "finished in 2.00s, 49964.50 req/s, 1.53MB/s"
            let mut parts = rest.split(',').map(str::trim);
            let time = parts.next().unwrap_or_default();
            report.duration_secs = parse_secs(time).ok_or_else(|| ParseError(format!("time `{time}`")))?;
            let rate = parts.next().and_then(|p| p.strip_suffix(" req/s")).unwrap_or_default();
            report.requests_per_sec = rate.parse().map_err(|_| ParseError(format!("rate `{rate}`")))?;
            finished = true;
        } else if let Some(rest) = line.strip_prefix("requests:") {
            // "requests: 100 total, 100 started, 100 done, 100 succeeded, 0 failed, 0 errored, 0 timeout"
            for (count, word) in counted(rest)? {
                match word {
                    "done" => report.done = count,
                    "succeeded" => report.succeeded = count,
                    "failed" => report.failed = count,
                    "errored" => report.errored = count,
                    "timeout" => report.timeout = count,
                    _ => {}
                }
            }
            requests = true;
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            // "status codes: 100 2xx, 0 3xx, 0 4xx, 0 5xx"
            for (count, word) in counted(rest)? {
                let class = match word {
                    "2xx" => 0,
                    "3xx" => 1,
                    "4xx" => 2,
                    "5xx" => 3,
                    _ => continue,
                };
                report.status[class] = count;
            }
            codes = true;
        } else if let Some(rest) = line.strip_prefix("time for request:") {
            // "time for request:  241us  17.37ms  1.24ms  610us  81.19%": min, max, ...
            let max = rest.split_whitespace().nth(1).unwrap_or_default();
            report.request_max_ms = Some(
                parse_secs(max).ok_or_else(|| ParseError(format!("max request time `{max}`")))? * 1000.0,
            );
        }
    }
    if !(finished && requests && codes) {
        return Err(ParseError("no `finished in`, `requests:` or `status codes:` line".into()));
    }
    Ok(report)
}

/// "N word, N word, ..." as (N, word) pairs.
fn counted(text: &str) -> Result<Vec<(u64, &str)>, ParseError> {
    text.split(',')
        .map(|part| {
            let mut words = part.split_whitespace();
            match (words.next().and_then(|n| n.parse().ok()), words.next()) {
                (Some(n), Some(word)) => Ok((n, word)),
                _ => Err(ParseError(format!("counts `{}`", text.trim()))),
            }
        })
        .collect()
}

/// h2load prints times as seconds (`2.00s`), ms or us.
fn parse_secs(text: &str) -> Option<f64> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse::<f64>().ok().map(|v| v / 1000.0);
    }
    if let Some(us) = text.strip_suffix("us") {
        return us.parse::<f64>().ok().map(|v| v / 1e6);
    }
    text.strip_suffix('s')?.parse().ok()
}

/// Latencies in ms from h2load's `--log-file` (tab-separated: start time
/// in µs, status, duration in µs); requests with no status (-1) are left
/// out, as they were never answered.
pub fn parse_log(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|line| {
            let mut cols = line.split('\t');
            let _start = cols.next()?;
            let status: i32 = cols.next()?.trim().parse().ok()?;
            let micros: f64 = cols.next()?.trim().parse().ok()?;
            (status > 0).then_some(micros / 1000.0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "starting benchmark...
spawning thread #0: 64 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for measurements.
Warm-up phase is over for thread #0.
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 2.00s, 49964.50 req/s, 1.53MB/s
requests: 99929 total, 99993 started, 99929 done, 99800 succeeded, 129 failed, 0 errored, 3 timeout
status codes: 99800 2xx, 0 3xx, 0 4xx, 129 5xx
traffic: 3.06MB (3208452) total, 293.35KB (300392) headers (space savings 95.21%), 1.33MB (1399006) data
                     min         max         mean         sd        +/- sd
time for request:      241us     17.37ms      1.24ms       610us    81.19%
";

    #[test]
    fn parses_a_timed_run() {
        let r = parse_output(RUN).expect("parses");
        assert_eq!(r.duration_secs, 2.0);
        assert!((r.requests_per_sec - 49_964.5).abs() < 1e-6);
        assert_eq!((r.done, r.succeeded, r.failed, r.errored, r.timeout), (99_929, 99_800, 129, 0, 3));
        assert_eq!(r.status, [99_800, 0, 0, 129]);
        assert_eq!(r.request_max_ms, Some(17.37));
    }

    #[test]
    fn rejects_output_without_a_summary() {
        assert!(parse_output("starting benchmark...\nNo protocol negotiated. Aborted.\n").is_err());
        let bad = RUN.replace("49964.50 req/s", "fast");
        assert!(parse_output(&bad).is_err());
        assert_eq!(parse_secs("350.12ms"), Some(0.35012));
    }

    #[test]
    fn log_gives_latencies_of_answered_requests() {
        let log = "1700000000000000\t200\t1500\n1700000000000100\t-1\t900\n1700000000000200\t503\t250\n";
        assert_eq!(parse_log(log), [1.5, 0.25]);
    }

    #[test]
    fn argv_words_in_order() {
        let mut cmd = H2loadCommand {
            cpu: "1".into(),
            connections: 8,
            streams: 10,
            seconds: 3,
            url: "https://127.0.0.1:9/json".into(),
            ..H2loadCommand::default()
        };
        assert_eq!(cmd.argv().join(" "), "taskset -c 1 h2load -t1 -c8 -m10 -D 3 https://127.0.0.1:9/json");
        cmd.inactivity_timeout_secs = Some(10);
        cmd.log_file = Some("l.tsv".into());
        assert_eq!(
            cmd.argv().join(" "),
            "taskset -c 1 h2load -t1 -c8 -m10 -D 3 --connection-inactivity-timeout=10 --log-file=l.tsv https://127.0.0.1:9/json"
        );
        cmd.log_file = None;
        cmd.rps_per_connection = Some(1500);
        assert_eq!(
            cmd.argv().join(" "),
            "taskset -c 1 h2load -t1 -c8 -m10 -D 3 --connection-inactivity-timeout=10 --rps=1500 https://127.0.0.1:9/json"
        );
    }
}
