//! The comparison table: one per benchmark group, one row per benchmark,
//! base and head side by side.
//!
//! Times are criterion's mean per iteration ± half the width of its
//! confidence interval (95% unless configured otherwise). The change column
//! says `noise` whenever the two intervals overlap: criterion's bootstrap
//! cannot tell such a pair apart, whatever the ratio says. Tables are
//! Markdown with padded columns, so they read in a terminal and paste into a
//! pull request unchanged.

use super::criterion::{Alloc, BenchResult};
use std::fmt::Write as _;

/// One benchmark at both revisions (either may be missing).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub base: Option<BenchResult>,
    pub head: Option<BenchResult>,
}

/// Pairs results by id and groups them, groups and rows sorted by name.
pub fn pair(base: &[BenchResult], head: &[BenchResult]) -> Vec<(String, Vec<Row>)> {
    let mut groups: Vec<(String, Vec<Row>)> = Vec::new();
    let mut ids: Vec<(&str, &str, &str)> =
        base.iter().chain(head).map(|r| (r.group.as_str(), r.name.as_str(), r.full_id.as_str())).collect();
    ids.sort();
    ids.dedup();
    for (group, name, full_id) in ids {
        let row = Row {
            name: name.to_string(),
            base: base.iter().find(|r| r.full_id == full_id).cloned(),
            head: head.iter().find(|r| r.full_id == full_id).cloned(),
        };
        match groups.last_mut() {
            Some((g, rows)) if g == group => rows.push(row),
            _ => groups.push((group.to_string(), vec![row])),
        }
    }
    groups
}

/// A number with three significant digits for the magnitudes times take.
fn sig3(value: f64) -> String {
    match value.abs() {
        v if v < 10.0 => format!("{value:.2}"),
        v if v < 100.0 => format!("{value:.1}"),
        _ => format!("{value:.0}"),
    }
}

/// The unit for a time in nanoseconds: (divisor, suffix).
fn unit(ns: f64) -> (f64, &'static str) {
    match ns {
        v if v < 1e3 => (1.0, "ns"),
        v if v < 1e6 => (1e3, "µs"),
        v if v < 1e9 => (1e6, "ms"),
        _ => (1e9, "s"),
    }
}

/// `25.1 ns ± 1.62`: the mean, then half the interval's width, in the
/// mean's unit.
pub fn format_time(r: &BenchResult) -> String {
    let t = r.time;
    let (div, suffix) = unit(t.mean);
    let half = (t.upper - t.lower) / 2.0;
    format!("{} {suffix} ± {}", sig3(t.mean / div), sig3(half / div))
}

/// head / base of the means.
pub fn ratio(row: &Row) -> Option<f64> {
    let (base, head) = (row.base.as_ref()?, row.head.as_ref()?);
    (base.time.mean > 0.0).then(|| head.time.mean / base.time.mean)
}

/// `noise` when the intervals overlap, else `faster` or `slower` with the
/// change in percent; `new` or `gone` when one side lacks the benchmark.
pub fn change(row: &Row) -> String {
    match (&row.base, &row.head, ratio(row)) {
        (Some(b), Some(h), _) if b.time.overlaps(&h.time) => "noise".into(),
        (Some(_), Some(_), Some(r)) if r < 1.0 => format!("faster {:.1}%", (r - 1.0) * 100.0),
        (Some(_), Some(_), Some(r)) => format!("slower +{:.1}%", (r - 1.0) * 100.0),
        (Some(_), Some(_), None) => "?".into(),
        (None, Some(_), _) => "new".into(),
        (Some(_), None, _) => "gone".into(),
        (None, None, _) => String::new(),
    }
}

fn bytes(alloc: Option<Alloc>) -> String {
    match alloc {
        None => "-".into(),
        Some(a) if a.bytes_per_iter.fract() == 0.0 => {
            format!("{} B", crate::rig::stats::count(a.bytes_per_iter))
        }
        Some(a) => format!("{:.1} B", a.bytes_per_iter),
    }
}

/// `-` when neither side reported allocations, else `base → head`.
pub fn alloc_cell(row: &Row) -> String {
    let base = row.base.as_ref().and_then(|r| r.alloc);
    let head = row.head.as_ref().and_then(|r| r.alloc);
    if base.is_none() && head.is_none() {
        return "-".into();
    }
    format!("{} → {}", bytes(base), bytes(head))
}

