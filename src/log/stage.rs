//! Staging an append: validating the batches and assigning their offsets, rolling segments
//! as the policy says, and copying the bytes into the committer's write buffers. No I/O.

use super::config::LogConfig;
use super::error::LogError;
use super::log_state::{LogState, PendingWrite};
use super::partition_log::{AppendInfo, AppendOptions};
use super::policy::{self, RollInputs};
use super::segment::Segment;
use crate::model::Offset;
use crate::protocol::record_batch::{self, BatchHeader, TimestampType};
use crate::runtime::write_buffer;
use crate::runtime::{FileIo, WriteBuffer};

/// Where an append's offsets come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Offsets {
    /// A leader's (or single node's) append: offsets assigned from the log end.
    Assign,
    /// A follower's: the leader's offsets, epochs and timestamps are kept; the batches must
    /// continue the log exactly.
    Keep,
}

/// Validates every batch in `records`; returns their headers. A follower's batches were
/// accepted by the leader under its own limits, so `max.message.bytes` is not checked again.
pub(super) fn validate_all(
    records: &[u8],
    config: &LogConfig,
    offsets: Offsets,
) -> Result<Vec<BatchHeader>, LogError> {
    let mut headers = Vec::new();
    let mut position = 0;
    while position < records.len() {
        let rest = &records[position..];
        let header = record_batch::validate(rest)
            .map_err(|source| LogError::InvalidBatch { position, source })?;
        let len = header.total_len();
        if offsets == Offsets::Assign && len > config.max_message_bytes {
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

/// A follower's batches must start at `log_end` and follow one another without a gap.
pub(super) fn check_continues(headers: &[BatchHeader], log_end: Offset) -> Result<(), LogError> {
    let mut expected = log_end.0;
    for h in headers {
        if h.base_offset != expected {
            return Err(LogError::ReplicaGap {
                expected,
                found: h.base_offset,
            });
        }
        expected = h.next_offset();
    }
    Ok(())
}

/// Bytes of new data a direct write buffer is made for at least: appends staged while a
/// flight is under way share it, and a larger one is rarely needed (a flight that outgrows it
/// continues in a second buffer, written right after the first).
const DIRECT_BUFFER_BYTES: usize = 128 << 10;

/// The pending write that the next `len` bytes, at `position` of the active segment, go into:
/// the last one if they continue it and fit, else a new one. A direct write buffer starts on
/// an alignment boundary with the bytes the segment already has from there (its tail).
fn open_write_buffer(st: &mut LogState, position: u64, len: usize) -> &mut PendingWrite {
    let active = &st.segments[st.segments.len() - 1];
    let segment_base = active.base_offset;
    let continues = st.pending.last().filter(|last| {
        last.segment_base == segment_base && last.position + last.data.len() as u64 == position
    });
    let reusable = continues.is_some_and(|last| last.data.fits(len));
    if !reusable {
        let head: Vec<u8> = match (continues, active.io) {
            (_, FileIo::Buffered) => Vec::new(),
            (Some(last), FileIo::Direct) => last.data.tail_block(last.position).to_vec(),
            (None, FileIo::Direct) => active.tail.clone(),
        };
        debug_assert!(
            active.io == FileIo::Buffered
                || head.len() as u64 == position - write_buffer::align_down(position),
            "a direct write starts on the boundary before its position"
        );
        let capacity = match active.io {
            FileIo::Buffered => len,
            FileIo::Direct => len.max(DIRECT_BUFFER_BYTES),
        };
        st.pending.push(PendingWrite {
            segment_base,
            position: position - head.len() as u64,
            data: WriteBuffer::new(active.io, &head, capacity),
        });
    }
    let last = st.pending.len() - 1;
    &mut st.pending[last]
}

/// Assigns offsets, rolls when needed and stages the bytes for the committer. No I/O.
pub(super) fn stage(
    st: &mut LogState,
    records: &[u8],
    headers: &[BatchHeader],
    options: AppendOptions,
    offsets: Offsets,
) -> AppendInfo {
    let now = options.now_ms;
    let log_append_time = offsets == Offsets::Assign
        && st.config.message_timestamp_type == TimestampType::LogAppendTime;
    let interval = st.config.index_interval_bytes;
    let first_offset = st.next_offset();
    let mut record_count = 0u64;
    let mut position_in_request = 0;
    for header in headers {
        let len = header.total_len();
        // The batch header's (and the wire's) offsets are bare numbers.
        let base_offset = st.next_offset().0;
        let count = i64::from(header.last_offset_delta) + 1;
        let active = st.active();
        let jitter_ms = active.rolling_base_ms.map_or(0, |started| {
            policy::segment_jitter_ms(&st.config, active.base_offset, started)
        });
        let roll = policy::should_roll(
            &st.config,
            RollInputs {
                active_size: active.size,
                active_base_offset: active.base_offset,
                active_rolling_base_ms: active.rolling_base_ms,
                batch_len: len as u64,
                batch_last_offset: Offset(base_offset + count - 1),
                now_ms: now,
                active_index_entries: (active.offset_index.len(), active.time_index.len()),
                jitter_ms,
            },
        );
        if let Some(reason) = roll {
            tracing::debug!(?reason, base_offset, "rolling segment");
            st.active_mut().seal();
            st.segments
                .push(Segment::new(Offset(base_offset), now, st.config.io));
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
        record_count += header.record_count.max(0) as u64;
        // Copy the batch once, into the write buffer it goes out with, then patch it there.
        let write = open_write_buffer(st, position, len);
        let stored_bytes = write.data.extend(source);
        record_batch::set_base_offset(stored_bytes, base_offset);
        if let (Offsets::Assign, Some(epoch)) = (offsets, options.leader_epoch) {
            record_batch::set_partition_leader_epoch(stored_bytes, epoch);
        }
        if log_append_time {
            record_batch::set_log_append_time(stored_bytes, now);
        }
    }
    st.unflushed_records += record_count;
    st.oldest_unflushed_ms.get_or_insert(now);
    AppendInfo {
        base_offset: first_offset,
        last_offset: Offset(st.next_offset().0 - 1),
        log_append_time_ms: if log_append_time { now } else { -1 },
        log_start_offset: st.log_start_offset,
        record_count,
    }
}
