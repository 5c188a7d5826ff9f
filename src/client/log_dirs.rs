//! DescribeLogDirs from the client side: how many bytes each partition of a topic takes on
//! disk (`ringbroker topic describe`).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_request::{
    DescribableLogDirTopic, DescribeLogDirsRequest,
};
use kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResponse;
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::cluster::Cluster;
use super::error::ClientResult;

/// The size in bytes of each of `partitions` of `topic`, summed over the log dirs that
/// answer (a partition no dir holds is absent). Each partition's size is its leader's (in a
/// cluster the other replicas may hold less); partitions without a known leader are asked
/// of any broker.
pub fn partition_sizes(
    cluster: &Cluster,
    topic: &str,
    partitions: &[i32],
) -> ClientResult<BTreeMap<i32, i64>> {
    let meta = cluster.metadata();
    let mut by_leader: BTreeMap<Option<i32>, Vec<i32>> = BTreeMap::new();
    for p in partitions {
        by_leader
            .entry(meta.leader(topic, *p).filter(|l| *l >= 0))
            .or_default()
            .push(*p);
    }
    let version = cluster.version(ApiKey::DescribeLogDirs)?;
    let mut sizes = BTreeMap::new();
    for (leader, asked) in by_leader {
        let connection = match leader {
            Some(node) => cluster.connection(node)?,
            None => cluster.any_connection()?,
        };
        let mut t = DescribableLogDirTopic::default();
        t.topic = TopicName(StrBytes::from_string(topic.to_string()));
        t.partitions = asked;
        let mut req = DescribeLogDirsRequest::default();
        req.topics = Some(vec![t]);
        let resp: DescribeLogDirsResponse =
            connection.call(ApiKey::DescribeLogDirs, version, &req)?;
        // A dir with an error (offline) holds nothing readable: it is skipped.
        for dir in resp.results.iter().filter(|d| d.error_code == 0) {
            for t in dir.topics.iter().filter(|t| t.name.0.as_str() == topic) {
                for p in &t.partitions {
                    *sizes.entry(p.partition_index).or_insert(0) += p.partition_size;
                }
            }
        }
    }
    Ok(sizes)
}
