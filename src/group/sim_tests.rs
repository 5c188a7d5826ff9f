//! Deterministic simulations of the coordinator: a fake clock, appends completed on demand
//! (or failed), and consumer clients that join, sync, heartbeat and commit like Kafka's.

use crate::util::hash::HashMap;
use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::api::*;
use super::group_state::GroupState;
use super::subscription::encode_subscription;
use super::GroupCoordinator;
use crate::config::GroupConfig;
use crate::protocol::ResponseError;
use crate::util::rng::SeededRng as Rng;

const PARTITIONS: i32 = 4;
const TOPIC: &str = "t";
const TOPIC_PARTITIONS: i32 = 6;
const SESSION_MS: i32 = 5_000;
const REBALANCE_MS: i32 = 10_000;
const HEARTBEAT_MS: i64 = 1_000;
const TICK_MS: i64 = 100;

fn code(e: ResponseError) -> i16 {
    e.code()
}

fn config() -> GroupConfig {
    GroupConfig {
        offsets_partitions: PARTITIONS,
        min_session_timeout_ms: 1_000,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay_ms: 3_000,
        max_size: 100,
        offsets_retention_ms: 24 * 3600 * 1000,
    }
}

fn counting_member_ids() -> super::coordinator::MemberIdSource {
    let mut n = 0u64;
    Box::new(move |prefix| {
        n += 1;
        format!("{prefix}-{n}")
    })
}

/// An assignment as a test leader writes it: the generation, then partitions of TOPIC.
fn encode_assignment(generation: i32, partitions: &[i32]) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(generation);
    for p in partitions {
        buf.put_i32(*p);
    }
    buf.freeze()
}

fn decode_assignment(bytes: &Bytes) -> Option<(i32, Vec<i32>)> {
    if bytes.is_empty() {
        return None;
    }
    let mut b = bytes.clone();
    let generation = b.get_i32();
    let mut partitions = Vec::new();
    while b.remaining() >= 4 {
        partitions.push(b.get_i32());
    }
    Some((generation, partitions))
}

/// The leader's assignor: partitions round-robin over members sorted by id.
fn round_robin(generation: i32, members: &[JoinMember]) -> Vec<(String, Bytes)> {
    let mut ids: Vec<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    ids.sort();
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            let mine: Vec<i32> = (0..TOPIC_PARTITIONS)
                .filter(|p| *p as usize % ids.len() == i)
                .collect();
            (id.to_string(), encode_assignment(generation, &mine))
        })
        .collect()
}

struct Sim {
    coord: GroupCoordinator,
    now: i64,
    next_token: Token,
    /// Appends waiting for `complete`, when not auto-completed.
    held: Vec<PendingAppend>,
    hold_appends: bool,
    fail_appends: bool,
    replies: HashMap<Token, Reply>,
    /// Records of successful appends, per partition, in order.
    log: BTreeMap<i32, Vec<OffsetsRecord>>,
    /// Commits of clients, by token: (partition, offset).
    commit_watch: HashMap<Token, (i32, i64)>,
    /// The clients' acknowledged commits: the last per partition.
    acked: BTreeMap<i32, i64>,
}

impl Sim {
    fn new() -> Sim {
        let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
        for p in 0..PARTITIONS {
            coord.begin_load(p);
            coord.finish_load(p, 0);
        }
        Sim {
            coord,
            now: 0,
            next_token: 1,
            held: Vec::new(),
            hold_appends: false,
            fail_appends: false,
            replies: HashMap::default(),
            log: BTreeMap::new(),
            commit_watch: HashMap::default(),
            acked: BTreeMap::new(),
        }
    }

    fn absorb(&mut self, out: Output) {
        for (token, reply) in out.replies {
            if let (Some((partition, offset)), Reply::OffsetCommit(r)) =
                (self.commit_watch.remove(&token), &reply)
            {
                if r.partitions[0].2 == 0 {
                    self.acked.insert(partition, offset);
                }
            }
            assert!(
                self.replies.insert(token, reply).is_none(),
                "token {token} answered twice"
            );
        }
        for append in out.appends {
            if self.hold_appends {
                self.held.push(append);
            } else {
                let ok = !self.fail_appends;
                self.complete(append, ok);
            }
        }
    }

