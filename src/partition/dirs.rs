//! Partition directories beyond what the log keeps in them: which topic a directory belongs
//! to (Kafka's `partition.metadata`), setting a directory aside before it is removed, and the
//! startup sweep of what a crash left behind.
//!
//! Why: a deleted topic's data must never come back as a new topic of the same name. As in
//! Kafka, a delete renames the directory at once to `<topic>-<p>.<32 hex>-delete` (one rename,
//! made durable by fsyncing the data dir) and removes it in the background; every start removes
//! `*-delete` directories left over. Every directory records its topic id, so a directory of
//! another incarnation of the topic is set aside as `-stray` (Kafka's KRaft brokers do the
//! same with logs whose topic id the metadata does not know) instead of being served, and so is,
//! at start, a directory of a partition the metadata does not have at all (a crash between
//! saving the metadata and the rename). Strays are kept for the operator, never deleted.

use std::io;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use uuid::Uuid;

use crate::metadata::MetadataImage;
use crate::runtime;
use crate::runtime::durable_file;

/// Kafka's file naming the topic id of a partition directory.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
/// The only version of `partition.metadata` Kafka writes.
const PARTITION_METADATA_VERSION: u32 = 0;
const DELETE_SUFFIX: &str = "-delete";
const STRAY_SUFFIX: &str = "-stray";
/// Longest file name most file systems take; Kafka shortens the topic to fit.
const MAX_DIR_NAME: usize = 255;

#[derive(Debug, thiserror::Error)]
pub enum PartitionDirError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("{path} is not a partition.metadata file: {reason}")]
    Malformed { path: PathBuf, reason: &'static str },
    #[error("cannot rename {from} to {to}: {source}")]
    Rename {
        from: PathBuf,
        to: PathBuf,
        source: io::Error,
    },
}

/// Why a directory is renamed aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aside {
    /// Its partition was deleted: removed in the background, and at the next start if not.
    Delete,
    /// It does not belong to the topic of that name now: kept for the operator.
    Stray,
}

/// `<topic>-<partition>.<32 hex>-delete` (or `-stray`), the topic shortened so that the name
/// fits in [`MAX_DIR_NAME`] bytes, as Kafka names them.
pub fn aside_dir_name(topic: &str, partition: i32, unique: Uuid, aside: Aside) -> String {
    let suffix = match aside {
        Aside::Delete => DELETE_SUFFIX,
        Aside::Stray => STRAY_SUFFIX,
    };
    let tail = format!("-{partition}.{}{suffix}", unique.simple());
    let room = MAX_DIR_NAME.saturating_sub(tail.len());
    let cut = topic
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|end| *end <= room)
        .last()
        .unwrap_or(0);
    format!("{}{tail}", &topic[..cut])
}

/// The content Kafka writes: `version: 0\ntopic_id: <id in URL-safe base64, no padding>`.
pub fn encode_partition_metadata(topic_id: Uuid) -> String {
    format!(
        "version: {PARTITION_METADATA_VERSION}\ntopic_id: {}",
        URL_SAFE_NO_PAD.encode(topic_id.as_bytes())
    )
}

/// The topic id in a `partition.metadata` text.
pub fn parse_partition_metadata(text: &str) -> Result<Uuid, &'static str> {
    let mut lines = text.lines();
    let mut field = |name: &str| {
        lines
            .next()
            .and_then(|l| l.split_once(':'))
            .filter(|(key, _)| key.trim() == name)
            .map(|(_, value)| value.trim().to_string())
    };
    let version = field("version").ok_or("no version line")?;
    if version.parse::<u32>() != Ok(PARTITION_METADATA_VERSION) {
        return Err("unknown version");
    }
    let id = field("topic_id").ok_or("no topic_id line")?;
    let bytes = URL_SAFE_NO_PAD
        .decode(id.as_bytes())
        .map_err(|_| "topic_id is not base64")?;
    Uuid::from_slice(&bytes).map_err(|_| "topic_id is not 16 bytes")
}

