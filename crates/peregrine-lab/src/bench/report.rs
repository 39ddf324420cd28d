//! Presenting results: the per-run result line, the Markdown report (the
//! composite score, then one chart and one table per test with a row per
//! level and server, ratios to the baseline), the charts, and the JSON
//! document.
//!
//! The JSON document ([`Results`]) is also this module's input: `bench
//! --report-from FILE` reads one back and writes the report and charts again
//! without running anything.

use super::chart;
use super::composite::{self, Composite};
use super::levels::TestLevels;
use super::load::TfbClient;
use super::records::{RunRecord, Summary};
use super::versus::{self, Sides};
use crate::rig::stats::{count, times, times_interval, Spread};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// How the bench was run; recorded in the JSON and the report header.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub servers_file: String,
    pub servers: Vec<String>,
    /// The tests in run order, each with the levels it ran at.
    pub tests: Vec<TestLevels>,
    pub rounds: u32,
    pub duration_secs: u32,
    pub warmup_secs: u32,
    pub server_cpu: String,
    pub client_cpu: String,
    pub baseline: String,
    pub wrk_version: String,
    /// The load generator of the TFB tests (older results files: wrk).
    #[serde(default)]
    pub tfb_client: TfbClient,
    pub clock_ticks_per_second: u64,
    pub started_unix_secs: u64,
    /// The server the report compares with the best of its peers
    /// (`--subject`; see `versus`), if any.
    #[serde(default)]
    pub subject: Option<String>,
    /// The floor responders named by `--floors`; `None` takes them by name.
    #[serde(default)]
    pub floors: Option<Vec<String>>,
    /// The database the servers were given through `DATABASE_URL` when
    /// database tests ran (older results files: not recorded).
    #[serde(default)]
    pub database: Database,
}

/// What `DATABASE_URL` held for a run with database tests. Without it each
/// server falls back to what it does alone (peregrine-tfb to its embedded
/// SQLite, the lab's peers to errors or empty answers), and the database
/// figures stop comparing the servers on one database, so the report says so
/// at the top rather than leaving it to be noticed in a server's log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Database {
    /// A results file from before this was recorded.
    #[default]
    Unrecorded,
    /// No database test ran.
    NotUsed,
    /// Database tests ran with `DATABASE_URL` unset or empty.
    Unset,
    /// The URL, its password hidden.
    Url(String),
}

impl Database {
    /// What a run records of `url`, the non-empty `DATABASE_URL` if any,
    /// when its tests use a database (`used`).
    pub fn of(used: bool, url: Option<&str>) -> Database {
        match (used, url) {
            (false, _) => Database::NotUsed,
            (true, Some(url)) => Database::Url(hide_password(url)),
            (true, None) => Database::Unset,
        }
    }
}

/// `url` with the password of its user-info (`user:password@`) replaced by
/// `***`, so a report can be shared.
fn hide_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return url.to_string() };
    match rest[..at].split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_string(),
    }
}

/// The warning printed and written at the top of the report when database
/// tests ran without `DATABASE_URL`.
pub const NO_DATABASE_WARNING: &str = "DATABASE_URL is not set, so the database tests ran against \
     whatever each server does without one (peregrine-tfb serves them from its embedded SQLite; \
     the lab's peers answer errors or empty lists): these figures do not compare the servers on \
     one database. Start one with `export \"$(scripts/pg start)\"` and run again";

/// Everything written to `--out`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub settings: Settings,
    /// The TFB-style composite score (see `composite`).
    pub composite: Composite,
    /// One per (test, level, server), in run order.
    pub summaries: Vec<Summary>,
    pub runs: Vec<RunRecord>,
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

