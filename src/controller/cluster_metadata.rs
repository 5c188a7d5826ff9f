//! The cluster metadata: the value every broker builds by applying the committed metadata log
//! in order. `apply` is pure and deterministic, so every broker that applied the same prefix
//! holds the same value.
//!
//! Invariants after every apply (a record that would break one is skipped, see [`Skipped`]):
//! every partition has distinct replicas and a non-empty ISR ⊆ replicas; its leader is `None`
//! or an unfenced broker in the ISR; a fenced broker is in no ISR with other members (it may
//! stay the sole member, leaderless); leader and partition epochs never decrease.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::delta::MetadataDelta;
use super::records::{
    BrokerFencing, CreatePartitions, CreateTopic, MetadataRecord, NewPartition, PartitionChange,
    ProducerIdBlockAllocation, RegisterBroker, SetBrokerConfig, SetConfig,
};
// The plain values the metadata is made of live below the controller, so that every shard's
// published image (`metadata::image`) shares them without importing the controller.
pub use crate::metadata::cluster_state::{
    BrokerConfigs, BrokerRegistration, MetadataSnapshot, PartitionState, TopicState,
};
use crate::model::ProducerIdBlock;
use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, MetadataOffset, PartitionEpoch};

/// Why a committed record changed nothing: it was decided on a state that no longer holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skipped {
    #[error("offset {offset} is not after the last applied {last}")]
    OffsetNotAfter {
        last: MetadataOffset,
        offset: MetadataOffset,
    },
    #[error("broker {0} is not registered with that epoch")]
    BrokerEpoch(BrokerId),
    #[error("broker {0} still holds a live registration")]
    BrokerStillRegistered(BrokerId),
    #[error("broker {0} still leads a partition or shares an ISR")]
    BrokerStillInUse(BrokerId),
    #[error("broker {0} is already in that state")]
    NoChange(BrokerId),
    #[error("topic '{0}' exists")]
    TopicExists(String),
    #[error("topic {0} does not exist")]
    UnknownTopic(Uuid),
    #[error("topic {topic_id} partition {partition}: {reason}")]
    Partition {
        topic_id: Uuid,
        partition: u32,
        reason: &'static str,
    },
    #[error("the producer id block does not start at the next free id")]
    ProducerIdBlock,
}

/// Why a snapshot was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSnapshot {
    #[error("broker {0} appears twice")]
    DuplicateBroker(BrokerId),
    #[error("topic '{0}' appears twice")]
    DuplicateTopic(String),
    #[error("{0}")]
    Partition(Skipped),
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// The last offset applied (skipped records included).
    applied: Option<MetadataOffset>,
    brokers: BTreeMap<BrokerId, BrokerRegistration>,
    /// Per topic behind an `Arc`, so a publisher hands a shard the topics a delta names
    /// without copying the others.
    topics: BTreeMap<Uuid, Arc<TopicState>>,
    topic_ids: BTreeMap<String, Uuid>,
    /// The slot the next new partition gets (round-robin, as the single-node metadata does).
    next_slot: usize,
    /// The first producer id not yet handed out.
    next_producer_id: i64,
    /// Dynamic broker configs (behind an `Arc`: every published image shares them).
    broker_configs: Arc<BrokerConfigs>,
}

impl ClusterMetadata {
    pub fn new() -> ClusterMetadata {
        ClusterMetadata::default()
    }

    /// The whole state as plain data, for a snapshot of the log up to `applied_offset`.
    pub fn to_snapshot(&self) -> MetadataSnapshot {
        MetadataSnapshot {
            applied: self.applied,
            brokers: self.brokers.values().cloned().collect(),
            topics: self.topics.values().map(|t| TopicState::clone(t)).collect(),
            next_slot: self.next_slot,
            next_producer_id: self.next_producer_id,
            broker_configs: BrokerConfigs::clone(&self.broker_configs),
        }
    }

