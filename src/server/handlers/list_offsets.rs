//! ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3) or the first offset at
//! or after a timestamp.

use crate::protocol::messages::list_offsets_request::ListOffsetsRequest;
use crate::protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use bytes::Bytes;

use super::{HandlerError, Request};
use crate::shard::messages::{PartitionOp, PartitionResult};

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: ListOffsetsRequest = req.decode()?;
    let mut ops = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            ops.push(PartitionOp::ListOffsets {
                topic: topic.name.0.to_string(),
                partition: p.partition_index,
                timestamp: p.timestamp,
            });
        }
    }
    let mut results = req.shard.run_partition_ops(ops).await.into_iter();
    let mut response = ListOffsetsResponse::default();
    for topic in &request.topics {
        let mut t = ListOffsetsTopicResponse::default();
        t.name = topic.name.clone();
        for p in &topic.partitions {
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = p.partition_index;
            if req.version() >= 4 {
                r.leader_epoch = 0;
            }
            match results.next() {
                Some(PartitionResult::ListOffsets(Ok((offset, timestamp)))) => {
                    r.offset = offset;
                    r.timestamp = timestamp;
                }
                Some(PartitionResult::ListOffsets(Err(e))) => {
                    r.error_code = e.code;
                    r.offset = -1;
                    r.timestamp = -1;
                }
                _ => r.error_code = crate::protocol::ResponseError::UnknownServerError.code(),
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    req.encode(&response)
}
