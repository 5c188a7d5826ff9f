//! The read path of the log: whole batches from an offset (Fetch), and the timestamp lookups
//! of ListOffsets.

use bytes::Bytes;

use super::error::LogError;
use super::partition_log::Log;
use super::scan::scan_file;
use super::segment_read::{read_from_segment, CachedTail, SegmentRead, SegmentReadError};
use crate::model::Offset;
use crate::protocol::decompressed_records::decode_records_decompressed;
use crate::protocol::record_batch::BatchHeader;

/// Largest decompressed batch a timestamp lookup will look inside.
const MAX_DECOMPRESSED_LOOKUP: usize = 64 << 20;

/// Whole batches read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Concatenated batches, as stored; empty when there is nothing at the offset yet.
    pub records: Bytes,
    pub log_start_offset: i64,
    /// One past the last readable offset (the high watermark of a single-node log).
    pub log_end_offset: i64,
}

impl Log {
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
            st.check_online(&self.inner.dir)?;
            let end = upper_bound.map_or(st.written_end.0, |u| u.min(st.written_end.0));
            if offset < st.log_start_offset.0 || offset > st.written_end.0 {
                return Err(LogError::OffsetOutOfRange {
                    offset,
                    log_start: st.log_start_offset.0,
                    log_end: st.written_end.0,
                });
            }
            let mut candidates = Vec::new();
            if offset < end && !nothing_fits {
                let (at, end) = (Offset(offset), Offset(end));
                let first = st.segment_index_for(at);
                // The offset is in the first segment, or (after a gap) in the next one.
                for seg in st.segments[first..].iter().take(2) {
                    if seg.base_offset >= end {
                        break;
                    }
                    let Some(files) = seg.files.clone() else {
                        break;
                    };
                    let start = if seg.base_offset <= at {
                        seg.offset_index
                            .lookup(seg.relative(at))
                            .map(|e| u64::from(e.position))
                            .unwrap_or(0)
                    } else {
                        0
                    };
                    // The tail cache and the corruption report name the segment as its file does.
                    candidates.push((files, start, seg.written.size, seg.base_offset.0));
                }
            }
            (
                candidates,
                st.log_start_offset.0,
                st.written_end.0,
                st.config.index_interval_bytes,
            )
        };
        // Entered with no await since the range was chosen: a truncation waits for this read.
        let _reading = self.inner.readers.enter();
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
            let cached = CachedTail {
                cache: &self.inner.tail_cache,
                segment_base,
            };
            let found = read_from_segment(&files, start, size, read, cached)
                .await
                .map_err(|e| match e {
                    SegmentReadError::Io(e) => {
                        LogError::from_io(&self.inner.dir, "reading a segment", e)
                    }
                    SegmentReadError::Corrupt { position, reason } => LogError::CorruptSegment {
                        dir: self.inner.dir.clone(),
                        segment_base,
                        position,
                        offset,
                        reason,
                    },
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
            st.check_online(&self.inner.dir)?;
            let end = st.written_end.0;
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
            (target, st.log_start_offset.0, end)
        };
        let Some((files, start, size)) = target else {
            return Ok(None);
        };
        let _reading = self.inner.readers.enter();
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
}
