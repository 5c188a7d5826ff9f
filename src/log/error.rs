//! Errors of the partition log.

use std::io;
use std::path::PathBuf;

use crate::protocol::record_batch::BatchError;

/// Why a log operation failed. Each variant maps to one Kafka error code at the protocol layer.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The batch failed validation (CRC, length, magic, counts): Kafka's CORRUPT_MESSAGE or
    /// INVALID_RECORD. Nothing was written.
    #[error("invalid record batch at byte {position} of the request: {source}")]
    InvalidBatch {
        position: usize,
        #[source]
        source: BatchError,
    },
    /// The request held no batch at all.
    #[error("no record batch in the request")]
    EmptyAppend,
    /// A batch is larger than `max.message.bytes`: Kafka's MESSAGE_TOO_LARGE.
    #[error("record batch of {size} bytes is larger than max.message.bytes ({max})")]
    BatchTooLarge { size: usize, max: usize },
    /// The requested offset is outside [log start, log end]: OFFSET_OUT_OF_RANGE.
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    /// The device is full. The append was not written; the log is unchanged and appends work
    /// again once space is freed. KAFKA_STORAGE_ERROR on the wire.
    #[error("no space left on the device holding {dir}: {source}")]
    DiskFull {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Any other I/O failure; the log rolled back to its last good state. KAFKA_STORAGE_ERROR.
    #[error("I/O error in {dir} while {during}: {source}")]
    Io {
        dir: PathBuf,
        during: &'static str,
        #[source]
        source: io::Error,
    },
    /// The log is offline: an fsync failed (the kernel may have dropped the unsynced pages,
    /// so no later fsync can vouch for them) or a write failed for a reason other than a full
    /// disk. Nothing is read, written or checkpointed until a restart recovers the log from
    /// what is durable. KAFKA_STORAGE_ERROR.
    #[error("the log in {dir} is offline after a storage failure: {reason}")]
    Offline { dir: PathBuf, reason: String },
    /// An fsync failed. Never retried: after a failed fsync Linux may have marked the dirty
    /// pages clean, so a later successful one would vouch for data that is gone. The log goes
    /// offline. KAFKA_STORAGE_ERROR.
    #[error("fsync failed in {dir} while {during}: {source}")]
    SyncFailed {
        dir: PathBuf,
        during: &'static str,
        #[source]
        source: io::Error,
    },
    /// The log has been closed (shutdown in progress).
    #[error("the log in {0} is closed")]
    Closed(PathBuf),
    /// An append was staged while truncation or close held the log (the caller did not wait
    /// with `Log::wait_appendable`, or awaited something in between).
    #[error("the log in {0} is being truncated or closed")]
    Busy(PathBuf),
    /// A segment holds bytes that are not a batch where the read needs one (damaged on disk
    /// after it was trusted at load): CORRUPT_MESSAGE for the partition; the read stops.
    #[error("corrupt data in {dir}, segment {segment_base}, byte {position}, reading offset {offset}: {reason}")]
    CorruptSegment {
        dir: PathBuf,
        segment_base: i64,
        position: u64,
        offset: i64,
        reason: String,
    },
    /// A file in the log directory cannot be made sense of and cannot be repaired.
    #[error("cannot load {path}: {reason}")]
    Unrecoverable { path: PathBuf, reason: String },
    /// A follower's fetched batches do not continue its log (the leader answered from
    /// another offset): nothing is appended; the follower fetches again from its end.
    #[error("replicated batches start at offset {found}, the log ends at {expected}")]
    ReplicaGap { expected: i64, found: i64 },
}

impl LogError {
    /// Classifies an I/O error: ENOSPC and EDQUOT become `DiskFull`.
    pub fn from_io(dir: &std::path::Path, during: &'static str, source: io::Error) -> LogError {
        let full = source.kind() == io::ErrorKind::StorageFull
            || matches!(
                source.raw_os_error(),
                Some(libc::ENOSPC) | Some(libc::EDQUOT)
            );
        if full {
            LogError::DiskFull {
                dir: dir.to_path_buf(),
                source,
            }
        } else {
            LogError::Io {
                dir: dir.to_path_buf(),
                during,
                source,
            }
        }
    }

    /// Whether the log must go offline after this failure of a write path: every failure
    /// except a full disk during a write (rolled back and retried once space returns). An
    /// fsync that fails with ENOSPC is fatal too: the pages it covered may be gone.
    pub fn takes_log_offline(&self) -> bool {
        matches!(self, LogError::Io { .. } | LogError::SyncFailed { .. })
    }

    /// An fsync (of a file or a directory) failed, whatever the errno.
    pub fn from_sync(dir: &std::path::Path, during: &'static str, source: io::Error) -> LogError {
        LogError::SyncFailed {
            dir: dir.to_path_buf(),
            during,
            source,
        }
    }

    /// A copy for handing the same failure to several waiters (io::Error is not Clone).
    pub fn duplicate(&self) -> LogError {
        let copy_io = |e: &io::Error| io::Error::new(e.kind(), e.to_string());
        match self {
            LogError::InvalidBatch { position, source } => LogError::InvalidBatch {
                position: *position,
                source: source.clone(),
            },
            LogError::EmptyAppend => LogError::EmptyAppend,
            LogError::CorruptSegment {
                dir,
                segment_base,
                position,
                offset,
                reason,
            } => LogError::CorruptSegment {
                dir: dir.clone(),
                segment_base: *segment_base,
                position: *position,
                offset: *offset,
                reason: reason.clone(),
            },
            LogError::BatchTooLarge { size, max } => LogError::BatchTooLarge {
                size: *size,
                max: *max,
            },
            LogError::OffsetOutOfRange {
                offset,
                log_start,
                log_end,
            } => LogError::OffsetOutOfRange {
                offset: *offset,
                log_start: *log_start,
                log_end: *log_end,
            },
            LogError::DiskFull { dir, source } => LogError::DiskFull {
                dir: dir.clone(),
                source: copy_io(source),
            },
            LogError::Io {
                dir,
                during,
                source,
            } => LogError::Io {
                dir: dir.clone(),
                during,
                source: copy_io(source),
            },
            LogError::SyncFailed {
                dir,
                during,
                source,
            } => LogError::SyncFailed {
                dir: dir.clone(),
                during,
                source: copy_io(source),
            },
            LogError::Offline { dir, reason } => LogError::Offline {
                dir: dir.clone(),
                reason: reason.clone(),
            },
            LogError::Closed(dir) => LogError::Closed(dir.clone()),
            LogError::Busy(dir) => LogError::Busy(dir.clone()),
            LogError::ReplicaGap { expected, found } => LogError::ReplicaGap {
                expected: *expected,
                found: *found,
            },
            LogError::Unrecoverable { path, reason } => LogError::Unrecoverable {
                path: path.clone(),
                reason: reason.clone(),
            },
        }
    }
}
