//! Outside load on the protocol a scenario speaks: wrk for HTTP/1.1
//! (cleartext or TLS; wrk speaks https itself), h2load for HTTP/2 (h2
//! over TLS by ALPN, or h2c with prior knowledge) and `peregrine-lab
//! ws-load` (this binary, in its own process) for WebSocket echoes on
//! `/ws`, reported in one shape so a scenario checks the same figures
//! whichever ran (for WebSocket a "request" is one echoed message).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::protocol::Protocol;
use super::target::Wrk;
use crate::rig::h2load::{H2loadCommand, RunningH2load};
use crate::rig::stats::percentile;
use crate::rig::wrk::RunningWrk;
use crate::wsload::EchoReport;

/// Concurrent streams per HTTP/2 connection, unless a scenario says.
pub const DEFAULT_STREAMS: u32 = 10;

/// One timed load run.
#[derive(Clone, Debug)]
pub struct Load {
    pub protocol: Protocol,
    pub url: String,
    pub connections: u32,
    pub seconds: u32,
    /// Concurrent streams per connection (HTTP/2 only).
    pub streams: u32,
    /// Where h2load writes its per-request log (for latency percentiles).
    pub log_file: Option<PathBuf>,
    /// Seconds after which an unanswered request is an error (wrk's
    /// --timeout, h2load's inactivity timeout; ws-load's is fixed at 10).
    pub timeout_secs: u32,
    /// Requests per second in all, started at a steady pace rather than as
    /// fast as answers come back: HTTP/2 only (h2load's `--rps`, split
    /// evenly over the connections).
    pub pace: Option<u32>,
}

impl Load {
    pub fn new(protocol: Protocol, url: String, connections: u32, seconds: u32) -> Load {
        Load {
            protocol,
            url,
            connections,
            seconds,
            streams: DEFAULT_STREAMS,
            log_file: None,
            timeout_secs: 5,
            pace: None,
        }
    }

    /// Which tool, for figures.
    pub fn tool(&self) -> String {
        if self.protocol.is_h2() {
            let paced = self.pace.map(|rps| format!(", paced at {rps} req/s")).unwrap_or_default();
            format!("h2load, {} connections x {} streams{paced}", self.connections, self.streams)
        } else if self.protocol == Protocol::Ws {
            format!("ws-load, {} WebSockets echoing 5-byte messages", self.connections)
        } else {
            format!("wrk, {} connections", self.connections)
        }
    }

    /// Starts the load in the background.
    pub fn spawn(&self, cpu: &str) -> Result<RunningLoad, String> {
        if self.pace.is_some() && !self.protocol.is_h2() {
            return Err(format!("a paced load needs h2load (h2 or h2c), not {}", self.tool()));
        }
        if self.protocol.is_h2() {
            let command = H2loadCommand {
                cpu: cpu.to_string(),
                connections: self.connections,
                streams: self.streams,
                seconds: self.seconds,
                // As wrk's --timeout: a request unanswered that long is
                // an error (h2load measures it per connection).
                inactivity_timeout_secs: Some(self.timeout_secs),
                log_file: self.log_file.clone(),
                rps_per_connection: self.rps_per_connection(),
                url: self.url.clone(),
            };
            Ok(RunningLoad::H2load(command.spawn()?))
        } else if self.protocol == Protocol::Ws {
            Ok(RunningLoad::Ws(self.spawn_ws_load(cpu)?))
        } else {
            let mut wrk = Wrk::new(self.url.clone(), self.connections, self.seconds);
            wrk.timeout_secs = self.timeout_secs;
            Ok(RunningLoad::Wrk(wrk.spawn(cpu)?))
        }
    }

    /// `peregrine-lab ws-load URL --json`, pinned to `cpu`: no warm-up,
    /// so it opens its sockets and then echoes for `seconds`.
    pub fn spawn_ws_load(&self, cpu: &str) -> Result<Child, String> {
        let me = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
        Command::new(me)
            .arg("ws-load")
            .arg(&self.url)
            .args(["-c", &self.connections.to_string(), "-d", &self.seconds.to_string()])
            .args(["--warmup", "0", "--cpu", cpu, "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start ws-load: {e}"))
    }

    /// h2load's `--rps` for [`Load::pace`]: the total over the
    /// connections, rounded up.
    fn rps_per_connection(&self) -> Option<u32> {
        self.pace.map(|total| total.div_ceil(self.connections.max(1)).max(1))
    }

    /// Runs the load to completion.
    pub fn run(&self, cpu: &str) -> Result<LoadReport, String> {
        self.spawn(cpu)?.finish()
    }
}

/// A load run in progress.
pub enum RunningLoad {
    Wrk(RunningWrk),
    H2load(RunningH2load),
    Ws(Child),
}