    fn complete(&mut self, append: PendingAppend, ok: bool) {
        if ok {
            self.log
                .entry(append.partition)
                .or_default()
                .extend(append.records.iter().cloned());
        }
        let out = self.coord.append_done(append.id, ok, self.now);
        self.absorb(out);
    }

    fn complete_held(&mut self, ok: bool) {
        for append in std::mem::take(&mut self.held) {
            self.complete(append, ok);
        }
    }

    fn call(&mut self, call: Call) -> Token {
        let token = self.next_token;
        self.next_token += 1;
        let out = self.coord.handle(token, call, self.now);
        self.absorb(out);
        token
    }

    fn take(&mut self, token: Token) -> Option<Reply> {
        self.replies.remove(&token)
    }

    fn advance(&mut self, ms: i64) {
        let end = self.now + ms;
        while self.now < end {
            self.now = (self.now + TICK_MS).min(end);
            let out = self.coord.tick(self.now);
            self.absorb(out);
            // The shard's ticker sleeps until next_deadline: a tick must leave nothing due.
            if let Some(next) = self.coord.next_deadline() {
                assert!(
                    next > self.now,
                    "deadline {next} still due after a tick at {}",
                    self.now
                );
            }
        }
    }

    fn join_reply(&mut self, token: Token) -> JoinReply {
        match self.take(token) {
            Some(Reply::Join(r)) => r,
            other => panic!("expected a join reply, got {other:?}"),
        }
    }

    fn sync_reply(&mut self, token: Token) -> SyncReply {
        match self.take(token) {
            Some(Reply::Sync(r)) => r,
            other => panic!("expected a sync reply, got {other:?}"),
        }
    }

    fn heartbeat(&mut self, group: &str, member_id: &str, generation: i32) -> i16 {
        let t = self.call(Call::Heartbeat(HeartbeatCall {
            group_id: group.into(),
            generation_id: generation,
            member_id: member_id.into(),
            group_instance_id: None,
        }));
        match self.take(t) {
            Some(Reply::Heartbeat(e)) => e,
            other => panic!("expected a heartbeat reply, got {other:?}"),
        }
    }

    fn commit(
        &mut self,
        group: &str,
        member_id: &str,
        generation: i32,
        partition: i32,
        offset: i64,
    ) -> Token {
        self.call(Call::OffsetCommit(OffsetCommitCall {
            group_id: group.into(),
            generation_id: generation,
            member_id: member_id.into(),
            group_instance_id: None,
            offsets: vec![OffsetToCommit {
                topic: TOPIC.into(),
                partition,
                offset,
                leader_epoch: -1,
                metadata: Some("m".into()),
                commit_timestamp: None,
            }],
        }))
    }

    fn commit_codes(&mut self, token: Token) -> Vec<i16> {
        match self.take(token) {
            Some(Reply::OffsetCommit(r)) => r.partitions.iter().map(|p| p.2).collect(),
            other => panic!("expected a commit reply, got {other:?}"),
        }
    }

    fn fetch(&mut self, group: &str) -> BTreeMap<i32, i64> {
        let t = self.call(Call::OffsetFetch(OffsetFetchCall {
            group_id: group.into(),
            partitions: None,
        }));
        match self.take(t) {
            Some(Reply::OffsetFetch(r)) => {
                assert_eq!(r.error, 0);
                r.partitions
                    .iter()
                    .map(|p| (p.partition, p.offset))
                    .collect()
            }
            other => panic!("expected a fetch reply, got {other:?}"),
        }
    }

    fn state(&self, group: &str) -> Option<GroupState> {
        self.coord.groups.get(group).map(|g| g.state)
    }

    fn generation(&self, group: &str) -> i32 {
        self.coord.groups.get(group).map_or(-1, |g| g.generation)
    }
}

