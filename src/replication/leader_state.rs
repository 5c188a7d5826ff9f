//! A partition leader's view of its replicas, as Kafka's `Partition` and `Replica` keep it:
//! each follower's fetch position and last caught-up time, the committed ISR plus at most one
//! change in flight at the controller, the high watermark, and the acks=all decisions.
//!
//! Pure: no I/O, no clock. Every time is a `now_ms` argument; calls that take none
//! (`on_leader_append`, the controller's answers) use the latest `now_ms` seen so far, which
//! can only make a follower look caught up a little longer (the HW waits a little longer).
//!
//! Rules (Kafka 3.7+, KIP-497 and KAFKA-15583):
//! - the leader never changes the ISR itself: it proposes (one change at a time) and applies
//!   what the controller committed;
//! - a pending expansion counts at once (the "maximal" ISR): more members only hold the HW
//!   back, so that is safe even if the controller refuses; a pending shrink does not count
//!   until committed, since a refused shrink must not have let the HW run ahead;
//! - HW = smallest LEO over the maximal ISR and over the followers that are caught up and
//!   eligible but not yet in it (Kafka waits for them, so that a follower catching up under
//!   steady load is not left behind forever when the ISR is the leader alone); it never moves
//!   back and does not move while the committed ISR is under the effective min ISR
//!   (`min(min.insync.replicas, replica count)`).

use std::collections::BTreeMap;

use crate::model::{BrokerId, LeaderEpoch, Offset, PartitionEpoch};

/// A follower's LEO before its first fetch of this leadership.
pub const UNKNOWN_OFFSET: Offset = Offset(-1);
/// Never (not caught up, no fetch yet): lags saturate, so this is past any lag limit, whatever
/// the caller's clock origin.
pub const NEVER_MS: i64 = i64::MIN;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderConfig {
    /// `min.insync.replicas`; capped by the replica count, as Kafka does since 3.7.
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: i64,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        LeaderConfig {
            min_insync_replicas: 1,
            replica_lag_time_max_ms: 30_000,
        }
    }
}

/// One follower as the leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// The offset of its latest fetch ([`UNKNOWN_OFFSET`] before the first one).
    pub log_end_offset: Offset,
    /// The latest time at which it had read up to the leader's LEO ([`NEVER_MS`] if never).
    pub last_caught_up_ms: i64,
    /// When its latest fetch arrived ([`NEVER_MS`] if none yet).
    pub last_fetch_ms: i64,
    /// The leader's LEO when that fetch arrived ([`UNKNOWN_OFFSET`] if none yet).
    pub last_fetch_leader_leo: Offset,
    /// False while the metadata says the broker is fenced or in controlled shutdown: it is
    /// then neither proposed for the ISR nor waited for by the HW (KAFKA-15021).
    pub isr_eligible: bool,
    /// Its log start offset as its latest fetch reported it ([`UNKNOWN_OFFSET`] before).
    pub log_start_offset: Offset,
}

impl FollowerState {
    /// As a new leader starts it: ISR members count as caught up now, so that they are not
    /// shrunk before they had a chance to fetch; the others as never.
    fn reset(in_isr: bool, now_ms: i64) -> Self {
        FollowerState {
            log_end_offset: UNKNOWN_OFFSET,
            last_caught_up_ms: if in_isr { now_ms } else { NEVER_MS },
            last_fetch_ms: NEVER_MS,
            last_fetch_leader_leo: UNKNOWN_OFFSET,
            isr_eligible: true,
            log_start_offset: UNKNOWN_OFFSET,
        }
    }

