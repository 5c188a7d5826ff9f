//! Open-loop schedule: with `--rate R` and P producers, producer p sends its i-th record at
//! `start + i * P / R`, whether or not earlier records were answered. Latency is measured from
//! that due time, so a stall that delays sending is counted (no coordinated omission).

use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    /// Time between two records of one producer; `None` = as fast as possible.
    interval: Option<Duration>,
}

impl Schedule {
    /// `total_rate` records/s across `producers` (0 = unlimited).
    pub fn new(start: Instant, total_rate: f64, producers: usize) -> Schedule {
        let interval = (total_rate > 0.0)
            .then(|| Duration::from_secs_f64(producers.max(1) as f64 / total_rate));
        Schedule { start, interval }
    }

    pub fn is_open_loop(&self) -> bool {
        self.interval.is_some()
    }

    /// When record `i` is due (`None` without a rate: send now).
    pub fn due(&self, i: u64) -> Option<Instant> {
        // Multiply in f64: `interval * i` as u32 would overflow for long runs.
        self.interval
            .map(|d| self.start + Duration::from_secs_f64(d.as_secs_f64() * i as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_times_follow_the_rate() {
        let t0 = Instant::now();
        let s = Schedule::new(t0, 1000.0, 2);
        assert!(s.is_open_loop());
        assert_eq!(s.due(0), Some(t0));
        // 1000/s over 2 producers: each sends every 2 ms.
        let d = s.due(500).unwrap() - t0;
        assert!((d.as_secs_f64() - 1.0).abs() < 1e-6, "{d:?}");
        let unlimited = Schedule::new(t0, 0.0, 2);
        assert!(!unlimited.is_open_loop());
        assert_eq!(unlimited.due(10), None);
    }
}
