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

use bytes::Bytes;

use super::checkpoint::{self, Checkpoint};
use super::commit;
use super::config::LogConfig;
use super::error::LogError;
use super::policy::{self, RetentionReason, RollInputs, SegmentSummary};
use super::recovery::{self, RecoveryReport};
use super::scan::scan_file;
use super::segment::{Segment, SegmentFiles, SegmentPaths};
use super::segment_read::{read_from_segment, SegmentRead, SegmentReadError};
use crate::protocol::batch_builder::decode_records_decompressed;
use crate::protocol::record_batch::{self, BatchHeader, TimestampType};
use crate::runtime;
use crate::util::local_oneshot;

/// Largest decompressed batch a timestamp lookup will look inside.
const MAX_DECOMPRESSED_LOOKUP: usize = 64 << 20;

/// How an append should be acknowledged.
#[derive(Debug, Clone, Copy)]
pub struct AppendOptions {
    /// Wait for an fdatasync of the batch (acks=all with a durable flush policy).
    pub durable: bool,
    /// The broker's clock, for LogAppendTime and segment age.
    pub now_ms: i64,
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
    log: Log,
    info: AppendInfo,
    done: local_oneshot::Receiver<Result<(), LogError>>,
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

/// Whole batches read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Concatenated batches, as stored; empty when there is nothing at the offset yet.
    pub records: Bytes,
    pub log_start_offset: i64,
    /// One past the last readable offset (the high watermark of a single-node log).
    pub log_end_offset: i64,
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

/// What retention did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetentionOutcome {
    pub deleted_segments: Vec<i64>,
    pub deleted_bytes: u64,
    pub log_start_offset: i64,
}

pub(super) struct PendingWrite {
    pub segment_base: i64,
    pub position: u64,
    pub data: Vec<u8>,
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
    pub stats: LogStats,
}

impl LogState {
    pub fn active(&self) -> &Segment {
        // The segment list is never empty (open creates one; truncation keeps one).
        &self.segments[self.segments.len() - 1]
    }

    fn active_mut(&mut self) -> &mut Segment {
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
    fn segment_index_for(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1)
    }

    pub fn wake_idle(&mut self) {
        for w in self.idle_waiters.drain(..) {
            w.send(());
        }
    }

    fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            recovery_point: self.recovery_point,
            log_start_offset: self.log_start_offset,
        }
    }
}

pub(super) struct LogInner {
    pub dir: PathBuf,
    pub state: RefCell<LogState>,
    pub clock: fn() -> i64,
    report: RecoveryReport,
}

/// A partition log. Clone it to share it between the tasks of its shard.
#[derive(Clone)]
pub struct Log {
    inner: Rc<LogInner>,
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
        let checkpoint = loaded.checkpoint;
        let start_hint = checkpoint.map(|c| c.log_start_offset).unwrap_or(0);
        if segments.is_empty() {
            segments.push(Segment::new(start_hint.max(0), now));
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
            unflushed_records: 0,
            oldest_unflushed_ms: None,
            pending: Vec::new(),
            waiters: Vec::new(),
            committing: false,
            exclusive: false,
            idle_waiters: Vec::new(),
            closed: false,
            stats: LogStats::default(),
        };
        let log = Log {
            inner: Rc::new(LogInner {
                dir: dir.to_path_buf(),
                state: RefCell::new(state),
                clock,
                report,
            }),
        };
        let cp = log.inner.state.borrow().checkpoint();
        checkpoint::write_checkpoint(dir, cp)
            .await
            .map_err(|e| LogError::from_io(dir, "writing the checkpoint", e))?;
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// What loading found (clean or not, what was scanned or cut).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.report
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

    /// Base offsets of the segments, oldest first.
    pub fn segment_bases(&self) -> Vec<i64> {
        let st = self.inner.state.borrow();
        st.segments.iter().map(|s| s.base_offset).collect()
    }

    /// Appends the record batches in `records` (one or more, as a producer sent them).
    ///
    /// Every batch is validated (magic 2, lengths, CRC32C, record count) before anything is
    /// staged; one bad batch rejects them all. Offsets are assigned by rewriting each batch's
    /// base offset; LogAppendTime logs also get the broker's time. Returns once the batches
    /// are in the files (and fsynced, when `durable` or the flush policy asks).
    pub async fn append(
        &self,
        records: &[u8],
        options: AppendOptions,
    ) -> Result<AppendInfo, LogError> {
        self.wait_appendable().await?;
        self.stage_append(records, options)?.written().await
    }