/// One line per finished run: test, level, round, server, then the numbers.
pub fn progress_line(run: &RunRecord, rounds: u32, levels: &TestLevels) -> String {
    let head = format!(
        "{:<10} {:<16} round {}/{}  {:<12}",
        run.test,
        levels.label(&run.level),
        run.round,
        rounds,
        run.server
    );
    let Some(m) = &run.measurement else {
        return format!("{head} FAILED: {}", run.failure.as_deref().unwrap_or("unknown"));
    };
    let mut line = format!(
        "{head} {:>11} req/s  {:>11} req/CPU-s  p50 {}  p99 {}  RSS {}",
        count(m.wrk.requests_per_sec),
        m.requests_per_cpu_second.map_or("—".into(), count),
        ms(m.wrk.latency_p50_ms),
        ms(m.wrk.latency_p99_ms),
        mib(m.peak_rss_kib),
    );
    if m.db_cpu_seconds.is_some() {
        let _ = write!(line, "  db CPU share {}", percent(m.db_cpu_share()));
    }
    if let Some(problem) = run.problem() {
        let _ = write!(line, "  ERRORS: {problem}");
    }
    line
}

/// The few words of a finished run the status line keeps.
pub fn short_result(run: &RunRecord) -> String {
    match (&run.measurement, run.problem()) {
        (Some(m), None) => format!("{} {} req/s", run.server, count(m.wrk.requests_per_sec)),
        _ => format!("{} had errors", run.server),
    }
}

/// What the tests ran at, one line per test, for the report header.
fn describe_levels(t: &TestLevels) -> String {
    let values: Vec<String> = t.levels.iter().map(|l| t.value(l).to_string()).collect();
    let mut text = format!("{}: {} {}", t.test, values.join(", "), t.axis.title());
    if let Some(first) = t.levels.first() {
        if t.axis != super::levels::Axis::Concurrency {
            let _ = write!(text, " at {} connections", first.connections);
        }
        if first.pipeline > 1 {
            let _ = write!(text, ", pipeline depth {}", first.pipeline);
        }
    }
    text
}

