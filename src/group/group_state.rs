//! One consumer group's state: membership, generation, the rebalance in progress and its
//! committed offsets. Pure data plus the rules that depend on nothing else (protocol selection,
//! leader choice, what a record of the group looks like); the coordinator drives transitions.

use crate::util::hash::{HashMap, HashSet};
use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::api::{JoinMember, JoinReply};
use super::member::Member;
use super::records::{GroupMetadataValue, MemberMetadataValue, OffsetCommitValue};
use super::subscription::{subscribed_topics, CONSUMER_PROTOCOL_TYPE};

/// Kafka's classic group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka reports in ListGroups and DescribeGroups.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// States a rebalance may start from (Kafka's `canRebalance`).
    pub fn can_rebalance(self) -> bool {
        matches!(
            self,
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable
        )
    }
}

pub(crate) type TopicPartition = (String, i32);

/// How the join phase of a rebalance ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JoinPhase {
    /// A group that was empty waits for more members (group.initial.rebalance.delay.ms); each
    /// new member extends the wait by up to the delay, in total by `remaining_ms`.
    InitialDelay { deadline_ms: i64, remaining_ms: i64 },
    /// Ends when every member has rejoined, or at the deadline (the rebalance timeout).
    AwaitingMembers { deadline_ms: i64 },
}

