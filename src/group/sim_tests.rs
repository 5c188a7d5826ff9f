//! Deterministic simulations of the coordinator: a fake clock, appends completed on demand
//! (or failed), and consumer clients that join, sync, heartbeat and commit like Kafka's.

use std::collections::{BTreeMap, BTreeSet, HashMap};

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
            replies: HashMap::new(),
            log: BTreeMap::new(),
            commit_watch: HashMap::new(),
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

#[test]
fn commits_during_rebalance() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..2).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    settle(&mut sim, &mut clients, 30_000);
    let generation = sim.generation("g");
    let (a, b) = (clients[0].member_id.clone(), clients[1].member_id.clone());
    // A third member starts a rebalance: commits with the current generation still pass.
    let (_c, t_c) = join_new(&mut sim, "g", "c2");
    assert_eq!(sim.state("g"), Some(GroupState::PreparingRebalance));
    let t = sim.commit("g", &a, generation, 0, 5);
    assert_eq!(sim.commit_codes(t), vec![0]);
    assert_eq!(
        sim.heartbeat("g", &a, generation),
        code(ResponseError::RebalanceInProgress)
    );
    // Both old members rejoin; the join phase completes.
    let t_a = sim.call(join_call("g", "c0", &a, None));
    let t_b = sim.call(join_call("g", "c1", &b, None));
    for t in [t_a, t_b, t_c] {
        assert_eq!(sim.join_reply(t).generation_id, generation + 1);
    }
    assert_eq!(sim.state("g"), Some(GroupState::CompletingRebalance));
    // The old generation is refused; the new one must wait for its assignment.
    let t = sim.commit("g", &a, generation, 0, 6);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::IllegalGeneration)]
    );
    let t = sim.commit("g", &a, generation + 1, 0, 6);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::RebalanceInProgress)]
    );
    // Heartbeats are fine while assignments are computed (Kafka resets the session).
    assert_eq!(sim.heartbeat("g", &b, generation + 1), 0);
    assert_eq!(sim.fetch("g"), BTreeMap::from([(0, 5)]));
}

#[test]
fn commit_is_visible_only_after_its_append() {
    let mut sim = Sim::new();
    sim.hold_appends = true;
    let t = sim.commit("simple", "", -1, 3, 100);
    assert!(sim.take(t).is_none());
    assert_eq!(sim.held.len(), 1);
    assert_eq!(sim.held[0].records.len(), 1);
    assert!(sim.fetch("simple").is_empty());
    sim.complete_held(true);
    assert_eq!(sim.commit_codes(t), vec![0]);
    assert_eq!(sim.fetch("simple"), BTreeMap::from([(3, 100)]));
    // A simple consumer's group is Empty with no protocol type.
    let t = sim.call(Call::ListGroups {
        states_filter: vec![],
    });
    match sim.take(t) {
        Some(Reply::ListGroups(r)) => assert_eq!(
            r.groups,
            vec![ListedGroup {
                group_id: "simple".into(),
                protocol_type: String::new(),
                state: "Empty".into()
            }]
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn failed_commit_append_is_an_error_and_not_visible() {
    let mut sim = Sim::new();
    let t = sim.commit("simple", "", -1, 0, 1);
    assert_eq!(sim.commit_codes(t), vec![0]);
    sim.fail_appends = true;
    let t = sim.commit("simple", "", -1, 0, 2);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::CoordinatorNotAvailable)]
    );
    assert_eq!(sim.fetch("simple"), BTreeMap::from([(0, 1)]));
}

