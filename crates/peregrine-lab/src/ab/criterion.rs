//! Reading what criterion leaves on disk after `cargo bench`.
//!
//! For each benchmark criterion writes, under its output directory
//! (`$CRITERION_HOME`, else `<target>/criterion`),
//! `<group>/<function>[/<value>]/new/` with `benchmark.json` (the ids) and
//! `estimates.json` (bootstrap estimates in nanoseconds per iteration, each
//! with a confidence interval), and copies them to `<baseline>/` beside
//! `new/` when run with `--save-baseline <baseline>`. The optional
//! `alloc.json` beside those directories is this lab's own (see the module
//! docs of `ab`). Parsing is separate from the directory walk so it is tested
//! on canned files.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Mean time per iteration with its confidence interval, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub lower: f64,
    pub upper: f64,
    /// The interval's confidence level, e.g. 0.95.
    pub confidence: f64,
}

impl Estimate {
    /// Whether the two confidence intervals share any point.
    pub fn overlaps(&self, other: &Estimate) -> bool {
        self.lower <= other.upper && other.lower <= self.upper
    }
}

/// Allocation counts the bench reported for one benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Alloc {
    pub bytes_per_iter: f64,
    #[serde(default)]
    pub allocs_per_iter: Option<f64>,
}

/// One benchmark's result at one revision.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// Criterion's group id (the benchmark's own id if it has no group).
    pub group: String,
    /// The id within the group: function id, then `/value` if any.
    pub name: String,
    /// `group/name`, what criterion prints.
    pub full_id: String,
    pub time: Estimate,
    pub alloc: Option<Alloc>,
}

#[derive(Deserialize)]
struct RawInterval {
    confidence_level: f64,
    lower_bound: f64,
    upper_bound: f64,
}

#[derive(Deserialize)]
struct RawStat {
    confidence_interval: RawInterval,
    point_estimate: f64,
}

#[derive(Deserialize)]
struct RawEstimates {
    mean: RawStat,
}

#[derive(Deserialize)]
struct RawId {
    group_id: String,
    function_id: Option<String>,
    value_str: Option<String>,
    full_id: String,
}

/// Parses `estimates.json`: the mean and its confidence interval.
pub fn parse_estimates(text: &str) -> Result<Estimate, String> {
    let raw: RawEstimates =
        serde_json::from_str(text).map_err(|e| format!("not criterion estimates: {e}"))?;
    let m = raw.mean;
    let values = [m.point_estimate, m.confidence_interval.lower_bound, m.confidence_interval.upper_bound];
    if values.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return Err(format!("mean estimate is not a time: {values:?}"));
    }
    Ok(Estimate {
        mean: m.point_estimate,
        lower: m.confidence_interval.lower_bound,
        upper: m.confidence_interval.upper_bound,
        confidence: m.confidence_interval.confidence_level,
    })
}

/// Parses `benchmark.json` into (group, name within the group, full id).
pub fn parse_benchmark_id(text: &str) -> Result<(String, String, String), String> {
    let raw: RawId = serde_json::from_str(text).map_err(|e| format!("not a criterion benchmark id: {e}"))?;
    let name = match (raw.function_id, raw.value_str) {
        (Some(f), Some(v)) => format!("{f}/{v}"),
        (Some(f), None) => f,
        (None, Some(v)) => v,
        // A lone `bench_function` outside a group: the group is the id.
        (None, None) => raw.group_id.clone(),
    };
    Ok((raw.group_id, name, raw.full_id))
}