fn join_call(group: &str, client: &str, member_id: &str, instance: Option<&str>) -> Call {
    Call::Join(JoinCall {
        group_id: group.into(),
        member_id: member_id.into(),
        group_instance_id: instance.map(String::from),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), encode_subscription(&[TOPIC]))],
        client_id: client.into(),
        client_host: "/127.0.0.1".into(),
        require_known_member_id: true,
        reason: None,
    })
}

fn sync_call(
    group: &str,
    member_id: &str,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
) -> Call {
    Call::Sync(SyncCall {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Will (re)join on its next step.
    Idle,
    Joining(Token),
    Syncing(Token),
    Stable,
    /// Crashed or left: sends nothing.
    Gone,
}

/// A consumer client behaving like Kafka's (eager protocol).
#[derive(Debug)]
struct Client {
    name: String,
    group: String,
    instance_id: Option<String>,
    member_id: String,
    generation: i32,
    phase: Phase,
    assignment: Vec<i32>,
    next_heartbeat_ms: i64,
    next_offset: i64,
    pending_commit: Option<Token>,
}

impl Client {
    fn new(name: &str, group: &str) -> Client {
        Client {
            name: name.into(),
            group: group.into(),
            instance_id: None,
            member_id: String::new(),
            generation: -1,
            phase: Phase::Idle,
            assignment: Vec::new(),
            next_heartbeat_ms: 0,
            next_offset: 0,
            pending_commit: None,
        }
    }

    fn rejoin(&mut self, reset_id: bool) {
        if reset_id {
            self.member_id.clear();
            self.generation = -1;
        }
        self.assignment.clear();
        self.pending_commit = None;
        self.phase = Phase::Idle;
    }

    /// Handles errors the Java consumer treats as "rejoin" (or "rejoin as a new member").
    fn on_error(&mut self, error: i16) {
        let reset = error == code(ResponseError::UnknownMemberId)
            || error == code(ResponseError::IllegalGeneration);
        if error == code(ResponseError::FencedInstanceId) {
            self.phase = Phase::Gone;
        } else {
            self.rejoin(reset);
        }
    }

    fn step(&mut self, sim: &mut Sim) {
        match self.phase.clone() {
            Phase::Gone => {}
            Phase::Idle => {
                let t = sim.call(join_call(
                    &self.group,
                    &self.name,
                    &self.member_id,
                    self.instance_id.as_deref(),
                ));
                self.phase = Phase::Joining(t);
            }
            Phase::Joining(t) => {
                let Some(Reply::Join(reply)) = sim.take(t) else {
                    return;
                };
                if reply.error == code(ResponseError::MemberIdRequired) {
                    self.member_id = reply.member_id;
                    self.phase = Phase::Idle;
                    return self.step(sim);
                }
                if reply.error != 0 {
                    return self.on_error(reply.error);
                }
                self.member_id = reply.member_id.clone();
                self.generation = reply.generation_id;
                let assignments = if reply.leader == reply.member_id && !reply.skip_assignment {
                    round_robin(reply.generation_id, &reply.members)
                } else {
                    Vec::new()
                };
                let Call::Sync(mut sync) =
                    sync_call(&self.group, &self.member_id, self.generation, assignments)
                else {
                    unreachable!()
                };
                sync.group_instance_id = self.instance_id.clone();
                let t = sim.call(Call::Sync(sync));
                self.phase = Phase::Syncing(t);
                self.step(sim);
            }
            Phase::Syncing(t) => {
                let Some(Reply::Sync(reply)) = sim.take(t) else {
                    return;
                };
                if reply.error != 0 {
                    return self.on_error(reply.error);
                }
                self.assignment = decode_assignment(&reply.assignment)
                    .map(|(_, p)| p)
                    .unwrap_or_default();
                self.phase = Phase::Stable;
                self.next_heartbeat_ms = sim.now + HEARTBEAT_MS;
            }
            Phase::Stable => {
                if let Some(t) = self.pending_commit {
                    if sim.take(t).is_some() {
                        self.pending_commit = None;
                    }
                }
                if sim.now < self.next_heartbeat_ms {
                    return;
                }
                self.next_heartbeat_ms = sim.now + HEARTBEAT_MS;
                let t = sim.call(Call::Heartbeat(HeartbeatCall {
                    group_id: self.group.clone(),
                    generation_id: self.generation,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.instance_id.clone(),
                }));
                let Some(Reply::Heartbeat(error)) = sim.take(t) else {
                    panic!("heartbeats are answered at once");
                };
                if error != 0 {
                    return self.on_error(error);
                }
                let Some(&partition) = self.assignment.first() else {
                    return;
                };
                if self.pending_commit.is_some() {
                    return;
                }
                self.next_offset += 1;
                // Watched from the start: the reply may come out of this very call.
                sim.commit_watch
                    .insert(sim.next_token, (partition, self.next_offset));
                let t = sim.call(Call::OffsetCommit(OffsetCommitCall {
                    group_id: self.group.clone(),
                    generation_id: self.generation,
                    member_id: self.member_id.clone(),
                    group_instance_id: self.instance_id.clone(),
                    offsets: vec![OffsetToCommit {
                        topic: TOPIC.into(),
                        partition,
                        offset: self.next_offset,
                        leader_epoch: -1,
                        metadata: None,
                        commit_timestamp: None,
                    }],
                }));
                if sim.take(t).is_none() {
                    self.pending_commit = Some(t);
                }
            }
        }
    }

    fn leave(&mut self, sim: &mut Sim) {
        let t = sim.call(Call::Leave(LeaveCall {
            group_id: self.group.clone(),
            members: vec![(self.member_id.clone(), self.instance_id.clone())],
        }));
        sim.take(t);
        self.phase = Phase::Gone;
    }
}

/// Steps every client each tick until all live ones are Stable in the same generation.
fn settle(sim: &mut Sim, clients: &mut [Client], max_ms: i64) {
    let deadline = sim.now + max_ms;
    while sim.now < deadline {
        for c in clients.iter_mut() {
            c.step(sim);
        }
        let live: Vec<&Client> = clients.iter().filter(|c| c.phase != Phase::Gone).collect();
        let generations: BTreeSet<i32> = live.iter().map(|c| c.generation).collect();
        if live.iter().all(|c| c.phase == Phase::Stable)
            && generations.len() <= 1
            && live
                .first()
                .is_none_or(|c| sim.generation(&c.group) == c.generation)
            && live
                .first()
                .is_none_or(|c| sim.state(&c.group) == Some(GroupState::Stable))
        {
            return;
        }
        sim.advance(TICK_MS);
    }
    panic!("clients did not settle: {clients:#?}");
}

/// Steps every client each tick for `ms`.
fn run(sim: &mut Sim, clients: &mut [Client], ms: i64) {
    let end = sim.now + ms;
    while sim.now < end {
        for c in clients.iter_mut() {
            c.step(sim);
        }
        sim.advance(TICK_MS);
    }
}

fn assert_disjoint_cover(clients: &[Client]) {
    let mut seen = BTreeSet::new();
    for c in clients.iter().filter(|c| c.phase != Phase::Gone) {
        for p in &c.assignment {
            assert!(
                seen.insert(*p),
                "partition {p} assigned twice: {clients:#?}"
            );
        }
    }
    assert_eq!(seen, (0..TOPIC_PARTITIONS).collect(), "{clients:#?}");
}

/// Joins a dynamic member through MEMBER_ID_REQUIRED; returns its id and the join token.
fn join_new(sim: &mut Sim, group: &str, client: &str) -> (String, Token) {
    let t = sim.call(join_call(group, client, "", None));
    let first = sim.join_reply(t);
    assert_eq!(first.error, code(ResponseError::MemberIdRequired));
    assert!(first.member_id.starts_with(client));
    let t = sim.call(join_call(group, client, &first.member_id, None));
    (first.member_id, t)
}

#[test]
fn single_member_lifecycle() {
    let mut sim = Sim::new();
    let (id, t) = join_new(&mut sim, "g", "c");
    assert_eq!(sim.state("g"), Some(GroupState::PreparingRebalance));
    // The initial rebalance delay holds the reply.
    sim.advance(2_900);
    assert!(sim.take(t).is_none());
    sim.advance(200);
    let join = sim.join_reply(t);
    assert_eq!((join.error, join.generation_id), (0, 1));
    assert_eq!(join.leader, id);
    assert_eq!(join.protocol_name.as_deref(), Some("range"));
    assert_eq!(join.members.len(), 1);
    assert_eq!(sim.state("g"), Some(GroupState::CompletingRebalance));
    let assignment = encode_assignment(1, &[0, 1]);
    let t = sim.call(sync_call(
        "g",
        &id,
        1,
        vec![(id.clone(), assignment.clone())],
    ));
    let sync = sim.sync_reply(t);
    assert_eq!((sync.error, sync.assignment), (0, assignment));
    assert_eq!(sim.state("g"), Some(GroupState::Stable));
    assert_eq!(sim.heartbeat("g", &id, 1), 0);
    let t = sim.commit("g", &id, 1, 0, 42);
    assert_eq!(sim.commit_codes(t), vec![0]);
    assert_eq!(sim.fetch("g"), BTreeMap::from([(0, 42)]));
    let t = sim.call(Call::Leave(LeaveCall {
        group_id: "g".into(),
        members: vec![(id.clone(), None)],
    }));
    match sim.take(t) {
        Some(Reply::Leave(r)) => assert_eq!(r.members, vec![(id.clone(), None, 0)]),
        other => panic!("{other:?}"),
    }
    assert_eq!(sim.state("g"), Some(GroupState::Empty));
    assert_eq!(sim.generation("g"), 2);
    assert_eq!(
        sim.heartbeat("g", &id, 2),
        code(ResponseError::UnknownMemberId)
    );
    // Offsets outlive membership.
    assert_eq!(sim.fetch("g"), BTreeMap::from([(0, 42)]));
}

#[test]
fn three_members_get_disjoint_assignments() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..3).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    settle(&mut sim, &mut clients, 30_000);
    assert_eq!(
        sim.generation("g"),
        1,
        "the initial delay gathers all three"
    );
    assert_disjoint_cover(&clients);
    assert!(clients.iter().all(|c| c.assignment.len() == 2));
}