#[test]
fn commit_validation() {
    let mut sim = Sim::new();
    // Unknown group with a generation: a member of a lost generation.
    let t = sim.commit("g", "m", 3, 0, 1);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::IllegalGeneration)]
    );
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    // A non-member cannot commit to a group with members.
    let t = sim.commit("g", "", -1, 0, 1);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::UnknownMemberId)]
    );
    let t = sim.commit("g", "nobody", 1, 0, 1);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::UnknownMemberId)]
    );
    // Oversized metadata fails only its partition.
    let id = clients[0].member_id.clone();
    let t = sim.call(Call::OffsetCommit(OffsetCommitCall {
        group_id: "g".into(),
        generation_id: 1,
        member_id: id,
        group_instance_id: None,
        offsets: vec![
            OffsetToCommit {
                topic: TOPIC.into(),
                partition: 0,
                offset: 7,
                leader_epoch: 3,
                metadata: Some("x".repeat(4097)),
                commit_timestamp: None,
            },
            OffsetToCommit {
                topic: TOPIC.into(),
                partition: 1,
                offset: 8,
                leader_epoch: 3,
                metadata: None,
                commit_timestamp: None,
            },
        ],
    }));
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::OffsetMetadataTooLarge), 0]
    );
    assert_eq!(sim.fetch("g"), BTreeMap::from([(1, 8)]));
}

#[test]
fn failed_assignment_store_errors_syncs_and_rebalances() {
    let mut sim = Sim::new();
    let (a, t_a) = join_new(&mut sim, "g", "c0");
    let (b, t_b) = join_new(&mut sim, "g", "c1");
    // The initial delay is extended once because a second member came.
    sim.advance(6_100);
    let ja = sim.join_reply(t_a);
    let jb = sim.join_reply(t_b);
    assert_eq!(ja.leader, a);
    assert!(
        jb.members.is_empty(),
        "followers do not get the member list"
    );
    sim.hold_appends = true;
    let t_follower = sim.call(sync_call("g", &b, 1, vec![]));
    let t_leader = sim.call(sync_call("g", &a, 1, round_robin(1, &ja.members)));
    assert_eq!(sim.held.len(), 1, "one append for the whole assignment");
    assert!(sim.take(t_follower).is_none());
    sim.complete_held(false);
    for t in [t_follower, t_leader] {
        assert_eq!(
            sim.sync_reply(t).error,
            code(ResponseError::CoordinatorNotAvailable)
        );
    }
    assert_eq!(sim.state("g"), Some(GroupState::PreparingRebalance));
}

#[test]
fn members_left_out_by_the_leader_get_empty_assignments() {
    let mut sim = Sim::new();
    let (a, t_a) = join_new(&mut sim, "g", "c0");
    let (b, t_b) = join_new(&mut sim, "g", "c1");
    // The initial delay is extended once because a second member came.
    sim.advance(6_100);
    sim.join_reply(t_a);
    sim.join_reply(t_b);
    let t_leader = sim.call(sync_call(
        "g",
        &a,
        1,
        vec![(a.clone(), encode_assignment(1, &[0]))],
    ));
    assert_eq!(sim.sync_reply(t_leader).error, 0);
    let t = sim.call(sync_call("g", &b, 1, vec![]));
    let sync = sim.sync_reply(t);
    assert_eq!((sync.error, sync.assignment.len()), (0, 0));
}

#[test]
fn member_that_never_syncs_is_removed() {
    let mut sim = Sim::new();
    let (a, t_a) = join_new(&mut sim, "g", "c0");
    let (_b, t_b) = join_new(&mut sim, "g", "c1");
    sim.advance(6_100);
    let ja = sim.join_reply(t_a);
    sim.join_reply(t_b);
    let t = sim.call(sync_call("g", &a, 1, round_robin(1, &ja.members)));
    assert_eq!(sim.sync_reply(t).error, 0);
    // c1 vanished before syncing: the sync deadline (the rebalance timeout) removes it.
    for _ in 0..(i64::from(REBALANCE_MS) / HEARTBEAT_MS) {
        sim.advance(HEARTBEAT_MS);
        let _ = sim.heartbeat("g", &a, sim.generation("g"));
    }
    assert_eq!(sim.coord.groups["g"].members.len(), 1);
    assert_eq!(sim.state("g"), Some(GroupState::PreparingRebalance));
}

