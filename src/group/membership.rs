//! Group membership (Kafka's classic protocol): JoinGroup, LeaveGroup and the rebalance they
//! drive, including its timeouts (SyncGroup and Heartbeat are in `sync_phase.rs`). Follows
//! Kafka's GroupCoordinator.scala.

use bytes::Bytes;

use super::api::{
    JoinCall, JoinReply, LeaveCall, LeaveReply, OffsetsRecord, Output, Reply, SyncReply, Token,
};
use super::coordinator::{GroupCoordinator, PendingWork, StaticRevert};
use super::group_state::{Group, GroupState, JoinPhase};
use super::member::Member;
use super::records::encode_group_metadata_key;
use crate::protocol::ResponseError;

/// Kafka's NewMemberJoinTimeoutMs: a new member waiting in a join cannot heartbeat yet, so its
/// join is bounded by this instead of its session (it retries if it is still there).
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

pub(super) fn code(e: ResponseError) -> i16 {
    e.code()
}

/// A failed join: Kafka's `JoinGroupResult(memberId, error)` (generation -1, no leader).
fn join_error(member_id: &str, error: i16) -> Reply {
    Reply::Join(JoinReply {
        error,
        generation_id: -1,
        member_id: member_id.to_string(),
        ..JoinReply::default()
    })
}

pub(super) fn sync_error(error: i16) -> Reply {
    Reply::Sync(SyncReply {
        error,
        ..SyncReply::default()
    })
}

/// Checks that `member_id` is in the group and, when an instance id is given, that it is the
/// member currently holding it (an older one is fenced).
pub(super) fn validate_current_member(
    group: &Group,
    member_id: &str,
    instance_id: Option<&str>,
) -> Option<i16> {
    if let Some(instance_id) = instance_id {
        match group.static_member_id(instance_id) {
            Some(current) if current != member_id => {
                return Some(code(ResponseError::FencedInstanceId))
            }
            Some(_) => {}
            None => return Some(code(ResponseError::UnknownMemberId)),
        }
    }
    match group.member(member_id) {
        Some(_) => None,
        None => Some(code(ResponseError::UnknownMemberId)),
    }
}

/// Kafka's `acceptJoiningMember`: whether the group has room for this join.
fn accepts_joining_member(group: &Group, member_id: &str, max_size: usize) -> bool {
    match group.state {
        GroupState::Empty | GroupState::Dead => true,
        // Counting members that rejoined lets the last ones to rejoin be refused when the
        // group is over the limit (e.g. after the limit was lowered).
        GroupState::PreparingRebalance => {
            group
                .member(member_id)
                .is_some_and(|m| m.awaiting_join.is_some())
                || group.awaiting_join_count() < max_size
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.member(member_id).is_some() || group.members.len() < max_size
        }
    }
}

/// Cancels the assignment being waited for: every waiting SyncGroup gets `error`.
pub(super) fn reset_and_propagate_assignment_error(
    group: &mut Group,
    error: i16,
    now_ms: i64,
    out: &mut Output,
) {
    for member in &mut group.members {
        member.assignment = Bytes::new();
        if let Some(token) = member.awaiting_sync.take() {
            out.replies.push((token, sync_error(error)));
            member.refresh_session(now_ms);
        }
    }
}

/// Answers a member's waiting requests when it leaves the group for good.
fn release_member(member: &mut Member, out: &mut Output) {
    let unknown = code(ResponseError::UnknownMemberId);
    if let Some(token) = member.awaiting_join.take() {
        out.replies.push((token, join_error("", unknown)));
    }
    if let Some(token) = member.awaiting_sync.take() {
        out.replies.push((token, sync_error(unknown)));
    }
}

