//! Driving `wrk` for every command that loads a server (`bench`, `stress`):
//! the command line for one load run, running it, and parsing what wrk
//! prints into numbers. Parsing is kept free of I/O so it is tested on
//! canned wrk output. What to ask wrk for (TFB's headers, a stress
//! scenario's script) is the caller's.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Socket-level failures wrk counts during a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketErrors {
    pub connect: u64,
    pub read: u64,
    pub write: u64,
    pub timeout: u64,
}

impl SocketErrors {
    pub fn total(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout
    }
}

/// The numbers from one wrk run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrkReport {
    pub requests_per_sec: f64,
    pub total_requests: u64,
    pub duration_secs: f64,
    /// From `--latency`'s distribution; absent if wrk printed none.
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub non_2xx_3xx: u64,
    pub socket_errors: SocketErrors,
}

impl WrkReport {
    /// Responses that were not 2xx/3xx plus socket errors.
    pub fn error_count(&self) -> u64 {
        self.non_2xx_3xx + self.socket_errors.total()
    }
}

/// wrk's output did not have the shape this parser knows.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unexpected wrk output: {}", self.0)
    }
}

impl std::error::Error for ParseError {}

/// Parses the text wrk prints to stdout (run with `--latency`).
pub fn parse_output(text: &str) -> Result<WrkReport, ParseError> {
    let mut rps = None;
    let mut totals = None;
    let mut p50 = None;
    let mut p99 = None;
    let mut non_2xx_3xx = 0;
    let mut socket_errors = SocketErrors::default();

    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            let value = rest.trim();
            rps = Some(value.parse::<f64>().map_err(|_| ParseError(format!("Requests/sec is `{value}`")))?);
        } else if let Some((count, rest)) = line.split_once(" requests in ") {
            // "202849 requests in 2.01s, 25.92MB read"
            let total: u64 =
                count.trim().parse().map_err(|_| ParseError(format!("request count is `{count}`")))?;
            let time = rest.split(',').next().unwrap_or_default().trim();
            let secs =
                parse_duration_secs(time).ok_or_else(|| ParseError(format!("run time is `{time}`")))?;
            totals = Some((total, secs));
        } else if let Some(rest) = line.strip_prefix("50%") {
            p50 = Some(parse_latency(rest)?);
        } else if let Some(rest) = line.strip_prefix("99%") {
            p99 = Some(parse_latency(rest)?);
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            let value = rest.trim();
            non_2xx_3xx = value.parse().map_err(|_| ParseError(format!("non-2xx count is `{value}`")))?;
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            socket_errors = parse_socket_errors(rest)?;
        }
    }

    let requests_per_sec = rps.ok_or_else(|| ParseError("no `Requests/sec:` line".into()))?;
    let (total_requests, duration_secs) =
        totals.ok_or_else(|| ParseError("no `N requests in T` line".into()))?;
    Ok(WrkReport {
        requests_per_sec,
        total_requests,
        duration_secs,
        latency_p50_ms: p50,
        latency_p99_ms: p99,
        non_2xx_3xx,
        socket_errors,
    })
}

/// "connect 0, read 12, write 0, timeout 3"
fn parse_socket_errors(text: &str) -> Result<SocketErrors, ParseError> {
    let mut errors = SocketErrors::default();
    for part in text.split(',') {
        let mut words = part.split_whitespace();
        let (Some(kind), Some(count)) = (words.next(), words.next()) else {
            return Err(ParseError(format!("socket errors are `{}`", text.trim())));
        };
        let count: u64 = count.parse().map_err(|_| ParseError(format!("socket error count `{count}`")))?;
        match kind {
            "connect" => errors.connect = count,
            "read" => errors.read = count,
            "write" => errors.write = count,
            "timeout" => errors.timeout = count,
            _ => {}
        }
    }
    Ok(errors)
}

fn parse_latency(text: &str) -> Result<f64, ParseError> {
    let text = text.trim();
    parse_duration_secs(text).map(|s| s * 1000.0).ok_or_else(|| ParseError(format!("latency is `{text}`")))
}

/// wrk prints times as a number with a unit: us, ms, s, m or h.
fn parse_duration_secs(text: &str) -> Option<f64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    Some(value * scale)
}

/// One wrk command line: `taskset -c CPU wrk -t1 -cN -dTs [--timeout=Ns]
/// --latency [-H header]... [-s script] URL [-- script args]`. One wrk
/// thread always: the client gets one core, like the server. `bench` and
/// `stress` fill in what they need; the order of the words is fixed here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WrkCommand {
    /// Run pinned to these CPUs (a `taskset -c` list).
    pub cpu: String,
    pub connections: u32,
    pub seconds: u32,
    /// Requests slower than this count as timeout errors (wrk's default
    /// when `None`).
    pub timeout_secs: Option<u32>,
    /// Extra request headers, `Name: value`.
    pub headers: Vec<String>,
    /// A Lua script, and the arguments passed to it after `--`.
    pub script: Option<(PathBuf, Vec<String>)>,
    pub url: String,
}

