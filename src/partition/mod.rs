//! A partition as its owning shard holds it: the log, its idempotent producers, its replica
//! role (leader or follower state, acks=all waiters) and the fetchers waiting for new data;
//! and the small values partition operations answer with. Owned by one shard's thread; the
//! shard routes requests to it.
//!
//! - [`manager`]: the partitions of one shard (`PartitionManager`): opening and closing logs
//!   to match the metadata, operations on them ([`ops`]), offline partitions, periodic work
//! - [`replica_manager`]: cluster mode's roles, follower fetchers and ISR proposals for the
//!   shard's partitions
//! - [`replica_role`]: leader/follower state and the I/O around the pure replication rules
//! - [`delete_records`]: DeleteRecords, answered once every replica's log start has passed
//! - [`dirs`]: partition directories (topic-id files, set-aside and deleted directories)
//! - [`fetch_budget`]: a Fetch response's byte budget (pure)
//! - [`error`], [`offsets_reader`], [`summary`], [`offline_notice`], [`recovery_summary`]:
//!   values of its operations

pub mod delete_records;
pub mod dirs;
pub mod error;
pub mod fetch_budget;
pub mod manager;
pub mod offline_notice;
pub mod offsets_reader;
pub mod ops;
pub mod recovery_summary;
pub mod replica_manager;
pub mod replica_role;
pub mod summary;

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use crate::idempotence::append::{self, ProduceError, ProducerLoad, ProducerStates};
use crate::log::{record_check, AppendInfo, AppendOptions, Log, LogError};
use crate::model::Offset;
use crate::replication::epoch_cache::LeaderEpochCache;
use crate::runtime;
use crate::util::exclusive::Exclusive;
use crate::util::local_oneshot;
use replica_role::{FollowerView, ReplicaRole};
use summary::{ActiveProducer, EpochView, PartitionSummary};

/// Wakes one long-polling fetch when any of the partitions it watches gets data. The fetch
/// holds the only strong reference; partitions hold weak ones, so a fetch that timed out
/// leaves nothing behind but a dead weak pointer, pruned on the next registration.
pub struct AppendWaker {
    tx: RefCell<Option<local_oneshot::Sender<()>>>,
}

impl AppendWaker {
    /// A waker and the future it completes.
    pub fn new() -> (Rc<AppendWaker>, local_oneshot::Receiver<()>) {
        let (tx, rx) = local_oneshot::channel();
        (
            Rc::new(AppendWaker {
                tx: RefCell::new(Some(tx)),
            }),
            rx,
        )
    }

    fn wake(&self) {
        if let Some(tx) = self.tx.borrow_mut().take() {
            tx.send(());
        }
    }
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub log: Log,
    /// Producer ids, epochs and sequences of idempotent producers writing here.
    pub producers: Rc<ProducerStates>,
    /// Long-polling fetchers waiting for the next append.
    waiters: RefCell<Vec<Weak<AppendWaker>>>,
    /// Consumers' long polls waiting for the HW to move (cluster mode; a single node's
    /// consumers wait in `waiters`, every append moving its HW).
    hw_watchers: RefCell<Vec<Weak<AppendWaker>>>,
    /// The fetch offset of the last corrupt read logged (a consumer retries it forever).
    corrupt_logged_at: Cell<Option<i64>>,
    /// The active segment when producer state was last snapshotted: a roll snapshots again,
    /// so a restart replays at most the active segment (Kafka snapshots at every roll).
    snapshot_segment: Cell<i64>,
    /// Produces whose records are being checked (see [`Partition::produce`]), one at a time.
    checking: Exclusive,
    /// Leader, follower or a single node's (see [`super::replica_role`]).
    pub(super) role: RefCell<ReplicaRole>,
    /// `leader-epoch-checkpoint`: where each leader epoch starts in this log.
    pub(super) epochs: RefCell<LeaderEpochCache>,
    /// The epoch cache changed since its checkpoint was last written (a write failed): the
    /// next leadership writes it even if its own entry is already there.
    pub(super) epochs_unsaved: Cell<bool>,
    /// acks=all produces waiting for the HW to pass their last offset (or the role to
    /// change), with that offset.
    pub(super) hw_waiters: RefCell<Vec<(i64, local_oneshot::Sender<()>)>>,
    /// DeleteRecords waiting for the followers' log starts (or the role to change).
    pub(super) low_watermark_waiters: RefCell<Vec<local_oneshot::Sender<()>>>,
    /// Held by a follower's append or truncation and by becoming leader, so that a fetch
    /// answered just before a role change is never appended after it.
    pub(super) replica_io: Exclusive,
    /// Bytes appended from the leader, and read for followers (metrics).
    pub(super) replica_bytes: (Cell<u64>, Cell<u64>),
    /// The broker is stopping: acks=all waits answer NOT_LEADER_OR_FOLLOWER at once (as
    /// after Kafka's controlled shutdown moved leadership away) instead of holding the stop.
    pub(super) closing: Cell<bool>,
}

