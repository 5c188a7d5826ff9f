//! A latency distribution: an HDR histogram of microseconds plus the exact sum, which the
//! histogram alone cannot give back (Prometheus summaries want `_sum`).

use std::time::Duration;

use hdrhistogram::Histogram;

/// Largest latency tracked exactly; longer ones are counted at this value.
const MAX_TRACKED_MICROS: u64 = 60_000_000;
/// Two significant digits: 1% relative error, about 20 KiB per histogram (three would be
/// about 140 KiB, and a snapshot of every histogram crosses the mesh on each scrape).
const SIGNIFICANT_DIGITS: u8 = 2;

/// The quantiles exported (Prometheus summary and JSON).
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

#[derive(Clone, Debug)]
pub struct Latency {
    histogram: Histogram<u64>,
    sum_micros: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    pub fn new() -> Latency {
        let histogram = Histogram::new_with_bounds(1, MAX_TRACKED_MICROS, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        Latency {
            histogram,
            sum_micros: 0,
        }
    }

    /// Records one duration; no allocation (the histogram's buckets are allocated up front).
    pub fn record(&mut self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.histogram.saturating_record(micros);
        self.sum_micros = self.sum_micros.saturating_add(micros);
    }

    /// Adds another distribution (merging shards).
    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so `add` cannot fail; if it ever did, keep what we have.
        if self.histogram.add(&other.histogram).is_ok() {
            self.sum_micros = self.sum_micros.saturating_add(other.sum_micros);
        }
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    pub fn sum_micros(&self) -> u64 {
        self.sum_micros
    }

    pub fn max_micros(&self) -> u64 {
        self.histogram.max()
    }

    /// The value at quantile `q` (0..=1), microseconds; 0 when empty.
    pub fn quantile_micros(&self, q: f64) -> u64 {
        if self.histogram.is_empty() {
            return 0;
        }
        self.histogram.value_at_quantile(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_quantiles_sum_and_merges() {
        let mut a = Latency::new();
        for us in 1..=1000u64 {
            a.record(Duration::from_micros(us));
        }
        assert_eq!(a.count(), 1000);
        assert_eq!(a.sum_micros(), 1000 * 1001 / 2);
        let p50 = a.quantile_micros(0.5);
        assert!((495..=505).contains(&p50), "p50 {p50}");
        let p99 = a.quantile_micros(0.99);
        assert!((980..=1000).contains(&p99), "p99 {p99}");
        assert!(a.max_micros() >= 1000 && a.max_micros() <= 1010);

        let mut b = Latency::new();
        b.record(Duration::from_secs(3600));
        assert_eq!(b.max_micros() / 1_000_000, MAX_TRACKED_MICROS / 1_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 1001);
        assert_eq!(Latency::new().quantile_micros(0.99), 0);
    }
}
