//! Outside load on the protocol a scenario speaks: wrk for HTTP/1.1
//! (cleartext or TLS; wrk speaks https itself) and h2load for HTTP/2 (h2
//! over TLS by ALPN, or h2c with prior knowledge), reported in one shape so
//! a scenario checks the same figures whichever ran.

use std::path::PathBuf;

use super::protocol::Protocol;
use super::target::Wrk;
use crate::rig::h2load::{H2loadCommand, RunningH2load};
use crate::rig::stats::percentile;
use crate::rig::wrk::RunningWrk;

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
}

impl Load {
    pub fn new(protocol: Protocol, url: String, connections: u32, seconds: u32) -> Load {
        Load { protocol, url, connections, seconds, streams: DEFAULT_STREAMS, log_file: None }
    }

    /// Which tool, for figures.
    pub fn tool(&self) -> String {
        if self.protocol.is_h2() {
            format!("h2load, {} connections x {} streams", self.connections, self.streams)
        } else {
            format!("wrk, {} connections", self.connections)
        }
    }

    /// Starts the load in the background.
    pub fn spawn(&self, cpu: &str) -> Result<RunningLoad, String> {
        if self.protocol.is_h2() {
            let command = H2loadCommand {
                cpu: cpu.to_string(),
                connections: self.connections,
                streams: self.streams,
                seconds: self.seconds,
                // As wrk's --timeout=5s: a request unanswered that long is
                // an error (h2load measures it per connection).
                inactivity_timeout_secs: Some(5),
                log_file: self.log_file.clone(),
                url: self.url.clone(),
            };
            Ok(RunningLoad::H2load(command.spawn()?))
        } else {
            Ok(RunningLoad::Wrk(Wrk::new(self.url.clone(), self.connections, self.seconds).spawn(cpu)?))
        }
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
