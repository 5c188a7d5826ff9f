//! A member of a consumer group (the classic protocol: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup), of protocol type "consumer" with the "range" assignor, so that it shares a
//! group with librdkafka, kafka-python or Java consumers.
//!
//! [`MemberState`] holds the member's id, generation and assignment and decides, from each
//! response's error code, what to do next ([`Next`]); it does no I/O and takes the time as an
//! argument. [`GroupMember`] is the thin I/O around it: it sends what the state asks for.
//! Heartbeats are sent from [`GroupMember::poll`], which the consumer loop calls at least
//! every heartbeat interval (a consumer that stops polling for a session timeout leaves the
//! group, as Kafka's `max.poll.interval.ms` would make it).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
use kafka_protocol::messages::leave_group_response::LeaveGroupResponse;
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{ApiKey, GroupId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::accumulator::TopicPartition;
use super::assignor::{self, MemberSubscription, PROTOCOL_TYPE, RANGE};
use super::cluster::Cluster;
use super::connection::Connection;
use super::error::{ClientError, ClientResult, KafkaCode};
use super::group_coordinator::{self, CommitIdentity};

/// Pause before retrying a JoinGroup that failed for a reason that may pass.
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Where the member is in the group protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Has to (re)join: at the start, and after errors that end its generation.
    Unjoined,
    /// JoinGroup done; SyncGroup next (with the assignment when `leader`).
    AwaitingSync { leader: bool },
    /// Has its assignment for `generation`; heartbeats.
    Stable,
    /// LeaveGroup sent: the member is done.
    Left,
}

/// What the I/O layer does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Send JoinGroup; after [`RETRY_BACKOFF`] when `backoff`.
    Join { backoff: bool },
    /// Send SyncGroup (the leader with everyone's assignment).
    Sync { leader: bool },
    /// Stable: keep consuming and heartbeating.
    Continue,
    /// The coordinator moved or is loading: find it again, then carry on in the same phase.
    Rediscover,
    /// An error that rejoining does not fix.
    Fatal(KafkaCode),
}

/// What a JoinGroup response said, apart from its error code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinReply {
    pub member_id: String,
    pub generation: i32,
    pub leader_id: String,
}

/// The member's side of the group protocol, without I/O.
#[derive(Debug, Clone)]
pub struct MemberState {
    pub member_id: String,
    pub generation: i32,
    pub phase: Phase,
    pub assignment: Vec<TopicPartition>,
    heartbeat_interval: Duration,
    session_timeout: Duration,
    /// The last heartbeat sent (or the join), for the next one's time.
    last_heartbeat: Option<Instant>,
    /// The last heartbeat the coordinator accepted: silence for a session means we are out.
    last_accepted: Option<Instant>,
}

/// Errors after which the same call may work, with a fresh coordinator connection: lost or
/// refused connections (a coordinator restarting) and Kafka's retriable codes.
fn transient(e: &ClientError) -> bool {
    e.is_retriable() || matches!(e, ClientError::Io { .. })
}

fn is(code: KafkaCode, e: ResponseError) -> bool {
    code.0 == e.code()
}

fn coordinator_moving(code: KafkaCode) -> bool {
    is(code, ResponseError::CoordinatorNotAvailable)
        || is(code, ResponseError::NotCoordinator)
        || is(code, ResponseError::CoordinatorLoadInProgress)
}

impl MemberState {
    pub fn new(heartbeat_interval: Duration, session_timeout: Duration) -> MemberState {
        MemberState {
            member_id: String::new(),
            generation: -1,
            phase: Phase::Unjoined,
            assignment: Vec::new(),
            heartbeat_interval,
            session_timeout,
            last_heartbeat: None,
            last_accepted: None,
        }
    }

    /// Who commits offsets: this member in its generation.
    pub fn identity(&self) -> CommitIdentity {
        CommitIdentity {
            generation: self.generation,
            member_id: self.member_id.clone(),
            group_instance_id: None,
        }
    }

