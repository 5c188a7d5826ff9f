//! ListOffsets v0 (`max_num_offsets`): the offsets "before" a time, Kafka's legacy answer.
//!
//! Kafka lists, oldest first, each segment's base offset (raised to the log start) with the
//! segment's last-modified time, plus the log end with the current time when the active
//! segment holds data. It then starts at the last entry for latest (-1), the first for
//! earliest (-2), or the last entry modified at or before the timestamp, and returns up to
//! `max_num_offsets` entries from there going back, highest offset first.

use super::partition_log::Log;

/// A segment as the legacy lookup sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentTime {
    pub base_offset: i64,
    pub last_modified_ms: i64,
}

/// The legacy offsets for `timestamp`; `end` is the log end offset readers may see, and
/// `end_has_data` whether the active segment holds records.
pub fn offsets_before(
    segments: &[SegmentTime],
    log_start: i64,
    end: i64,
    end_has_data: bool,
    now_ms: i64,
    timestamp: i64,
    max_num_offsets: i32,
) -> Vec<i64> {
    let mut entries: Vec<(i64, i64)> = segments
        .iter()
        .map(|s| (s.base_offset.max(log_start), s.last_modified_ms))
        .collect();
    if end_has_data {
        entries.push((end, now_ms));
    }
    let start = match timestamp {
        -1 => entries.len().checked_sub(1),
        -2 => (!entries.is_empty()).then_some(0),
        ts => entries.iter().rposition(|&(_, modified)| modified <= ts),
    };
    let Some(start) = start else {
        return Vec::new();
    };
    let take = usize::try_from(max_num_offsets).unwrap_or(0);
    let mut out: Vec<i64> = entries[..=start]
        .iter()
        .rev()
        .take(take)
        .map(|&(offset, _)| offset)
        .collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

impl Log {
    /// ListOffsets v0 for this log (see the module comment).
    pub fn legacy_offsets_before(
        &self,
        timestamp: i64,
        max_num_offsets: i32,
        now_ms: i64,
    ) -> Vec<i64> {
        let st = self.inner.state.borrow();
        let segments: Vec<SegmentTime> = st
            .segments
            .iter()
            .map(|s| SegmentTime {
                base_offset: s.base_offset.0,
                last_modified_ms: s.last_modified_ms,
            })
            .collect();
        let end_has_data = st.segments.last().is_some_and(|s| s.written.size > 0);
        offsets_before(
            &segments,
            st.log_start_offset.0,
            st.written_end.0,
            end_has_data,
            now_ms,
            timestamp,
            max_num_offsets,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segs() -> Vec<SegmentTime> {
        [(0, 100), (10, 200), (20, 300)]
            .iter()
            .map(|&(base_offset, last_modified_ms)| SegmentTime {
                base_offset,
                last_modified_ms,
            })
            .collect()
    }

    #[test]
    fn latest_lists_the_end_then_segment_bases() {
        assert_eq!(
            offsets_before(&segs(), 0, 25, true, 999, -1, 10),
            vec![25, 20, 10, 0]
        );
        assert_eq!(offsets_before(&segs(), 0, 25, true, 999, -1, 1), vec![25]);
        // An empty active segment adds no end entry: its base is the end.
        assert_eq!(
            offsets_before(&segs(), 0, 20, false, 999, -1, 2),
            vec![20, 10]
        );
    }

    #[test]
    fn earliest_is_the_log_start() {
        assert_eq!(offsets_before(&segs(), 5, 25, true, 999, -2, 10), vec![5]);
    }

    #[test]
    fn a_time_starts_at_the_last_segment_modified_by_then() {
        assert_eq!(
            offsets_before(&segs(), 0, 25, true, 999, 250, 10),
            vec![10, 0]
        );
        assert_eq!(
            offsets_before(&segs(), 0, 25, true, 999, 50, 10),
            Vec::<i64>::new()
        );
        assert_eq!(
            offsets_before(&segs(), 0, 25, true, 999, 0, 0),
            Vec::<i64>::new()
        );
    }

    #[test]
    fn an_empty_log_answers_its_start() {
        let one = [SegmentTime {
            base_offset: 0,
            last_modified_ms: 1,
        }];
        assert_eq!(offsets_before(&one, 0, 0, false, 9, -1, 1), vec![0]);
        assert_eq!(offsets_before(&one, 0, 0, false, 9, -2, 1), vec![0]);
    }
}
