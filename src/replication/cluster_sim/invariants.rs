//! What must hold after every step of the cluster simulation, and after healing
//! (CLUSTER.md, "Tests that prove it", item 2). The history kept here is what the checks
//! compare against: which broker led each epoch, the epochs and HWs seen, every offset's
//! value once visible, and every acks=all acknowledgement.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::controller::cluster_metadata::ClusterMetadata;
use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, PartitionEpoch};

use super::broker::{Broker, Role};
use super::model_log::Batch;

/// An acks=all write the producer was told succeeded.
#[derive(Debug, Clone, Copy)]
pub struct Ack {
    pub partition: usize,
    pub producer: i64,
    pub seq: i32,
    pub value: u64,
    pub offset: i64,
}

impl Ack {
    fn held_by(&self, batch: Option<&Batch>) -> bool {
        batch.is_some_and(|b| (b.producer, b.seq, b.value) == (self.producer, self.seq, self.value))
    }
}

#[derive(Debug, Default)]
pub struct History {
    pub acks: Vec<Ack>,
    leader_of_epoch: BTreeMap<(usize, LeaderEpoch), BrokerId>,
    committed_epochs: BTreeMap<usize, (LeaderEpoch, PartitionEpoch)>,
    /// Per (broker, life, partition): the epochs its metadata view showed last.
    view_epochs: BTreeMap<(BrokerId, u64, usize), (LeaderEpoch, PartitionEpoch)>,
    /// Per (broker, life, partition, epoch) a leader was at: its HW last seen.
    leader_hw: BTreeMap<(BrokerId, u64, usize, LeaderEpoch), i64>,
    /// Per partition, every offset's batch once some replica's HW passed it.
    visible: BTreeMap<usize, Vec<Batch>>,
    /// Per partition, where each (producer, sequence) became visible.
    visible_seq: BTreeMap<(usize, i64, i32), i64>,
    /// (partition, broker) -> the broker's registration when it lost its unflushed tail: it
    /// may still count as in sync, so it is exempt from the ISR checks until it registered
    /// again and no ISR (committed or a leader's) names it.
    pub power_exempt: BTreeMap<(usize, BrokerId), Option<BrokerEpoch>>,
}

fn broker(brokers: &[Broker], id: BrokerId) -> Option<&Broker> {
    brokers.iter().find(|b| b.id == id)
}

impl History {
    pub fn check(
        &mut self,
        brokers: &[Broker],
        meta: &ClusterMetadata,
        topic: Uuid,
    ) -> Result<(), String> {
        let Some(t) = meta.topic(topic) else {
            return Ok(());
        };
        for (p, state) in t.partitions.iter().enumerate() {
            let now = (state.leader_epoch, state.partition_epoch);
            if let Some(last) = self.committed_epochs.insert(p, now) {
                if now.0 < last.0 || now.1 < last.1 {
                    return Err(format!(
                        "p{p}: committed epochs went back from {last:?} to {now:?}"
                    ));
                }
            }
            if let Some(l) = state.leader {
                self.one_leader(p, state.leader_epoch, l, "the metadata")?;
            }
        }
        for b in brokers.iter().filter(|b| b.up) {
            if let Some(view) = b.meta.topic(topic) {
                for (p, s) in view.partitions.iter().enumerate() {
                    let now = (s.leader_epoch, s.partition_epoch);
                    if let Some(last) = self.view_epochs.insert((b.id, b.life, p), now) {
                        if now.0 < last.0 || now.1 < last.1 {
                            return Err(format!("broker {} p{p}: its view's epochs went back from {last:?} to {now:?}", b.id));
                        }
                    }
                }
            }
            for (&p, r) in &b.replicas {
                if r.raw_high_watermark() > r.disk.log.leo() {
                    return Err(format!(
                        "broker {} p{p}: HW {} beyond its log end {} (consumers would see records it lacks)",
                        b.id,
                        r.raw_high_watermark(),
                        r.disk.log.leo()
                    ));
                }
                self.record_visible(
                    b.id,
                    p,
                    &r.disk.log.batches()[..r.high_watermark() as usize],
                )?;
                let Role::Leader(l) = &r.role else {
                    continue;
                };
                self.one_leader(p, l.leader_epoch(), b.id, "a broker's role")?;
                let key = (b.id, b.life, p, l.leader_epoch());
                let hw = l.high_watermark().0;
                if let Some(last) = self.leader_hw.insert(key, hw) {
                    if hw < last {
                        return Err(format!(
                            "broker {} p{p} epoch {:?}: leader HW went back from {last} to {hw}",
                            b.id,
                            l.leader_epoch()
                        ));
                    }
                }
                // In-sync replicas hold the leader's log up to its HW.
                let mine = &r.disk.log.batches()[..r.high_watermark() as usize];
                for &m in l.isr() {
                    if m == b.id || self.power_exempt.contains_key(&(p, m)) {
                        continue;
                    }
                    let theirs = broker(brokers, m)
                        .and_then(|o| o.replicas.get(&p))
                        .map_or(&[][..], |o| o.disk.log.batches());
                    if theirs.len() < mine.len() || theirs[..mine.len()] != *mine {
                        return Err(format!(
                            "p{p}: ISR member {m} of leader {} (epoch {:?}) differs below the HW {}: leader {:?} member {:?}",
                            b.id,
                            l.leader_epoch(),
                            mine.len(),
                            tail(mine),
                            tail(theirs)
                        ));
                    }
                }
            }
        }
        // Acknowledged writes are in every in-sync replica's log.
        for ack in &self.acks {
            let Some(state) = t.partitions.get(ack.partition) else {
                continue;
            };
            for &m in &state.isr {
                if self.power_exempt.contains_key(&(ack.partition, m)) {
                    continue;
                }
                let held = broker(brokers, m)
                    .and_then(|o| o.replicas.get(&ack.partition))
                    .and_then(|o| o.disk.log.get(ack.offset));
                if !ack.held_by(held) {
                    return Err(format!(
                        "acknowledged {ack:?} missing from ISR member {m} of {state:?}: it has {held:?}"
                    ));
                }
            }
        }
        self.release_exemptions(brokers, meta, topic);
        Ok(())
    }

