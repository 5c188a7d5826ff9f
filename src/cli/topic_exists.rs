//! The check produce and consume make before anything else: the topic exists (a clear
//! UNKNOWN_TOPIC_OR_PARTITION, not a timeout waiting for leaders) and has leaders.

use kafka_protocol::ResponseError;

use crate::client::{ClientError, Cluster, KafkaCode};

use super::explain::CliError;

/// The topic's partition count, once every partition has a leader.
pub fn partition_count(cluster: &Cluster, topic: &str) -> Result<usize, CliError> {
    let md = cluster.refresh_metadata(&[topic])?;
    let error = match md.topics.get(topic) {
        Some(t) => t.error,
        None => Some(KafkaCode(ResponseError::UnknownTopicOrPartition.code())),
    };
    if let Some(code) = error {
        return Err(CliError::Client(ClientError::Kafka {
            api: "Metadata",
            code,
            message: Some(format!("topic {topic}")),
        }));
    }
    if md.is_ready(topic) {
        return Ok(md.partition_count(topic).unwrap_or(0));
    }
    Ok(cluster.wait_for_leaders(topic)?)
}

/// A `--partition` the user named must be one of the topic's `partitions`.
pub fn check_partition(topic: &str, partitions: usize, partition: i32) -> Result<(), CliError> {
    if partition < 0 || partition as usize >= partitions {
        return Err(CliError::Usage(format!(
            "--partition {partition}: topic {topic} has partitions 0..{}",
            partitions.saturating_sub(1)
        )));
    }
    Ok(())
}
