//! A shard's housekeeping task: flushes, retention, checkpoints and (shard 0) the disk-space
//! watch, each when its schedule says, until the broker stops.

use std::rc::Rc;
use std::time::Duration;

use crate::health::disk_space::{self, DiskSpaceWatch, DiskThresholds};
use crate::runtime::{self, Task};
use crate::shard::housekeeping;
use crate::shard::Shard;
use crate::util::shutdown::ShutdownSignal;

/// Starts the shard's housekeeping; it ends once `shutdown` is triggered.
pub fn spawn(shard: Rc<Shard>, shutdown: Rc<ShutdownSignal>) -> Task<()> {
    runtime::spawn(async move {
        // Shard 0 watches the data dir's free space (one filesystem for all shards),
        // checking at once so a broker started on a nearly full disk says so.
        let mut disk_watch = (shard.id == 0).then(|| {
            DiskSpaceWatch::new(
                DiskThresholds {
                    bytes: shard.config.disk_free_warn_bytes,
                    percent: shard.config.disk_free_warn_percent,
                },
                disk_space::LOW_DISK_REPEAT_INTERVAL,
            )
        });
        let mut schedule = housekeeping::Schedule::new(
            runtime::Instant::now(),
            disk_space::DISK_CHECK_INTERVAL,
            housekeeping::CheckpointIntervals {
                logs: Duration::from_millis(shard.config.checkpoint_interval_ms),
                high_watermarks: Duration::from_millis(shard.config.hw_checkpoint_interval_ms),
            },
        );
        while !shutdown.is_triggered() {
            let jobs = schedule.take_due(runtime::Instant::now());
            if jobs.disk_check {
                if let Some(watch) = disk_watch.as_mut() {
                    disk_space::check(watch, &shard.config.data_dir);
                }
            }
            if jobs.flush || jobs.retention || jobs.checkpoint || jobs.hw_checkpoint {
                shard.housekeeping(runtime::now_ms(), jobs).await;
                crate::health::slow_fsync::flush();
            }
            // Only partitions with a flush policy (log.flush.interval.*) need the frequent
            // flush check; otherwise the shard sleeps until its next real job.
            let wait = schedule.wait(
                runtime::Instant::now(),
                housekeeping::OptionalJobs {
                    flush_checks: shard.partitions.has_flush_policy(),
                    disk_checks: disk_watch.is_some(),
                    hw_checkpoints: shard.partitions.has_replicated(),
                },
            );
            futures_lite::future::or(runtime::sleep(wait), shutdown.wait()).await;
        }
    })
}
