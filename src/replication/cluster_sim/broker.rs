//! A simulated broker: its metadata view, and per partition a replica that leads (with the
//! real [`LeaderState`]) or follows, exactly as `partition::replica_role` and
//! `partition::replica_manager` do, with messages instead of I/O. The decisions are the pure
//! functions the broker calls ([`replica_fetch`], `LeaderState`, `LeaderEpochCache`).

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::controller::alter_partition::AlterPartitionRequest;
use crate::controller::broker_lifecycle::{BrokerRegistrationRequest, Heartbeat};
use crate::controller::cluster_metadata::{ClusterMetadata, PartitionState};
use crate::controller::records::MetadataRecord;
use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, MetadataOffset, Offset};
use crate::protocol::ResponseError;
use crate::replication::isr_answer::{isr_action, IsrAction, IsrAnswer};
use crate::replication::leader_state::{AcksAllStatus, IsrProposal, LeaderConfig, LeaderState};
use crate::replication::replica_fetch::{self, FetchDecision};

use super::model_log::{Batch, Disk};
use super::network::{Asked, Committed, Envelope, FetchAnswer, Message, Node};
use super::{Bug, Ctx, HEARTBEAT_MS, ISR_ANSWER_TIMEOUT_MS, LAG_MS, MIN_ISR};

/// The pause before an ISR change whose outcome is unknown is sent again.
const ISR_RETRY_MS: u64 = 200;

/// How long a follower waits for a fetch answer before asking again.
const FETCH_TIMEOUT_MS: u64 = 600;
/// Batches per fetch answer.
const FETCH_MAX: usize = 6;

#[derive(Debug, Clone)]
pub enum Role {
    Follower {
        leader: Option<BrokerId>,
        epoch: LeaderEpoch,
        hw: i64,
    },
    Leader(Box<LeaderState>),
}

/// An acks=all produce waiting for the HW.
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    pub producer: usize,
    pub seq: i32,
    pub offset: i64,
}

#[derive(Debug, Clone)]
pub struct Replica {
    pub disk: Disk,
    pub role: Role,
    pub waiting: Vec<Waiting>,
    /// When the fetch in flight is given up on.
    fetch_deadline: Option<u64>,
    /// The AlterPartition in flight: its leader epoch and when it is given up on.
    isr_deadline: Option<(LeaderEpoch, u64)>,
}

impl Replica {
    fn new(disk: Disk) -> Replica {
        Replica {
            disk,
            role: Role::Follower {
                leader: None,
                epoch: LeaderEpoch(-1),
                hw: 0,
            },
            waiting: Vec::new(),
            fetch_deadline: None,
            isr_deadline: None,
        }
    }

    /// What consumers may read below (`Partition::high_watermark`).
    pub fn high_watermark(&self) -> i64 {
        self.raw_high_watermark().min(self.disk.log.leo())
    }

    /// The HW as the role holds it, before the cap by the log's end.
    pub fn raw_high_watermark(&self) -> i64 {
        match &self.role {
            Role::Leader(l) => l.high_watermark().0,
            Role::Follower { hw, .. } => *hw,
        }
    }

