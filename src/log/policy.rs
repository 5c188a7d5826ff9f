//! Decisions of the log, as pure functions of plain inputs and the time: when to roll, what
//! retention deletes, when to flush. No I/O here, so every rule is tested by table.

use super::config::LogConfig;
use crate::model::Offset;

/// Why the active segment is rolled before an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollReason {
    /// The batch would take the segment past `segment.bytes`.
    Size,
    /// The segment is older than `segment.ms`.
    Age,
    /// Offsets would no longer fit the index's 32-bit relative offsets.
    OffsetOverflow,
    /// The offset or time index holds what `segment.index.bytes` allows.
    IndexFull,
}

/// What `should_roll` looks at.
#[derive(Debug, Clone, Copy)]
pub struct RollInputs {
    pub active_size: u64,
    pub active_base_offset: Offset,
    /// When the active segment got its first batch; `None` while it is empty.
    pub active_rolling_base_ms: Option<i64>,
    pub batch_len: u64,
    pub batch_last_offset: Offset,
    pub now_ms: i64,
    /// Entries of the active segment's offset index and time index.
    pub active_index_entries: (usize, usize),
    /// Taken off `segment.ms` for the active segment (see [`segment_jitter_ms`]).
    pub jitter_ms: i64,
}

/// The active segment's share of `segment.jitter.ms`: Kafka draws it at random per segment;
/// here it is a hash of when the segment got its first batch and its base offset, so that
/// segments started at different moments roll at different ages, and a test can predict it.
pub fn segment_jitter_ms(config: &LogConfig, base_offset: Offset, rolling_base_ms: i64) -> i64 {
    let bound = config.segment_jitter_ms.min(config.segment_ms);
    if bound <= 0 {
        return 0;
    }
    // splitmix64 of the two inputs: well spread for consecutive values.
    let mut x = (base_offset.0 as u64) ^ (rolling_base_ms as u64).rotate_left(32);
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x % bound as u64) as i64
}

/// Kafka's `shouldRoll`: an empty segment is never rolled (a batch larger than the segment
/// size gets a segment of its own).
pub fn should_roll(config: &LogConfig, inputs: RollInputs) -> Option<RollReason> {
    if inputs.active_size == 0 {
        return None;
    }
    if inputs.active_size + inputs.batch_len > config.effective_segment_bytes() {
        return Some(RollReason::Size);
    }
    let (max_offset_entries, max_time_entries) = config.max_index_entries();
    if inputs.active_index_entries.0 >= max_offset_entries
        || inputs.active_index_entries.1 >= max_time_entries
    {
        return Some(RollReason::IndexFull);
    }
    if let Some(base) = inputs.active_rolling_base_ms {
        let segment_ms = config.segment_ms.saturating_sub(inputs.jitter_ms);
        if config.segment_ms >= 0 && inputs.now_ms.saturating_sub(base) > segment_ms {
            return Some(RollReason::Age);
        }
    }
    if inputs.batch_last_offset.0 - inputs.active_base_offset.0 > i64::from(u32::MAX) {
        return Some(RollReason::OffsetOverflow);
    }
    None
}

/// A segment as retention sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSummary {
    pub base_offset: Offset,
    pub next_offset: Offset,
    pub size: u64,
    /// Largest record timestamp (or last-modified time when there is none).
    pub largest_timestamp: i64,
}

/// Why retention deletes segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetentionReason {
    Time,
    Size,
    LogStartOffset,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionPlan {
    /// How many of the oldest segments to delete.
    pub delete_count: usize,
    pub reason: Option<RetentionReason>,
}

/// Which of the oldest segments retention deletes. `segments` is oldest first, the last one
/// being the active segment, which is never deleted. Each rule deletes a run of segments from
/// the oldest while it holds, as Kafka does; the rules are applied one after the other.
pub fn plan_retention(
    config: &LogConfig,
    segments: &[SegmentSummary],
    log_start_offset: Offset,
    now_ms: i64,
) -> RetentionPlan {
    let deletable = segments.len().saturating_sub(1);
    let mut count = 0;
    let mut reason = None;

    // Explicit log start (DeleteRecords) : a segment whose every offset is below it goes.
    while count < deletable && segments[count + 1].base_offset <= log_start_offset {
        count += 1;
        reason = Some(RetentionReason::LogStartOffset);
    }
    // Retention by time and size is the `delete` cleanup policy (a compact-only topic keeps
    // its segments; the cleaner shrinks it instead).
    if config.cleanup_policy.delete && config.retention_ms >= 0 {
        while count < deletable
            && now_ms.saturating_sub(segments[count].largest_timestamp) > config.retention_ms
        {
            count += 1;
            reason = Some(RetentionReason::Time);
        }
    }
    if config.cleanup_policy.delete && config.retention_bytes >= 0 {
        let total: u64 = segments[count..].iter().map(|s| s.size).sum();
        let mut excess = total as i64 - config.retention_bytes;
        while count < deletable && excess - segments[count].size as i64 >= 0 {
            excess -= segments[count].size as i64;
            count += 1;
            reason = Some(RetentionReason::Size);
        }
    }
    RetentionPlan {
        delete_count: count,
        reason,
    }
}