    /// The state a snapshot describes; refused if it breaks the invariants (a snapshot is
    /// read from disk or a peer, so it is checked as untrusted input).
    pub fn from_snapshot(snapshot: MetadataSnapshot) -> Result<ClusterMetadata, InvalidSnapshot> {
        let mut meta = ClusterMetadata {
            applied: snapshot.applied,
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
            topic_ids: BTreeMap::new(),
            next_slot: snapshot.next_slot,
            next_producer_id: snapshot.next_producer_id,
            broker_configs: Arc::new(snapshot.broker_configs),
        };
        for b in snapshot.brokers {
            if meta.brokers.insert(b.id, b.clone()).is_some() {
                return Err(InvalidSnapshot::DuplicateBroker(b.id));
            }
        }
        for t in snapshot.topics {
            if meta.topics.contains_key(&t.id) || meta.topic_ids.contains_key(&t.name) {
                return Err(InvalidSnapshot::DuplicateTopic(t.name));
            }
            for (i, p) in t.partitions.iter().enumerate() {
                let index = u32::try_from(i).unwrap_or(u32::MAX);
                meta.check_partition(t.id, index, &p.replicas, &p.isr, p.leader)
                    .map_err(InvalidSnapshot::Partition)?;
            }
            meta.topic_ids.insert(t.name.clone(), t.id);
            meta.topics.insert(t.id, Arc::new(t));
        }
        Ok(meta)
    }

    pub fn applied_offset(&self) -> Option<MetadataOffset> {
        self.applied
    }

    pub fn broker(&self, id: BrokerId) -> Option<&BrokerRegistration> {
        self.brokers.get(&id)
    }