    pub fn leader_state(&self) -> Option<&LeaderState> {
        match &self.role {
            Role::Leader(l) => Some(l),
            Role::Follower { .. } => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Broker {
    pub id: BrokerId,
    pub up: bool,
    pub paused_until: u64,
    /// Added to the simulation's time: this broker's clock (jumps move it).
    pub clock_offset: i64,
    pub incarnation: Uuid,
    /// Restarts so far (the invariants key per-life state by it).
    pub life: u64,
    /// This life's registration, once the broker has applied it.
    pub epoch: Option<BrokerEpoch>,
    pub meta: ClusterMetadata,
    pub applied: usize,
    roles_applied_at: Option<usize>,
    next_heartbeat_at: i64,
    next_isr_check_at: i64,
    pub replicas: BTreeMap<usize, Replica>,
}

impl Broker {
    pub fn new(id: BrokerId, incarnation: Uuid) -> Broker {
        Broker {
            id,
            up: true,
            paused_until: 0,
            clock_offset: 0,
            incarnation,
            life: 0,
            epoch: None,
            meta: ClusterMetadata::new(),
            applied: 0,
            roles_applied_at: None,
            next_heartbeat_at: 0,
            next_isr_check_at: 0,
            replicas: BTreeMap::new(),
        }
    }

    pub fn node(&self) -> Node {
        Node::Broker(self.id)
    }

    pub fn local_ms(&self, now: u64) -> i64 {
        now as i64 + self.clock_offset
    }

    pub fn running(&self, now: u64) -> bool {
        self.up && now >= self.paused_until
    }

    /// Memory is lost; the disks stay (minus their unflushed tails on a power loss).
    pub fn crash(&mut self, power_loss: bool) {
        self.up = false;
        self.epoch = None;
        self.meta = ClusterMetadata::new();
        self.applied = 0;
        self.roles_applied_at = None;
        for r in self.replicas.values_mut() {
            let mut disk = std::mem::take(&mut r.disk);
            disk.recover(power_loss);
            *r = Replica::new(disk);
        }
    }

    pub fn restart(&mut self, incarnation: Uuid, now: u64) {
        self.up = true;
        self.paused_until = 0;
        self.incarnation = incarnation;
        self.life += 1;
        self.next_heartbeat_at = self.local_ms(now);
    }

    /// Applies up to `max` more committed metadata records; learns its own registration.
    pub fn catch_up(&mut self, log: &[MetadataRecord], max: usize) {
        let end = self.applied.saturating_add(max).min(log.len());
        for (i, r) in log.iter().enumerate().take(end).skip(self.applied) {
            let _ = self.meta.apply(MetadataOffset(i as u64 + 1), r);
        }
        self.applied = end.max(self.applied);
        if self.epoch.is_none() {
            self.epoch = self
                .meta
                .broker(self.id)
                .filter(|b| b.incarnation == self.incarnation)
                .map(|b| b.epoch);
        }
    }

    /// Registration until it has applied its own, then heartbeats.
    pub fn heartbeat(&mut self, ctx: &mut Ctx) {
        let local = self.local_ms(ctx.now);
        if local < self.next_heartbeat_at {
            return;
        }
        self.next_heartbeat_at = local + HEARTBEAT_MS;
        let message = match self.epoch {
            None => Message::Register(BrokerRegistrationRequest {
                broker_id: self.id,
                incarnation: self.incarnation,
                endpoints: Vec::new(),
                rack: None,
            }),
            Some(epoch) => Message::Heartbeat(Heartbeat {
                broker_id: self.id,
                broker_epoch: epoch,
                applied_offset: (self.applied > 0).then_some(MetadataOffset(self.applied as u64)),
                want_fence: false,
                want_shutdown: false,
            }),
        };
        ctx.send(self.node(), Node::Controller, message);
    }

    /// Leads or follows each partition as the metadata says (`apply_roles`). Kafka's broker
    /// does so only once it has caught up with its own registration (`gate`): before that
    /// its view may still name its previous life as leader.
    pub fn apply_roles(&mut self, topic: Uuid, gate: bool, ctx: &mut Ctx) {
        if gate && self.epoch.is_none() {
            return;
        }
        if self.roles_applied_at == Some(self.applied) {
            return;
        }
        self.roles_applied_at = Some(self.applied);
        let Some(t) = self.meta.topic(topic).cloned() else {
            return;
        };
        let now_ms = self.local_ms(ctx.now);
        for (i, state) in t.partitions.iter().enumerate() {
            if !state.replicas.contains(&self.id) {
                continue;
            }
            let replica = self
                .replicas
                .entry(i)
                .or_insert_with(|| Replica::new(Disk::default()));
            if state.leader == Some(self.id) {
                lead(self.id, replica, state, now_ms, ctx);
                if let Role::Leader(l) = &mut replica.role {
                    for r in l.replicas().to_vec() {
                        l.set_isr_eligible(r, r == self.id || self.meta.is_unfenced(r));
                    }
                }
            } else {
                follow(self.id, replica, state, ctx);
            }
        }
    }

    /// Followers without a fetch in flight ask their leader.
    pub fn fetch(&mut self, ctx: &mut Ctx) {
        let me = self.node();
        for (&partition, r) in &mut self.replicas {
            let Role::Follower {
                leader: Some(leader),
                epoch,
                ..
            } = r.role
            else {
                continue;
            };
            if r.fetch_deadline.is_some_and(|d| ctx.now < d) {
                continue;
            }
            r.fetch_deadline = Some(ctx.now + FETCH_TIMEOUT_MS);
            let asked = Asked {
                leader,
                leader_epoch: epoch,
                fetch_offset: r.disk.log.leo(),
            };
            let last_fetched_epoch = r.disk.epochs.latest_epoch().map_or(-1, |e| e.0);
            let message = Message::Fetch {
                partition,
                asked,
                last_fetched_epoch,
            };
            ctx.send(me, Node::Broker(leader), message);
        }
    }

    /// The leaders' periodic work: the ISR check every half lag (HW timer, shrink), answers
    /// to waiting produces, AlterPartitions given up on.
    pub fn leader_timers(&mut self, ctx: &mut Ctx) {
        let local = self.local_ms(ctx.now);
        let isr_check = local >= self.next_isr_check_at;
        if isr_check {
            self.next_isr_check_at = local + LAG_MS / 2;
        }
        let partitions: Vec<usize> = self.replicas.keys().copied().collect();
        for p in partitions {
            let r = self.replicas.get_mut(&p).expect("listed");
            // An ISR change not answered in time, or to be retried: sent again while it is
            // pending (`send_isr_change`); it may still commit, so it is not given up.
            let mut resend = None;
            if let Some((epoch, deadline)) = r.isr_deadline {
                if ctx.now >= deadline {
                    r.isr_deadline = None;
                    if let Role::Leader(l) = &r.role {
                        resend = l.pending_proposal().filter(|_| l.leader_epoch() == epoch);
                    }
                }
            }
            let proposal = match &mut r.role {
                _ if resend.is_some() => resend,
                Role::Leader(l) if isr_check => {
                    l.maybe_advance_hw(local);
                    l.check_shrink(local)
                }
                _ => None,
            };
            if let Some(proposal) = proposal {
                self.submit_isr(p, proposal, ctx);
            }
            self.answer_waiting(p, ctx);
        }
    }

    /// Answers the acks=all produces the HW has passed (`wait_acks_all`).
    fn answer_waiting(&mut self, p: usize, ctx: &mut Ctx) {
        let me = self.node();
        let Some(r) = self.replicas.get_mut(&p) else {
            return;
        };
        let Role::Leader(l) = &r.role else {
            return;
        };
        let mut left = Vec::new();
        for w in std::mem::take(&mut r.waiting) {
            let answer = match l.acks_all_status(Offset(w.offset)) {
                AcksAllStatus::Pending if ctx.bug != Bug::AckBeforeHw => {
                    left.push(w);
                    continue;
                }
                AcksAllStatus::Pending | AcksAllStatus::Done(Ok(())) => Ok(w.offset),
                AcksAllStatus::Done(Err(e)) => Err(e.response_error().code()),
            };
            let message = Message::ProduceAnswer { seq: w.seq, answer };
            ctx.send(me, Node::Producer(w.producer), message);
        }
        r.waiting = left;
    }

    fn submit_isr(&mut self, p: usize, proposal: IsrProposal, ctx: &mut Ctx) {
        let Some(r) = self.replicas.get_mut(&p) else {
            return;
        };
        let (Some(epoch), Some(topic)) = (self.epoch, self.meta.topics().next().cloned()) else {
            if let Role::Leader(l) = &mut r.role {
                l.on_isr_rejected();
            }
            return;
        };
        r.isr_deadline = Some((proposal.leader_epoch, ctx.now + ISR_ANSWER_TIMEOUT_MS));
        let request = AlterPartitionRequest {
            broker_id: self.id,
            broker_epoch: epoch,
            topic_id: topic.id,
            partition: p as u32,
            leader_epoch: proposal.leader_epoch,
            partition_epoch: proposal.partition_epoch,
            new_isr: proposal.new_isr,
        };
        let message = Message::AlterPartition {
            partition: p,
            request,
        };
        ctx.send(self.node(), Node::Controller, message);
    }

    pub fn handle(&mut self, envelope: Envelope, ctx: &mut Ctx) {
        let from = envelope.from;
        match envelope.message {
            Message::Fetch {
                partition,
                asked,
                last_fetched_epoch,
            } => {
                let Node::Broker(follower) = from else {
                    return;
                };
                let (answer, proposal) =
                    self.serve_fetch(partition, follower, asked, last_fetched_epoch, ctx);
                if let Some(proposal) = proposal {
                    self.submit_isr(partition, proposal, ctx);
                }
                self.answer_waiting(partition, ctx);
                let message = Message::FetchAnswer {
                    partition,
                    asked,
                    answer,
                };
                ctx.send(self.node(), from, message);
            }
            Message::FetchAnswer {
                partition,
                asked,
                answer,
            } => self.apply_fetch_answer(partition, asked, answer, ctx),
            Message::Produce {
                partition,
                producer,
                seq,
                value,
            } => {
                let Node::Producer(client) = from else {
                    return;
                };
                if let Err(code) = self.produce(partition, client, producer, seq, value) {
                    let message = Message::ProduceAnswer {
                        seq,
                        answer: Err(code),
                    };
                    ctx.send(self.node(), from, message);
                }
                self.answer_waiting(partition, ctx);
            }
            Message::AlterPartitionAnswer {
                partition,
                leader_epoch,
                answer,
            } => {
                self.apply_isr_answer(partition, leader_epoch, answer, ctx.now);
                self.answer_waiting(partition, ctx);
            }
            _ => {}
        }
    }

    /// The leader's side (`Partition::check_replica_fetch` and the read after it).
    fn serve_fetch(
        &mut self,
        p: usize,
        follower: BrokerId,
        asked: Asked,
        last_fetched_epoch: i32,
        ctx: &mut Ctx,
    ) -> (FetchAnswer, Option<IsrProposal>) {
        let now_ms = self.local_ms(ctx.now);
        let not_leader = FetchAnswer::Refused(ResponseError::NotLeaderOrFollower.code());
        let Some(r) = self.replicas.get_mut(&p) else {
            return (not_leader, None);
        };
        let leo = r.disk.log.leo();
        let Role::Leader(l) = &mut r.role else {
            return (not_leader, None);
        };
        let decision = replica_fetch::check_follower_fetch(
            &r.disk.epochs,
            leo,
            l.leader_epoch(),
            asked.fetch_offset,
            asked.leader_epoch.0,
            last_fetched_epoch,
        );
        match decision {
            Err(e) => (FetchAnswer::Refused(e.response_error().code()), None),
            Ok(FetchDecision::Diverging { epoch, end_offset }) => {
                ctx.stats.diverging += 1;
                (FetchAnswer::Diverging { epoch, end_offset }, None)
            }
            Ok(FetchDecision::Read) => {
                let outcome =
                    l.on_follower_fetch(follower, Offset(asked.fetch_offset), Offset(leo), now_ms);
                let answer = FetchAnswer::Records {
                    batches: r.disk.log.read_from(asked.fetch_offset, FETCH_MAX),
                    high_watermark: l.high_watermark().0,
                };
                (answer, outcome.propose)
            }
        }
    }

    /// The follower's side (`append_replicated`, `truncate_diverging`): an answer applies
    /// only if the replica still follows that leader at that epoch from that offset.
    fn apply_fetch_answer(&mut self, p: usize, asked: Asked, answer: FetchAnswer, ctx: &mut Ctx) {
        let Some(r) = self.replicas.get_mut(&p) else {
            return;
        };
        let leo = r.disk.log.leo();
        let Role::Follower { leader, epoch, hw } = &mut r.role else {
            return;
        };
        if *leader != Some(asked.leader) || *epoch != asked.leader_epoch {
            return;
        }
        r.fetch_deadline = None;
        if leo != asked.fetch_offset {
            return;
        }
        let (batches, leader_hw) = match answer {
            FetchAnswer::Refused(_) => return,
            // The fetcher truncates only on a defined epoch; an undefined one reads as an
            // empty answer (replica_manager's apply_response).
            FetchAnswer::Diverging { epoch, end_offset } if epoch >= 0 => {
                let target = if ctx.bug == Bug::TruncateToLeaderEnd {
                    end_offset.min(leo)
                } else {
                    replica_fetch::truncation_target(epoch, end_offset, &r.disk.epochs, leo)
                };
                if target < leo {
                    ctx.stats.truncations += 1;
                    super::trace(|| {
                        format!("t={} {} p{p} truncates {leo} -> {target}", ctx.now, self.id)
                    });
                    r.disk.truncate_to(target);
                    *hw = (*hw).min(target);
                } else if ctx.bug != Bug::KeepEpochAtEnd {
                    r.disk.epochs.truncate_from_end(Offset(leo));
                }
                return;
            }
            FetchAnswer::Diverging { .. } => (Vec::new(), *hw),
            FetchAnswer::Records {
                batches,
                high_watermark,
            } => (batches, high_watermark),
        };
        for b in batches {
            r.disk.log.append(b);
            r.disk.epochs.assign(b.epoch, Offset(b.offset));
        }
        let leo = r.disk.log.leo();
        *hw = if ctx.bug == Bug::UncappedFollowerHw {
            leader_hw.max(*hw)
        } else {
            replica_fetch::follower_high_watermark(*hw, leader_hw, leo)
        };
    }

    /// A producer's acks=all append at the leader, with idempotence: a retried sequence is
    /// answered with its first offset once committed, a gap is refused. `Ok` means waiting.
    fn produce(
        &mut self,
        p: usize,
        client: usize,
        producer: i64,
        seq: i32,
        value: u64,
    ) -> Result<(), i16> {
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        let r = self.replicas.get_mut(&p).ok_or(not_leader)?;
        let Role::Leader(l) = &mut r.role else {
            return Err(not_leader);
        };
        l.check_acks_all_admission()
            .map_err(|e| e.response_error().code())?;
        let offset = match r.disk.log.find_seq(producer, seq) {
            Some(offset) => offset,
            None => {
                let expected = r.disk.log.last_seq(producer).map_or(0, |s| s + 1);
                if seq != expected {
                    return Err(ResponseError::OutOfOrderSequenceNumber.code());
                }
                let offset = r.disk.log.leo();
                r.disk.log.append(Batch {
                    offset,
                    epoch: l.leader_epoch(),
                    producer,
                    seq,
                    value,
                });
                l.on_leader_append(Offset(offset + 1));
                offset
            }
        };
        r.waiting.push(Waiting {
            producer: client,
            seq,
            offset,
        });
        Ok(())
    }

    /// The controller's answer to an ISR change (`submit_isr_change`'s match).
    fn apply_isr_answer(
        &mut self,
        p: usize,
        leader_epoch: LeaderEpoch,
        answer: Result<Committed, i16>,
        now: u64,
    ) {
        let Some(r) = self.replicas.get_mut(&p) else {
            return;
        };
        if r.isr_deadline.is_some_and(|(e, _)| e == leader_epoch) {
            r.isr_deadline = None;
        }
        let Role::Leader(l) = &mut r.role else {
            return;
        };
        if l.leader_epoch() != leader_epoch {
            return;
        }
        let answer = match answer {
            Ok(c) => IsrAnswer::Committed {
                leader: c.leader,
                leader_epoch: c.leader_epoch,
                isr: c.isr,
                partition_epoch: c.partition_epoch,
            },
            Err(code) => IsrAnswer::Refused(code),
        };
        match isr_action(&answer, self.id, leader_epoch) {
            IsrAction::Apply {
                isr,
                partition_epoch,
            } => {
                l.on_isr_committed(isr, partition_epoch);
            }
            IsrAction::Revert => l.on_isr_rejected(),
            // Still pending: sent again after a pause, unless the metadata settles it.
            IsrAction::Retry => r.isr_deadline = Some((leader_epoch, now + ISR_RETRY_MS)),
        }
    }

    /// Flushes every log (the periodic flush).
    pub fn flush(&mut self) {
        for r in self.replicas.values_mut() {
            r.disk.log.flush();
        }
    }
}

/// `Partition::lead`: a newer partition state at the same epoch is adopted; a new epoch makes
/// a new leader, its epoch entry recorded before any append.
fn lead(me: BrokerId, r: &mut Replica, state: &PartitionState, now_ms: i64, ctx: &mut Ctx) {
    if let Role::Leader(l) = &mut r.role {
        if l.leader_epoch() == state.leader_epoch {
            if state.partition_epoch > l.partition_epoch() {
                l.on_partition_state(
                    state.replicas.clone(),
                    state.isr.clone(),
                    state.partition_epoch,
                );
            }
            return;
        }
    }
    let leo = r.disk.log.leo();
    let previous_hw = r.high_watermark();
    r.disk.epochs.assign(state.leader_epoch, Offset(leo));
    let epoch_start = r
        .disk
        .epochs
        .epoch_start(state.leader_epoch)
        .unwrap_or(Offset(leo));
    let config = LeaderConfig {
        min_insync_replicas: MIN_ISR,
        replica_lag_time_max_ms: LAG_MS,
    };
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
    ctx.stats.leaderships += 1;
    super::trace(|| {
        format!(
            "t={} {me} leads at {:?} from {leo}, HW {}, ISR {:?}",
            ctx.now,
            state.leader_epoch,
            leader.high_watermark(),
            state.isr
        )
    });
    answer_not_leader(r, me, ctx);
    r.role = Role::Leader(Box::new(leader));
    r.isr_deadline = None;
}

/// `Partition::follow`: the HW kept is what this replica knew; waiting produces of a deposed
/// leader are answered NOT_LEADER_OR_FOLLOWER at once.
fn follow(me: BrokerId, r: &mut Replica, state: &PartitionState, ctx: &mut Ctx) {
    if let Role::Follower { leader, epoch, .. } = r.role {
        if leader == state.leader && epoch == state.leader_epoch {
            return;
        }
    }
    let hw = r.high_watermark();
    r.role = Role::Follower {
        leader: state.leader,
        epoch: state.leader_epoch,
        hw,
    };
    r.fetch_deadline = None;
    r.isr_deadline = None;
    answer_not_leader(r, me, ctx);
}

fn answer_not_leader(r: &mut Replica, me: BrokerId, ctx: &mut Ctx) {
    for w in std::mem::take(&mut r.waiting) {
        let answer = Err(ResponseError::NotLeaderOrFollower.code());
        let message = Message::ProduceAnswer { seq: w.seq, answer };
        ctx.send(Node::Broker(me), Node::Producer(w.producer), message);
    }
}
