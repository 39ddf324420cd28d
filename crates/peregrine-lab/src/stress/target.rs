//! The server under test and the load on it, as stress scenarios see them:
//! the shared command-line flags, the server binary started with one worker
//! pinned to its CPU (with the TLS and h2c listeners `--protocol` needs),
//! the `wrk` runs scenarios ask for, and a probe request. Processes, wrk,
//! `/proc` and statistics are the rig's; protocols and certificates are
//! [`super::protocol`]'s.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use super::load::{Load, LoadReport};
use super::protocol::{listener_flags, Certs, Connector, Protocol};
use crate::rig::client;
use crate::rig::procfs;
use crate::rig::server::{accepts, RunningServer};
use crate::rig::stats;
use crate::rig::wrk::{RunningWrk, WrkCommand};

/// Where and how the server under test runs; shared by every scenario.
#[derive(Args, Clone, Debug)]
pub struct TargetArgs {
    /// The server binary. It must take peregrine-tfb's flags (--addr,
    /// --workers, --data-dir, --max-connections, --header-timeout; for
    /// slow over ws --ws-idle-timeout) and serve its endpoints (WebSocket
    /// echo on /ws). DATABASE_URL and DATABASE_MAX_CONN are passed
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
    /// Protocol of the load: h1 (cleartext HTTP/1.1, on --port), tls
    /// (HTTP/1.1 over TLS, --port + 1), h2c (HTTP/2 with prior knowledge,
    /// --port + 2), h2 (HTTP/2 over TLS, --port + 3) or ws (WebSocket
    /// echoes on --port's /ws). overload, noisy, slow and shutdown take
    /// all five; faults h1, tls, h2 or h2c; soak h1 or ws.
    #[arg(long, global = true, value_enum, default_value_t = Protocol::H1)]
    pub protocol: Protocol,
    /// Test certificates (ca.crt, server.crt, server.key) for the TLS
    /// protocols; made with scripts/certs when missing.
    #[arg(long, global = true, value_name = "DIR", default_value = "target/stress/certs")]
    pub certs: PathBuf,
}

/// A running server under test; stopped when dropped.
pub struct Target {
    pub server: RunningServer,
    /// The cleartext HTTP/1.1 listener (probes, noise).
    pub addr: SocketAddr,
    /// The protocol the scenario's load speaks (`--protocol`).
    pub protocol: Protocol,
    /// The certificates, when a TLS listener was opened.
    pub certs: Option<Certs>,
    pub log: PathBuf,
}

impl Target {
    /// Starts the server with one worker and `extra` flags, serving
    /// `--protocol` too, and waits until it accepts connections.
    pub fn start(args: &TargetArgs, scenario: &str, extra: &[String]) -> Result<Target, String> {
        Target::start_serving(args, scenario, extra, &[args.protocol])
    }

