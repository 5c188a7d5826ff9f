//! Slow fdatasync warnings, per shard.
//!
//! Each group-commit fdatasync is timed (`log/commit.rs`); one slower than the threshold is
//! a sign of a failing or saturated disk, and acks=all latency goes with it. The monitor is a
//! thread-local, like the metrics registry: every shard is one thread, so this is one
//! monitor (and one rate limit) per shard, without locks, reachable from the commit task
//! that has no `Shard` at hand.

use std::cell::RefCell;
use std::path::Path;
use std::time::{Duration, Instant};

use super::rate_limit::RateLimiter;

/// `ringbroker.log.slow.fsync.warn.ms` unless set: an fdatasync slower than this is logged
/// (rate-limited). Half a second is far beyond a healthy disk (SSD: < 10 ms; HDD: < 50 ms).
pub const DEFAULT_SLOW_FSYNC_WARN_MS: u64 = 500;

/// At most one slow-fsync line per shard per this interval.
pub const SLOW_FSYNC_REPORT_INTERVAL: Duration = Duration::from_secs(30);

/// What one warning line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowFsyncReport {
    /// Slow fsyncs this line stands for (since the previous line).
    pub count: u64,
    /// The slowest of them.
    pub worst: Duration,
}

/// Decides which fsyncs are slow and when to say so. Pure: durations and time are passed in.
#[derive(Debug, Clone)]
pub struct SlowFsyncMonitor {
    /// `None`: warnings off (`ringbroker.log.slow.fsync.warn.ms = 0`).
    threshold: Option<Duration>,
    limiter: RateLimiter,
    worst: Duration,
}

impl SlowFsyncMonitor {
    pub fn new(threshold_ms: u64, interval: Duration) -> Self {
        SlowFsyncMonitor {
            threshold: (threshold_ms > 0).then(|| Duration::from_millis(threshold_ms)),
            limiter: RateLimiter::new(interval),
            worst: Duration::ZERO,
        }
    }

    pub fn threshold(&self) -> Option<Duration> {
        self.threshold
    }

    /// One fdatasync took `took`, finishing at `now`. Returns a report to log, if one is due.
    pub fn observe(&mut self, took: Duration, now: Instant) -> Option<SlowFsyncReport> {
        let threshold = self.threshold?;
        if took < threshold {
            return None;
        }
        self.worst = self.worst.max(took);
        let count = self.limiter.event(now)?;
        Some(self.report(count))
    }

    /// Periodic: the slow fsyncs held back, once the interval allows a line.
    pub fn flush(&mut self, now: Instant) -> Option<SlowFsyncReport> {
        let count = self.limiter.flush(now)?;
        Some(self.report(count))
    }

    fn report(&mut self, count: u64) -> SlowFsyncReport {
        SlowFsyncReport {
            count,
            worst: std::mem::take(&mut self.worst),
        }
    }
}

thread_local! {
    static MONITOR: RefCell<SlowFsyncMonitor> = RefCell::new(SlowFsyncMonitor::new(
        DEFAULT_SLOW_FSYNC_WARN_MS,
        SLOW_FSYNC_REPORT_INTERVAL,
    ));
}

/// Sets this thread's (shard's) threshold; 0 turns the warnings off.
pub fn configure(threshold_ms: u64) {
    MONITOR.with(|m| {
        *m.borrow_mut() = SlowFsyncMonitor::new(threshold_ms, SLOW_FSYNC_REPORT_INTERVAL)
    });
}

/// Records one fdatasync of a file in `dir` that took `took`; logs a (rate-limited) warning
/// if it was slow.
pub fn record(dir: &Path, took: Duration) {
    let report = MONITOR.with(|m| m.borrow_mut().observe(took, Instant::now()));
    if let Some(r) = report {
        warn(&r, Some(dir), Some(took));
    }
}

/// Logs the slow fsyncs held back by the rate limit, once it allows (call periodically).
pub fn flush() {
    let report = MONITOR.with(|m| m.borrow_mut().flush(Instant::now()));
    if let Some(r) = report {
        warn(&r, None, None);
    }
}

fn warn(r: &SlowFsyncReport, dir: Option<&Path>, took: Option<Duration>) {
    let threshold_ms = MONITOR
        .with(|m| m.borrow().threshold())
        .map_or(0, |t| t.as_millis() as u64);
    tracing::warn!(
        slow_fsyncs = r.count,
        worst_ms = r.worst.as_millis() as u64,
        last_ms = took.map(|t| t.as_millis() as u64),
        threshold_ms,
        dir = dir.map(|d| tracing::field::display(d.display())),
        report_interval_s = SLOW_FSYNC_REPORT_INTERVAL.as_secs(),
        "slow fsync: the disk under the data dir is slow (count since the previous such line)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_slow_fsyncs_count_and_lines_are_rate_limited() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut m = SlowFsyncMonitor::new(500, Duration::from_secs(30));
        assert_eq!(m.observe(ms(499), t0), None, "under the threshold");
        assert_eq!(
            m.observe(ms(600), t0),
            Some(SlowFsyncReport {
                count: 1,
                worst: ms(600)
            })
        );
        assert_eq!(m.observe(ms(900), t0 + ms(10)), None, "held back");
        assert_eq!(m.observe(ms(700), t0 + ms(20)), None);
        assert_eq!(
            m.observe(ms(10), t0 + ms(30)),
            None,
            "fast ones are not counted"
        );
        assert_eq!(m.flush(t0 + Duration::from_secs(29)), None);
        assert_eq!(
            m.flush(t0 + Duration::from_secs(30)),
            Some(SlowFsyncReport {
                count: 2,
                worst: ms(900)
            })
        );
        assert_eq!(m.flush(t0 + Duration::from_secs(90)), None);
    }

    #[test]
    fn zero_threshold_disables() {
        let mut m = SlowFsyncMonitor::new(0, Duration::from_secs(30));
        assert_eq!(m.observe(Duration::from_secs(10), Instant::now()), None);
        assert_eq!(m.threshold(), None);
    }
}
