//! The report's answer to "how far ahead of the best other server is it?":
//! one server (the subject, `--subject`) against, test by test and level by
//! level, whichever of its peers did best on each figure, and against the
//! bare floor responders.
//!
//! Why a section of its own: the per-test tables give ratios to one
//! baseline only, and the best peer differs from test to test (may-minihttp
//! on `/db`, xitca-web on `/json`, actix on `/queries`), so a lead over "the
//! best of them" had to be worked out by hand from several tables, where a
//! slip goes unnoticed.
//!
//! Who counts as a peer: every server in the run except the subject, its
//! own variants (names that start with the subject's name and a `-`, such
//! as `peregrine-epoll`: other builds of the same server, not competitors)
//! and the floors. Floors are the bare responders, which answer without
//! doing the work a framework does (no routing, canned database answers),
//! so they bound what any server can reach rather than compete.
//!
//! The best peer is chosen on each figure apart (requests/s, requests per
//! server CPU-second) by its median over clean rounds. Beside the ratio of
//! medians goes the median over rounds of the same ratio taken within each
//! round, which pairs runs made seconds apart (see
//! [`Summary::round_ratio_requests_per_sec`]).

use super::levels::TestLevels;
use super::records::{round_ratio_samples, round_ratios, RunRecord, Summary};
use crate::rig::stats::{count, median, median_interval, ratio, times, times_interval, MedianInterval};
use std::fmt::Write as _;

/// Who the section compares: the subject, its peers and the floors, all
/// from the run's servers.
#[derive(Debug, Clone, PartialEq)]
pub struct Sides {
    pub subject: String,
    pub peers: Vec<String>,
    pub floors: Vec<String>,
}

/// Whether `name` is one of the lab's floor responders by its name:
/// `floor` or `floor-<engine>` (the lab's own), `c-floor` or
/// `c-floor-<engine>` (the C reference responders in `lab/floors/`).
pub fn is_floor_name(name: &str) -> bool {
    let lab_floor = |n: &str| n == "floor" || n.starts_with("floor-");
    lab_floor(name) || name.strip_prefix("c-").is_some_and(lab_floor)
}

impl Sides {
    /// Splits `servers` around `subject`. `floors` names the floor
    /// responders; `None` takes them by name ([`is_floor_name`]).
    pub fn split(servers: &[String], subject: &str, floors: Option<&[String]>) -> Result<Sides, String> {
        if !servers.iter().any(|s| s == subject) {
            return Err(format!("--subject `{subject}` is not among the servers of this run"));
        }
        let floors: Vec<String> = match floors {
            Some(named) => {
                if let Some(unknown) = named.iter().find(|f| !servers.contains(f)) {
                    return Err(format!("--floors: `{unknown}` is not among the servers of this run"));
                }
                named.to_vec()
            }
            None => servers.iter().filter(|s| is_floor_name(s)).cloned().collect(),
        };
        let variant_prefix = format!("{subject}-");
        let peers = servers
            .iter()
            .filter(|s| *s != subject && !s.starts_with(&variant_prefix) && !floors.contains(s))
            .cloned()
            .collect();
        Ok(Sides { subject: subject.to_string(), peers, floors })
    }
}

/// One figure's comparison on one test and level.
#[derive(Debug, Clone, PartialEq)]
struct Lead {
    /// The peer with the highest median, and that median.
    best: Option<(String, f64)>,
    /// The subject's median over the best peer's.
    of_medians: Option<f64>,
    /// The smallest, over the peers, of the median over rounds of the
    /// subject's figure over the peer's in the same round, and that peer.
    /// Usually the best peer's; another's when the subject's lead over it
    /// held less steadily from round to round. Then the interval that
    /// median could lie in ([`MedianInterval`]), with three rounds or more.
    of_rounds: Option<(String, f64, Option<MedianInterval>)>,
}

/// Which figure of a summary.
#[derive(Clone, Copy)]
enum Figure {
    RequestsPerSec,
    RequestsPerCpuSecond,
}

