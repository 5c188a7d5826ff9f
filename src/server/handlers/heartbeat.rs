//! Heartbeat (key 12): a member says it is alive; the answer tells it whether to rejoin
//! (REBALANCE_IN_PROGRESS) or that it is no longer a member. v3 adds the group instance id.

use crate::group::api::{Call, HeartbeatCall, Reply};
use crate::protocol::messages::heartbeat_request::HeartbeatRequest;
use crate::protocol::messages::heartbeat_response::HeartbeatResponse;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{coordinator_call, HandlerError, Request};

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: HeartbeatRequest = req.decode()?;
    let group_id = request.group_id.0.to_string();
    let error = if group_id.is_empty() {
        ResponseError::InvalidGroupId.code()
    } else {
        let call = HeartbeatCall {
            group_id: group_id.clone(),
            generation_id: request.generation_id,
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
        };
        coordinator_call(
            &req.groups(),
            &group_id,
            Call::Heartbeat(call),
            |r| match r {
                Reply::Heartbeat(code) => Some(code),
                _ => None,
            },
        )
        .await
        .unwrap_or_else(|code| code)
    };
    let mut response = HeartbeatResponse::default();
    response.error_code = error;
    req.encode(&response)
}
