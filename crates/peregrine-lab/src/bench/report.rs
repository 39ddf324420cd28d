//! Presenting results: the per-run progress line, the Markdown report (one
//! table per test, ratios to the baseline) and the JSON document.

use super::stats::{RunRecord, Spread, Summary};
use serde::Serialize;
use std::fmt::Write as _;

/// How the bench was run; recorded in the JSON and the report header.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub servers_file: String,
    pub servers: Vec<String>,
    pub tests: Vec<String>,
    pub rounds: u32,
    pub duration_secs: u32,
    pub warmup_secs: u32,
    pub connections: u32,
    pub pipeline_depth: u32,
    pub queries: u32,
    pub server_cpu: String,
    pub client_cpu: String,
    pub baseline: String,
    pub wrk_version: String,
    pub clock_ticks_per_second: u64,
    pub started_unix_secs: u64,
}

/// Everything written to `--out`.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub settings: Settings,
    pub summaries: Vec<Summary>,
    pub runs: Vec<RunRecord>,
}

/// `1234567.8` -> `1,234,568`.
pub fn count(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ms(value: Option<f64>) -> String {
    match value {
        Some(v) if v < 10.0 => format!("{v:.2} ms"),
        Some(v) => format!("{v:.1} ms"),
        None => "—".into(),
    }
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("—".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

fn ratio(value: Option<f64>) -> String {
    value.map_or("—".into(), |r| format!("{r:.2}×"))
}

fn spread(value: Option<Spread>) -> String {
    value.map_or("—".into(), |s| {
        // One round (or identical rounds) has no spread worth printing.
        if s.min == s.max {
            count(s.median)
        } else {
            format!("{} ({}–{})", count(s.median), count(s.min), count(s.max))
        }
    })
}

/// One line per finished run, printed as the bench goes.
pub fn progress_line(run: &RunRecord, rounds: u32) -> String {
    let head = format!(
        "{:<10} round {}/{}  {:<12}",
        run.test, run.round, rounds, run.server
    );
    let Some(m) = &run.measurement else {
        return format!(
            "{head} FAILED: {}",
            run.failure.as_deref().unwrap_or("unknown")
        );
    };
    let mut line = format!(
        "{head} {:>11} req/s  {:>11} req/CPU-s  p50 {}  p99 {}  RSS {}",
        count(m.wrk.requests_per_sec),
        m.requests_per_cpu_second.map_or("—".into(), count),
        ms(m.wrk.latency_p50_ms),
        ms(m.wrk.latency_p99_ms),
        mib(m.peak_rss_kib),
    );
    if let Some(problem) = run.problem() {
        let _ = write!(line, "  ERRORS: {problem}");
    }
    line
}

/// The Markdown report: settings, then one table per test.
pub fn markdown(results: &Results) -> String {
    let s = &results.settings;
    let base = &s.baseline;
    let mut out = String::new();
    let _ = writeln!(out, "# peregrine-lab bench\n");
    let _ = writeln!(
        out,
        "{}; 1 thread, {} connections; {} s measured after {} s warm-up; {} round(s), servers alternating; \
         server on CPU {}, wrk on CPU {}; {} Hz CPU clock.\n",
        s.wrk_version,
        s.connections,
        s.duration_secs,
        s.warmup_secs,
        s.rounds,
        s.server_cpu,
        s.client_cpu,
        s.clock_ticks_per_second
    );
    let _ = writeln!(
        out,
        "Cells show the median over clean rounds, (min–max) after it. req/CPU-s is requests \
         per second of server CPU time (user + system). Ratios are to `{base}`. Runs with \
         errors are left out of the medians and listed under each table.\n"
    );

    for test in &s.tests {
        let rows: Vec<&Summary> = results
            .summaries
            .iter()
            .filter(|x| &x.test == test)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let pipelined = test == "plaintext" && s.pipeline_depth > 1;
        let _ = write!(out, "## {test}");
        if pipelined {
            let _ = write!(out, " (pipeline depth {})", s.pipeline_depth);
        }
        let _ = writeln!(out, "\n");
        let _ = writeln!(
            out,
            "| server | req/s | vs {base} | req/CPU-s | vs {base} | p50 | p99 | peak RSS | clean runs |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for row in &rows {
            let marker = if row.clean_runs < row.runs {
                " ⚠"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {}/{}{} |",
                row.server,
                spread(row.requests_per_sec),
                ratio(row.ratio_requests_per_sec),
                spread(row.requests_per_cpu_second),
                ratio(row.ratio_requests_per_cpu_second),
                ms(row.latency_p50_ms),
                ms(row.latency_p99_ms),
                mib(row.peak_rss_kib),
                row.clean_runs,
                row.runs,
                marker
            );
        }
        if pipelined {
            let _ = writeln!(
                out,
                "\nwrk times a pipelined batch as one sample, not each request, so latency is \
                 not reported for pipelined runs."
            );
        }
        let problems: Vec<String> = results
            .runs
            .iter()
            .filter(|r| &r.test == test)
            .filter_map(|r| {
                Some(format!(
                    "- {} round {}: {}",
                    r.server,
                    r.round,
                    r.problem()?
                ))
            })
            .collect();
        if !problems.is_empty() {
            let _ = writeln!(out, "\nRuns left out:\n\n{}", problems.join("\n"));
        }
        let _ = writeln!(out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::{add_ratios, summarize, Measurement};
    use crate::bench::wrk::{SocketErrors, WrkReport};

    #[test]
    fn formats_counts() {
        assert_eq!(count(0.0), "0");
        assert_eq!(count(999.4), "999");
        assert_eq!(count(1000.0), "1,000");
        assert_eq!(count(1_234_567.8), "1,234,568");
    }

    #[test]
    fn markdown_has_ratio_table_and_marks_errors() {
        let mk = |server: &str, rps: f64, errors: u64| RunRecord {
            test: "json".into(),
            server: server.into(),
            round: 1,
            measurement: Some(Measurement::new(
                WrkReport {
                    requests_per_sec: rps,
                    total_requests: rps as u64,
                    duration_secs: 1.0,
                    latency_p50_ms: Some(0.5),
                    latency_p99_ms: Some(2.0),
                    non_2xx_3xx: errors,
                    socket_errors: SocketErrors::default(),
                },
                100,
                100,
                Some(2048),
            )),
            failure: None,
        };
        let runs = vec![
            mk("floor", 200_000.0, 0),
            mk("peregrine", 150_000.0, 0),
            mk("bad", 1.0, 3),
        ];
        let mut summaries: Vec<Summary> = runs
            .iter()
            .map(|r| summarize("json", &r.server, &[r]))
            .collect();
        add_ratios(&mut summaries, "floor");
        let results = Results {
            settings: Settings {
                servers_file: "lab/servers.toml".into(),
                servers: vec!["floor".into(), "peregrine".into(), "bad".into()],
                tests: vec!["json".into()],
                rounds: 1,
                duration_secs: 5,
                warmup_secs: 2,
                connections: 256,
                pipeline_depth: 16,
                queries: 20,
                server_cpu: "0".into(),
                client_cpu: "1".into(),
                baseline: "floor".into(),
                wrk_version: "wrk 4.1.0".into(),
                clock_ticks_per_second: 100,
                started_unix_secs: 0,
            },
            summaries,
            runs,
        };
        let md = markdown(&results);
        assert!(md.contains("## json\n"), "{md}");
        assert!(md.contains("| peregrine | 150,000 | 0.75× |"), "{md}");
        assert!(md.contains("| bad | — | — |"), "{md}");
        assert!(md.contains("0/1 ⚠"), "{md}");
        assert!(md.contains("- bad round 1: 3 non-2xx/3xx"), "{md}");
        assert!(serde_json::to_string(&results).is_ok());
        assert!(progress_line(&results.runs[2], 1).contains("ERRORS: 3 non-2xx"));
    }
}
