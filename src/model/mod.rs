//! The small values every layer shares: newtypes for the numbers of the Kafka model, the
//! producer-id block, the topic-name rules. The bottom of the crate: it imports no other
//! module of it, so any module may import it without pulling in a subsystem.

pub mod ids;
pub mod producer_id_block;
pub mod topic_name;

pub use ids::{BrokerEpoch, BrokerId, LeaderEpoch, MetadataOffset, NodeId, Offset, PartitionEpoch};
pub use producer_id_block::{ProducerIdBlock, PRODUCER_ID_BLOCK_SIZE};
pub use topic_name::{validate_topic_name, InvalidTopicName, MAX_PARTITIONS};
