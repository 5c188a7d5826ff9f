//! The metadata every shard's services read, and the broker's durable copy of it.
//!
//! The truth is the controller's applied records in both modes (`controller::ClusterMetadata`;
//! on a single node shard 0 decides and applies them itself). What lives here is below the
//! controller: the plain values the metadata is made of ([`cluster_state`]), one immutable
//! [`image::MetadataImage`] per publication held in each shard's [`cache::MetadataCache`], and
//! the snapshot file shard 0 keeps ([`store`], [`snapshot_codec`]; earlier releases' JSON file
//! is read once to import it, [`legacy_json`]).

pub mod cache;
pub mod cluster_state;
pub mod image;
pub mod legacy_json;
pub mod meta_properties;
pub mod snapshot_codec;
pub mod store;

pub use cache::MetadataCache;
pub use cluster_state::{shard_for_slot, BrokerConfigs, MetadataSnapshot};
pub use image::{LiveBroker, MetadataImage};
