//! The broker's stored metadata: its topics (ids, partitions and their placement slots,
//! configs), the dynamic broker configs, and the JSON file it is kept in. Shard 0 is the only
//! writer; every shard holds an immutable copy (`Arc<StoredMetadata>`).
//!
//! On a single node the stored metadata is the whole truth; in cluster mode it is this broker's
//! copy of the controller's topics (`controller::ClusterMetadata` is the controller's own
//! model). Either way, what the shards' services read is one [`image::MetadataImage`] per
//! publication, held in each shard's [`cache::MetadataCache`].

pub mod cache;
pub mod cluster_state;
pub mod image;
pub mod meta_properties;
pub mod store;
pub mod stored;

pub use cache::MetadataCache;
pub use image::{LiveBroker, MetadataImage};
pub use stored::{shard_for_slot, MetadataError, PartitionMeta, StoredMetadata, TopicMetadata};
