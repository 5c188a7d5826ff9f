//! DescribeProducers (key 61): per partition, the idempotent producers the broker remembers
//! (those with written batches), from the partition's producer-state table. No
//! transactions yet: no coordinator epoch and no open transaction (-1 for both).

use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::messages::describe_producers_request::DescribeProducersRequest;
use crate::protocol::messages::describe_producers_response::{
    DescribeProducersResponse, PartitionResponse, ProducerState, TopicResponse,
};
use crate::protocol::messages::ProducerId;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{str_bytes, HandlerError, Request};

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: DescribeProducersRequest = req.decode()?;
    let mut ops = Vec::new();
    for topic in &request.topics {
        for &partition in &topic.partition_indexes {
            ops.push(PartitionOp::Describe {
                topic: topic.name.0.to_string(),
                partition,
                producers: true,
            });
        }
    }
    let mut results = req.partitions().run(ops).await.into_iter();
    let mut response = DescribeProducersResponse::default();
    for topic in &request.topics {
        let mut t = TopicResponse::default();
        t.name = topic.name.clone();
        for &partition in &topic.partition_indexes {
            let mut r = PartitionResponse::default();
            r.partition_index = partition;
            match results.next() {
                Some(PartitionResult::Describe(Ok(summary))) => {
                    r.active_producers = summary
                        .producers
                        .iter()
                        .map(|a| {
                            let mut s = ProducerState::default();
                            s.producer_id = ProducerId(a.producer_id);
                            s.producer_epoch = i32::from(a.epoch);
                            s.last_sequence = a.last_sequence;
                            s.last_timestamp = a.last_timestamp;
                            s.coordinator_epoch = -1;
                            s.current_txn_start_offset = -1;
                            s
                        })
                        .collect();
                }
                Some(PartitionResult::Describe(Err(e))) => {
                    r.error_code = e.code;
                    r.error_message = Some(str_bytes(e.message));
                }
                _ => r.error_code = ResponseError::UnknownServerError.code(),
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    req.encode(&response)
}
