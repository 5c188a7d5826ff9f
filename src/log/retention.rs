//! Retention and DeleteRecords: moving the log start offset up and deleting the segments
//! wholly below it.

use super::error::LogError;
use super::partition_log::Log;
use super::policy::{self, RetentionReason, SegmentSummary};
use super::segment::{Segment, SegmentPaths};
use super::segment_delete::delete_segment;
use crate::model::Offset;
use crate::runtime;

/// What retention did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetentionOutcome {
    pub deleted_segments: Vec<i64>,
    pub deleted_bytes: u64,
    pub log_start_offset: Offset,
}

impl Log {
    /// DeleteRecords: moves the log start offset up to `offset` (at most the written end) and
    /// deletes the segments wholly below it. Returns the new log start offset.
    pub async fn delete_records_before(&self, offset: i64) -> Result<i64, LogError> {
        let target = Offset(offset);
        {
            let st = self.inner.state.borrow();
            st.check_online(&self.inner.dir)?;
            if offset < 0 || target > st.written_end {
                return Err(LogError::OffsetOutOfRange {
                    offset,
                    log_start: st.log_start_offset.0,
                    log_end: st.written_end.0,
                });
            }
            if target <= st.log_start_offset {
                return Ok(st.log_start_offset.0);
            }
        }
        // Durable first: records reported deleted must not come back after a crash.
        self.inner
            .write_checkpoint(|cp| cp.log_start_offset = cp.log_start_offset.max(offset))
            .await?;
        {
            let mut st = self.inner.state.borrow_mut();
            st.log_start_offset = st.log_start_offset.max(target);
        }
        let outcome = self.apply_retention((self.inner.clock)()).await?;
        Ok(outcome.log_start_offset.0)
    }

    /// Deletes the oldest segments that `retention.ms`, `retention.bytes` or the log start
    /// offset put out of the log. Never deletes the active segment.
    pub async fn apply_retention(&self, now_ms: i64) -> Result<RetentionOutcome, LogError> {
        let (removed, checkpoint, reason) = {
            let mut st = self.inner.state.borrow_mut();
            st.check_online(&self.inner.dir)?;
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
            // A truncation or start-over holds the log and plans by segment position: removing
            // segments under it would make it cut the wrong ones. The next pass deletes them.
            let allowed = if st.exclusive { 0 } else { plan.delete_count };
            // Only segments wholly written and synced may go (their data is not in flight).
            let mut count = 0;
            while count < allowed && st.segments[count].seal_synced {
                count += 1;
            }
            let removed: Vec<Segment> = st.segments.drain(..count).collect();
            let first_base = st.segments[0].base_offset;
            st.log_start_offset = st.log_start_offset.max(first_base);
            self.inner
                .tail_cache
                .borrow_mut()
                .drop_segments_below(first_base.0);
            (removed, st.log_start_offset, plan.reason)
        };
        let mut outcome = RetentionOutcome {
            log_start_offset: checkpoint,
            ..RetentionOutcome::default()
        };
        if removed.is_empty() {
            return Ok(outcome);
        }
        let dir = &self.inner.dir;
        self.inner.write_checkpoint(|_| {}).await?;
        let delay_ms = self.inner.state.borrow().config.file_delete_delay_ms;
        for seg in removed {
            delete_segment(&SegmentPaths::new(dir, seg.base_offset.0), delay_ms)
                .await
                .map_err(|e| LogError::from_io(dir, "deleting a segment", e))?;
            // Named as the files were.
            outcome.deleted_segments.push(seg.base_offset.0);
            outcome.deleted_bytes += seg.size;
        }
        let synced = runtime::sync_dir(dir)
            .await
            .map_err(|e| LogError::from_sync(dir, "syncing the log directory", e));
        if let Err(e) = synced {
            self.inner.go_offline(&e);
            return Err(e);
        }
        tracing::info!(
            dir = %dir.display(),
            reason = ?reason.unwrap_or(RetentionReason::LogStartOffset),
            segments = ?outcome.deleted_segments,
            bytes = outcome.deleted_bytes,
            log_start = outcome.log_start_offset.0,
            "retention deleted segments"
        );
        Ok(outcome)
    }
}
