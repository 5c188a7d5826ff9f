//! A hosted partition's part in replication (cluster mode): leader or follower, as the
//! controller's metadata says (CLUSTER.md, "Replication").
//!
//! - A **leader** stamps its epoch into every batch, tracks its followers' fetch offsets in
//!   [`LeaderState`] (pure), moves the high watermark, answers acks=all produces once the HW
//!   passes them, and hands ISR changes to propose to the replica manager.
//! - A **follower** appends the leader's batches as they are (offsets, epochs), rebuilds the
//!   idempotent producers from their headers, and keeps HW = min(leader's HW, own LEO).
//! - Consumers read below the HW only; on a single node ([`ReplicaRole::Alone`]) the HW is
//!   the written end, as before replication existed.
//!
//! The epoch cache (`leader-epoch-checkpoint`) is written durably before a new leader's first
//! append and whenever a follower's batches start a new epoch.

use std::time::Duration;

use crate::controller::cluster_metadata::PartitionState;
use crate::log::{AppendOptions, LogError};
use crate::metrics::snapshot::ReplicationStats;
use crate::model::{BrokerId, LeaderEpoch, Offset, PartitionEpoch};
use crate::protocol::record_batch::BatchHeader;
use crate::protocol::ResponseError;
use crate::replication::epoch_cache::{self, LeaderEpochCache};
use crate::replication::leader_state::{AcksAllStatus, IsrProposal, LeaderConfig, LeaderState};
use crate::replication::replica_fetch::{self, FetchDecision};
use crate::runtime;
use crate::util::local_oneshot;

use super::error::PartitionError;
use super::offsets_reader::OffsetsReader;
use super::Partition;

/// What a follower's fetch asked for, to check its answer against: the answer applies only
/// if the partition still follows that leader at that epoch and still ends at that offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPosition {
    pub leader: BrokerId,
    pub leader_epoch: LeaderEpoch,
    pub fetch_offset: i64,
}

/// What this broker is for a partition.
pub enum ReplicaRole {
    /// A single-node broker: no replication, everything written is visible.
    Alone,
    Leader(Box<LeaderState>),
    Follower(FollowerView),
}

/// A follower's view of its partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerView {
    /// `None` while the partition has no leader.
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub high_watermark: i64,
}

impl FollowerView {
    /// A cluster-mode partition before the metadata named its leader.
    pub fn unassigned() -> FollowerView {
        FollowerView {
            leader: None,
            leader_epoch: LeaderEpoch(-1),
            high_watermark: 0,
        }
    }
}

/// The leader's answer to a follower's fetch of one partition, before the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaFetchCheck {
    /// The follower's log diverges: it must truncate to `end_offset` of `epoch` (Fetch v12+
    /// `DivergingEpoch`); nothing is read.
    pub diverging: Option<(i32, i64)>,
    pub high_watermark: i64,
    /// An ISR expansion to propose to the controller.
    pub propose: Option<IsrProposal>,
}

fn not_leader(topic: &str, index: i32) -> PartitionError {
    PartitionError::new(
        ResponseError::NotLeaderOrFollower.code(),
        format!("this broker does not lead {topic}-{index}"),
    )
}

/// Kafka's fencing of a request's `current_leader_epoch` against the leader's.
fn check_epoch(given: i32, mine: i32) -> Result<(), PartitionError> {
    replica_fetch::check_leader_epoch(given, mine)
        .map_err(|e| PartitionError::new(e.response_error().code(), e.to_string()))
}

/// Waits for `woken` or `deadline`, whichever comes first; true if the deadline did. The
/// deadline is pinned once for a whole wait, which may be woken (and wait again) many times.
pub async fn deadline_first(
    woken: impl std::future::Future,
    deadline: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> bool {
    futures_lite::future::or(
        async {
            woken.await;
            false
        },
        async {
            deadline.await;
            true
        },
    )
    .await
}

/// What a leader's answer says of its log besides the records: its HW and log start
/// (-1: not sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderMarks {
    pub high_watermark: i64,
    pub log_start: i64,
}

