//! A seeded, deterministic simulation of a whole cluster's replication, without I/O
//! (CLUSTER.md, "Tests that prove it", item 2).
//!
//! Three brokers host two partitions (RF 3, min.insync.replicas 2). The controller is the real
//! [`ActiveController`] over a model metadata log (committed at once; `controller::sim_tests`
//! covers Raft's delays): brokers register, heartbeat and are fenced when silent, elections
//! and ISR changes go through it. Brokers lead with the real `LeaderState` and epoch cache
//! and follow with the pure rules of `replica_fetch` (see `broker.rs`). Idempotent producers
//! write acks=all through the leader's admission and HW checks, retrying on errors and
//! timeouts with the same sequence number.
//!
//! Faults: messages dropped, delayed and reordered; links cut between brokers and between
//! brokers and the controller; crashes (memory lost; in power-loss runs also each log's
//! unflushed tail), restarts (as a new incarnation that registers again), pauses, clock jumps
//! of brokers and of the controller, controller failovers (a fresh session grace).
//! After every step [`invariants::History::check`] runs; after the faults stop and the cluster
//! heals, [`invariants::History::check_healed`].
//!
//! Power loss, by assumption: it strikes one broker at a time (none while another's is still
//! being recovered from: it may count as in sync until the controller fences its previous
//! life) and never the only ISR member of a partition: Kafka itself loses acknowledged
//! writes then (KIP-966 addresses it). The cluster can still get there after the power
//! loss (the controller fences the other members, the last one stays in the ISR), or add
//! the broker to an ISR on a fetch from before the loss (KIP-903's case: AlterPartition
//! carries no broker epochs): such a run stops early and counts as `outside_assumption`.
//!
//! A failing seed prints itself; replay it alone with RINGBROKER_REPLICATION_SIM_SEED=<seed>.
//! RINGBROKER_REPLICATION_SIM_SEEDS=<n> runs seeds 0..n instead of the default.

mod broker;
mod invariants;
mod model_log;
mod network;

use std::panic::{catch_unwind, AssertUnwindSafe};

use uuid::Uuid;

use crate::controller::cluster_metadata::ClusterMetadata;
use crate::controller::records::MetadataRecord;
use crate::controller::topic_admin::CreateTopicRequest;
use crate::controller::{ActiveController, ControllerConfig};
use crate::model::{BrokerId, MetadataOffset};
use crate::util::rng::SeededRng;

use broker::Broker;
use invariants::{Ack, History};
use network::{Committed, Envelope, Message, Network, NetworkFaults, Node};

const BROKERS: i32 = 3;
const PARTITIONS: i32 = 2;
const PRODUCERS_PER_PARTITION: usize = 2;
const MIN_ISR: usize = 2;
/// `replica.lag.time.max.ms`
const LAG_MS: i64 = 1_500;
/// `broker.heartbeat.interval.ms`, `broker.session.timeout.ms`
const HEARTBEAT_MS: i64 = 300;
const SESSION_MS: u64 = 1_500;
/// How long a leader waits for the controller's answer to an ISR change.
const ISR_ANSWER_TIMEOUT_MS: u64 = 2_000;
/// A producer sends again (same sequence) after this long without an answer.
const PRODUCE_TIMEOUT_MS: u64 = 1_500;
const WARM_UP_STEPS: usize = 100;
const STEPS: usize = 600;
const HEAL_STEPS: usize = 250;
const SEEDS: u64 = 24;
const SEED_VAR: &str = "RINGBROKER_REPLICATION_SIM_SEED";
const SEEDS_VAR: &str = "RINGBROKER_REPLICATION_SIM_SEEDS";
/// Set to print the run's events (crashes, roles, metadata changes) while replaying a seed.
const TRACE_VAR: &str = "RINGBROKER_REPLICATION_SIM_TRACE";

fn trace(event: impl FnOnce() -> String) {
    thread_local! {
        static ON: bool = std::env::var(TRACE_VAR).is_ok();
    }
    if ON.with(|on| *on) {
        eprintln!("{}", event());
    }
}

