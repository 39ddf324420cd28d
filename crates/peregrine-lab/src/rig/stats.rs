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