    pub fn brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values()
    }

    /// Registered and not fenced: may lead, may be given new replicas.
    pub fn is_unfenced(&self, id: BrokerId) -> bool {
        self.brokers.get(&id).is_some_and(|b| !b.fenced)
    }

    pub fn topic(&self, id: Uuid) -> Option<&Arc<TopicState>> {
        self.topics.get(&id)
    }

    pub fn topic_by_name(&self, name: &str) -> Option<&Arc<TopicState>> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    /// Partition `partition` of the topic named `name`, as a client names it.
    pub fn partition_by_name(&self, name: &str, partition: i32) -> Option<&PartitionState> {
        let topic = self.topic_by_name(name)?;
        topic.partitions.get(usize::try_from(partition).ok()?)
    }

    pub fn topics(&self) -> impl Iterator<Item = &Arc<TopicState>> {
        self.topics.values()
    }

    pub fn next_slot(&self) -> usize {
        self.next_slot
    }

    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    /// Dynamic broker configs by resource: "" the cluster-wide defaults, a broker id that
    /// broker's own.
    pub fn broker_configs(&self) -> &Arc<BrokerConfigs> {
        &self.broker_configs
    }

    /// Applies the committed record at `offset`. A stale record changes nothing but its
    /// offset still counts as applied (it is part of the log).
    pub fn apply(
        &mut self,
        offset: MetadataOffset,
        record: &MetadataRecord,
    ) -> Result<MetadataDelta, Skipped> {
        if let Some(last) = self.applied {
            if offset <= last {
                return Err(Skipped::OffsetNotAfter { last, offset });
            }
        }
        self.applied = Some(offset);
        match record {
            MetadataRecord::RegisterBroker(r) => self.register(offset, r),
            MetadataRecord::FenceBroker(f) => self.fence(f),
            MetadataRecord::UnfenceBroker(f) => self.unfence(f),
            MetadataRecord::CreateTopic(t) => self.create_topic(t),
            MetadataRecord::DeleteTopic { topic_id } => self.delete_topic(*topic_id),
            MetadataRecord::CreatePartitions(c) => self.create_partitions(c),
            MetadataRecord::SetConfig(c) => self.set_config(c),
            MetadataRecord::PartitionChange(c) => self.change_partition(c),
            MetadataRecord::ProducerIdBlock(b) => self.allocate_producer_ids(b),
            MetadataRecord::SetBrokerConfig(c) => Ok(self.set_broker_config(c)),
        }
    }

    fn register(
        &mut self,
        offset: MetadataOffset,
        r: &RegisterBroker,
    ) -> Result<MetadataDelta, Skipped> {
        // The controller fences the earlier registration first (which takes the broker out
        // of leaderships and shared ISRs); replacing a live one would skip that.
        if self.is_unfenced(r.broker_id) {
            return Err(Skipped::BrokerStillRegistered(r.broker_id));
        }
        // A retried registration of the same process: its epoch must not change under it.
        if self
            .brokers
            .get(&r.broker_id)
            .is_some_and(|b| b.incarnation == r.incarnation)
        {
            return Err(Skipped::NoChange(r.broker_id));
        }
        self.brokers.insert(
            r.broker_id,
            BrokerRegistration {
                id: r.broker_id,
                epoch: BrokerEpoch::from(offset),
                incarnation: r.incarnation,
                endpoints: r.endpoints.clone(),
                rack: r.rack.clone(),
                fenced: true,
            },
        );
        Ok(MetadataDelta::broker(r.broker_id))
    }

    fn registration_mut(&mut self, f: &BrokerFencing) -> Result<&mut BrokerRegistration, Skipped> {
        self.brokers
            .get_mut(&f.broker_id)
            .filter(|b| b.epoch == f.broker_epoch)
            .ok_or(Skipped::BrokerEpoch(f.broker_id))
    }

    fn fence(&mut self, f: &BrokerFencing) -> Result<MetadataDelta, Skipped> {
        if self.registration_mut(f)?.fenced {
            return Err(Skipped::NoChange(f.broker_id));
        }
        let in_use = self.topics.values().flat_map(|t| &t.partitions).any(|p| {
            p.leader == Some(f.broker_id) || (p.isr.len() > 1 && p.isr.contains(&f.broker_id))
        });
        if in_use {
            return Err(Skipped::BrokerStillInUse(f.broker_id));
        }
        self.registration_mut(f)?.fenced = true;
        Ok(MetadataDelta::broker(f.broker_id))
    }

    fn unfence(&mut self, f: &BrokerFencing) -> Result<MetadataDelta, Skipped> {
        let b = self.registration_mut(f)?;
        if !b.fenced {
            return Err(Skipped::NoChange(f.broker_id));
        }
        b.fenced = false;
        Ok(MetadataDelta::broker(f.broker_id))
    }

    /// Checks a partition's replicas, ISR and leader against the invariants.
    fn check_partition(
        &self,
        topic_id: Uuid,
        partition: u32,
        replicas: &[BrokerId],
        isr: &[BrokerId],
        leader: Option<BrokerId>,
    ) -> Result<(), Skipped> {
        let bad = |reason| {
            Err(Skipped::Partition {
                topic_id,
                partition,
                reason,
            })
        };
        if replicas.is_empty() || has_duplicates(replicas) {
            return bad("replicas are empty or repeat a broker");
        }
        if !replicas.iter().all(|r| self.brokers.contains_key(r)) {
            return bad("a replica is not a registered broker");
        }
        if isr.is_empty() || has_duplicates(isr) || !isr.iter().all(|r| replicas.contains(r)) {
            return bad("the ISR is empty, repeats a broker or is not within the replicas");
        }
        if isr.len() > 1 && !isr.iter().all(|r| self.is_unfenced(*r)) {
            return bad("a fenced broker would share the ISR");
        }
        if let Some(l) = leader {
            if !isr.contains(&l) || !self.is_unfenced(l) {
                return bad("the leader is not an unfenced member of the ISR");
            }
        }
        Ok(())
    }

    fn new_partitions(
        &self,
        topic_id: Uuid,
        first: usize,
        new: &[NewPartition],
    ) -> Result<Vec<PartitionState>, Skipped> {
        let mut out = Vec::with_capacity(new.len());
        for (i, p) in new.iter().enumerate() {
            let index = u32::try_from(first + i).unwrap_or(u32::MAX);
            self.check_partition(topic_id, index, &p.replicas, &p.isr, p.leader)?;
            out.push(PartitionState {
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
                slot: p.slot,
            });
        }
        Ok(out)
    }

    fn advance_slot(&mut self, new: &[NewPartition]) {
        if let Some(max) = new.iter().map(|p| p.slot).max() {
            self.next_slot = self.next_slot.max(max.saturating_add(1));
        }
    }

    fn create_topic(&mut self, t: &CreateTopic) -> Result<MetadataDelta, Skipped> {
        if self.topic_ids.contains_key(&t.name) || self.topics.contains_key(&t.topic_id) {
            return Err(Skipped::TopicExists(t.name.clone()));
        }
        let partitions = self.new_partitions(t.topic_id, 0, &t.partitions)?;
        self.advance_slot(&t.partitions);
        self.topic_ids.insert(t.name.clone(), t.topic_id);
        self.topics.insert(
            t.topic_id,
            Arc::new(TopicState {
                name: t.name.clone(),
                id: t.topic_id,
                partitions,
                configs: t.configs.clone(),
            }),
        );
        Ok(MetadataDelta::topic(t.topic_id))
    }

    fn delete_topic(&mut self, topic_id: Uuid) -> Result<MetadataDelta, Skipped> {
        let topic = self
            .topics
            .remove(&topic_id)
            .ok_or(Skipped::UnknownTopic(topic_id))?;
        self.topic_ids.remove(&topic.name);
        let mut delta = MetadataDelta::default();
        delta.deleted_topics.insert(topic_id, topic.name.clone());
        Ok(delta)
    }

    fn topic_mut(&mut self, id: Uuid) -> Result<&mut TopicState, Skipped> {
        self.topics
            .get_mut(&id)
            .map(Arc::make_mut)
            .ok_or(Skipped::UnknownTopic(id))
    }

    fn create_partitions(&mut self, c: &CreatePartitions) -> Result<MetadataDelta, Skipped> {
        let count = self
            .topics
            .get(&c.topic_id)
            .ok_or(Skipped::UnknownTopic(c.topic_id))?
            .partitions
            .len();
        if count != c.from_count {
            return Err(Skipped::Partition {
                topic_id: c.topic_id,
                partition: u32::try_from(c.from_count).unwrap_or(u32::MAX),
                reason: "the partition count changed since the decision",
            });
        }
        let added = self.new_partitions(c.topic_id, count, &c.partitions)?;
        self.advance_slot(&c.partitions);
        self.topic_mut(c.topic_id)?.partitions.extend(added);
        Ok(MetadataDelta::topic(c.topic_id))
    }

    fn set_config(&mut self, c: &SetConfig) -> Result<MetadataDelta, Skipped> {
        let topic = self.topic_mut(c.topic_id)?;
        match &c.value {
            Some(v) => topic.configs.insert(c.name.clone(), v.clone()),
            None => topic.configs.remove(&c.name),
        };
        Ok(MetadataDelta::topic(c.topic_id))
    }

    fn set_broker_config(&mut self, c: &SetBrokerConfig) -> MetadataDelta {
        let configs = Arc::make_mut(&mut self.broker_configs);
        match &c.value {
            Some(v) => {
                configs
                    .entry(c.resource.clone())
                    .or_default()
                    .insert(c.name.clone(), v.clone());
            }
            None => {
                if let Some(set) = configs.get_mut(&c.resource) {
                    set.remove(&c.name);
                    if set.is_empty() {
                        configs.remove(&c.resource);
                    }
                }
            }
        }
        MetadataDelta {
            broker_configs: true,
            ..MetadataDelta::default()
        }
    }

    fn change_partition(&mut self, c: &PartitionChange) -> Result<MetadataDelta, Skipped> {
        let stale = |reason| Skipped::Partition {
            topic_id: c.topic_id,
            partition: c.partition,
            reason,
        };
        let current = self
            .topics
            .get(&c.topic_id)
            .ok_or(Skipped::UnknownTopic(c.topic_id))?
            .partitions
            .get(c.partition as usize)
            .ok_or_else(|| stale("no such partition"))?;
        if current.partition_epoch != c.from_partition_epoch {
            return Err(stale("the partition epoch changed since the decision"));
        }
        if c.partition_epoch <= current.partition_epoch || c.leader_epoch < current.leader_epoch {
            return Err(stale("an epoch would not advance"));
        }
        if c.leader != current.leader && c.leader_epoch == current.leader_epoch {
            return Err(stale("a new leader needs a new leader epoch"));
        }
        self.check_partition(c.topic_id, c.partition, &current.replicas, &c.isr, c.leader)?;
        let p = self
            .topic_mut(c.topic_id)?
            .partitions
            .get_mut(c.partition as usize)
            .ok_or_else(|| stale("no such partition"))?;
        p.leader = c.leader;
        p.isr = c.isr.clone();
        p.leader_epoch = c.leader_epoch;
        p.partition_epoch = c.partition_epoch;
        Ok(MetadataDelta::topic(c.topic_id))
    }

    fn allocate_producer_ids(
        &mut self,
        b: &ProducerIdBlockAllocation,
    ) -> Result<MetadataDelta, Skipped> {
        if self.brokers.get(&b.broker_id).map(|r| r.epoch) != Some(b.broker_epoch) {
            return Err(Skipped::BrokerEpoch(b.broker_id));
        }
        let end = b.start.checked_add(b.size);
        let Some(end) = end.filter(|_| b.start == self.next_producer_id && b.size > 0) else {
            return Err(Skipped::ProducerIdBlock);
        };
        self.next_producer_id = end;
        Ok(MetadataDelta {
            producer_id_block: Some((
                b.broker_id,
                ProducerIdBlock {
                    start: b.start,
                    end,
                },
            )),
            ..MetadataDelta::default()
        })
    }
}

fn has_duplicates(ids: &[BrokerId]) -> bool {
    ids.iter().enumerate().any(|(i, id)| ids[..i].contains(id))
}

#[cfg(test)]
#[path = "cluster_metadata_tests.rs"]
mod tests;