/// A rule broken on purpose, to show the checks catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bug {
    None,
    /// The follower takes the leader's HW without capping it by its own LEO.
    UncappedFollowerHw,
    /// The leader acknowledges acks=all writes as soon as they are appended.
    AckBeforeHw,
    /// A follower told to truncate at its own end keeps its epoch cache (the broker did
    /// before the simulation found seed 39 stuck).
    KeepEpochAtEnd,
    /// A follower truncates to the leader's end offset only, not the smaller of the leader's
    /// and its own end of the epoch (the broker did before seed 194 stuck).
    TruncateToLeaderEnd,
}

#[derive(Debug, Clone, Copy)]
struct Knobs {
    power_loss: bool,
    /// Roles only once the broker applied its own registration (Kafka's broker does).
    gate_roles: bool,
    bug: Bug,
}

/// Per thousand, per step (per broker where it applies).
#[derive(Debug, Clone, Copy, Default)]
struct Faults {
    net: NetworkFaults,
    crash: u64,
    restart: u64,
    pause: u64,
    cut: u64,
    heal: u64,
    clock_jump: u64,
    failover: u64,
    flush: u64,
}

const FAULTY: Faults = Faults {
    net: NetworkFaults {
        drop: 30,
        base_delay_ms: 30,
        slow: 50,
        max_delay_ms: 800,
    },
    crash: 6,
    restart: 60,
    pause: 3,
    cut: 8,
    heal: 40,
    clock_jump: 3,
    failover: 3,
    flush: 150,
};

const CALM: Faults = Faults {
    net: NetworkFaults {
        drop: 0,
        base_delay_ms: 20,
        slow: 0,
        max_delay_ms: 20,
    },
    crash: 0,
    restart: 1000,
    pause: 0,
    cut: 0,
    heal: 1000,
    clock_jump: 0,
    failover: 0,
    flush: 150,
};

/// What happened over a run, to show the faults and paths were exercised.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    acks: u64,
    produce_errors: u64,
    crashes: u64,
    power_losses: u64,
    pauses: u64,
    cuts: u64,
    clock_jumps: u64,
    failovers: u64,
    leaderships: u64,
    diverging: u64,
    truncations: u64,
    /// Runs cut short when a broker that lost power became the only ISR member before its
    /// previous life was fenced (the assumption in the module doc no longer held).
    outside_assumption: u64,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.acks += o.acks;
        self.produce_errors += o.produce_errors;
        self.crashes += o.crashes;
        self.power_losses += o.power_losses;
        self.pauses += o.pauses;
        self.cuts += o.cuts;
        self.clock_jumps += o.clock_jumps;
        self.failovers += o.failovers;
        self.leaderships += o.leaderships;
        self.diverging += o.diverging;
        self.truncations += o.truncations;
        self.outside_assumption += o.outside_assumption;
    }
}

/// What a broker's step may use besides itself.
pub(super) struct Ctx<'a> {
    rng: &'a mut SeededRng,
    net: &'a mut Network,
    faults: NetworkFaults,
    now: u64,
    bug: Bug,
    stats: &'a mut Stats,
}

impl Ctx<'_> {
    fn send(&mut self, from: Node, to: Node, message: Message) {
        self.net
            .send(self.rng, self.faults, self.now, from, to, message);
    }
}

/// The active controller and the committed metadata log.
struct ControllerNode {
    active: ActiveController,
    log: Vec<MetadataRecord>,
    meta: ClusterMetadata,
    clock_offset: i64,
}

fn controller_config() -> ControllerConfig {
    ControllerConfig {
        session_timeout_ms: SESSION_MS,
        default_replication_factor: 3,
        default_partitions: PARTITIONS,
        unclean_leader_election: false,
        retry_ms: 400,
        followers_replicate: true,
    }
}

impl ControllerNode {
    fn local_ms(&self, now: u64) -> u64 {
        (now as i64 + self.clock_offset).max(0) as u64
    }

    fn commit(&mut self, records: Vec<MetadataRecord>) {
        for r in records {
            trace(|| format!("  commit {r:?}"));
            self.log.push(r);
            let offset = MetadataOffset(self.log.len() as u64);
            // A skipped record (decided on a state that no longer holds) changes nothing.
            let _ = self.meta.apply(offset, &self.log[self.log.len() - 1]);
        }
    }