impl Partition {
    pub fn new(topic: String, index: i32, log: Log) -> Self {
        Partition {
            topic,
            index,
            log,
            producers: ProducerStates::new(),
            waiters: RefCell::new(Vec::new()),
            hw_watchers: RefCell::new(Vec::new()),
            corrupt_logged_at: Cell::new(None),
            snapshot_segment: Cell::new(-1),
            checking: Exclusive::new(),
            role: RefCell::new(ReplicaRole::Alone),
            epochs: RefCell::new(LeaderEpochCache::new()),
            epochs_unsaved: Cell::new(false),
            hw_waiters: RefCell::new(Vec::new()),
            low_watermark_waiters: RefCell::new(Vec::new()),
            replica_io: Exclusive::new(),
            replica_bytes: (Cell::new(0), Cell::new(0)),
            closing: Cell::new(false),
        }
    }

    /// A partition of a cluster: it serves nothing until the metadata names its leader.
    pub fn replicated(topic: String, index: i32, log: Log) -> Self {
        let p = Partition::new(topic, index, log);
        // The HW it last checkpointed: consumers of a restarted leader need not wait for its
        // followers to see what was committed before.
        let mut view = FollowerView::unassigned();
        view.high_watermark = p.log.checkpointed_high_watermark().map_or(0, |hw| hw.0);
        *p.role.borrow_mut() = ReplicaRole::Follower(view);
        p
    }

    /// Logs a read that found corrupt data, once per fetch offset.
    pub fn log_corrupt_read(&self, offset: i64, error: &LogError) {
        if self.corrupt_logged_at.replace(Some(offset)) != Some(offset) {
            tracing::warn!(
                topic = %self.topic,
                partition = self.index,
                offset,
                error = %error,
                "corrupt data in the log at a fetch offset; answering CORRUPT_MESSAGE"
            );
        }
    }

    /// Appends a producer's batches: idempotent ones are checked against their producer's
    /// sequence (a duplicate gets its original offsets, nothing is written). Wakes fetchers.
    ///
    /// A topic whose config looks inside batches (compacted, timestamp bounds, another
    /// codec) has them checked and rewritten first, off the reactor when that means
    /// decompressing or compressing.
    pub async fn produce(
        &self,
        records: &[u8],
        options: AppendOptions,
    ) -> Result<AppendInfo, ProduceError> {
        let config = self.log.config();
        let mut rewritten = None;
        let mut in_order = None;
        if config.inspects_records() {
            // Produces wait here in arrival order, so one that goes to a blocking thread is
            // not overtaken by the next; the guard is released just before staging, which
            // the append does before its first await.
            in_order = Some(self.checking.enter().await);
            let tp = format!("{}-{}", self.topic, self.index);
            let now = options.now_ms;
            rewritten = if record_check::needs_thread(records, &config, now) {
                let data = records.to_vec();
                runtime::spawn_blocking(move || {
                    record_check::check_records(&data, &config, now, &tp)
                })
                .await?
            } else {
                record_check::check_records(records, &config, now, &tp)?
            };
        }
        let records = rewritten.as_deref().unwrap_or(records);
        let still_leading = || self.may_stage(options.leader_epoch);
        let appending =
            append::append(&self.producers, &self.log, records, options, &still_leading);
        drop(in_order);
        let result = appending.await;
        if result.is_ok() {
            self.notify_log_end();
            self.snapshot_after_roll();
        }
        result
    }

    /// A leader's append of records the broker writes itself (`__consumer_offsets` records):
    /// no record checks, staged only while the partition still leads at the epoch `options`
    /// carries, as a producer's batch is. The caller wakes the waiters.
    pub async fn append_own(
        &self,
        records: &[u8],
        options: AppendOptions,
    ) -> Result<AppendInfo, ProduceError> {
        let still_leading = || self.may_stage(options.leader_epoch);
        append::append(&self.producers, &self.log, records, options, &still_leading).await
    }

    fn snapshot_after_roll(&self) {
        let active = self.log.active_segment_base();
        if self.snapshot_segment.replace(active) == active {
            return;
        }
        let (producers, log) = (Rc::clone(&self.producers), self.log.clone());
        let (topic, index) = (self.topic.clone(), self.index);
        runtime::spawn_detached(async move {
            if let Err(e) = producers.snapshot(&log).await {
                tracing::warn!(%topic, partition = index, error = %e, "producer snapshot after a roll failed");
            }
        });
    }

    /// Loads the producer state (snapshot + log replay); call once after opening the log.
    /// After a replay (an unclean stop) it snapshots at once, so the next start need not
    /// replay the same batches again.
    pub async fn load_producers(&self, now_ms: i64) -> Result<ProducerLoad, LogError> {
        let load = self.producers.load(&self.log, now_ms).await?;
        self.snapshot_segment.set(self.log.active_segment_base());
        let end = self.log.offsets().written_end_offset;
        if end > 0 && load.snapshot_offset != Some(Offset(end)) {
            self.producers.snapshot(&self.log).await?;
        }
        Ok(load)
    }

