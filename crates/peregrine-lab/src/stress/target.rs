//! The server under test and the load on it: starting the server binary
//! pinned to its CPU, running `wrk` pinned to the load CPU, and reading the
//! server's memory and open files from `/proc`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::bench::config::ServerSpec;
pub use crate::bench::server::raise_fd_limit;
use crate::bench::server::{accepts, RunningServer};
use crate::bench::stats;
use crate::bench::wrk::{self, RunningWrk, WrkReport};
use crate::verify::client;

/// Where and how the server under test runs; shared by every scenario.
#[derive(Args, Clone, Debug)]
pub struct TargetArgs {
    /// The server binary. It must take peregrine-tfb's flags (--addr,
    /// --workers, --data-dir, --max-connections, --header-timeout) and
    /// serve its endpoints. DATABASE_URL and DATABASE_MAX_CONN are passed
    /// through from the environment.
    #[arg(long, global = true, value_name = "PATH", default_value = "target/release/peregrine-tfb")]
    pub server: PathBuf,
    /// Port the server listens on (127.0.0.1); it must be free.
    #[arg(long, global = true, default_value_t = 8090)]
    pub port: u16,
    /// CPU list (taskset -c) the server runs on.
    #[arg(long, global = true, default_value = "0")]
    pub server_cpu: String,
    /// CPU list the load generators run on.
    #[arg(long, global = true, default_value = "1")]
    pub load_cpu: String,
    /// Directory for server logs and the embedded database.
    #[arg(long, global = true, value_name = "DIR", default_value = "target/stress")]
    pub work_dir: PathBuf,
}

/// A running server under test; stopped when dropped.
pub struct Target {
    pub server: RunningServer,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

impl Target {
    /// Starts the server with one worker and `extra` flags, and waits until
    /// it accepts connections.
    pub fn start(args: &TargetArgs, scenario: &str, extra: &[String]) -> Result<Target, String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
        if accepts(addr) {
            return Err(format!("port {} is already in use; pass another with --port", args.port));
        }
        if !args.server.exists() {
            return Err(format!(
                "server binary {} not found; build it first (cargo build --release -p peregrine-tfb)",
                args.server.display()
            ));
        }
        std::fs::create_dir_all(&args.work_dir)
            .map_err(|e| format!("cannot create {}: {e}", args.work_dir.display()))?;
        let mut run = vec![
            args.server.display().to_string(),
            "--addr".into(),
            format!("127.0.0.1:{}", args.port),
            "--workers".into(),
            "1".into(),
            "--data-dir".into(),
            args.work_dir.join("data").display().to_string(),
        ];
        run.extend(extra.iter().cloned());
        let mut env = BTreeMap::new();
        env.insert("RUST_LOG".to_string(), std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()));
        let spec = ServerSpec {
            name: "server".into(),
            build: None,
            run,
            port: args.port,
            host: "127.0.0.1".into(),
            env,
            paths: BTreeMap::new(),
        };
        let log = args.work_dir.join(format!("{scenario}.log"));
        let server = RunningServer::start(&spec, addr, &args.server_cpu, &log)?;
        Ok(Target { server, addr, log })
    }

    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// One wrk run: `connections` on one thread for `seconds`.
#[derive(Clone, Debug)]
pub struct Wrk {
    pub url: String,
    pub connections: u32,
    pub seconds: u32,
    /// Requests slower than this count as timeout errors.
    pub timeout_secs: u32,
    /// A Lua script and its arguments.
    pub script: Option<(PathBuf, Vec<String>)>,
}

impl Wrk {
    pub fn new(url: String, connections: u32, seconds: u32) -> Wrk {
        Wrk { url, connections, seconds, timeout_secs: 5, script: None }
    }

    pub fn script(mut self, path: &Path, args: &[&str]) -> Wrk {
        self.script = Some((path.to_path_buf(), args.iter().map(|a| a.to_string()).collect()));
        self
    }

