//! Truncation: removing every batch from an offset on (a follower's primitive).
//!
//! Crash-safe and never half visible, in this order:
//! 1. plan (pure: `policy::plan_truncation`) and find the cut inside the segment that holds
//!    the offset by reading it, without changing anything;
//! 2. fence readers: the readable end drops to the new end, and reads already under way are
//!    waited for, so nobody reads bytes that are about to be cut;
//! 3. make the intent durable: the checkpoint gets `truncate-to` (and a recovery point at or
//!    below the cut), so an open after a crash anywhere below finishes the job;
//! 4. cut the files: later segments removed newest first, the kept one truncated, its indexes
//!    rewritten, all synced;
//! 5. swap the in-memory state, then clear the intent.
//!
//! Truncating to where the log already ends only clears a leftover intent.
//!
//! Starting over ([`Log::truncate_fully_and_start_at`], a follower whose log ends below the
//! leader's log start) makes the new log start durable first; an open that finds every
//! segment below the checkpointed log start removes them (`recovery`), so a crash anywhere
//! in between finishes the job.

use std::rc::Rc;

use super::error::LogError;
use super::partition_log::Log;
use super::policy;
use super::recovery;
use super::scan::scan_file;
use super::segment::{Segment, SegmentFiles, SegmentPaths};
use crate::model::Offset;
use crate::runtime;

impl Log {
    /// Removes every batch at or after `offset` (batches are removed whole: if `offset` falls
    /// inside a batch, that batch goes too). Returns the new log end offset. Waits for staged
    /// appends to be written first.
    pub async fn truncate_to(&self, offset: i64) -> Result<i64, LogError> {
        self.acquire_exclusive().await?;
        let online = self.inner.state.borrow().check_online(&self.inner.dir);
        let result = match online {
            Ok(()) => {
                self.inner
                    .guard(self.truncate_exclusive(Offset(offset)))
                    .await
            }
            Err(offline) => Err(offline),
        };
        self.release_exclusive();
        result.map(|end| end.0)
    }