    pub fn needs_join(&self) -> bool {
        self.phase == Phase::Unjoined
    }

    /// The errors every group call shares: a rejoin, a new coordinator, or the end.
    fn on_error(&mut self, code: KafkaCode) -> Next {
        if is(code, ResponseError::UnknownMemberId) {
            // The coordinator forgot us (session expired): join as a new member.
            self.member_id.clear();
            self.generation = -1;
            self.phase = Phase::Unjoined;
            Next::Join { backoff: false }
        } else if is(code, ResponseError::IllegalGeneration)
            || is(code, ResponseError::RebalanceInProgress)
        {
            // Keep the member id (Kafka 2.3+); the generation stays for a last commit, which
            // the coordinator still accepts while the group prepares the rebalance.
            self.phase = Phase::Unjoined;
            Next::Join { backoff: false }
        } else if coordinator_moving(code) {
            Next::Rediscover
        } else {
            Next::Fatal(code)
        }
    }

    /// The outcome of JoinGroup.
    pub fn on_join(&mut self, code: Option<KafkaCode>, reply: &JoinReply) -> Next {
        match code {
            None => {
                self.member_id = reply.member_id.clone();
                self.generation = reply.generation;
                let leader = reply.leader_id == reply.member_id;
                self.phase = Phase::AwaitingSync { leader };
                Next::Sync { leader }
            }
            // v4+: the coordinator hands out the id first; join again with it at once.
            Some(c) if is(c, ResponseError::MemberIdRequired) => {
                self.member_id = reply.member_id.clone();
                self.phase = Phase::Unjoined;
                Next::Join { backoff: false }
            }
            Some(c) if is(c, ResponseError::RebalanceInProgress) => {
                self.phase = Phase::Unjoined;
                Next::Join { backoff: true }
            }
            Some(c) => {
                let next = self.on_error(c);
                // Whatever happened, the join did not: it is retried after a rediscovery.
                self.phase = Phase::Unjoined;
                next
            }
        }
    }

    /// The outcome of SyncGroup, with the decoded assignment when it succeeded.
    pub fn on_sync(
        &mut self,
        code: Option<KafkaCode>,
        assignment: Vec<TopicPartition>,
        now: Instant,
    ) -> Next {
        match code {
            None => {
                self.assignment = assignment;
                self.phase = Phase::Stable;
                self.last_heartbeat = Some(now);
                self.last_accepted = Some(now);
                Next::Continue
            }
            Some(c) => {
                let next = self.on_error(c);
                self.phase = Phase::Unjoined;
                next
            }
        }
    }

    /// When the next heartbeat is due (`None` unless stable).
    pub fn next_heartbeat(&self) -> Option<Instant> {
        match (self.phase, self.last_heartbeat) {
            (Phase::Stable, Some(last)) => Some(last + self.heartbeat_interval),
            _ => None,
        }
    }

    pub fn heartbeat_due(&self, now: Instant) -> bool {
        self.next_heartbeat().is_some_and(|t| now >= t)
    }

    /// A heartbeat is being sent now.
    pub fn heartbeat_sent(&mut self, now: Instant) {
        self.last_heartbeat = Some(now);
    }

    /// The coordinator's answer to a heartbeat.
    pub fn on_heartbeat(&mut self, code: Option<KafkaCode>, now: Instant) -> Next {
        if self.phase != Phase::Stable {
            return Next::Continue; // an answer for a generation we left already
        }
        match code {
            None => {
                self.last_accepted = Some(now);
                Next::Continue
            }
            Some(c) => self.on_error(c),
        }
    }