/// The topic id `dir` records; `None` when it has no `partition.metadata` (a new partition,
/// or a directory written before ringbroker recorded it).
pub async fn read_topic_id(dir: &Path) -> Result<Option<Uuid>, PartitionDirError> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let bytes = match durable_file::read_all(&path).await {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(PartitionDirError::Read { path, source }),
    };
    let text = std::str::from_utf8(&bytes).map_err(|_| PartitionDirError::Malformed {
        path: path.clone(),
        reason: "not UTF-8",
    })?;
    parse_partition_metadata(text)
        .map(Some)
        .map_err(|reason| PartitionDirError::Malformed { path, reason })
}

/// Creates `dir` if needed and records `topic_id` in it, durably.
pub async fn write_topic_id(dir: &Path, topic_id: Uuid) -> Result<(), PartitionDirError> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let write = |source| PartitionDirError::Write {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(write)?;
    let text = encode_partition_metadata(topic_id).into_bytes();
    durable_file::replace(&path, text).await.map_err(write)
}

/// Renames `dir` (of `topic`/`partition`) aside and makes the rename durable. Returns the
/// new path.
pub async fn rename_aside(
    dir: &Path,
    topic: &str,
    partition: i32,
    aside: Aside,
) -> Result<PathBuf, PartitionDirError> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    let to = parent.join(aside_dir_name(
        topic,
        partition,
        crate::util::entropy::uuid_v4(),
        aside,
    ));
    let rename = |source| PartitionDirError::Rename {
        from: dir.to_path_buf(),
        to: to.clone(),
        source,
    };
    runtime::rename(dir, &to).await.map_err(rename)?;
    runtime::sync_dir(parent).await.map_err(rename)?;
    Ok(to)
}

/// Removes a directory (or file) renamed for deletion, off the reactor and without waiting: a big
/// partition is many files to unlink. A failure is logged; the next start tries again.
pub fn remove_in_background(dir: PathBuf) {
    runtime::spawn_detached(async move {
        let removing = dir.clone();
        // A plain file may stand where a directory should (an offline partition's).
        let removed = runtime::spawn_blocking(move || match removing.is_dir() {
            true => std::fs::remove_dir_all(&removing),
            false => std::fs::remove_file(&removing),
        });
        if let Err(e) = removed.await {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove a deleted partition's directory; the next start tries again");
        }
    });
}

/// The partition a directory name stands for: `<topic>-<partition>`, or `None`.
fn parse_dir_name(name: &str) -> Option<(&str, i32)> {
    let (topic, partition) = name.rsplit_once('-')?;
    let partition = partition
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| partition.parse().ok())
        .flatten()?;
    (!topic.is_empty()).then_some((topic, partition))
}

/// What the startup sweep does with one entry of the data dir.
#[derive(Debug, PartialEq, Eq)]
enum SweepAction {
    Remove,
    SetAside { topic: String, partition: i32 },
    Keep,
}

fn sweep_action(name: &str, is_dir: bool, meta: &MetadataImage) -> SweepAction {
    if name.ends_with(DELETE_SUFFIX) {
        return SweepAction::Remove;
    }
    // The metadata log of cluster mode looks like a partition of a topic but is not one:
    // setting it aside would lose the voter's log and vote.
    if !is_dir
        || name.ends_with(STRAY_SUFFIX)
        || name == crate::controller::quorum::METADATA_LOG_DIR
    {
        return SweepAction::Keep;
    }
    match parse_dir_name(name) {
        Some((topic, partition)) if !meta.has_partition(topic, partition) => {
            SweepAction::SetAside {
                topic: topic.to_string(),
                partition,
            }
        }
        _ => SweepAction::Keep,
    }
}