#[test]
fn unused_member_id_expires_and_unblocks_the_join() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let a = clients[0].member_id.clone();
    // A new client gets an id but never comes back; the leader's rejoin waits for it.
    let t = sim.call(join_call("g", "ghost", "", None));
    assert_eq!(
        sim.join_reply(t).error,
        code(ResponseError::MemberIdRequired)
    );
    let t = sim.call(join_call("g", "c0", &a, None));
    sim.advance(i64::from(SESSION_MS) - 200);
    assert!(sim.take(t).is_none());
    sim.advance(400);
    let join = sim.join_reply(t);
    assert_eq!((join.error, join.members.len()), (0, 1));
}

#[test]
fn initial_delay_is_extended_by_new_members_up_to_the_rebalance_timeout() {
    let mut sim = Sim::new();
    let (_, t0) = join_new(&mut sim, "g", "c0");
    sim.advance(2_000);
    let (_, t1) = join_new(&mut sim, "g", "c1");
    sim.advance(1_100); // first delay over: extended because c1 came
    assert!(sim.take(t0).is_none());
    sim.advance(3_000);
    assert_eq!(sim.join_reply(t0).members.len(), 2);
    assert_eq!(sim.join_reply(t1).generation_id, 1);
}

#[test]
fn join_validation() {
    let mut sim = Sim::new();
    let join = |sim: &mut Sim, call: Call| {
        let t = sim.call(call);
        sim.join_reply(t).error
    };
    assert_eq!(
        join(&mut sim, join_call("", "c", "", None)),
        code(ResponseError::InvalidGroupId)
    );
    let Call::Join(mut bad_session) = join_call("g", "c", "", None) else {
        unreachable!()
    };
    bad_session.session_timeout_ms = 10;
    assert_eq!(
        join(&mut sim, Call::Join(bad_session)),
        code(ResponseError::InvalidSessionTimeout)
    );
    assert_eq!(
        join(&mut sim, join_call("g", "c", "who", None)),
        code(ResponseError::UnknownMemberId)
    );
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let Call::Join(mut other_type) = join_call("g", "c", "", None) else {
        unreachable!()
    };
    other_type.protocol_type = "connect".into();
    assert_eq!(
        join(&mut sim, Call::Join(other_type)),
        code(ResponseError::InconsistentGroupProtocol)
    );
    let Call::Join(mut other_protocol) = join_call("g", "c", "", None) else {
        unreachable!()
    };
    other_protocol.protocols = vec![("sticky".into(), Bytes::new())];
    assert_eq!(
        join(&mut sim, Call::Join(other_protocol)),
        code(ResponseError::InconsistentGroupProtocol)
    );
    assert_eq!(
        join(&mut sim, join_call("g", "c", "who", None)),
        code(ResponseError::UnknownMemberId)
    );
}

#[test]
fn group_max_size_is_enforced() {
    let mut sim = Sim::new();
    sim.coord.config.max_size = 1;
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.call(join_call("g", "c1", "", None));
    let id = sim.join_reply(t).member_id;
    let t = sim.call(join_call("g", "c1", &id, None));
    assert_eq!(
        sim.join_reply(t).error,
        code(ResponseError::GroupMaxSizeReached)
    );
}