    /// A heartbeat that got no answer (connection lost, timeout). After a whole session
    /// without an accepted heartbeat the coordinator has removed us: join again.
    pub fn on_heartbeat_failed(&mut self, now: Instant) -> Next {
        let silent_since = self.last_accepted.unwrap_or(now);
        if self.phase == Phase::Stable && now.duration_since(silent_since) >= self.session_timeout {
            self.member_id.clear();
            self.generation = -1;
            self.phase = Phase::Unjoined;
            return Next::Join { backoff: false };
        }
        Next::Rediscover
    }

    /// An offset commit failed with `code`: a rebalance or lost membership means rejoining.
    pub fn on_commit_error(&mut self, code: KafkaCode) -> Next {
        if self.phase == Phase::Left {
            return Next::Continue;
        }
        self.on_error(code)
    }

    pub fn on_leave(&mut self) {
        self.phase = Phase::Left;
        self.assignment.clear();
    }
}

/// How the member behaves in its group.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub group: String,
    pub topics: Vec<String>,
    /// `session.timeout.ms`: silence after which the coordinator drops the member.
    pub session_timeout: Duration,
    /// `max.poll.interval.ms` as sent in JoinGroup: how long the coordinator waits for every
    /// member to rejoin during a rebalance.
    pub rebalance_timeout: Duration,
    pub heartbeat_interval: Duration,
}

impl GroupConfig {
    pub fn new(group: &str, topics: &[&str]) -> GroupConfig {
        GroupConfig {
            group: group.to_string(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(1),
        }
    }
}

/// What [`GroupMember::poll`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupEvent {
    Nothing,
    /// The group is rebalancing: commit what was consumed, then [`GroupMember::join`].
    Rebalance,
}

/// A consumer group member over the client's connections.
pub struct GroupMember {
    config: GroupConfig,
    state: MemberState,
    /// Our own connection to the coordinator: JoinGroup blocks for up to the rebalance
    /// timeout, longer than the cluster's request timeout allows.
    coordinator: Option<Connection>,
    /// The members of the last JoinGroup, when this member leads the generation.
    leader_members: Vec<MemberSubscription>,
}

impl GroupMember {
    pub fn new(config: GroupConfig) -> GroupMember {
        let state = MemberState::new(config.heartbeat_interval, config.session_timeout);
        GroupMember {
            config,
            state,
            coordinator: None,
            leader_members: Vec::new(),
        }
    }

    pub fn state(&self) -> &MemberState {
        &self.state
    }

    pub fn group(&self) -> &str {
        &self.config.group
    }

    fn group_id(&self) -> GroupId {
        GroupId(StrBytes::from_string(self.config.group.clone()))
    }

    fn coordinator(&mut self, cluster: &Cluster) -> ClientResult<&Connection> {
        if self.coordinator.as_ref().is_some_and(|c| c.is_closed()) {
            self.coordinator = None;
        }
        if self.coordinator.is_none() {
            let found = group_coordinator::find_coordinator(cluster, &self.config.group)?;
            let timeout = cluster.config().request_timeout + self.config.rebalance_timeout;
            let conn = Connection::connect(found.addr(), &cluster.config().client_id, timeout, 1)?;
            self.coordinator = Some(conn);
        }
        self.coordinator
            .as_ref()
            .ok_or_else(|| ClientError::Bootstrap("no group coordinator".into()))
    }

