//! A seeded simulation of the controller over a model metadata log: brokers register,
//! heartbeat (some heartbeats are lost), crash and restart, pause (SIGSTOP) and resume; proposals are dropped, delayed,
//! duplicated and reordered; the active controller changes (a new one starts with a lagging
//! view and a fresh grace period, and some of its predecessor's proposals still commit).
//! Checked after every step, on the committed metadata: ISR non-empty and within the
//! replicas; a leader is an unfenced ISR member or there is none; a fenced broker shares no
//! ISR; leader and partition epochs never go back, and each leader epoch has one leader;
//! broker epochs never go back; producer-id blocks never overlap; an image fed only deltas
//! equals the metadata (at random steps); every broker's metadata equals the log's first
//! `applied` records replayed (every few steps). At the end, after healing, every partition
//! must have a leader and every broker must be unfenced.
//!
//! A failing seed prints itself; replay it alone with RINGBROKER_CONTROLLER_SIM_SEED=<seed>.
//! RINGBROKER_CONTROLLER_SIM_SEEDS=<n> runs seeds 0..n instead of the default 150.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use uuid::Uuid;

use super::alter_partition::AlterPartitionRequest;
use super::broker_lifecycle::{BrokerRegistrationRequest, Heartbeat};
use super::cluster_metadata::{ClusterMetadata, PartitionState};
use super::delta::MetadataDelta;
use super::error::ControllerError;
use super::records::MetadataRecord;
use super::snapshot::{decode_snapshot, encode_snapshot};
use super::topic_admin::CreateTopicRequest;
use super::{ActiveController, ControllerConfig};
use crate::metadata::MetadataImage;
use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, MetadataOffset, PartitionEpoch};
use crate::util::rng::SeededRng;

const SEEDS: u64 = 150;
const STEPS: usize = 400;
const HEAL_STEPS: usize = 150;
const BROKERS: i32 = 4;
const SESSION_MS: u64 = 3_000;
const HEARTBEAT_MS: u64 = 700;
const SEED_VAR: &str = "RINGBROKER_CONTROLLER_SIM_SEED";
/// How many seeds (from 0) to run instead of [`SEEDS`], for a longer search.
const SEEDS_VAR: &str = "RINGBROKER_CONTROLLER_SIM_SEEDS";
/// Replaying the log for every broker view costs O(log) per broker: every few steps only.
const REPLAY_EVERY: usize = 25;

#[derive(Debug, Default, Clone, Copy)]
struct Faults {
    /// Per thousand, per step or per message.
    drop_proposal: u64,
    duplicate_proposal: u64,
    lose_heartbeat: u64,
    crash: u64,
    pause: u64,
    controller_change: u64,
    /// A leader asking for an ISR change.
    alter_isr: u64,
    /// Maximum proposal delay, ms.
    max_delay_ms: u64,
}

const FAULTY: Faults = Faults {
    drop_proposal: 100,
    duplicate_proposal: 50,
    lose_heartbeat: 150,
    crash: 8,
    pause: 5,
    controller_change: 10,
    alter_isr: 30,
    max_delay_ms: 1_500,
};

struct Proposal {
    deliver_at: u64,
    records: Vec<MetadataRecord>,
}

struct Broker {
    id: BrokerId,
    up: bool,
    incarnation: Uuid,
    epoch: Option<BrokerEpoch>,
    /// What this broker applied: its metadata and how many log records.
    meta: ClusterMetadata,
    applied: usize,
    next_heartbeat_at: u64,
    /// Paused (SIGSTOP) until then: no heartbeats, no applying, memory kept.
    paused_until: u64,
}

/// What was seen across the run, to show the faults were exercised.
#[derive(Debug, Default)]
struct Stats {
    fences: u64,
    unfences: u64,
    leader_changes: u64,
    skipped: u64,
    producer_blocks: u64,
    topics: u64,
    partition_changes: u64,
}

struct Sim {
    rng: SeededRng,
    now: u64,
    /// The committed model log; the record at index i has offset i + 1.
    log: Vec<MetadataRecord>,
    /// The whole log applied.
    committed: ClusterMetadata,
    pending: Vec<Proposal>,
    controller: ActiveController,
    /// The controller's view: a prefix of the log, `controller_applied` records long.
    controller_meta: ClusterMetadata,
    controller_applied: usize,
    brokers: Vec<Broker>,
    /// Per (topic, partition): the last state seen, for the monotonicity checks.
    last_seen: BTreeMap<(Uuid, usize), (Option<BrokerId>, LeaderEpoch, PartitionEpoch)>,
    last_broker_epoch: BTreeMap<BrokerId, BrokerEpoch>,
    /// Per (topic, partition, leader epoch): the one leader (or none) it ever had.
    leader_of_epoch: BTreeMap<(Uuid, usize, LeaderEpoch), Option<BrokerId>>,
    producer_blocks: Vec<(BrokerId, i64, i64)>,
    stats: Stats,
    next_uuid: u128,
    steps: usize,
    /// A shard's copy, updated by merged deltas every few steps.
    image: MetadataImage,
    unpublished: MetadataDelta,
}