/// Parses an `alloc.json` written by the bench.
pub fn parse_alloc(text: &str) -> Result<Alloc, String> {
    let alloc: Alloc = serde_json::from_str(text)
        .map_err(|e| format!("expected {{\"bytes_per_iter\": N, \"allocs_per_iter\": M}}: {e}"))?;
    if !alloc.bytes_per_iter.is_finite() || alloc.bytes_per_iter < 0.0 {
        return Err(format!("bytes_per_iter is {}", alloc.bytes_per_iter));
    }
    Ok(alloc)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Reads one benchmark directory (the one holding `new/`), preferring the
/// `baseline` copy of each file over `new/`.
fn read_bench_dir(dir: &Path, baseline: &str) -> Result<BenchResult, String> {
    let pick = |file: &str| -> PathBuf {
        let saved = dir.join(baseline).join(file);
        if saved.is_file() {
            saved
        } else {
            dir.join("new").join(file)
        }
    };
    let estimates = pick("estimates.json");
    let time = parse_estimates(&read(&estimates)?).map_err(|e| format!("{}: {e}", estimates.display()))?;
    let id_file = pick("benchmark.json");
    let (group, name, full_id) =
        parse_benchmark_id(&read(&id_file)?).map_err(|e| format!("{}: {e}", id_file.display()))?;
    let alloc_file = dir.join("alloc.json");
    let alloc = if alloc_file.is_file() {
        Some(parse_alloc(&read(&alloc_file)?).map_err(|e| format!("{}: {e}", alloc_file.display()))?)
    } else {
        None
    };
    Ok(BenchResult { group, name, full_id, time, alloc })
}

/// Every benchmark under a criterion output directory, sorted by id.
pub fn collect(home: &Path, baseline: &str) -> Result<Vec<BenchResult>, String> {
    let mut results = Vec::new();
    walk(home, baseline, 0, &mut results)?;
    results.sort_by(|a, b| (&a.group, &a.name).cmp(&(&b.group, &b.name)));
    Ok(results)
}

fn walk(dir: &Path, baseline: &str, depth: usize, out: &mut Vec<BenchResult>) -> Result<(), String> {
    // group/function/value is three levels; anything deeper is not ours.
    if depth > 4 {
        return Ok(());
    }
    if dir.join("new").join("estimates.json").is_file() || dir.join(baseline).join("estimates.json").is_file()
    {
        out.push(read_bench_dir(dir, baseline)?);
        return Ok(());
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
    };
    let mut subdirs: Vec<PathBuf> =
        entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    subdirs.sort();
    for sub in subdirs {
        // criterion's HTML report lives in `report/` directories.
        if sub.file_name().is_some_and(|n| n == "report") {
            continue;
        }
        walk(&sub, baseline, depth + 1, out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real `estimates.json` from `cargo bench -p peregrine --bench http`.
    const ESTIMATES: &str = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":23.49577822623662,"upper_bound":26.73617683355448},"point_estimate":25.1441629186613,"standard_error":0.8255692448135018},"median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":24.40499104016762,"upper_bound":27.452435896067723},"point_estimate":25.802139547822946,"standard_error":0.7678252375663888},"median_abs_dev":{"confidence_interval":{"confidence_level":0.95,"lower_bound":2.763882849209075,"upper_bound":7.647043739847795},"point_estimate":5.679688181606865,"standard_error":1.3628122921389878},"slope":{"confidence_interval":{"confidence_level":0.95,"lower_bound":21.88901558683295,"upper_bound":25.168387986569737},"point_estimate":23.404768117065274,"standard_error":0.8353432756878251},"std_dev":{"confidence_interval":{"confidence_level":0.95,"lower_bound":4.607109182421663,"upper_bound":7.026272832914607},"point_estimate":5.912228059630246,"standard_error":0.6161356899922678}}"#;

    const BENCHMARK: &str = r#"{"group_id":"date","function_id":"copy_cached_block","value_str":null,"throughput":null,"full_id":"date/copy_cached_block","directory_name":"date/copy_cached_block","title":"date/copy_cached_block"}"#;

    #[test]
    fn parses_estimates() {
        let e = parse_estimates(ESTIMATES).expect("parses");
        assert_eq!(e.mean, 25.1441629186613);
        assert_eq!((e.lower, e.upper, e.confidence), (23.49577822623662, 26.73617683355448, 0.95));
        assert!(parse_estimates("{}").is_err());
        let negative = ESTIMATES.replace("25.1441629186613", "-1.0");
        assert!(parse_estimates(&negative).unwrap_err().contains("not a time"));
    }

    #[test]
    fn parses_ids() {
        assert_eq!(
            parse_benchmark_id(BENCHMARK),
            Ok(("date".into(), "copy_cached_block".into(), "date/copy_cached_block".into()))
        );
        let with_value = r#"{"group_id":"g","function_id":"f","value_str":"64","full_id":"g/f/64"}"#;
        assert_eq!(parse_benchmark_id(with_value).map(|t| t.1), Ok("f/64".into()));
        let lone = r#"{"group_id":"solo","function_id":null,"value_str":null,"full_id":"solo"}"#;
        assert_eq!(parse_benchmark_id(lone).map(|t| t.1), Ok("solo".into()));
        assert!(parse_benchmark_id("[]").is_err());
    }

    #[test]
    fn parses_alloc() {
        assert_eq!(
            parse_alloc(r#"{"bytes_per_iter": 48}"#),
            Ok(Alloc { bytes_per_iter: 48.0, allocs_per_iter: None })
        );
        assert_eq!(
            parse_alloc(r#"{"bytes_per_iter": 0, "allocs_per_iter": 0}"#).map(|a| a.allocs_per_iter),
            Ok(Some(0.0))
        );
        assert!(parse_alloc(r#"{"bytes": 48}"#).is_err());
        assert!(parse_alloc(r#"{"bytes_per_iter": -1}"#).is_err());
    }

    #[test]
    fn overlap() {
        let e = |lower, upper| Estimate { mean: (lower + upper) / 2.0, lower, upper, confidence: 0.95 };
        assert!(e(1.0, 3.0).overlaps(&e(2.0, 4.0)));
        assert!(e(2.0, 4.0).overlaps(&e(1.0, 3.0)));
        assert!(e(1.0, 2.0).overlaps(&e(2.0, 3.0)));
        assert!(!e(1.0, 2.0).overlaps(&e(2.5, 3.0)));
    }

    #[test]
    fn collects_a_criterion_tree() {
        let home = std::env::temp_dir().join(format!("peregrine-lab-ab-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let put = |rel: &str, text: &str| {
            let path = home.join(rel);
            std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        put("date/copy_cached_block/new/estimates.json", ESTIMATES);
        put("date/copy_cached_block/new/benchmark.json", BENCHMARK);
        // The saved baseline wins over new/.
        let faster = ESTIMATES.replace("25.1441629186613", "20.0");
        put("date/copy_cached_block/base/estimates.json", &faster);
        put("date/copy_cached_block/alloc.json", r#"{"bytes_per_iter": 0}"#);
        let other = BENCHMARK.replace("copy_cached_block", "format_block");
        put("date/format_block/new/estimates.json", ESTIMATES);
        put("date/format_block/new/benchmark.json", &other);
        put("report/index.html", "<html></html>");

        let results = collect(&home, "base").expect("collects");
        let names: Vec<&str> = results.iter().map(|r| r.full_id.as_str()).collect();
        assert_eq!(names, ["date/copy_cached_block", "date/format_block"]);
        assert_eq!(results[0].time.mean, 20.0);
        assert_eq!(results[0].alloc.map(|a| a.bytes_per_iter), Some(0.0));
        assert_eq!(results[1].time.mean, 25.1441629186613);
        assert_eq!(results[1].alloc, None);

        put("date/format_block/alloc.json", "{ nope");
        let err = collect(&home, "base").expect_err("bad alloc.json");
        assert!(err.contains("alloc.json"), "{err}");
        assert_eq!(collect(&home.join("missing"), "base"), Ok(Vec::new()));
        let _ = std::fs::remove_dir_all(&home);
    }
}
