//! The load levels each test runs at, after TechEmpower's benchmark.
//!
//! TFB measures every test at several levels and publishes the best (or, for
//! the multi-query tests, the 20-query) result:
//!
//! | test | TFB levels | here, by default |
//! |---|---|---|
//! | json, db, fortunes | 16, 32, 64, 128, 256, 512 connections | the same |
//! | plaintext | 256, 1024, 4096, 16384 connections, pipeline depth 16 | 256 and 1024 connections, depth 16 |
//! | queries, updates | 1, 5, 10, 15, 20 queries at 512 connections | the same counts at 256 connections |
//! | cached | count 1, 10, 20, 50, 100 at 512 connections | the same counts at 256 connections |
//!
//! Plaintext stops at 1024 connections because this lab gives wrk one core
//! and the server one core: at 4096 and more connections wrk itself, not the
//! server, is what gets measured, and each connection still costs the server
//! memory for nothing. The counted tests use 256 connections for the same
//! reason (and because that is what our own tables have always used).
//!
//! `--quick` runs one level per test: 256 connections, 20 queries, count 20,
//! and plaintext at 256 connections pipelined. `--connections N` replaces the
//! connection levels with N (and sets the connections of the counted tests);
//! `--queries N` replaces the query and count levels with N.

use crate::rig::arena::{self, Profile};
use serde::{Deserialize, Serialize};

/// What varies between a test's levels, and so what a chart's x-axis shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// Open connections.
    Concurrency,
    /// Database queries per request (`?queries=N`).
    Queries,
    /// Cached items per request (`?count=N`).
    Count,
}

impl Axis {
    /// The axis title of charts and the level column of tables.
    pub fn title(self) -> &'static str {
        match self {
            Axis::Concurrency => "connections",
            Axis::Queries => "queries per request",
            Axis::Count => "cached items per request",
        }
    }

    /// The number this axis reads from a level.
    pub fn value(self, level: &Level) -> u32 {
        match self {
            Axis::Concurrency => level.connections,
            Axis::Queries | Axis::Count => level.count.unwrap_or(0),
        }
    }
}

/// One load level: how wrk loads the server in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Level {
    /// Connections wrk keeps open.
    pub connections: u32,
    /// The count appended to paths ending in `=` (`?queries=`, `?count=`);
    /// absent for tests whose paths take no count.
    pub count: Option<u32>,
    /// Requests per write; 1 means not pipelined.
    pub pipeline: u32,
}

/// The levels one test runs at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestLevels {
    pub test: String,
    pub axis: Axis,
    pub levels: Vec<Level>,
}

impl TestLevels {
    /// A short label of one level for progress lines and logs, e.g.
    /// `256 conns`, `256 conns ×16`, `20 queries`, `count 50`.
    pub fn label(&self, level: &Level) -> String {
        match self.axis {
            Axis::Concurrency if level.pipeline > 1 => {
                format!("{} conns ×{}", level.connections, level.pipeline)
            }
            Axis::Concurrency => format!("{} conns", level.connections),
            Axis::Queries => format!("{} queries", level.count.unwrap_or(0)),
            Axis::Count => format!("count {}", level.count.unwrap_or(0)),
        }
    }

    /// The level's value on this test's axis, as printed in tables.
    pub fn value(&self, level: &Level) -> u32 {
        self.axis.value(level)
    }
}

/// TFB's concurrency levels for json, db and fortunes.
pub const CONCURRENCY: [u32; 6] = [16, 32, 64, 128, 256, 512];
/// Plaintext levels this 2-core lab can drive (TFB: 256 to 16384).
pub const PLAINTEXT_CONCURRENCY: [u32; 2] = [256, 1024];
/// TFB's query counts for queries and updates.
pub const QUERIES: [u32; 5] = [1, 5, 10, 15, 20];
/// TFB's item counts for cached queries.
pub const CACHED_COUNTS: [u32; 5] = [1, 10, 20, 50, 100];
/// Connections for every `--quick` level and for the counted tests.
pub const DEFAULT_CONNECTIONS: u32 = 256;
/// The count `--quick` uses, and the one TFB scores queries and updates at.
pub const DEFAULT_COUNT: u32 = 20;

/// What the command line says about levels.
#[derive(Debug, Clone, Copy, Default)]
pub struct LevelOptions {
    pub quick: bool,
    /// `--connections`: the only connection level, and the counted tests'
    /// connections.
    pub connections: Option<u32>,
    /// `--queries`: the only query or count level.
    pub queries: Option<u32>,
    /// `--pipeline`: plaintext's requests per write (1 disables).
    pub pipeline: u32,
}

