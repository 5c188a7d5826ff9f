//! When a shard's periodic jobs are due: scheduled flushes (`log.flush.interval.*`), the
//! free-space check, retention, checkpoints (`log.flush.offset.checkpoint.interval.ms`) and,
//! in a cluster, high watermark checkpoints (`replica.high.watermark.checkpoint.interval.ms`).
//! Pure: the time is passed in, so the shard sleeps exactly until its next job instead of
//! waking on a fixed tick.

use std::time::Duration;

use crate::runtime::Instant;

/// How often flush policies are checked, for partitions that have one.
pub const FLUSH_CHECK_INTERVAL: Duration = Duration::from_millis(500);
/// How often retention runs (Kafka's log.retention.check.interval.ms is 5 minutes).
pub const RETENTION_INTERVAL: Duration = Duration::from_secs(60);

/// The jobs a shard needs only in some states (see `Schedule::wait`).
#[derive(Debug, Default, Clone, Copy)]
pub struct OptionalJobs {
    pub flush_checks: bool,
    pub disk_checks: bool,
    pub hw_checkpoints: bool,
}

/// The jobs to run now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Jobs {
    pub flush: bool,
    pub disk_check: bool,
    pub retention: bool,
    pub checkpoint: bool,
    pub hw_checkpoint: bool,
}

/// How often the checkpoints are due.
#[derive(Debug, Clone, Copy)]
pub struct CheckpointIntervals {
    /// Recovery points, log starts and producer state.
    pub logs: Duration,
    /// High watermarks of replicated partitions.
    pub high_watermarks: Duration,
}

#[derive(Debug, Clone)]
pub struct Schedule {
    disk_check_interval: Duration,
    checkpoints: CheckpointIntervals,
    next_flush: Instant,
    next_disk_check: Instant,
    next_retention: Instant,
    next_checkpoint: Instant,
    next_hw_checkpoint: Instant,
}

impl Schedule {
    /// The disk check is due at once (a broker started on a nearly full disk says so).
    pub fn new(
        now: Instant,
        disk_check_interval: Duration,
        checkpoints: CheckpointIntervals,
    ) -> Schedule {
        Schedule {
            disk_check_interval,
            checkpoints,
            next_checkpoint: now + checkpoints.logs,
            next_hw_checkpoint: now + checkpoints.high_watermarks,
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
            hw_checkpoint: now >= self.next_hw_checkpoint,
        };
        if jobs.checkpoint {
            self.next_checkpoint = now + self.checkpoints.logs;
        }
        if jobs.hw_checkpoint {
            self.next_hw_checkpoint = now + self.checkpoints.high_watermarks;
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
    /// some partition has a flush policy, disk checks only on the shard that makes them, HW
    /// checkpoints only while it owns replicated partitions.
    pub fn wait(&self, now: Instant, optional: OptionalJobs) -> Duration {
        let mut next = self.next_retention.min(self.next_checkpoint);
        if optional.flush_checks {
            next = next.min(self.next_flush);
        }
        if optional.disk_checks {
            next = next.min(self.next_disk_check);
        }
        if optional.hw_checkpoints {
            next = next.min(self.next_hw_checkpoint);
        }
        next.saturating_duration_since(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKPOINTS: CheckpointIntervals = CheckpointIntervals {
        logs: Duration::from_secs(60),
        high_watermarks: Duration::from_secs(5),
    };

    const DISK: Duration = Duration::from_secs(10);

    fn only_disk_checks() -> OptionalJobs {
        OptionalJobs {
            disk_checks: true,
            ..OptionalJobs::default()
        }
    }

    fn all_jobs() -> OptionalJobs {
        OptionalJobs {
            flush_checks: true,
            disk_checks: true,
            hw_checkpoints: true,
        }
    }

    #[test]
    fn an_idle_shard_without_flush_policies_sleeps_until_retention() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, DISK, CHECKPOINTS);
        assert_eq!(
            s.take_due(t0),
            Jobs {
                disk_check: true,
                ..Jobs::default()
            }
        );
        assert_eq!(s.wait(t0, OptionalJobs::default()), RETENTION_INTERVAL);
        assert_eq!(s.wait(t0, only_disk_checks()), DISK);
        assert_eq!(s.wait(t0, all_jobs()), FLUSH_CHECK_INTERVAL);
        let replicated = OptionalJobs {
            hw_checkpoints: true,
            ..OptionalJobs::default()
        };
        assert_eq!(s.wait(t0, replicated), CHECKPOINTS.high_watermarks);
    }

    #[test]
    fn each_job_is_due_once_per_interval_whatever_wakes_the_shard() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, DISK, CHECKPOINTS);
        s.take_due(t0);
        let mut counts = (0, 0, 0, 0, 0);
        // Woken every 100 ms for 130 s (as if by something else): no job runs more often
        // than its interval.
        for step in 1..=1300u64 {
            let jobs = s.take_due(t0 + Duration::from_millis(100 * step));
            counts.0 += jobs.flush as u32;
            counts.1 += jobs.disk_check as u32;
            counts.2 += jobs.retention as u32;
            counts.3 += jobs.checkpoint as u32;
            counts.4 += jobs.hw_checkpoint as u32;
        }
        assert_eq!(counts, (260, 13, 2, 2, 26));
    }

    #[test]
    fn a_late_wakeup_runs_the_overdue_jobs_and_does_not_wait_again() {
        let t0 = Instant::now();
        let mut s = Schedule::new(t0, DISK, CHECKPOINTS);
        s.take_due(t0);
        let late = t0 + Duration::from_secs(100);
        assert_eq!(s.wait(late, all_jobs()), Duration::ZERO);
        let jobs = s.take_due(late);
        assert!(jobs.flush && jobs.disk_check && jobs.retention && jobs.hw_checkpoint);
        assert_eq!(s.wait(late, all_jobs()), FLUSH_CHECK_INTERVAL);
    }
}
