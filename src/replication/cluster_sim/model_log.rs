//! A partition replica's storage in the simulation: a log of one-record batches with a
//! flushed mark (what a power loss keeps), and the epoch cache beside it (its checkpoint is
//! written durably on every change, as `replica_role` does, so it survives any crash and is
//! cut back to the log's end on restart, as `load_epochs` does).

use crate::model::{LeaderEpoch, Offset};
use crate::replication::epoch_cache::LeaderEpochCache;

/// One batch of one record, as the leader stamped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub offset: i64,
    pub epoch: LeaderEpoch,
    pub producer: i64,
    pub seq: i32,
    pub value: u64,
}

#[derive(Debug, Clone, Default)]
pub struct ModelLog {
    batches: Vec<Batch>,
    /// How many batches are on stable storage.
    flushed: usize,
}

impl ModelLog {
    pub fn leo(&self) -> i64 {
        self.batches.len() as i64
    }

    pub fn batches(&self) -> &[Batch] {
        &self.batches
    }

    pub fn get(&self, offset: i64) -> Option<&Batch> {
        usize::try_from(offset)
            .ok()
            .and_then(|i| self.batches.get(i))
    }

    /// Offsets are dense: a batch goes at the end.
    pub fn append(&mut self, batch: Batch) {
        assert_eq!(batch.offset, self.leo(), "appended out of place: {batch:?}");
        self.batches.push(batch);
    }

    pub fn read_from(&self, offset: i64, max: usize) -> Vec<Batch> {
        let start = usize::try_from(offset).unwrap_or(0).min(self.batches.len());
        self.batches[start..].iter().take(max).copied().collect()
    }

    /// Crash-safe, as the broker's truncation is: the cut is durable at once.
    pub fn truncate_to(&mut self, end: i64) {
        let end = usize::try_from(end).unwrap_or(0).min(self.batches.len());
        self.batches.truncate(end);
        self.flushed = self.flushed.min(end);
    }

    pub fn flush(&mut self) {
        self.flushed = self.batches.len();
    }

    /// A power loss: only what was flushed is left.
    pub fn lose_unflushed(&mut self) {
        self.batches.truncate(self.flushed);
    }

    /// The offset of the producer's batch with `seq`, if this log has it.
    pub fn find_seq(&self, producer: i64, seq: i32) -> Option<i64> {
        self.batches
            .iter()
            .rev()
            .find(|b| b.producer == producer && b.seq == seq)
            .map(|b| b.offset)
    }

    /// The producer's latest sequence number here (what the broker rebuilds from batches).
    pub fn last_seq(&self, producer: i64) -> Option<i32> {
        self.batches
            .iter()
            .rev()
            .find(|b| b.producer == producer)
            .map(|b| b.seq)
    }
}

/// A replica's durable state: its log and its epoch cache.
#[derive(Debug, Clone, Default)]
pub struct Disk {
    pub log: ModelLog,
    pub epochs: LeaderEpochCache,
}

impl Disk {
    /// After a crash: in power-loss mode the unflushed tail is gone; the epoch cache loses
    /// the entries past the log's end (`Partition::load_epochs`).
    pub fn recover(&mut self, power_loss: bool) {
        if power_loss {
            self.log.lose_unflushed();
        }
        self.epochs.truncate_from_end(Offset(self.log.leo()));
    }

    /// A follower's truncation: the log, then the epochs past the new end.
    pub fn truncate_to(&mut self, end: i64) {
        self.log.truncate_to(end);
        self.epochs.truncate_from_end(Offset(end));
    }
}