    /// Waits until appends may be staged (no truncation or close holds the log). A caller
    /// that must decide synchronously whether to append (idempotent producers) awaits this,
    /// then decides and calls [`Log::stage_append`] with no `.await` in between.
    pub async fn wait_appendable(&self) -> Result<(), LogError> {
        loop {
            let wait_idle = {
                let mut st = self.inner.state.borrow_mut();
                if st.closed {
                    return Err(LogError::Closed(self.inner.dir.clone()));
                }
                if st.exclusive {
                    let (tx, rx) = local_oneshot::channel();
                    st.idle_waiters.push(tx);
                    Some(rx)
                } else {
                    None
                }
            };
            match wait_idle {
                Some(rx) => {
                    rx.await;
                }
                None => return Ok(()),
            }
        }
    }

    /// Validates and stages `records` now, without awaiting: offsets are assigned on return.
    /// The write completes (or fails and is rolled back) when the returned [`StagedAppend`]
    /// says so; appends staged meanwhile are group-committed with it. Fails with `Busy` if
    /// called while truncation or close holds the log (see [`Log::wait_appendable`]).
    pub fn stage_append(
        &self,
        records: &[u8],
        options: AppendOptions,
    ) -> Result<StagedAppend, LogError> {
        {
            let st = self.inner.state.borrow();
            if st.closed {
                return Err(LogError::Closed(self.inner.dir.clone()));
            }
            if st.exclusive {
                return Err(LogError::Busy(self.inner.dir.clone()));
            }
        }
        let headers = validate_all(records, &self.inner.state.borrow().config)?;
        let (rx, info, start_committer) = {
            let mut st = self.inner.state.borrow_mut();
            let info = stage(&mut st, records, &headers, options);
            let (tx, rx) = local_oneshot::channel();
            st.waiters.push(AppendWaiter {
                durable: options.durable,
                done: tx,
                staged_at: Some(std::time::Instant::now()),
            });
            let start = !st.committing;
            st.committing = true;
            (rx, info, start)
        };
        if start_committer {
            runtime::spawn_detached(commit::run(Rc::clone(&self.inner)));
        }
        Ok(StagedAppend {
            log: self.clone(),
            info,
            done: rx,
        })
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

    /// Reads whole batches starting with the one that holds `offset`, up to `max_bytes`
    /// (the first batch is returned whole even when larger, as Kafka does). Batches at or
    /// after `upper_bound` (exclusive; e.g. a high watermark) are left out.
    pub async fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
    ) -> Result<ReadResult, LogError> {
        self.read_within(offset, max_bytes, upper_bound, true).await
    }

    /// Like [`Log::read`]; without `whole_first` nothing larger than `max_bytes` is returned
    /// (a first batch that does not fit gives empty records), for the partitions of a Fetch
    /// after the first one that returned data. `max_bytes` 0 without `whole_first` reads no
    /// file at all: the offsets only (a partition past the response's byte budget).
    pub async fn read_within(
        &self,
        offset: i64,
        max_bytes: usize,
        upper_bound: Option<i64>,
        whole_first: bool,
    ) -> Result<ReadResult, LogError> {
        let nothing_fits = max_bytes == 0 && !whole_first;
        let (candidates, log_start, end, interval) = {
            let st = self.inner.state.borrow();
            let end = upper_bound.map_or(st.written_end, |u| u.min(st.written_end));
            if offset < st.log_start_offset || offset > st.written_end {
                return Err(LogError::OffsetOutOfRange {
                    offset,
                    log_start: st.log_start_offset,
                    log_end: st.written_end,
                });
            }
            let mut candidates = Vec::new();
            if offset < end && !nothing_fits {
                let first = st.segment_index_for(offset);
                // The offset is in the first segment, or (after a gap) in the next one.
                for seg in st.segments[first..].iter().take(2) {
                    if seg.base_offset >= end {
                        break;
                    }
                    let Some(files) = seg.files.clone() else {
                        break;
                    };
                    let start = if seg.base_offset <= offset {
                        seg.offset_index
                            .lookup(seg.relative(offset))
                            .map(|e| u64::from(e.position))
                            .unwrap_or(0)
                    } else {
                        0
                    };
                    candidates.push((files, start, seg.written.size, seg.base_offset));
                }
            }
            (
                candidates,
                st.log_start_offset,
                st.written_end,
                st.config.index_interval_bytes,
            )
        };
        let bound = upper_bound.map_or(end, |u| u.min(end));
        let mut records = Bytes::new();
        for (files, start, size, segment_base) in candidates {
            let read = SegmentRead {
                offset,
                bound,
                max_bytes,
                whole_first,
                index_interval: interval,
            };
            let found =
                read_from_segment(&files, start, size, read)
                    .await
                    .map_err(|e| match e {
                        SegmentReadError::Io(e) => {
                            LogError::from_io(&self.inner.dir, "reading a segment", e)
                        }
                        SegmentReadError::Corrupt { position, reason } => {
                            LogError::CorruptSegment {
                                dir: self.inner.dir.clone(),
                                segment_base,
                                position,
                                offset,
                                reason,
                            }
                        }
                    })?;
            if let Some(bytes) = found {
                records = bytes;
                break;
            }
        }
        Ok(ReadResult {
            records,
            log_start_offset: log_start,
            log_end_offset: end,
        })
    }