/// The levels of `test`. `counted` says whether the servers' paths for it
/// end in `=`, which decides the axis of tests TFB does not define.
pub fn plan(test: &str, counted: bool, opts: &LevelOptions) -> TestLevels {
    let fixed_connections = opts.connections.unwrap_or(DEFAULT_CONNECTIONS);
    let counts = |tfb: &[u32]| -> Vec<u32> {
        match (opts.queries, opts.quick) {
            (Some(n), _) => vec![n],
            (None, true) => vec![DEFAULT_COUNT],
            (None, false) => tfb.to_vec(),
        }
    };
    let concurrency = |tfb: &[u32]| -> Vec<u32> {
        match (opts.connections, opts.quick) {
            (Some(n), _) => vec![n],
            (None, true) => vec![DEFAULT_CONNECTIONS],
            (None, false) => tfb.to_vec(),
        }
    };
    let by_count = |axis: Axis, tfb: &[u32]| TestLevels {
        test: test.to_string(),
        axis,
        levels: counts(tfb)
            .into_iter()
            .map(|n| Level { connections: fixed_connections, count: Some(n), pipeline: 1 })
            .collect(),
    };
    // A path ending in `=` still needs a count when connections vary.
    let path_count = counted.then(|| opts.queries.unwrap_or(DEFAULT_COUNT));
    let by_connections = |tfb: &[u32], pipeline: u32| TestLevels {
        test: test.to_string(),
        axis: Axis::Concurrency,
        levels: concurrency(tfb)
            .into_iter()
            .map(|c| Level { connections: c, count: path_count, pipeline })
            .collect(),
    };
    match test {
        "plaintext" => by_connections(&PLAINTEXT_CONCURRENCY, opts.pipeline.max(1)),
        "json" | "db" | "fortunes" => by_connections(&CONCURRENCY, 1),
        "queries" | "updates" => by_count(Axis::Queries, &QUERIES),
        "cached" => by_count(Axis::Count, &CACHED_COUNTS),
        // A test TFB does not define (an HttpArena extra, say) runs at one
        // level: the servers file says nothing about what should vary.
        _ if counted => by_count(Axis::Queries, &[DEFAULT_COUNT]),
        _ => by_connections(&[DEFAULT_CONNECTIONS], 1),
    }
}

/// The prefix of an HttpArena profile's test name in records and reports
/// (`arena-json` is the profile, `json` the TFB test).
pub const ARENA_PREFIX: &str = "arena-";

/// The profile a test name stands for, if it is one.
pub fn arena_profile(test: &str) -> Option<&'static Profile> {
    arena::find(test.strip_prefix(ARENA_PREFIX)?)
}

/// Whether `test` (a TFB test or an HttpArena profile) sends requests that
/// reach the database, so that its runs read PostgreSQL's CPU time too.
/// `cached` is among them: its answers come from a cache the server fills
/// from the database, and the table it reports shows how little of each
/// request still reaches PostgreSQL.
pub fn uses_database(test: &str) -> bool {
    match arena_profile(test) {
        Some(profile) => profile.uses_database(),
        None => matches!(test, "db" | "queries" | "fortunes" | "updates" | "cached"),
    }
}

