//! The leader-epoch cache, Kafka's `LeaderEpochFileCache`: for every leader epoch that wrote to
//! a partition, the offset of its first batch.
//!
//! It answers the questions replication asks about the log's history: where did epoch N end
//! (OffsetForLeaderEpoch, fetch divergence), and which epoch wrote offset X. A follower that
//! truncates by these answers instead of by the high watermark keeps every acknowledged write
//! (KIP-101, KIP-279).
//!
//! Invariant: entries ascend strictly in both epoch and start offset. Every mutation keeps it,
//! so lookups are binary searches and the file never holds a history that goes backwards.
//!
//! On disk: `leader-epoch-checkpoint` in the partition directory, in Kafka's text format so a
//! partition directory reads the same to both. The cache itself does no I/O; the caller writes
//! the file whenever a mutation reports a change ([`write_checkpoint`]).

use std::io;
use std::path::Path;

use crate::model::{LeaderEpoch, Offset};
use crate::runtime::durable_file;

pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";

/// Kafka's `UNDEFINED_EPOCH`: the epoch an OffsetForLeaderEpoch response carries when the
/// requested epoch has no answer.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`, the end offset paired with [`UNDEFINED_EPOCH`].
pub const UNDEFINED_EPOCH_OFFSET: Offset = Offset(-1);

/// The only checkpoint version Kafka has written.
const CHECKPOINT_VERSION: &str = "0";

/// One epoch's start: the offset of the first batch the leader of `epoch` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: LeaderEpoch,
    pub start_offset: Offset,
}

/// Why a `leader-epoch-checkpoint` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum EpochCheckpointError {
    #[error("leader-epoch-checkpoint: unsupported version line {0:?} (expected \"0\")")]
    Version(String),
    #[error("leader-epoch-checkpoint: the entry count line is missing")]
    MissingCount,
    #[error("leader-epoch-checkpoint: bad entry count {0:?}")]
    Count(String),
    #[error(
        "leader-epoch-checkpoint line {line}: expected \"<epoch> <start offset>\", got {text:?}"
    )]
    Line { line: usize, text: String },
    #[error(
        "leader-epoch-checkpoint: the header announces {expected} entries, the file has {found}"
    )]
    CountMismatch { expected: usize, found: usize },
    #[error("leader-epoch-checkpoint: {0}")]
    Io(#[from] io::Error),
}

/// The epochs of one partition's log, oldest first (see the module doc for the invariant).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    pub fn new() -> Self {
        LeaderEpochCache::default()
    }

    /// Builds a cache by assigning `entries` in order, as Kafka loads its checkpoint: an entry
    /// that contradicts a later one is dropped, so what remains is monotonic.
    pub fn from_entries(entries: Vec<EpochEntry>) -> Self {
        let mut cache = LeaderEpochCache::new();
        for entry in entries {
            cache.assign(entry.epoch, entry.start_offset);
        }
        cache
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Records that `epoch` starts at `start_offset`, as Kafka's `assign` does.
    ///
    /// - The latest epoch again, at or after its start: nothing changes (every batch of an
    ///   epoch is offered; only its first one counts).
    /// - Otherwise the new entry becomes the latest, and every entry at its end that it would
    ///   not strictly follow (epoch >= new epoch, or start >= new start) is removed first:
    ///   that history was truncated away (Kafka's "remove conflicting entries"). This includes
    ///   an older epoch or an earlier start than the latest entry, which Kafka does not ignore.
    /// - A negative epoch or offset (Kafka's "undefined", batches of old formats) is ignored;
    ///   Kafka throws there, the caller should never pass one.
    ///
    /// Returns whether the cache changed, i.e. whether the checkpoint must be rewritten.
    pub fn assign(&mut self, epoch: LeaderEpoch, start_offset: Offset) -> bool {
        if epoch.0 < 0 || start_offset.0 < 0 {
            return false;
        }
        if let Some(latest) = self.latest_entry() {
            if latest.epoch == epoch && latest.start_offset <= start_offset {
                return false;
            }
        }
        let mut removed = Vec::new();
        while let Some(last) = self.entries.last().copied() {
            if last.epoch < epoch && last.start_offset < start_offset {
                break;
            }
            removed.push(last);
            self.entries.pop();
        }
        // One removed entry at the same start is the expected case of a leader elected twice
        // without writing; anything else dropped history, which is worth a line in the log.
        if removed.len() > 1
            || removed
                .first()
                .is_some_and(|e| e.start_offset != start_offset)
        {
            tracing::warn!(
                epoch = epoch.0,
                start_offset = start_offset.0,
                ?removed,
                "new leader epoch entry removed conflicting entries from the epoch cache"
            );
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.check_invariant();
        true
    }

    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.latest_entry().map(|e| e.epoch)
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The epoch before the latest one.
    pub fn previous_epoch(&self) -> Option<LeaderEpoch> {
        let n = self.entries.len();
        n.checked_sub(2).map(|i| self.entries[i].epoch)
    }

    /// The start offset of `epoch` if present.
    pub fn epoch_start(&self, epoch: LeaderEpoch) -> Option<Offset> {
        self.entries
            .binary_search_by_key(&epoch, |e| e.epoch)
            .ok()
            .map(|i| self.entries[i].start_offset)
    }

    /// Kafka's `endOffsetFor`: `(epoch, end offset)` for an OffsetForLeaderEpoch request, the
    /// pair the response carries as `leader_epoch` and `end_offset`.
    ///
    /// - `requested` is the latest epoch: `(latest, log_end_offset)` (it is still being written).
    /// - `requested` lies between two entries, or is one that is not the latest: the largest
    ///   epoch <= `requested`, ending where the next larger epoch starts.
    /// - `requested` is below the first epoch: `(requested, first start offset)`. The history
    ///   before was deleted (retention); the follower replicates from the leader's start.
    /// - `requested` above the latest, an empty cache, or `requested` undefined (negative;
    ///   Kafka tests for -1 only): `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`, so the
    ///   follower falls back to other means.
    pub fn end_offset_for(&self, requested: LeaderEpoch, log_end_offset: Offset) -> (i32, Offset) {
        const UNDEFINED: (i32, Offset) = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        if requested.0 < 0 {
            return UNDEFINED;
        }
        if self.latest_epoch() == Some(requested) {
            return (requested.0, log_end_offset);
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(next) = self.entries.get(higher) else {
            return UNDEFINED;
        };
        match higher.checked_sub(1) {
            None => (requested.0, next.start_offset),
            Some(floor) => (self.entries[floor].epoch.0, next.start_offset),
        }
    }

    /// The epoch of the batch holding `offset` (largest entry with start <= offset), if any.
    pub fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        let after = self.entries.partition_point(|e| e.start_offset <= offset);
        after.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// After a truncation of the log to `end_offset`: removes the entries starting at or after
    /// it, whose batches are gone. A negative offset (undefined) removes nothing.
    /// Returns whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: Offset) -> bool {
        if end_offset.0 < 0 {
            return false;
        }
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// After the log start moved to `start_offset` (retention, DeleteRecords): drops the
    /// entries wholly below it and moves the start of the entry covering it up to
    /// `start_offset`, so the first entry never names an offset the log no longer has
    /// (Kafka's `truncateFromStart`; an entry starting exactly there stays as it is).
    /// Returns whether the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> bool {
        let at_or_below = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        let Some(covering) = at_or_below.checked_sub(1) else {
            return false;
        };
        let changed = covering > 0 || self.entries[covering].start_offset != start_offset;
        self.entries.drain(..covering);
        self.entries[0].start_offset = start_offset;
        self.check_invariant();
        changed
    }

    /// Kafka's checkpoint text, version 0: `0`, the entry count, then `<epoch> <start offset>`
    /// per entry, each on its own line.
    pub fn encode(&self) -> String {
        let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", self.entries.len());
        for e in &self.entries {
            text.push_str(&format!("{} {}\n", e.epoch.0, e.start_offset.0));
        }
        text
    }

    /// Parses [`encode`](Self::encode)'s text. Strict about the version, the count and each
    /// line's shape (two unsigned decimals, one space); an empty text is an empty cache, as
    /// Kafka creates the file empty. Entries are loaded as [`from_entries`](Self::from_entries)
    /// does, so a file that contradicts itself comes back monotonic.
    pub fn decode(text: &str) -> Result<LeaderEpochCache, EpochCheckpointError> {
        parse(text).map(LeaderEpochCache::from_entries)
    }

    /// The invariant, checked after mutations in debug builds.
    fn check_invariant(&self) {
        debug_assert!(
            self.entries
                .windows(2)
                .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset),
            "epoch cache not strictly ascending: {:?}",
            self.entries
        );
    }
}

