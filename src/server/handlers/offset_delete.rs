//! OffsetDelete (key 47): removes a group's committed offsets for partitions it no longer
//! consumes. A group-level error answers alone (no partitions); otherwise each partition has
//! its error (GROUP_SUBSCRIBED_TO_TOPIC while a member consumes the topic).

use crate::util::hash::HashMap;

use crate::group::api::{Call, OffsetDeleteCall, Reply};
use crate::protocol::messages::offset_delete_request::OffsetDeleteRequest;
use crate::protocol::messages::offset_delete_response::{
    OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{coordinator_call, HandlerError, Request};

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: OffsetDeleteRequest = req.decode()?;
    let group_id = request.group_id.0.to_string();
    let mut response = OffsetDeleteResponse::default();
    if group_id.is_empty() {
        response.error_code = ResponseError::InvalidGroupId.code();
        return req.encode(&response);
    }

    // Kafka answers partitions that do not exist itself; the others go to the coordinator
    // (called even with none, so a missing group is still reported).
    let meta = req.image();
    let mut partitions = Vec::new();
    // Whether each requested partition exists, in request order.
    let mut known = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            let exists = meta
                .partition_by_name(&topic.name.0, p.partition_index)
                .is_some();
            known.push(exists);
            if exists {
                partitions.push((topic.name.0.to_string(), p.partition_index));
            }
        }
    }
    drop(meta);

    let call = OffsetDeleteCall {
        group_id: group_id.clone(),
        partitions,
    };
    let reply = coordinator_call(
        &req.groups(),
        &group_id,
        Call::OffsetDelete(call),
        |r| match r {
            Reply::OffsetDelete(d) => Some(d),
            _ => None,
        },
    )
    .await;
    let reply = match reply {
        Ok(reply) if reply.error == 0 => reply,
        Ok(reply) => {
            response.error_code = reply.error;
            return req.encode(&response);
        }
        Err(code) => {
            response.error_code = code;
            return req.encode(&response);
        }
    };
    let errors: HashMap<(String, i32), i16> = reply
        .partitions
        .into_iter()
        .map(|(topic, partition, error)| ((topic, partition), error))
        .collect();

    let mut known = known.into_iter();
    for topic in &request.topics {
        let mut t = OffsetDeleteResponseTopic::default();
        t.name = topic.name.clone();
        for p in &topic.partitions {
            let error = if known.next().unwrap_or(false) {
                errors
                    .get(&(topic.name.0.to_string(), p.partition_index))
                    .copied()
                    .unwrap_or(ResponseError::UnknownServerError.code())
            } else {
                ResponseError::UnknownTopicOrPartition.code()
            };
            let mut partition = OffsetDeleteResponsePartition::default();
            partition.partition_index = p.partition_index;
            partition.error_code = error;
            t.partitions.push(partition);
        }
        response.topics.push(t);
    }
    req.encode(&response)
}