    /// Starts the server with listeners for every one of `protocols`
    /// (cleartext HTTP/1.1 always); [`Target::protocol`] is the first.
    pub fn start_serving(
        args: &TargetArgs,
        scenario: &str,
        extra: &[String],
        protocols: &[Protocol],
    ) -> Result<Target, String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
        if args.port.checked_add(3).is_none() {
            return Err(format!("--port {} leaves no room for the three listeners after it", args.port));
        }
        let ports: Vec<u16> = protocols.iter().map(|p| args.port + p.port_offset()).collect();
        // Any protocol beyond h1 opens the listeners next to --port.
        let opened = if protocols.iter().all(|p| p.on_main_port()) { 0 } else { 3 };
        for port in args.port..=args.port + opened {
            if accepts(SocketAddr::from(([127, 0, 0, 1], port))) {
                return Err(format!("port {port} is already in use; pass another --port"));
            }
        }
        let certs =
            if protocols.iter().any(|p| p.uses_tls()) { Some(Certs::ensure(&args.certs)?) } else { None };
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
        if protocols.iter().any(|p| !p.on_main_port()) {
            run.extend(listener_flags(args.port, certs.as_ref()));
        }
        run.extend(extra.iter().cloned());
        let env = [("RUST_LOG".to_string(), std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))];
        let log = args.work_dir.join(format!("{scenario}.log"));
        let mut server = RunningServer::start("server", &run, &env, addr, &args.server_cpu, &log)?;
        for port in ports {
            wait_accepting(&mut server, SocketAddr::from(([127, 0, 0, 1], port)))?;
        }
        let protocol = protocols.first().copied().unwrap_or_default();
        Ok(Target { server, addr, protocol, certs, log })
    }

    /// The listener serving `protocol`.
    pub fn addr_of(&self, protocol: Protocol) -> SocketAddr {
        SocketAddr::from((self.addr.ip(), self.addr.port() + protocol.port_offset()))
    }

    /// A URL for `path` on the listener of `--protocol`, for wrk or h2load.
    pub fn load_url(&self, path: &str) -> String {
        self.url_of(self.protocol, path)
    }

    /// A URL for `path` on the listener of `protocol`; WebSocket loads
    /// always echo on [`WS_PATH`].
    pub fn url_of(&self, protocol: Protocol, path: &str) -> String {
        let path = if protocol == Protocol::Ws { WS_PATH } else { path };
        format!("{}://{}{path}", protocol.scheme(), self.addr_of(protocol))
    }

    /// Opens the lab's own client connections speaking `protocol`.
    pub fn connector(&self, protocol: Protocol) -> Result<Connector, String> {
        Connector::new(protocol, self.addr_of(protocol), self.certs.as_ref().map(|c| c.ca.as_path()))
    }

    pub fn pid(&self) -> u32 {
        self.server.pid()
    }
}

/// The server's WebSocket echo endpoint (peregrine-tfb's, HttpArena's
/// echo-ws).
pub const WS_PATH: &str = "/ws";

/// Waits up to 10 s for a listener the server opens beside its first.
fn wait_accepting(server: &mut RunningServer, addr: SocketAddr) -> Result<(), String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !accepts(addr) {
        server.check_alive()?;
        if std::time::Instant::now() > deadline {
            return Err(format!("the server did not open {addr} within 10 s{}", server.log_tail()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
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

    #[cfg(test)]
    fn argv(&self, cpu: &str) -> Vec<String> {
        self.command(cpu).argv()
    }

    fn command(&self, cpu: &str) -> WrkCommand {
        WrkCommand {
            cpu: cpu.to_string(),
            connections: self.connections,
            seconds: self.seconds,
            timeout_secs: Some(self.timeout_secs),
            headers: Vec::new(),
            script: self.script.clone(),
            url: self.url.clone(),
        }
    }

    /// Starts wrk in the background.
    pub fn spawn(&self, cpu: &str) -> Result<RunningWrk, String> {
        self.command(cpu).spawn()
    }
}

/// Runs `load` against the server and returns its report with the
/// server's requests per CPU-second over the run (utime + stime from
/// `/proc`).
pub fn measured_run(load: &Load, cpu: &str, pid: u32) -> Result<(LoadReport, f64), String> {
    let before = procfs::cpu_secs(pid)?;
    let report = load.run(cpu)?;
    let cpu_secs = procfs::cpu_secs(pid)? - before;
    let per_cpu_sec = if cpu_secs > 0.0 { report.total_requests as f64 / cpu_secs } else { 0.0 };
    Ok((report, per_cpu_sec))
}

/// The median of `values` (0 when empty).
pub fn median(values: &[f64]) -> f64 {
    stats::median(values).unwrap_or(0.0)
}

/// Sends one `GET path` on a fresh connection (the verifier's raw client)
/// and returns the status, or why there was none.
pub fn probe(addr: SocketAddr, path: &str) -> Result<u16, String> {
    let target =
        client::Target { addr, host: "lab".into(), prefix: String::new(), timeout: Duration::from_secs(5) };
    target.get(path).map(|response| response.status)
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
}