/// The composite section: one row per server, one column per weighted test.
fn composite_section(out: &mut String, c: &Composite) {
    let _ = writeln!(out, "## TFB composite score\n");
    if c.tests.is_empty() {
        let _ = writeln!(
            out,
            "No weighted test was run (json, db, queries at 20, fortunes, updates at 20, plaintext), \
             so there is no composite score.\n"
        );
        return;
    }
    let weight = |test: &str| composite::WEIGHTS.iter().find(|(t, _)| *t == test).map_or(0.0, |(_, w)| *w);
    let _ = write!(out, "| server | score | of {:.0} |", c.max_score);
    for test in &c.tests {
        let _ = write!(out, " {test} (×{}) |", weight(test));
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---|---:|---:|{}", "---:|".repeat(c.tests.len()));
    for s in &c.servers {
        let share = if c.max_score > 0.0 { 100.0 * s.score / c.max_score } else { 0.0 };
        let _ = write!(out, "| {} | {:.1} | {share:.1}% |", s.server, s.score);
        for part in &s.parts {
            let _ = write!(out, " {} |", part.normalized.map_or("—".into(), |n| format!("{n:.1}")));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "\nEach test's cell is 100 × the server's result / the best server's result in this run; \
         the result is the best median req/s over the levels run (queries and updates: the \
         20-query level). The score is the sum of weight × cell. Only the servers of this run \
         are compared."
    );
    if !c.missing_tests.is_empty() {
        let _ = writeln!(
            out,
            "\nNot in the score (not run, or no 20-query level): {}.",
            c.missing_tests.join(", ")
        );
    }
    for s in c.servers.iter().filter(|s| !s.missing.is_empty()) {
        let _ = writeln!(
            out,
            "\n`{}` has no clean result for {} (scored 0 there).",
            s.server,
            s.missing.join(", ")
        );
    }
    let _ = writeln!(out);
}

/// The Markdown report: settings, the composite, then per test its chart
/// and a table with one row per level and server.
pub fn markdown(results: &Results) -> String {
    let s = &results.settings;
    let base = &s.baseline;
    let mut out = String::new();
    let _ = writeln!(out, "# peregrine-lab bench\n");
    let _ = writeln!(
        out,
        "{} (HttpArena profiles: `peregrine-lab load`, one thread); {} s measured after \
         {} s warm-up; {} round(s), servers alternating within each round, the order turning by one each round; server on CPU {}, \
         client on CPU {}; {} Hz CPU clock.\n",
        match s.tfb_client {
            TfbClient::Wrk => format!("{}, 1 thread", s.wrk_version),
            TfbClient::Lab => "TFB tests: `peregrine-lab load` (`--client lab`), one thread".to_string(),
        },
        s.duration_secs,
        s.warmup_secs,
        s.rounds,
        s.server_cpu,
        s.client_cpu,
        s.clock_ticks_per_second
    );
    match &s.database {
        Database::Url(url) => {
            let _ = writeln!(out, "The database tests' servers were given `DATABASE_URL={url}`.\n");
        }
        Database::Unset => {
            let _ = writeln!(out, "**Warning: {NO_DATABASE_WARNING}.**\n");
        }
        Database::NotUsed | Database::Unrecorded => {}
    }
    let _ = writeln!(out, "Levels:\n");
    for t in &s.tests {
        let _ = writeln!(out, "- {}", describe_levels(t));
    }
    let _ = writeln!(
        out,
        "\nCells show the median over clean rounds, (min–max) after it. req/CPU-s is requests \
         per second of server CPU time (user + system). Ratios are to `{base}` at the same \
         level. Runs with errors are left out of the medians and listed under each table.\n"
    );
    composite_section(&mut out, &results.composite);
    if let Some(subject) = &s.subject {
        match Sides::split(&s.servers, subject, s.floors.as_deref()) {
            Ok(sides) => versus::section(&mut out, &sides, &s.tests, &results.summaries, &results.runs),
            Err(why) => {
                let _ = writeln!(out, "No comparison with the best peer: {why}.\n");
            }
        }
    }

    for t in &s.tests {
        let test = &t.test;
        let rows: Vec<&Summary> = results.summaries.iter().filter(|x| &x.test == test).collect();
        if rows.is_empty() {
            continue;
        }
        let pipeline = t.levels.first().map_or(1, |l| l.pipeline);
        let _ = write!(out, "## {test}");
        if pipeline > 1 {
            let _ = write!(out, " (pipeline depth {pipeline})");
        }
        let _ = writeln!(out, "\n");
        let _ = writeln!(out, "![{test}: requests/s by {}]({})\n", t.axis.title(), chart::file_name(test));
        let _ = writeln!(
            out,
            "| {} | server | req/s | vs {base} | req/CPU-s | vs {base} | p50 | p99 | peak RSS | clean runs |",
            t.axis.title()
        );
        let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for row in &rows {
            let marker = if row.clean_runs < row.runs { " ⚠" } else { "" };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{}{} |",
                t.value(&row.level),
                row.server,
                spread(row.requests_per_sec),
                times(row.ratio_requests_per_sec),
                spread(row.requests_per_cpu_second),
                times(row.ratio_requests_per_cpu_second),
                ms(row.latency_p50_ms),
                ms(row.latency_p99_ms),
                mib(row.peak_rss_kib),
                row.clean_runs,
                row.runs,
                marker
            );
        }
        client_table(&mut out, t, &rows);
        round_ratio_table(&mut out, t, &rows, base);
        database_table(&mut out, t, &rows);
        if pipeline > 1 && test.starts_with(super::levels::ARENA_PREFIX) {
            let _ = writeln!(
                out,
                "\nThe load generator times every answer of a pipelined batch from the batch's \
                 write, which is not wrk's measure, so latency is not reported for pipelined runs."
            );
        } else if pipeline > 1 {
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
                Some(format!("- {} at {}, round {}: {}", r.server, t.label(&r.level), r.round, r.problem()?))
            })
            .collect();
        if !problems.is_empty() {
            let _ = writeln!(out, "\nRuns left out:\n\n{}", problems.join("\n"));
        }
        let _ = writeln!(out);
    }
    out
}

/// Where each row's CPU went besides the headline figures: the kernel's
/// share of the server's CPU time (what user-space work can no longer
/// win back), requests per client CPU-second (is the load generator the
/// bottleneck?) and, where the lab's generator measured it, bytes per
/// response (HttpArena's json-comp score depends on it). Left out for
/// results from before the bench recorded them.
fn client_table(out: &mut String, t: &TestLevels, rows: &[&Summary]) {
    if rows.iter().all(|r| {
        r.kernel_cpu_share.is_none()
            && r.requests_per_client_cpu_second.is_none()
            && r.bytes_per_response.is_none()
    }) {
        return;
    }
    let columns = ["server CPU in kernel", "req per client CPU-s", "bytes/response"];
    side_table(out, t, rows, &columns, |row| {
        vec![
            percent(row.kernel_cpu_share),
            row.requests_per_client_cpu_second.map_or("—".into(), count),
            row.bytes_per_response.map_or("—".into(), count),
        ]
    });
}