fn config() -> ControllerConfig {
    ControllerConfig {
        session_timeout_ms: SESSION_MS,
        default_replication_factor: 2,
        default_partitions: 2,
        unclean_leader_election: false,
        retry_ms: 400,
        followers_replicate: true,
    }
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let brokers = (1..=BROKERS)
            .map(|id| Broker {
                id: BrokerId(id),
                up: true,
                incarnation: Uuid::from_u128(id as u128),
                epoch: None,
                meta: ClusterMetadata::new(),
                applied: 0,
                next_heartbeat_at: 0,
                paused_until: 0,
            })
            .collect();
        Sim {
            rng: SeededRng::new(seed),
            now: 0,
            log: Vec::new(),
            committed: ClusterMetadata::new(),
            pending: Vec::new(),
            controller: ActiveController::new(config(), 0),
            controller_meta: ClusterMetadata::new(),
            controller_applied: 0,
            brokers,
            last_seen: BTreeMap::new(),
            last_broker_epoch: BTreeMap::new(),
            leader_of_epoch: BTreeMap::new(),
            producer_blocks: Vec::new(),
            stats: Stats::default(),
            next_uuid: 1_000,
            steps: 0,
            image: MetadataImage::default(),
            unpublished: MetadataDelta::default(),
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    fn uuid(&mut self) -> Uuid {
        self.next_uuid += 1;
        Uuid::from_u128(self.next_uuid)
    }

    fn propose(&mut self, records: Vec<MetadataRecord>, faults: Faults) {
        if records.is_empty() || self.rng.chance(faults.drop_proposal) {
            return;
        }
        let copies = if self.rng.chance(faults.duplicate_proposal) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = self.below(faults.max_delay_ms + 1);
            self.pending.push(Proposal {
                deliver_at: self.now + delay,
                records: records.clone(),
            });
        }
    }

    /// Commits the proposals that are due (a batch is appended whole).
    fn commit_due(&mut self) -> Result<(), String> {
        let (due, later): (Vec<Proposal>, Vec<Proposal>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.deliver_at <= self.now);
        self.pending = later;
        for p in due {
            for r in p.records {
                self.log.push(r);
                let offset = MetadataOffset(self.log.len() as u64);
                let record = &self.log[self.log.len() - 1];
                match self.committed.apply(offset, record) {
                    Ok(delta) => {
                        match record {
                            MetadataRecord::FenceBroker(_) => self.stats.fences += 1,
                            MetadataRecord::UnfenceBroker(_) => self.stats.unfences += 1,
                            MetadataRecord::CreateTopic(_) => self.stats.topics += 1,
                            MetadataRecord::PartitionChange(_) => self.stats.partition_changes += 1,
                            _ => {}
                        }
                        if let Some((owner, block)) = delta.producer_id_block {
                            self.check_block(owner, block.start, block.end)?;
                        }
                        self.unpublished.merge(delta);
                    }
                    Err(_) => self.stats.skipped += 1,
                }
            }
        }
        Ok(())
    }

    fn check_block(&mut self, owner: BrokerId, start: i64, end: i64) -> Result<(), String> {
        if let Some(other) = self
            .producer_blocks
            .iter()
            .find(|(_, s, e)| start < *e && *s < end)
        {
            return Err(format!(
                "producer ids {start}..{end} of {owner} overlap {other:?}"
            ));
        }
        self.producer_blocks.push((owner, start, end));
        self.stats.producer_blocks += 1;
        Ok(())
    }

    /// Applies up to `max` more log records to a view.
    fn catch_up(
        log: &[MetadataRecord],
        meta: &mut ClusterMetadata,
        applied: &mut usize,
        max: usize,
    ) {
        let end = applied.saturating_add(max).min(log.len());
        for (i, r) in log.iter().enumerate().take(end).skip(*applied) {
            let _ = meta.apply(MetadataOffset(i as u64 + 1), r);
        }
        *applied = end.max(*applied);
    }

    fn change_controller(&mut self) {
        // Raft: each uncommitted entry of the old leader is either lost or committed later.
        let keep: Vec<bool> = (0..self.pending.len())
            .map(|_| self.rng.chance(500))
            .collect();
        let mut keep = keep.into_iter();
        self.pending.retain(|_| keep.next().unwrap_or(false));
        self.controller = ActiveController::new(config(), self.now);
        // A new leader has every committed entry; it acts once it has applied them.
        Self::catch_up(
            &self.log,
            &mut self.controller_meta,
            &mut self.controller_applied,
            usize::MAX,
        );
    }

    fn broker_step(&mut self, i: usize, faults: Faults) -> Result<(), String> {
        if !self.brokers[i].up {
            if self.rng.chance(60) {
                let incarnation = self.uuid();
                // Half the restarts load a snapshot of the log so far instead of replaying it.
                let snapshot = self.rng.chance(500).then(|| {
                    let bytes = encode_snapshot(&self.committed).map_err(|e| e.to_string())?;
                    decode_snapshot(&bytes).map_err(|e| e.to_string())
                });
                let b = &mut self.brokers[i];
                if let Some(loaded) = snapshot {
                    b.meta = loaded?;
                    b.applied = self.log.len();
                }
                b.up = true;
                b.incarnation = incarnation;
                b.epoch = None;
                b.next_heartbeat_at = self.now;
            }
            return Ok(());
        }
        if self.now < self.brokers[i].paused_until {
            return Ok(());
        }
        if self.rng.chance(faults.pause) {
            // Long enough, sometimes, to outlive the session: it wakes up fenced, with a
            // stale view, and its ISR requests must be refused.
            let pause = 1_000 + self.below(2 * SESSION_MS);
            self.brokers[i].paused_until = self.now + pause;
            return Ok(());
        }
        if self.rng.chance(faults.crash) {
            let b = &mut self.brokers[i];
            b.up = false;
            b.meta = ClusterMetadata::new();
            b.applied = 0;
            return Ok(());
        }
        // Up to 20 records a step: a restarted broker replays the log from the start.
        let batch = self.below(21) as usize;
        {
            let b = &mut self.brokers[i];
            Self::catch_up(&self.log, &mut b.meta, &mut b.applied, batch);
            if b.epoch.is_none() {
                b.epoch = b
                    .meta
                    .broker(b.id)
                    .filter(|r| r.incarnation == b.incarnation)
                    .map(|r| r.epoch);
            }
        }
        if self.rng.chance(faults.alter_isr) {
            self.alter_isr(i, faults);
        }
        if self.now < self.brokers[i].next_heartbeat_at {
            return Ok(());
        }
        self.brokers[i].next_heartbeat_at = self.now + HEARTBEAT_MS;
        if self.rng.chance(faults.lose_heartbeat) {
            return Ok(());
        }
        let b = &self.brokers[i];
        let (id, now) = (b.id, self.now);
        let records = match b.epoch {
            None => {
                let request = BrokerRegistrationRequest {
                    broker_id: id,
                    incarnation: b.incarnation,
                    endpoints: Vec::new(),
                    rack: None,
                };
                self.controller
                    .register_broker(&self.controller_meta, &request, now)
                    .or_else(|e| match e {
                        ControllerError::DuplicateBrokerRegistration(_) => Ok(Vec::new()),
                        other => Err(format!("registration of {id}: {other}")),
                    })?
            }
            Some(epoch) => {
                let hb = Heartbeat {
                    broker_id: id,
                    broker_epoch: epoch,
                    applied_offset: (b.applied > 0).then_some(MetadataOffset(b.applied as u64)),
                    want_fence: false,
                    want_shutdown: false,
                };
                match self.controller.heartbeat(&self.controller_meta, &hb, now) {
                    Ok((_, records)) => records,
                    // The controller's view lags behind the broker's: ask again later.
                    Err(ControllerError::StaleBrokerEpoch { current, .. }) if current < epoch => {
                        Vec::new()
                    }
                    Err(ControllerError::BrokerNotRegistered(_)) => Vec::new(),
                    Err(e) => return Err(format!("heartbeat of {id}: {e}")),
                }
            }
        };
        self.propose(records, faults);
        Ok(())
    }

    /// A leader (in its own, possibly stale, view) adds or drops one follower of its ISR, as
    /// the replication layer will when a follower falls behind or catches up.
    fn alter_isr(&mut self, i: usize, faults: Faults) {
        let b = &self.brokers[i];
        let (id, Some(broker_epoch)) = (b.id, b.epoch) else {
            return;
        };
        let led: Vec<(Uuid, usize, PartitionState)> = b
            .meta
            .topics()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.leader == Some(id))
                    .map(|(n, p)| (t.id, n, p.clone()))
            })
            .collect();
        if led.is_empty() {
            return;
        }
        let (topic_id, n, p) = led[self.below(led.len() as u64) as usize].clone();
        let other = p.replicas[self.below(p.replicas.len() as u64) as usize];
        if other == id {
            return;
        }
        let mut new_isr = p.isr.clone();
        if new_isr.contains(&other) {
            new_isr.retain(|r| *r != other);
        } else {
            new_isr.push(other);
        }
        let request = AlterPartitionRequest {
            broker_id: id,
            broker_epoch,
            topic_id,
            partition: n as u32,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr,
        };
        // Refusals (stale epochs, a fenced follower) are answers the leader acts on.
        if let Ok(records) = self
            .controller
            .alter_partition(&self.controller_meta, &request)
        {
            self.propose(records, faults);
        }
    }

    fn admin_step(&mut self, faults: Faults) {
        let roll = self.below(1000);
        let topics: Vec<String> = self
            .controller_meta
            .topics()
            .map(|t| t.name.clone())
            .collect();
        let records = if roll < 30 {
            let name = format!("t{}", self.below(6));
            let request = CreateTopicRequest {
                name,
                partitions: Some(1 + self.below(3) as i32),
                replication_factor: Some(1 + self.below(3) as i32),
                ..CreateTopicRequest::default()
            };
            let id = self.uuid();
            self.controller
                .create_topic(&self.controller_meta, &request, id)
        } else if roll < 35 && !topics.is_empty() {
            let name = &topics[self.below(topics.len() as u64) as usize];
            self.controller.delete_topic(&self.controller_meta, name)
        } else if roll < 45 && !topics.is_empty() {
            let name = topics[self.below(topics.len() as u64) as usize].clone();
            let count = self
                .controller_meta
                .topic_by_name(&name)
                .map_or(0, |t| t.partitions.len() as i32);
            self.controller
                .create_partitions(&self.controller_meta, &name, count + 1, None)
        } else if roll < 75 {
            let pick = self.below(self.brokers.len() as u64) as usize;
            let b = &self.brokers[pick];
            match (b.up, b.epoch) {
                (true, Some(epoch)) => {
                    self.controller
                        .allocate_producer_ids(&self.controller_meta, b.id, epoch)
                }
                _ => Ok(Vec::new()),
            }
        } else {
            Ok(Vec::new())
        };
        // Refusals (RF too large, a stale view) are answers to clients, not faults.
        if let Ok(records) = records {
            self.propose(records, faults);
        }
    }

    fn step(&mut self, faults: Faults) -> Result<(), String> {
        self.now += 100 + self.below(300);
        if self.rng.chance(faults.controller_change) {
            self.change_controller();
        } else if self.rng.chance(700) {
            let n = self.below(8) as usize;
            Self::catch_up(
                &self.log,
                &mut self.controller_meta,
                &mut self.controller_applied,
                n,
            );
        }
        for i in 0..self.brokers.len() {
            self.broker_step(i, faults)?;
        }
        self.admin_step(faults);
        let records = self.controller.tick(&self.controller_meta, self.now);
        self.propose(records, faults);
        self.commit_due()?;
        self.steps += 1;
        self.check()
    }

    /// The invariants, on the committed state and every broker's view.
    fn check(&mut self) -> Result<(), String> {
        let meta = &self.committed;
        for b in meta.brokers() {
            let last = self.last_broker_epoch.insert(b.id, b.epoch);
            if last.is_some_and(|l| l > b.epoch) {
                return Err(format!("broker {} epoch went back from {last:?}", b.id));
            }
        }
        for t in meta.topics() {
            for (i, p) in t.partitions.iter().enumerate() {
                let at = format!("{}-{i} {p:?}", t.name);
                if p.isr.is_empty() || !p.isr.iter().all(|r| p.replicas.contains(r)) {
                    return Err(format!("{at}: ISR not a non-empty subset of the replicas"));
                }
                if let Some(l) = p.leader {
                    if !p.isr.contains(&l) || !meta.is_unfenced(l) {
                        return Err(format!("{at}: leader not an unfenced ISR member"));
                    }
                }
                for r in &p.isr {
                    if !meta.is_unfenced(*r) && p.isr.len() > 1 {
                        return Err(format!("{at}: fenced {r} shares the ISR"));
                    }
                }
                let first = *self
                    .leader_of_epoch
                    .entry((t.id, i, p.leader_epoch))
                    .or_insert(p.leader);
                if first != p.leader {
                    return Err(format!("{at}: leader epoch had leader {first:?} before"));
                }
                let now = (p.leader, p.leader_epoch, p.partition_epoch);
                if let Some((leader, le, pe)) = self.last_seen.insert((t.id, i), now) {
                    if p.leader_epoch < le || p.partition_epoch < pe {
                        return Err(format!("{at}: epochs went back from {le:?}/{pe:?}"));
                    }
                    if leader != p.leader {
                        self.stats.leader_changes += 1;
                        if p.leader_epoch == le {
                            return Err(format!("{at}: new leader without a new leader epoch"));
                        }
                    }
                }
            }
        }
        if self.rng.chance(300) {
            let delta = std::mem::take(&mut self.unpublished);
            super::image::update(&mut self.image, &self.committed, &delta);
            if !super::image::matches(&self.image, &self.committed) {
                return Err("the image updated by deltas differs from the metadata".to_string());
            }
        }
        if self.steps % REPLAY_EVERY == 0 {
            self.check_views()?;
        }
        Ok(())
    }

    /// Every broker's metadata is the log's first `applied` records applied.
    fn check_views(&self) -> Result<(), String> {
        for b in &self.brokers {
            let mut replay = ClusterMetadata::new();
            let mut n = 0;
            Self::catch_up(&self.log, &mut replay, &mut n, b.applied);
            if b.applied > self.log.len() || replay != b.meta {
                return Err(format!(
                    "broker {}'s metadata is not the log's first {} records",
                    b.id, b.applied
                ));
            }
        }
        Ok(())
    }

    /// No more faults: every broker up and unfenced, every partition led.
    fn heal_and_check(&mut self) -> Result<(), String> {
        for i in 0..self.brokers.len() {
            if !self.brokers[i].up {
                let incarnation = self.uuid();
                let b = &mut self.brokers[i];
                b.up = true;
                b.incarnation = incarnation;
                b.epoch = None;
            }
        }
        for _ in 0..HEAL_STEPS {
            self.step(Faults::default())?;
            Self::catch_up(
                &self.log,
                &mut self.controller_meta,
                &mut self.controller_applied,
                usize::MAX,
            );
        }
        for b in self.committed.brokers() {
            if b.fenced {
                let sim = self.brokers.iter().find(|s| s.id == b.id);
                let view = sim.map(|s| (s.up, s.incarnation, s.epoch, s.applied));
                return Err(format!(
                    "broker {} still fenced after healing: {b:?}; broker (up, incarnation, \
                     epoch, applied) {view:?}; log length {}",
                    b.id,
                    self.log.len()
                ));
            }
        }
        self.check_views()?;
        for t in self.committed.topics() {
            for (i, p) in t.partitions.iter().enumerate() {
                if p.leader.is_none() {
                    return Err(format!("{}-{i} leaderless after healing: {p:?}", t.name));
                }
            }
        }
        Ok(())
    }
}

