//! The load run the bench makes for one TFB test at one level: the `Accept`
//! header TechEmpower's harness sends for that test type, keep-alive, and
//! pipelining at pipelined levels, sent by the client `--client` chose.
//!
//! - `wrk`, one thread, as TechEmpower runs it (the rig's [`WrkCommand`],
//!   with `lab/wrk/pipeline.lua` for pipelining).
//! - `lab`, the lab's own generator (`peregrine-lab load`, a child process
//!   pinned like wrk). It spends less CPU per request than wrk: 1.47x wrk's
//!   requests per client CPU-second on pipelined plaintext and 1.25x on
//!   `/json` (`peregrine-lab load --vs-wrk`, 2026-11-27). With one core for
//!   the client, wrk answers the question "how fast is wrk" for every
//!   server that outruns it; the lab's generator leaves a fast server
//!   nearer its own limit, so requests/s separates servers again.
//!
//! Either way the report comes back in wrk's shape ([`WrkReport`]), with
//! the client process's CPU seconds beside it.

use crate::rig::load::{self as rig_load, LoadReport};
use crate::rig::wrk::{SocketErrors, WrkCommand, WrkReport};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The load generator of the TFB tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum TfbClient {
    /// wrk with one thread, as TechEmpower runs it.
    #[default]
    Wrk,
    /// The lab's own generator, `peregrine-lab load`.
    Lab,
}

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

/// Everything needed to load a server once for a TFB test.
#[derive(Debug, Clone)]
pub struct TfbRun {
    pub client: TfbClient,
    pub url: String,
    pub test: String,
    pub connections: u32,
    pub duration_secs: u32,
    /// Run pinned to these CPUs (a `taskset -c` list).
    pub cpu: String,
    /// Requests per write; above 1 wrk needs `script`.
    pub pipeline: u32,
    /// wrk's pipelining script (`lab/wrk/pipeline.lua`).
    pub script: PathBuf,
}

impl TfbRun {
    fn headers(&self) -> [String; 2] {
        [format!("Accept: {}", accept_header(&self.test)), "Connection: keep-alive".into()]
    }

    fn wrk_command(&self) -> WrkCommand {
        WrkCommand {
            cpu: self.cpu.clone(),
            connections: self.connections,
            seconds: self.duration_secs,
            timeout_secs: None,
            headers: self.headers().into(),
            script: (self.pipeline > 1).then(|| (self.script.clone(), vec![self.pipeline.to_string()])),
            url: self.url.clone(),
        }
    }

    /// The argv of a `peregrine-lab load` child (`exe`) making this run.
    fn lab_argv(&self, exe: &Path) -> Vec<String> {
        let mut argv: Vec<String> =
            vec!["taskset".into(), "-c".into(), self.cpu.clone(), exe.display().to_string()];
        argv.extend(["load".into(), self.url.clone()]);
        argv.extend(["-c".into(), self.connections.to_string()]);
        argv.extend(["--pipeline".into(), self.pipeline.to_string()]);
        argv.extend(["-d".into(), self.duration_secs.to_string(), "--warmup".into(), "0".into()]);
        for header in self.headers() {
            argv.extend(["-H".into(), header]);
        }
        argv.push("--json".into());
        argv
    }

    /// The command line.
    #[cfg(test)]
    pub fn argv(&self, exe: &Path) -> Vec<String> {
        match self.client {
            TfbClient::Wrk => self.wrk_command().argv(),
            TfbClient::Lab => self.lab_argv(exe),
        }
    }

    /// Runs the client to completion: its report (without latency for
    /// pipelined runs) and its CPU seconds.
    pub fn run(&self) -> Result<(WrkReport, f64), String> {
        match self.client {
            TfbClient::Wrk => {
                let before = rig_load::children_cpu_seconds();
                let mut report = self.wrk_command().run()?;
                let cpu = rig_load::children_cpu_seconds() - before;
                if self.pipeline > 1 {
                    // wrk times a whole pipelined batch as one sample, so its
                    // latency percentiles mean little there (p99 can even
                    // come out below p50); `as_wrk_report` leaves the lab
                    // generator's out for the same reason.
                    report.latency_p50_ms = None;
                    report.latency_p99_ms = None;
                }
                Ok((report, cpu))
            }
            TfbClient::Lab => {
                let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
                let (report, cpu) = run_load_child(&self.lab_argv(&exe))?;
                Ok((as_wrk_report(&report, self.pipeline > 1), cpu))
            }
        }
    }
}

