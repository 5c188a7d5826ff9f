//! DeleteRecords (key 21): move a partition's log start offset forward (offset -1 means the
//! high watermark). Records before it are no longer readable; the segments wholly before it are
//! deleted. The answer's low watermark is the new log start offset; a replicated partition's
//! leader answers once its followers' log starts reached it too (Kafka's low watermark), or
//! REQUEST_TIMED_OUT after the request's `timeout_ms`.

use crate::protocol::messages::delete_records_request::DeleteRecordsRequest;
use crate::protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{HandlerError, Request};
use crate::partition::ops::{PartitionOp, PartitionResult};

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: DeleteRecordsRequest = req.decode()?;
    let mut ops = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            ops.push(PartitionOp::DeleteRecords {
                topic: topic.name.0.to_string(),
                partition: p.partition_index,
                offset: p.offset,
                timeout_ms: request.timeout_ms,
            });
        }
    }
    let mut results = req.partitions().run(ops).await.into_iter();
    let mut response = DeleteRecordsResponse::default();
    for topic in &request.topics {
        let mut t = DeleteRecordsTopicResult::default();
        t.name = topic.name.clone();
        for p in &topic.partitions {
            let mut r = DeleteRecordsPartitionResult::default();
            r.partition_index = p.partition_index;
            r.low_watermark = -1;
            match results.next() {
                Some(PartitionResult::DeleteRecords(Ok(low_watermark))) => {
                    r.low_watermark = low_watermark;
                    tracing::info!(topic = %topic.name.0, partition = p.partition_index, low_watermark, "deleted records");
                }
                Some(PartitionResult::DeleteRecords(Err(e))) => {
                    tracing::debug!(topic = %topic.name.0, partition = p.partition_index, error = %e.message, "delete records failed");
                    r.error_code = e.code;
                }
                _ => r.error_code = ResponseError::UnknownServerError.code(),
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    req.encode(&response)
}
