//! The state a partition log shares between its roles (append staging, group commit, reads,
//! truncation, checkpoints): the segments, the writes in flight and their waiters, the
//! counters. `partition_log` is the log's API over it; `commit` drives its writes.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use super::checkpoint::{self, Checkpoint};
use super::config::LogConfig;
use super::error::LogError;
use super::recovery::RecoveryReport;
use super::segment::Segment;
use super::tail_cache::SharedTailCache;
use crate::model::Offset;
use crate::runtime;
use crate::util::exclusive::Exclusive;
use crate::util::local_oneshot;
use crate::util::notify::Notify;

/// Counters of the log's write path (for metrics, and to see group commit at work).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogStats {
    /// Append calls that succeeded.
    pub appends: u64,
    /// Group-commit flights (each: one write per segment touched).
    pub flights: u64,
    /// fdatasync calls on segment files.
    pub fsyncs: u64,
    /// Flights that failed and were rolled back.
    pub failed_flights: u64,
}

pub(super) struct PendingWrite {
    pub segment_base: Offset,
    /// File position of the first byte of `data` (for a direct write: an alignment boundary).
    pub position: u64,
    pub data: runtime::WriteBuffer,
}

pub(super) struct AppendWaiter {
    pub durable: bool,
    pub done: local_oneshot::Sender<Result<(), LogError>>,
    /// When the batch was staged (the start of the `append` stage); `None` for a flush.
    pub staged_at: Option<std::time::Instant>,
}

pub(super) struct LogState {
    pub config: LogConfig,
    /// Oldest first; the last is the active segment. Never empty.
    pub segments: Vec<Segment>,
    pub log_start_offset: Offset,
    pub recovery_point: Offset,
    pub written_end: Offset,
    /// The replicated partition's HW as last noted (`Log::note_high_watermark`), for the
    /// checkpoint; `None` on a single node.
    pub high_watermark: Option<Offset>,
    /// A truncation under way (`truncate.rs`): in the state, not only in the one checkpoint
    /// the truncation writes, so that a checkpoint written meanwhile (housekeeping,
    /// retention) keeps the intent and the lowered recovery point.
    pub truncate_intent: Option<Offset>,
    pub unflushed_records: u64,
    pub oldest_unflushed_ms: Option<i64>,
    /// Staged bytes not yet taken by the committer, in log order.
    pub pending: Vec<PendingWrite>,
    pub waiters: Vec<AppendWaiter>,
    /// A committer task is running.
    pub committing: bool,
    /// Truncation or close holds the log: appends wait, the committer does not start.
    pub exclusive: bool,
    pub idle_waiters: Vec<local_oneshot::Sender<()>>,
    pub closed: bool,
    /// Why the log went offline (a failed fsync, a write error other than a full disk).
    pub offline: Option<String>,
    pub stats: LogStats,
}

impl LogState {
    pub fn active(&self) -> &Segment {
        // The segment list is never empty (open creates one; truncation keeps one).
        &self.segments[self.segments.len() - 1]
    }

    pub(super) fn active_mut(&mut self) -> &mut Segment {
        let last = self.segments.len() - 1;
        &mut self.segments[last]
    }

    pub fn next_offset(&self) -> Offset {
        self.active().next_offset
    }

    pub fn segment_mut(&mut self, base: Offset) -> Option<&mut Segment> {
        self.segments
            .binary_search_by_key(&base, |s| s.base_offset)
            .ok()
            .map(|i| &mut self.segments[i])
    }

    /// Index of the segment that holds `offset` (the last one whose base is ≤ it).
    pub(super) fn segment_index_for(&self, offset: Offset) -> usize {
        self.segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1)
    }

    /// Fails with `Offline` once a storage failure took the log offline.
    pub fn check_online(&self, dir: &Path) -> Result<(), LogError> {
        match &self.offline {
            Some(reason) => Err(LogError::Offline {
                dir: dir.to_path_buf(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    pub fn wake_idle(&mut self) {
        for w in self.idle_waiters.drain(..) {
            w.send(());
        }
    }

    pub(super) fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    pub(super) fn checkpoint(&self) -> Checkpoint {
        // The checkpoint mirrors its file's lines: bare numbers, as its format tests have them.
        Checkpoint {
            recovery_point: self.recovery_point.0,
            log_start_offset: self.log_start_offset.0,
            truncate_to: self.truncate_intent.map(|o| o.0),
            high_watermark: self.high_watermark.map(|o| o.0),
        }
    }
}

pub(super) struct LogInner {
    pub dir: PathBuf,
    pub state: RefCell<LogState>,
    pub clock: fn() -> i64,
    pub report: RecoveryReport,
    /// One checkpoint writer at a time: they share the temporary file, and each reads the
    /// state inside, so the file never goes back to older values.
    pub(super) checkpoint_writer: Exclusive,
    /// Reads under way on the files (a truncation waits for them before it cuts).
    pub readers: ReaderCount,
    /// The last written bytes, for reads near the end (direct segment files only).
    pub tail_cache: SharedTailCache,
}

/// Counts reads that are between choosing their byte range and reading it, so that a
/// truncation, having fenced new reads, can wait for those before cutting the files.
#[derive(Default)]
pub struct ReaderCount {
    active: std::cell::Cell<usize>,
    pub(super) drained: Notify,
}

impl ReaderCount {
    pub fn enter(&self) -> ReadGuard<'_> {
        self.active.set(self.active.get() + 1);
        ReadGuard { count: self }
    }

    /// Resolves once no read is under way.
    pub async fn drained(&self) {
        while self.active.get() > 0 {
            self.drained.notified().await;
        }
    }
}

/// A read in progress; leaving (even by cancellation) wakes a waiting truncation.
pub struct ReadGuard<'a> {
    count: &'a ReaderCount,
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        let left = self.count.active.get().saturating_sub(1);
        self.count.active.set(left);
        if left == 0 {
            self.count.drained.notify();
        }
    }
}

impl LogInner {
    /// Writes the checkpoint as the state says it now (adjusted by `adjust`, for a change that
    /// must be durable before memory shows it).
    pub async fn write_checkpoint(
        &self,
        adjust: impl FnOnce(&mut Checkpoint),
    ) -> Result<(), LogError> {
        let _writer = self.checkpoint_writer.enter().await;
        let mut cp = self.state.borrow().checkpoint();
        adjust(&mut cp);
        checkpoint::write_checkpoint(&self.dir, cp)
            .await
            .map_err(|e| LogError::from_io(&self.dir, "writing the checkpoint", e))
    }

    /// Takes the log offline after `error` (logged loudly, once): appends, reads, flushes and
    /// checkpoints fail with `Offline` from now on, and the recovery point stays where it
    /// was, so that a restart recovers from what is known to be durable.
    pub fn go_offline(&self, error: &LogError) {
        let mut st = self.state.borrow_mut();
        if st.offline.is_some() {
            return;
        }
        tracing::error!(
            dir = %self.dir.display(),
            %error,
            recovery_point = st.recovery_point.0,
            "storage failure: the partition log is offline (KAFKA_STORAGE_ERROR) until the broker restarts and recovers it from what is durable"
        );
        st.offline = Some(error.to_string());
        st.wake_idle();
    }

    /// Runs a write-path step; a failure that is not a full disk takes the log offline.
    pub async fn guard<T>(
        &self,
        step: impl std::future::Future<Output = Result<T, LogError>>,
    ) -> Result<T, LogError> {
        let result = step.await;
        if let Err(e) = &result {
            if e.takes_log_offline() {
                self.go_offline(e);
            }
        }
        result
    }
}