/// At start, before any log opens (shard 0): sets aside directories of partitions `meta` does
/// not have, and removes `*-delete` ones in the background. Returns how many were set aside.
pub async fn sweep(data_dir: &Path, meta: &MetadataImage) -> usize {
    let listing = data_dir.to_path_buf();
    let entries = runtime::spawn_blocking(move || -> io::Result<Vec<(String, bool)>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(listing)? {
            let entry = entry?;
            let is_dir = entry.file_type()?.is_dir();
            out.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
        }
        Ok(out)
    })
    .await;
    let entries = match entries {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(dir = %data_dir.display(), error = %e, "cannot list the data dir to sweep deleted partitions");
            return 0;
        }
    };
    let mut set_aside = 0;
    for (name, is_dir) in entries {
        let dir = data_dir.join(&name);
        match sweep_action(&name, is_dir, meta) {
            SweepAction::Keep => {}
            SweepAction::Remove => remove_in_background(dir),
            SweepAction::SetAside { topic, partition } => {
                match rename_aside(&dir, &topic, partition, Aside::Stray).await {
                    Ok(to) => {
                        set_aside += 1;
                        tracing::warn!(dir = %dir.display(), moved_to = %to.display(), "a partition directory the metadata does not know (a topic deleted before a crash?) was set aside; it is not served");
                    }
                    Err(e) => {
                        tracing::error!(dir = %dir.display(), error = %e, "cannot set aside a partition directory the metadata does not know");
                    }
                }
            }
        }
    }
    set_aside
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::metadata::cluster_state::{PartitionState, TopicState};
    use crate::metadata::image::ImageParts;
    use crate::model::{BrokerId, LeaderEpoch, PartitionEpoch};

    use super::*;

    #[test]
    fn partition_metadata_is_kafkas_format() {
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
        let text = encode_partition_metadata(id);
        // Kafka's Uuid.toString: the 16 bytes, big-endian, URL-safe base64 without padding.
        assert_eq!(text, "version: 0\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA");
        assert_eq!(parse_partition_metadata(&text), Ok(id));
        assert_eq!(parse_partition_metadata(&format!("{text}\n")), Ok(id));
        assert!(parse_partition_metadata("version: 1\ntopic_id: ASNFZ4mrze_-3LqYdlQyEA").is_err());
        assert!(parse_partition_metadata("version: 0\n").is_err());
        assert!(parse_partition_metadata("version: 0\ntopic_id: !!").is_err());
        assert!(parse_partition_metadata("").is_err());
    }

    #[test]
    fn aside_names_are_kafkas_and_fit() {
        let id = Uuid::from_u128(0xabc);
        assert_eq!(
            aside_dir_name("orders", 3, id, Aside::Delete),
            "orders-3.00000000000000000000000000000abc-delete"
        );
        let long = "t".repeat(249);
        let name = aside_dir_name(&long, 9999, id, Aside::Stray);
        assert_eq!(name.len(), MAX_DIR_NAME);
        assert!(name.ends_with("-9999.00000000000000000000000000000abc-stray"));
    }

    #[test]
    fn the_sweep_removes_deleted_and_sets_aside_unknown_partitions() {
        let partition = |slot| PartitionState {
            replicas: vec![BrokerId(1)],
            isr: vec![BrokerId(1)],
            leader: Some(BrokerId(1)),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
            slot,
        };
        let topic = TopicState {
            name: "a-b".into(),
            id: Uuid::from_u128(1),
            partitions: vec![partition(0), partition(1)],
            configs: BTreeMap::new(),
        };
        let meta = MetadataImage::from_parts(ImageParts::default(), [Arc::new(topic)]);
        let id = Uuid::from_u128(7);
        let deleted = aside_dir_name("a-b", 0, id, Aside::Delete);
        let stray = aside_dir_name("a-b", 0, id, Aside::Stray);
        let cases = [
            ("a-b-0", true, SweepAction::Keep),
            ("a-b-1", true, SweepAction::Keep),
            (
                "a-b-2",
                true,
                SweepAction::SetAside {
                    topic: "a-b".into(),
                    partition: 2,
                },
            ),
            (
                "gone-0",
                true,
                SweepAction::SetAside {
                    topic: "gone".into(),
                    partition: 0,
                },
            ),
            (deleted.as_str(), true, SweepAction::Remove),
            (stray.as_str(), true, SweepAction::Keep),
            ("gone-0", false, SweepAction::Keep),
            ("__ringbroker_metadata", true, SweepAction::Keep),
            ("__cluster_metadata-0", true, SweepAction::Keep),
            ("a-b-x", true, SweepAction::Keep),
            ("x-", true, SweepAction::Keep),
        ];
        for (name, is_dir, expected) in cases {
            assert_eq!(sweep_action(name, is_dir, &meta), expected, "{name}");
        }
    }
}
