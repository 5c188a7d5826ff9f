//! JoinGroup (key 11): a member asks to join a group (classic protocol) and waits for the
//! rebalance; the leader gets every member's metadata. v1 adds the rebalance timeout (v0 uses
//! the session timeout for both), v4 makes a first join without a member id come back with
//! MEMBER_ID_REQUIRED and the id to use, v5 adds static membership (group instance id), v7
//! the protocol type and nullable protocol name in the response, v8 the reason, v9
//! `skip_assignment`.

use crate::group::api::{Call, JoinCall, JoinReply, Reply};
use crate::protocol::messages::join_group_request::JoinGroupRequest;
use crate::protocol::messages::join_group_response::{JoinGroupResponse, JoinGroupResponseMember};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{coordinator_call, str_bytes, HandlerError, Request};

/// Kafka's generation for "none" (answers carrying an error).
const NO_GENERATION: i32 = -1;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: JoinGroupRequest = req.decode()?;
    let version = req.version();
    let group_id = request.group_id.0.to_string();
    let reply = if group_id.is_empty() {
        Err(ResponseError::InvalidGroupId.code())
    } else {
        let call = JoinCall {
            group_id: group_id.clone(),
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: if version >= 1 {
                request.rebalance_timeout_ms
            } else {
                request.session_timeout_ms
            },
            protocol_type: request.protocol_type.to_string(),
            protocols: request
                .protocols
                .iter()
                .map(|p| (p.name.to_string(), p.metadata.clone()))
                .collect(),
            client_id: req.client_id().to_string(),
            client_host: req.client_host(),
            require_known_member_id: version >= 4,
            reason: request.reason.as_ref().map(|s| s.to_string()),
        };
        coordinator_call(&req.groups(), &group_id, Call::Join(call), |r| match r {
            Reply::Join(j) => Some(j),
            _ => None,
        })
        .await
    };
    let reply = reply.unwrap_or_else(|code| JoinReply {
        error: code,
        generation_id: NO_GENERATION,
        ..JoinReply::default()
    });
    req.encode(&response_for(reply, version))
}

fn response_for(reply: JoinReply, version: i16) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default();
    response.error_code = reply.error;
    response.generation_id = reply.generation_id;
    if version >= 7 {
        response.protocol_type = reply.protocol_type.map(str_bytes);
        response.protocol_name = reply.protocol_name.map(str_bytes);
    } else {
        // Before v7 the protocol name is not nullable: Kafka sends "" for none.
        response.protocol_name = Some(str_bytes(reply.protocol_name.unwrap_or_default()));
    }
    // A static leader rejoining a stable group keeps the current assignment. Before v9 the
    // client cannot be told to skip it, so it is told it is a follower instead (no members,
    // not the leader): its SyncGroup then returns the assignment it had.
    let follower_view = reply.skip_assignment && version < 9;
    response.leader = if follower_view {
        str_bytes("")
    } else {
        str_bytes(reply.leader)
    };
    if version >= 9 {
        response.skip_assignment = reply.skip_assignment;
    }
    response.member_id = str_bytes(reply.member_id);
    let members = if follower_view {
        Vec::new()
    } else {
        reply.members
    };
    response.members = members
        .into_iter()
        .map(|m| {
            let mut member = JoinGroupResponseMember::default();
            member.member_id = str_bytes(m.member_id);
            if version >= 5 {
                member.group_instance_id = m.group_instance_id.map(str_bytes);
            }
            member.metadata = m.metadata;
            member
        })
        .collect();
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::api::JoinMember;
    use crate::protocol::Encodable;

    #[test]
    fn a_leader_reply_encodes_in_every_version() {
        let reply = JoinReply {
            error: 0,
            generation_id: 3,
            protocol_type: Some("consumer".to_string()),
            protocol_name: Some("range".to_string()),
            leader: "m1".to_string(),
            skip_assignment: true,
            member_id: "m1".to_string(),
            members: vec![JoinMember {
                member_id: "m1".to_string(),
                group_instance_id: Some("i1".to_string()),
                metadata: Bytes::from_static(b"meta"),
            }],
        };
        for version in 0..=9 {
            let mut buf = bytes::BytesMut::new();
            response_for(reply.clone(), version)
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
        }
        // An error reply without a protocol name still encodes before v7.
        let failed = JoinReply {
            error: ResponseError::CoordinatorNotAvailable.code(),
            generation_id: NO_GENERATION,
            ..JoinReply::default()
        };
        for version in 0..=9 {
            let mut buf = bytes::BytesMut::new();
            response_for(failed.clone(), version)
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
        }
    }
}
