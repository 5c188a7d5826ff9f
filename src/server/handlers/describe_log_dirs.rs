//! DescribeLogDirs (key 35): the broker's one log dir (the data dir) and the size of each
//! requested partition in it (every partition when `topics` is null). One node: no
//! replica lags (offset_lag 0) and no partition is being moved (is_future false).
//!
//! v0 is v1 (v1 only changed throttling). Partitions this broker does not have are left out,
//! as Kafka does; so are offline ones, whose size cannot be read.

use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::messages::describe_log_dirs_request::DescribeLogDirsRequest;
use crate::protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use bytes::Bytes;

use super::{str_bytes, topic_name, HandlerError, Request};

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let wire_version = req.version().max(1);
    let request: DescribeLogDirsRequest = req.decode_as(wire_version)?;
    let meta = req.image();
    let wanted: Vec<(String, Vec<i32>)> = match &request.topics {
        Some(topics) => topics
            .iter()
            .map(|t| (t.topic.0.to_string(), t.partitions.clone()))
            .collect(),
        None => meta
            .topics()
            .map(|t| (t.name.clone(), (0..t.partitions.len() as i32).collect()))
            .collect(),
    };
    let ops: Vec<PartitionOp> = wanted
        .iter()
        .flat_map(|(topic, partitions)| {
            partitions.iter().map(|&partition| PartitionOp::Describe {
                topic: topic.clone(),
                partition,
                producers: false,
            })
        })
        .collect();
    let mut results = req.partitions().run(ops).await.into_iter();
    let mut dir = DescribeLogDirsResult::default();
    dir.log_dir = str_bytes(log_dir_name(&req.config().data_dir));
    for (topic, partitions) in &wanted {
        let mut t = DescribeLogDirsTopic::default();
        t.name = topic_name(topic);
        for &partition in partitions {
            if let Some(PartitionResult::Describe(Ok(summary))) = results.next() {
                let mut p = DescribeLogDirsPartition::default();
                p.partition_index = partition;
                p.partition_size = i64::try_from(summary.size_bytes).unwrap_or(i64::MAX);
                t.partitions.push(p);
            }
        }
        if !t.partitions.is_empty() {
            dir.topics.push(t);
        }
    }
    // v4+: the filesystem's space (Kafka answers -1 when it cannot tell).
    match crate::health::disk_space::usage(&req.config().data_dir) {
        Ok(usage) => {
            dir.total_bytes = i64::try_from(usage.total_bytes).unwrap_or(i64::MAX);
            dir.usable_bytes = i64::try_from(usage.free_bytes).unwrap_or(i64::MAX);
        }
        Err(e) => {
            tracing::debug!(error = %e, "no disk usage for DescribeLogDirs");
            dir.total_bytes = -1;
            dir.usable_bytes = -1;
        }
    }
    let mut response = DescribeLogDirsResponse::default();
    response.results = vec![dir];
    req.encode_as(wire_version, &response)
}

/// The data dir as an absolute path (Kafka reports its configured `log.dirs` entries, which
/// are absolute in practice); computed without touching the disk.
fn log_dir_name(data_dir: &std::path::Path) -> String {
    std::path::absolute(data_dir)
        .unwrap_or_else(|_| data_dir.to_path_buf())
        .display()
        .to_string()
}