    fn handle(&mut self, envelope: Envelope, ctx: &mut Ctx) {
        let now = self.local_ms(ctx.now);
        match envelope.message {
            Message::Register(request) => {
                if let Ok(records) = self.active.register_broker(&self.meta, &request, now) {
                    self.commit(records);
                }
            }
            Message::Heartbeat(heartbeat) => {
                if let Ok((_, records)) = self.active.heartbeat(&self.meta, &heartbeat, now) {
                    self.commit(records);
                }
            }
            Message::AlterPartition { partition, request } => {
                let answer = match self.active.alter_partition(&self.meta, &request) {
                    Ok(records) => {
                        self.commit(records);
                        let state = self
                            .meta
                            .topic(request.topic_id)
                            .and_then(|t| t.partitions.get(partition).cloned());
                        state
                            .map(|s| Committed {
                                leader: s.leader,
                                leader_epoch: s.leader_epoch,
                                isr: s.isr,
                                partition_epoch: s.partition_epoch,
                            })
                            .ok_or(3)
                    }
                    Err(e) => Err(e.code()),
                };
                let message = Message::AlterPartitionAnswer {
                    partition,
                    leader_epoch: request.leader_epoch,
                    answer,
                };
                ctx.send(Node::Controller, envelope.from, message);
            }
            _ => {}
        }
    }
}

/// An idempotent producer of one partition, one acks=all batch in flight.
struct Producer {
    partition: usize,
    id: i64,
    next_seq: i32,
    /// The batch in flight: its sequence, value, and when to send it (again).
    outstanding: Option<(i32, u64, u64)>,
}

struct Sim {
    rng: SeededRng,
    now: u64,
    net: Network,
    controller: ControllerNode,
    brokers: Vec<Broker>,
    producers: Vec<Producer>,
    topic: Uuid,
    history: History,
    stats: Stats,
    knobs: Knobs,
    next_uuid: u128,
    /// The committed ISRs after the previous step.
    last_isrs: Vec<Vec<BrokerId>>,
}