/// Each row's ratios to the baseline taken round by round, then their
/// median (see [`Summary::round_ratio_requests_per_sec`]): on a machine
/// whose speed drifts, steadier than the ratio of medians. Beside each, the
/// interval that median could lie in (see [`median_interval`]), so that a
/// difference narrower than the machine's noise reads as such. Only with
/// more than one round, where it can differ.
///
/// [`median_interval`]: crate::rig::stats::median_interval
fn round_ratio_table(out: &mut String, t: &TestLevels, rows: &[&Summary], base: &str) {
    if rows.iter().all(|r| r.clean_runs < 2 || r.round_ratio_requests_per_sec.is_none()) {
        return;
    }
    let first = format!("vs {base}, median of round ratios: req/s");
    let columns = [first.as_str(), "its interval", "req/CPU-s", "its interval"];
    side_table(out, t, rows, &columns, |row| {
        vec![
            times(row.round_ratio_requests_per_sec),
            times_interval(row.round_ratio_interval_requests_per_sec),
            times(row.round_ratio_requests_per_cpu_second),
            times_interval(row.round_ratio_interval_requests_per_cpu_second),
        ]
    });
}

/// The database's side of each row, for profiles that use PostgreSQL on
/// this machine: its CPU seconds over the measured run, its share of the
/// server's and its CPU time together, and requests per CPU-second of both
/// (a server can look cheap by leaving work to the database).
fn database_table(out: &mut String, t: &TestLevels, rows: &[&Summary]) {
    if rows.iter().all(|r| r.db_cpu_seconds.is_none()) {
        return;
    }
    let columns = ["db CPU-s", "db CPU share", "req per server+db CPU-s"];
    side_table(out, t, rows, &columns, |row| {
        vec![
            row.db_cpu_seconds.map_or("—".into(), |s| format!("{s:.2}")),
            percent(row.db_cpu_share),
            row.requests_per_server_and_db_cpu_second.map_or("—".into(), count),
        ]
    });
}

/// One of the tables after a test's main one: a row per level and
/// server, its `columns` of figures (right-aligned) from `cells`.
fn side_table(
    out: &mut String,
    t: &TestLevels,
    rows: &[&Summary],
    columns: &[&str],
    cells: impl Fn(&Summary) -> Vec<String>,
) {
    let _ = writeln!(out, "\n| {} | server | {} |", t.axis.title(), columns.join(" | "));
    let _ = writeln!(out, "|---:|---|{}", "---:|".repeat(columns.len()));
    for row in rows {
        let _ = writeln!(out, "| {} | {} | {} |", t.value(&row.level), row.server, cells(row).join(" | "));
    }
}

fn percent(share: Option<f64>) -> String {
    share.map_or("—".into(), |s| format!("{:.0}%", 100.0 * s))
}

/// Writes the report beside `json_path` (same name, `.md`) and one chart
/// per test in the same directory; with `write_json`, the JSON as well.
/// Returns the paths written.
pub fn write(json_path: &Path, results: &Results, write_json: bool) -> Result<Vec<PathBuf>, String> {
    let dir = json_path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let put = |path: PathBuf, text: String, written: &mut Vec<PathBuf>| -> Result<(), String> {
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path);
        Ok(())
    };
    let mut written = Vec::new();
    if write_json {
        let json = serde_json::to_string_pretty(results).map_err(|e| format!("encoding results: {e}"))?;
        put(json_path.to_path_buf(), json + "\n", &mut written)?;
    }
    put(json_path.with_extension("md"), markdown(results), &mut written)?;
    for t in &results.settings.tests {
        let svg = chart::svg(t, &results.settings.servers, &results.summaries);
        put(dir.join(chart::file_name(&t.test)), svg, &mut written)?;
    }
    Ok(written)
}