impl GroupCoordinator {
    pub(super) fn join(&mut self, token: Token, call: JoinCall, now_ms: i64, out: &mut Output) {
        let mut fail = |error: i16, member_id: &str| {
            out.replies.push((token, join_error(member_id, error)));
        };
        if call.group_id.is_empty() {
            return fail(code(ResponseError::InvalidGroupId), &call.member_id);
        }
        if let Err(error) = self.check_coordinator(&call.group_id) {
            return fail(error, &call.member_id);
        }
        if call.session_timeout_ms < self.config.min_session_timeout_ms
            || call.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return fail(code(ResponseError::InvalidSessionTimeout), &call.member_id);
        }
        let is_new_member = call.member_id.is_empty();
        let group_id = call.group_id.clone();
        if !self.groups.contains_key(&group_id) {
            // Only a member without an id may create the group.
            if !is_new_member {
                return fail(code(ResponseError::UnknownMemberId), &call.member_id);
            }
            let partition = self.partition_of(&group_id);
            self.groups.insert(
                group_id.clone(),
                Group::new(group_id.clone(), partition, now_ms),
            );
        }
        let max_size = self.config.max_size;
        let Some(group) = self.groups.get_mut(&group_id) else {
            return;
        };
        if !accepts_joining_member(group, &call.member_id, max_size) {
            if let Some(mut member) = group.remove_member(&call.member_id) {
                release_member(&mut member, out);
            }
            out.replies.push((
                token,
                join_error("", code(ResponseError::GroupMaxSizeReached)),
            ));
        } else if is_new_member {
            self.new_member_join(token, call, now_ms, out);
        } else {
            self.current_member_join(token, call, now_ms, out);
        }
        self.try_complete_join(&group_id, now_ms, out);
    }

    fn new_member_join(&mut self, token: Token, call: JoinCall, now_ms: i64, out: &mut Output) {
        let Some(group) = self.groups.get(&call.group_id) else {
            return;
        };
        if group.state == GroupState::Dead {
            // Being deleted: the client retries and finds the group (re)created.
            out.replies.push((
                token,
                join_error("", code(ResponseError::CoordinatorNotAvailable)),
            ));
            return;
        }
        if !group.supports_protocols(&call.protocol_type, &call.protocols) {
            out.replies.push((
                token,
                join_error("", code(ResponseError::InconsistentGroupProtocol)),
            ));
            return;
        }
        let existing_static = call
            .group_instance_id
            .as_deref()
            .and_then(|instance| group.static_member_id(instance));
        let prefix = call
            .group_instance_id
            .clone()
            .unwrap_or_else(|| call.client_id.clone());
        let member_id = self.new_member_id(&prefix);
        match (&call.group_instance_id, existing_static) {
            (Some(_), Some(old_member_id)) => {
                self.replace_static_member(token, call, old_member_id, member_id, now_ms, out)
            }
            (None, _) if call.require_known_member_id => {
                let Some(group) = self.groups.get_mut(&call.group_id) else {
                    return;
                };
                group.pending_members.insert(
                    member_id.clone(),
                    now_ms + i64::from(call.session_timeout_ms),
                );
                out.replies.push((
                    token,
                    join_error(&member_id, code(ResponseError::MemberIdRequired)),
                ));
            }
            _ => self.add_member_and_rebalance(token, call, member_id, now_ms, out),
        }
    }

    fn current_member_join(&mut self, token: Token, call: JoinCall, now_ms: i64, out: &mut Output) {
        let Some(group) = self.groups.get_mut(&call.group_id) else {
            return;
        };
        let failure = if group.state == GroupState::Dead {
            Some(code(ResponseError::CoordinatorNotAvailable))
        } else if !group.supports_protocols(&call.protocol_type, &call.protocols) {
            Some(code(ResponseError::InconsistentGroupProtocol))
        } else if group.pending_members.contains_key(&call.member_id) {
            // Ids handed out with MEMBER_ID_REQUIRED are only ever dynamic.
            if call.group_instance_id.is_some() {
                Some(code(ResponseError::UnknownMemberId))
            } else {
                let member_id = call.member_id.clone();
                return self.add_member_and_rebalance(token, call, member_id, now_ms, out);
            }
        } else {
            validate_current_member(group, &call.member_id, call.group_instance_id.as_deref())
        };
        if let Some(error) = failure {
            out.replies
                .push((token, join_error(&call.member_id, error)));
            return;
        }
        let is_leader = group.is_leader(&call.member_id);
        let unchanged = group
            .member(&call.member_id)
            .is_some_and(|m| m.matches(&call.protocols));
        let resend_reply = match group.state {
            GroupState::PreparingRebalance => false,
            // Same metadata: the member probably missed the join reply; give it again.
            GroupState::CompletingRebalance => unchanged,
            // The leader rejoining forces a rebalance: that is how it reacts to changes the
            // member metadata does not show (e.g. new partitions of a subscribed topic).
            GroupState::Stable => unchanged && !is_leader,
            GroupState::Empty | GroupState::Dead => {
                out.replies.push((
                    token,
                    join_error(&call.member_id, code(ResponseError::UnknownMemberId)),
                ));
                return;
            }
        };
        if resend_reply {
            // Only the leader of a generation still being assigned needs the member list.
            let include_members = is_leader && group.state == GroupState::CompletingRebalance;
            let reply = group.join_reply(&call.member_id, include_members);
            if let Some(member) = group.member_mut(&call.member_id) {
                member.refresh_session(now_ms);
            }
            out.replies.push((token, Reply::Join(reply)));
        } else {
            self.update_member_and_rebalance(token, call, now_ms, out);
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        token: Token,
        call: JoinCall,
        member_id: String,
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.groups.get_mut(&call.group_id) else {
            return;
        };
        let member = Member {
            id: member_id,
            instance_id: call.group_instance_id,
            client_id: call.client_id,
            client_host: call.client_host,
            rebalance_timeout_ms: call.rebalance_timeout_ms,
            session_timeout_ms: call.session_timeout_ms,
            protocol_type: call.protocol_type,
            protocols: call.protocols,
            assignment: Bytes::new(),
            awaiting_join: Some(token),
            awaiting_sync: None,
            is_new: true,
            new_member_deadline_ms: now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS,
            session_deadline_ms: now_ms + i64::from(call.session_timeout_ms),
        };
        // A brand-new group keeps waiting a little longer for more members.
        if group.state == GroupState::PreparingRebalance && group.generation == 0 {
            group.new_member_added = true;
        }
        group.add_member(member);
        self.maybe_prepare_rebalance(&call.group_id, now_ms, out);
    }

    fn update_member_and_rebalance(
        &mut self,
        token: Token,
        call: JoinCall,
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.groups.get_mut(&call.group_id) else {
            return;
        };
        let Some(member) = group.member_mut(&call.member_id) else {
            return;
        };
        if let Some(superseded) = member.awaiting_join.replace(token) {
            // The client gave up on its earlier join and sent this one.
            out.replies.push((
                superseded,
                join_error(&call.member_id, code(ResponseError::RebalanceInProgress)),
            ));
        }
        member.protocols = call.protocols;
        member.rebalance_timeout_ms = call.rebalance_timeout_ms;
        member.session_timeout_ms = call.session_timeout_ms;
        self.maybe_prepare_rebalance(&call.group_id, now_ms, out);
    }

    /// A static member restarted (known instance id, no member id): it takes over the old
    /// member's place under a new id and the old id is fenced. In a Stable group whose protocol
    /// this does not change, no rebalance happens: the new id is stored and the member keeps
    /// its assignment (the leader gets `skip_assignment`, Join v9 semantics).
    fn replace_static_member(
        &mut self,
        token: Token,
        call: JoinCall,
        old_member_id: String,
        new_member_id: String,
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.groups.get_mut(&call.group_id) else {
            return;
        };
        let fenced = code(ResponseError::FencedInstanceId);
        let Some(member) = group.member_mut(&old_member_id) else {
            return;
        };
        if let Some(t) = member.awaiting_join.take() {
            out.replies.push((t, join_error(&old_member_id, fenced)));
        }
        if let Some(t) = member.awaiting_sync.take() {
            out.replies.push((t, sync_error(fenced)));
        }
        let revert = StaticRevert {
            old_member_id: old_member_id.clone(),
            new_member_id: new_member_id.clone(),
            old_protocols: std::mem::replace(&mut member.protocols, call.protocols),
            old_rebalance_timeout_ms: member.rebalance_timeout_ms,
            old_session_timeout_ms: member.session_timeout_ms,
        };
        member.id = new_member_id.clone();
        member.rebalance_timeout_ms = call.rebalance_timeout_ms;
        member.session_timeout_ms = call.session_timeout_ms;
        member.awaiting_join = Some(token);
        member.refresh_session(now_ms);
        rename_member_refs(group, &old_member_id, &new_member_id);
        match group.state {
            GroupState::Stable if group.select_protocol() == group.protocol => {
                let value = group.metadata_value(None).encode();
                let record = OffsetsRecord {
                    key: encode_group_metadata_key(&group.id),
                    value: Some(value.clone()),
                };
                let partition = group.partition;
                let work = PendingWork::StaticRejoin {
                    group_id: call.group_id.clone(),
                    token,
                    value,
                    revert,
                };
                self.start_append(partition, vec![record], work, out);
            }
            // Mid-sync the leader may have assigned under the old id: start over.
            GroupState::CompletingRebalance => self.prepare_rebalance(&call.group_id, now_ms, out),
            // Already rebalancing: the member now simply waits for the join phase to end.
            GroupState::PreparingRebalance => {}
            _ => self.maybe_prepare_rebalance(&call.group_id, now_ms, out),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn static_rejoin_stored(
        &mut self,
        group_id: &str,
        token: Token,
        value: Bytes,
        revert: StaticRevert,
        ok: bool,
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if ok {
            group.persisted_metadata = Some(value);
        }
        let new_id = revert.new_member_id.as_str();
        let still_waiting = group.state == GroupState::Stable
            && group
                .member(new_id)
                .is_some_and(|m| m.awaiting_join == Some(token));
        if !still_waiting {
            // A rebalance started meanwhile; the join is answered when it completes.
            return;
        }
        if ok {
            let is_leader = group.is_leader(new_id);
            let mut reply = group.join_reply(new_id, is_leader);
            reply.skip_assignment = is_leader;
            if let Some(member) = group.member_mut(new_id) {
                member.awaiting_join = None;
            }
            out.replies.push((token, Reply::Join(reply)));
        } else {
            if let Some(member) = group.member_mut(new_id) {
                member.awaiting_join = None;
                member.id = revert.old_member_id.clone();
                member.protocols = revert.old_protocols;
                member.rebalance_timeout_ms = revert.old_rebalance_timeout_ms;
                member.session_timeout_ms = revert.old_session_timeout_ms;
                member.refresh_session(now_ms);
            }
            rename_member_refs(group, new_id, &revert.old_member_id);
            out.replies.push((
                token,
                join_error("", code(ResponseError::CoordinatorNotAvailable)),
            ));
        }
    }

    pub(super) fn leave(&mut self, token: Token, call: LeaveCall, now_ms: i64, out: &mut Output) {
        let reply = |error: i16, members| Reply::Leave(LeaveReply { error, members });
        if call.group_id.is_empty() {
            out.replies.push((
                token,
                reply(code(ResponseError::InvalidGroupId), Vec::new()),
            ));
            return;
        }
        if let Err(error) = self.check_coordinator(&call.group_id) {
            out.replies.push((token, reply(error, Vec::new())));
            return;
        }
        let unknown = code(ResponseError::UnknownMemberId);
        let Some(group) = self.groups.get(&call.group_id) else {
            let members = call
                .members
                .into_iter()
                .map(|(id, instance)| (id, instance, unknown))
                .collect();
            out.replies.push((token, reply(0, members)));
            return;
        };
        if group.state == GroupState::Dead {
            out.replies.push((
                token,
                reply(code(ResponseError::CoordinatorNotAvailable), Vec::new()),
            ));
            return;
        }
        let mut results = Vec::with_capacity(call.members.len());
        for (member_id, instance_id) in call.members {
            let error = self.leave_one(
                &call.group_id,
                &member_id,
                instance_id.as_deref(),
                now_ms,
                out,
            );
            results.push((member_id, instance_id, error));
        }
        out.replies.push((token, reply(0, results)));
    }

    fn leave_one(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        now_ms: i64,
        out: &mut Output,
    ) -> i16 {
        let Some(group) = self.groups.get_mut(group_id) else {
            return code(ResponseError::UnknownMemberId);
        };
        if member_id.is_empty() {
            // Administrative removal of a static member by instance id alone.
            return match instance_id.and_then(|i| group.static_member_id(i)) {
                Some(current) => {
                    self.remove_member_and_update_group(group_id, &current, now_ms, out);
                    0
                }
                None => code(ResponseError::UnknownMemberId),
            };
        }
        if group.pending_members.remove(member_id).is_some() {
            self.try_complete_join(group_id, now_ms, out);
            return 0;
        }
        if let Some(error) = validate_current_member(group, member_id, instance_id) {
            return error;
        }
        self.remove_member_and_update_group(group_id, member_id, now_ms, out);
        0
    }

    /// Removes a member (left, expired, or not rejoined in time) and rebalances the rest.
    pub(super) fn remove_member_and_update_group(
        &mut self,
        group_id: &str,
        member_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let Some(mut member) = group.remove_member(member_id) else {
            return;
        };
        // A member removed while waiting gets UNKNOWN_MEMBER_ID and rejoins if still alive.
        release_member(&mut member, out);
        match group.state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(group_id, now_ms, out)
            }
            GroupState::PreparingRebalance => self.try_complete_join(group_id, now_ms, out),
        }
    }

    pub(super) fn maybe_prepare_rebalance(
        &mut self,
        group_id: &str,
        now_ms: i64,
        out: &mut Output,
    ) {
        if self
            .groups
            .get(group_id)
            .is_some_and(|g| g.state.can_rebalance())
        {
            self.prepare_rebalance(group_id, now_ms, out);
        }
    }

    /// Starts the join phase: everyone must rejoin (waiting syncs are told to).
    fn prepare_rebalance(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let initial_delay = i64::from(self.config.initial_rebalance_delay_ms);
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.state == GroupState::CompletingRebalance {
            reset_and_propagate_assignment_error(
                group,
                code(ResponseError::RebalanceInProgress),
                now_ms,
                out,
            );
        }
        group.pending_sync.clear();
        group.sync_deadline_ms = None;
        let rebalance_timeout = group.rebalance_timeout_ms();
        group.join_phase = Some(if group.state == GroupState::Empty {
            JoinPhase::InitialDelay {
                deadline_ms: now_ms + initial_delay,
                remaining_ms: (rebalance_timeout - initial_delay).max(0),
            }
        } else {
            JoinPhase::AwaitingMembers {
                deadline_ms: now_ms + rebalance_timeout,
            }
        });
        group.transition(GroupState::PreparingRebalance, now_ms);
        self.try_complete_join(group_id, now_ms, out);
    }

    /// Ends the join phase early once every member rejoined (never during the initial delay).
    pub(super) fn try_complete_join(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let ready = self.groups.get(group_id).is_some_and(|g| {
            g.state == GroupState::PreparingRebalance
                && matches!(g.join_phase, Some(JoinPhase::AwaitingMembers { .. }))
                && g.all_members_joined()
        });
        if ready {
            self.complete_join(group_id, now_ms, out);
        }
    }

    /// The join phase is over: dynamic members that did not rejoin are dropped, the next
    /// generation starts and every joined member gets its reply (the leader with the members).
    fn complete_join(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let not_rejoined: Vec<String> = group
            .members
            .iter()
            .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in not_rejoined {
            if let Some(mut member) = group.remove_member(&id) {
                release_member(&mut member, out);
            }
        }
        if !group.elect_joined_leader() && !group.members.is_empty() {
            // Only static members that did not rejoin are left: wait another round for them
            // to rejoin or for their sessions to expire.
            group.join_phase = Some(JoinPhase::AwaitingMembers {
                deadline_ms: now_ms + group.rebalance_timeout_ms(),
            });
            return;
        }
        group.generation += 1;
        group.join_phase = None;
        group.new_member_added = false;
        group.pending_sync.clear();
        group.assignment_store_generation = None;
        if group.members.is_empty() {
            group.protocol = None;
            group.leader = None;
            group.transition(GroupState::Empty, now_ms);
            // Stored so that a restart does not bring back the previous generation's members.
            self.store_empty_group(group_id, out);
            return;
        }
        group.protocol = group.select_protocol();
        group.transition(GroupState::CompletingRebalance, now_ms);
        let replies: Vec<(Option<Token>, JoinReply)> = group
            .members
            .iter()
            .map(|m| {
                (
                    m.awaiting_join,
                    group.join_reply(&m.id, group.is_leader(&m.id)),
                )
            })
            .collect();
        for (token, reply) in replies {
            if let Some(token) = token {
                out.replies.push((token, Reply::Join(reply)));
            }
        }
        for member in &mut group.members {
            member.awaiting_join = None;
            member.is_new = false;
            member.refresh_session(now_ms);
            group.pending_sync.insert(member.id.clone());
        }
        group.sync_deadline_ms = Some(now_ms + group.rebalance_timeout_ms());
    }

    /// Session expiry of members and of member ids handed out but never used.
    pub(super) fn expire_members(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.state == GroupState::Dead {
            return;
        }
        let before = group.pending_members.len();
        group
            .pending_members
            .retain(|_, deadline| *deadline > now_ms);
        if group.pending_members.len() != before {
            self.try_complete_join(group_id, now_ms, out);
        }
        let Some(group) = self.groups.get(group_id) else {
            return;
        };
        let expired: Vec<String> = group
            .members
            .iter()
            .filter(|m| {
                if m.awaiting_join.is_some() {
                    m.is_new && now_ms >= m.new_member_deadline_ms
                } else {
                    m.awaiting_sync.is_none() && now_ms >= m.session_deadline_ms
                }
            })
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            self.remove_member_and_update_group(group_id, &id, now_ms, out);
        }
    }

    /// The join phase's deadline: extend the initial delay if members keep coming, else end it.
    pub(super) fn expire_join_phase(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let configured_delay = i64::from(self.config.initial_rebalance_delay_ms);
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.state != GroupState::PreparingRebalance {
            return;
        }
        let Some(phase) = group.join_phase else {
            return;
        };
        if now_ms < phase.deadline_ms() {
            return;
        }
        match phase {
            JoinPhase::InitialDelay { remaining_ms, .. }
                if group.new_member_added && remaining_ms > 0 =>
            {
                group.new_member_added = false;
                let delay = configured_delay.min(remaining_ms);
                group.join_phase = Some(JoinPhase::InitialDelay {
                    deadline_ms: now_ms + delay,
                    remaining_ms: (remaining_ms - delay).max(0),
                });
            }
            _ => self.complete_join(group_id, now_ms, out),
        }
    }

    /// Members that got their join reply but did not sync within the rebalance timeout are
    /// removed, and the group rebalances without them.
    pub(super) fn expire_sync_phase(&mut self, group_id: &str, now_ms: i64, out: &mut Output) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if !matches!(
            group.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) {
            return;
        }
        let Some(deadline) = group.sync_deadline_ms else {
            return;
        };
        if now_ms < deadline {
            return;
        }
        group.sync_deadline_ms = None;
        let late: Vec<String> = group.pending_sync.drain().collect();
        if late.is_empty() {
            return;
        }
        for id in late {
            if let Some(mut member) = group.remove_member(&id) {
                release_member(&mut member, out);
            }
        }
        self.prepare_rebalance(group_id, now_ms, out);
    }
}

/// Points the leader and pending-sync entries of a renamed member at its new id.
fn rename_member_refs(group: &mut Group, old_id: &str, new_id: &str) {
    if group.is_leader(old_id) {
        group.leader = Some(new_id.to_string());
    }
    if group.pending_sync.remove(old_id) {
        group.pending_sync.insert(new_id.to_string());
    }
}