    /// Joins (or rejoins) the group and returns this member's partitions. Bounded by twice
    /// the rebalance timeout plus the session timeout.
    pub fn join(&mut self, cluster: &Cluster) -> ClientResult<Vec<TopicPartition>> {
        let bound = self.config.rebalance_timeout * 2
            + self.config.session_timeout
            + cluster.config().request_timeout;
        let deadline = Instant::now() + bound;
        self.state.phase = Phase::Unjoined;
        let mut next = Next::Join { backoff: false };
        loop {
            if Instant::now() >= deadline {
                return Err(ClientError::Timeout {
                    what: format!("joining group {}", self.config.group),
                    after: bound,
                });
            }
            next = match next {
                Next::Join { backoff } => {
                    if backoff {
                        std::thread::sleep(RETRY_BACKOFF);
                    }
                    match self.send_join(cluster) {
                        Ok((code, reply)) => self.state.on_join(code, &reply),
                        Err(e) if transient(&e) => self.lost_coordinator(),
                        Err(e) => return Err(e),
                    }
                }
                Next::Sync { leader } => match self.send_sync(cluster, leader) {
                    Ok((code, assignment)) => self.state.on_sync(code, assignment, Instant::now()),
                    Err(e) if transient(&e) => self.lost_coordinator(),
                    Err(e) => return Err(e),
                },
                Next::Continue => return Ok(self.state.assignment.clone()),
                Next::Rediscover => {
                    self.coordinator = None;
                    std::thread::sleep(RETRY_BACKOFF);
                    Next::Join { backoff: false }
                }
                Next::Fatal(code) => {
                    return Err(ClientError::Kafka {
                        api: "JoinGroup",
                        code,
                        message: Some(format!("group {}", self.config.group)),
                    })
                }
            };
        }
    }

    fn lost_coordinator(&mut self) -> Next {
        self.coordinator = None;
        self.state.phase = Phase::Unjoined;
        Next::Rediscover
    }

    fn send_join(&mut self, cluster: &Cluster) -> ClientResult<(Option<KafkaCode>, JoinReply)> {
        let version = cluster.version(ApiKey::JoinGroup)?;
        let metadata = assignor::encode_subscription(&self.config.topics)?;
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = StrBytes::from_static_str(RANGE);
        protocol.metadata = metadata;
        let mut req = JoinGroupRequest::default();
        req.group_id = self.group_id();
        req.session_timeout_ms = self.config.session_timeout.as_millis() as i32;
        if version >= 1 {
            req.rebalance_timeout_ms = self.config.rebalance_timeout.as_millis() as i32;
        }
        req.member_id = StrBytes::from_string(self.state.member_id.clone());
        req.protocol_type = StrBytes::from_static_str(PROTOCOL_TYPE);
        req.protocols = vec![protocol];
        let resp: JoinGroupResponse =
            self.coordinator(cluster)?
                .call(ApiKey::JoinGroup, version, &req)?;
        let code = KafkaCode::from_code(resp.error_code);
        let reply = JoinReply {
            member_id: resp.member_id.to_string(),
            generation: resp.generation_id,
            leader_id: resp.leader.to_string(),
        };
        if code.is_none() && reply.leader_id == reply.member_id {
            self.leader_members = resp
                .members
                .iter()
                .map(|m| MemberSubscription {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
                    // A member whose metadata we cannot read subscribes to nothing we know.
                    topics: assignor::decode_subscription(&m.metadata).unwrap_or_default(),
                })
                .collect();
        }
        Ok((code, reply))
    }

    /// The leader's assignment of every member, from the members of the last JoinGroup.
    fn plan(&self, cluster: &Cluster) -> ClientResult<Vec<SyncGroupRequestAssignment>> {
        let mut topics: Vec<&str> = self
            .leader_members
            .iter()
            .flat_map(|m| m.topics.iter().map(String::as_str))
            .collect();
        topics.sort_unstable();
        topics.dedup();
        let md = cluster.refresh_metadata(&topics)?;
        let counts: BTreeMap<String, usize> = topics
            .iter()
            .filter_map(|t| Some((t.to_string(), md.partition_count(t)?)))
            .collect();
        assignor::range_assign(&self.leader_members, &counts)
            .into_iter()
            .map(|(member, plan)| {
                let mut a = SyncGroupRequestAssignment::default();
                a.member_id = StrBytes::from_string(member);
                a.assignment = assignor::encode_assignment(&plan)?;
                Ok(a)
            })
            .collect()
    }