/// Runs one `peregrine-lab load` child to completion: its report and its
/// CPU seconds.
pub fn run_load_child(argv: &[String]) -> Result<(LoadReport, f64), String> {
    let before = rig_load::children_cpu_seconds();
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", argv.join(" ")))?;
    let cpu = rig_load::children_cpu_seconds() - before;
    if !out.status.success() {
        return Err(format!(
            "load generator failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let report = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("load generator's report: {e}: {}", String::from_utf8_lossy(&out.stdout)))?;
    Ok((report, cpu))
}

/// The lab's load report in the shape the records keep (wrk's): a
/// malformed answer counts as a read error.
pub fn as_wrk_report(r: &LoadReport, pipelined: bool) -> WrkReport {
    WrkReport {
        requests_per_sec: r.requests_per_sec,
        total_requests: r.requests,
        duration_secs: r.duration_secs,
        // The generator times each answer of a pipelined batch from the
        // batch's write, which is latency but not wrk's; keep them out.
        latency_p50_ms: r.latency_p50_ms.filter(|_| !pipelined),
        latency_p99_ms: r.latency_p99_ms.filter(|_| !pipelined),
        non_2xx_3xx: r.non_2xx_3xx(),
        socket_errors: SocketErrors {
            connect: r.errors.connect,
            read: r.errors.read + r.errors.malformed,
            write: r.errors.write,
            timeout: r.errors.timeout,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plaintext(client: TfbClient) -> TfbRun {
        TfbRun {
            client,
            url: "http://127.0.0.1:1/plaintext".into(),
            test: "plaintext".into(),
            connections: 256,
            duration_secs: 5,
            cpu: "1".into(),
            pipeline: 16,
            script: "lab/wrk/pipeline.lua".into(),
        }
    }

    #[test]
    fn builds_pipelined_wrk_argv() {
        let argv = plaintext(TfbClient::Wrk).argv(Path::new("lab")).join(" ");
        assert!(argv.starts_with("taskset -c 1 wrk -t1 -c256 -d5s --latency -H Accept: text/plain"));
        assert!(argv.ends_with("-s lab/wrk/pipeline.lua http://127.0.0.1:1/plaintext -- 16"));
    }

    #[test]
    fn builds_pipelined_lab_argv_with_the_same_requests() {
        let argv = plaintext(TfbClient::Lab).argv(Path::new("/x/peregrine-lab"));
        let expected = [
            "taskset",
            "-c",
            "1",
            "/x/peregrine-lab",
            "load",
            "http://127.0.0.1:1/plaintext",
            "-c",
            "256",
            "--pipeline",
            "16",
            "-d",
            "5",
            "--warmup",
            "0",
            "-H",
            "Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7",
            "-H",
            "Connection: keep-alive",
            "--json",
        ];
        assert_eq!(argv, expected);
    }

    /// The scripts that load a server outside the bench (`scripts/callgrind`,
    /// `scripts/perf-per-request`) source their `Accept` headers from
    /// `lab/wrk/tfb-accept.sh`; this keeps the two copies from drifting, since
    /// the header's length is a large part of a request's parse.
    #[test]
    fn shell_accept_headers_match_the_bench() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lab/wrk/tfb-accept.sh");
        let script =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let shell_value = |name: &str| -> String {
            let prefix = format!("{name}=\"");
            let line = script
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("{} sets no {name}", path.display()));
            line[prefix.len()..].trim_end_matches('"').to_string()
        };
        assert_eq!(shell_value("tfb_plaintext_accept"), accept_header("plaintext"));
        assert_eq!(shell_value("tfb_json_accept"), accept_header("json"));
    }

    #[test]
    fn unpipelined_wrk_runs_take_no_script() {
        let mut run = plaintext(TfbClient::Wrk);
        run.pipeline = 1;
        assert!(!run.argv(Path::new("lab")).iter().any(|a| a == "-s"));
    }
}
