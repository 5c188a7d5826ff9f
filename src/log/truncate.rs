//! Truncation: removing every batch from an offset on (a follower's primitive, and the cut
//! after a failed write).

use std::rc::Rc;

use super::error::LogError;
use super::partition_log::Log;
use super::recovery;
use super::scan::scan_file;
use super::segment::{Segment, SegmentPaths};

impl Log {
    /// Removes every batch at or after `offset` (batches are removed whole: if `offset` falls
    /// inside a batch, that batch goes too). Returns the new log end offset. Waits for staged
    /// appends to be written first.
    pub async fn truncate_to(&self, offset: i64) -> Result<i64, LogError> {
        self.acquire_exclusive().await?;
        let online = self.inner.state.borrow().check_online(&self.inner.dir);
        let result = match online {
            Ok(()) => self.inner.guard(self.truncate_exclusive(offset)).await,
            Err(offline) => Err(offline),
        };
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
            files
                .log
                .fdatasync()
                .await
                .map_err(|e| LogError::from_sync(&dir, "syncing a truncated segment", e))?;
        }
        if rebuilt.size > 0 {
            rebuilt.rolling_base_ms = Some((self.inner.clock)());
        }
        rebuilt.mark_all_written();
        {
            let mut st = self.inner.state.borrow_mut();
            let leo = rebuilt.next_offset;
            *st.active_mut() = rebuilt;
            st.written_end = leo;
            st.recovery_point = st.recovery_point.min(leo);
            st.log_start_offset = st.log_start_offset.min(leo);
            st.unflushed_records = 0;
            st.oldest_unflushed_ms = None;
        }
        self.inner.write_checkpoint(|_| {}).await?;
        Ok(self.offsets().log_end_offset)
    }
}