    fn one_leader(
        &mut self,
        p: usize,
        epoch: LeaderEpoch,
        leader: BrokerId,
        seen_in: &str,
    ) -> Result<(), String> {
        let first = *self.leader_of_epoch.entry((p, epoch)).or_insert(leader);
        if first != leader {
            return Err(format!(
                "p{p} epoch {epoch:?}: {seen_in} names leader {leader}, but {first} led it"
            ));
        }
        Ok(())
    }

    /// Everything below a HW is committed: one value per offset, forever, and no producer
    /// sequence twice.
    fn record_visible(&mut self, b: BrokerId, p: usize, prefix: &[Batch]) -> Result<(), String> {
        let seen = self.visible.entry(p).or_default();
        for (i, batch) in prefix.iter().enumerate() {
            match seen.get(i) {
                Some(first) if first != batch => {
                    return Err(format!(
                        "p{p} offset {i}: broker {b} shows {batch:?} below its HW, {first:?} was visible before"
                    ));
                }
                Some(_) => {}
                None => {
                    seen.push(*batch);
                    let key = (p, batch.producer, batch.seq);
                    if let Some(other) = self.visible_seq.insert(key, batch.offset) {
                        return Err(format!(
                            "p{p}: producer {} sequence {} is visible twice, at {other} and {}",
                            batch.producer, batch.seq, batch.offset
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn release_exemptions(&mut self, brokers: &[Broker], meta: &ClusterMetadata, topic: Uuid) {
        let Some(t) = meta.topic(topic) else {
            return;
        };
        self.power_exempt.retain(|&(p, m), lost_at| {
            let registered_again = meta.broker(m).map(|b| b.epoch) != *lost_at;
            let committed = t.partitions.get(p).is_some_and(|s| s.isr.contains(&m));
            let led = brokers.iter().filter(|b| b.up).any(|b| {
                b.replicas
                    .get(&p)
                    .and_then(|r| r.leader_state())
                    .is_some_and(|l| l.isr().contains(&m))
            });
            !registered_again || committed || led
        });
    }

    /// After healing: every partition led, by a broker that knows it; every replica's log
    /// equal to its leader's; every acknowledged write in every log; no sequence twice.
    pub fn check_healed(
        &self,
        brokers: &[Broker],
        meta: &ClusterMetadata,
        topic: Uuid,
    ) -> Result<(), String> {
        let t = meta.topic(topic).ok_or("the topic is gone")?;
        for (p, state) in t.partitions.iter().enumerate() {
            let leader = state
                .leader
                .ok_or_else(|| format!("p{p} leaderless: {state:?}"))?;
            let leading = broker(brokers, leader)
                .and_then(|b| b.replicas.get(&p))
                .ok_or_else(|| format!("p{p}: leader {leader} has no replica"))?;
            match leading.leader_state() {
                Some(l) if l.leader_epoch() == state.leader_epoch => {}
                _ => {
                    return Err(format!(
                        "p{p}: {leader} does not lead at {:?}",
                        state.leader_epoch
                    ))
                }
            }
            let log = leading.disk.log.batches();
            for &r in &state.replicas {
                let replica = broker(brokers, r).and_then(|b| b.replicas.get(&p));
                let theirs = replica.map_or(&[][..], |o| o.disk.log.batches());
                if theirs != log {
                    return Err(format!(
                        "p{p}: replica {r}'s log ({} batches, ends {:?}, epochs {:?}, role {:?}) differs from leader {leader}'s ({}, ends {:?}, epochs {:?}); {state:?}",
                        theirs.len(),
                        tail(theirs),
                        replica.map(|o| o.disk.epochs.entries()),
                        replica.map(|o| &o.role),
                        log.len(),
                        tail(log),
                        leading.disk.epochs.entries(),
                    ));
                }
            }
            let mut seqs = BTreeSet::new();
            for b in log {
                if !seqs.insert((b.producer, b.seq)) {
                    return Err(format!("p{p}: {b:?} is a duplicate"));
                }
            }
            for ack in self.acks.iter().filter(|a| a.partition == p) {
                if !ack.held_by(log.get(ack.offset as usize)) {
                    return Err(format!(
                        "acknowledged {ack:?} lost: the final log has {:?}",
                        log.get(ack.offset as usize)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The last few batches, for messages.
fn tail(log: &[Batch]) -> &[Batch] {
    &log[log.len().saturating_sub(3)..]
}
