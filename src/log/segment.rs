//! One segment of a partition log: a `.log` file of batches and its two indexes.
//!
//! Owned by the shard that owns the partition. The in-memory part (sizes, offsets, indexes,
//! timestamps) is updated synchronously when a batch is staged; the files are written later by
//! the group commit, so `size`/`next_offset` run ahead of `written` (a [`SegmentMark`] of what
//! the files hold). A failed write restores the segment to `written`.
//! Invariants: written.size ≤ size; base_offset ≤ written.next_offset ≤ next_offset; index
//! positions < size.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::offset_index::OffsetIndex;
use super::time_index::TimeIndex;
use crate::model::Offset;
use crate::protocol::record_batch::BatchHeader;
use crate::runtime::{File, FileIo};

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";

/// `00000000000000000042` — Kafka's 20-digit, zero-padded file name stem.
pub fn file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

/// Parses a segment file name (`<20 digits>.log`) back into its base offset.
pub fn parse_log_file_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(LOG_SUFFIX)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The three file paths of a segment.
#[derive(Debug, Clone)]
pub struct SegmentPaths {
    pub log: PathBuf,
    pub index: PathBuf,
    pub time_index: PathBuf,
}

impl SegmentPaths {
    pub fn new(dir: &Path, base_offset: i64) -> Self {
        let stem = file_stem(base_offset);
        SegmentPaths {
            log: dir.join(format!("{stem}{LOG_SUFFIX}")),
            index: dir.join(format!("{stem}{INDEX_SUFFIX}")),
            time_index: dir.join(format!("{stem}{TIME_INDEX_SUFFIX}")),
        }
    }

    /// Deletes the segment's three files.
    pub async fn remove_files(&self) -> std::io::Result<()> {
        crate::runtime::remove_file(&self.log).await?;
        crate::runtime::remove_file(&self.index).await?;
        crate::runtime::remove_file(&self.time_index).await
    }
}

/// Open files of a segment. Shared (Rc) with readers so a read can run while the segment
/// list changes.
pub struct SegmentFiles {
    pub log: File,
    pub index: File,
    pub time_index: File,
}

impl SegmentFiles {
    pub async fn close(self) -> std::io::Result<()> {
        self.log.close().await?;
        self.index.close().await?;
        self.time_index.close().await
    }

    /// Opens (creating if missing) the files; the `.log` as `io` says, the indexes buffered.
    pub async fn open(paths: &SegmentPaths, io: FileIo) -> std::io::Result<SegmentFiles> {
        Ok(SegmentFiles {
            log: File::open(&paths.log, io, true).await?,
            index: File::open_or_create(&paths.index).await?,
            time_index: File::open_or_create(&paths.time_index).await?,
        })
    }
}

/// The in-memory state of a segment at one moment: taken when a write is handed to the group
/// commit, it becomes the segment's `written` state once the write succeeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentMark {
    pub size: u64,
    pub next_offset: Offset,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub bytes_since_index_entry: u64,
    pub index_len: usize,
    pub time_index_len: usize,
}

pub struct Segment {
    pub base_offset: Offset,
    /// Bytes of batches staged into this segment (written or still pending).
    pub size: u64,
    /// One past the last offset staged.
    pub next_offset: Offset,
    /// What the files hold: readers see only this much.
    pub written: SegmentMark,
    pub offset_index: OffsetIndex,
    pub time_index: TimeIndex,
    /// Largest batch max-timestamp in the segment and the last offset of that batch; -1 when
    /// the segment has no timestamped batch.
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    /// Log bytes since the last offset index entry.
    pub bytes_since_index_entry: u64,
    /// When the segment got its first batch (or was loaded): `segment.ms` counts from here.
    pub rolling_base_ms: Option<i64>,
    /// Last time a batch was appended (or the file's mtime on load): retention by time falls
    /// back to it when batches carry no timestamps.
    pub last_modified_ms: i64,
    /// The files, once created. New segments get their files from the group commit.
    pub files: Option<Rc<SegmentFiles>>,
    /// No more appends go here (a newer segment exists). Its files and indexes are synced when
    /// it is sealed.
    pub sealed: bool,
    /// The group commit has synced this sealed segment's files.
    pub seal_synced: bool,
    /// Write-back has been started for the `.log` bytes below this position.
    pub writeback_from: u64,
    /// How the `.log` file is written (its files are opened so).
    pub io: FileIo,
    /// Direct files: the staged bytes from the last alignment boundary to `size`, which the
    /// next write repeats at its start (it must begin on the boundary). Valid whenever no
    /// staged write of this segment is pending; empty for buffered files.
    pub tail: Vec<u8>,
    /// The same for `written.size`, restored after a failed write.
    pub written_tail: Vec<u8>,
}

