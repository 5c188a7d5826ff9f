//! The broker's durable copy of the cluster metadata, written by shard 0 only.
//!
//! `<data dir>/__ringbroker_metadata/snapshot.json`: the applied metadata as a snapshot
//! (`snapshot_codec.rs`), replaced atomically (write a temporary file, fsync, rename, fsync the
//! directory), so a crash leaves the old or the new version. On a single node it is the whole
//! truth (the records shard 0 applied); in cluster mode it is what this broker had applied
//! of the metadata log, so that the next start places its logs before the log is caught up.
//!
//! Kafka's `meta.properties` (node.id, cluster.id) is written beside the data as Kafka does;
//! the cluster id lives there.
//!
//! Data directories of earlier releases hold `metadata.json` instead (`legacy_json.rs`): read
//! at the first start, imported by the caller, then renamed `metadata.json.imported`
//! ([`retire_legacy`]) so it is never imported twice.

use std::io;
use std::path::{Path, PathBuf};

use super::cluster_state::MetadataSnapshot;
use super::legacy_json::LegacyMetadata;
use super::snapshot_codec;
use crate::runtime::{self, durable_file};

pub const METADATA_DIR: &str = "__ringbroker_metadata";
const SNAPSHOT_FILE: &str = "snapshot.json";
const LEGACY_FILE: &str = "metadata.json";
const IMPORTED_LEGACY_FILE: &str = "metadata.json.imported";

#[derive(Debug, thiserror::Error)]
pub enum MetadataStoreError {
    #[error("cannot access the metadata in {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("the metadata file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

/// What a data directory holds at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMetadata {
    /// From `meta.properties` (written now if it was missing).
    pub cluster_id: String,
    /// The stored snapshot; `None` on a new data directory or one of an earlier release.
    pub snapshot: Option<MetadataSnapshot>,
    /// An earlier release's metadata, to be imported (only when there is no snapshot).
    pub legacy: Option<LegacyMetadata>,
}

fn dir_of(data_dir: &Path) -> PathBuf {
    data_dir.join(METADATA_DIR)
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> MetadataStoreError {
    let path = path.to_path_buf();
    move |source| MetadataStoreError::Io { path, source }
}

/// Shard 0 at start: reads the stored metadata; on a new data directory creates the metadata
/// directory and `meta.properties` (with a new cluster id, unless cluster mode claimed one
/// first or an earlier release's file names it).
pub async fn load_or_create(
    data_dir: &Path,
    node_id: i32,
) -> Result<StoredMetadata, MetadataStoreError> {
    let dir = dir_of(data_dir);
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    let snapshot = read_snapshot(data_dir).await?;
    let legacy = match snapshot {
        Some(_) => None,
        None => read_legacy(data_dir).await?,
    };
    // In cluster mode `meta.properties` was claimed first (server/cluster_mode.rs): its
    // cluster id stays; rewriting it would give the node another id at every restart.
    let cluster_id = match claimed_cluster_id(data_dir) {
        Some(id) => id,
        None => {
            let id = legacy
                .as_ref()
                .map(|l| l.cluster_id.clone())
                .unwrap_or_else(new_cluster_id);
            write_meta_properties(data_dir, node_id, &id).map_err(io_err(data_dir))?;
            id
        }
    };
    Ok(StoredMetadata {
        cluster_id,
        snapshot,
        legacy,
    })
}

/// Shards other than 0 at start: the cluster id and the snapshot shard 0 wrote (`None` while
/// it has not written one yet).
pub async fn load_existing(
    data_dir: &Path,
) -> Result<Option<(String, MetadataSnapshot)>, MetadataStoreError> {
    let Some(snapshot) = read_snapshot(data_dir).await? else {
        return Ok(None);
    };
    Ok(Some((
        claimed_cluster_id(data_dir).unwrap_or_default(),
        snapshot,
    )))
}

async fn read_snapshot(data_dir: &Path) -> Result<Option<MetadataSnapshot>, MetadataStoreError> {
    let path = dir_of(data_dir).join(SNAPSHOT_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let bytes = durable_file::read_all(&path).await.map_err(io_err(&path))?;
    snapshot_codec::decode(&bytes)
        .map(Some)
        .map_err(|e| MetadataStoreError::Corrupt {
            path,
            reason: e.to_string(),
        })
}

async fn read_legacy(data_dir: &Path) -> Result<Option<LegacyMetadata>, MetadataStoreError> {
    let path = dir_of(data_dir).join(LEGACY_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let bytes = durable_file::read_all(&path).await.map_err(io_err(&path))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| MetadataStoreError::Corrupt {
            path,
            reason: e.to_string(),
        })
}

/// Replaces the stored snapshot atomically and durably.
pub async fn save(data_dir: &Path, snapshot: &MetadataSnapshot) -> Result<(), MetadataStoreError> {
    let path = dir_of(data_dir).join(SNAPSHOT_FILE);
    let bytes = snapshot_codec::encode(snapshot).map_err(|e| MetadataStoreError::Corrupt {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    durable_file::replace(&path, bytes)
        .await
        .map_err(|source| MetadataStoreError::Io { path, source })
}

/// After the snapshot imported from an earlier release's file is saved: the file is renamed
/// (kept for an operator who wants to look, never read again).
pub async fn retire_legacy(data_dir: &Path) -> Result<(), MetadataStoreError> {
    let dir = dir_of(data_dir);
    let (from, to) = (dir.join(LEGACY_FILE), dir.join(IMPORTED_LEGACY_FILE));
    runtime::rename(&from, &to).await.map_err(io_err(&from))?;
    runtime::sync_dir(&dir).await.map_err(io_err(&dir))
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
    crate::util::entropy::uuid_v4().simple().to_string()
}

fn write_meta_properties(data_dir: &Path, node_id: i32, cluster_id: &str) -> io::Result<()> {
    let text = format!("version=1\nnode.id={node_id}\ncluster.id={cluster_id}\n");
    std::fs::write(data_dir.join("meta.properties"), text)
}
