//! What opening the logs found at startup, summed over partitions and then over shards, for
//! the broker's one startup line.

use std::time::Duration;

use crate::idempotence::append::ProducerLoad;
use crate::log::RecoveryReport;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoverySummary {
    /// Partition logs opened.
    pub partitions: usize,
    pub segments: usize,
    /// Bytes of log data kept.
    pub bytes: u64,
    /// Existing logs opened without the clean-shutdown marker (after a crash or kill -9).
    pub unclean_logs: usize,
    /// Segments read batch by batch (CRC-checked) rather than trusted, and bytes read.
    pub scanned_segments: usize,
    pub scanned_bytes: u64,
    /// Segments whose index files were rebuilt.
    pub rebuilt_indexes: usize,
    /// Logs cut at a torn or corrupt batch, the bytes dropped by the cuts and the whole
    /// segments removed after them.
    pub truncated_logs: usize,
    pub truncated_bytes: u64,
    pub removed_segments: usize,
    /// Partitions whose producer state came from a snapshot, and idempotent batches replayed
    /// from the log on top.
    pub producer_snapshots: usize,
    pub producer_batches_replayed: u64,
    /// Partitions whose log could not be opened (served as offline).
    pub offline_partitions: usize,
    /// Time spent loading. Shards load in parallel, so merging keeps the longest.
    pub took: Duration,
}

impl RecoverySummary {
    /// Counts one opened partition log.
    pub fn add_log(&mut self, report: &RecoveryReport, bytes: u64, producers: ProducerLoad) {
        self.partitions += 1;
        self.segments += report.segments;
        self.bytes += bytes;
        // A new partition has no marker either, but nothing to recover.
        self.unclean_logs += usize::from(!report.clean_shutdown && report.segments > 0);
        self.scanned_segments += report.scanned_segments;
        self.scanned_bytes += report.scanned_bytes;
        self.rebuilt_indexes += report.rebuilt_indexes.len();
        self.truncated_logs += usize::from(report.truncated_at.is_some());
        self.truncated_bytes += report.truncated_bytes;
        self.removed_segments += report.removed_segments.len();
        self.producer_snapshots += usize::from(producers.snapshot_offset.is_some());
        self.producer_batches_replayed += producers.replayed_batches;
    }

    /// Adds another shard's summary.
    pub fn merge(&mut self, other: &RecoverySummary) {
        self.partitions += other.partitions;
        self.segments += other.segments;
        self.bytes += other.bytes;
        self.unclean_logs += other.unclean_logs;
        self.scanned_segments += other.scanned_segments;
        self.scanned_bytes += other.scanned_bytes;
        self.rebuilt_indexes += other.rebuilt_indexes;
        self.truncated_logs += other.truncated_logs;
        self.truncated_bytes += other.truncated_bytes;
        self.removed_segments += other.removed_segments;
        self.producer_snapshots += other.producer_snapshots;
        self.producer_batches_replayed += other.producer_batches_replayed;
        self.offline_partitions += other.offline_partitions;
        self.took = self.took.max(other.took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_add_up_and_shards_merge() {
        let clean = RecoveryReport {
            clean_shutdown: true,
            segments: 2,
            ..RecoveryReport::default()
        };
        let cut = RecoveryReport {
            segments: 1,
            scanned_segments: 2,
            scanned_bytes: 300,
            truncated_at: Some((0, 100, "torn batch at the end".into())),
            truncated_bytes: 200,
            removed_segments: vec![50],
            ..RecoveryReport::default()
        };
        let mut a = RecoverySummary::default();
        a.add_log(
            &clean,
            1000,
            ProducerLoad {
                snapshot_offset: Some(crate::model::Offset(10)),
                replayed_batches: 3,
            },
        );
        a.took = Duration::from_millis(5);
        let mut b = RecoverySummary::default();
        b.add_log(&cut, 100, ProducerLoad::default());
        b.took = Duration::from_millis(7);
        a.merge(&b);
        assert_eq!(
            (a.partitions, a.segments, a.bytes, a.unclean_logs),
            (2, 3, 1100, 1)
        );
        assert_eq!(
            (a.truncated_logs, a.truncated_bytes, a.removed_segments),
            (1, 200, 1)
        );
        assert_eq!((a.producer_snapshots, a.producer_batches_replayed), (1, 3));
        assert_eq!(a.took, Duration::from_millis(7));
    }
}