/// Whether the flush policy (`flush.messages`, `flush.ms`) asks for an fdatasync now.
pub fn flush_due(
    config: &LogConfig,
    unflushed_records: u64,
    oldest_unflushed_ms: Option<i64>,
    now_ms: i64,
) -> bool {
    if unflushed_records == 0 {
        return false;
    }
    if unflushed_records >= config.flush_messages {
        return true;
    }
    match oldest_unflushed_ms {
        Some(t) => config.flush_ms != i64::MAX && now_ms.saturating_sub(t) >= config.flush_ms,
        None => false,
    }
}

/// What a truncation to an offset does to the segments (by base offset, oldest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncationPlan {
    /// Segments from this index on start at or after the offset: removed whole.
    pub first_removed: usize,
    /// The segment that holds the offset, cut inside; `None` when the offset is at or before
    /// the first segment's base (nothing is kept: an empty segment starts at the offset).
    pub cut: Option<usize>,
}

pub fn plan_truncation(segment_bases: &[Offset], offset: Offset) -> TruncationPlan {
    let first_removed = segment_bases.partition_point(|&base| base < offset);
    TruncationPlan {
        first_removed,
        cut: first_removed.checked_sub(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roll(
        active_size: u64,
        base_ms: Option<i64>,
        batch_len: u64,
        now: i64,
    ) -> Option<RollReason> {
        let config = LogConfig {
            segment_bytes: 1000,
            segment_ms: 100,
            ..LogConfig::default()
        };
        should_roll(
            &config,
            RollInputs {
                active_size,
                active_base_offset: Offset(0),
                active_rolling_base_ms: base_ms,
                batch_len,
                batch_last_offset: Offset(10),
                now_ms: now,
                active_index_entries: (0, 0),
                jitter_ms: 0,
            },
        )
    }

    #[test]
    fn roll_rules() {
        assert_eq!(
            roll(0, None, 5000, 0),
            None,
            "empty segment takes any batch"
        );
        assert_eq!(roll(500, Some(0), 500, 50), None, "exactly full is fine");
        assert_eq!(roll(500, Some(0), 501, 50), Some(RollReason::Size));
        assert_eq!(roll(10, Some(0), 10, 100), None);
        assert_eq!(roll(10, Some(0), 10, 101), Some(RollReason::Age));
        let overflow = should_roll(
            &LogConfig::default(),
            RollInputs {
                active_size: 10,
                active_base_offset: Offset(0),
                active_rolling_base_ms: Some(0),
                batch_len: 10,
                batch_last_offset: Offset(i64::from(u32::MAX) + 1),
                now_ms: 0,
                active_index_entries: (0, 0),
                jitter_ms: 0,
            },
        );
        assert_eq!(overflow, Some(RollReason::OffsetOverflow));
    }

    #[test]
    fn segment_index_bytes_and_jitter() {
        let config = LogConfig {
            segment_index_bytes: 80,
            segment_ms: 100,
            segment_jitter_ms: 50,
            ..LogConfig::default()
        };
        let inputs = |entries, now, jitter_ms| RollInputs {
            active_size: 10,
            active_base_offset: Offset(0),
            active_rolling_base_ms: Some(0),
            batch_len: 10,
            batch_last_offset: Offset(10),
            now_ms: now,
            active_index_entries: entries,
            jitter_ms,
        };
        // 80 bytes: 10 offset entries, 6 time entries.
        assert_eq!(should_roll(&config, inputs((9, 5), 0, 0)), None);
        assert_eq!(
            should_roll(&config, inputs((10, 0), 0, 0)),
            Some(RollReason::IndexFull)
        );
        assert_eq!(
            should_roll(&config, inputs((0, 6), 0, 0)),
            Some(RollReason::IndexFull)
        );
        assert_eq!(
            should_roll(&config, inputs((0, 0), 71, 30)),
            Some(RollReason::Age)
        );
        assert_eq!(should_roll(&config, inputs((0, 0), 70, 30)), None);
        let jitters: std::collections::BTreeSet<i64> = (0..100)
            .map(|t| segment_jitter_ms(&config, Offset(0), t))
            .collect();
        assert!(jitters.iter().all(|j| (0..50).contains(j)));
        assert!(jitters.len() > 10, "spread: {jitters:?}");
        assert_eq!(segment_jitter_ms(&LogConfig::default(), Offset(0), 5), 0);
    }

    #[test]
    fn compact_only_topics_keep_their_segments() {
        let config = LogConfig {
            retention_ms: 0,
            retention_bytes: 0,
            cleanup_policy: crate::log::config::CleanupPolicy {
                delete: false,
                compact: true,
            },
            ..LogConfig::default()
        };
        let s = segs(&[(0, 100, 0), (10, 100, 0), (20, 100, 0)]);
        assert_eq!(plan_retention(&config, &s, Offset(0), 1000).delete_count, 0);
        assert_eq!(
            plan_retention(&config, &s, Offset(15), 1000).delete_count,
            1,
            "DeleteRecords still"
        );
    }

    fn segs(spec: &[(i64, u64, i64)]) -> Vec<SegmentSummary> {
        // (base offset, size, largest timestamp); next offset = next base
        spec.iter()
            .enumerate()
            .map(|(i, &(base, size, ts))| SegmentSummary {
                base_offset: Offset(base),
                next_offset: Offset(spec.get(i + 1).map(|s| s.0).unwrap_or(base + 10)),
                size,
                largest_timestamp: ts,
            })
            .collect()
    }

    #[test]
    fn retention_table() {
        let s = segs(&[(0, 100, 10), (10, 100, 20), (20, 100, 30), (30, 50, 40)]);
        // (retention_ms, retention_bytes, log_start, now) -> (count, reason)
        type Case = (i64, i64, i64, i64, usize, Option<RetentionReason>);
        let cases: &[Case] = &[
            (-1, -1, 0, 1000, 0, None),
            (15, -1, 0, 30, 1, Some(RetentionReason::Time)),
            (0, -1, 0, 1000, 3, Some(RetentionReason::Time)),
            (-1, 250, 0, 0, 1, Some(RetentionReason::Size)),
            (-1, 0, 0, 0, 3, Some(RetentionReason::Size)),
            (-1, 350, 0, 0, 0, None),
            (-1, -1, 10, 0, 1, Some(RetentionReason::LogStartOffset)),
            (-1, -1, 15, 0, 1, Some(RetentionReason::LogStartOffset)),
            (-1, -1, 1000, 0, 3, Some(RetentionReason::LogStartOffset)),
        ];
        for &(ms, bytes, start, now, count, reason) in cases {
            let config = LogConfig {
                retention_ms: ms,
                retention_bytes: bytes,
                ..LogConfig::default()
            };
            let plan = plan_retention(&config, &s, Offset(start), now);
            assert_eq!(
                (plan.delete_count, plan.reason),
                (count, reason),
                "case ms={ms} bytes={bytes} start={start} now={now}"
            );
        }
    }

    #[test]
    fn retention_never_deletes_the_only_segment() {
        let s = segs(&[(0, 100, 0)]);
        let config = LogConfig {
            retention_ms: 0,
            retention_bytes: 0,
            ..LogConfig::default()
        };
        assert_eq!(
            plan_retention(&config, &s, Offset(100), 1000).delete_count,
            0
        );
    }

    #[test]
    fn flush_policy() {
        let c = LogConfig {
            flush_messages: 10,
            flush_ms: 100,
            ..LogConfig::default()
        };
        assert!(!flush_due(&c, 0, None, 0));
        assert!(!flush_due(&c, 9, Some(0), 99));
        assert!(flush_due(&c, 10, Some(0), 0));
        assert!(flush_due(&c, 1, Some(0), 100));
        assert!(!flush_due(
            &LogConfig::default(),
            1_000_000,
            Some(0),
            i64::MAX
        ));
    }

    #[test]
    fn truncation_removes_later_segments_and_cuts_the_one_holding_the_offset() {
        let bases = [0, 100, 200].map(Offset);
        let plan = |offset| plan_truncation(&bases, Offset(offset));
        assert_eq!(
            plan(150),
            TruncationPlan {
                first_removed: 2,
                cut: Some(1)
            }
        );
        assert_eq!(
            plan(200),
            TruncationPlan {
                first_removed: 2,
                cut: Some(1)
            }
        );
        assert_eq!(
            plan(201),
            TruncationPlan {
                first_removed: 3,
                cut: Some(2)
            }
        );
        assert_eq!(
            plan(0),
            TruncationPlan {
                first_removed: 0,
                cut: None
            }
        );
        assert_eq!(
            plan(1),
            TruncationPlan {
                first_removed: 1,
                cut: Some(0)
            }
        );
    }
}