    fn argv(&self, cpu: &str) -> Vec<String> {
        let mut argv = vec![
            "taskset".into(),
            "-c".into(),
            cpu.to_string(),
            "wrk".into(),
            "-t1".into(),
            format!("-c{}", self.connections),
            format!("-d{}s", self.seconds),
            format!("--timeout={}s", self.timeout_secs),
            "--latency".into(),
        ];
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
    pub fn spawn(&self, cpu: &str) -> Result<RunningWrk, String> {
        wrk::spawn(self.argv(cpu))
    }

    /// Runs wrk to completion.
    pub fn run(&self, cpu: &str) -> Result<WrkReport, String> {
        self.spawn(cpu)?.finish()
    }
}

/// Runs `wrk` against the server and returns its report with the server's
/// requests per CPU-second over the run (utime + stime from `/proc`).
pub fn measured_run(wrk: &Wrk, cpu: &str, pid: u32) -> Result<(WrkReport, f64), String> {
    let before = server_cpu_secs(pid)?;
    let report = wrk.run(cpu)?;
    let cpu_secs = server_cpu_secs(pid)? - before;
    let per_cpu_sec = if cpu_secs > 0.0 { report.total_requests as f64 / cpu_secs } else { 0.0 };
    Ok((report, per_cpu_sec))
}

/// CPU seconds (user + system) a process has used so far.
pub fn server_cpu_secs(pid: u32) -> Result<f64, String> {
    use crate::bench::procfs::{clock_ticks_per_second, read_cpu};
    let ticks = clock_ticks_per_second().map_err(|e| e.to_string())? as f64;
    Ok(read_cpu(pid).map_err(|e| e.to_string())?.total() as f64 / ticks)
}

/// The median of `values` (0 when empty).
pub fn median(values: &[f64]) -> f64 {
    stats::median(values).unwrap_or(0.0)
}

/// Resident memory of a process in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Open file descriptors of a process.
pub fn fd_count(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/fd")).ok().map(|dir| dir.count())
}

/// Pins the calling thread (the lab's client runtime) to `cpus`.
pub fn pin_self(cpus: &str) {
    // SAFETY: a zeroed cpu_set_t filled with CPU_SET and passed by pointer
    // to sched_setaffinity for this thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let mut any = false;
        for cpu in cpus.split(',').filter_map(|c| c.trim().parse::<usize>().ok()) {
            libc::CPU_SET(cpu, &mut set);
            any = true;
        }
        if any {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

/// Sends one `GET path` on a fresh connection (the verifier's raw client)
/// and returns the status, or why there was none.
pub fn probe(addr: SocketAddr, path: &str) -> Result<u16, String> {
    let target =
        client::Target { addr, host: "lab".into(), prefix: String::new(), timeout: Duration::from_secs(5) };
    target.get(path).map(|response| response.status)
}

/// A percentile (0..=100) of `values` (sorted in place).
pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (values.len() - 1) as f64).round() as usize;
    values[rank.min(values.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_argv_pins_and_passes_script_arguments() {
        let wrk = Wrk::new("http://127.0.0.1:1/x".into(), 10, 3).script(Path::new("s.lua"), &["a", "b"]);
        assert_eq!(
            wrk.argv("1").join(" "),
            "taskset -c 1 wrk -t1 -c10 -d3s --timeout=5s --latency -s s.lua http://127.0.0.1:1/x -- a b"
        );
    }

    #[test]
    fn percentiles_pick_by_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 50.0), 51.0);
        assert_eq!(percentile(&mut v, 99.0), 99.0);
        assert_eq!(percentile(&mut v, 100.0), 100.0);
        assert_eq!(percentile(&mut [], 99.0), 0.0);
    }

    #[test]
    fn proc_readers_see_this_process() {
        let me = std::process::id();
        assert!(rss_kib(me).is_some_and(|kib| kib > 0));
        assert!(fd_count(me).is_some_and(|n| n >= 3));
    }
}
