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
use std::path::Path;
use std::rc::Rc;

use super::checkpoint;
use super::commit;
use super::config::LogConfig;
use super::error::LogError;
pub use super::log_state::LogStats;
use super::log_state::{AppendWaiter, LogInner, LogState, ReaderCount};
use super::policy;
use super::recovery::{self, RecoveryReport};
use super::segment::{Segment, SegmentFiles};
use super::tail_cache;
use crate::model::Offset;
use crate::runtime;
use crate::util::exclusive::Exclusive;
use crate::util::local_oneshot;

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
    pub base_offset: Offset,
    pub last_offset: Offset,
    /// The time stamped on the batches for LogAppendTime logs, else -1.
    pub log_append_time_ms: i64,
    pub log_start_offset: Offset,
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
        let start_hint = Offset(checkpoint.map_or(0, |c| c.log_start_offset));
        if recovery::remove_segments_below_start(dir, &mut segments, start_hint).await? {
            // Nothing is left to truncate: the log starts over empty at its log start.
            if let Some(c) = checkpoint.as_mut() {
                c.truncate_to = None;
            }
        }
        if segments.is_empty() {
            segments.push(Segment::new(start_hint.max(Offset(0)), now, config.io));
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
            tracing::debug!(dir = %dir.display(), segments = report.segments, log_start = log_start.0, log_end = leo.0, "log loaded");
        } else {
            tracing::info!(
                dir = %dir.display(),
                clean = report.clean_shutdown,
                segments = report.segments,
                scanned_segments = report.scanned_segments,
                scanned_bytes = report.scanned_bytes,
                log_start = log_start.0,
                log_end = leo.0,
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
                .map(|hw| Offset(hw).min(leo)),
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
                log.truncate_exclusive(Offset(offset)).await?;
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
        // The snapshot stays in bare numbers: shard/ and server/ read it directly.
        LogOffsets {
            log_start_offset: st.log_start_offset.0,
            recovery_point: st.recovery_point.0,
            written_end_offset: st.written_end.0,
            log_end_offset: st.next_offset().0,
            segments: st.segments.len(),
            size_bytes: st.size_bytes(),
        }
    }

    pub fn stats(&self) -> LogStats {
        self.inner.state.borrow().stats
    }

    /// Reads served from (and missed by) this log's tail cache.
    pub fn tail_cache_stats(&self) -> crate::metrics::snapshot::TailCacheStats {
        self.inner.tail_cache.borrow().stats
    }

    /// Base offset of the active (last) segment: it changes at every roll. A bare number,
    /// as the segment's file name has it.
    pub fn active_segment_base(&self) -> i64 {
        self.inner.state.borrow().active().base_offset.0
    }

    /// Base offsets of the segments, oldest first (as their file names have them).
    pub fn segment_bases(&self) -> Vec<i64> {
        let st = self.inner.state.borrow();
        st.segments.iter().map(|s| s.base_offset.0).collect()
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
    pub fn checkpointed_high_watermark(&self) -> Option<Offset> {
        self.inner.state.borrow().high_watermark
    }

    /// Notes the replicated partition's HW for the next checkpoint.
    pub fn note_high_watermark(&self, hw: Offset) {
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