/// The levels of an HttpArena profile: HttpArena's connection counts capped
/// at `max_connections`, what the open-files limit allows
/// ([`Profile::connections`]), the first of them with `--quick`, or
/// `--connections N`; the profile's own pipeline depth.
pub fn arena_plan(profile: &Profile, opts: &LevelOptions, max_connections: u32) -> TestLevels {
    let connections = match (opts.connections, opts.quick) {
        (Some(n), _) => vec![n],
        (None, true) => profile.connections(max_connections)[..1].to_vec(),
        (None, false) => profile.connections(max_connections),
    };
    TestLevels {
        test: format!("{ARENA_PREFIX}{}", profile.name),
        axis: Axis::Concurrency,
        levels: connections
            .into_iter()
            .map(|c| Level { connections: c, count: None, pipeline: profile.pipeline as u32 })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> LevelOptions {
        LevelOptions { pipeline: 16, ..LevelOptions::default() }
    }

    fn values(t: &TestLevels) -> Vec<u32> {
        t.levels.iter().map(|l| t.value(l)).collect()
    }

    #[test]
    fn tfb_levels_by_default() {
        let json = plan("json", false, &opts());
        assert_eq!(json.axis, Axis::Concurrency);
        assert_eq!(values(&json), CONCURRENCY);
        assert!(json.levels.iter().all(|l| l.pipeline == 1 && l.count.is_none()));

        let plaintext = plan("plaintext", false, &opts());
        assert_eq!(values(&plaintext), [256, 1024]);
        assert!(plaintext.levels.iter().all(|l| l.pipeline == 16));
        assert_eq!(plaintext.label(&plaintext.levels[1]), "1024 conns ×16");

        let queries = plan("queries", true, &opts());
        assert_eq!(values(&queries), QUERIES);
        assert!(queries.levels.iter().all(|l| l.connections == 256));
        assert_eq!(queries.label(&queries.levels[0]), "1 queries");

        let cached = plan("cached", true, &opts());
        assert_eq!((cached.axis, values(&cached)), (Axis::Count, CACHED_COUNTS.to_vec()));
    }

    #[test]
    fn quick_runs_one_level_each() {
        let quick = LevelOptions { quick: true, ..opts() };
        for test in ["json", "db", "fortunes", "plaintext", "queries", "updates", "cached"] {
            let t = plan(test, test == "queries", &quick);
            assert_eq!(t.levels.len(), 1, "{test}");
            let level = t.levels[0];
            assert_eq!(level.connections, 256, "{test}");
        }
        assert_eq!(plan("updates", true, &quick).levels[0].count, Some(20));
        assert_eq!(plan("cached", true, &quick).levels[0].count, Some(20));
        assert_eq!(plan("plaintext", false, &quick).levels[0].pipeline, 16);
    }

    #[test]
    fn flags_override_levels() {
        let o = LevelOptions { connections: Some(64), queries: Some(5), ..opts() };
        assert_eq!(values(&plan("json", false, &o)), [64]);
        assert_eq!(values(&plan("plaintext", false, &o)), [64]);
        let q = plan("queries", true, &o);
        assert_eq!(q.levels, [Level { connections: 64, count: Some(5), pipeline: 1 }]);
        // --pipeline 1 turns pipelining off.
        let p = plan("plaintext", false, &LevelOptions { pipeline: 1, ..opts() });
        assert!(p.levels.iter().all(|l| l.pipeline == 1));
    }

    #[test]
    fn counted_paths_get_a_count_at_every_level() {
        let json = plan("json", true, &LevelOptions { queries: Some(3), ..opts() });
        assert!(json.levels.iter().all(|l| l.count == Some(3)));
        assert_eq!(values(&json), CONCURRENCY);
    }

    #[test]
    fn arena_profiles_run_at_capped_connection_counts() {
        let pipelined = arena::find("pipelined").unwrap();
        let uncapped = arena_plan(pipelined, &opts(), 20_000);
        assert_eq!(values(&uncapped), [512, 4096]);
        let t = arena_plan(pipelined, &opts(), 1024);
        assert_eq!(t.test, "arena-pipelined");
        assert_eq!(t.levels, [512, 1024].map(|c| Level { connections: c, count: None, pipeline: 16 }));
        assert_eq!(t.label(&t.levels[0]), "512 conns ×16");
        let quick = LevelOptions { quick: true, ..opts() };
        assert_eq!(values(&arena_plan(arena::find("upload").unwrap(), &quick, 1024)), [32]);
        let fixed = LevelOptions { connections: Some(64), ..opts() };
        assert_eq!(values(&arena_plan(arena::find("static").unwrap(), &fixed, 1024)), [64]);
        assert_eq!(arena_profile("arena-json").map(|p| p.name), Some("json"));
        assert!(arena_profile("json").is_none() && arena_profile("arena-nope").is_none());
    }

    #[test]
    fn unknown_tests_run_once() {
        assert_eq!(values(&plan("upload", false, &opts())), [256]);
        let counted = plan("extra", true, &opts());
        assert_eq!((counted.axis, values(&counted)), (Axis::Queries, vec![20]));
    }

    #[test]
    fn database_tests_are_known() {
        for test in
            ["db", "queries", "fortunes", "updates", "cached", "arena-async-db", "arena-crud", "arena-api-4"]
        {
            assert!(uses_database(test), "{test}");
        }
        for test in ["plaintext", "json", "arena-json", "arena-baseline", "arena-static", "arena-db"] {
            assert!(!uses_database(test), "{test}");
        }
    }
}