impl Partition {
    /// One past the last offset consumers may read: the HW, kept within the log's bounds as
    /// Kafka keeps it (a restarted replica knows no HW yet, 0, but what lies below its log
    /// start was committed before it was deleted).
    pub fn high_watermark(&self) -> i64 {
        let o = self.log.offsets();
        let hw = match &*self.role.borrow() {
            ReplicaRole::Alone => o.written_end_offset,
            ReplicaRole::Leader(l) => l.high_watermark().0,
            ReplicaRole::Follower(f) => f.high_watermark,
        };
        hw.max(o.log_start_offset).min(o.written_end_offset)
    }

    /// A consumer's view of the leader epoch against ours (Kafka's fencing): older is
    /// FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; -1 is not checked.
    pub fn check_consumer_epoch(&self, current_leader_epoch: i32) -> Result<(), PartitionError> {
        let mine = match &*self.role.borrow() {
            ReplicaRole::Alone => return Ok(()),
            ReplicaRole::Leader(l) => l.leader_epoch().0,
            ReplicaRole::Follower(_) => return Err(not_leader(&self.topic, self.index)),
        };
        check_epoch(current_leader_epoch, mine)
    }

    /// Whether `reader` may ask this replica for offsets (Kafka: the leader only, at the
    /// reader's leader epoch, except for a debugging client).
    pub fn check_offsets_reader(&self, reader: OffsetsReader) -> Result<(), PartitionError> {
        let current_leader_epoch = match reader {
            OffsetsReader::Debugging => return Ok(()),
            OffsetsReader::Consumer {
                current_leader_epoch,
            }
            | OffsetsReader::Replica {
                current_leader_epoch,
            } => current_leader_epoch,
        };
        self.check_consumer_epoch(current_leader_epoch)
    }

    /// ListOffsets' latest offset: the HW; OFFSET_NOT_AVAILABLE while a new leader's HW is
    /// still below the start of its epoch (it may not have every committed record yet).
    pub fn latest_offset(&self) -> Result<i64, PartitionError> {
        let hw = self.high_watermark();
        if let ReplicaRole::Leader(l) = &*self.role.borrow() {
            let start = self.epochs.borrow().epoch_start(l.leader_epoch());
            if start.is_some_and(|s| hw < s.0) {
                return Err(PartitionError::new(
                    ResponseError::OffsetNotAvailable.code(),
                    format!(
                        "the high watermark of {}-{} has not reached the start of the leader's epoch yet",
                        self.topic, self.index
                    ),
                ));
            }
        }
        Ok(hw)
    }

    /// The leader epoch this broker leads the partition at; `None` when it does not lead.
    pub fn leading_epoch(&self) -> Option<LeaderEpoch> {
        match &*self.role.borrow() {
            ReplicaRole::Leader(l) => Some(l.leader_epoch()),
            _ => None,
        }
    }

    /// Hands a replicated partition's HW to its log for the next checkpoint; whether it
    /// moved since it was last handed over.
    pub fn note_high_watermark(&self) -> bool {
        if !self.is_replicated() {
            return false;
        }
        let hw = Offset(self.high_watermark());
        let moved = self.log.checkpointed_high_watermark() != Some(hw);
        self.log.note_high_watermark(hw);
        moved
    }

    /// Whether the partition is replicated (cluster mode) rather than a single node's.
    pub fn is_replicated(&self) -> bool {
        !matches!(&*self.role.borrow(), ReplicaRole::Alone)
    }

