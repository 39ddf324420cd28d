//! The wrk run the bench makes for one test at one level: the `Accept`
//! header TechEmpower's harness sends for that test type, keep-alive, and
//! the pipelining script for pipelined levels. The command line itself is
//! the rig's [`WrkCommand`].

use crate::rig::wrk::{WrkCommand, WrkReport};
use std::path::PathBuf;

/// The `Accept` header TechEmpower's harness sends for each test type.
fn accept_header(test: &str) -> &'static str {
    match test {
        "plaintext" => {
            "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7"
        }
        "fortunes" => "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        _ => "application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7",
    }
}

/// Everything needed to run wrk once.
#[derive(Debug, Clone)]
pub struct WrkRun {
    pub url: String,
    pub test: String,
    pub connections: u32,
    pub duration_secs: u32,
    /// Run pinned to these CPUs (a `taskset -c` list).
    pub cpu: String,
    /// `Some((script, depth))` sends depth-`depth` pipelined requests.
    pub pipeline: Option<(PathBuf, u32)>,
}

impl WrkRun {
    /// The argv: `taskset -c CPU wrk -t1 -cN -dTs --latency -H ... URL`.
    #[cfg(test)]
    pub fn argv(&self) -> Vec<String> {
        self.command().argv()
    }

    fn command(&self) -> WrkCommand {
        WrkCommand {
            cpu: self.cpu.clone(),
            connections: self.connections,
            seconds: self.duration_secs,
            timeout_secs: None,
            headers: vec![format!("Accept: {}", accept_header(&self.test)), "Connection: keep-alive".into()],
            script: self.pipeline.as_ref().map(|(script, depth)| (script.clone(), vec![depth.to_string()])),
            url: self.url.clone(),
        }
    }

    /// Runs wrk to completion and parses its report.
    pub fn run(&self) -> Result<WrkReport, String> {
        self.command().run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_pipelined_argv() {
        let run = WrkRun {
            url: "http://127.0.0.1:1/plaintext".into(),
            test: "plaintext".into(),
            connections: 256,
            duration_secs: 5,
            cpu: "1".into(),
            pipeline: Some(("lab/wrk/pipeline.lua".into(), 16)),
        };
        let argv = run.argv().join(" ");
        assert!(argv.starts_with("taskset -c 1 wrk -t1 -c256 -d5s --latency -H Accept: text/plain"));
        assert!(argv.ends_with("-s lab/wrk/pipeline.lua http://127.0.0.1:1/plaintext -- 16"));
    }
}
