//! The metadata file of earlier releases (`__ringbroker_metadata/metadata.json`): topics with
//! their placement slots and configs, the dynamic broker configs, and in cluster mode the
//! metadata offset the controller's topics were copied at. Nothing writes it any more: shard 0
//! reads it once, at the first start of this release on an old data directory, and imports it
//! as a metadata snapshot (`controller::local::import_legacy`); see `store.rs`.

use std::collections::BTreeMap;

use serde::Deserialize;
use uuid::Uuid;

/// One partition of the old file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LegacyPartition {
    /// Placement slot. Files written before slots existed stored the shard itself (`shard`):
    /// as a slot it places every partition where it was when the shard count is unchanged.
    #[serde(alias = "shard")]
    pub slot: usize,
    /// Cluster mode: whether this broker held a replica (absent means it did).
    #[serde(default = "hosted_by_default")]
    pub hosted: bool,
}

fn hosted_by_default() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LegacyTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<LegacyPartition>,
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
    /// Cluster mode: a copy of the controller's topic. A topic without it was created by the
    /// node alone before it joined a cluster (never served there).
    #[serde(default)]
    pub from_controller: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LegacyMetadata {
    pub version: u64,
    pub cluster_id: String,
    pub topics: BTreeMap<String, LegacyTopic>,
    /// The slot the next new partition gets.
    #[serde(alias = "next_shard")]
    pub next_slot: usize,
    /// Cluster mode: the metadata log offset the controller's topics were copied at.
    #[serde(default)]
    pub controller_offset: Option<u64>,
    /// Dynamic broker configs by resource name ("" the cluster-wide defaults).
    #[serde(default)]
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_of_every_earlier_shape_parse() {
        let oldest = r#"{"version":3,"cluster_id":"c","next_shard":1,"topics":{"a":{"name":"a",
            "id":"00000000-0000-0000-0000-000000000001","partitions":[{"shard":0},{"shard":1},
            {"shard":0}],"configs":{}}}}"#;
        let m: LegacyMetadata = serde_json::from_str(oldest).unwrap();
        assert_eq!(m.next_slot, 1);
        let slots: Vec<usize> = m.topics["a"].partitions.iter().map(|p| p.slot).collect();
        assert_eq!(slots, [0, 1, 0]);
        assert!(m.topics["a"].partitions.iter().all(|p| p.hosted));
        let cluster = r#"{"version":9,"cluster_id":"c","next_slot":4,"controller_offset":17,
            "topics":{"b":{"name":"b","id":"00000000-0000-0000-0000-000000000002",
            "partitions":[{"slot":2,"hosted":false},{"slot":3}],"configs":{"retention.ms":"5"},
            "from_controller":true}},"broker_configs":{"":{"log.retention.ms":"9"}}}"#;
        let m: LegacyMetadata = serde_json::from_str(cluster).unwrap();
        let b = &m.topics["b"];
        assert_eq!(m.controller_offset, Some(17));
        assert!(b.from_controller && !b.partitions[0].hosted && b.partitions[1].hosted);
        assert_eq!(m.broker_configs[""]["log.retention.ms"], "9");
    }
}
