//! What a bench thread records: latencies in an HDR histogram (microseconds), per-second
//! counts and histograms for the time series, and errors by name. Time is an argument, so it
//! is testable; each thread owns a `Recorder` and they are merged at the end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency kept exactly (longer ones are clamped): one hour in µs.
const MAX_LATENCY_US: u64 = 3_600_000_000;

pub fn new_histogram(sigfig: u8) -> Histogram<u64> {
    // Bounds and sigfig are constants in range, so creation cannot fail.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, sigfig).expect("valid histogram bounds")
}

/// One second of the run (from its start).
#[derive(Debug, Clone)]
pub struct Second {
    pub records: u64,
    pub bytes: u64,
    pub errors: u64,
    pub latency: Histogram<u64>,
}

impl Second {
    fn new() -> Second {
        Second {
            records: 0,
            bytes: 0,
            errors: 0,
            latency: new_histogram(2),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Recorder {
    start: Instant,
    warmup_end: Instant,
    /// Latencies of records whose origin is after the warm-up.
    pub latency: Histogram<u64>,
    pub seconds: Vec<Second>,
    pub errors: BTreeMap<String, u64>,
    /// Every completed record, warm-up included.
    pub total_records: u64,
    pub total_bytes: u64,
    pub total_errors: u64,
    /// Records after the warm-up, and when the last of them completed.
    pub measured_records: u64,
    pub measured_bytes: u64,
    pub last_measured: Option<Instant>,
}

impl Recorder {
    pub fn new(start: Instant, warmup: Duration) -> Recorder {
        Recorder {
            start,
            warmup_end: start + warmup,
            latency: new_histogram(3),
            seconds: Vec::new(),
            errors: BTreeMap::new(),
            total_records: 0,
            total_bytes: 0,
            total_errors: 0,
            measured_records: 0,
            measured_bytes: 0,
            last_measured: None,
        }
    }

    fn second(&mut self, at: Instant) -> &mut Second {
        let i = at.saturating_duration_since(self.start).as_secs() as usize;
        if self.seconds.len() <= i {
            self.seconds.resize_with(i + 1, Second::new);
        }
        &mut self.seconds[i]
    }

    /// A record completed at `at`; its latency counts from `origin` (when it was due or sent,
    /// or produced for end-to-end). Records from the warm-up count in totals only.
    pub fn record_ok(&mut self, at: Instant, origin: Instant, bytes: usize) {
        let us = at.saturating_duration_since(origin).as_micros() as u64;
        self.total_records += 1;
        self.total_bytes += bytes as u64;
        let second = self.second(at);
        second.records += 1;
        second.bytes += bytes as u64;
        second.latency.saturating_record(us.max(1));
        if origin >= self.warmup_end {
            self.latency.saturating_record(us.max(1));
            self.measured_records += 1;
            self.measured_bytes += bytes as u64;
            self.last_measured = Some(self.last_measured.map_or(at, |l| l.max(at)));
        }
    }

    /// A duration measured as a whole (a fetch round trip), not tied to records.
    pub fn record_latency(&mut self, at: Instant, latency: Duration) {
        let us = (latency.as_micros() as u64).max(1);
        self.second(at).latency.saturating_record(us);
        if at >= self.warmup_end {
            self.latency.saturating_record(us);
        }
    }

    /// `count` records failed with the error named `name` (a Kafka error name when the broker
    /// gave one).
    pub fn record_error(&mut self, at: Instant, name: &str, count: u64) {
        self.total_errors += count;
        self.second(at).errors += count;
        *self.errors.entry(name.to_string()).or_insert(0) += count;
    }

    pub fn merge(&mut self, other: &Recorder) {
        // Same bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        if self.seconds.len() < other.seconds.len() {
            self.seconds.resize_with(other.seconds.len(), Second::new);
        }
        for (mine, theirs) in self.seconds.iter_mut().zip(&other.seconds) {
            mine.records += theirs.records;
            mine.bytes += theirs.bytes;
            mine.errors += theirs.errors;
            let _ = mine.latency.add(&theirs.latency);
        }
        for (name, n) in &other.errors {
            *self.errors.entry(name.clone()).or_insert(0) += n;
        }
        self.total_records += other.total_records;
        self.total_bytes += other.total_bytes;
        self.total_errors += other.total_errors;
        self.measured_records += other.measured_records;
        self.measured_bytes += other.measured_bytes;
        self.last_measured = match (self.last_measured, other.last_measured) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    /// Seconds from the end of the warm-up to the last measured completion.
    pub fn measured_seconds(&self) -> f64 {
        self.last_measured
            .map(|l| l.saturating_duration_since(self.warmup_end).as_secs_f64())
            .unwrap_or(0.0)
    }

    pub fn summary(&self) -> LatencySummary {
        LatencySummary::of(&self.latency)
    }
}

/// Percentiles of a latency histogram, in microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencySummary {
    pub unit: &'static str,
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub max: u64,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        let empty = h.is_empty();
        let at = |q: f64| if empty { 0 } else { h.value_at_quantile(q) };
        LatencySummary {
            unit: "us",
            count: h.len(),
            min: if empty { 0 } else { h.min() },
            mean: if empty { 0.0 } else { h.mean() },
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            p99_9: at(0.999),
            p99_99: at(0.9999),
            max: if empty { 0 } else { h.max() },
        }
    }

    /// (label, value) pairs in increasing percentile order.
    pub fn percentiles(&self) -> [(&'static str, u64); 7] {
        [
            ("min", self.min),
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p99.9", self.p99_9),
            ("p99.99", self.p99_99),
            ("max", self.max),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_is_excluded_from_latency_but_not_totals() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut r = Recorder::new(t0, Duration::from_secs(1));
        r.record_ok(t0 + ms(10), t0, 100); // warm-up: 10 ms
        for i in 0..100 {
            let origin = t0 + ms(1000 + i);
            r.record_ok(origin + ms(2), origin, 100);
        }
        r.record_error(t0 + ms(1500), "NOT_LEADER_OR_FOLLOWER", 3);
        assert_eq!(r.total_records, 101);
        assert_eq!(r.measured_records, 100);
        let s = r.summary();
        assert_eq!(s.count, 100);
        assert!(s.p50 >= 1990 && s.p50 <= 2010, "{s:?}");
        assert!(s.max < 2100);
        assert_eq!(r.seconds.len(), 2);
        assert_eq!(r.seconds[0].records, 1);
        assert_eq!(r.seconds[1].errors, 3);
        assert_eq!(r.errors["NOT_LEADER_OR_FOLLOWER"], 3);
        assert!((r.measured_seconds() - 0.101).abs() < 1e-3);

        let mut merged = Recorder::new(t0, Duration::from_secs(1));
        merged.merge(&r);
        merged.merge(&r);
        assert_eq!(merged.measured_records, 200);
        assert_eq!(merged.errors["NOT_LEADER_OR_FOLLOWER"], 6);
        assert_eq!(merged.seconds[1].records, 200);
        let p = merged.summary().percentiles();
        assert!(p.windows(2).all(|w| w[0].1 <= w[1].1), "{p:?}");
    }

    #[test]
    fn an_empty_histogram_summarizes_to_zeros() {
        let s = LatencySummary::of(&new_histogram(3));
        assert_eq!((s.count, s.p99, s.max), (0, 0, 0));
    }
}
