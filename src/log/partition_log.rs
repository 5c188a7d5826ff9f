//! The partition log: an ordered set of segments with append, read, timestamp lookup, roll,
//! retention, truncation, flush and recovery.
//!
//! Owned by one shard. `Log` is a cheap handle (an `Rc`) so that the connection tasks of that
//! shard and its group-commit task can share it; state lives in a `RefCell` that is never
//! borrowed across an `.await`.
//!
//! Offsets: log start ≤ recovery point ≤ LEO, and log start ≤ written end ≤ LEO, where
//! - log start: the first offset still readable (retention and DeleteRecords move it up);
//! - written end: one past the last offset in the files, what readers may see;
//! - recovery point: offsets below it are fsynced;
//! - LEO (log end offset): the next offset to assign (staged appends included).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::checkpoint::{self, Checkpoint};
use super::commit;
use super::config::LogConfig;
use super::error::LogError;
use super::policy;
use super::recovery::{self, RecoveryReport};
use super::segment::{Segment, SegmentFiles};
use super::tail_cache::{self, SharedTailCache};
use crate::runtime;
use crate::util::exclusive::Exclusive;
use crate::util::local_oneshot;
use crate::util::notify::Notify;

/// How an append should be acknowledged.
#[derive(Debug, Clone, Copy)]
pub struct AppendOptions {
    /// Wait for an fdatasync of the batch (acks=all with a durable flush policy).
    pub durable: bool,
    /// The broker's clock, for LogAppendTime and segment age.
    pub now_ms: i64,
    /// The leader epoch stamped into every batch (`partitionLeaderEpoch`, outside the CRC);
    /// `None` leaves what the producer sent (a single node has no epochs).
    pub leader_epoch: Option<i32>,
}

impl AppendOptions {
    /// Options for an append without a leader epoch.
    pub fn new(durable: bool, now_ms: i64) -> AppendOptions {
        AppendOptions {
            durable,
            now_ms,
            leader_epoch: None,
        }
    }
}

/// The outcome of an append, as a Produce response reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The time stamped on the batches for LogAppendTime logs, else -1.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    pub record_count: u64,
}

/// An append whose offsets are assigned and whose write is under way.
pub struct StagedAppend {
    pub(super) log: Log,
    pub(super) info: AppendInfo,
    pub(super) done: local_oneshot::Receiver<Result<(), LogError>>,
}

impl StagedAppend {
    /// The offsets the batches got (valid only if the write succeeds).
    pub fn info(&self) -> AppendInfo {
        self.info
    }

    /// Waits for the write (and the fsync, if asked for) of the staged batches.
    pub async fn written(self) -> Result<AppendInfo, LogError> {
        match self.done.await {
            Some(Ok(())) => {
                self.log.inner.state.borrow_mut().stats.appends += 1;
                Ok(self.info)
            }
            Some(Err(e)) => Err(e),
            None => Err(LogError::Closed(self.log.inner.dir.clone())),
        }
    }
}