impl Sim {
    fn new(seed: u64, knobs: Knobs) -> Sim {
        let brokers = (1..=BROKERS)
            .map(|id| Broker::new(BrokerId(id), Uuid::from_u128(id as u128)))
            .collect();
        let producers = (0..PARTITIONS as usize * PRODUCERS_PER_PARTITION)
            .map(|i| Producer {
                partition: i % PARTITIONS as usize,
                id: 1_000 + i as i64,
                next_seq: 0,
                outstanding: None,
            })
            .collect();
        Sim {
            rng: SeededRng::new(seed),
            now: 0,
            net: Network::default(),
            controller: ControllerNode {
                active: ActiveController::new(controller_config(), 0),
                log: Vec::new(),
                meta: ClusterMetadata::new(),
                clock_offset: 0,
            },
            brokers,
            producers,
            topic: Uuid::from_u128(77),
            history: History::default(),
            stats: Stats::default(),
            knobs,
            next_uuid: 1_000,
            last_isrs: Vec::new(),
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    fn pick_broker(&mut self) -> usize {
        self.below(self.brokers.len() as u64) as usize
    }

    /// The topic, once every broker is registered and unfenced.
    fn maybe_create_topic(&mut self) {
        let meta = &self.controller.meta;
        if meta.topic(self.topic).is_some()
            || (1..=BROKERS).any(|id| !meta.is_unfenced(BrokerId(id)))
        {
            return;
        }
        let request = CreateTopicRequest {
            name: "t".to_string(),
            partitions: Some(PARTITIONS),
            replication_factor: Some(3),
            ..CreateTopicRequest::default()
        };
        if let Ok(records) = self
            .controller
            .active
            .create_topic(meta, &request, self.topic)
        {
            self.controller.commit(records);
        }
    }

    fn inject(&mut self, f: &Faults) {
        let i = self.pick_broker();
        if self.brokers[i].up && self.rng.chance(f.crash) {
            self.crash(i);
        }
        for i in 0..self.brokers.len() {
            if !self.brokers[i].up && self.rng.chance(f.restart) {
                self.next_uuid += 1;
                let incarnation = Uuid::from_u128(self.next_uuid);
                trace(|| format!("t={} restart of {}", self.now, self.brokers[i].id));
                self.brokers[i].restart(incarnation, self.now);
            }
        }
        let i = self.pick_broker();
        if self.brokers[i].running(self.now) && self.rng.chance(f.pause) {
            // Sometimes past the session: it wakes fenced, with a stale view.
            let pause = 300 + self.below(3 * SESSION_MS);
            self.brokers[i].paused_until = self.now + pause;
            self.stats.pauses += 1;
        }
        if self.rng.chance(f.cut) {
            self.cut_links();
        }
        if self.net.cut_links() > 0 && self.rng.chance(f.heal) {
            self.net.heal();
        }
        if self.rng.chance(f.clock_jump) {
            let jump = self.below(5_000) as i64 - 1_000;
            let i = self.below(self.brokers.len() as u64 + 1) as usize;
            match self.brokers.get_mut(i) {
                Some(b) => b.clock_offset += jump,
                None => self.controller.clock_offset += jump,
            }
            self.stats.clock_jumps += 1;
        }
        if self.rng.chance(f.failover) {
            let now = self.controller.local_ms(self.now);
            self.controller.active = ActiveController::new(controller_config(), now);
            self.stats.failovers += 1;
        }
        for i in 0..self.brokers.len() {
            if self.brokers[i].up && self.rng.chance(f.flush) {
                self.brokers[i].flush();
            }
        }
    }

    fn crash(&mut self, i: usize) {
        let power_loss =
            self.knobs.power_loss && self.rng.chance(500) && self.power_loss_allowed(i);
        let id = self.brokers[i].id;
        if power_loss {
            self.stats.power_losses += 1;
            for p in 0..PARTITIONS as usize {
                let epoch = self.controller.meta.broker(id).map(|b| b.epoch);
                self.history.power_exempt.insert((p, id), epoch);
            }
        } else {
            // A process crash keeps the page cache: the kernel writes it out.
            self.brokers[i].flush();
        }
        trace(|| format!("t={} crash of {id}, power loss {power_loss}", self.now));
        self.brokers[i].crash(power_loss);
        self.net.drop_to(Node::Broker(id));
        self.stats.crashes += 1;
    }

    /// See the module doc: one power loss at a time (each loses only its own broker's
    /// unflushed data), and not the only ISR member of a partition.
    fn power_loss_allowed(&self, i: usize) -> bool {
        let id = self.brokers[i].id;
        let sole = self
            .controller
            .meta
            .topic(self.topic)
            .is_some_and(|t| t.partitions.iter().any(|p| p.isr == [id]));
        !sole && self.history.power_exempt.is_empty()
    }

    /// Whether the run left the power-loss assumption (module doc): a broker that lost power
    /// became the only ISR member (its election would lose what it lost: Kafka's KIP-966
    /// case), or was added to an ISR on the strength of a fetch from before the loss (an
    /// AlterPartition names broker ids only; Kafka's KIP-903 adds their broker epochs).
    fn outside_assumption(&mut self) -> bool {
        let Some(t) = self.controller.meta.topic(self.topic) else {
            return false;
        };
        let isrs: Vec<Vec<BrokerId>> = t.partitions.iter().map(|s| s.isr.clone()).collect();
        let before = std::mem::replace(&mut self.last_isrs, isrs);
        self.last_isrs.iter().enumerate().any(|(p, isr)| {
            let exempt = |m: &BrokerId| self.history.power_exempt.contains_key(&(p, *m));
            let added = |m: &BrokerId| before.get(p).is_some_and(|b| !b.contains(m));
            (isr.len() == 1 && exempt(&isr[0])) || isr.iter().any(|m| exempt(m) && added(m))
        })
    }

    fn cut_links(&mut self) {
        self.stats.cuts += 1;
        let i = self.pick_broker();
        let b = Node::Broker(self.brokers[i].id);
        let others: Vec<Node> = self
            .brokers
            .iter()
            .filter(|o| o.id != self.brokers[i].id)
            .map(|o| Node::Broker(o.id))
            .collect();
        match self.below(4) {
            // Isolated from everyone.
            0 => {
                self.net.cut(b, Node::Controller);
                for o in others {
                    self.net.cut(b, o);
                }
            }
            // From the controller only: it keeps replicating with a stale view.
            1 => self.net.cut(b, Node::Controller),
            // One link between brokers.
            2 => {
                let o = others[self.below(others.len() as u64) as usize];
                self.net.cut(b, o);
            }
            // The controller from every broker.
            _ => {
                for o in &self.brokers {
                    self.net.cut(Node::Broker(o.id), Node::Controller);
                }
            }
        }
    }

    fn deliver(&mut self, faults: NetworkFaults) {
        let now = self.now;
        let paused: Vec<Node> = self
            .brokers
            .iter()
            .filter(|b| b.up && now < b.paused_until)
            .map(Broker::node)
            .collect();
        for envelope in self.net.due(now, |n| !paused.contains(&n)) {
            let mut ctx = Ctx {
                rng: &mut self.rng,
                net: &mut self.net,
                faults,
                now,
                bug: self.knobs.bug,
                stats: &mut self.stats,
            };
            match envelope.to {
                Node::Controller => self.controller.handle(envelope, &mut ctx),
                Node::Broker(id) => {
                    if let Some(b) = self.brokers.iter_mut().find(|b| b.id == id && b.up) {
                        b.handle(envelope, &mut ctx);
                    }
                }
                Node::Producer(i) => {
                    if let Message::ProduceAnswer { seq, answer } = envelope.message {
                        self.produce_answer(i, seq, answer);
                    }
                }
            }
        }
    }

    fn produce_answer(&mut self, i: usize, seq: i32, answer: Result<i64, i16>) {
        let p = &mut self.producers[i];
        let Some((s, value, _)) = p.outstanding else {
            return;
        };
        if s != seq {
            return;
        }
        match answer {
            Ok(offset) => {
                self.history.acks.push(Ack {
                    partition: p.partition,
                    producer: p.id,
                    seq,
                    value,
                    offset,
                });
                self.stats.acks += 1;
                p.next_seq += 1;
                p.outstanding = None;
            }
            Err(_) => {
                self.stats.produce_errors += 1;
                p.outstanding = Some((s, value, self.now + 100));
            }
        }
    }

    fn produce(&mut self, faults: NetworkFaults, producing: bool) {
        for i in 0..self.producers.len() {
            if self.producers[i].outstanding.is_none() && producing && self.rng.chance(400) {
                let p = &mut self.producers[i];
                let value = (p.id as u64) << 32 | p.next_seq as u64;
                p.outstanding = Some((p.next_seq, value, self.now));
            }
            let p = &self.producers[i];
            let Some((seq, value, at)) = p.outstanding else {
                continue;
            };
            if self.now < at {
                continue;
            }
            // Clients learn leaders from any broker's metadata: the committed one here.
            let leader = self
                .controller
                .meta
                .topic(self.topic)
                .and_then(|t| t.partitions.get(p.partition).and_then(|s| s.leader));
            let (partition, producer) = (p.partition, p.id);
            let retry = match leader {
                Some(l) => {
                    let message = Message::Produce {
                        partition,
                        producer,
                        seq,
                        value,
                    };
                    self.net.send(
                        &mut self.rng,
                        faults,
                        self.now,
                        Node::Producer(i),
                        Node::Broker(l),
                        message,
                    );
                    PRODUCE_TIMEOUT_MS
                }
                None => 200,
            };
            self.producers[i].outstanding = Some((seq, value, self.now + retry));
        }
    }

    fn step(&mut self, faults: &Faults, producing: bool) -> Result<(), String> {
        self.now += 50 + self.below(100);
        self.inject(faults);
        self.deliver(faults.net);
        let local = self.controller.local_ms(self.now);
        let records = self.controller.active.tick(&self.controller.meta, local);
        self.controller.commit(records);
        self.maybe_create_topic();
        for i in 0..self.brokers.len() {
            if !self.brokers[i].running(self.now) {
                continue;
            }
            let linked = self.net.connected(self.brokers[i].node(), Node::Controller);
            let batch = self.below(30) as usize;
            let mut ctx = Ctx {
                rng: &mut self.rng,
                net: &mut self.net,
                faults: faults.net,
                now: self.now,
                bug: self.knobs.bug,
                stats: &mut self.stats,
            };
            let b = &mut self.brokers[i];
            if linked {
                b.catch_up(&self.controller.log, batch);
            }
            b.apply_roles(self.topic, self.knobs.gate_roles, &mut ctx);
            b.heartbeat(&mut ctx);
            b.fetch(&mut ctx);
            b.leader_timers(&mut ctx);
        }
        self.produce(faults.net, producing);
        self.history
            .check(&self.brokers, &self.controller.meta, self.topic)
    }

    fn heal(&mut self) {
        self.net.heal();
        for b in &mut self.brokers {
            b.paused_until = 0;
        }
    }
}

fn run(seed: u64, knobs: Knobs) -> Result<Stats, String> {
    let mut sim = Sim::new(seed, knobs);
    let at = |sim: &Sim, phase: &str, step: usize, e: String| {
        format!("{phase} step {step} (t={} ms): {e}", sim.now)
    };
    for step in 0..WARM_UP_STEPS {
        sim.step(&CALM, false)
            .map_err(|e| at(&sim, "warm-up", step, e))?;
    }
    if sim.controller.meta.topic(sim.topic).is_none() {
        return Err("the topic was not created during the warm-up".to_string());
    }
    for step in 0..STEPS {
        sim.step(&FAULTY, true)
            .map_err(|e| at(&sim, "faulty", step, e))?;
        if sim.outside_assumption() {
            trace(|| format!("t={} outside the power-loss assumption: stopped", sim.now));
            sim.stats.outside_assumption += 1;
            return Ok(sim.stats);
        }
    }
    sim.heal();
    for step in 0..HEAL_STEPS {
        sim.step(&CALM, false)
            .map_err(|e| at(&sim, "healing", step, e))?;
    }
    sim.history
        .check_healed(&sim.brokers, &sim.controller.meta, sim.topic)
        .map_err(|e| format!("after healing: {e}"))?;
    Ok(sim.stats)
}

fn seeds() -> Vec<u64> {
    match std::env::var(SEED_VAR) {
        Ok(s) => vec![s.trim().parse().expect("the seed is a number")],
        Err(_) => {
            let count = std::env::var(SEEDS_VAR)
                .ok()
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(SEEDS);
            (0..count).collect()
        }
    }
}

/// Odd seeds run in power-loss mode.
fn knobs(seed: u64, bug: Bug) -> Knobs {
    Knobs {
        power_loss: seed % 2 == 1,
        gate_roles: true,
        bug,
    }
}

#[test]
fn replication_simulation_keeps_its_invariants() {
    let mut total = Stats::default();
    for seed in seeds() {
        let outcome = catch_unwind(AssertUnwindSafe(|| run(seed, knobs(seed, Bug::None))));
        let stats = match outcome {
            Ok(Ok(stats)) => stats,
            Ok(Err(e)) => panic!(
                "seed {seed}: {e}\nreplay: {SEED_VAR}={seed} cargo test --lib replication_simulation"
            ),
            Err(_) => panic!(
                "seed {seed} panicked\nreplay: {SEED_VAR}={seed} cargo test --lib replication_simulation"
            ),
        };
        total.add(&stats);
    }
    eprintln!("replication simulation: {total:?}");
    if std::env::var(SEED_VAR).is_err() {
        assert!(total.acks > 100 && total.produce_errors > 0, "{total:?}");
        assert!(
            total.crashes > 0 && total.power_losses > 0 && total.pauses > 0,
            "{total:?}"
        );
        assert!(
            total.cuts > 0 && total.clock_jumps > 0 && total.failovers > 0,
            "{total:?}"
        );
        assert!(total.leaderships > 0 && total.truncations > 0, "{total:?}");
    }
}

/// The checks are not vacuous: a model with a broken rule fails within a few seeds.
#[test]
fn the_checks_catch_planted_bugs() {
    for bug in [Bug::UncappedFollowerHw, Bug::AckBeforeHw] {
        let caught = (0..8).find_map(|seed| {
            let outcome = catch_unwind(AssertUnwindSafe(|| run(seed, knobs(seed, bug))));
            match outcome {
                Ok(Err(e)) => Some(e),
                Ok(Ok(_)) => None,
                Err(_) => Some("panicked".to_string()),
            }
        });
        let caught = caught.unwrap_or_else(|| panic!("{bug:?} went unnoticed in 8 seeds"));
        eprintln!("{bug:?} caught: {caught}");
    }
}

/// The seeds that found the follower's truncation bugs still fail with each bug put back.
#[test]
fn the_seeds_that_found_truncation_bugs_fail_with_them() {
    // Seeds 39 and 194 found them; since SeededRng scrambles its seed they are 7 and 29 (of
    // 600 seeds, 9 catch the first and 2 the second).
    for (seed, bug) in [(7, Bug::KeepEpochAtEnd), (29, Bug::TruncateToLeaderEnd)] {
        let outcome = run(seed, knobs(seed, bug));
        assert!(
            outcome.is_err(),
            "seed {seed} with {bug:?} passed: {outcome:?}"
        );
    }
}
