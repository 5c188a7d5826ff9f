//! The active controller's decisions (the Raft leader's): pure functions of the committed
//! metadata, the request and the time, returning the records to propose. It never changes
//! the metadata itself: its decisions take effect when the log commits them and they are
//! applied ([`ClusterMetadata::apply`]), on every broker alike.
//!
//! Decisions are made on the committed state (within one batch, on it plus the batch's
//! earlier records), so two made before either commits may conflict; the records carry the versions they were decided on, and the later one is
//! skipped when applied. To keep from proposing the same thing over and over while it is in
//! flight, the controller remembers what it proposed, for `retry_ms`.
//!
//! Liveness is soft state kept here: the time of each broker's last heartbeat. A controller
//! that just became active has seen no heartbeat, so every broker gets one full session of
//! grace from the moment of activation before it can be fenced.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::cluster_metadata::{ClusterMetadata, PartitionState, TopicState};
use super::election::partition_change;
use super::error::ControllerError;
use super::records::{BrokerFencing, MetadataRecord, PartitionChange, ProducerIdBlockAllocation};
use crate::model::PRODUCER_ID_BLOCK_SIZE;
use crate::model::{BrokerEpoch, BrokerId, MetadataOffset, PartitionEpoch};

/// The topic property that allows electing a replica outside the ISR.
pub const UNCLEAN_ELECTION_CONFIG: &str = "unclean.leader.election.enable";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `broker.session.timeout.ms`
    pub session_timeout_ms: u64,
    /// `default.replication.factor`
    pub default_replication_factor: i32,
    /// `num.partitions`
    pub default_partitions: i32,
    /// The broker default of `unclean.leader.election.enable`.
    pub unclean_leader_election: bool,
    /// How long a proposal may take to commit before the same decision is proposed again.
    pub retry_ms: u64,
    /// Whether followers copy the leader's log. Until they do (issue 16), a new partition's
    /// ISR is its leader alone: naming the other replicas in sync would let a failover elect
    /// an empty log.
    pub followers_replicate: bool,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            session_timeout_ms: 9_000,
            default_replication_factor: 1,
            default_partitions: 1,
            unclean_leader_election: false,
            retry_ms: 1_000,
            followers_replicate: true,
        }
    }
}

/// A decision already proposed (keyed by the versions it was made on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Intent {
    Fence(BrokerId, BrokerEpoch),
    Unfence(BrokerId, BrokerEpoch),
    Elect(Uuid, u32, PartitionEpoch),
}

#[derive(Debug, Clone)]
pub struct ActiveController {
    pub(super) config: ControllerConfig,
    /// When this controller became active: the start of every broker's grace period.
    activated_ms: u64,
    /// Last heartbeat (or registration) per broker, since activation.
    last_heartbeat_ms: BTreeMap<BrokerId, u64>,
    in_flight: BTreeMap<Intent, u64>,
}

impl ActiveController {
    pub fn new(config: ControllerConfig, now_ms: u64) -> ActiveController {
        ActiveController {
            config,
            activated_ms: now_ms,
            last_heartbeat_ms: BTreeMap::new(),
            in_flight: BTreeMap::new(),
        }
    }

    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    pub(super) fn touch(&mut self, broker: BrokerId, now_ms: u64) {
        self.last_heartbeat_ms.insert(broker, now_ms);
    }

    /// Whether `broker`'s session (or the grace period) has run out at `now_ms`.
    pub fn session_expired(&self, broker: BrokerId, now_ms: u64) -> bool {
        let last = self
            .last_heartbeat_ms
            .get(&broker)
            .copied()
            .unwrap_or(self.activated_ms)
            .max(self.activated_ms);
        now_ms.saturating_sub(last) > self.config.session_timeout_ms
    }

    /// True (and remembered) unless the same decision was proposed within `retry_ms`.
    fn first_proposal(&mut self, intent: Intent, now_ms: u64) -> bool {
        match self.in_flight.get(&intent) {
            Some(at) if now_ms.saturating_sub(*at) < self.config.retry_ms => false,
            _ => {
                self.in_flight.insert(intent, now_ms);
                true
            }
        }
    }

    pub(super) fn unclean_allowed(&self, topic: &TopicState) -> bool {
        topic
            .configs
            .get(UNCLEAN_ELECTION_CONFIG)
            .map_or(self.config.unclean_leader_election, |v| {
                v.trim().eq_ignore_ascii_case("true")
            })
    }

    /// The periodic work: fences brokers whose session ran out, and elects leaders where a
    /// partition has none but could (a retry of decisions whose records were skipped).
    pub fn tick(&mut self, meta: &ClusterMetadata, now_ms: u64) -> Vec<MetadataRecord> {
        let retry = self.config.retry_ms;
        self.in_flight
            .retain(|_, at| now_ms.saturating_sub(*at) < retry);
        let expired: Vec<(BrokerId, BrokerEpoch)> = meta
            .brokers()
            .filter(|b| !b.fenced && self.session_expired(b.id, now_ms))
            .map(|b| (b.id, b.epoch))
            .collect();
        if expired.is_empty() {
            return self.elect_leaderless(meta, None, now_ms);
        }
        // Each decision sees the ones before it in this batch (applied to a scratch copy;
        // topics are shared until changed), so fencing two brokers that share an ISR does
        // not make the second one's changes stale.
        let mut scratch = meta.clone();
        let mut next = meta.applied_offset().map_or(1, |o| o.0 + 1);
        let mut records = Vec::new();
        for (id, epoch) in expired {
            let batch = self.fence_records(&scratch, id, epoch, now_ms);
            for r in &batch {
                let _ = scratch.apply(MetadataOffset(next), r);
                next += 1;
            }
            records.extend(batch);
        }
        records.extend(self.elect_leaderless(&scratch, None, now_ms));
        records
    }