/// A snapshot of the log's offsets and sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogOffsets {
    pub log_start_offset: i64,
    pub recovery_point: i64,
    pub written_end_offset: i64,
    pub log_end_offset: i64,
    pub segments: usize,
    pub size_bytes: u64,
}

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
    pub segment_base: i64,
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
    pub log_start_offset: i64,
    pub recovery_point: i64,
    pub written_end: i64,
    /// The replicated partition's HW as last noted (`Log::note_high_watermark`), for the
    /// checkpoint; `None` on a single node.
    pub high_watermark: Option<i64>,
    /// A truncation under way (`truncate.rs`): in the state, not only in the one checkpoint
    /// the truncation writes, so that a checkpoint written meanwhile (housekeeping,
    /// retention) keeps the intent and the lowered recovery point.
    pub truncate_intent: Option<i64>,
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

    pub fn next_offset(&self) -> i64 {
        self.active().next_offset
    }

    pub fn segment_mut(&mut self, base: i64) -> Option<&mut Segment> {
        self.segments
            .binary_search_by_key(&base, |s| s.base_offset)
            .ok()
            .map(|i| &mut self.segments[i])
    }

    /// Index of the segment that holds `offset` (the last one whose base is ≤ it).
    pub(super) fn segment_index_for(&self, offset: i64) -> usize {
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
        Checkpoint {
            recovery_point: self.recovery_point,
            log_start_offset: self.log_start_offset,
            truncate_to: self.truncate_intent,
            high_watermark: self.high_watermark,
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
    checkpoint_writer: Exclusive,
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
    drained: Notify,
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
            recovery_point = st.recovery_point,
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

/// A partition log. Clone it to share it between the tasks of its shard.
#[derive(Clone)]
pub struct Log {
    pub(super) inner: Rc<LogInner>,
}

impl Log {
    /// Opens (creating if needed) the log in `dir`, recovering from an unclean stop.
    pub async fn open(dir: &Path, config: LogConfig) -> Result<Log, LogError> {
        Self::open_with_clock(dir, config, runtime::now_ms).await
    }

    /// As [`Log::open`], with the clock the group commit uses for `flush.ms`.
    pub async fn open_with_clock(
        dir: &Path,
        config: LogConfig,
        clock: fn() -> i64,
    ) -> Result<Log, LogError> {
        let now = clock();
        let loaded = recovery::load(dir, &config, now).await?;
        let mut segments = loaded.segments;
        let mut checkpoint = loaded.checkpoint;
        let start_hint = checkpoint.map(|c| c.log_start_offset).unwrap_or(0);
        if recovery::remove_segments_below_start(dir, &mut segments, start_hint).await? {
            // Nothing is left to truncate: the log starts over empty at its log start.
            if let Some(c) = checkpoint.as_mut() {
                c.truncate_to = None;
            }
        }
        if segments.is_empty() {
            segments.push(Segment::new(start_hint.max(0), now, config.io));
        }
        if let Some(active) = segments.last_mut() {
            active.load_tail().await.map_err(|e| {
                LogError::from_io(dir, "reading the active segment's last block", e)
            })?;
        }
        let first_base = segments[0].base_offset;
        let leo = segments[segments.len() - 1].next_offset;
        let log_start = start_hint.clamp(first_base, leo);
        let report = loaded.report;
        // Per log: info only when an existing log was not closed cleanly (a broker with
        // thousands of partitions would otherwise log thousands of lines per start; the
        // startup line has the totals). A new partition has no segments yet.
        if report.clean_shutdown || report.segments == 0 {
            tracing::debug!(dir = %dir.display(), segments = report.segments, log_start, log_end = leo, "log loaded");
        } else {
            tracing::info!(
                dir = %dir.display(),
                clean = report.clean_shutdown,
                segments = report.segments,
                scanned_segments = report.scanned_segments,
                scanned_bytes = report.scanned_bytes,
                log_start,
                log_end = leo,
                "log loaded"
            );
        }
        let state = LogState {
            config,
            segments,
            log_start_offset: log_start,
            // Recovery read (and synced) what it scanned; trusted segments were synced before.
            recovery_point: leo,
            written_end: leo,
            truncate_intent: None,
            high_watermark: checkpoint
                .and_then(|c| c.high_watermark)
                .map(|hw| hw.min(leo)),
            unflushed_records: 0,
            oldest_unflushed_ms: None,
            pending: Vec::new(),
            waiters: Vec::new(),
            committing: false,
            exclusive: false,
            idle_waiters: Vec::new(),
            closed: false,
            offline: None,
            stats: LogStats::default(),
        };
        let log = Log {
            inner: Rc::new(LogInner {
                dir: dir.to_path_buf(),
                state: RefCell::new(state),
                clock,
                report,
                checkpoint_writer: Exclusive::new(),
                readers: ReaderCount::default(),
                tail_cache: tail_cache::new_shared(),
            }),
        };
        match checkpoint.and_then(|c| c.truncate_to) {
            // A crash interrupted a truncation: finish it before anyone reads.
            Some(offset) => {
                tracing::info!(dir = %dir.display(), offset, "finishing a truncation interrupted by a crash");
                log.truncate_exclusive(offset).await?;
            }
            None => log.inner.write_checkpoint(|_| {}).await?,
        }
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// What loading found (clean or not, what was scanned or cut).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
    }

    /// Why the log is offline, if it is (see [`LogError::Offline`]).
    pub fn offline_reason(&self) -> Option<String> {
        self.inner.state.borrow().offline.clone()
    }

    pub fn config(&self) -> LogConfig {
        self.inner.state.borrow().config.clone()
    }

    /// Applies new settings; they take effect from the next append or retention pass.
    pub fn set_config(&self, config: LogConfig) {
        self.inner.state.borrow_mut().config = config;
    }

    pub fn offsets(&self) -> LogOffsets {
        let st = self.inner.state.borrow();
        LogOffsets {
            log_start_offset: st.log_start_offset,
            recovery_point: st.recovery_point,
            written_end_offset: st.written_end,
            log_end_offset: st.next_offset(),
            segments: st.segments.len(),
            size_bytes: st.size_bytes(),
        }
    }

    pub fn stats(&self) -> LogStats {
        self.inner.state.borrow().stats
    }

    /// Reads served from (and missed by) this log's tail cache.
    pub fn tail_cache_stats(&self) -> tail_cache::TailCacheStats {
        self.inner.tail_cache.borrow().stats
    }

    /// Base offset of the active (last) segment: it changes at every roll.
    pub fn active_segment_base(&self) -> i64 {
        self.inner.state.borrow().active().base_offset
    }

    /// Base offsets of the segments, oldest first.
    pub fn segment_bases(&self) -> Vec<i64> {
        let st = self.inner.state.borrow();
        st.segments.iter().map(|s| s.base_offset).collect()
    }

    /// How many group-commit flights have failed so far. Every append staged before a failure
    /// is reported failed, so an append staged under a smaller count than the current one is
    /// doomed even if its outcome has not been delivered yet.
    pub fn write_generation(&self) -> u64 {
        self.inner.state.borrow().stats.failed_flights
    }

    /// Makes everything appended so far durable (one fdatasync, shared with any in flight).
    pub async fn flush(&self) -> Result<(), LogError> {
        let (rx, start) = {
            let mut st = self.inner.state.borrow_mut();
            if st.closed {
                return Err(LogError::Closed(self.inner.dir.clone()));
            }
            st.check_online(&self.inner.dir)?;
            if st.recovery_point >= st.next_offset() && st.pending.is_empty() {
                return Ok(());
            }
            let (tx, rx) = local_oneshot::channel();
            st.waiters.push(AppendWaiter {
                durable: true,
                done: tx,
                staged_at: None,
            });
            let start = !st.committing && !st.exclusive;
            if start {
                st.committing = true;
            }
            (rx, start)
        };
        if start {
            runtime::spawn_detached(commit::run(Rc::clone(&self.inner)));
        }
        match rx.await {
            Some(result) => result,
            None => Err(LogError::Closed(self.inner.dir.clone())),
        }
    }

    /// Flushes if `flush.ms` or `flush.messages` says so. Called by the shard's timer.
    pub async fn flush_if_due(&self, now_ms: i64) -> Result<bool, LogError> {
        let due = {
            let st = self.inner.state.borrow();
            policy::flush_due(
                &st.config,
                st.unflushed_records,
                st.oldest_unflushed_ms,
                now_ms,
            )
        };
        if due {
            self.flush().await?;
        }
        Ok(due)
    }

    /// The HW the last checkpoint recorded (at most the log end), or the last one noted.
    pub fn checkpointed_high_watermark(&self) -> Option<i64> {
        self.inner.state.borrow().high_watermark
    }

    /// Notes the replicated partition's HW for the next checkpoint.
    pub fn note_high_watermark(&self, hw: i64) {
        self.inner.state.borrow_mut().high_watermark = Some(hw);
    }

    /// Writes the checkpoint (recovery point, log start) so that a crash rescans less.
    pub async fn checkpoint(&self) -> Result<(), LogError> {
        self.inner.state.borrow().check_online(&self.inner.dir)?;
        self.inner.write_checkpoint(|_| {}).await
    }

    /// Clean shutdown: waits for staged appends, syncs everything, writes the checkpoint and
    /// the clean-shutdown marker. Appends fail with `Closed` from now on. An offline log only
    /// closes its files (no sync, no checkpoint, no marker: the next open recovers it) and
    /// says why it is offline.
    pub async fn close(&self) -> Result<(), LogError> {
        if self.inner.state.borrow().closed {
            return Ok(());
        }
        self.acquire_exclusive().await?;
        self.inner.state.borrow_mut().closed = true;
        let synced = match self.inner.state.borrow().check_online(&self.inner.dir) {
            Ok(()) => None,
            Err(offline) => Some(Err(offline)),
        };
        let synced = match synced {
            Some(offline) => offline,
            None => self.inner.guard(self.sync_for_close()).await,
        };
        // A full disk leaves the log half closed: its files stay open, so what is there still
        // reads back, and the next open recovers the rest.
        if matches!(synced, Err(LogError::DiskFull { .. })) {
            return synced;
        }
        self.inner.tail_cache.borrow_mut().clear();
        let closed = self.close_files().await;
        self.release_exclusive();
        synced.and(closed)
    }

    /// What a clean close makes durable: unsynced segments and their index tails, then the
    /// checkpoint at the log end and the clean-shutdown marker.
    async fn sync_for_close(&self) -> Result<(), LogError> {
        let dir = self.inner.dir.clone();
        let io = |during: &'static str| {
            let dir = dir.clone();
            move |e| LogError::from_io(&dir, during, e)
        };
        let sync = |during: &'static str| {
            let dir = dir.clone();
            move |e| LogError::from_sync(&dir, during, e)
        };
        let to_sync: Vec<(Rc<SegmentFiles>, IndexTail, IndexTail, u64)> = {
            let st = self.inner.state.borrow();
            st.segments
                .iter()
                .filter(|s| !s.seal_synced)
                .filter_map(|s| {
                    s.files.clone().map(|f| {
                        let (index, time) =
                            (s.offset_index.unpersisted(), s.time_index.unpersisted());
                        (f, index, time, s.size)
                    })
                })
                .collect()
        };
        for (files, index, time, size) in to_sync {
            files
                .log
                .cut_padding(size)
                .await
                .map_err(io("cutting a segment's padding"))?;
            if let Some((pos, bytes)) = index {
                files
                    .index
                    .write_all_at(bytes, pos)
                    .await
                    .map_err(io("writing an index"))?;
            }
            if let Some((pos, bytes)) = time {
                files
                    .time_index
                    .write_all_at(bytes, pos)
                    .await
                    .map_err(io("writing a time index"))?;
            }
            files
                .log
                .fdatasync()
                .await
                .map_err(sync("syncing a segment"))?;
            files
                .index
                .fdatasync()
                .await
                .map_err(sync("syncing an index"))?;
            files
                .time_index
                .fdatasync()
                .await
                .map_err(sync("syncing a time index"))?;
        }
        {
            let mut st = self.inner.state.borrow_mut();
            for s in st.segments.iter_mut() {
                s.offset_index.mark_persisted(s.offset_index.len());
                s.time_index.mark_persisted(s.time_index.len());
            }
            st.recovery_point = st.next_offset();
        }
        self.inner.write_checkpoint(|_| {}).await?;
        checkpoint::write_clean_shutdown(&dir)
            .await
            .map_err(io("writing the clean-shutdown marker"))
    }

    /// Closes the segment files now rather than when the last handle drops: glommio closes
    /// dropped files lazily, and an executor that stops right after would leak descriptors.
    async fn close_files(&self) -> Result<(), LogError> {
        let files: Vec<Rc<SegmentFiles>> = {
            let mut st = self.inner.state.borrow_mut();
            st.segments
                .iter_mut()
                .filter_map(|s| s.files.take())
                .collect()
        };
        for f in files {
            // A reader still holding the files closes them when it drops its handle.
            if let Ok(f) = Rc::try_unwrap(f) {
                f.close()
                    .await
                    .map_err(|e| LogError::from_io(&self.inner.dir, "closing segment files", e))?;
            }
        }
        Ok(())
    }

    /// Waits until no write is in flight or staged, then holds the log exclusively.
    pub(super) async fn acquire_exclusive(&self) -> Result<(), LogError> {
        loop {
            let rx = {
                let mut st = self.inner.state.borrow_mut();
                if !st.committing && !st.exclusive && st.pending.is_empty() {
                    st.exclusive = true;
                    return Ok(());
                }
                let (tx, rx) = local_oneshot::channel();
                st.idle_waiters.push(tx);
                rx
            };
            rx.await;
        }
    }

    pub(super) fn release_exclusive(&self) {
        let start = {
            let mut st = self.inner.state.borrow_mut();
            st.exclusive = false;
            st.wake_idle();
            let start = !st.committing && (!st.pending.is_empty() || !st.waiters.is_empty());
            if start {
                st.committing = true;
            }
            start
        };
        if start {
            runtime::spawn_detached(commit::run(Rc::clone(&self.inner)));
        }
    }
}

/// Index entries not yet in their file: (file position, bytes).
type IndexTail = Option<(u64, Vec<u8>)>;