impl Segment {
    pub fn new(base_offset: Offset, now_ms: i64, io: FileIo) -> Segment {
        Segment {
            base_offset,
            size: 0,
            next_offset: base_offset,
            written: SegmentMark {
                size: 0,
                next_offset: base_offset,
                max_timestamp: -1,
                offset_of_max_timestamp: -1,
                bytes_since_index_entry: 0,
                index_len: 0,
                time_index_len: 0,
            },
            offset_index: OffsetIndex::new(),
            time_index: TimeIndex::new(),
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            bytes_since_index_entry: 0,
            rolling_base_ms: None,
            last_modified_ms: now_ms,
            files: None,
            sealed: false,
            seal_synced: false,
            writeback_from: 0,
            io,
            tail: Vec::new(),
            written_tail: Vec::new(),
        }
    }

    /// Loads `tail` and `written_tail` from the file (after an open or a truncation, when
    /// everything staged is written): a direct write must repeat them.
    pub async fn load_tail(&mut self) -> std::io::Result<()> {
        let Some(files) = &self.files else {
            return Ok(());
        };
        if self.io != FileIo::Direct {
            return Ok(());
        }
        let from = crate::runtime::write_buffer::align_down(self.written.size);
        let len = (self.written.size - from) as usize;
        let tail = files.log.read_at(from, len).await?;
        if tail.len() != len {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the segment file ends before its last block ({} of {len} bytes at {from})",
                    tail.len()
                ),
            ));
        }
        self.written_tail = tail.clone();
        self.tail = tail;
        Ok(())
    }

    /// The segment's current (staged) state.
    pub fn mark(&self) -> SegmentMark {
        SegmentMark {
            size: self.size,
            next_offset: self.next_offset,
            max_timestamp: self.max_timestamp,
            offset_of_max_timestamp: self.offset_of_max_timestamp,
            bytes_since_index_entry: self.bytes_since_index_entry,
            index_len: self.offset_index.len(),
            time_index_len: self.time_index.len(),
        }
    }

    /// Everything staged is now in the files (used after loading from disk).
    pub fn mark_all_written(&mut self) {
        self.written = self.mark();
    }

    /// Drops staged state that never reached the files.
    pub fn restore_written(&mut self) {
        let w = self.written;
        self.size = w.size;
        self.next_offset = w.next_offset;
        self.max_timestamp = w.max_timestamp;
        self.offset_of_max_timestamp = w.offset_of_max_timestamp;
        self.bytes_since_index_entry = w.bytes_since_index_entry;
        self.offset_index.truncate_entries(w.index_len);
        self.time_index.truncate_entries(w.time_index_len);
        self.tail = self.written_tail.clone();
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Offset relative to the base, as stored in the indexes. Callers keep offsets within
    /// u32 range of the base (the log rolls before that overflows).
    pub fn relative(&self, offset: Offset) -> u32 {
        (offset.0 - self.base_offset.0).clamp(0, i64::from(u32::MAX)) as u32
    }

    /// The offset an index entry stands for: entries store it relative to the base.
    pub fn absolute(&self, relative_offset: u32) -> Offset {
        Offset(self.base_offset.0 + i64::from(relative_offset))
    }

    /// Records a batch placed at `position` (its header already carries its final offsets):
    /// advances sizes and offsets, adds index entries every `index_interval` bytes.
    pub fn record_batch(&mut self, position: u64, header: &BatchHeader, index_interval: u32) {
        let len = header.total_len() as u64;
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.last_offset();
        }
        if self.bytes_since_index_entry > u64::from(index_interval) {
            let rel = self.relative(Offset(header.last_offset()));
            if self.offset_index.append(rel, position as u32) {
                let (ts, ts_offset) = (self.max_timestamp, self.offset_of_max_timestamp);
                if ts >= 0 {
                    self.time_index
                        .maybe_append(ts, self.relative(Offset(ts_offset)));
                }
            }
            self.bytes_since_index_entry = 0;
        }
        self.bytes_since_index_entry += len;
        self.size = self.size.max(position + len);
        self.next_offset = Offset(header.next_offset());
    }

    /// Adds the time index entry Kafka writes when a segment stops being active, so that the
    /// segment's largest timestamp is in its time index.
    pub fn seal(&mut self) {
        self.sealed = true;
        if self.max_timestamp >= 0 {
            let rel = self.relative(Offset(self.offset_of_max_timestamp));
            self.time_index.maybe_append(self.max_timestamp, rel);
        }
    }

    /// The timestamp retention compares with `retention.ms`.
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            self.max_timestamp
        } else {
            self.last_modified_ms
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip() {
        assert_eq!(file_stem(42), "00000000000000000042");
        assert_eq!(parse_log_file_name("00000000000000000042.log"), Some(42));
        assert_eq!(parse_log_file_name("00000000000000000042.index"), None);
        assert_eq!(parse_log_file_name("42.log"), None);
        assert_eq!(parse_log_file_name("0000000000000000004x.log"), None);
        let p = SegmentPaths::new(Path::new("/d"), 7);
        assert_eq!(
            p.time_index,
            PathBuf::from("/d/00000000000000000007.timeindex")
        );
    }
}