impl JoinPhase {
    pub fn deadline_ms(self) -> i64 {
        match self {
            JoinPhase::InitialDelay { deadline_ms, .. } => deadline_ms,
            JoinPhase::AwaitingMembers { deadline_ms } => deadline_ms,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Group {
    pub id: String,
    /// Its `__consumer_offsets` partition.
    pub partition: i32,
    pub state: GroupState,
    /// When the group entered `state` (`None` for groups loaded from records without it).
    pub state_since_ms: Option<i64>,
    /// `None` for a group only used to store offsets (a "simple" consumer).
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    /// In join order (the order the leader sees them).
    pub members: Vec<Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until they join or this deadline passes.
    pub pending_members: HashMap<String, i64>,
    /// Members of this generation that have not sent SyncGroup yet.
    pub pending_sync: HashSet<String>,
    pub sync_deadline_ms: Option<i64>,
    pub join_phase: Option<JoinPhase>,
    /// A member joined during the initial delay (so the delay is extended once more).
    pub new_member_added: bool,
    /// The generation whose leader assignment is being stored (one store per generation).
    pub assignment_store_generation: Option<i32>,
    /// Offsets whose commit has been stored (visible to OffsetFetch).
    pub offsets: BTreeMap<TopicPartition, OffsetCommitValue>,
    /// Commits being stored, per partition (they block retention expiry).
    pub pending_commits: HashMap<TopicPartition, usize>,
    /// Offsets whose expiry tombstone is being stored.
    pub expiring: HashSet<TopicPartition>,
    /// The latest group metadata value known to be in the log (for compaction snapshots).
    pub persisted_metadata: Option<Bytes>,
}

impl Group {
    pub fn new(id: String, partition: i32, now_ms: i64) -> Group {
        Group {
            id,
            partition,
            state: GroupState::Empty,
            state_since_ms: Some(now_ms),
            protocol_type: None,
            protocol: None,
            generation: 0,
            leader: None,
            members: Vec::new(),
            pending_members: HashMap::default(),
            pending_sync: HashSet::default(),
            sync_deadline_ms: None,
            join_phase: None,
            new_member_added: false,
            assignment_store_generation: None,
            offsets: BTreeMap::new(),
            pending_commits: HashMap::default(),
            expiring: HashSet::default(),
            persisted_metadata: None,
        }
    }

    /// Rebuilds a group from its replayed metadata record (raw value kept for snapshots) and
    /// offsets. Groups with members come back Stable, their sessions starting at `now_ms`.
    pub fn loaded(
        id: String,
        partition: i32,
        metadata: Option<(GroupMetadataValue, Bytes)>,
        offsets: BTreeMap<TopicPartition, OffsetCommitValue>,
        now_ms: i64,
    ) -> Group {
        let mut group = Group::new(id, partition, now_ms);
        group.offsets = offsets;
        let Some((value, raw)) = metadata else {
            return group;
        };
        group.persisted_metadata = Some(raw);
        group.protocol_type = Some(value.protocol_type).filter(|t| !t.is_empty());
        group.generation = value.generation;
        group.protocol = value.protocol;
        group.leader = value.leader;
        group.state_since_ms =
            (value.current_state_timestamp >= 0).then_some(value.current_state_timestamp);
        let protocol = group.protocol.clone().unwrap_or_default();
        let protocol_type = group.protocol_type.clone().unwrap_or_default();
        group.members = value
            .members
            .into_iter()
            .map(|m| Member {
                id: m.member_id,
                instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                session_timeout_ms: m.session_timeout_ms,
                protocol_type: protocol_type.clone(),
                protocols: vec![(protocol.clone(), m.subscription)],
                assignment: m.assignment,
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                new_member_deadline_ms: 0,
                session_deadline_ms: now_ms + i64::from(m.session_timeout_ms),
            })
            .collect();
        if group.members.is_empty() {
            group.leader = None;
        } else {
            group.state = GroupState::Stable;
            if group
                .leader
                .as_deref()
                .is_none_or(|l| group.member(l).is_none())
            {
                group.leader = group.members.first().map(|m| m.id.clone());
            }
        }
        group
    }

    pub fn transition(&mut self, state: GroupState, now_ms: i64) {
        self.state = state;
        self.state_since_ms = Some(now_ms);
    }

    pub fn member(&self, id: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    pub fn member_mut(&mut self, id: &str) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.id == id)
    }

    pub fn static_member_id(&self, instance_id: &str) -> Option<String> {
        self.members
            .iter()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.id.clone())
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader.as_deref() == Some(member_id)
    }

    /// The longest rebalance timeout of the members: how long a join phase may last.
    pub fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .iter()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    pub fn awaiting_join_count(&self) -> usize {
        self.members
            .iter()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    /// Every member rejoined and no member id handed out is still expected.
    pub fn all_members_joined(&self) -> bool {
        self.awaiting_join_count() == self.members.len() && self.pending_members.is_empty()
    }

    /// Whether a member with this protocol type and these protocols can join (Kafka's
    /// `supportsProtocols`): an empty group takes anything well-formed; otherwise the type must
    /// match and one protocol must be supported by every member.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(name, _)| self.members.iter().all(|m| m.supports(name)))
    }

    /// The protocol for the next generation: among those every member supports, the one most
    /// members prefer (each votes for its first supported choice); ties go to the earliest vote.
    pub fn select_protocol(&self) -> Option<String> {
        let first = self.members.first()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| self.members.iter().all(|m| m.supports(name)))
            .collect();
        let mut votes: Vec<(&str, usize)> = Vec::new();
        for member in &self.members {
            let Some(choice) = member
                .protocols
                .iter()
                .map(|(name, _)| name.as_str())
                .find(|name| candidates.contains(name))
            else {
                continue;
            };
            match votes.iter_mut().find(|(name, _)| *name == choice) {
                Some((_, count)) => *count += 1,
                None => votes.push((choice, 1)),
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (name, count) in votes {
            if best.is_none_or(|(_, c)| count > c) {
                best = Some((name, count));
            }
        }
        best.map(|(name, _)| name.to_string())
    }

    pub fn add_member(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.id.clone());
        }
        self.pending_members.remove(&member.id);
        self.members.push(member);
    }

    /// Removes a member; a removed leader is succeeded by the first remaining member.
    pub fn remove_member(&mut self, id: &str) -> Option<Member> {
        let index = self.members.iter().position(|m| m.id == id)?;
        let member = self.members.remove(index);
        self.pending_sync.remove(id);
        if self.is_leader(id) {
            self.leader = self.members.first().map(|m| m.id.clone());
        }
        Some(member)
    }