impl Figure {
    fn median(self, row: &Summary) -> Option<f64> {
        match self {
            Figure::RequestsPerSec => row.requests_per_sec.map(|s| s.median),
            Figure::RequestsPerCpuSecond => row.requests_per_cpu_second.map(|s| s.median),
        }
    }

    /// This figure of a pair from [`round_ratio_samples`].
    fn pick(self, (per_sec, per_cpu): (Vec<f64>, Vec<f64>)) -> Vec<f64> {
        match self {
            Figure::RequestsPerSec => per_sec,
            Figure::RequestsPerCpuSecond => per_cpu,
        }
    }
}

/// The subject against the best peer on one figure, from the rows of one
/// test and level.
fn lead(sides: &Sides, rows: &[&Summary], runs: &[RunRecord], figure: Figure) -> Lead {
    let subject = rows.iter().find(|r| r.server == sides.subject);
    let peers = || rows.iter().filter(|r| sides.peers.contains(&r.server));
    let best = peers()
        .filter_map(|r| figure.median(r).map(|m| (r.server.clone(), m)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let Some(subject) = subject else { return Lead { best, of_medians: None, of_rounds: None } };
    let of_medians = best.as_ref().and_then(|(_, m)| ratio(figure.median(subject), Some(*m)));
    let of_rounds = peers()
        .filter_map(|peer| {
            let samples =
                round_ratio_samples(runs, &subject.test, subject.level, &sides.subject, &peer.server);
            let ratios = figure.pick(samples);
            Some((peer.server.clone(), median(&ratios)?, median_interval(&ratios)))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1));
    Lead { best, of_medians, of_rounds }
}

fn against(lead: &Lead) -> String {
    let Some((name, median)) = &lead.best else { return "no peer ran clean".into() };
    // Two rounds bound nothing worth printing (their range, at 50%).
    let interval = |i: &Option<MedianInterval>| match i {
        Some(i) if i.confidence > 0.5 => format!(" [{}]", times_interval(Some(*i))),
        _ => String::new(),
    };
    let rounds = match &lead.of_rounds {
        Some((peer, r, i)) if peer != name => format!("{}{} ({peer})", times(Some(*r)), interval(i)),
        Some((_, r, i)) => format!("{}{}", times(Some(*r)), interval(i)),
        None => "—".into(),
    };
    format!("{name} {}: {}; {rounds}", count(*median), times(lead.of_medians))
}

/// Writes the section: a row per test and level that the subject ran.
pub fn section(
    out: &mut String,
    sides: &Sides,
    tests: &[TestLevels],
    summaries: &[Summary],
    runs: &[RunRecord],
) {
    let _ = writeln!(out, "## {} against the best peer\n", sides.subject);
    let listed = |names: &[String]| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        }
    };
    let _ = writeln!(
        out,
        "Peers: {}. Floors: {}. On each figure the best peer is the one with the highest median; \
         each cell gives its median, then the subject's ratio to it: of medians; median of round \
         ratios (the smallest such median over all peers, naming the peer when it is another), \
         with, from three rounds on, the interval in brackets that holds the median of the round \
         ratios with the confidence given (order statistics, no assumption about the noise). The floor column is the subject's requests per CPU-second over the floor's (of \
         medians; median of round ratios).\n",
        listed(&sides.peers),
        listed(&sides.floors)
    );
    let _ = writeln!(out, "| test | level | {} req/s; req/CPU-s | best peer, req/s | best peer, req/CPU-s | to the floor, req/CPU-s |", sides.subject);
    let _ = writeln!(out, "|---|---:|---:|---|---|---|");
    for t in tests {
        for level in &t.levels {
            let rows: Vec<&Summary> =
                summaries.iter().filter(|s| s.test == t.test && s.level == *level).collect();
            let Some(subject) = rows.iter().find(|r| r.server == sides.subject) else { continue };
            let figures = format!(
                "{}; {}",
                subject.requests_per_sec.map_or("—".into(), |s| count(s.median)),
                subject.requests_per_cpu_second.map_or("—".into(), |s| count(s.median))
            );
            let per_sec = lead(sides, &rows, runs, Figure::RequestsPerSec);
            let per_cpu = lead(sides, &rows, runs, Figure::RequestsPerCpuSecond);
            let floors: Vec<String> = sides
                .floors
                .iter()
                .filter_map(|f| {
                    let floor = rows.iter().find(|r| &r.server == f)?;
                    let of_medians = ratio(
                        Figure::RequestsPerCpuSecond.median(subject),
                        Figure::RequestsPerCpuSecond.median(floor),
                    );
                    let of_rounds = round_ratios(runs, &t.test, *level, &sides.subject, f).1;
                    let fraction = |r: Option<f64>| r.map_or("—".to_string(), |r| format!("{r:.2}"));
                    Some(format!("{f}: {}; {}", fraction(of_medians), fraction(of_rounds)))
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {figures} | {} | {} | {} |",
                t.test,
                t.label(level),
                against(&per_sec),
                against(&per_cpu),
                if floors.is_empty() { "—".to_string() } else { floors.join(", ") }
            );
        }
    }
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::levels::{Axis, Level};
    use crate::bench::records::{summarize, Measurement};
    use crate::rig::procfs::CpuTicks;
    use crate::rig::wrk::{SocketErrors, WrkReport};

    const LEVEL: Level = Level { connections: 256, pipeline: 1, count: None };

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// A clean run of `requests` in one second, using `cpu_ticks` of 100 Hz
    /// CPU time.
    fn run(server: &str, round: u32, requests: u64, cpu_ticks: u64) -> RunRecord {
        let wrk = WrkReport {
            requests_per_sec: requests as f64,
            total_requests: requests,
            duration_secs: 1.0,
            latency_p50_ms: None,
            latency_p99_ms: None,
            non_2xx_3xx: 0,
            socket_errors: SocketErrors::default(),
        };
        let cpu = CpuTicks { utime: 0, stime: cpu_ticks };
        RunRecord {
            test: "json".into(),
            level: LEVEL,
            server: server.into(),
            round,
            measurement: Some(Measurement::new(wrk, cpu, 100, None)),
            failure: None,
        }
    }

    #[test]
    fn peers_leave_out_the_subject_its_variants_and_the_floors() {
        let servers =
            names(&["peregrine", "peregrine-epoll", "floor", "floor-uring", "may-minihttp", "xitca-web"]);
        let sides = Sides::split(&servers, "peregrine", None).unwrap();
        assert_eq!(sides.peers, names(&["may-minihttp", "xitca-web"]));
        assert_eq!(sides.floors, names(&["floor", "floor-uring"]));
        let named = Sides::split(&servers, "peregrine", Some(&names(&["floor-uring"]))).unwrap();
        assert_eq!(named.peers, names(&["floor", "may-minihttp", "xitca-web"]));
        assert!(Sides::split(&servers, "nginx", None).unwrap_err().contains("--subject `nginx`"));
        assert!(Sides::split(&servers, "peregrine", Some(&names(&["h2o"]))).unwrap_err().contains("`h2o`"));
    }

    #[test]
    fn the_c_reference_responders_are_floors() {
        let servers =
            names(&["peregrine", "c-floor", "c-floor-uring", "floor-uring", "c-floors-fan", "flooring"]);
        let sides = Sides::split(&servers, "peregrine", None).unwrap();
        assert_eq!(sides.floors, names(&["c-floor", "c-floor-uring", "floor-uring"]));
        assert_eq!(sides.peers, names(&["c-floors-fan", "flooring"]));
    }

    fn summaries_of(servers: &[String], runs: &[RunRecord]) -> Vec<Summary> {
        servers
            .iter()
            .map(|name| {
                let mine: Vec<&RunRecord> = runs.iter().filter(|r| &r.server == name).collect();
                summarize("json", LEVEL, name, &mine)
            })
            .collect()
    }

    #[test]
    fn the_round_ratio_is_the_smallest_over_all_peers() {
        // `a` has the best median (120), and the subject leads it 1.25x in
        // the median round; `c`'s median is lower (100), but it kept pace
        // in the subject's fast rounds, so the lead over it is only 1.11x
        // in the median round.
        let mut runs = Vec::new();
        for (round, (s, a, c)) in [(100, 120, 90), (150, 120, 140), (150, 120, 100)].into_iter().enumerate() {
            let round = round as u32 + 1;
            runs.extend([run("s", round, s, 100), run("a", round, a, 100), run("c", round, c, 100)]);
        }
        let servers = names(&["s", "a", "c"]);
        let summaries = summaries_of(&servers, &runs);
        let sides = Sides::split(&servers, "s", None).unwrap();
        let rows: Vec<&Summary> = summaries.iter().collect();
        let per_sec = lead(&sides, &rows, &runs, Figure::RequestsPerSec);
        assert_eq!(per_sec.best, Some(("a".into(), 120.0)));
        assert!((per_sec.of_medians.unwrap() - 1.25).abs() < 1e-9, "{per_sec:?}");
        let (closest, of_rounds, interval) = per_sec.of_rounds.clone().unwrap();
        assert_eq!(closest, "c");
        assert!((of_rounds - 100.0 / 90.0).abs() < 1e-9, "{per_sec:?}");
        // Over c, rounds gave 1.11x, 1.07x and 1.5x: their range, at 75%.
        let interval = interval.expect("three rounds");
        assert!((interval.low - 150.0 / 140.0).abs() < 1e-9, "{interval:?}");
        assert_eq!((interval.high, interval.confidence), (1.5, 0.75));
        assert_eq!(against(&per_sec), "a 120: 1.25×; 1.11× [1.07–1.50× (75%)] (c)");
    }

    #[test]
    fn each_figure_has_its_own_best_peer_and_round_ratios_pair_rounds() {
        // Round 1 and 2: `a` answers more requests, `b` spends less CPU on
        // each. The subject is 1.2x `a` on requests/s in round 1 and 1.1x
        // in round 2; on CPU, b is best.
        let runs = vec![
            run("s", 1, 1200, 100),
            run("a", 1, 1000, 100),
            run("b", 1, 800, 50),
            run("floor", 1, 1500, 75),
            run("s", 2, 1100, 100),
            run("a", 2, 1000, 100),
            run("b", 2, 800, 50),
            run("floor", 2, 1500, 75),
        ];
        let servers = names(&["s", "a", "b", "floor"]);
        let summaries = summaries_of(&servers, &runs);
        let sides = Sides::split(&servers, "s", None).unwrap();
        let rows: Vec<&Summary> = summaries.iter().collect();
        let per_sec = lead(&sides, &rows, &runs, Figure::RequestsPerSec);
        assert_eq!(per_sec.best, Some(("a".into(), 1000.0)));
        assert!((per_sec.of_medians.unwrap() - 1.15).abs() < 1e-9, "{per_sec:?}");
        let (closest, of_rounds, _) = per_sec.of_rounds.clone().unwrap();
        assert_eq!(closest, "a");
        assert!((of_rounds - 1.15).abs() < 1e-9, "{per_sec:?}");
        // Per CPU-second: s 1,200 and 1,100 (median 1,150); b 1,600.
        let per_cpu = lead(&sides, &rows, &runs, Figure::RequestsPerCpuSecond);
        assert_eq!(per_cpu.best, Some(("b".into(), 1600.0)));
        assert!((per_cpu.of_medians.unwrap() - 1150.0 / 1600.0).abs() < 1e-9, "{per_cpu:?}");

        let tests = [TestLevels { test: "json".into(), axis: Axis::Concurrency, levels: vec![LEVEL] }];
        let mut out = String::new();
        section(&mut out, &sides, &tests, &summaries, &runs);
        assert!(out.contains("## s against the best peer"), "{out}");
        assert!(out.contains("Peers: `a`, `b`. Floors: `floor`."), "{out}");
        // Floor: 2,000 per CPU-second; s 1,150 → 0.58 of medians, rounds
        // 0.60 and 0.55 → 0.57 (median of two).
        assert!(
            out.contains("| json | 256 conns | 1,150; 1,150 | a 1,000: 1.15×; 1.15× | b 1,600: 0.72×; 0.72× | floor: 0.57; 0.57 |"),
            "{out}"
        );
    }
}