/// The entries a checkpoint text lists, in file order.
fn parse(text: &str) -> Result<Vec<EpochEntry>, EpochCheckpointError> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let mut lines = text.lines();
    let version = lines.next().unwrap_or_default();
    if version != CHECKPOINT_VERSION {
        return Err(EpochCheckpointError::Version(version.to_string()));
    }
    let count_line = lines.next().ok_or(EpochCheckpointError::MissingCount)?;
    let expected: usize =
        decimal(count_line).ok_or_else(|| EpochCheckpointError::Count(count_line.to_string()))?;
    let mut entries = Vec::new();
    // Line numbers count from 1; entries start on the third line.
    for (line, text) in (3..).zip(lines) {
        let entry = text
            .split_once(' ')
            .and_then(|(epoch, offset)| {
                Some(EpochEntry {
                    epoch: LeaderEpoch(decimal(epoch)?),
                    start_offset: Offset(decimal(offset)?),
                })
            })
            .ok_or_else(|| EpochCheckpointError::Line {
                line,
                text: text.to_string(),
            })?;
        entries.push(entry);
    }
    if entries.len() != expected {
        return Err(EpochCheckpointError::CountMismatch {
            expected,
            found: entries.len(),
        });
    }
    Ok(entries)
}

/// An unsigned decimal with no sign, space or other decoration (what `encode` writes).
fn decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Writes the checkpoint into `dir` durably (temporary file, fdatasync, rename, directory
/// fsync), so a crash leaves the old or the new history, never a torn one.
pub async fn write_checkpoint(dir: &Path, cache: &LeaderEpochCache) -> io::Result<()> {
    let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
    durable_file::replace(&path, cache.encode().into_bytes()).await
}

/// Reads the checkpoint in `dir`; a missing file is an empty cache (a new partition, or one
/// whose leaders never wrote).
pub async fn read_checkpoint(dir: &Path) -> Result<LeaderEpochCache, EpochCheckpointError> {
    let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
    let bytes = match durable_file::read_all(&path).await {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(LeaderEpochCache::new()),
        Err(e) => return Err(e.into()),
    };
    // Invalid UTF-8 becomes replacement characters, which then fail as a malformed line.
    let entries = parse(&String::from_utf8_lossy(&bytes))?;
    let listed = entries.len();
    let cache = LeaderEpochCache::from_entries(entries);
    if cache.entries().len() != listed {
        tracing::warn!(
            path = %path.display(),
            listed,
            kept = cache.entries().len(),
            "leader-epoch-checkpoint is not monotonic; kept the entries a replay keeps"
        );
    }
    Ok(cache)
}

#[cfg(test)]
#[path = "epoch_cache_tests.rs"]
mod tests;