    pub(super) async fn truncate_exclusive(&self, offset: Offset) -> Result<Offset, LogError> {
        let dir = self.inner.dir.clone();
        let io = |during: &'static str| {
            let dir = dir.clone();
            move |e| LogError::from_io(&dir, during, e)
        };
        let now = (self.inner.clock)();
        // 1. The plan, and the kept segment rebuilt up to the cut (reads only).
        if offset >= self.inner.state.borrow().next_offset() {
            self.inner.write_checkpoint(|_| {}).await?;
            return Ok(self.inner.state.borrow().next_offset());
        }
        let (plan, removed_bases, kept) = {
            let st = self.inner.state.borrow();
            let bases: Vec<Offset> = st.segments.iter().map(|s| s.base_offset).collect();
            let plan = policy::plan_truncation(&bases, offset);
            let kept = plan.cut.map(|i| {
                let s = &st.segments[i];
                (s.base_offset, s.files.clone(), s.written.size)
            });
            (plan, bases[plan.first_removed..].to_vec(), kept)
        };
        let (interval, io_mode) = {
            let st = self.inner.state.borrow();
            (st.config.index_interval_bytes, st.config.io)
        };
        let mut rebuilt = match &kept {
            Some((base, _, _)) => Segment::new(*base, now, io_mode),
            None => Segment::new(offset.max(Offset(0)), now, io_mode),
        };
        let kept_files: Option<Rc<SegmentFiles>> = kept.as_ref().and_then(|k| k.1.clone());
        if let (Some(files), Some((_, _, size))) = (&kept_files, &kept) {
            scan_file(&files.log, 0, *size, false, |pos, header| {
                if header.last_offset() >= offset.0 {
                    return false;
                }
                rebuilt.record_batch(pos, header, interval);
                true
            })
            .await
            .map_err(io("scanning for truncation"))?;
        }
        let new_end = rebuilt.next_offset;
        // 2. Fence: nothing at or past the new end is readable from now on.
        {
            let mut st = self.inner.state.borrow_mut();
            st.written_end = st.written_end.min(new_end);
        }
        self.inner.readers.drained().await;
        self.inner.tail_cache.borrow_mut().clear();
        // 3. The intent, durable before any file changes (and in the state: any checkpoint
        //    written until the truncation is done carries it).
        {
            let mut st = self.inner.state.borrow_mut();
            st.recovery_point = st.recovery_point.min(new_end);
            st.log_start_offset = st.log_start_offset.min(new_end);
            st.truncate_intent = Some(offset);
        }
        self.inner.write_checkpoint(|_| {}).await?;
        // 4. The files.
        for base in removed_bases.iter().rev() {
            SegmentPaths::new(&dir, base.0)
                .remove_files()
                .await
                .map_err(io("removing truncated segments"))?;
        }
        if let Some(files) = &kept_files {
            files
                .log
                .truncate(rebuilt.size)
                .await
                .map_err(io("truncating a segment"))?;
            rebuilt.files = Some(Rc::clone(files));
            recovery::write_index_files(&mut rebuilt, files)
                .await
                .map_err(io("rewriting indexes"))?;
            files
                .log
                .fdatasync()
                .await
                .map_err(|e| LogError::from_sync(&dir, "syncing a truncated segment", e))?;
        }
        runtime::sync_dir(&dir)
            .await
            .map_err(|e| LogError::from_sync(&dir, "syncing the log directory", e))?;
        if rebuilt.size > 0 {
            rebuilt.rolling_base_ms = Some(now);
        }
        rebuilt.mark_all_written();
        rebuilt
            .load_tail()
            .await
            .map_err(io("reading a truncated segment's last block"))?;
        // 5. Memory, then the intent cleared.
        {
            let mut st = self.inner.state.borrow_mut();
            st.segments.truncate(plan.first_removed);
            match plan.cut {
                Some(_) => *st.active_mut() = rebuilt,
                None => st.segments.push(rebuilt),
            }
            st.written_end = new_end;
            st.truncate_intent = None;
            st.unflushed_records = 0;
            st.oldest_unflushed_ms = None;
        }
        self.inner.write_checkpoint(|_| {}).await?;
        Ok(self.inner.state.borrow().next_offset())
    }

    /// Empties the log and restarts it, empty, at `start` (Kafka's `truncateFullyAndStartAt`):
    /// a follower whose log ends below the leader's log start cannot fetch what it misses.
    /// `start` must be past the log end (below it, this would be truncation plus
    /// DeleteRecords); otherwise `OffsetOutOfRange`. Waits for staged appends first.
    pub async fn truncate_fully_and_start_at(&self, start: i64) -> Result<(), LogError> {
        self.acquire_exclusive().await?;
        let online = self.inner.state.borrow().check_online(&self.inner.dir);
        let result = match online {
            Ok(()) => {
                self.inner
                    .guard(self.start_over_exclusive(Offset(start)))
                    .await
            }
            Err(offline) => Err(offline),
        };
        self.release_exclusive();
        result
    }

    async fn start_over_exclusive(&self, start: Offset) -> Result<(), LogError> {
        let dir = self.inner.dir.clone();
        let (bases, io_mode) = {
            let st = self.inner.state.borrow();
            if start <= st.next_offset() {
                return Err(LogError::OffsetOutOfRange {
                    offset: start.0,
                    log_start: st.log_start_offset.0,
                    log_end: st.next_offset().0,
                });
            }
            let bases: Vec<Offset> = st.segments.iter().map(|s| s.base_offset).collect();
            (bases, st.config.io)
        };
        // Fence: nothing is readable from now on, and reads under way finish first.
        {
            let mut st = self.inner.state.borrow_mut();
            st.written_end = st.written_end.min(st.log_start_offset);
        }
        self.inner.readers.drained().await;
        self.inner.tail_cache.borrow_mut().clear();
        // The new start, durable before any file goes (every checkpoint from here on says so).
        {
            let mut st = self.inner.state.borrow_mut();
            st.log_start_offset = start;
            st.recovery_point = start;
        }
        self.inner.write_checkpoint(|_| {}).await?;
        for base in bases.iter().rev() {
            SegmentPaths::new(&dir, base.0)
                .remove_files()
                .await
                .map_err(|e| LogError::from_io(&dir, "removing segments to start over", e))?;
        }
        runtime::sync_dir(&dir)
            .await
            .map_err(|e| LogError::from_sync(&dir, "syncing the log directory", e))?;
        let now = (self.inner.clock)();
        let mut fresh = Segment::new(start, now, io_mode);
        fresh.mark_all_written();
        fresh
            .load_tail()
            .await
            .map_err(|e| LogError::from_io(&dir, "starting a new segment", e))?;
        {
            let mut st = self.inner.state.borrow_mut();
            st.segments = vec![fresh];
            st.written_end = start;
            st.unflushed_records = 0;
            st.oldest_unflushed_ms = None;
        }
        tracing::info!(dir = %dir.display(), start = start.0, "log emptied and restarted at the leader's log start");
        Ok(())
    }
}
