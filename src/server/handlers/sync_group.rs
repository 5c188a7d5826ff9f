//! SyncGroup (key 14): after a join, the leader sends the assignment and every member gets its
//! own. v3 adds the group instance id, v5 the protocol type and name (both required then, and
//! echoed in the response).

use crate::group::api::{Call, Reply, SyncCall, SyncReply};
use crate::protocol::messages::sync_group_request::SyncGroupRequest;
use crate::protocol::messages::sync_group_response::SyncGroupResponse;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{coordinator_call, str_bytes, HandlerError, Request};

/// The first version carrying the protocol type and name.
const PROTOCOL_VERSION: i16 = 5;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: SyncGroupRequest = req.decode()?;
    let version = req.version();
    let group_id = request.group_id.0.to_string();
    let protocol_missing = version >= PROTOCOL_VERSION
        && (request.protocol_type.is_none() || request.protocol_name.is_none());
    let reply = if group_id.is_empty() {
        Err(ResponseError::InvalidGroupId.code())
    } else if protocol_missing {
        // Kafka refuses a v5+ sync without both before asking the coordinator.
        Err(ResponseError::InconsistentGroupProtocol.code())
    } else {
        let call = SyncCall {
            group_id: group_id.clone(),
            generation_id: request.generation_id,
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
            protocol_type: request.protocol_type.as_ref().map(|s| s.to_string()),
            protocol_name: request.protocol_name.as_ref().map(|s| s.to_string()),
            assignments: request
                .assignments
                .iter()
                .map(|a| (a.member_id.to_string(), a.assignment.clone()))
                .collect(),
        };
        coordinator_call(&req.groups(), &group_id, Call::Sync(call), |r| match r {
            Reply::Sync(s) => Some(s),
            _ => None,
        })
        .await
    };
    let reply = reply.unwrap_or_else(|code| SyncReply {
        error: code,
        ..SyncReply::default()
    });
    let mut response = SyncGroupResponse::default();
    response.error_code = reply.error;
    if version >= PROTOCOL_VERSION {
        response.protocol_type = reply.protocol_type.map(str_bytes);
        response.protocol_name = reply.protocol_name.map(str_bytes);
    }
    response.assignment = reply.assignment;
    req.encode(&response)
}
