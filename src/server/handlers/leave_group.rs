//! LeaveGroup (key 13): members leave a group, which rebalances without waiting for their
//! session to expire. v0–v2 name one member; v3+ a batch of members (with group instance ids,
//! so an admin can remove static members) and per-member errors; v5 a reason per member.

use crate::group::api::{Call, LeaveCall, LeaveReply, Reply};
use crate::protocol::messages::leave_group_request::LeaveGroupRequest;
use crate::protocol::messages::leave_group_response::{LeaveGroupResponse, MemberResponse};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{coordinator_call, str_bytes, HandlerError, Request};

/// The first version with a batch of members.
const BATCH_VERSION: i16 = 3;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: LeaveGroupRequest = req.decode()?;
    let version = req.version();
    let group_id = request.group_id.0.to_string();
    let members: Vec<(String, Option<String>)> = if version >= BATCH_VERSION {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    for reason in request.members.iter().filter_map(|m| m.reason.as_ref()) {
        // The coordinator does not take reasons; the log keeps them, as Kafka's does.
        tracing::info!(group = %group_id, %reason, "member leaves its group");
    }
    let reply = if group_id.is_empty() {
        Err(ResponseError::InvalidGroupId.code())
    } else {
        let call = LeaveCall {
            group_id: group_id.clone(),
            members,
        };
        coordinator_call(&req.groups(), &group_id, Call::Leave(call), |r| match r {
            Reply::Leave(l) => Some(l),
            _ => None,
        })
        .await
    };
    let reply = reply.unwrap_or_else(|code| LeaveReply {
        error: code,
        members: Vec::new(),
    });
    let mut response = LeaveGroupResponse::default();
    if version >= BATCH_VERSION {
        response.error_code = reply.error;
        response.members = reply
            .members
            .into_iter()
            .map(|(member_id, group_instance_id, error)| {
                let mut m = MemberResponse::default();
                m.member_id = str_bytes(member_id);
                m.group_instance_id = group_instance_id.map(str_bytes);
                m.error_code = error;
                m
            })
            .collect();
    } else {
        // One error field only: the group's, else the member's (as Kafka folds them).
        response.error_code = if reply.error != 0 {
            reply.error
        } else {
            reply
                .members
                .iter()
                .map(|(_, _, error)| *error)
                .find(|&e| e != 0)
                .unwrap_or(0)
        };
    }
    req.encode(&response)
}