/// Waits for a ws-load process and reads its JSON report.
pub fn finish_ws_load(child: Child) -> Result<EchoReport, String> {
    let out = child.wait_with_output().map_err(|e| format!("ws-load: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).map_err(|e| {
        format!(
            "ws-load ({}) printed {:?}, stderr {:?}: {e}",
            out.status,
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

impl RunningLoad {
    pub fn finish(self) -> Result<LoadReport, String> {
        self.finish_with_latencies().map(|(report, _)| report)
    }

    /// The report and, from h2load's log when one was asked for, every
    /// answered request's latency in ms (none from wrk).
    pub fn finish_with_latencies(self) -> Result<(LoadReport, Vec<f64>), String> {
        match self {
            RunningLoad::Wrk(w) => {
                let r = w.finish()?;
                let report = LoadReport {
                    total_requests: r.total_requests,
                    duration_secs: r.duration_secs,
                    requests_per_sec: r.requests_per_sec,
                    latency_p50_ms: r.latency_p50_ms,
                    latency_p99_ms: r.latency_p99_ms,
                    latency_max_ms: None,
                    non_2xx: r.non_2xx_3xx,
                    unavailable: None,
                    failed: r.socket_errors.connect + r.socket_errors.read + r.socket_errors.write,
                    timeouts: r.socket_errors.timeout,
                };
                Ok((report, Vec::new()))
            }
            RunningLoad::Ws(child) => {
                let r = finish_ws_load(child)?;
                let report = LoadReport {
                    total_requests: r.messages,
                    duration_secs: r.seconds,
                    requests_per_sec: r.messages_per_sec,
                    latency_p50_ms: r.latency_p50_ms,
                    latency_p99_ms: r.latency_p99_ms,
                    latency_max_ms: r.latency_max_ms,
                    non_2xx: 0,
                    unavailable: None,
                    // A socket not opened, or failed (closed, no echo in
                    // 10 s, a wrong frame) while echoing.
                    failed: r.open_failed as u64 + r.errors,
                    timeouts: 0,
                };
                Ok((report, Vec::new()))
            }
            RunningLoad::H2load(h) => {
                let mut r = h.finish()?;
                let answered = !r.latencies_ms.is_empty();
                let p50 = percentile(&mut r.latencies_ms, 50.0);
                let p99 = percentile(&mut r.latencies_ms, 99.0);
                let report = LoadReport {
                    total_requests: r.done,
                    duration_secs: r.duration_secs,
                    requests_per_sec: r.requests_per_sec,
                    latency_p50_ms: answered.then_some(p50),
                    latency_p99_ms: answered.then_some(p99),
                    latency_max_ms: r.request_max_ms,
                    non_2xx: r.status[1] + r.status[2] + r.status[3],
                    unavailable: Some(r.status[3]),
                    failed: r.failed + r.errored,
                    timeouts: r.timeout,
                };
                Ok((report, r.latencies_ms))
            }
        }
    }
}

/// What a load run counted, whichever tool ran it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadReport {
    /// Requests answered (any status).
    pub total_requests: u64,
    pub duration_secs: f64,
    pub requests_per_sec: f64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// The slowest request, where the tool says (h2load).
    pub latency_max_ms: Option<f64>,
    /// Answers that were not 2xx (wrk: not 2xx or 3xx).
    pub non_2xx: u64,
    /// 5xx answers, where the tool tells them apart (h2load).
    pub unavailable: Option<u64>,
    /// Requests without an answer: socket errors (wrk), failed or errored
    /// streams (h2load).
    pub failed: u64,
    /// Requests unanswered within the timeout.
    pub timeouts: u64,
}

impl LoadReport {
    /// Non-2xx answers, failures and timeouts.
    pub fn error_count(&self) -> u64 {
        self.non_2xx + self.failed + self.timeouts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_h2load_can_pace_and_its_pace_is_split_over_the_connections() {
        let mut wrk = Load::new(Protocol::H1, "http://127.0.0.1:9/json".into(), 4, 1);
        wrk.pace = Some(1000);
        let refused = wrk.spawn("1").err().unwrap_or_default();
        assert!(refused.contains("needs h2load"), "{refused}");
        let mut h2load = Load::new(Protocol::H2c, "http://127.0.0.1:9/json".into(), 256, 1);
        h2load.pace = Some(427_016);
        // 427,016 / 256 = 1,668.03: rounded up, so the pace is never below
        // the one asked for.
        assert_eq!(h2load.tool(), "h2load, 256 connections x 10 streams, paced at 427016 req/s");
        assert_eq!(h2load.rps_per_connection(), Some(1669));
    }
}