/// Reads a results file written by an earlier bench.
pub fn read(path: &Path) -> Result<Results, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not a results file of this bench version ({e}); rerun the bench to get one",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A canned results file: two servers, json at two levels (one run with
    /// errors), queries at 20, plaintext pipelined.
    const CANNED: &str = include_str!("testdata/results.json");

    fn canned() -> Results {
        serde_json::from_str(CANNED).expect("canned results parse")
    }

    #[test]
    fn formats_counts() {
        assert_eq!(count(0.0), "0");
        assert_eq!(count(999.4), "999");
        assert_eq!(count(1000.0), "1,000");
        assert_eq!(count(1_234_567.8), "1,234,568");
    }

    #[test]
    fn markdown_from_canned_results() {
        let results = canned();
        let md = markdown(&results);
        // Header: the levels of each test.
        assert!(md.contains("- json: 16, 256 connections\n"), "{md}");
        assert!(md.contains("- queries: 20 queries per request at 256 connections\n"), "{md}");
        assert!(md.contains("- plaintext: 256 connections, pipeline depth 16\n"), "{md}");
        // One row per (level, server), the level first, ratios per level.
        assert!(md.contains("## json\n\n![json: requests/s by connections](json.svg)\n"), "{md}");
        assert!(md.contains("| connections | server | req/s | vs floor |"), "{md}");
        assert!(md.contains("| 16 | floor | 100,000 | 1.00× |"), "{md}");
        assert!(md.contains("| 16 | peregrine | 80,000 | 0.80× |"), "{md}");
        assert!(md.contains("| 256 | peregrine | 150,000 (140,000–160,000) | 0.75× |"), "{md}");
        assert!(md.contains("| 20 | peregrine | 9,000 | — |"), "{md}");
        // The errored run is marked and listed.
        assert!(
            md.contains(
                "| 256 | floor | 200,000 | 1.00× | 400,000 | 1.00× | 0.50 ms | 2.00 ms | 2.0 MiB | 1/2 ⚠ |"
            ),
            "{md}"
        );
        assert!(md.contains("- floor at 256 conns, round 2: 3 non-2xx/3xx"), "{md}");
        assert!(md.contains("## plaintext (pipeline depth 16)\n"), "{md}");
        assert!(md.contains("latency is not reported for pipelined runs"), "{md}");
    }

    #[test]
    fn the_report_says_which_database_the_servers_were_given() {
        let mut results = canned();
        // The canned file predates the field: nothing is claimed either way.
        assert_eq!(results.settings.database, Database::Unrecorded);
        let md = markdown(&results);
        assert!(!md.contains("DATABASE_URL"), "{md}");

        results.settings.database = Database::Unset;
        let md = markdown(&results);
        assert!(md.contains("**Warning: DATABASE_URL is not set, so the database tests ran"), "{md}");

        results.settings.database = Database::Url(hide_password(
            "postgres://benchmarkdbuser:benchmarkdbpass@127.0.0.1:5432/hello_world",
        ));
        let md = markdown(&results);
        assert!(
            md.contains(
                "were given `DATABASE_URL=postgres://benchmarkdbuser:***@127.0.0.1:5432/hello_world`"
            ),
            "{md}"
        );
        assert!(!md.contains("benchmarkdbpass"), "{md}");
    }

    #[test]
    fn hides_only_the_password_of_a_database_url() {
        assert_eq!(hide_password("postgres://u:p@h:1/db"), "postgres://u:***@h:1/db");
        assert_eq!(hide_password("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(hide_password("postgres://h/db?x=a@b"), "postgres://h/db?x=a@b");
        assert_eq!(hide_password("postgres://u:p:q@h"), "postgres://u:***@h");
        assert_eq!(hide_password("sqlite::memory:"), "sqlite::memory:");
    }

    #[test]
    fn composite_from_canned_results() {
        let mut results = canned();
        // Recompute rather than trust the canned numbers.
        results.composite = composite::compute(&results.settings.servers, &results.summaries);
        let c = &results.composite;
        assert_eq!(c.tests, ["json", "queries", "plaintext"]);
        assert_eq!(c.missing_tests, ["db", "fortunes", "updates"]);
        // floor: best json and plaintext, no queries result.
        // peregrine: json 150k/200k = 75, queries 100, plaintext 1M/2M = 50.
        let (floor, peregrine) = (&c.servers[0], &c.servers[1]);
        assert_eq!(floor.score, 100.0 + 75.0);
        assert_eq!(floor.missing, ["queries"]);
        assert_eq!(peregrine.score, 75.0 + 75.0 + 37.5);
        let md = markdown(&results);
        assert!(
            md.contains("| server | score | of 250 | json (×1) | queries (×0.75) | plaintext (×0.75) |"),
            "{md}"
        );
        assert!(md.contains("| floor | 175.0 | 70.0% | 100.0 | — | 100.0 |"), "{md}");
        assert!(md.contains("| peregrine | 187.5 | 75.0% | 75.0 | 100.0 | 50.0 |"), "{md}");
        assert!(
            md.contains("Not in the score (not run, or no 20-query level): db, fortunes, updates."),
            "{md}"
        );
        assert!(md.contains("`floor` has no clean result for queries"), "{md}");
        let json = serde_json::to_value(&results).expect("serializes");
        assert_eq!(json["composite"]["servers"][1]["score"], 187.5);
    }

    #[test]
    fn client_figures_get_their_own_table() {
        let mut results = canned();
        assert!(!markdown(&results).contains("req per client CPU-s"));
        let arena = results.summaries.iter_mut().find(|s| s.test == "json").expect("json rows");
        arena.kernel_cpu_share = Some(0.774);
        arena.requests_per_client_cpu_second = Some(250_000.0);
        arena.bytes_per_response = Some(1342.4);
        let md = markdown(&results);
        assert!(
            md.contains(
                "| connections | server | server CPU in kernel | req per client CPU-s | bytes/response |"
            ),
            "{md}"
        );
        assert!(md.contains("| 77% | 250,000 | 1,342 |"), "{md}");
    }

    #[test]
    fn database_figures_get_their_own_table() {
        let mut results = canned();
        assert!(!markdown(&results).contains("db CPU share"));
        let row = results.summaries.iter_mut().find(|s| s.test == "json").expect("json rows");
        row.db_cpu_seconds = Some(1.234);
        row.db_cpu_share = Some(0.4);
        row.requests_per_server_and_db_cpu_second = Some(12_345.0);
        let md = markdown(&results);
        assert!(
            md.contains("| connections | server | db CPU-s | db CPU share | req per server+db CPU-s |"),
            "{md}"
        );
        assert!(md.contains("| 1.23 | 40% | 12,345 |"), "{md}");

        let mut run = results.runs[0].clone();
        let m = run.measurement.as_mut().expect("measured");
        m.db_cpu_seconds = Some(m.cpu_seconds);
        let line = progress_line(&run, 2, &results.settings.tests[0]);
        assert!(line.contains("db CPU share 50%"), "{line}");
    }

    #[test]
    fn progress_lines_name_the_level() {
        let results = canned();
        let json = &results.settings.tests[0];
        let errored = results.runs.iter().find(|r| r.problem().is_some()).expect("canned has one");
        let line = progress_line(errored, 2, json);
        assert!(line.contains("256 conns") && line.contains("ERRORS: 3 non-2xx"), "{line}");
        assert_eq!(short_result(errored), "floor had errors");
    }

    #[test]
    fn writes_report_and_charts_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("peregrine-lab-report-{}", std::process::id()));
        let json_path = dir.join("results.json");
        let written = write(&json_path, &canned(), true).expect("writes");
        let names: Vec<String> =
            written.iter().filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned())).collect();
        assert_eq!(names, ["results.json", "results.md", "json.svg", "queries.svg", "plaintext.svg"]);
        let back = read(&json_path).expect("reads back");
        assert_eq!(back.summaries, canned().summaries);
        std::fs::write(&json_path, "{\"settings\": {}}").expect("overwrite");
        let err = read(&json_path).expect_err("not a results file");
        assert!(err.contains("not a results file"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