    /// Kafka's `Replica.updateFetchState`. Caught up at this fetch if it read up to the
    /// leader's LEO now; else caught up at the previous fetch if it now read up to the LEO
    /// the leader had then (so a follower of a busy partition, always a little behind, is
    /// still in sync as long as each fetch reaches where the leader was one fetch earlier).
    fn update_fetch(&mut self, fetch_offset: Offset, leader_leo: Offset, now_ms: i64) {
        if fetch_offset >= leader_leo {
            self.last_caught_up_ms = self.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= self.last_fetch_leader_leo {
            self.last_caught_up_ms = self.last_caught_up_ms.max(self.last_fetch_ms);
        }
        self.log_end_offset = fetch_offset;
        self.last_fetch_leader_leo = self.last_fetch_leader_leo.max(leader_leo);
        self.last_fetch_ms = now_ms;
    }

    /// Kafka's `ReplicaState.isCaughtUp`: at the leader's LEO, or caught up within the lag.
    pub fn is_caught_up(&self, leader_leo: Offset, now_ms: i64, lag_max_ms: i64) -> bool {
        self.log_end_offset == leader_leo
            || now_ms.saturating_sub(self.last_caught_up_ms) <= lag_max_ms
    }
}

/// The ISR change in flight at the controller, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingIsrChange {
    None,
    Expand { new_isr: Vec<BrokerId> },
    Shrink { new_isr: Vec<BrokerId> },
}

/// An AlterPartition to send: the ISR wanted and the epochs it is a compare-and-set on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub new_isr: Vec<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchOutcome {
    /// The new HW, if this fetch advanced it (wake waiting produces and consumers).
    pub hw_advanced: Option<Offset>,
    /// An ISR expansion to send to the controller.
    pub propose: Option<IsrProposal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AcksAllError {
    /// NOT_ENOUGH_REPLICAS (19): refused before the append.
    #[error("the ISR has {isr} replicas, fewer than the {min} min.insync.replicas requires")]
    NotEnoughReplicas { isr: usize, min: usize },
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND (20): appended and committed, but the ISR shrank.
    #[error("written, but the ISR has {isr} replicas, fewer than the {min} required")]
    NotEnoughReplicasAfterAppend { isr: usize, min: usize },
}

impl AcksAllError {
    /// The Kafka error code to answer the produce with.
    pub fn response_error(&self) -> kafka_protocol::ResponseError {
        match self {
            AcksAllError::NotEnoughReplicas { .. } => {
                kafka_protocol::ResponseError::NotEnoughReplicas
            }
            AcksAllError::NotEnoughReplicasAfterAppend { .. } => {
                kafka_protocol::ResponseError::NotEnoughReplicasAfterAppend
            }
        }
    }
}