    /// Clean close: wakes fetchers, closes the log (flush, checkpoint, clean-shutdown marker)
    /// and snapshots the producer state at the log end.
    /// The broker is stopping: every waiter (acks=all, DeleteRecords, long polls) is
    /// answered now rather than at its timeout.
    pub fn begin_close(&self) {
        self.closing.set(true);
        self.wake_hw_waiters();
        self.notify_append();
    }

    pub async fn close(&self) -> Result<(), LogError> {
        self.notify_append();
        self.note_high_watermark();
        self.log.close().await?;
        self.producers.settle().await;
        self.producers.snapshot(&self.log).await
    }

    /// Wakes `waker` at the next successful append (or when the partition goes away).
    pub fn watch_appends(&self, waker: &Rc<AppendWaker>) {
        let mut waiters = self.waiters.borrow_mut();
        waiters.retain(|w| w.strong_count() > 0);
        waiters.push(Rc::downgrade(waker));
    }

    /// Wakes `waker` when the high watermark moves (a consumer's long poll). On a single
    /// node that is every append.
    pub fn watch_high_watermark(&self, waker: &Rc<AppendWaker>) {
        if !self.is_replicated() {
            return self.watch_appends(waker);
        }
        let mut watchers = self.hw_watchers.borrow_mut();
        watchers.retain(|w| w.strong_count() > 0);
        watchers.push(Rc::downgrade(waker));
    }

    /// Wakes every waiting fetcher, consumers and followers (data came, or the partition
    /// goes away).
    pub fn notify_append(&self) {
        wake_all(&self.waiters);
        wake_all(&self.hw_watchers);
    }

    /// A leader appended: followers' long polls wake; consumers only once the HW moves.
    fn notify_log_end(&self) {
        wake_all(&self.waiters);
        if !self.is_replicated() {
            wake_all(&self.hw_watchers);
        }
    }

    /// The HW moved: consumers' long polls wake (followers wait for data, not for this).
    pub(super) fn notify_high_watermark(&self) {
        wake_all(&self.hw_watchers);
    }

    /// Fetchers currently registered (for tests and metrics).
    pub fn watcher_count(&self) -> usize {
        let live = |list: &RefCell<Vec<Weak<AppendWaker>>>| {
            list.borrow()
                .iter()
                .filter(|w| w.strong_count() > 0)
                .count()
        };
        live(&self.waiters) + live(&self.hw_watchers)
    }
}

fn wake_all(list: &RefCell<Vec<Weak<AppendWaker>>>) {
    let waiters = std::mem::take(&mut *list.borrow_mut());
    for w in waiters.iter().filter_map(Weak::upgrade) {
        w.wake();
    }
}

/// What OffsetForLeaderEpoch, DescribeLogDirs and DescribeProducers read of a partition.
/// Producers are those with written batches: a batch still being written is not yet
/// acknowledged, so it is not reported.
pub fn summary(p: &Partition, with_producers: bool) -> PartitionSummary {
    let o = p.log.offsets();
    let mut producers: Vec<ActiveProducer> = if with_producers {
        p.producers
            .table()
            .written_only()
            .entries()
            .filter_map(|(producer_id, e)| {
                e.batches.back().map(|last| ActiveProducer {
                    producer_id,
                    epoch: e.epoch,
                    last_sequence: last.last_seq,
                    last_timestamp: last.max_timestamp,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    producers.sort_by_key(|a| a.producer_id);
    PartitionSummary {
        log_start_offset: o.log_start_offset,
        end_offset: o.written_end_offset,
        size_bytes: o.size_bytes,
        producers,
        epochs: match p.leading_epoch() {
            Some(epoch) => EpochView::Leader {
                epoch: epoch.0,
                cache: p.epoch_cache(),
            },
            None if p.is_replicated() => EpochView::Follower,
            None => EpochView::Alone,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::LogConfig;

    #[test]
    fn timed_out_fetchers_leave_nothing_behind_and_appends_wake_watchers() {
        let dir = tempfile::tempdir().expect("tempdir");
        crate::runtime::block_on(async {
            let log = Log::open(dir.path(), LogConfig::default())
                .await
                .expect("open");
            let p = Partition::new("t".into(), 0, log);
            for _ in 0..100 {
                let (waker, _rx) = AppendWaker::new();
                p.watch_appends(&waker);
                // The fetch times out: waker and receiver are dropped.
            }
            let (waker, rx) = AppendWaker::new();
            p.watch_appends(&waker);
            assert_eq!(p.watcher_count(), 1);
            assert!(p.waiters.borrow().len() <= 2, "dead entries are pruned");
            p.notify_append();
            assert_eq!(rx.await, Some(()));
            assert_eq!(p.watcher_count(), 0);
        })
        .expect("executor");
    }
}