#[test]
fn heartbeat_and_sync_errors() {
    let mut sim = Sim::new();
    assert_eq!(
        sim.heartbeat("nope", "m", 1),
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        sim.heartbeat("", "m", 1),
        code(ResponseError::InvalidGroupId)
    );
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let id = clients[0].member_id.clone();
    assert_eq!(
        sim.heartbeat("g", &id, 7),
        code(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        sim.heartbeat("g", "other", 1),
        code(ResponseError::UnknownMemberId)
    );
    let t = sim.call(sync_call("g", &id, 7, vec![]));
    assert_eq!(
        sim.sync_reply(t).error,
        code(ResponseError::IllegalGeneration)
    );
    let Call::Sync(mut wrong) = sync_call("g", &id, 1, vec![]) else {
        unreachable!()
    };
    wrong.protocol_name = Some("roundrobin".into());
    let t = sim.call(Call::Sync(wrong));
    assert_eq!(
        sim.sync_reply(t).error,
        code(ResponseError::InconsistentGroupProtocol)
    );
}

#[test]
fn leave_errors() {
    let mut sim = Sim::new();
    let t = sim.call(Call::Leave(LeaveCall {
        group_id: "nope".into(),
        members: vec![("m".into(), None)],
    }));
    match sim.take(t) {
        Some(Reply::Leave(r)) => {
            assert_eq!(r.error, 0);
            assert_eq!(
                r.members,
                vec![("m".into(), None, code(ResponseError::UnknownMemberId))]
            );
        }
        other => panic!("{other:?}"),
    }
    let mut clients = vec![Client::new("c0", "g")];
    clients[0].instance_id = Some("i0".into());
    settle(&mut sim, &mut clients, 30_000);
    // Removal by instance id alone (admin), next to an unknown member.
    let t = sim.call(Call::Leave(LeaveCall {
        group_id: "g".into(),
        members: vec![("x".into(), None), (String::new(), Some("i0".into()))],
    }));
    match sim.take(t) {
        Some(Reply::Leave(r)) => {
            let codes: Vec<i16> = r.members.iter().map(|m| m.2).collect();
            assert_eq!(codes, vec![code(ResponseError::UnknownMemberId), 0]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(sim.state("g"), Some(GroupState::Empty));
}

#[test]
fn snapshot_replay_restores_groups_and_offsets() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..2).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    settle(&mut sim, &mut clients, 30_000);
    run(&mut sim, &mut clients, 5_000);
    let t = sim.commit("simple", "", -1, 2, 9);
    assert_eq!(sim.commit_codes(t), vec![0]);
    let generation = sim.generation("g");
    let offsets_g = sim.fetch("g");
    assert!(!offsets_g.is_empty());
    let restore = |records: Vec<(i32, Vec<OffsetsRecord>)>| {
        let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
        for (p, recs) in records {
            coord.begin_load(p);
            for r in recs {
                coord.replay(p, &r.key, r.value.as_deref()).unwrap();
            }
            coord.finish_load(p, 1_000_000);
        }
        coord
    };
    let snapshot: Vec<(i32, Vec<OffsetsRecord>)> = (0..PARTITIONS)
        .map(|p| (p, sim.coord.snapshot_records(p).unwrap_or_default()))
        .collect();
    let full_log: Vec<(i32, Vec<OffsetsRecord>)> = (0..PARTITIONS)
        .map(|p| (p, sim.log.get(&p).cloned().unwrap_or_default()))
        .collect();
    for coord in [restore(snapshot), restore(full_log)] {
        let mut restored = Sim::new();
        restored.coord = coord;
        restored.now = 1_000_000;
        assert_eq!(restored.generation("g"), generation);
        assert_eq!(restored.state("g"), Some(GroupState::Stable));
        assert_eq!(restored.fetch("g"), offsets_g);
        assert_eq!(restored.fetch("simple"), BTreeMap::from([(2, 9)]));
        // The members carry on in the restored generation.
        let id = &clients[0].member_id;
        assert_eq!(restored.heartbeat("g", id, generation), 0);
        let t = restored.call(sync_call("g", id, generation, vec![]));
        let sync = restored.sync_reply(t);
        assert_eq!(
            decode_assignment(&sync.assignment).unwrap().1,
            clients[0].assignment
        );
    }
}

#[test]
fn empty_group_generation_survives_restart() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    clients[0].leave(&mut sim);
    assert_eq!(
        (sim.state("g"), sim.generation("g")),
        (Some(GroupState::Empty), 2)
    );
    let p = sim.coord.groups["g"].partition;
    let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
    coord.begin_load(p);
    for r in &sim.log[&p] {
        coord.replay(p, &r.key, r.value.as_deref()).unwrap();
    }
    coord.finish_load(p, 0);
    assert_eq!(coord.groups["g"].generation, 2);
    assert_eq!(coord.groups["g"].state, GroupState::Empty);
}

#[test]
fn loading_and_foreign_partitions() {
    let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
    let p = super::api::offsets_partition_for("g", PARTITIONS);
    let mut out = coord.handle(1, join_call("g", "c", "", None), 0);
    assert!(
        matches!(&out.replies[0].1, Reply::Join(r) if r.error == code(ResponseError::NotCoordinator))
    );
    coord.begin_load(p);
    out = coord.handle(2, join_call("g", "c", "", None), 0);
    assert!(
        matches!(&out.replies[0].1, Reply::Join(r) if r.error == code(ResponseError::CoordinatorLoadInProgress))
    );
    out = coord.handle(
        3,
        Call::ListGroups {
            states_filter: vec![],
        },
        0,
    );
    assert!(
        matches!(&out.replies[0].1, Reply::ListGroups(r) if r.error == code(ResponseError::CoordinatorLoadInProgress))
    );
    // Unknown record types are skipped; garbage is an error.
    assert!(coord.replay(p, &[0, 9, 0, 0], Some(b"whatever")).is_ok());
    assert!(coord.replay(p, &[0, 1, 0x7f], None).is_err());
    assert!(coord.replay(p + 1, &[0, 2, 0, 1, b'g'], None).is_err());
    coord.finish_load(p, 0);
    out = coord.handle(4, join_call("g", "c", "", None), 0);
    assert!(
        matches!(&out.replies[0].1, Reply::Join(r) if r.error == code(ResponseError::MemberIdRequired))
    );
}

#[test]
fn list_groups_filters_by_state_case_insensitively() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "busy")];
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.commit("idle", "", -1, 0, 1);
    sim.take(t);
    let mut list = |filter: &[&str]| {
        let t = sim.call(Call::ListGroups {
            states_filter: filter.iter().map(|s| s.to_string()).collect(),
        });
        match sim.take(t) {
            Some(Reply::ListGroups(r)) => {
                r.groups.into_iter().map(|g| g.group_id).collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(list(&[]), vec!["busy", "idle"]);
    assert_eq!(list(&["stable"]), vec!["busy"]);
    assert_eq!(list(&["EMPTY"]), vec!["idle"]);
    assert_eq!(list(&["Stable", "Empty"]), vec!["busy", "idle"]);
    assert!(list(&["Dead"]).is_empty());
}

#[test]
fn describe_groups() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.call(Call::DescribeGroups {
        group_ids: vec!["g".into(), "unknown".into()],
    });
    let Some(Reply::DescribeGroups(d)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(
        (d[0].state.as_str(), d[0].protocol_data.as_str()),
        ("Stable", "range")
    );
    assert_eq!(d[0].protocol_type, "consumer");
    assert_eq!(d[0].members.len(), 1);
    assert_eq!(d[0].members[0].member_id, clients[0].member_id);
    assert_eq!(d[0].members[0].metadata, encode_subscription(&[TOPIC]));
    assert!(!d[0].members[0].assignment.is_empty());
    assert_eq!((d[1].state.as_str(), d[1].error), ("Dead", 0));
}

#[test]
fn delete_groups() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "busy")];
    settle(&mut sim, &mut clients, 30_000);
    for (group, p) in [("idle", 0), ("idle", 1), ("other", 0)] {
        let t = sim.commit(group, "", -1, p, 1);
        sim.take(t);
    }
    sim.hold_appends = true;
    let t = sim.call(Call::DeleteGroups {
        group_ids: vec!["busy".into(), "nope".into(), "idle".into(), "other".into()],
    });
    assert!(sim.take(t).is_none(), "waits for the tombstones");
    assert_eq!(sim.state("idle"), Some(GroupState::Dead));
    let tombstones: usize = sim.held.iter().map(|a| a.records.len()).sum();
    assert_eq!(
        tombstones,
        2 + 1 + 2,
        "offsets and group metadata of both groups"
    );
    assert!(sim
        .held
        .iter()
        .flat_map(|a| &a.records)
        .all(|r| r.value.is_none()));
    sim.complete_held(true);
    let Some(Reply::DeleteGroups(r)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(
        r,
        vec![
            ("busy".into(), code(ResponseError::NonEmptyGroup)),
            ("nope".into(), code(ResponseError::GroupIdNotFound)),
            ("idle".into(), 0),
            ("other".into(), 0),
        ]
    );
    assert_eq!(sim.state("idle"), None);
    assert!(sim.fetch("idle").is_empty());
    sim.hold_appends = false;
    let t = sim.call(Call::DeleteGroups {
        group_ids: vec!["idle".into()],
    });
    let Some(Reply::DeleteGroups(r)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(
        r,
        vec![("idle".into(), code(ResponseError::GroupIdNotFound))]
    );
}

#[test]
fn failed_delete_keeps_the_group() {
    let mut sim = Sim::new();
    let t = sim.commit("idle", "", -1, 0, 1);
    sim.take(t);
    sim.fail_appends = true;
    let t = sim.call(Call::DeleteGroups {
        group_ids: vec!["idle".into()],
    });
    let Some(Reply::DeleteGroups(r)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(
        r,
        vec![("idle".into(), code(ResponseError::CoordinatorNotAvailable))]
    );
    assert_eq!(sim.state("idle"), Some(GroupState::Empty));
    assert_eq!(sim.fetch("idle"), BTreeMap::from([(0, 1)]));
}

#[test]
fn offset_delete() {
    let mut sim = Sim::new();
    let delete = |sim: &mut Sim, group: &str, topics: &[(&str, i32)]| {
        let t = sim.call(Call::OffsetDelete(OffsetDeleteCall {
            group_id: group.into(),
            partitions: topics.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
        }));
        match sim.take(t) {
            Some(Reply::OffsetDelete(r)) => r,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        delete(&mut sim, "nope", &[("t", 0)]).error,
        code(ResponseError::GroupIdNotFound)
    );
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let id = clients[0].member_id.clone();
    let generation = sim.generation("g");
    for (topic, p) in [(TOPIC, 0), ("old", 0)] {
        let t = sim.call(Call::OffsetCommit(OffsetCommitCall {
            group_id: "g".into(),
            generation_id: generation,
            member_id: id.clone(),
            group_instance_id: None,
            offsets: vec![OffsetToCommit {
                topic: topic.into(),
                partition: p,
                offset: 3,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        }));
        assert_eq!(sim.commit_codes(t), vec![0]);
    }
    let r = delete(&mut sim, "g", &[(TOPIC, 0), ("old", 0)]);
    assert_eq!(r.error, 0);
    assert_eq!(
        r.partitions,
        vec![
            (TOPIC.into(), 0, code(ResponseError::GroupSubscribedToTopic)),
            ("old".into(), 0, 0)
        ]
    );
    let t = sim.call(Call::OffsetFetch(OffsetFetchCall {
        group_id: "g".into(),
        partitions: Some(vec![("old".into(), 0), (TOPIC.into(), 0)]),
    }));
    let Some(Reply::OffsetFetch(f)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(f.partitions[0].offset, -1);
    assert_eq!(f.partitions[1].offset, 3);
    // Once empty, any topic's offsets can go.
    clients[0].leave(&mut sim);
    let r = delete(&mut sim, "g", &[(TOPIC, 0)]);
    assert_eq!(r.partitions, vec![(TOPIC.into(), 0, 0)]);
    assert!(sim.fetch("g").is_empty());
}

#[test]
fn offsets_of_an_empty_group_expire_after_retention() {
    let mut sim = Sim::new();
    let retention = config().offsets_retention_ms;
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.commit("g", &clients[0].member_id, sim.generation("g"), 0, 5);
    assert_eq!(sim.commit_codes(t), vec![0]);
    clients[0].phase = Phase::Gone;
    sim.advance(i64::from(SESSION_MS) + 1_000);
    assert_eq!(sim.state("g"), Some(GroupState::Empty));
    let empty_since = sim.coord.groups["g"].state_since_ms.unwrap();
    sim.advance(retention - 700_000);
    assert_eq!(sim.fetch("g"), BTreeMap::from([(0, 5)]));
    sim.advance(empty_since + retention + 700_000 - sim.now);
    assert_eq!(sim.state("g"), None, "the group went with its last offset");
    let p = super::api::offsets_partition_for("g", PARTITIONS);
    let last = sim.log[&p].iter().rev().take(2).collect::<Vec<_>>();
    assert!(last.iter().all(|r| r.value.is_none()));
}

#[test]
fn simple_consumer_offsets_expire_by_commit_time() {
    let mut sim = Sim::new();
    let retention = config().offsets_retention_ms;
    let t = sim.commit("simple", "", -1, 0, 1);
    sim.take(t);
    sim.advance(retention / 2);
    let t = sim.commit("simple", "", -1, 1, 1);
    sim.take(t);
    sim.advance(retention / 2 + OFFSETS_CHECK_MS);
    assert_eq!(sim.fetch("simple"), BTreeMap::from([(1, 1)]));
}

const OFFSETS_CHECK_MS: i64 = super::coordinator::OFFSETS_RETENTION_CHECK_INTERVAL_MS;

fn check_invariants(sim: &Sim, clients: &[Client], generations: &mut HashMap<String, i32>) {
    for group in sim.coord.groups.values() {
        let last = generations
            .entry(group.id.clone())
            .or_insert(group.generation);
        assert!(
            group.generation >= *last,
            "generation went back in {}",
            group.id
        );
        *last = group.generation;
        if group.state == GroupState::Stable {
            let mut seen = BTreeSet::new();
            for m in &group.members {
                if let Some((generation, partitions)) = decode_assignment(&m.assignment) {
                    assert_eq!(
                        generation, group.generation,
                        "stale assignment in a stable group"
                    );
                    for p in partitions {
                        assert!(seen.insert(p), "partition {p} assigned twice");
                    }
                }
            }
        }
    }
    // Clients consuming in the current generation never share a partition.
    let current = sim.generation("g");
    let mut owned = BTreeSet::new();
    for c in clients
        .iter()
        .filter(|c| c.phase == Phase::Stable && c.generation == current)
    {
        for p in &c.assignment {
            assert!(
                owned.insert(*p),
                "partition {p} consumed twice: {clients:#?}"
            );
        }
    }
}

#[test]
fn randomized_membership_churn_keeps_invariants() {
    for seed in 1..=12u64 {
        let mut rng = Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut sim = Sim::new();
        // Appends finish a few ticks later, some fail.
        sim.hold_appends = true;
        let mut clients: Vec<Client> = Vec::new();
        let mut generations = HashMap::new();
        let mut next_client = 0;
        for _ in 0..3_000 {
            if rng.chance(15) || clients.is_empty() {
                let mut c = Client::new(&format!("c{next_client}"), "g");
                if rng.chance(300) {
                    c.instance_id = Some(format!("i{next_client}"));
                }
                next_client += 1;
                clients.push(c);
            }
            let live: Vec<usize> = (0..clients.len())
                .filter(|&i| clients[i].phase != Phase::Gone)
                .collect();
            if live.len() > 1 && rng.chance(10) {
                let i = live[(rng.next_u64() % live.len() as u64) as usize];
                match (rng.next_u64() % 3, clients[i].instance_id.clone()) {
                    (0, _) => clients[i].leave(&mut sim),
                    // A static member restarts: a new process with the same instance id.
                    (1, Some(instance)) => {
                        clients[i].phase = Phase::Gone;
                        let mut c = Client::new(&clients[i].name.clone(), "g");
                        c.instance_id = Some(instance);
                        clients.push(c);
                    }
                    _ => clients[i].phase = Phase::Gone, // crash
                }
            }
            let ready = rng.next_u64() % (sim.held.len() as u64 + 1);
            for append in sim.held.drain(..ready as usize).collect::<Vec<_>>() {
                let ok = !rng.chance(50);
                sim.complete(append, ok);
            }
            for c in clients.iter_mut() {
                c.step(&mut sim);
            }
            check_invariants(&sim, &clients, &mut generations);
            // Committed offsets are exactly the last acknowledged commit per partition.
            let acked = sim.acked.clone();
            assert_eq!(sim.fetch("g"), acked, "seed {seed}");
            sim.advance(TICK_MS);
        }
        // Calm down: the survivors converge on one generation covering every partition.
        sim.hold_appends = false;
        sim.complete_held(true);
        clients.retain(|c| c.phase != Phase::Gone);
        settle(&mut sim, &mut clients, 120_000);
        assert_disjoint_cover(&clients);
        check_invariants(&sim, &clients, &mut generations);
        run(&mut sim, &mut clients, 3_000);
        assert_eq!(sim.fetch("g"), sim.acked, "seed {seed}");
    }
}

#[test]
fn unload_answers_waiting_requests_with_not_coordinator() {
    let mut sim = Sim::new();
    let (_, t) = join_new(&mut sim, "g", "c0");
    let p = super::api::offsets_partition_for("g", PARTITIONS);
    let out = sim.coord.unload(p);
    sim.absorb(out);
    assert_eq!(sim.join_reply(t).error, code(ResponseError::NotCoordinator));
    assert_eq!(sim.state("g"), None);
    assert_eq!(
        sim.heartbeat("g", "m", 1),
        code(ResponseError::NotCoordinator)
    );
}

mod replayed_values {
    use super::*;
    use crate::group::records::{
        encode_group_metadata_key, encode_offset_commit_key, GroupMetadataValue,
        MemberMetadataValue, OffsetCommitValue,
    };
    use proptest::prelude::*;

    proptest! {
        /// Whatever numbers a replayed record holds, the coordinator keeps working.
        #[test]
        fn odd_replayed_values_never_panic(
            generation in any::<i32>(),
            state_ts in any::<i64>(),
            timeouts in proptest::collection::vec((any::<i32>(), any::<i32>()), 0..4),
            commit_ts in any::<i64>(),
            expire_ts in proptest::option::of(any::<i64>()),
            now in 0i64..i64::MAX / 4,
        ) {
            let group = "g";
            let p = offsets_partition_for(group, PARTITIONS);
            let value = GroupMetadataValue {
                protocol_type: "consumer".into(),
                generation,
                protocol: Some("range".into()),
                leader: Some("m0".into()),
                current_state_timestamp: state_ts,
                members: timeouts
                    .iter()
                    .enumerate()
                    .map(|(i, (rebalance, session))| MemberMetadataValue {
                        member_id: format!("m{i}"),
                        group_instance_id: None,
                        client_id: "c".into(),
                        client_host: "h".into(),
                        rebalance_timeout_ms: *rebalance,
                        session_timeout_ms: *session,
                        subscription: Bytes::from_static(b"\xff"),
                        assignment: Bytes::new(),
                    })
                    .collect(),
            };
            let offset = OffsetCommitValue {
                offset: 1,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: commit_ts,
                expire_timestamp: expire_ts,
            };
            let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
            coord.begin_load(p);
            coord.replay(p, &encode_group_metadata_key(group), Some(&value.encode())).unwrap();
            coord
                .replay(p, &encode_offset_commit_key(group, TOPIC, 0), Some(&offset.encode()))
                .unwrap();
            coord.finish_load(p, now);
            for dt in [0, 100, 1_000_000, i64::MAX / 4] {
                let _ = coord.tick(now + dt);
                let _ = coord.next_deadline();
                let _ = coord.handle(1, join_call(group, "c", "m0", None), now + dt);
                let _ = coord.handle(2, sync_call(group, "m0", generation, vec![]), now + dt);
                let _ = coord.snapshot_records(p);
            }
        }
    }
}