#[test]
fn member_leaving_triggers_rebalance_and_survivors_resync() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..3).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    settle(&mut sim, &mut clients, 30_000);
    let before = sim.generation("g");
    let leaver = &mut clients[1];
    leaver.leave(&mut sim);
    assert_eq!(sim.state("g"), Some(GroupState::PreparingRebalance));
    settle(&mut sim, &mut clients, 30_000);
    assert_eq!(sim.generation("g"), before + 1);
    assert_eq!(sim.coord.groups["g"].members.len(), 2);
    assert_disjoint_cover(&clients);
}

#[test]
fn silent_member_is_removed_after_session_timeout() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..2).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    settle(&mut sim, &mut clients, 30_000);
    let before = sim.generation("g");
    clients[0].phase = Phase::Gone; // crashes: no more heartbeats
    let crashed = clients[0].member_id.clone();
    run(&mut sim, &mut clients, i64::from(SESSION_MS) - 500);
    assert!(sim.coord.groups["g"].member(&crashed).is_some());
    run(&mut sim, &mut clients, 1_000);
    settle(&mut sim, &mut clients, 30_000);
    assert!(sim.coord.groups["g"].member(&crashed).is_none());
    assert_eq!(sim.generation("g"), before + 1);
    assert_eq!(clients[1].assignment.len() as i32, TOPIC_PARTITIONS);
}