/// Where an acks=all produce stands (Kafka's `checkEnoughReplicasReachOffset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcksAllStatus {
    /// The HW has not passed the batch yet.
    Pending,
    /// Answer the produce with this.
    Done(Result<(), AcksAllError>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderState {
    me: BrokerId,
    leader_epoch: LeaderEpoch,
    partition_epoch: PartitionEpoch,
    /// The assignment, in the controller's order.
    replicas: Vec<BrokerId>,
    /// The committed ISR, as the controller last gave it.
    isr: Vec<BrokerId>,
    pending: PendingIsrChange,
    followers: BTreeMap<BrokerId, FollowerState>,
    high_watermark: Offset,
    /// The leader's LEO when it took this epoch: a follower joins only once it reached it.
    epoch_start_offset: Offset,
    leo: Offset,
    /// The latest `now_ms` seen, for the calls that carry no time.
    clock_ms: i64,
    config: LeaderConfig,
}

impl LeaderState {
    /// Becoming leader at `leader_epoch` with the controller's ISR; HW starts at `initial_hw`
    /// (clamped to `leo`), what the caller knew as follower. Followers start with an unknown
    /// LEO, and ISR members as caught up now (Kafka resets them so they are not shrunk at
    /// once). The HW may already advance here (ISR = the leader alone): read
    /// [`high_watermark`](Self::high_watermark) after.
    #[allow(clippy::too_many_arguments)] // the become-leader record, field by field
    pub fn new(
        me: BrokerId,
        replicas: Vec<BrokerId>,
        isr: Vec<BrokerId>,
        leader_epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
        epoch_start_offset: Offset,
        leo: Offset,
        initial_hw: Offset,
        now_ms: i64,
        config: LeaderConfig,
    ) -> Self {
        let followers = replicas
            .iter()
            .filter(|&&r| r != me)
            .map(|&r| (r, FollowerState::reset(isr.contains(&r), now_ms)))
            .collect();
        let mut state = LeaderState {
            me,
            leader_epoch,
            partition_epoch,
            replicas,
            isr,
            pending: PendingIsrChange::None,
            followers,
            high_watermark: initial_hw.min(leo),
            epoch_start_offset,
            leo,
            clock_ms: now_ms,
            config,
        };
        state.maybe_advance_hw(now_ms);
        state
    }

    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// The committed ISR.
    pub fn isr(&self) -> &[BrokerId] {
        &self.isr
    }

    /// The committed ISR plus a pending expansion; a pending shrink still counts the
    /// replicas it would remove.
    pub fn maximal_isr(&self) -> Vec<BrokerId> {
        match &self.pending {
            PendingIsrChange::Expand { new_isr } => {
                let mut all = self.isr.clone();
                all.extend(new_isr.iter().filter(|r| !self.isr.contains(r)));
                all
            }
            PendingIsrChange::None | PendingIsrChange::Shrink { .. } => self.isr.clone(),
        }
    }

    pub fn leader_epoch(&self) -> LeaderEpoch {
        self.leader_epoch
    }

    pub fn partition_epoch(&self) -> PartitionEpoch {
        self.partition_epoch
    }

    pub fn replicas(&self) -> &[BrokerId] {
        &self.replicas
    }

    pub fn pending(&self) -> &PendingIsrChange {
        &self.pending
    }

    /// The change in flight, as a proposal to send again after a retriable failure (a
    /// network error, a controller failover).
    pub fn pending_proposal(&self) -> Option<IsrProposal> {
        match &self.pending {
            PendingIsrChange::None => None,
            PendingIsrChange::Expand { new_isr } | PendingIsrChange::Shrink { new_isr } => {
                Some(self.proposal(new_isr.clone()))
            }
        }
    }

    pub fn log_end_offset(&self) -> Offset {
        self.leo
    }

    pub fn epoch_start_offset(&self) -> Offset {
        self.epoch_start_offset
    }

    /// The leader appended: its LEO moved. Returns the new HW if it advanced (an ISR of the
    /// leader alone, RF = 1).
    pub fn on_leader_append(&mut self, leo: Offset) -> Option<Offset> {
        // The leader's log only grows while it leads (truncation happens as follower).
        self.leo = self.leo.max(leo);
        self.maybe_advance_hw(self.clock_ms)
    }

    /// A follower fetched at `fetch_offset` (its LEO) at `now_ms`, when the leader's LEO was
    /// `leader_leo`. Updates its caught-up time, maybe proposes adding it to the ISR, and
    /// returns the new HW if it advanced. A broker that is not a replica is ignored: the
    /// caller answers it NOT_LEADER_OR_FOLLOWER (see [`is_follower`](Self::is_follower)).
    pub fn on_follower_fetch(
        &mut self,
        follower: BrokerId,
        fetch_offset: Offset,
        leader_leo: Offset,
        now_ms: i64,
    ) -> FetchOutcome {
        self.clock_ms = self.clock_ms.max(now_ms);
        // The read may have seen an append not yet reported by on_leader_append.
        self.leo = self.leo.max(leader_leo);
        let Some(state) = self.followers.get_mut(&follower) else {
            return FetchOutcome::default();
        };
        state.update_fetch(fetch_offset, leader_leo, now_ms);
        let eligible = state.isr_eligible;
        // Kafka checks the expansion against the HW before this fetch moves it.
        let propose = if self.pending == PendingIsrChange::None
            && !self.isr.contains(&follower)
            && eligible
            && fetch_offset >= self.high_watermark
            && fetch_offset >= self.epoch_start_offset
        {
            let mut new_isr = self.isr.clone();
            new_isr.push(follower);
            self.pending = PendingIsrChange::Expand {
                new_isr: new_isr.clone(),
            };
            Some(self.proposal(new_isr))
        } else {
            None
        };
        let hw_advanced = self.maybe_advance_hw(now_ms);
        FetchOutcome {
            hw_advanced,
            propose,
        }
    }

    /// The periodic check (Kafka runs it every `replica.lag.time.max.ms / 2`): the shrink to
    /// propose, if an ISR follower has not caught up within the lag. Never removes the
    /// leader; nothing while a change is in flight.
    pub fn check_shrink(&mut self, now_ms: i64) -> Option<IsrProposal> {
        self.clock_ms = self.clock_ms.max(now_ms);
        if self.pending != PendingIsrChange::None {
            return None;
        }
        let lag = self.config.replica_lag_time_max_ms;
        let out_of_sync = |r: &BrokerId| {
            *r != self.me
                && self
                    .followers
                    .get(r)
                    .is_none_or(|f| !f.is_caught_up(self.leo, now_ms, lag))
        };
        if !self.isr.iter().any(out_of_sync) {
            return None;
        }
        let new_isr: Vec<BrokerId> = self
            .isr
            .iter()
            .copied()
            .filter(|r| !out_of_sync(r))
            .collect();
        self.pending = PendingIsrChange::Shrink {
            new_isr: new_isr.clone(),
        };
        Some(self.proposal(new_isr))
    }

    /// The controller accepted the change in flight: it answers with the ISR and partition
    /// epoch it committed. Returns the new HW if it advanced (a shrink can free it). An
    /// answer with no change in flight (metadata overtook it) or with an older partition
    /// epoch is stale and ignored, as Kafka does; a stale one leaves the change pending until
    /// [`on_partition_state`](Self::on_partition_state). The caller passes only answers to
    /// this leader epoch's proposals (Kafka drops the others).
    pub fn on_isr_committed(
        &mut self,
        isr: Vec<BrokerId>,
        partition_epoch: PartitionEpoch,
    ) -> Option<Offset> {
        if self.pending == PendingIsrChange::None || partition_epoch < self.partition_epoch {
            return None;
        }
        self.isr = isr;
        self.partition_epoch = partition_epoch;
        self.pending = PendingIsrChange::None;
        self.maybe_advance_hw(self.clock_ms)
    }

    /// The controller refused the change and said it was not applied (INELIGIBLE_REPLICA,
    /// OPERATION_NOT_ATTEMPTED): back to the committed ISR. For FENCED_LEADER_EPOCH or
    /// INVALID_UPDATE_VERSION do not call this: our view is stale, so Kafka keeps the change
    /// pending (proposing nothing more) until metadata brings the newer partition state.
    pub fn on_isr_rejected(&mut self) {
        self.pending = PendingIsrChange::None;
    }

    /// Metadata applied a newer partition state with the same leader (e.g. the controller
    /// removed a fenced broker, or a reassignment changed the replicas): adopt it, drop any
    /// change in flight. Followers that stay keep their state (no new epoch, no reset); new
    /// ones start unknown. An older partition epoch is ignored. Returns the new HW if it
    /// advanced.
    pub fn on_partition_state(
        &mut self,
        replicas: Vec<BrokerId>,
        isr: Vec<BrokerId>,
        partition_epoch: PartitionEpoch,
    ) -> Option<Offset> {
        if partition_epoch < self.partition_epoch {
            return None;
        }
        self.followers
            .retain(|r, _| replicas.contains(r) && *r != self.me);
        for &r in &replicas {
            if r != self.me {
                self.followers
                    .entry(r)
                    .or_insert_with(|| FollowerState::reset(false, NEVER_MS));
            }
        }
        self.replicas = replicas;
        self.isr = isr;
        self.partition_epoch = partition_epoch;
        self.pending = PendingIsrChange::None;
        self.maybe_advance_hw(self.clock_ms)
    }

    /// Metadata says the broker is fenced or shutting down (`false`), or back (`true`).
    /// Returns the new HW if it advanced (an ineligible follower outside the ISR no longer
    /// holds it back).
    pub fn set_isr_eligible(&mut self, follower: BrokerId, eligible: bool) -> Option<Offset> {
        if let Some(f) = self.followers.get_mut(&follower) {
            f.isr_eligible = eligible;
        }
        self.maybe_advance_hw(self.clock_ms)
    }

    /// Recomputes the HW at `now_ms`; returns it if it advanced. Call it with the periodic
    /// check: a caught-up follower outside the ISR that went silent stops holding the HW
    /// back once its lag expires, and no fetch or append may come to notice.
    pub fn maybe_advance_hw(&mut self, now_ms: i64) -> Option<Offset> {
        self.clock_ms = self.clock_ms.max(now_ms);
        if self.under_min_isr() {
            return None;
        }
        let lag = self.config.replica_lag_time_max_ms;
        let mut candidate = self.leo;
        for (id, f) in &self.followers {
            let waited_for = self.in_maximal_isr(*id)
                || (f.isr_eligible && f.is_caught_up(self.leo, self.clock_ms, lag));
            if waited_for {
                candidate = candidate.min(f.log_end_offset);
            }
        }
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            Some(candidate)
        } else {
            None
        }
    }

    /// `min.insync.replicas` as the topic config has it now (it may change at runtime; Kafka
    /// reads it on every acks=all produce). Returns the new HW if it advanced (a lower
    /// minimum can free it).
    pub fn set_min_insync_replicas(&mut self, min_insync_replicas: usize) -> Option<Offset> {
        if self.config.min_insync_replicas == min_insync_replicas {
            return None;
        }
        self.config.min_insync_replicas = min_insync_replicas;
        self.maybe_advance_hw(self.clock_ms)
    }

    /// acks=all admission before the append: the committed ISR must reach the min ISR.
    pub fn check_acks_all_admission(&self) -> Result<(), AcksAllError> {
        let min = self.effective_min_isr();
        if self.isr.len() < min {
            return Err(AcksAllError::NotEnoughReplicas {
                isr: self.isr.len(),
                min,
            });
        }
        Ok(())
    }

    /// Kafka's `checkEnoughReplicasReachOffset` for a produce whose last offset is
    /// `last_offset`: pending until the HW passes it; then done, with
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the (maximal, as Kafka counts) ISR fell under the
    /// min ISR meanwhile.
    pub fn acks_all_status(&self, last_offset: Offset) -> AcksAllStatus {
        if self.high_watermark <= last_offset {
            return AcksAllStatus::Pending;
        }
        let min = self.effective_min_isr();
        let isr = self.maximal_isr().len();
        if isr < min {
            AcksAllStatus::Done(Err(AcksAllError::NotEnoughReplicasAfterAppend { isr, min }))
        } else {
            AcksAllStatus::Done(Ok(()))
        }
    }

    /// A follower's state, for metrics (lag in offsets and in time).
    pub fn follower(&self, id: BrokerId) -> Option<&FollowerState> {
        self.followers.get(&id)
    }

    /// A follower's fetch reported its log start offset. Returns whether it changed (then
    /// the [low watermark](Self::low_watermark) may have moved).
    pub fn on_follower_log_start(&mut self, follower: BrokerId, log_start: Offset) -> bool {
        let Some(state) = self.followers.get_mut(&follower) else {
            return false;
        };
        let changed = state.log_start_offset != log_start;
        state.log_start_offset = log_start;
        changed
    }

    /// Kafka's `lowWatermarkIfLeader`: the smallest log start offset over the leader's own
    /// (`own_log_start`) and those its followers on live brokers reported. A follower not
    /// heard from yet counts as [`UNKNOWN_OFFSET`], so DeleteRecords waits for its fetch.
    /// Fenced brokers and those in controlled shutdown are not waited for (Kafka's
    /// `hasAliveBroker`, here the same flag that keeps them out of the ISR).
    pub fn low_watermark(&self, own_log_start: Offset) -> Offset {
        self.followers
            .values()
            .filter(|f| f.isr_eligible)
            .map(|f| f.log_start_offset)
            .fold(own_log_start, std::cmp::min)
    }

    /// Whether `id` is a follower replica of this partition (fetches from others are refused).
    pub fn is_follower(&self, id: BrokerId) -> bool {
        self.followers.contains_key(&id)
    }

    /// The committed ISR is smaller than the effective min ISR (Kafka's UnderMinIsr).
    pub fn under_min_isr(&self) -> bool {
        self.isr.len() < self.effective_min_isr()
    }

    /// `min.insync.replicas` capped by the replica count (Kafka 3.7+, KAFKA-15583), so a
    /// misconfigured minimum above the RF does not block the partition forever.
    pub fn effective_min_isr(&self) -> usize {
        self.config
            .min_insync_replicas
            .min(self.followers.len() + 1)
    }

    fn in_maximal_isr(&self, id: BrokerId) -> bool {
        self.isr.contains(&id)
            || matches!(&self.pending, PendingIsrChange::Expand { new_isr } if new_isr.contains(&id))
    }

    fn proposal(&self, new_isr: Vec<BrokerId>) -> IsrProposal {
        IsrProposal {
            new_isr,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
        }
    }
}

#[cfg(test)]
#[path = "leader_state_tests.rs"]
mod tests;
