//! Server processes under test: building them, starting one pinned to a CPU
//! with its output in a log file, waiting for its port, and stopping it
//! (SIGTERM, then SIGKILL). A started server is stopped when its handle is
//! dropped, so an error mid-run never leaves one holding the port.
//!
//! It knows nothing of where a command line comes from (the bench's servers
//! file, a stress scenario's flags): callers pass the argv and environment.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_GRACE: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(50);
const LOG_TAIL_LINES: usize = 20;

/// Runs a build command to completion, its output going to our terminal.
pub fn build(argv: &[String]) -> Result<(), String> {
    let (program, args) = argv.split_first().ok_or("empty build command")?;
    let status = Command::new(program)
        .args(args)
        .status()
        .map_err(|e| format!("cannot run build `{}`: {e}", argv.join(" ")))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("build `{}` failed ({status})", argv.join(" ")))
    }
}

/// Whether something accepts TCP connections at `addr` right now.
pub fn accepts(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// A server process started for one run.
pub struct RunningServer {
    child: Child,
    log: PathBuf,
}

impl RunningServer {
    /// Starts `argv` (with `env` added) pinned to `cpu` (a `taskset -c`
    /// list) and waits until `addr` accepts connections (the caller checks
    /// the port was free). `taskset` execs the server, so the child's PID is
    /// the server's own. `name` labels errors.
    pub fn start(
        name: &str,
        argv: &[String],
        env: &[(String, String)],
        addr: SocketAddr,
        cpu: &str,
        log: &Path,
    ) -> Result<Self, String> {
        let out = File::create(log).map_err(|e| format!("cannot create log {}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("cannot share log {}: {e}", log.display()))?;
        let child = Command::new("taskset")
            .arg("-c")
            .arg(cpu)
            .args(argv)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start `{}` via taskset: {e}", argv.join(" ")))?;
        let mut server = RunningServer { child, log: log.to_path_buf() };
        server.wait_ready(name, addr)?;
        Ok(server)
    }

    fn wait_ready(&mut self, name: &str, addr: SocketAddr) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "`{}` exited ({status}) before opening port {}{}",
                    name,
                    addr.port(),
                    self.log_tail()
                ));
            }
            if accepts(addr) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "`{}` did not accept connections on {addr} within {} s{}",
                    name,
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                ));
            }
            sleep(POLL);
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails (with the log tail) if the server has exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(format!("server exited during the run ({status}){}", self.log_tail())),
            Err(e) => Err(format!("cannot check the server process: {e}")),
        }
    }

    /// The last lines of the server's log, formatted to append to an error.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        if tail.is_empty() {
            format!("\n  (log {} is empty)", self.log.display())
        } else {
            format!("\n  last {} lines of {}:\n    {}", tail.len(), self.log.display(), tail.join("\n    "))
        }
    }

    /// Sends SIGTERM without waiting.
    pub fn send_sigterm(&self) -> io::Result<()> {
        let pid = libc::pid_t::try_from(self.child.id())
            .map_err(|_| io::Error::other("server PID does not fit pid_t"))?;
        // SAFETY: as in `terminate`: our own un-reaped child.
        if unsafe { libc::kill(pid, libc::SIGTERM) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `within` for the server to exit; `None` if it still runs.
    pub fn wait_exit(&mut self, within: Duration) -> io::Result<Option<std::process::ExitStatus>> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            sleep(Duration::from_millis(5));
        }
    }

    /// SIGTERM, up to five seconds to exit, then SIGKILL.
    pub fn stop(mut self) -> io::Result<()> {
        self.terminate()
    }

    fn terminate(&mut self) -> io::Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        let pid = libc::pid_t::try_from(self.child.id())
            .map_err(|_| io::Error::other("server PID does not fit pid_t"))?;
        // SAFETY: kill takes no pointers; `pid` is our own un-reaped child,
        // so it cannot have been recycled for another process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            sleep(POLL);
        }
        self.child.kill()?;
        self.child.wait().map(|_| ())
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Err(e) = self.terminate() {
            eprintln!("warning: could not stop server PID {}: {e}", self.child.id());
        }
    }
}