    fn send_sync(
        &mut self,
        cluster: &Cluster,
        leader: bool,
    ) -> ClientResult<(Option<KafkaCode>, Vec<TopicPartition>)> {
        let version = cluster.version(ApiKey::SyncGroup)?;
        let mut req = SyncGroupRequest::default();
        req.group_id = self.group_id();
        req.generation_id = self.state.generation;
        req.member_id = StrBytes::from_string(self.state.member_id.clone());
        if version >= 5 {
            req.protocol_type = Some(StrBytes::from_static_str(PROTOCOL_TYPE));
            req.protocol_name = Some(StrBytes::from_static_str(RANGE));
        }
        if leader {
            req.assignments = self.plan(cluster)?;
        }
        let resp: SyncGroupResponse =
            self.coordinator(cluster)?
                .call(ApiKey::SyncGroup, version, &req)?;
        let code = KafkaCode::from_code(resp.error_code);
        let assignment = match code {
            None => assignor::decode_assignment(&resp.assignment)?,
            Some(_) => Vec::new(),
        };
        Ok((code, assignment))
    }

    /// Sends a heartbeat when one is due. Call it at least every heartbeat interval (see
    /// [`GroupMember::time_to_heartbeat`]).
    pub fn poll(&mut self, cluster: &Cluster) -> ClientResult<GroupEvent> {
        let now = Instant::now();
        if self.state.needs_join() {
            return Ok(GroupEvent::Rebalance);
        }
        if !self.state.heartbeat_due(now) {
            return Ok(GroupEvent::Nothing);
        }
        self.state.heartbeat_sent(now);
        let next = match self.send_heartbeat(cluster) {
            Ok(code) => self.state.on_heartbeat(code, Instant::now()),
            Err(e) if transient(&e) => self.state.on_heartbeat_failed(Instant::now()),
            Err(e) => return Err(e),
        };
        self.after(next, "Heartbeat")
    }

    fn after(&mut self, next: Next, api: &'static str) -> ClientResult<GroupEvent> {
        match next {
            Next::Continue | Next::Sync { .. } => Ok(GroupEvent::Nothing),
            Next::Rediscover => {
                self.coordinator = None;
                Ok(GroupEvent::Nothing)
            }
            Next::Join { .. } => Ok(GroupEvent::Rebalance),
            Next::Fatal(code) => Err(ClientError::Kafka {
                api,
                code,
                message: Some(format!("group {}", self.config.group)),
            }),
        }
    }

    fn send_heartbeat(&mut self, cluster: &Cluster) -> ClientResult<Option<KafkaCode>> {
        let version = cluster.version(ApiKey::Heartbeat)?;
        let mut req = HeartbeatRequest::default();
        req.group_id = self.group_id();
        req.generation_id = self.state.generation;
        req.member_id = StrBytes::from_string(self.state.member_id.clone());
        let resp: HeartbeatResponse =
            self.coordinator(cluster)?
                .call(ApiKey::Heartbeat, version, &req)?;
        Ok(KafkaCode::from_code(resp.error_code))
    }

    /// How long the caller may block before calling [`GroupMember::poll`] again.
    pub fn time_to_heartbeat(&self) -> Duration {
        match self.state.next_heartbeat() {
            Some(t) => t.saturating_duration_since(Instant::now()),
            None => Duration::ZERO,
        }
    }

    /// Commits `offsets` (the next offsets to read) as this member. An error that means the
    /// group moved on marks the member for a rejoin (the next [`GroupMember::poll`] says
    /// [`GroupEvent::Rebalance`]) and is returned.
    pub fn commit(
        &mut self,
        cluster: &Cluster,
        offsets: &BTreeMap<TopicPartition, i64>,
    ) -> ClientResult<()> {
        if offsets.is_empty() {
            return Ok(());
        }
        let identity = self.state.identity();
        let result =
            group_coordinator::commit_offsets(cluster, &self.config.group, &identity, offsets);
        if let Err(ClientError::Kafka { code, .. }) = &result {
            let _ = self.state.on_commit_error(*code);
        }
        result
    }