fn run(seed: u64) -> Result<Stats, String> {
    let mut sim = Sim::new(seed);
    for step in 0..STEPS {
        sim.step(FAULTY)
            .map_err(|e| format!("step {step} (t={} ms): {e}", sim.now))?;
    }
    sim.heal_and_check()
        .map_err(|e| format!("after healing: {e}"))?;
    Ok(sim.stats)
}

#[test]
fn controller_simulation_keeps_its_invariants() {
    let seeds: Vec<u64> = match std::env::var(SEED_VAR) {
        Ok(s) => vec![s.trim().parse().expect("the seed is a number")],
        Err(_) => {
            let count = std::env::var(SEEDS_VAR)
                .ok()
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(SEEDS);
            (0..count).collect()
        }
    };
    let mut total = Stats::default();
    for seed in seeds {
        let outcome = catch_unwind(AssertUnwindSafe(|| run(seed)));
        let stats = match outcome {
            Ok(Ok(stats)) => stats,
            Ok(Err(e)) => panic!("seed {seed}: {e}\nreplay: {SEED_VAR}={seed} cargo test --lib controller_simulation"),
            Err(_) => panic!("seed {seed} panicked\nreplay: {SEED_VAR}={seed} cargo test --lib controller_simulation"),
        };
        total.fences += stats.fences;
        total.unfences += stats.unfences;
        total.leader_changes += stats.leader_changes;
        total.skipped += stats.skipped;
        total.producer_blocks += stats.producer_blocks;
        total.topics += stats.topics;
        total.partition_changes += stats.partition_changes;
    }
    eprintln!("controller simulation: {total:?}");
    if std::env::var(SEED_VAR).is_err() {
        assert!(
            total.fences > 0 && total.unfences > total.fences,
            "{total:?}"
        );
        assert!(total.leader_changes > 0 && total.skipped > 0, "{total:?}");
        assert!(total.producer_blocks > 0 && total.topics > 0, "{total:?}");
    }
}
