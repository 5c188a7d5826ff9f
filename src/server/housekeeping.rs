//! When a shard's periodic jobs are due: scheduled flushes (`log.flush.interval.*`), the
//! free-space check, retention, and checkpoints (`log.flush.offset.checkpoint.interval.ms`). Pure: the time is passed in, so the shard
//! sleeps exactly until its next job instead of waking on a fixed tick.

use std::time::{Duration, Instant};

/// How often flush policies are checked, for partitions that have one.
pub const FLUSH_CHECK_INTERVAL: Duration = Duration::from_millis(500);
/// How often retention runs (Kafka's log.retention.check.interval.ms is 5 minutes).
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(60);

/// The jobs to run now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Jobs {
    pub flush: bool,
    pub disk_check: bool,
    pub retention: bool,
    pub checkpoint: bool,
}

#[derive(Debug, Clone)]
pub struct Schedule {
    disk_check_interval: Duration,
    checkpoint_interval: Duration,
    next_flush: Instant,
    next_disk_check: Instant,
    next_retention: Instant,
    next_checkpoint: Instant,
}

impl Schedule {
    /// The disk check is due at once (a broker started on a nearly full disk says so).
    pub fn new(
        now: Instant,
        disk_check_interval: Duration,
        checkpoint_interval: Duration,
    ) -> Schedule {
        Schedule {
            disk_check_interval,
            checkpoint_interval,
            next_checkpoint: now + checkpoint_interval,
            next_flush: now + FLUSH_CHECK_INTERVAL,
            next_disk_check: now,
            next_retention: now + RETENTION_INTERVAL,
        }
    }

    /// The jobs due at `now`; each one due is next due an interval from now.
    pub fn take_due(&mut self, now: Instant) -> Jobs {
        let jobs = Jobs {
            flush: now >= self.next_flush,
            disk_check: now >= self.next_disk_check,
            retention: now >= self.next_retention,
            checkpoint: now >= self.next_checkpoint,
        };
        if jobs.checkpoint {
            self.next_checkpoint = now + self.checkpoint_interval;
        }
        if jobs.flush {
            self.next_flush = now + FLUSH_CHECK_INTERVAL;
        }
        if jobs.disk_check {
            self.next_disk_check = now + self.disk_check_interval;
        }
        if jobs.retention {
            self.next_retention = now + RETENTION_INTERVAL;
        }
        jobs
    }

    /// How long to sleep from `now` until the next job that matters: flush checks only while
    /// some partition has a flush policy, disk checks only on the shard that makes them.
    pub fn wait(&self, now: Instant, flush_checks: bool, disk_checks: bool) -> Duration {
        let mut next = self.next_retention.min(self.next_checkpoint);
        if flush_checks {
            next = next.min(self.next_flush);
        }
        if disk_checks {
            next = next.min(self.next_disk_check);
        }
        next.saturating_duration_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKPOINT: Duration = Duration::from_secs(60);

    const DISK: Duration = Duration::from_secs(10);

    #[test]
    fn an_idle_shard_without_flush_policies_sleeps_until_retention() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, DISK, CHECKPOINT);
        assert_eq!(
            s.take_due(t0),
            Jobs {
                disk_check: true,
                ..Jobs::default()
            }
        );
        assert_eq!(s.wait(t0, false, false), RETENTION_INTERVAL);
        assert_eq!(s.wait(t0, false, true), DISK);
        assert_eq!(s.wait(t0, true, true), FLUSH_CHECK_INTERVAL);
    }

    #[test]
    fn each_job_is_due_once_per_interval_whatever_wakes_the_shard() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, DISK, CHECKPOINT);
        s.take_due(t0);
        let mut counts = (0, 0, 0);
        // Woken every 100 ms for 130 s (as if by something else): no job runs more often
        // than its interval.
        for step in 1..=1300u64 {
            let jobs = s.take_due(t0 + Duration::from_millis(100 * step));
            counts.0 += jobs.flush as u32;
            counts.1 += jobs.disk_check as u32;
            counts.2 += jobs.retention as u32;
        }
        assert_eq!(counts, (260, 13, 2));
    }

    #[test]
    fn a_late_wakeup_runs_the_overdue_jobs_and_does_not_wait_again() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, DISK, CHECKPOINT);
        s.take_due(t0);
        let late = t0 + Duration::from_secs(100);
        assert_eq!(s.wait(late, true, true), Duration::ZERO);
        let jobs = s.take_due(late);
        assert!(jobs.flush && jobs.disk_check && jobs.retention);
        assert_eq!(s.wait(late, true, true), FLUSH_CHECK_INTERVAL);
    }
}
