//! What the lab reads about a server process from `/proc`: CPU time used
//! (utime + stime from `/proc/PID/stat`, and the reaped children's cutime +
//! cstime), its parent, peak and current resident memory (VmHWM, VmRSS from
//! `/proc/PID/status`) and open file descriptors. `/proc/PID/stat` of a
//! process counts all its threads, which is what a single-process
//! multi-threaded server needs.

use std::fmt;

/// CPU time a process has used so far, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTicks {
    pub utime: u64,
    pub stime: u64,
}

impl CpuTicks {
    pub fn total(self) -> u64 {
        self.utime + self.stime
    }

    /// The time used since `earlier`, a reading of the same process.
    pub fn since(self, earlier: CpuTicks) -> CpuTicks {
        CpuTicks {
            utime: self.utime.saturating_sub(earlier.utime),
            stime: self.stime.saturating_sub(earlier.stime),
        }
    }
}

/// Why a `/proc` file could not be used.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcError(pub String);

impl fmt::Display for ProcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProcError {}

/// The fields of `/proc/PID/stat` the lab uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Parent process id (field 4).
    pub ppid: u32,
    /// The process's own CPU time (fields 14 and 15).
    pub cpu: CpuTicks,
    /// CPU time of its children that have exited and been waited for
    /// (fields 16 and 17, cutime and cstime).
    pub reaped_children: CpuTicks,
}

/// Parses utime and stime (fields 14 and 15, 1-based) from the text of
/// `/proc/PID/stat`.
pub fn parse_stat(text: &str) -> Result<CpuTicks, ProcError> {
    parse_proc_stat(text).map(|s| s.cpu)
}

/// Parses the parent and the CPU times from the text of `/proc/PID/stat`.
pub fn parse_proc_stat(text: &str) -> Result<ProcStat, ProcError> {
    // Field 2 is the command name in parentheses, and it may itself contain
    // spaces or parentheses; everything after the *last* ')' splits cleanly.
    let close = text.rfind(')').ok_or_else(|| ProcError("stat has no `(comm)` field".into()))?;
    // After ')' comes field 3 (state), so field N is at index N - 3.
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<u64, ProcError> {
        let raw = rest.get(n - 3).ok_or_else(|| ProcError(format!("stat has no field {n}")))?;
        raw.parse().map_err(|_| ProcError(format!("stat field {n} is `{raw}`, not a number")))
    };
    Ok(ProcStat {
        ppid: u32::try_from(field(4)?).map_err(|_| ProcError("stat field 4 is not a pid".into()))?,
        cpu: CpuTicks { utime: field(14)?, stime: field(15)? },
        reaped_children: CpuTicks { utime: field(16)?, stime: field(17)? },
    })
}

/// Reads `/proc/PID/stat` of a live process.
pub fn read_proc_stat(pid: u32) -> Result<ProcStat, ProcError> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|e| ProcError(format!("cannot read {path}: {e}")))?;
    parse_proc_stat(&text).map_err(|e| ProcError(format!("{path}: {e}")))
}

/// The ids of every process whose parent is `parent`.
pub fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        // A process may exit between the listing and the read: skip it.
        .filter(|&pid| read_proc_stat(pid).is_ok_and(|s| s.ppid == parent))
        .collect()
}

/// Parses the peak resident set size in KiB (`VmHWM`) from the text of
/// `/proc/PID/status`.
pub fn parse_vm_hwm_kib(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Reads the CPU ticks a live process has used.
pub fn read_cpu(pid: u32) -> Result<CpuTicks, ProcError> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ProcError(format!("cannot read {path} (did the server exit?): {e}")))?;
    parse_stat(&text).map_err(|e| ProcError(format!("{path}: {e}")))
}

/// Reads a live process's peak RSS in KiB, if the kernel reports it.
pub fn read_peak_rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_hwm_kib(&text)
}

/// Clock ticks per second, the unit of utime and stime.
pub fn clock_ticks_per_second() -> Result<u64, ProcError> {
    // SAFETY: sysconf takes no pointers and has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return Err(ProcError("sysconf(_SC_CLK_TCK) failed".into()));
    }
    Ok(ticks as u64)
}

/// CPU seconds (user + system) a process has used so far.
pub fn cpu_secs(pid: u32) -> Result<f64, String> {
    let ticks = clock_ticks_per_second().map_err(|e| e.to_string())? as f64;
    Ok(read_cpu(pid).map_err(|e| e.to_string())?.total() as f64 / ticks)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_comm() {
        // A real line, with a command name containing spaces and a ')'.
        let text = "4242 (my serv) er) S 1 4242 4242 0 -1 4194560 1510 0 0 0 \
                    731 229 0 0 20 0 3 0 123456 12345678 900 18446744073709551615\n";
        let cpu = parse_stat(text).expect("parses");
        assert_eq!(cpu, CpuTicks { utime: 731, stime: 229 });
        assert_eq!(cpu.total(), 960);
    }

    #[test]
    fn parses_parent_and_reaped_children() {
        let text = "4242 (postgres) S 17 4242 4242 0 -1 4194560 1510 0 0 0 \
                    731 229 40 2 20 0 3 0 123456 12345678 900 18446744073709551615\n";
        let stat = parse_proc_stat(text).expect("parses");
        assert_eq!(stat.ppid, 17);
        assert_eq!(stat.cpu, CpuTicks { utime: 731, stime: 229 });
        assert_eq!(stat.reaped_children, CpuTicks { utime: 40, stime: 2 });
    }

    #[test]
    fn rejects_short_or_garbled_stat() {
        assert!(parse_stat("12 (x) S 1 2 3").is_err());
        assert!(parse_stat("no parens here").is_err());
        let bad = "1 (x) S 1 1 1 0 -1 0 0 0 0 0 abc 5 0 0";
        assert!(parse_stat(bad).unwrap_err().0.contains("field 14"));
    }

    #[test]
    fn parses_vm_hwm() {
        let text = "Name:\tfloor\nVmPeak:\t   10000 kB\nVmHWM:\t    2100 kB\nVmRSS:\t 2000 kB\n";
        assert_eq!(parse_vm_hwm_kib(text), Some(2100));
        assert_eq!(parse_vm_hwm_kib("Name:\tx\n"), None);
    }

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        assert!(read_cpu(pid).is_ok());
        let me = read_proc_stat(pid).expect("own stat");
        assert!(children(me.ppid).contains(&pid), "this process is a child of its parent");
        assert!(read_peak_rss_kib(pid).is_some_and(|kib| kib > 0));
        assert!(clock_ticks_per_second().is_ok_and(|t| t > 0));
    }

    #[test]
    fn proc_readers_see_this_process() {
        let me = std::process::id();
        assert!(rss_kib(me).is_some_and(|kib| kib > 0));
        assert!(fd_count(me).is_some_and(|n| n >= 3));
    }
}
