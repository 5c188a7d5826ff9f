//! The byte budget of one Fetch response (Kafka's KIP-74), as pure decisions.
//!
//! Partitions are read in request order against one budget, `max_bytes` of the request
//! (capped by the broker's `fetch.max.bytes`); each partition reads at most its own
//! `partition_max_bytes` and at most what is left. The first batch of the response is
//! returned whole even if it is larger than both limits, so that a consumer always makes
//! progress; after that, a batch that does not fit is not returned.

use bytes::Bytes;

use crate::protocol::record_batch::BatchHeader;

/// What one partition may read: at most `max_bytes`, except that `whole_first` lets its
/// first batch through whatever its size (only while the response holds nothing yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimit {
    pub max_bytes: usize,
    pub whole_first: bool,
}

/// The bytes left in one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchBudget {
    remaining: usize,
    /// Whether any record bytes are in the response already.
    started: bool,
}

impl FetchBudget {
    pub fn new(max_bytes: usize) -> FetchBudget {
        FetchBudget {
            remaining: max_bytes,
            started: false,
        }
    }

    /// The limit of the next partition in request order, or `None` when the budget is spent
    /// and the partition is to be answered without records (its offsets only).
    pub fn limit_for(&self, partition_max_bytes: usize) -> Option<ReadLimit> {
        let max_bytes = partition_max_bytes.min(self.remaining);
        if self.started && max_bytes == 0 {
            return None;
        }
        Some(ReadLimit {
            max_bytes,
            whole_first: !self.started,
        })
    }

    /// Records that `len` bytes went into the response.
    pub fn spend(&mut self, len: usize) {
        self.remaining = self.remaining.saturating_sub(len);
        self.started |= len > 0;
    }

    /// Cuts `records` (whole batches, as a log read returns them) to what this budget still
    /// allows, spends it and returns the kept prefix (whole batches only).
    pub fn take(&mut self, records: Bytes, partition_max_bytes: usize) -> Bytes {
        let Some(limit) = self.limit_for(partition_max_bytes) else {
            return Bytes::new();
        };
        let kept = records.slice(..prefix_len(&records, limit));
        self.spend(kept.len());
        kept
    }
}

/// Length of the longest prefix of whole batches of `records` within `limit`.
pub fn prefix_len(records: &[u8], limit: ReadLimit) -> usize {
    let mut end = 0usize;
    while let Ok(header) = BatchHeader::parse(&records[end..]) {
        let next = end.saturating_add(header.total_len());
        let fits = next <= limit.max_bytes || (end == 0 && limit.whole_first);
        if next > records.len() || !fits {
            break;
        }
        end = next;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch_builder::BatchBuilder;

    fn batch(value_len: usize) -> Bytes {
        let mut b = BatchBuilder::new(0);
        b.push(None, Some(&vec![b'x'; value_len]), 0, &[]);
        b.build()
    }

    fn concat(parts: &[&Bytes]) -> Bytes {
        Bytes::from(
            parts
                .iter()
                .flat_map(|b| b.iter().copied())
                .collect::<Vec<u8>>(),
        )
    }

    #[test]
    fn first_batch_whole_then_nothing_past_the_budget() {
        let big = batch(1000);
        let small = batch(10);
        let mut budget = FetchBudget::new(100);
        // Larger than max_bytes, but the first of the response: whole.
        let first = budget.take(concat(&[&big, &small]), 1 << 20);
        assert_eq!(first, big);
        // The budget is spent: later partitions get nothing, not even a small batch.
        assert_eq!(budget.limit_for(1 << 20), None);
        assert!(budget.take(small.clone(), 1 << 20).is_empty());
    }

    #[test]
    fn partitions_share_the_budget_and_each_keeps_its_own_limit() {
        let b = batch(50);
        let one = b.len();
        let mut budget = FetchBudget::new(one * 5);
        // Partition limit of two batches (and a bit): two kept.
        let kept = budget.take(concat(&[&b, &b, &b]), one * 2 + 1);
        assert_eq!(kept.len(), one * 2);
        // Three left in the response budget.
        let kept = budget.take(concat(&[&b, &b, &b, &b]), 1 << 20);
        assert_eq!(kept.len(), one * 3);
        assert_eq!(budget.limit_for(1 << 20), None);
    }

    #[test]
    fn a_later_partition_never_gets_a_batch_larger_than_what_is_left() {
        let small = batch(10);
        let big = batch(500);
        let mut budget = FetchBudget::new(small.len() + 100);
        assert_eq!(budget.take(small.clone(), 1 << 20), small);
        let limit = budget.limit_for(1 << 20).expect("bytes left");
        assert!(!limit.whole_first);
        assert!(budget.take(big, 1 << 20).is_empty());
        // An empty partition spends nothing and does not count as the first data.
        let mut fresh = FetchBudget::new(10);
        assert!(fresh.take(Bytes::new(), 1 << 20).is_empty());
        assert!(fresh.limit_for(0).is_some_and(|l| l.whole_first));
    }

    #[test]
    fn partial_or_garbage_tails_are_not_returned() {
        let b = batch(20);
        let torn = concat(&[&b, &b.slice(..b.len() - 1)]);
        let limit = ReadLimit {
            max_bytes: usize::MAX,
            whole_first: true,
        };
        assert_eq!(prefix_len(&torn, limit), b.len());
        assert_eq!(prefix_len(b"garbage", limit), 0);
        assert_eq!(prefix_len(&[], limit), 0);
    }
}