    /// Keeps the leader if it rejoined, else picks the first member that did (Kafka's
    /// `maybeElectNewJoinedLeader`). False when no member rejoined.
    pub fn elect_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self
            .member(&leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        match self.members.iter().find(|m| m.awaiting_join.is_some()) {
            Some(m) => {
                self.leader = Some(m.id.clone());
                true
            }
            None => false,
        }
    }

    /// Every member with its metadata for the chosen protocol (what the leader assigns from).
    pub fn leader_member_list(&self) -> Vec<JoinMember> {
        let protocol = self.protocol.as_deref().unwrap_or_default();
        self.members
            .iter()
            .map(|m| JoinMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                metadata: m.metadata_for(protocol),
            })
            .collect()
    }

    /// The successful join reply for `member_id` in the current generation.
    pub fn join_reply(&self, member_id: &str, include_members: bool) -> JoinReply {
        JoinReply {
            error: 0,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: member_id.to_string(),
            members: if include_members {
                self.leader_member_list()
            } else {
                Vec::new()
            },
        }
    }

    /// The group as a metadata record, with `assignments` instead of the members' current ones
    /// when given (the leader's assignment, before it is stored).
    pub fn metadata_value(
        &self,
        assignments: Option<&HashMap<String, Bytes>>,
    ) -> GroupMetadataValue {
        let protocol = self.protocol.as_deref().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_since_ms.unwrap_or(-1),
            members: self
                .members
                .iter()
                .map(|m| MemberMetadataValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata_for(protocol),
                    assignment: match assignments {
                        Some(a) => a.get(&m.id).cloned().unwrap_or_default(),
                        None => m.assignment.clone(),
                    },
                })
                .collect(),
        }
    }

    pub fn is_consumer_group(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    /// Topics the members consume, from their consumer-protocol metadata; `None` when that is
    /// unknown (not a consumer group, or some metadata does not parse).
    pub fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if !self.is_consumer_group() {
            return None;
        }
        let mut topics = BTreeSet::new();
        for member in &self.members {
            let metadata = match &self.protocol {
                Some(protocol) => member.metadata_for(protocol),
                None => member.protocols.first()?.1.clone(),
            };
            topics.extend(subscribed_topics(&metadata)?);
        }
        Some(topics)
    }

    /// Offsets stored or being stored (what deleting the group must tombstone).
    pub fn all_offset_partitions(&self) -> BTreeSet<TopicPartition> {
        self.offsets
            .keys()
            .chain(self.pending_commits.keys())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            id: id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 1000,
            session_timeout_ms: 1000,
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Bytes::new()))
                .collect(),
            assignment: Bytes::new(),
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            new_member_deadline_ms: 0,
            session_deadline_ms: 0,
        }
    }

    #[test]
    fn protocol_is_chosen_by_votes_among_common_ones() {
        let mut g = Group::new("g".into(), 0, 0);
        g.add_member(member("a", &["range", "roundrobin", "sticky"]));
        g.add_member(member("b", &["roundrobin", "range"]));
        g.add_member(member("c", &["roundrobin", "range", "sticky"]));
        assert_eq!(g.select_protocol().as_deref(), Some("roundrobin"));
        assert!(g.supports_protocols("consumer", &[("range".into(), Bytes::new())]));
        assert!(!g.supports_protocols("consumer", &[("sticky".into(), Bytes::new())]));
        assert!(!g.supports_protocols("connect", &[("range".into(), Bytes::new())]));
    }

    #[test]
    fn removed_leader_is_succeeded_by_first_member() {
        let mut g = Group::new("g".into(), 0, 0);
        g.add_member(member("a", &["range"]));
        g.add_member(member("b", &["range"]));
        assert!(g.is_leader("a"));
        g.remove_member("a");
        assert!(g.is_leader("b"));
        g.remove_member("b");
        assert_eq!(g.leader, None);
    }
}
