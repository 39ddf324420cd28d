//! Arithmetic over repeated measurements, shared by `bench` (medians and
//! spreads over rounds) and `stress` (medians over runs, latency
//! percentiles). Pure functions, no I/O; one definition of "median" for the
//! whole lab.

use serde::{Deserialize, Serialize};

/// Median and range of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The median (mean of the middle two for an even count), or `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

pub fn spread(values: &[f64]) -> Option<Spread> {
    Some(Spread {
        median: median(values)?,
        min: values.iter().copied().reduce(f64::min)?,
        max: values.iter().copied().reduce(f64::max)?,
    })
}

/// A confidence interval for the median of the distribution a sample was
/// drawn from, with no assumption about its shape: the `k`-th smallest and
/// `k`-th largest values, which hold the median between them unless `k`
/// or more values fell on one side of it, so with probability
/// `confidence = 1 - 2 P(Binomial(n, 1/2) < k)`.
///
/// Why: the lab's figures are medians of a few alternating rounds, on a
/// machine whose speed drifts; two runs of one binary have differed by
/// 0.95x and 1.07x in one 9-round bench (session 46). A ratio quoted
/// against a threshold needs the width it could be off by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MedianInterval {
    pub low: f64,
    pub high: f64,
    /// The chance that the interval holds the median, from 0 to 1.
    pub confidence: f64,
}

/// The confidence wanted of [`median_interval`]: the narrowest interval
/// holding the median with at least this chance.
pub const MEDIAN_CONFIDENCE: f64 = 0.95;

/// The narrowest order-statistic interval for the median of `values` whose
/// confidence reaches [`MEDIAN_CONFIDENCE`]; with too few values for that
/// (5 or fewer), their whole range and its lower confidence. `None` for
/// fewer than two values, which bound nothing.
pub fn median_interval(values: &[f64]) -> Option<MedianInterval> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    // P(B <= j) for B ~ Binomial(n, 1/2), by the running binomial
    // coefficient (exact in f64 far beyond the rounds a bench runs).
    let total = 2f64.powi(n as i32);
    let below = |k: usize| -> f64 {
        let mut coefficient = 1.0;
        let mut sum = 0.0;
        for i in 0..k {
            sum += coefficient;
            coefficient = coefficient * (n - i) as f64 / (i + 1) as f64;
        }
        sum / total
    };
    let confidence = |k: usize| 1.0 - 2.0 * below(k);
    let mut k = 1;
    while k < n / 2 && confidence(k + 1) >= MEDIAN_CONFIDENCE {
        k += 1;
    }
    Some(MedianInterval { low: sorted[k - 1], high: sorted[n - k], confidence: confidence(k) })
}

/// An interval for people: `0.93–1.08× (96%)`; none -> `—`.
pub fn times_interval(interval: Option<MedianInterval>) -> String {
    interval.map_or("—".into(), |i| {
        format!("{:.2}–{:.2}× ({:.0}%)", i.low, i.high, (100.0 * i.confidence).floor())
    })
}

/// `value / baseline`, if both exist and the baseline is not zero.
pub fn ratio(value: Option<f64>, baseline: Option<f64>) -> Option<f64> {
    match (value, baseline) {
        (Some(v), Some(b)) if b > 0.0 => Some(v / b),
        _ => None,
    }
}

/// Requests per CPU-second, or `None` when no CPU time was recorded (which
/// would make the ratio meaningless rather than infinite).
pub fn per_cpu_second(requests: u64, cpu_seconds: f64) -> Option<f64> {
    (cpu_seconds > 0.0).then(|| requests as f64 / cpu_seconds)
}

/// A ratio for people: `1.2345` -> `1.23×`; none -> `—`.
pub fn times(ratio: Option<f64>) -> String {
    ratio.map_or("—".into(), |r| format!("{r:.2}×"))
}

/// A figure for people: `1234567.8` -> `1,234,568`.
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

/// A percentile (0..=100) of `values` (sorted in place), picked by rank;
/// 0 when empty.
pub fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * (values.len() - 1) as f64).round() as usize;
    values[rank.min(values.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        let s = spread(&[5.0, 1.0, 3.0]).expect("non-empty");
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
    }

    #[test]
    fn median_intervals_are_order_statistics_with_binomial_confidence() {
        assert_eq!(median_interval(&[]), None);
        assert_eq!(median_interval(&[1.0]), None);
        // Five rounds cannot reach 95%: their range, 1 - 2/32.
        let five = median_interval(&[5.0, 1.0, 4.0, 2.0, 3.0]).expect("five");
        assert_eq!((five.low, five.high), (1.0, 5.0));
        assert!((five.confidence - 0.9375).abs() < 1e-12, "{five:?}");
        // Nine: the 2nd and 8th values, 1 - 2 * 10/512 = 96.1%; the 3rd
        // and 7th would be 82.0%.
        let nine: Vec<f64> = (1..=9).rev().map(f64::from).collect();
        let i = median_interval(&nine).expect("nine");
        assert_eq!((i.low, i.high), (2.0, 8.0));
        assert!((i.confidence - (1.0 - 20.0 / 512.0)).abs() < 1e-12, "{i:?}");
        // Twenty: the 6th and 15th, 1 - 2 * 21,700/1,048,576 = 95.9%; the
        // 7th and 14th would be 88.5%, under 95%.
        let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
        let i = median_interval(&twenty).expect("twenty");
        assert_eq!((i.low, i.high), (6.0, 15.0));
        assert!((i.confidence - (1.0 - 2.0 * 21700.0 / 1048576.0)).abs() < 1e-12, "{i:?}");
        assert_eq!(times_interval(Some(i)), "6.00–15.00× (95%)");
        assert_eq!(times_interval(None), "—");
    }

    #[test]
    fn no_cpu_time_gives_no_rate() {
        assert_eq!(per_cpu_second(10, 0.0), None);
        assert_eq!(per_cpu_second(300, 1.5), Some(200.0));
    }

    #[test]
    fn percentiles_pick_by_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 50.0), 51.0);
        assert_eq!(percentile(&mut v, 99.0), 99.0);
        assert_eq!(percentile(&mut v, 100.0), 100.0);
        assert_eq!(percentile(&mut [], 99.0), 0.0);
    }
}