/// Renders the cells as a Markdown table with padded columns.
fn table(header: &[String], rows: &[Vec<String>], right_aligned: &[bool]) -> String {
    let width = |i: usize| {
        rows.iter().map(|r| r[i].chars().count()).chain([header[i].chars().count(), 3]).max().unwrap_or(3)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: &[String]| -> String {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if right_aligned[i] {
                    format!("{c:>w$}", w = widths[i])
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        format!("| {} |", padded.join(" | "))
    };
    let mut out = line(header) + "\n";
    let rule: Vec<String> = widths
        .iter()
        .zip(right_aligned)
        .map(|(w, right)| if *right { format!("{}:", "-".repeat(w + 1)) } else { "-".repeat(w + 2) })
        .collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for r in rows {
        let _ = writeln!(out, "{}", line(r));
    }
    out
}

/// All groups' tables; `base` and `head` label the time columns (e.g. the
/// revision and its short hash).
pub fn render(groups: &[(String, Vec<Row>)], base: &str, head: &str) -> String {
    let header: Vec<String> = [
        "benchmark".to_string(),
        format!("base {base}"),
        format!("head {head}"),
        "head/base".into(),
        "change".into(),
        "alloc/iter (base → head)".into(),
    ]
    .into();
    let right = [false, true, true, true, false, true];
    let mut out = String::new();
    for (group, rows) in groups {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|row| {
                vec![
                    row.name.clone(),
                    row.base.as_ref().map_or("-".into(), format_time),
                    row.head.as_ref().map_or("-".into(), format_time),
                    ratio(row).map_or("-".into(), |r| format!("{r:.3}×")),
                    change(row),
                    alloc_cell(row),
                ]
            })
            .collect();
        let _ = writeln!(out, "## {group}\n");
        out.push_str(&table(&header, &cells, &right));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ab::criterion::Estimate;

    fn squash(line: &str) -> String {
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn result(full_id: &str, mean: f64, half: f64, alloc: Option<f64>) -> BenchResult {
        let (group, name) = full_id.split_once('/').unwrap_or((full_id, full_id));
        BenchResult {
            group: group.into(),
            name: name.into(),
            full_id: full_id.into(),
            time: Estimate { mean, lower: mean - half, upper: mean + half, confidence: 0.95 },
            alloc: alloc.map(|b| Alloc { bytes_per_iter: b, allocs_per_iter: None }),
        }
    }

    #[test]
    fn formats_times_in_fitting_units() {
        assert_eq!(format_time(&result("g/a", 25.144, 1.62, None)), "25.1 ns ± 1.62");
        assert_eq!(format_time(&result("g/a", 1_530.0, 20.0, None)), "1.53 µs ± 0.02");
        assert_eq!(format_time(&result("g/a", 250_000_000.0, 5e6, None)), "250 ms ± 5.00");
        assert_eq!(format_time(&result("g/a", 2.5e9, 1e8, None)), "2.50 s ± 0.10");
    }

    #[test]
    fn changes_and_noise() {
        let row = |b: Option<BenchResult>, h: Option<BenchResult>| Row { name: "x".into(), base: b, head: h };
        let base = result("g/x", 100.0, 2.0, None);
        assert_eq!(change(&row(Some(base.clone()), Some(result("g/x", 103.0, 2.0, None)))), "noise");
        assert_eq!(change(&row(Some(base.clone()), Some(result("g/x", 90.0, 2.0, None)))), "faster -10.0%");
        assert_eq!(change(&row(Some(base.clone()), Some(result("g/x", 125.0, 2.0, None)))), "slower +25.0%");
        assert_eq!(change(&row(None, Some(base.clone()))), "new");
        assert_eq!(change(&row(Some(base.clone()), None)), "gone");
        assert_eq!(ratio(&row(Some(base.clone()), Some(result("g/x", 50.0, 1.0, None)))), Some(0.5));
        assert_eq!(ratio(&row(Some(base), None)), None);
    }

    #[test]
    fn renders_grouped_tables() {
        let base = vec![
            result("parse/tfb_plaintext", 100.0, 2.0, Some(0.0)),
            result("parse/headers_20", 400.0, 4.0, None),
            result("date/format_block", 50.0, 1.0, None),
        ];
        let head = vec![
            result("parse/tfb_plaintext", 80.0, 2.0, Some(0.0)),
            result("parse/headers_20", 401.0, 4.0, Some(1536.0)),
            result("writer/owned_json", 1200.0, 30.0, None),
        ];
        let groups = pair(&base, &head);
        let names: Vec<&str> = groups.iter().map(|(g, _)| g.as_str()).collect();
        assert_eq!(names, ["date", "parse", "writer"]);
        let text = render(&groups, "main~1 (abc1234)", "HEAD (def5678)");
        let parse = "\
## parse

| benchmark     | base main~1 (abc1234) | head HEAD (def5678) | head/base | change        | alloc/iter (base → head) |
|---------------|----------------------:|--------------------:|----------:|---------------|-------------------------:|
| headers_20    |         400 ns ± 4.00 |       401 ns ± 4.00 |    1.002× | noise         |              - → 1,536 B |
| tfb_plaintext |         100 ns ± 2.00 |      80.0 ns ± 2.00 |    0.800× | faster -20.0% |                0 B → 0 B |
";
        assert!(text.contains(parse), "{text}");
        let squashed: Vec<String> = text.lines().map(squash).collect();
        let has = |line: &str| squashed.iter().any(|l| l == line);
        assert!(has("| owned_json | - | 1.20 µs ± 0.03 | - | new | - |"), "{text}");
        assert!(has("| format_block | 50.0 ns ± 1.00 | - | - | gone | - |"), "{text}");
    }
}
