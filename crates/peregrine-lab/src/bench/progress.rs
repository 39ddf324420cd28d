//! Progress while the bench runs.
//!
//! On a terminal, one status line is redrawn in place (`\r`): run k of n, the
//! test, level, server and round about to run, the ETA, and the last result.
//! Runs with errors are also printed as lines of their own, so they stay on
//! screen. When stdout is not a terminal (a log file, CI), each finished run
//! is one plain line instead, so the log reads top to bottom.
//!
//! The ETA starts from the planned time per run and, after the first run,
//! uses the measured average (server start and stop included).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// What is about to run, for the status line.
pub struct Step<'a> {
    pub test: &'a str,
    pub level: &'a str,
    pub server: &'a str,
    pub round: u32,
    pub rounds: u32,
}

pub struct Progress {
    total: usize,
    done: usize,
    planned_per_run: Duration,
    started: Instant,
    tty: bool,
    /// Whether a status line is on screen (so must be cleared first).
    drawn: bool,
    last: Option<String>,
}

impl Progress {
    pub fn new(total: usize, planned_per_run: Duration) -> Self {
        Progress {
            total,
            done: 0,
            planned_per_run,
            started: Instant::now(),
            tty: std::io::stdout().is_terminal(),
            drawn: false,
            last: None,
        }
    }

    /// Shows the run that starts now.
    pub fn start(&mut self, step: &Step<'_>) {
        if !self.tty {
            return;
        }
        let mut line = format!(
            "[{}/{}] {} · {} · {} · round {}/{} · ETA {}",
            self.done + 1,
            self.total,
            step.test,
            step.level,
            step.server,
            step.round,
            step.rounds,
            format_duration(self.eta())
        );
        if let Some(last) = &self.last {
            line.push_str(" · last: ");
            line.push_str(last);
        }
        let width = terminal_width().unwrap_or(100).saturating_sub(1);
        let line: String = line.chars().take(width).collect();
        let mut out = std::io::stdout().lock();
        // \x1b[K clears what a longer previous line left behind.
        let _ = write!(out, "\r\x1b[K{line}");
        let _ = out.flush();
        self.drawn = true;
    }

    /// Records a finished run. `line` is the full result line; `short` is
    /// what the status line shows of it; `problem` keeps it on screen.
    pub fn finish(&mut self, line: &str, short: String, problem: bool) {
        self.done += 1;
        if self.tty {
            if problem {
                self.print(line);
            }
            self.last = Some(short);
        } else {
            println!("[{}/{}] {line}  (ETA {})", self.done, self.total, format_duration(self.eta()));
        }
    }

    /// Prints a line that stays, above the status line.
    pub fn print(&mut self, line: &str) {
        self.clear();
        println!("{line}");
    }

    /// Removes the status line, before other output or at the end.
    pub fn clear(&mut self) {
        if self.drawn {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "\r\x1b[K");
            let _ = out.flush();
            self.drawn = false;
        }
    }

    fn eta(&self) -> Duration {
        eta(self.done, self.total, self.started.elapsed(), self.planned_per_run)
    }
}

/// Time left: the average so far times the runs left, or the planned time
/// per run before any run has finished.
pub fn eta(done: usize, total: usize, elapsed: Duration, planned_per_run: Duration) -> Duration {
    let left = total.saturating_sub(done) as u32;
    if done == 0 {
        planned_per_run * left
    } else {
        elapsed / done as u32 * left
    }
}

/// `3725 s` -> `1h02m`, `200 s` -> `3m20s`, `45 s` -> `45s`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The terminal's width in columns, so the status line never wraps (a
/// wrapped line cannot be redrawn with `\r`).
fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ writes one `winsize` into the valid, writable
    // struct we pass; the result is checked before the struct is read.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ret = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (ret == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_from_plan_then_from_average() {
        let planned = Duration::from_secs(10);
        assert_eq!(eta(0, 4, Duration::ZERO, planned), Duration::from_secs(40));
        assert_eq!(eta(1, 4, Duration::from_secs(6), planned), Duration::from_secs(18));
        assert_eq!(eta(4, 4, Duration::from_secs(60), planned), Duration::ZERO);
        assert_eq!(eta(5, 4, Duration::from_secs(60), planned), Duration::ZERO);
    }

    #[test]
    fn formats_durations() {
        assert_eq!(format_duration(Duration::from_secs(45)), "45s");
        assert_eq!(format_duration(Duration::from_secs(200)), "3m20s");
        assert_eq!(format_duration(Duration::from_secs(3725)), "1h02m");
    }
}
