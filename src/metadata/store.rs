//! The durable copy of the cluster metadata, written by shard 0 only.
//!
//! `<data dir>/__ringbroker_metadata/metadata.json`, replaced atomically (write a temporary
//! file, fsync, rename, fsync the directory), so a crash leaves the old or the new version.
//! Kafka's `meta.properties` (node.id, cluster.id) is written beside the data as Kafka does.

use std::io;
use std::path::{Path, PathBuf};

use super::stored::StoredMetadata;
use crate::runtime::durable_file;

pub const METADATA_DIR: &str = "__ringbroker_metadata";
const METADATA_FILE: &str = "metadata.json";

#[derive(Debug, thiserror::Error)]
pub enum MetadataStoreError {
    #[error("cannot access the metadata in {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("the metadata file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

fn dir_of(data_dir: &Path) -> PathBuf {
    data_dir.join(METADATA_DIR)
}

/// Loads the metadata, or creates it (with a new cluster id) on first start.
pub async fn load_or_create(
    data_dir: &Path,
    node_id: i32,
) -> Result<StoredMetadata, MetadataStoreError> {
    let dir = dir_of(data_dir);
    let path = dir.join(METADATA_FILE);
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MetadataStoreError::Io { path, source }
    };
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    if !path.exists() {
        // In cluster mode `meta.properties` was claimed first (server/cluster_mode.rs): its
        // cluster id stays; rewriting it would give the node another id at every restart.
        let claimed = claimed_cluster_id(data_dir);
        let meta = StoredMetadata::new(claimed.clone().unwrap_or_else(new_cluster_id));
        save(data_dir, &meta).await?;
        if claimed.is_none() {
            write_meta_properties(data_dir, node_id, &meta.cluster_id).map_err(io_err(data_dir))?;
        }
        return Ok(meta);
    }
    let bytes = durable_file::read_all(&path).await.map_err(io_err(&path))?;
    serde_json::from_slice(&bytes).map_err(|e| MetadataStoreError::Corrupt {
        path,
        reason: e.to_string(),
    })
}

/// Reads the metadata without creating anything (shards other than 0 at startup).
pub async fn load_existing(data_dir: &Path) -> Result<Option<StoredMetadata>, MetadataStoreError> {
    let path = dir_of(data_dir).join(METADATA_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let err = |source| MetadataStoreError::Io {
        path: path.clone(),
        source,
    };
    let bytes = durable_file::read_all(&path).await.map_err(err)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| MetadataStoreError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })
}

/// Replaces the stored metadata atomically and durably.
pub async fn save(data_dir: &Path, meta: &StoredMetadata) -> Result<(), MetadataStoreError> {
    let path = dir_of(data_dir).join(METADATA_FILE);
    let bytes = serde_json::to_vec_pretty(meta).map_err(|e| MetadataStoreError::Corrupt {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    durable_file::replace(&path, bytes)
        .await
        .map_err(|source| MetadataStoreError::Io { path, source })
}

/// The cluster id of an existing, readable `meta.properties`.
fn claimed_cluster_id(data_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(data_dir.join("meta.properties")).ok()?;
    crate::metadata::meta_properties::MetaProperties::parse(&text)
        .ok()
        .map(|m| m.cluster_id)
}

fn new_cluster_id() -> String {
    // Kafka cluster ids are 16 random bytes in URL-safe base64 (22 characters); a UUID's
    // simple form is as unique and as opaque to clients.
    uuid::Uuid::new_v4().simple().to_string()
}

fn write_meta_properties(data_dir: &Path, node_id: i32, cluster_id: &str) -> io::Result<()> {
    let text = format!("version=1\nnode.id={node_id}\ncluster.id={cluster_id}\n");
    std::fs::write(data_dir.join("meta.properties"), text)
}