    /// Leaves the group (LeaveGroup), so that the others get its partitions at once instead of
    /// after a session timeout. Unknown-member answers are fine: we are out either way.
    pub fn leave(&mut self, cluster: &Cluster) -> ClientResult<()> {
        if self.state.member_id.is_empty() || self.state.phase == Phase::Left {
            self.state.on_leave();
            return Ok(());
        }
        let version = cluster.version(ApiKey::LeaveGroup)?;
        let mut req = LeaveGroupRequest::default();
        req.group_id = self.group_id();
        if version >= 3 {
            let mut m = MemberIdentity::default();
            m.member_id = StrBytes::from_string(self.state.member_id.clone());
            if version >= 5 {
                m.reason = Some(StrBytes::from_static_str("the consumer is closing"));
            }
            req.members = vec![m];
        } else {
            req.member_id = StrBytes::from_string(self.state.member_id.clone());
        }
        self.state.on_leave();
        let resp: LeaveGroupResponse =
            self.coordinator(cluster)?
                .call(ApiKey::LeaveGroup, version, &req)?;
        let code = KafkaCode::from_code(resp.error_code).or_else(|| {
            resp.members
                .iter()
                .find_map(|m| KafkaCode::from_code(m.error_code))
        });
        match code {
            Some(c) if !is(c, ResponseError::UnknownMemberId) => Err(ClientError::Kafka {
                api: "LeaveGroup",
                code: c,
                message: Some(format!("group {}", self.config.group)),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn code(e: ResponseError) -> Option<KafkaCode> {
        Some(KafkaCode(e.code()))
    }

    fn reply(member: &str, generation: i32, leader: &str) -> JoinReply {
        JoinReply {
            member_id: member.into(),
            generation,
            leader_id: leader.into(),
        }
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition {
            topic: Arc::from("t"),
            partition: p,
        }
    }

    fn stable(now: Instant) -> MemberState {
        let mut s = MemberState::new(Duration::from_secs(1), Duration::from_secs(10));
        assert_eq!(
            s.on_join(None, &reply("m1", 3, "m1")),
            Next::Sync { leader: true }
        );
        assert_eq!(s.on_sync(None, vec![tp(0)], now), Next::Continue);
        s
    }

    #[test]
    fn member_id_required_rejoins_at_once_with_the_given_id() {
        let mut s = MemberState::new(Duration::from_secs(1), Duration::from_secs(10));
        let next = s.on_join(
            code(ResponseError::MemberIdRequired),
            &reply("m-42", -1, ""),
        );
        assert_eq!(next, Next::Join { backoff: false });
        assert_eq!(s.member_id, "m-42");
        let next = s.on_join(None, &reply("m-42", 1, "other"));
        assert_eq!(next, Next::Sync { leader: false });
        assert_eq!(s.generation, 1);
        assert_eq!(s.phase, Phase::AwaitingSync { leader: false });
    }

    #[test]
    fn a_synced_member_is_stable_and_heartbeats_on_time() {
        let t0 = Instant::now();
        let mut s = stable(t0);
        assert_eq!(s.phase, Phase::Stable);
        assert_eq!(s.assignment, vec![tp(0)]);
        assert_eq!(s.identity().generation, 3);
        assert!(!s.heartbeat_due(t0));
        let t1 = t0 + Duration::from_secs(1);
        assert!(s.heartbeat_due(t1));
        s.heartbeat_sent(t1);
        assert!(!s.heartbeat_due(t1));
        assert_eq!(s.on_heartbeat(None, t1), Next::Continue);
    }

    #[test]
    fn rebalance_and_illegal_generation_rejoin_keeping_the_member_id() {
        for e in [
            ResponseError::RebalanceInProgress,
            ResponseError::IllegalGeneration,
        ] {
            let t0 = Instant::now();
            let mut s = stable(t0);
            assert_eq!(s.on_heartbeat(code(e), t0), Next::Join { backoff: false });
            assert!(s.needs_join());
            assert_eq!(s.member_id, "m1");
            // The last commit before rejoining still carries the generation.
            assert_eq!(s.identity().generation, 3);
        }
    }

    #[test]
    fn unknown_member_rejoins_as_a_new_member() {
        let mut s = stable(Instant::now());
        let next = s.on_heartbeat(code(ResponseError::UnknownMemberId), Instant::now());
        assert_eq!(next, Next::Join { backoff: false });
        assert_eq!(s.member_id, "");
        assert_eq!(s.generation, -1);
    }

    #[test]
    fn sync_errors_go_back_to_joining() {
        let mut s = MemberState::new(Duration::from_secs(1), Duration::from_secs(10));
        s.on_join(None, &reply("m1", 2, "m0"));
        let next = s.on_sync(
            code(ResponseError::RebalanceInProgress),
            Vec::new(),
            Instant::now(),
        );
        assert_eq!(next, Next::Join { backoff: false });
        assert!(s.needs_join());
        assert!(s.assignment.is_empty());
    }

    #[test]
    fn a_moving_coordinator_is_found_again_without_losing_the_generation() {
        let mut s = stable(Instant::now());
        let next = s.on_heartbeat(code(ResponseError::NotCoordinator), Instant::now());
        assert_eq!(next, Next::Rediscover);
        assert_eq!(s.phase, Phase::Stable);
        // During a join, the join is redone after the rediscovery.
        let mut j = MemberState::new(Duration::from_secs(1), Duration::from_secs(10));
        let next = j.on_join(
            code(ResponseError::CoordinatorLoadInProgress),
            &JoinReply::default(),
        );
        assert_eq!(next, Next::Rediscover);
        assert!(j.needs_join());
    }

    #[test]
    fn other_errors_are_fatal() {
        let mut s = MemberState::new(Duration::from_secs(1), Duration::from_secs(10));
        let c = code(ResponseError::GroupAuthorizationFailed);
        assert_eq!(
            s.on_join(c, &JoinReply::default()),
            Next::Fatal(KafkaCode(ResponseError::GroupAuthorizationFailed.code()))
        );
        let c = code(ResponseError::InconsistentGroupProtocol);
        assert!(matches!(
            s.on_join(c, &JoinReply::default()),
            Next::Fatal(_)
        ));
    }

    #[test]
    fn a_session_without_accepted_heartbeats_means_rejoining_as_new() {
        let t0 = Instant::now();
        let mut s = stable(t0);
        assert_eq!(
            s.on_heartbeat_failed(t0 + Duration::from_secs(2)),
            Next::Rediscover
        );
        assert_eq!(
            s.on_heartbeat_failed(t0 + Duration::from_secs(10)),
            Next::Join { backoff: false }
        );
        assert_eq!(s.member_id, "");
    }

    #[test]
    fn commit_errors_of_a_rebalance_rejoin_and_leaving_ends_everything() {
        let mut s = stable(Instant::now());
        let next = s.on_commit_error(KafkaCode(ResponseError::IllegalGeneration.code()));
        assert_eq!(next, Next::Join { backoff: false });
        s.on_leave();
        assert_eq!(s.phase, Phase::Left);
        assert!(s.assignment.is_empty());
        assert_eq!(
            s.on_commit_error(KafkaCode(ResponseError::UnknownMemberId.code())),
            Next::Continue
        );
        assert_eq!(s.next_heartbeat(), None);
    }

    #[test]
    fn answers_for_an_old_generation_are_ignored() {
        let mut s = MemberState::new(Duration::from_secs(1), Duration::from_secs(10));
        assert_eq!(
            s.on_heartbeat(code(ResponseError::UnknownMemberId), Instant::now()),
            Next::Continue
        );
        assert!(s.needs_join());
    }
}
