//! The owning shard's side of Fetch: its partitions read in request order against the
//! response's byte budget ([`super::fetch_budget`]), one after another, so that a partition
//! past the budget is not read at all.

use std::rc::Rc;
use std::time::Instant;

use crate::log::LogError;
use crate::metrics::registry::{self as metrics, Stage};

use super::errors::log_error;
use super::fetch_budget::{FetchBudget, ReadLimit};
use super::messages::{FetchedData, PartitionError, PartitionOp, PartitionResult};
use super::partition::Partition;
use super::Shard;

impl Shard {
    /// Runs the fetches `ops` (all of this shard) in order within `max_bytes` response bytes.
    pub(super) async fn execute_fetches(
        self: &Rc<Self>,
        ops: Vec<PartitionOp>,
        max_bytes: usize,
    ) -> Vec<PartitionResult> {
        let mut budget = FetchBudget::new(max_bytes);
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            let PartitionOp::Fetch {
                offset,
                max_bytes,
                known_end,
                ..
            } = &op
            else {
                // Only fetches are budgeted; anything else runs as usual.
                results.push(self.execute_local(op).await);
                continue;
            };
            let p = match self.online_for(&op) {
                Ok(p) => p,
                Err(result) => {
                    results.push(result);
                    continue;
                }
            };
            let result = fetch_from(&p, *offset, budget.limit_for(*max_bytes), *known_end).await;
            if let Ok(data) = &result {
                budget.spend(data.records.len());
            }
            results.push(PartitionResult::Fetch(result));
        }
        results
    }
}

/// One partition's part of a Fetch: up to `limit` (`None`: the budget is spent, offsets only);
/// nothing read when the log still ends at `known_end`.
pub(super) async fn fetch_from(
    p: &Partition,
    offset: i64,
    limit: Option<ReadLimit>,
    known_end: Option<i64>,
) -> Result<FetchedData, PartitionError> {
    let unchanged = known_end.is_some_and(|end| p.log.offsets().written_end_offset == end);
    let limit = match limit {
        Some(l) if !unchanged => l,
        _ => ReadLimit {
            max_bytes: 0,
            whole_first: false,
        },
    };
    let started = Instant::now();
    let read = p
        .log
        .read_within(offset, limit.max_bytes, None, limit.whole_first)
        .await;
    metrics::record_stage(Stage::Read, started.elapsed());
    read.map(|r| FetchedData {
        records: r.records,
        high_watermark: r.log_end_offset,
        log_start_offset: r.log_start_offset,
    })
    .map_err(|e| {
        if matches!(e, LogError::CorruptSegment { .. }) {
            p.log_corrupt_read(offset, &e);
        }
        log_error(e)
    })
}