#[test]
fn member_waiting_in_join_is_not_expired_by_its_session() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..2).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    settle(&mut sim, &mut clients, 30_000);
    let generation = sim.generation("g");
    let (a, b) = (clients[0].member_id.clone(), clients[1].member_id.clone());
    // c0 rejoins and waits; c1 keeps heartbeating but never rejoins (a stuck poll loop), so
    // the join phase lasts the rebalance timeout, longer than c0's session.
    let t = sim.call(join_call("g", "c0", &a, None));
    for _ in 0..(i64::from(REBALANCE_MS) / HEARTBEAT_MS - 1) {
        sim.advance(HEARTBEAT_MS);
        assert_eq!(
            sim.heartbeat("g", &b, generation),
            code(ResponseError::RebalanceInProgress)
        );
    }
    assert!(sim.take(t).is_none());
    assert!(sim.coord.groups["g"].member(&a).is_some());
    sim.advance(HEARTBEAT_MS + TICK_MS);
    let join = sim.join_reply(t);
    assert_eq!(join.error, 0);
    assert_eq!(join.members.len(), 1, "c1 was dropped for not rejoining");
    assert_eq!(
        sim.heartbeat("g", &b, generation),
        code(ResponseError::UnknownMemberId)
    );
}

#[test]
fn static_member_restart_keeps_assignment_and_fences_old_id() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..2).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.instance_id = Some(format!("instance-{i}"));
    }
    settle(&mut sim, &mut clients, 30_000);
    let generation = sim.generation("g");
    let old_id = clients[1].member_id.clone();
    let old_assignment = clients[1].assignment.clone();
    // Restart within the session timeout: same instance id, no member id.
    sim.advance(1_000);
    let t = sim.call(join_call("g", "c1", "", Some("instance-1")));
    let join = sim.join_reply(t);
    assert_eq!(join.error, 0);
    assert_ne!(join.member_id, old_id);
    assert!(join.member_id.starts_with("instance-1-"));
    assert_eq!(join.generation_id, generation, "no rebalance");
    assert_eq!(sim.state("g"), Some(GroupState::Stable));
    let t = sim.call(sync_call("g", &join.member_id, generation, vec![]));
    let sync = sim.sync_reply(t);
    assert_eq!(
        decode_assignment(&sync.assignment).unwrap().1,
        old_assignment
    );
    // The old incarnation is fenced when it names its instance id.
    let t = sim.call(Call::Heartbeat(HeartbeatCall {
        group_id: "g".into(),
        generation_id: generation,
        member_id: old_id.clone(),
        group_instance_id: Some("instance-1".into()),
    }));
    assert!(
        matches!(sim.take(t), Some(Reply::Heartbeat(e)) if e == code(ResponseError::FencedInstanceId))
    );
    let t = sim.call(Call::OffsetCommit(OffsetCommitCall {
        group_id: "g".into(),
        generation_id: generation,
        member_id: old_id,
        group_instance_id: Some("instance-1".into()),
        offsets: vec![OffsetToCommit {
            topic: TOPIC.into(),
            partition: 0,
            offset: 1,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: None,
        }],
    }));
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::FencedInstanceId)]
    );
}

#[test]
fn static_leader_restart_gets_skip_assignment() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "g")];
    clients[0].instance_id = Some("i0".into());
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.call(join_call("g", "c0", "", Some("i0")));
    let join = sim.join_reply(t);
    assert_eq!(join.error, 0);
    assert!(join.skip_assignment);
    assert_eq!(join.leader, join.member_id);
    assert_eq!(join.members.len(), 1);
}

#[test]
fn failed_store_of_static_rejoin_reverts_to_old_member() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "g"), Client::new("c1", "g")];
    clients[1].instance_id = Some("i1".into());
    settle(&mut sim, &mut clients, 30_000);
    let old_id = clients[1].member_id.clone();
    sim.hold_appends = true;
    let t = sim.call(join_call("g", "c1", "", Some("i1")));
    assert!(sim.take(t).is_none(), "waits for the store");
    sim.complete_held(false);
    let join = sim.join_reply(t);
    assert_eq!(join.error, code(ResponseError::CoordinatorNotAvailable));
    assert!(sim.coord.groups["g"].member(&old_id).is_some());
}

// The cases continue in two files (this one holds the harness).
#[path = "sim_admin_tests.rs"]
mod admin;
#[path = "sim_protocol_tests.rs"]
mod protocol;