    /// ListOffsets by timestamp: the first offset whose timestamp is ≥ `timestamp`, with that
    /// timestamp, or `None` when every record is older. The batch found through the time index
    /// is decoded (decompressed if needed) to find the exact record.
    pub async fn offset_for_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let (target, log_start, end) = {
            let st = self.inner.state.borrow();
            let end = st.written_end;
            let seg = st
                .segments
                .iter()
                .find(|s| s.written.max_timestamp >= timestamp && s.written.size > 0);
            let target = seg.and_then(|s| {
                let files = s.files.clone()?;
                let start = s
                    .time_index
                    .lookup(timestamp)
                    .and_then(|rel| s.offset_index.lookup(rel))
                    .map(|e| u64::from(e.position))
                    .unwrap_or(0);
                Some((files, start, s.written.size))
            });
            (target, st.log_start_offset, end)
        };
        let Some((files, start, size)) = target else {
            return Ok(None);
        };
        let mut found: Option<(u64, BatchHeader)> = None;
        scan_file(&files.log, start, size, false, |pos, header| {
            if found.is_none()
                && header.max_timestamp >= timestamp
                && header.last_offset() >= log_start
                && header.base_offset < end
            {
                found = Some((pos, *header));
            }
            found.is_none()
        })
        .await
        .map_err(|e| LogError::from_io(&self.inner.dir, "scanning for a timestamp", e))?;
        let Some((pos, header)) = found else {
            return Ok(None);
        };
        let bytes = files
            .log
            .read_at(pos, header.total_len())
            .await
            .map_err(|e| LogError::from_io(&self.inner.dir, "reading a batch", e))?;
        // Look inside the batch for the exact record (decompressing it if need be: this is
        // the one lookup that pays for it, never produce or fetch).
        let exact = decode_records_decompressed(&bytes, MAX_DECOMPRESSED_LOOKUP)
            .ok()
            .and_then(|recs| {
                recs.into_iter()
                    .find(|r| r.timestamp >= timestamp && r.offset >= log_start)
                    .map(|r| (r.offset, r.timestamp))
            });
        Ok(Some(exact.unwrap_or((
            header.base_offset.max(log_start),
            header.max_timestamp,
        ))))
    }

    /// ListOffsets MAX_TIMESTAMP: the largest timestamp in the log and the last offset of the
    /// batch that carries it.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let st = self.inner.state.borrow();
        st.segments
            .iter()
            .filter(|s| s.written.max_timestamp >= 0)
            .max_by_key(|s| s.written.max_timestamp)
            .map(|s| (s.written.offset_of_max_timestamp, s.written.max_timestamp))
    }

    /// Removes every batch at or after `offset` (batches are removed whole: if `offset` falls
    /// inside a batch, that batch goes too). Returns the new log end offset. Waits for staged
    /// appends to be written first.
    pub async fn truncate_to(&self, offset: i64) -> Result<i64, LogError> {
        self.acquire_exclusive().await?;
        let result = self.truncate_exclusive(offset).await;
        self.release_exclusive();
        result
    }

    async fn truncate_exclusive(&self, offset: i64) -> Result<i64, LogError> {
        let dir = self.inner.dir.clone();
        let io = |during: &'static str| {
            let dir = dir.clone();
            move |e| LogError::from_io(&dir, during, e)
        };
        let (keep_files, cut_from, removed, kept_base) = {
            let mut st = self.inner.state.borrow_mut();
            if offset >= st.next_offset() {
                return Ok(st.next_offset());
            }
            let now = (self.inner.clock)();
            // Whole segments at or after the offset go.
            let first_removed = st.segments.partition_point(|s| s.base_offset < offset);
            let removed: Vec<Segment> = st.segments.drain(first_removed..).collect();
            if st.segments.is_empty() {
                st.segments.push(Segment::new(offset.max(0), now));
            }
            let active = st.active_mut();
            active.sealed = false;
            active.seal_synced = false;
            let files = active.files.clone();
            let start = active
                .offset_index
                .lookup(active.relative(offset))
                .map(|e| u64::from(e.position))
                .unwrap_or(0);
            (
                files.map(|f| (f, start, active.size)),
                offset,
                removed,
                active.base_offset,
            )
        };
        for seg in &removed {
            recovery::remove_segment_files(&SegmentPaths::new(&dir, seg.base_offset))
                .await
                .map_err(io("removing truncated segments"))?;
        }
        // Find the first batch that reaches `cut_from` in the kept segment, and rebuild the
        // segment's in-memory state up to it.
        let mut rebuilt = Segment::new(kept_base, (self.inner.clock)());
        if let Some((files, _, size)) = &keep_files {
            let interval = self.inner.state.borrow().config.index_interval_bytes;
            scan_file(&files.log, 0, *size, false, |pos, header| {
                if header.last_offset() >= cut_from {
                    return false;
                }
                rebuilt.record_batch(pos, header, interval);
                true
            })
            .await
            .map_err(io("scanning for truncation"))?;
            files
                .log
                .truncate(rebuilt.size)
                .await
                .map_err(io("truncating a segment"))?;
            rebuilt.files = Some(Rc::clone(files));
            recovery::write_index_files(&mut rebuilt, files)
                .await
                .map_err(io("rewriting indexes"))?;
            files.log.fdatasync().await.map_err(io("syncing"))?;
        }
        if rebuilt.size > 0 {
            rebuilt.rolling_base_ms = Some((self.inner.clock)());
        }
        rebuilt.mark_all_written();
        let checkpoint = {
            let mut st = self.inner.state.borrow_mut();
            let leo = rebuilt.next_offset;
            *st.active_mut() = rebuilt;
            st.written_end = leo;
            st.recovery_point = st.recovery_point.min(leo);
            st.log_start_offset = st.log_start_offset.min(leo);
            st.unflushed_records = 0;
            st.oldest_unflushed_ms = None;
            st.checkpoint()
        };
        checkpoint::write_checkpoint(&dir, checkpoint)
            .await
            .map_err(io("writing the checkpoint"))?;
        Ok(self.offsets().log_end_offset)
    }

    /// DeleteRecords: moves the log start offset up to `offset` (at most the written end) and
    /// deletes the segments wholly below it. Returns the new log start offset.
    pub async fn delete_records_before(&self, offset: i64) -> Result<i64, LogError> {
        let checkpoint = {
            let mut st = self.inner.state.borrow_mut();
            if offset < 0 || offset > st.written_end {
                return Err(LogError::OffsetOutOfRange {
                    offset,
                    log_start: st.log_start_offset,
                    log_end: st.written_end,
                });
            }
            if offset <= st.log_start_offset {
                return Ok(st.log_start_offset);
            }
            st.log_start_offset = offset;
            st.checkpoint()
        };
        checkpoint::write_checkpoint(&self.inner.dir, checkpoint)
            .await
            .map_err(|e| LogError::from_io(&self.inner.dir, "writing the checkpoint", e))?;
        let outcome = self.apply_retention((self.inner.clock)()).await?;
        Ok(outcome.log_start_offset)
    }

    /// Deletes the oldest segments that `retention.ms`, `retention.bytes` or the log start
    /// offset put out of the log. Never deletes the active segment.
    pub async fn apply_retention(&self, now_ms: i64) -> Result<RetentionOutcome, LogError> {
        let (removed, checkpoint, reason) = {
            let mut st = self.inner.state.borrow_mut();
            let summaries: Vec<SegmentSummary> = st
                .segments
                .iter()
                .map(|s| SegmentSummary {
                    base_offset: s.base_offset,
                    next_offset: s.next_offset,
                    size: s.size,
                    largest_timestamp: s.largest_timestamp(),
                })
                .collect();
            let plan = policy::plan_retention(&st.config, &summaries, st.log_start_offset, now_ms);
            // Only segments wholly written and synced may go (their data is not in flight).
            let mut count = 0;
            while count < plan.delete_count && st.segments[count].seal_synced {
                count += 1;
            }
            let removed: Vec<Segment> = st.segments.drain(..count).collect();
            let first_base = st.segments[0].base_offset;
            st.log_start_offset = st.log_start_offset.max(first_base);
            (removed, st.checkpoint(), plan.reason)
        };
        let mut outcome = RetentionOutcome {
            log_start_offset: checkpoint.log_start_offset,
            ..RetentionOutcome::default()
        };
        if removed.is_empty() {
            return Ok(outcome);
        }
        let dir = &self.inner.dir;
        checkpoint::write_checkpoint(dir, checkpoint)
            .await
            .map_err(|e| LogError::from_io(dir, "writing the checkpoint", e))?;
        for seg in removed {
            recovery::remove_segment_files(&SegmentPaths::new(dir, seg.base_offset))
                .await
                .map_err(|e| LogError::from_io(dir, "deleting a segment", e))?;
            outcome.deleted_segments.push(seg.base_offset);
            outcome.deleted_bytes += seg.size;
        }
        runtime::sync_dir(dir)
            .await
            .map_err(|e| LogError::from_io(dir, "syncing the log directory", e))?;
        tracing::info!(
            dir = %dir.display(),
            reason = ?reason.unwrap_or(RetentionReason::LogStartOffset),
            segments = ?outcome.deleted_segments,
            bytes = outcome.deleted_bytes,
            log_start = outcome.log_start_offset,
            "retention deleted segments"
        );
        Ok(outcome)
    }

    /// Writes the checkpoint (recovery point, log start) so that a crash rescans less.
    pub async fn checkpoint(&self) -> Result<(), LogError> {
        let cp = self.inner.state.borrow().checkpoint();
        checkpoint::write_checkpoint(&self.inner.dir, cp)
            .await
            .map_err(|e| LogError::from_io(&self.inner.dir, "writing the checkpoint", e))
    }

    /// Clean shutdown: waits for staged appends, syncs everything, writes the checkpoint and
    /// the clean-shutdown marker. Appends fail with `Closed` from now on.
    pub async fn close(&self) -> Result<(), LogError> {
        if self.inner.state.borrow().closed {
            return Ok(());
        }
        self.acquire_exclusive().await?;
        self.inner.state.borrow_mut().closed = true;
        let dir = self.inner.dir.clone();
        let io = |during: &'static str| {
            let dir = dir.clone();
            move |e| LogError::from_io(&dir, during, e)
        };
        let to_sync: Vec<(Rc<SegmentFiles>, IndexTail, IndexTail)> = {
            let st = self.inner.state.borrow();
            st.segments
                .iter()
                .filter(|s| !s.seal_synced)
                .filter_map(|s| {
                    s.files
                        .clone()
                        .map(|f| (f, s.offset_index.unpersisted(), s.time_index.unpersisted()))
                })
                .collect()
        };
        for (files, index, time) in to_sync {
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
            files.log.fdatasync().await.map_err(io("syncing"))?;
            files.index.fdatasync().await.map_err(io("syncing"))?;
            files.time_index.fdatasync().await.map_err(io("syncing"))?;
        }
        let cp = {
            let mut st = self.inner.state.borrow_mut();
            for s in st.segments.iter_mut() {
                s.offset_index.mark_persisted(s.offset_index.len());
                s.time_index.mark_persisted(s.time_index.len());
            }
            st.recovery_point = st.next_offset();
            st.checkpoint()
        };
        checkpoint::write_checkpoint(&dir, cp)
            .await
            .map_err(io("writing the checkpoint"))?;
        checkpoint::write_clean_shutdown(&dir)
            .await
            .map_err(io("writing the clean-shutdown marker"))?;
        // Close the files now rather than when the last handle drops: glommio closes dropped
        // files lazily, and an executor that stops right after would leak the descriptors.
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
                f.close().await.map_err(io("closing segment files"))?;
            }
        }
        self.release_exclusive();
        Ok(())
    }

    /// Waits until no write is in flight or staged, then holds the log exclusively.
    async fn acquire_exclusive(&self) -> Result<(), LogError> {
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

    fn release_exclusive(&self) {
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

/// Validates every batch in `records`; returns their headers.
fn validate_all(records: &[u8], config: &LogConfig) -> Result<Vec<BatchHeader>, LogError> {
    let mut headers = Vec::new();
    let mut position = 0;
    while position < records.len() {
        let rest = &records[position..];
        let header = record_batch::validate(rest)
            .map_err(|source| LogError::InvalidBatch { position, source })?;
        let len = header.total_len();
        if len > config.max_message_bytes {
            return Err(LogError::BatchTooLarge {
                size: len,
                max: config.max_message_bytes,
            });
        }
        headers.push(header);
        position += len;
    }
    if headers.is_empty() {
        return Err(LogError::EmptyAppend);
    }
    Ok(headers)
}

/// Assigns offsets, rolls when needed and stages the bytes for the committer. No I/O.
fn stage(
    st: &mut LogState,
    records: &[u8],
    headers: &[BatchHeader],
    options: AppendOptions,
) -> AppendInfo {
    let now = options.now_ms;
    let log_append_time = st.config.message_timestamp_type == TimestampType::LogAppendTime;
    let interval = st.config.index_interval_bytes;
    let first_offset = st.next_offset();
    let mut record_count = 0u64;
    let mut position_in_request = 0;
    for header in headers {
        let len = header.total_len();
        let base_offset = st.next_offset();
        let count = i64::from(header.last_offset_delta) + 1;
        let active = st.active();
        let roll = policy::should_roll(
            &st.config,
            RollInputs {
                active_size: active.size,
                active_base_offset: active.base_offset,
                active_rolling_base_ms: active.rolling_base_ms,
                batch_len: len as u64,
                batch_last_offset: base_offset + count - 1,
                now_ms: now,
            },
        );
        if let Some(reason) = roll {
            tracing::debug!(?reason, base_offset, "rolling segment");
            st.active_mut().seal();
            st.segments.push(Segment::new(base_offset, now));
        }
        let source = &records[position_in_request..position_in_request + len];
        position_in_request += len;
        let stored = BatchHeader {
            base_offset,
            max_timestamp: if log_append_time {
                now
            } else {
                header.max_timestamp
            },
            ..*header
        };
        let active = st.active_mut();
        let position = active.size;
        active.record_batch(position, &stored, interval);
        active.rolling_base_ms.get_or_insert(now);
        active.last_modified_ms = now;
        let segment_base = active.base_offset;
        record_count += header.record_count.max(0) as u64;
        // Copy the batch once, into the write buffer it goes out with, then patch it there.
        let contiguous = st.pending.last().is_some_and(|last| {
            last.segment_base == segment_base && last.position + last.data.len() as u64 == position
        });
        if !contiguous {
            st.pending.push(PendingWrite {
                segment_base,
                position,
                data: Vec::with_capacity(len),
            });
        }
        let Some(write) = st.pending.last_mut() else {
            continue;
        };
        let at = write.data.len();
        write.data.extend_from_slice(source);
        let stored_bytes = &mut write.data[at..];
        record_batch::set_base_offset(stored_bytes, base_offset);
        if log_append_time {
            record_batch::set_log_append_time(stored_bytes, now);
        }
    }
    st.unflushed_records += record_count;
    st.oldest_unflushed_ms.get_or_insert(now);
    AppendInfo {
        base_offset: first_offset,
        last_offset: st.next_offset() - 1,
        log_append_time_ms: if log_append_time { now } else { -1 },
        log_start_offset: st.log_start_offset,
        record_count,
    }
}