impl WrkCommand {
    pub fn argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            "taskset".into(),
            "-c".into(),
            self.cpu.clone(),
            "wrk".into(),
            "-t1".into(),
            format!("-c{}", self.connections),
            format!("-d{}s", self.seconds),
        ];
        if let Some(t) = self.timeout_secs {
            argv.push(format!("--timeout={t}s"));
        }
        argv.push("--latency".into());
        for h in &self.headers {
            argv.push("-H".into());
            argv.push(h.clone());
        }
        if let Some((script, _)) = &self.script {
            argv.push("-s".into());
            argv.push(script.display().to_string());
        }
        argv.push(self.url.clone());
        if let Some((_, args)) = &self.script {
            argv.push("--".into());
            argv.extend(args.iter().cloned());
        }
        argv
    }

    /// Starts wrk in the background.
    pub fn spawn(&self) -> Result<RunningWrk, String> {
        spawn(self.argv())
    }

    /// Runs wrk to completion and parses its report.
    pub fn run(&self) -> Result<WrkReport, String> {
        self.spawn()?.finish()
    }
}

/// Starts wrk (`argv`, usually `taskset -c CPU wrk ...`) in the background.
pub fn spawn(argv: Vec<String>) -> Result<RunningWrk, String> {
    let (program, args) = argv.split_first().ok_or("empty wrk command")?;
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("cannot run `{}` (is wrk installed? scripts/install-tools): {e}", argv.join(" "))
        })?;
    Ok(RunningWrk { child, argv })
}

/// A wrk process started by [`spawn`].
pub struct RunningWrk {
    child: Child,
    argv: Vec<String>,
}

impl RunningWrk {
    /// Waits for wrk to end and parses its report.
    pub fn finish(self) -> Result<WrkReport, String> {
        let output = self.child.wait_with_output().map_err(|e| format!("waiting for wrk: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!(
                "`{}` failed ({}): {}{}",
                self.argv.join(" "),
                output.status,
                stderr.trim(),
                stdout.trim()
            ));
        }
        parse_output(&stdout).map_err(|e| format!("{e}\n--- wrk printed ---\n{stdout}"))
    }
}

/// wrk's version line, e.g. `wrk debian/4.1.0-3+b2 [epoll]`, if wrk runs.
pub fn version() -> Option<String> {
    // wrk has no --version; `-v` prints the version then usage, and exits 1.
    let output = Command::new("wrk").arg("-v").output().ok()?;
    let text =
        String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    let line = text.lines().find(|l| l.starts_with("wrk "))?;
    Some(line.split(" Copyright").next().unwrap_or(line).trim().to_string())
}

/// Finds `program` on PATH.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "Running 2s test @ http://127.0.0.1:18080/plaintext
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   550.61us  484.13us   9.31ms   96.59%
    Req/Sec   102.14k    11.81k  116.54k    75.00%
  Latency Distribution
     50%  530.00us
     75%  605.00us
     90%  694.00us
     99%    2.19ms
  202849 requests in 2.01s, 25.92MB read
Requests/sec: 101158.71
Transfer/sec:     12.93MB
";

    const ERRORS: &str = "Running 1m test @ http://127.0.0.1:8080/db
  1 threads and 256 connections
  Latency Distribution
     50%    1.50s
     75%    1.90s
     90%    2.00s
     99%    2.00s
  1200 requests in 1.00m, 1.20MB read
  Socket errors: connect 0, read 12, write 3, timeout 240
  Non-2xx or 3xx responses: 17
Requests/sec:     20.00
Transfer/sec:     20.48KB
";

    #[test]
    fn parses_clean_run() {
        let r = parse_output(CLEAN).expect("parses");
        assert_eq!(r.total_requests, 202_849);
        assert!((r.requests_per_sec - 101_158.71).abs() < 1e-6);
        assert!((r.duration_secs - 2.01).abs() < 1e-9);
        assert!((r.latency_p50_ms.unwrap_or_default() - 0.53).abs() < 1e-9);
        assert!((r.latency_p99_ms.unwrap_or_default() - 2.19).abs() < 1e-9);
        assert_eq!(r.error_count(), 0);
    }

    #[test]
    fn parses_errors_and_long_units() {
        let r = parse_output(ERRORS).expect("parses");
        assert_eq!(r.duration_secs, 60.0);
        assert_eq!(r.latency_p50_ms, Some(1500.0));
        assert_eq!(r.non_2xx_3xx, 17);
        assert_eq!(r.socket_errors, SocketErrors { connect: 0, read: 12, write: 3, timeout: 240 });
        assert_eq!(r.error_count(), 17 + 255);
    }

    #[test]
    fn rejects_incomplete_output() {
        assert!(parse_output("unable to connect to 127.0.0.1:1 Connection refused").is_err());
        let no_rps = CLEAN.replace("Requests/sec: 101158.71", "");
        assert!(parse_output(&no_rps).is_err());
        let bad = CLEAN.replace("99%    2.19ms", "99%    2.19xs");
        assert!(parse_output(&bad).is_err());
    }

    #[test]
    fn argv_words_in_order() {
        let mut cmd = WrkCommand {
            cpu: "1".into(),
            connections: 10,
            seconds: 3,
            url: "http://127.0.0.1:1/x".into(),
            ..WrkCommand::default()
        };
        assert_eq!(cmd.argv().join(" "), "taskset -c 1 wrk -t1 -c10 -d3s --latency http://127.0.0.1:1/x");
        cmd.timeout_secs = Some(5);
        cmd.headers = vec!["A: b".into()];
        cmd.script = Some(("s.lua".into(), vec!["x".into()]));
        assert_eq!(
            cmd.argv().join(" "),
            "taskset -c 1 wrk -t1 -c10 -d3s --timeout=5s --latency -H A: b -s s.lua http://127.0.0.1:1/x -- x"
        );
    }
}
