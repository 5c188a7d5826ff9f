//! The sync phase and heartbeats of Kafka's classic group protocol: SyncGroup hands out the
//! leader's assignment once it is stored; Heartbeat keeps a member's session and tells it to
//! rejoin during a rebalance. The join phase and the rebalance are in `membership.rs`.

use crate::util::hash::HashMap;

use bytes::Bytes;

use super::api::{HeartbeatCall, OffsetsRecord, Output, Reply, SyncCall, SyncReply, Token};
use super::coordinator::{GroupCoordinator, PendingWork};
use super::group_state::GroupState;
use super::membership::{
    code, reset_and_propagate_assignment_error, sync_error, validate_current_member,
};
use super::records::encode_group_metadata_key;
use crate::protocol::ResponseError;

impl GroupCoordinator {
    pub(super) fn sync(&mut self, token: Token, call: SyncCall, now_ms: i64, out: &mut Output) {
        let mut fail = |error: i16| out.replies.push((token, sync_error(error)));
        if call.group_id.is_empty() {
            return fail(code(ResponseError::InvalidGroupId));
        }
        match self.check_coordinator(&call.group_id) {
            // The rebalance in progress was lost with the load: have the member rejoin (older
            // clients do not expect COORDINATOR_LOAD_IN_PROGRESS here).
            Err(e) if e == code(ResponseError::CoordinatorLoadInProgress) => {
                return fail(code(ResponseError::RebalanceInProgress))
            }
            Err(e) => return fail(e),
            Ok(()) => {}
        }
        let Some(group) = self.groups.get_mut(&call.group_id) else {
            return fail(code(ResponseError::UnknownMemberId));
        };
        if group.state == GroupState::Dead {
            return fail(code(ResponseError::CoordinatorNotAvailable));
        }
        if let Some(error) =
            validate_current_member(group, &call.member_id, call.group_instance_id.as_deref())
        {
            return fail(error);
        }
        if call.generation_id != group.generation {
            return fail(code(ResponseError::IllegalGeneration));
        }
        let type_differs = call
            .protocol_type
            .as_ref()
            .is_some_and(|t| group.protocol_type.as_ref() != Some(t));
        let name_differs = call
            .protocol_name
            .as_ref()
            .is_some_and(|n| group.protocol.as_ref() != Some(n));
        if type_differs || name_differs {
            return fail(code(ResponseError::InconsistentGroupProtocol));
        }
        match group.state {
            GroupState::Empty | GroupState::Dead => fail(code(ResponseError::UnknownMemberId)),
            GroupState::PreparingRebalance => fail(code(ResponseError::RebalanceInProgress)),
            GroupState::Stable => {
                group.pending_sync.remove(&call.member_id);
                if group.pending_sync.is_empty() {
                    group.sync_deadline_ms = None;
                }
                let (protocol_type, protocol_name) =
                    (group.protocol_type.clone(), group.protocol.clone());
                if let Some(member) = group.member_mut(&call.member_id) {
                    member.refresh_session(now_ms);
                    out.replies.push((
                        token,
                        Reply::Sync(SyncReply {
                            error: 0,
                            protocol_type,
                            protocol_name,
                            assignment: member.assignment.clone(),
                        }),
                    ));
                }
            }
            GroupState::CompletingRebalance => {
                if let Some(member) = group.member_mut(&call.member_id) {
                    if let Some(superseded) = member.awaiting_sync.replace(token) {
                        out.replies.push((
                            superseded,
                            sync_error(code(ResponseError::RebalanceInProgress)),
                        ));
                    }
                }
                group.pending_sync.remove(&call.member_id);
                if group.pending_sync.is_empty() {
                    group.sync_deadline_ms = None;
                }
                let already_storing = group.assignment_store_generation == Some(group.generation);
                if group.is_leader(&call.member_id) && !already_storing {
                    self.store_assignment(&call.group_id, call.assignments, out);
                }
            }
        }
    }

