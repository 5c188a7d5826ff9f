//! The manifests: what the broker that wrote a fixture answered just before it stopped.

use super::*;

/// What the broker that wrote a fixture answered just before it stopped.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct Manifest {
    /// The commit the writing broker was built from.
    pub(crate) written_by: String,
    /// How it was written (the command that regenerates a fixture).
    pub(crate) generator: String,
    /// `--shards` and `--set` of the writing broker (the broker under test gets the same).
    pub(crate) shards: usize,
    pub(crate) settings: Vec<String>,
    /// Every topic, internal ones included, by name.
    pub(crate) topics: BTreeMap<String, TopicManifest>,
    /// Topics deleted before the stop: they must not come back.
    pub(crate) deleted_topics: Vec<String>,
    /// Committed offsets by group, then `topic/partition`.
    pub(crate) groups: BTreeMap<String, BTreeMap<String, Committed>>,
    /// The idempotent producers, by `topic/partition`.
    pub(crate) producers: BTreeMap<String, ProducerManifest>,
    /// The highest producer id InitProducerId handed out.
    pub(crate) highest_producer_id: i64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
pub(crate) struct TopicManifest {
    pub(crate) id: String,
    pub(crate) internal: bool,
    /// The configs DescribeConfigs reports with source DYNAMIC_TOPIC_CONFIG.
    pub(crate) dynamic_configs: BTreeMap<String, String>,
    pub(crate) partitions: Vec<PartitionManifest>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
pub(crate) struct PartitionManifest {
    pub(crate) partition: i32,
    /// ListOffsets earliest and latest.
    pub(crate) log_start: i64,
    pub(crate) log_end: i64,
    /// Records at or past `log_start`, and their digest (see [`RecordDigest`]). Not recorded for
    /// internal topics (their records are the broker's own and may be rewritten).
    pub(crate) records: Option<u64>,
    pub(crate) digest: Option<String>,
    /// The codecs of the batches read, in order of first appearance.
    pub(crate) codecs: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
pub(crate) struct Committed {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
pub(crate) struct ProducerManifest {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i16,
    /// The last batch it sent: its first sequence, record count and base offset.
    pub(crate) last_base_sequence: i32,
    pub(crate) last_count: usize,
    pub(crate) last_base_offset: i64,
    /// Its records' values (the batch is rebuilt from them to resend it).
    pub(crate) last_values: Vec<String>,
    pub(crate) last_timestamp: i64,
}

/// What the three nodes answered before they stopped.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct ClusterManifest {
    pub(crate) written_by: String,
    pub(crate) generator: String,
    /// Node i+1's controller listener; the fixture opens only on these.
    pub(crate) controller_ports: Vec<u16>,
    pub(crate) settings: Vec<String>,
    pub(crate) cluster_id: String,
    /// Each partition's replicas, by topic.
    pub(crate) replicas: BTreeMap<String, Vec<Vec<i32>>>,
    pub(crate) topics: BTreeMap<String, TopicManifest>,
    pub(crate) deleted_topics: Vec<String>,
    pub(crate) groups: BTreeMap<String, BTreeMap<String, Committed>>,
}
