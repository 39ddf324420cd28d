//! A TechEmpower-style composite score per server.
//!
//! TFB weighs its six test types and adds them up after normalising each to
//! the best framework in that test. What this module computes, exactly:
//!
//! 1. Each weighted test gets one number per server, its *result*: the best
//!    median requests/s over the levels run for json, db, fortunes and
//!    plaintext (TFB publishes each framework's peak over its concurrency
//!    levels); for queries and updates, the median at the 20-query level
//!    only (TFB scores those tests at 20 queries). Only clean rounds count
//!    (see `records`).
//! 2. Normalised result = 100 × result / the best result of any server in
//!    this run for that test. The best server scores 100 there.
//! 3. Score = Σ weight × normalised result, over the weighted tests run.
//!    Weights: json 1, db 0.75, queries 0.75, fortunes 1.5, updates 1.25,
//!    plaintext 0.75, so a server best at everything scores 600.
//!
//! Differences from TFB worth knowing: the field is only the servers of this
//! run (with the floor among them, every score is relative to the floor,
//! which answers every path with one fixed response); a test with no result
//! for a server adds 0 to its score and is listed as missing for it; a test
//! not run at all (or queries/updates without a 20-query level) is left out
//! of everyone's score and of the maximum, and listed as missing.

use super::records::Summary;
use serde::{Deserialize, Serialize};

/// TFB's weights, in TFB's order.
pub const WEIGHTS: [(&str, f64); 6] = [
    ("json", 1.0),
    ("db", 0.75),
    ("queries", 0.75),
    ("fortunes", 1.5),
    ("updates", 1.25),
    ("plaintext", 0.75),
];

/// The query count TFB scores queries and updates at.
pub const SCORED_QUERIES: u32 = 20;

/// The composite over all servers of one bench.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Composite {
    /// Weighted tests with a result from at least one server.
    pub tests: Vec<String>,
    /// Weighted tests without any result (not run, no 20-query level, or
    /// every run failed); they are left out of every score.
    pub missing_tests: Vec<String>,
    /// The score of a server best in every test of `tests`.
    pub max_score: f64,
    pub servers: Vec<ServerScore>,
}

/// One server's composite score and its parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerScore {
    pub server: String,
    pub score: f64,
    /// One entry per test in [`Composite::tests`].
    pub parts: Vec<Part>,
    /// Tests in [`Composite::tests`] where this server has no result.
    pub missing: Vec<String>,
}

/// One weighted test of one server's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub test: String,
    pub weight: f64,
    /// The requests/s that was scored (see the module docs).
    pub requests_per_sec: Option<f64>,
    /// 100 × requests_per_sec / the best server's.
    pub normalized: Option<f64>,
}

/// The requests/s a summary contributes to `test`'s result, if any.
fn scored_rps(test: &str, summary: &Summary) -> Option<f64> {
    if summary.test != test {
        return None;
    }
    if matches!(test, "queries" | "updates") && summary.level.count != Some(SCORED_QUERIES) {
        return None;
    }
    summary.requests_per_sec.map(|s| s.median)
}

/// Each server's result on `test`: its best scored requests/s.
fn result(test: &str, server: &str, summaries: &[Summary]) -> Option<f64> {
    summaries.iter().filter(|s| s.server == server).filter_map(|s| scored_rps(test, s)).reduce(f64::max)
}

/// Computes the composite for `servers` (in report order) from the summaries.
pub fn compute(servers: &[String], summaries: &[Summary]) -> Composite {
    let mut tests = Vec::new();
    let mut missing_tests = Vec::new();
    // (test, weight, best result of any server, each server's result)
    let mut columns = Vec::new();
    for (test, weight) in WEIGHTS {
        let results: Vec<Option<f64>> = servers.iter().map(|s| result(test, s, summaries)).collect();
        match results.iter().flatten().copied().reduce(f64::max) {
            Some(best) if best > 0.0 => {
                tests.push(test.to_string());
                columns.push((test, weight, best, results));
            }
            _ => missing_tests.push(test.to_string()),
        }
    }
    let max_score = 100.0 * columns.iter().map(|(_, w, _, _)| w).sum::<f64>();
    let servers = servers
        .iter()
        .enumerate()
        .map(|(i, server)| {
            let parts: Vec<Part> = columns
                .iter()
                .map(|(test, weight, best, results)| Part {
                    test: test.to_string(),
                    weight: *weight,
                    requests_per_sec: results[i],
                    normalized: results[i].map(|r| 100.0 * r / best),
                })
                .collect();
            ServerScore {
                server: server.clone(),
                score: parts.iter().filter_map(|p| Some(p.weight * p.normalized?)).sum(),
                missing: parts.iter().filter(|p| p.normalized.is_none()).map(|p| p.test.clone()).collect(),
                parts,
            }
        })
        .collect();
    Composite { tests, missing_tests, max_score, servers }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::levels::Level;

    fn summary(test: &str, server: &str, count: Option<u32>, rps: Option<f64>) -> Summary {
        Summary::single(test, Level { connections: 256, count, pipeline: 1 }, server, rps)
    }

    #[test]
    fn normalises_weighs_and_sums() {
        let servers = vec!["a".to_string(), "b".to_string()];
        let summaries = vec![
            // json: a's best level is 400, b's is 100 -> 100 and 25.
            summary("json", "a", None, Some(300.0)),
            summary("json", "a", None, Some(400.0)),
            summary("json", "b", None, Some(100.0)),
            // queries: only the 20-query level counts; b has 50 vs a's 100.
            summary("queries", "a", Some(1), Some(9999.0)),
            summary("queries", "a", Some(20), Some(100.0)),
            summary("queries", "b", Some(20), Some(50.0)),
            // fortunes: b failed.
            summary("fortunes", "a", None, Some(10.0)),
            summary("fortunes", "b", None, None),
            // updates without a 20-query level is not scored.
            summary("updates", "a", Some(5), Some(10.0)),
        ];
        let c = compute(&servers, &summaries);
        assert_eq!(c.tests, ["json", "queries", "fortunes"]);
        assert_eq!(c.missing_tests, ["db", "updates", "plaintext"]);
        assert_eq!(c.max_score, 100.0 * (1.0 + 0.75 + 1.5));
        let a = &c.servers[0];
        assert_eq!(a.score, 100.0 + 75.0 + 150.0);
        assert!(a.missing.is_empty());
        let b = &c.servers[1];
        assert_eq!(b.score, 25.0 + 0.75 * 50.0);
        assert_eq!(b.missing, ["fortunes"]);
        assert_eq!(b.parts[0].requests_per_sec, Some(100.0));
        assert_eq!(b.parts[0].normalized, Some(25.0));
    }

    #[test]
    fn nothing_run_scores_nothing() {
        let c = compute(&["a".to_string()], &[summary("cached", "a", Some(20), Some(5.0))]);
        assert!(c.tests.is_empty());
        assert_eq!(c.missing_tests.len(), 6);
        assert_eq!((c.max_score, c.servers[0].score), (0.0, 0.0));
    }
}