    /// The leader's assignment goes to the log first; waiting syncs are answered once it is
    /// there. Members the leader left out get an empty assignment.
    fn store_assignment(
        &mut self,
        group_id: &str,
        assignments: Vec<(String, Bytes)>,
        out: &mut Output,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let mut by_member: HashMap<String, Bytes> = assignments
            .into_iter()
            .filter(|(id, _)| group.member(id).is_some())
            .collect();
        for member in &group.members {
            by_member.entry(member.id.clone()).or_default();
        }
        group.assignment_store_generation = Some(group.generation);
        let value = group.metadata_value(Some(&by_member)).encode();
        let record = OffsetsRecord {
            key: encode_group_metadata_key(group_id),
            value: Some(value.clone()),
        };
        let work = PendingWork::Assignment {
            group_id: group_id.to_string(),
            generation: group.generation,
            assignments: by_member,
            value,
        };
        let partition = group.partition;
        self.start_append(partition, vec![record], work, out);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn assignment_stored(
        &mut self,
        group_id: &str,
        generation: i32,
        assignments: HashMap<String, Bytes>,
        value: Bytes,
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
        if group.assignment_store_generation == Some(generation) {
            group.assignment_store_generation = None;
        }
        // Another member may have joined (or left) while this was stored: then the group is
        // already rebalancing and the waiting syncs were told so.
        if group.state != GroupState::CompletingRebalance || group.generation != generation {
            return;
        }
        if !ok {
            reset_and_propagate_assignment_error(
                group,
                code(ResponseError::CoordinatorNotAvailable),
                now_ms,
                out,
            );
            self.maybe_prepare_rebalance(group_id, now_ms, out);
            return;
        }
        let (protocol_type, protocol_name) = (group.protocol_type.clone(), group.protocol.clone());
        for member in &mut group.members {
            member.assignment = assignments.get(&member.id).cloned().unwrap_or_default();
            if let Some(token) = member.awaiting_sync.take() {
                out.replies.push((
                    token,
                    Reply::Sync(SyncReply {
                        error: 0,
                        protocol_type: protocol_type.clone(),
                        protocol_name: protocol_name.clone(),
                        assignment: member.assignment.clone(),
                    }),
                ));
                member.refresh_session(now_ms);
            }
        }
        group.transition(GroupState::Stable, now_ms);
    }

    pub(super) fn heartbeat(
        &mut self,
        token: Token,
        call: HeartbeatCall,
        now_ms: i64,
        out: &mut Output,
    ) {
        let error = self.heartbeat_error(&call, now_ms);
        out.replies.push((token, Reply::Heartbeat(error)));
    }

    fn heartbeat_error(&mut self, call: &HeartbeatCall, now_ms: i64) -> i16 {
        if call.group_id.is_empty() {
            return code(ResponseError::InvalidGroupId);
        }
        match self.check_coordinator(&call.group_id) {
            // Kafka answers blindly while loading: the member learns more once it is done.
            Err(e) if e == code(ResponseError::CoordinatorLoadInProgress) => return 0,
            Err(e) => return e,
            Ok(()) => {}
        }
        let Some(group) = self.groups.get_mut(&call.group_id) else {
            return code(ResponseError::UnknownMemberId);
        };
        if group.state == GroupState::Dead {
            return code(ResponseError::CoordinatorNotAvailable);
        }
        if let Some(error) =
            validate_current_member(group, &call.member_id, call.group_instance_id.as_deref())
        {
            return error;
        }
        if call.generation_id != group.generation {
            return code(ResponseError::IllegalGeneration);
        }
        let state = group.state;
        if state == GroupState::Empty {
            return code(ResponseError::UnknownMemberId);
        }
        if let Some(member) = group.member_mut(&call.member_id) {
            member.refresh_session(now_ms);
        }
        match state {
            // Tells members that have not rejoined yet to do so.
            GroupState::PreparingRebalance => code(ResponseError::RebalanceInProgress),
            _ => 0,
        }
    }
}
