//! The log's checkpoint (recovery point and log start offset) and its clean-shutdown marker.
//!
//! `recovery-point-offset-checkpoint` in the partition directory: everything below the
//! recovery point was fsynced (log and the indexes of sealed segments), so recovery after a
//! crash scans only from the segment holding it. Kafka keeps one such file per data directory;
//! we keep one per partition because a partition is owned by one shard and shards share
//! nothing. The file is replaced atomically (write, fsync, rename, fsync directory).
//!
//! It also carries the partition's last known high watermark in cluster mode (Kafka's
//! `replication-offset-checkpoint`, also one file per data directory there), so a restarted
//! replica does not start from its log start.
//!
//! `.kafka_cleanshutdown`: written last by a clean close, removed first by open. When it is
//! present at open, nothing is scanned but the short tail after the last index entry.

use std::io;
use std::path::{Path, PathBuf};

use crate::runtime::{self, File};

pub const CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
const FORMAT_LINE: &str = "ringbroker-log-checkpoint 0";
const TRUNCATE_TO: &str = "truncate-to";
const HIGH_WATERMARK: &str = "high-watermark";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    pub recovery_point: i64,
    pub log_start_offset: i64,
    /// A truncation to this offset is under way: made durable before any file is cut, so an
    /// open after a crash finishes it (a half-done truncation would otherwise come back as a
    /// longer log). Absent in checkpoints written before truncation was crash-safe.
    pub truncate_to: Option<i64>,
    /// The replicated partition's HW when written (everything below it was committed); the
    /// reader clamps it to the log it opened. Absent on a single node and in older files.
    pub high_watermark: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed checkpoint: {0}")]
pub struct CheckpointFormatError(String);

impl Checkpoint {
    pub fn encode(&self) -> String {
        let mut text = format!(
            "{FORMAT_LINE}\nrecovery-point {}\nlog-start-offset {}\n",
            self.recovery_point, self.log_start_offset
        );
        if let Some(offset) = self.truncate_to {
            text.push_str(&format!("{TRUNCATE_TO} {offset}\n"));
        }
        if let Some(hw) = self.high_watermark {
            text.push_str(&format!("{HIGH_WATERMARK} {hw}\n"));
        }
        text
    }

    pub fn decode(text: &str) -> Result<Checkpoint, CheckpointFormatError> {
        let mut lines = text.lines();
        if lines.next() != Some(FORMAT_LINE) {
            return Err(CheckpointFormatError("unknown format line".into()));
        }
        let mut field = |name: &str| -> Result<i64, CheckpointFormatError> {
            let line = lines
                .next()
                .ok_or_else(|| CheckpointFormatError(format!("missing {name}")))?;
            let value = line
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(' '))
                .ok_or_else(|| CheckpointFormatError(format!("expected {name}, got {line:?}")))?;
            value
                .parse::<i64>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| CheckpointFormatError(format!("bad {name} value {value:?}")))
        };
        let recovery_point = field("recovery-point")?;
        let log_start_offset = field("log-start-offset")?;
        // Optional fields after those, each at most once.
        let (mut truncate_to, mut high_watermark) = (None, None);
        for line in lines {
            let (name, value) = line
                .split_once(' ')
                .ok_or_else(|| CheckpointFormatError(format!("unexpected line {line:?}")))?;
            let value = value
                .parse::<i64>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| CheckpointFormatError(format!("bad {name} value {value:?}")))?;
            let slot = match name {
                TRUNCATE_TO => &mut truncate_to,
                HIGH_WATERMARK => &mut high_watermark,
                _ => return Err(CheckpointFormatError(format!("unexpected line {line:?}"))),
            };
            if slot.replace(value).is_some() {
                return Err(CheckpointFormatError(format!("{name} twice")));
            }
        }
        Ok(Checkpoint {
            recovery_point,
            log_start_offset,
            truncate_to,
            high_watermark,
        })
    }
}

/// Reads the checkpoint; `Ok(None)` when there is none or it cannot be parsed (then recovery
/// scans everything, which is always safe).
pub async fn read_checkpoint(dir: &Path) -> io::Result<Option<Checkpoint>> {
    let path = dir.join(CHECKPOINT_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let file = File::open_existing(&path).await?;
    let size = file.size().await?;
    let bytes = file.read_at(0, size.min(4096) as usize).await?;
    file.close().await?;
    let text = String::from_utf8_lossy(&bytes);
    match Checkpoint::decode(&text) {
        Ok(c) => Ok(Some(c)),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable checkpoint; the whole log will be scanned");
            Ok(None)
        }
    }
}

/// Replaces the checkpoint atomically and durably.
pub async fn write_checkpoint(dir: &Path, checkpoint: Checkpoint) -> io::Result<()> {
    let tmp = dir.join(format!("{CHECKPOINT_FILE}.tmp"));
    let file = File::open_or_create(&tmp).await?;
    file.truncate(0).await?;
    file.write_all_at(checkpoint.encode().into_bytes(), 0)
        .await?;
    file.fdatasync().await?;
    file.close().await?;
    runtime::rename(&tmp, &dir.join(CHECKPOINT_FILE)).await?;
    runtime::sync_dir(dir).await
}

pub fn clean_shutdown_path(dir: &Path) -> PathBuf {
    dir.join(CLEAN_SHUTDOWN_FILE)
}

pub async fn write_clean_shutdown(dir: &Path) -> io::Result<()> {
    let file = File::open_or_create(&clean_shutdown_path(dir)).await?;
    file.fdatasync().await?;
    file.close().await?;
    runtime::sync_dir(dir).await
}

/// Removes the marker durably, so that a crash from now on is seen as unclean.
pub async fn clear_clean_shutdown(dir: &Path) -> io::Result<()> {
    runtime::remove_file(&clean_shutdown_path(dir)).await?;
    runtime::sync_dir(dir).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode() {
        let c = Checkpoint {
            recovery_point: 1234,
            log_start_offset: 17,
            truncate_to: None,
            high_watermark: None,
        };
        assert_eq!(Checkpoint::decode(&c.encode()), Ok(c));
        let intent = Checkpoint {
            truncate_to: Some(99),
            ..c
        };
        assert_eq!(Checkpoint::decode(&intent.encode()), Ok(intent));
        let replicated = Checkpoint {
            high_watermark: Some(1200),
            ..intent
        };
        assert_eq!(Checkpoint::decode(&replicated.encode()), Ok(replicated));
        // Either order; each field once.
        let base = "ringbroker-log-checkpoint 0\nrecovery-point 5\nlog-start-offset 0\n";
        let swapped = Checkpoint::decode(&format!("{base}high-watermark 4\ntruncate-to 3\n"));
        assert_eq!(
            swapped.map(|c| (c.truncate_to, c.high_watermark)),
            Ok((Some(3), Some(4)))
        );
        assert!(
            Checkpoint::decode(&format!("{base}high-watermark 4\nhigh-watermark 4\n")).is_err()
        );
        assert!(Checkpoint::decode(&format!("{base}high-watermark -1\n")).is_err());
        assert!(Checkpoint::decode(&format!("{}junk 1\n", c.encode())).is_err());
        assert!(Checkpoint::decode("").is_err());
        assert!(Checkpoint::decode("ringbroker-log-checkpoint 0\nrecovery-point x\n").is_err());
        assert!(Checkpoint::decode(
            "ringbroker-log-checkpoint 0\nrecovery-point -5\nlog-start-offset 0\n"
        )
        .is_err());
    }
}