    /// Takes `broker` out of every leadership and shared ISR, then fences it (the fence
    /// record is skipped on apply if any of those changes was).
    pub(super) fn fence_records(
        &mut self,
        meta: &ClusterMetadata,
        broker: BrokerId,
        epoch: BrokerEpoch,
        now_ms: u64,
    ) -> Vec<MetadataRecord> {
        if !self.first_proposal(Intent::Fence(broker, epoch), now_ms) {
            return Vec::new();
        }
        let acceptable = |b: BrokerId| b != broker && meta.is_unfenced(b);
        let without = |p: &PartitionState| {
            let involved = p.leader == Some(broker) || p.isr.contains(&broker);
            involved.then(|| p.isr.iter().copied().filter(|b| *b != broker).collect())
        };
        let mut records: Vec<MetadataRecord> = self
            .partition_changes(meta, without, acceptable)
            .into_iter()
            .map(MetadataRecord::PartitionChange)
            .collect();
        records.push(MetadataRecord::FenceBroker(BrokerFencing {
            broker_id: broker,
            broker_epoch: epoch,
        }));
        records
    }

    /// Unfences `broker` and gives it the leaderless partitions it can now lead.
    pub(super) fn unfence_records(
        &mut self,
        meta: &ClusterMetadata,
        broker: BrokerId,
        epoch: BrokerEpoch,
        now_ms: u64,
    ) -> Vec<MetadataRecord> {
        if !self.first_proposal(Intent::Unfence(broker, epoch), now_ms) {
            return Vec::new();
        }
        let mut records = vec![MetadataRecord::UnfenceBroker(BrokerFencing {
            broker_id: broker,
            broker_epoch: epoch,
        })];
        records.extend(self.elect_leaderless(meta, Some(broker), now_ms));
        records
    }

    /// Leaders for partitions without one, counting `joining` as unfenced (its unfence
    /// record comes first in the same batch).
    fn elect_leaderless(
        &mut self,
        meta: &ClusterMetadata,
        joining: Option<BrokerId>,
        now_ms: u64,
    ) -> Vec<MetadataRecord> {
        let acceptable = |b: BrokerId| Some(b) == joining || meta.is_unfenced(b);
        let leaderless = |p: &PartitionState| p.leader.is_none().then(|| p.isr.clone());
        let changes = self.partition_changes(meta, leaderless, acceptable);
        changes
            .into_iter()
            .filter(|c| {
                let intent = Intent::Elect(c.topic_id, c.partition, c.from_partition_epoch);
                self.first_proposal(intent, now_ms)
            })
            .map(MetadataRecord::PartitionChange)
            .collect()
    }

    /// The changes of every partition for which `target_isr` gives a target ISR, electing
    /// among the `acceptable` brokers.
    fn partition_changes(
        &self,
        meta: &ClusterMetadata,
        target_isr: impl Fn(&PartitionState) -> Option<Vec<BrokerId>>,
        acceptable: impl Fn(BrokerId) -> bool + Copy,
    ) -> Vec<PartitionChange> {
        let mut changes = Vec::new();
        for topic in meta.topics() {
            let unclean = self.unclean_allowed(topic);
            for (i, p) in topic.partitions.iter().enumerate() {
                let Some(target) = target_isr(p) else {
                    continue;
                };
                let index = u32::try_from(i).unwrap_or(u32::MAX);
                changes.extend(partition_change(
                    topic.id, index, p, &target, acceptable, unclean,
                ));
            }
        }
        changes
    }

    /// A block of [`PRODUCER_ID_BLOCK_SIZE`] producer ids for `broker` (InitProducerId needs ids unique
    /// cluster-wide). Two blocks decided on the same state start at the same id; only the
    /// first to commit is applied, and the broker asks again.
    pub fn allocate_producer_ids(
        &mut self,
        meta: &ClusterMetadata,
        broker: BrokerId,
        broker_epoch: BrokerEpoch,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        self.check_broker_epoch(meta, broker, broker_epoch)?;
        let start = meta.next_producer_id();
        if start.checked_add(PRODUCER_ID_BLOCK_SIZE).is_none() {
            return Err(ControllerError::ProducerIdsExhausted);
        }
        Ok(vec![MetadataRecord::ProducerIdBlock(
            ProducerIdBlockAllocation {
                broker_id: broker,
                broker_epoch,
                start,
                size: PRODUCER_ID_BLOCK_SIZE,
            },
        )])
    }

    pub(super) fn check_broker_epoch(
        &self,
        meta: &ClusterMetadata,
        broker: BrokerId,
        epoch: BrokerEpoch,
    ) -> Result<(), ControllerError> {
        let registration = meta
            .broker(broker)
            .ok_or(ControllerError::BrokerNotRegistered(broker))?;
        if registration.epoch != epoch {
            return Err(ControllerError::StaleBrokerEpoch {
                broker_id: broker,
                given: epoch,
                current: registration.epoch,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "active_controller_tests.rs"]
mod tests;