    /// The leader epoch of the batch holding `offset`, from the epoch cache.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<LeaderEpoch> {
        self.epochs.borrow().epoch_for_offset(Offset(offset))
    }

    /// The latest leader epoch in the log (a follower's `LastFetchedEpoch`).
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.epochs.borrow().latest_epoch()
    }

    /// A copy of the epoch cache (OffsetForLeaderEpoch, tests).
    pub fn epoch_cache(&self) -> LeaderEpochCache {
        self.epochs.borrow().clone()
    }

    /// The options of a producer's append here: the leader's epoch stamped in; refused
    /// when this broker does not lead (yet) in cluster mode.
    pub fn leader_append_options(
        &self,
        durable: bool,
        now_ms: i64,
    ) -> Result<AppendOptions, PartitionError> {
        match &*self.role.borrow() {
            ReplicaRole::Alone => Ok(AppendOptions::new(durable, now_ms)),
            ReplicaRole::Leader(l) => Ok(AppendOptions {
                durable,
                now_ms,
                leader_epoch: Some(l.leader_epoch().0),
            }),
            ReplicaRole::Follower(_) => Err(not_leader(&self.topic, self.index)),
        }
    }

    /// A leader takes `min.insync.replicas` from the topic config as it is now: a change
    /// applies to the next acks=all produce and to the HW at once, not at the next
    /// leadership (Kafka reads the config on every acks=all produce).
    pub fn refresh_leader_config(&self) {
        let min = min_insync_replicas(&self.log.config());
        let moved = match &mut *self.role.borrow_mut() {
            ReplicaRole::Leader(l) => l.set_min_insync_replicas(min),
            _ => None,
        };
        if let Some(hw) = moved {
            self.high_watermark_moved(hw);
        }
    }

    /// Whether a batch admitted with `leader_epoch` (from [`Self::leader_append_options`])
    /// may still be staged: the partition is still alone, or still leads at that epoch. Asked
    /// right before staging, after any wait, with no `.await` in between.
    pub(super) fn may_stage(&self, leader_epoch: Option<i32>) -> bool {
        match (&*self.role.borrow(), leader_epoch) {
            (ReplicaRole::Alone, None) => true,
            (ReplicaRole::Leader(l), Some(epoch)) => l.leader_epoch().0 == epoch,
            _ => false,
        }
    }

    /// acks=all admission before the append: NOT_ENOUGH_REPLICAS when the ISR is smaller
    /// than `min.insync.replicas`.
    pub fn check_acks_all(&self) -> Result<(), PartitionError> {
        self.refresh_leader_config();
        match &*self.role.borrow() {
            ReplicaRole::Alone => Ok(()),
            ReplicaRole::Leader(l) => l.check_acks_all_admission().map_err(|e| {
                PartitionError::new(ResponseError::NotEnoughReplicas.code(), e.to_string())
            }),
            ReplicaRole::Follower(_) => Err(not_leader(&self.topic, self.index)),
        }
    }

    /// After a leader's append was written: its LEO moved (the HW too, with ISR = [leader]).
    pub fn after_leader_append(&self) {
        let leo = self.log.offsets().written_end_offset;
        let moved = match &mut *self.role.borrow_mut() {
            ReplicaRole::Leader(l) => l.on_leader_append(Offset(leo)),
            _ => None,
        };
        if let Some(hw) = moved {
            self.high_watermark_moved(hw);
        }
    }

    /// Waits until the HW passes `last_offset` (acks=all), at most `timeout`: success,
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum meanwhile,
    /// NOT_LEADER_OR_FOLLOWER at once when leadership is lost, REQUEST_TIMED_OUT otherwise.
    pub async fn wait_acks_all(
        &self,
        epoch: Option<LeaderEpoch>,
        last_offset: i64,
        timeout: Duration,
    ) -> Result<(), PartitionError> {
        // One timer for the whole wait (a waiter may be woken more than once).
        let deadline = runtime::sleep(timeout);
        futures_lite::pin!(deadline);
        let mut timed_out = false;
        loop {
            let waiter = {
                let role = self.role.borrow();
                if self.closing.get() && !matches!(&*role, ReplicaRole::Alone) {
                    return Err(PartitionError::new(
                        ResponseError::NotLeaderOrFollower.code(),
                        format!(
                            "the broker is stopping; {}-{} moves to another leader",
                            self.topic, self.index
                        ),
                    ));
                }
                let leader = match &*role {
                    ReplicaRole::Alone => return Ok(()),
                    ReplicaRole::Leader(l) if Some(l.leader_epoch()) == epoch => l,
                    _ => return Err(not_leader(&self.topic, self.index)),
                };
                match leader.acks_all_status(Offset(last_offset)) {
                    AcksAllStatus::Done(Ok(())) => return Ok(()),
                    AcksAllStatus::Done(Err(e)) => {
                        return Err(PartitionError::new(
                            ResponseError::NotEnoughReplicasAfterAppend.code(),
                            e.to_string(),
                        ))
                    }
                    AcksAllStatus::Pending if timed_out => {
                        return Err(PartitionError::new(
                            ResponseError::RequestTimedOut.code(),
                            format!(
                                "the in-sync replicas of {}-{} did not reach offset {last_offset} within {timeout:?}",
                                self.topic, self.index
                            ),
                        ));
                    }
                    AcksAllStatus::Pending => {
                        let (tx, rx) = local_oneshot::channel();
                        self.hw_waiters.borrow_mut().push((last_offset, tx));
                        rx
                    }
                }
            };
            timed_out = deadline_first(waiter, deadline.as_mut()).await;
        }
    }

    /// The leader's HW moved to `hw`: the acks=all waiters it answered (their last offset
    /// below it) and consumers' long polls wake; the others keep waiting (waking every
    /// waiter on every move cost a wakeup per request in flight per follower fetch).
    fn high_watermark_moved(&self, hw: Offset) {
        let answered: Vec<local_oneshot::Sender<()>> = {
            let mut waiters = self.hw_waiters.borrow_mut();
            let (answered, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut *waiters)
                .into_iter()
                .partition(|(o, _)| *o < hw.0);
            *waiters = waiting;
            answered.into_iter().map(|(_, w)| w).collect()
        };
        for w in answered {
            w.send(());
        }
        self.notify_high_watermark();
    }

    /// Wakes every acks=all and DeleteRecords waiter and consumers' long polls: the role
    /// changed.
    pub fn wake_hw_waiters(&self) {
        let waiters = std::mem::take(&mut *self.hw_waiters.borrow_mut());
        for (_, w) in waiters {
            w.send(());
        }
        self.wake_low_watermark_waiters();
        self.notify_high_watermark();
    }

    /// Applies the controller's state of the partition, `me` leading it: becomes leader at
    /// a new epoch (the epoch cache entry made durable before any append) or adopts a newer
    /// ISR at the same epoch.
    pub async fn lead(
        &self,
        me: BrokerId,
        state: &PartitionState,
        config: LeaderConfig,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let _io = self.replica_io.enter().await;
        let current = match &mut *self.role.borrow_mut() {
            ReplicaRole::Leader(l) if l.leader_epoch() == state.leader_epoch => {
                let moved = (state.partition_epoch > l.partition_epoch()).then(|| {
                    l.on_partition_state(
                        state.replicas.clone(),
                        state.isr.clone(),
                        state.partition_epoch,
                    )
                });
                Some(moved.flatten())
            }
            _ => None,
        };
        if let Some(moved) = current {
            if let Some(hw) = moved {
                self.high_watermark_moved(hw);
            }
            return Ok(());
        }
        // Staged appends (a producer's before a demotion) count: the epoch starts after them.
        let leo = self.log.offsets().log_end_offset;
        let previous_hw = self.high_watermark();
        let changed = self
            .epochs
            .borrow_mut()
            .assign(state.leader_epoch, Offset(leo));
        // An entry assigned by an attempt whose write failed is written now.
        if changed || self.epochs_unsaved.get() {
            self.write_epochs().await?;
        }
        let epoch_start = self
            .epochs
            .borrow()
            .epoch_start(state.leader_epoch)
            .unwrap_or(Offset(leo));
        let leader = LeaderState::new(
            me,
            state.replicas.clone(),
            state.isr.clone(),
            state.leader_epoch,
            state.partition_epoch,
            epoch_start,
            Offset(leo),
            Offset(previous_hw.min(leo)),
            now_ms,
            config,
        );
        tracing::info!(
            topic = %self.topic,
            partition = self.index,
            epoch = state.leader_epoch.0,
            log_end = leo,
            high_watermark = leader.high_watermark().0,
            isr = ?state.isr,
            "leading the partition"
        );
        *self.role.borrow_mut() = ReplicaRole::Leader(Box::new(leader));
        self.wake_hw_waiters();
        Ok(())
    }

    /// Follows `leader` (or nobody) at `epoch`: a deposed leader's waiting produces are
    /// answered NOT_LEADER_OR_FOLLOWER at once. The HW kept is what this broker knew.
    pub fn follow(&self, leader: Option<BrokerId>, epoch: LeaderEpoch) {
        let hw = self.high_watermark();
        let was_leader = {
            let mut role = self.role.borrow_mut();
            let same = matches!(&*role, ReplicaRole::Follower(f) if f.leader == leader && f.leader_epoch == epoch);
            if same {
                return;
            }
            let was_leader = matches!(&*role, ReplicaRole::Leader(_));
            *role = ReplicaRole::Follower(FollowerView {
                leader,
                leader_epoch: epoch,
                high_watermark: hw,
            });
            was_leader
        };
        if was_leader {
            tracing::info!(topic = %self.topic, partition = self.index, epoch = epoch.0, leader = ?leader, "no longer leading the partition");
        }
        self.wake_hw_waiters();
    }

    /// The follower view, when following.
    pub fn follower_view(&self) -> Option<FollowerView> {
        match &*self.role.borrow() {
            ReplicaRole::Follower(f) => Some(*f),
            _ => None,
        }
    }

    /// The leader's side of a follower's fetch: fencing by the follower's view of the
    /// leader epoch, divergence by its last fetched epoch, then its fetch offset recorded
    /// (it is the follower's LEO), which may move the HW and propose an ISR expansion.
    pub fn check_replica_fetch(
        &self,
        follower: BrokerId,
        fetch_offset: i64,
        current_leader_epoch: i32,
        last_fetched_epoch: i32,
        now_ms: i64,
    ) -> Result<ReplicaFetchCheck, PartitionError> {
        let leo = self.log.offsets().written_end_offset;
        let epochs = self.epochs.borrow();
        let mut role = self.role.borrow_mut();
        let ReplicaRole::Leader(leader) = &mut *role else {
            return Err(not_leader(&self.topic, self.index));
        };
        // Not one of its replicas: it would read past the HW (Kafka refuses it so too).
        if !leader.is_follower(follower) {
            return Err(PartitionError::new(
                ResponseError::NotLeaderOrFollower.code(),
                format!(
                    "broker {follower} is not a replica of {}-{}",
                    self.topic, self.index
                ),
            ));
        }
        let decision = replica_fetch::check_follower_fetch(
            &epochs,
            leo,
            leader.leader_epoch(),
            fetch_offset,
            current_leader_epoch,
            last_fetched_epoch,
        )
        .map_err(|e| PartitionError::new(e.response_error().code(), e.to_string()))?;
        if let FetchDecision::Diverging { epoch, end_offset } = decision {
            return Ok(ReplicaFetchCheck {
                diverging: Some((epoch, end_offset)),
                high_watermark: leader.high_watermark().0,
                propose: None,
            });
        }
        let outcome = leader.on_follower_fetch(follower, Offset(fetch_offset), Offset(leo), now_ms);
        let hw = leader.high_watermark();
        drop(role);
        drop(epochs);
        if let Some(hw) = outcome.hw_advanced {
            self.high_watermark_moved(hw);
        }
        Ok(ReplicaFetchCheck {
            diverging: None,
            high_watermark: hw.0,
            propose: outcome.propose,
        })
    }

    /// Whether the partition still follows as `asked` and ends where it asked from.
    pub fn still_at(&self, asked: FetchPosition) -> bool {
        let following = matches!(&*self.role.borrow(), ReplicaRole::Follower(f)
            if f.leader == Some(asked.leader) && f.leader_epoch == asked.leader_epoch);
        following && self.log.offsets().log_end_offset == asked.fetch_offset
    }

    /// A follower's append of the leader's batches; then HW = min(leader's HW, own LEO).
    /// An answer to a fetch the partition has moved on from (a role change, a truncation)
    /// is dropped: returns false.
    pub async fn append_replicated(
        &self,
        asked: FetchPosition,
        records: &[u8],
        leader: LeaderMarks,
        now_ms: i64,
    ) -> Result<bool, LogError> {
        let _io = self.replica_io.enter().await;
        self.log.wait_appendable().await?;
        if !self.still_at(asked) {
            return Ok(false);
        }
        if !records.is_empty() {
            let (staged, headers) = self
                .log
                .stage_replica(records, AppendOptions::new(false, now_ms))?;
            staged.written().await?;
            self.count_replica_bytes(records.len() as u64, 0);
            self.producers.replay_replicated(&headers, now_ms);
            let new_epochs = self.note_batch_epochs(&headers);
            if new_epochs {
                self.write_epochs().await?;
            }
            self.notify_append();
        }
        let leo = self.log.offsets().written_end_offset;
        let follower_hw = match &mut *self.role.borrow_mut() {
            ReplicaRole::Follower(f) => {
                let hw = replica_fetch::follower_high_watermark(
                    f.high_watermark,
                    leader.high_watermark,
                    leo,
                );
                let moved = hw != f.high_watermark;
                f.high_watermark = hw;
                Some((moved, hw))
            }
            _ => None,
        };
        let Some((moved, hw)) = follower_hw else {
            return Ok(true);
        };
        if moved {
            self.notify_append();
        }
        let own_start = self.log.offsets().log_start_offset;
        if let Some(start) = replica_fetch::follower_log_start(own_start, leader.log_start, hw) {
            self.log.delete_records_before(start).await?;
        }
        Ok(true)
    }

    /// Records the epochs that `headers` start; whether the cache changed.
    fn note_batch_epochs(&self, headers: &[BatchHeader]) -> bool {
        let mut epochs = self.epochs.borrow_mut();
        let mut changed = false;
        for h in headers {
            if h.partition_leader_epoch >= 0 {
                let epoch = LeaderEpoch(h.partition_leader_epoch);
                changed |= epochs.assign(epoch, Offset(h.base_offset));
            }
        }
        changed
    }

    /// A follower truncating its divergent tail as `replica_fetch::truncation_target` says
    /// (CLUSTER.md: by epoch, never blindly to the HW). The log's truncation is crash-safe;
    /// the epoch cache and the producer table follow it.
    pub async fn truncate_to_diverging_epoch(
        &self,
        asked: FetchPosition,
        epoch: i32,
        end_offset: i64,
    ) -> Result<i64, LogError> {
        let _io = self.replica_io.enter().await;
        let leo = self.log.offsets().written_end_offset;
        if !self.still_at(asked) {
            return Ok(leo);
        }
        let target =
            replica_fetch::truncation_target(epoch, end_offset, &self.epochs.borrow(), leo);
        if target >= leo {
            // No record to cut, but maybe an epoch entry of a leadership that wrote nothing:
            // left, it would be the last fetched epoch again, diverging for ever.
            if self.epochs.borrow_mut().truncate_from_end(Offset(leo)) {
                self.write_epochs().await?;
            }
            return Ok(leo);
        }
        tracing::info!(topic = %self.topic, partition = self.index, from = leo, to = target, "truncating a divergent log tail");
        let end = self.log.truncate_to(target).await?;
        let changed = self.epochs.borrow_mut().truncate_from_end(Offset(end));
        if changed {
            self.write_epochs().await?;
        }
        self.producers.truncate_to(Offset(end));
        if let ReplicaRole::Follower(f) = &mut *self.role.borrow_mut() {
            f.high_watermark = f.high_watermark.min(end);
        }
        Ok(end)
    }

    /// The leader applies the controller's answer to its ISR proposal.
    pub fn isr_committed(
        &self,
        epoch: LeaderEpoch,
        isr: Vec<BrokerId>,
        partition_epoch: PartitionEpoch,
    ) {
        let moved = match &mut *self.role.borrow_mut() {
            ReplicaRole::Leader(l) if l.leader_epoch() == epoch => {
                l.on_isr_committed(isr, partition_epoch)
            }
            _ => None,
        };
        if let Some(hw) = moved {
            self.high_watermark_moved(hw);
        }
    }

    /// The ISR change in flight (with the epochs it stands on now), if this broker still
    /// leads at `epoch` and one is pending.
    pub fn pending_isr_proposal(&self, epoch: LeaderEpoch) -> Option<IsrProposal> {
        match &*self.role.borrow() {
            ReplicaRole::Leader(l) if l.leader_epoch() == epoch => l.pending_proposal(),
            _ => None,
        }
    }

    /// The controller refused (or never answered) the ISR proposal: it may be asked again.
    pub fn isr_rejected(&self, epoch: LeaderEpoch) {
        if let ReplicaRole::Leader(l) = &mut *self.role.borrow_mut() {
            if l.leader_epoch() == epoch {
                l.on_isr_rejected();
            }
        }
    }

    /// The leader learns which replicas are fenced (ineligible for the ISR: they no longer
    /// hold the HW back) from the metadata.
    pub fn note_replica_liveness(&self, unfenced: impl Fn(BrokerId) -> bool) {
        let moved = match &mut *self.role.borrow_mut() {
            ReplicaRole::Leader(l) => {
                let replicas = l.replicas().to_vec();
                let mut moved = None;
                for r in replicas {
                    moved = moved.or(l.set_isr_eligible(r, unfenced(r)));
                }
                moved
            }
            _ => None,
        };
        if let Some(hw) = moved {
            self.high_watermark_moved(hw);
        }
    }

    /// The leader's periodic HW check: a silent caught-up follower outside the ISR stops
    /// holding the HW back once its lag expires, with no fetch or append to notice.
    pub fn advance_hw_on_timer(&self, now_ms: i64) {
        let moved = match &mut *self.role.borrow_mut() {
            ReplicaRole::Leader(l) => l.maybe_advance_hw(now_ms),
            _ => None,
        };
        if let Some(hw) = moved {
            self.high_watermark_moved(hw);
        }
    }

    /// The leader's periodic ISR check: members that fell behind, to propose removing.
    pub fn check_isr_shrink(&self, now_ms: i64) -> Option<IsrProposal> {
        match &mut *self.role.borrow_mut() {
            ReplicaRole::Leader(l) => l.check_shrink(now_ms),
            _ => None,
        }
    }

    /// What the metrics show of the partition's replication (`None` on a single node).
    pub fn replication_stats(&self, now_ms: i64) -> Option<ReplicationStats> {
        let mut stats = ReplicationStats {
            fetched_bytes: self.replica_bytes.0.get(),
            served_bytes: self.replica_bytes.1.get(),
            ..ReplicationStats::default()
        };
        match &*self.role.borrow() {
            ReplicaRole::Alone => return None,
            ReplicaRole::Follower(_) => {}
            ReplicaRole::Leader(l) => {
                stats.leader = true;
                stats.isr_size = l.isr().len();
                stats.replicas = l.replicas().len();
                stats.under_min_isr = l.under_min_isr();
                let leo = l.log_end_offset().0;
                for r in l.replicas() {
                    if let Some(f) = l.follower(*r) {
                        let behind = if f.log_end_offset.0 < 0 {
                            leo
                        } else {
                            (leo - f.log_end_offset.0).max(0)
                        };
                        let since = now_ms.saturating_sub(f.last_caught_up_ms).max(0);
                        stats.followers.push((r.0, behind, since));
                    }
                }
            }
        }
        Some(stats)
    }

    /// Counts bytes replicated here (`fetched`) or read for a follower.
    pub fn count_replica_bytes(&self, fetched: u64, served: u64) {
        let (f, s) = &self.replica_bytes;
        f.set(f.get() + fetched);
        s.set(s.get() + served);
    }

    /// Reads `leader-epoch-checkpoint` (at open, in cluster mode).
    pub async fn load_epochs(&self) -> Result<(), LogError> {
        let dir = self.log.dir().to_path_buf();
        let mut cache =
            epoch_cache::read_checkpoint(&dir)
                .await
                .map_err(|e| LogError::Unrecoverable {
                    path: dir.join(epoch_cache::LEADER_EPOCH_CHECKPOINT_FILE),
                    reason: e.to_string(),
                })?;
        // Entries past the log's end belong to batches a crash cut off.
        let end = self.log.offsets().written_end_offset;
        let cut = cache.truncate_from_end(Offset(end));
        *self.epochs.borrow_mut() = cache;
        if cut {
            self.write_epochs().await?;
        }
        Ok(())
    }

    pub async fn write_epochs(&self) -> Result<(), LogError> {
        let dir = self.log.dir().to_path_buf();
        let cache = self.epochs.borrow().clone();
        self.epochs_unsaved.set(true);
        epoch_cache::write_checkpoint(&dir, &cache)
            .await
            .map_err(|e| LogError::from_io(&dir, "writing the leader epoch checkpoint", e))?;
        self.epochs_unsaved.set(false);
        Ok(())
    }
}

/// A topic's `min.insync.replicas` as a leader counts it (at least the leader itself).
pub fn min_insync_replicas(config: &crate::log::LogConfig) -> usize {
    config.min_insync_replicas.max(1) as usize
}

#[cfg(test)]
#[path = "replica_role_tests.rs"]
mod tests;
