//! The owning shard's side of Fetch: its partitions read in request order against the
//! response's byte budget ([`super::fetch_budget`]), one after another, so that a partition
//! past the budget is not read at all.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::log::LogError;
use crate::metrics::registry::{self as metrics, Stage};

use super::fetch_budget::{FetchBudget, ReadLimit};
use super::messages::{
    FetchReader, FetchedData, PartitionOp, PartitionRequest, PartitionResult, ShardReply,
    ShardRequest,
};
use super::Shard;
use crate::model::BrokerId;
use crate::partition::error::log_error;
use crate::partition::error::PartitionError;
use crate::partition::{self, Partition};
use crate::runtime;

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
                reader,
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
            let result = self
                .fetch_from(
                    &p,
                    *offset,
                    budget.limit_for(*max_bytes),
                    *known_end,
                    *reader,
                )
                .await;
            if let Ok(data) = &result {
                budget.spend(data.records.len());
            }
            results.push(PartitionResult::Fetch(result));
        }
        results
    }

    /// Waits until one of `partitions` (topic, partition, offset) has data at or past its
    /// offset, on whichever shards they live, or until `timeout`. Returns whether data came.
    pub async fn wait_for_data(
        self: &Rc<Self>,
        partitions: Vec<(String, i32, i64)>,
        timeout: Duration,
        log_end: bool,
    ) -> bool {
        let meta = self.metadata();
        let mut by_shard: HashMap<usize, Vec<(String, i32, i64)>> = HashMap::new();
        for (t, p, o) in partitions {
            if let Some(owner) = meta.shard_of(&t, p, self.count) {
                by_shard.entry(owner).or_default().push((t, p, o));
            }
        }
        if by_shard.is_empty() {
            futures_lite::future::or(runtime::sleep(timeout), self.stopping.wait()).await;
            return false;
        }
        let (tx, rx) = runtime::local_channel::<bool>(by_shard.len());
        let tx = Rc::new(tx);
        let waiting = by_shard.len();
        let timeout_ms = timeout.as_millis() as u64;
        for (owner, parts) in by_shard {
            let shard = Rc::clone(self);
            let tx_clone = Rc::clone(&tx);
            runtime::spawn_detached(async move {
                let got = if owner == shard.id {
                    shard.wait_local(&parts, timeout_ms, log_end).await
                } else {
                    matches!(
                        shard
                            .request(
                                owner,
                                ShardRequest::Partitions(PartitionRequest::WaitForData {
                                    partitions: parts,
                                    timeout_ms,
                                    log_end,
                                }),
                            )
                            .await,
                        Some(ShardReply::DataAvailable(true))
                    )
                };
                let _ = tx_clone.send(got).await;
            });
        }
        drop(tx);
        let first_data = async {
            for _ in 0..waiting {
                match rx.recv().await {
                    Some(true) => return true,
                    Some(false) => {}
                    None => return false,
                }
            }
            false
        };
        // Bounded even if a shard never answers (it may be stopping).
        let deadline = async {
            runtime::sleep(timeout + Duration::from_millis(50)).await;
            false
        };
        let stopping = async {
            self.stopping.wait().await;
            false
        };
        futures_lite::future::or(first_data, futures_lite::future::or(deadline, stopping)).await
    }

    /// Waits on this shard's `partitions` for their HW (or, with `log_end`, their written
    /// end) to pass the offsets.
    pub(super) async fn wait_local(
        &self,
        partitions: &[(String, i32, i64)],
        timeout_ms: u64,
        log_end: bool,
    ) -> bool {
        let (waker, woken) = partition::AppendWaker::new();
        let mut watching = false;
        for (t, i, offset) in partitions {
            let Some(p) = self.partition(t, *i) else {
                continue;
            };
            let end = if log_end {
                p.log.offsets().written_end_offset
            } else {
                p.high_watermark()
            };
            if end > *offset {
                return true;
            }
            if log_end {
                p.watch_appends(&waker);
            } else {
                p.watch_high_watermark(&waker);
            }
            watching = true;
        }
        if !watching {
            return false;
        }
        let appended = async { woken.await.is_some() };
        let timeout = async {
            futures_lite::future::or(
                runtime::sleep(Duration::from_millis(timeout_ms)),
                self.stopping.wait(),
            )
            .await;
            false
        };
        // Dropping `waker` on return unregisters it from every partition.
        futures_lite::future::or(appended, timeout).await
    }

    /// One partition's part of a Fetch: up to `limit` (`None`: the budget is spent, offsets
    /// only); nothing read when the reader's view still ends at `known_end`. A consumer reads
    /// below the HW; a follower's fetch is first checked by the leader (epochs, divergence)
    /// and reports the follower's position, which may propose an ISR expansion.
    pub(super) async fn fetch_from(
        self: &Rc<Self>,
        p: &Rc<Partition>,
        offset: i64,
        limit: Option<ReadLimit>,
        known_end: Option<i64>,
        reader: FetchReader,
    ) -> Result<FetchedData, PartitionError> {
        let (upper_bound, high_watermark) = match reader {
            FetchReader::Consumer {
                current_leader_epoch,
            } => {
                p.check_consumer_epoch(current_leader_epoch)?;
                let hw = p.high_watermark();
                (Some(hw), hw)
            }
            FetchReader::Replica {
                id,
                current_leader_epoch,
                last_fetched_epoch,
                log_start_offset,
            } => {
                let check = p.check_replica_fetch(
                    BrokerId(id),
                    offset,
                    current_leader_epoch,
                    last_fetched_epoch,
                    runtime::now_ms(),
                )?;
                p.record_follower_log_start(BrokerId(id), log_start_offset);
                if let Some(proposal) = check.propose {
                    self.submit_isr_change(p, proposal);
                }
                if let Some(diverging) = check.diverging {
                    let o = p.log.offsets();
                    return Ok(FetchedData {
                        records: Bytes::new(),
                        high_watermark: check.high_watermark,
                        log_start_offset: o.log_start_offset,
                        read_end: o.written_end_offset,
                        diverging: Some(diverging),
                    });
                }
                (None, check.high_watermark)
            }
        };
        let read_end = upper_bound.unwrap_or_else(|| p.log.offsets().written_end_offset);
        let unchanged = known_end.is_some_and(|end| read_end == end);
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
            .read_within(offset, limit.max_bytes, upper_bound, limit.whole_first)
            .await;
        metrics::record_stage(Stage::Read, started.elapsed());
        if let (Ok(r), FetchReader::Replica { .. }) = (&read, reader) {
            p.count_replica_bytes(0, r.records.len() as u64);
        }
        read.map(|r| FetchedData {
            records: r.records,
            high_watermark,
            log_start_offset: r.log_start_offset,
            read_end,
            diverging: None,
        })
        .map_err(|e| {
            if matches!(e, LogError::CorruptSegment { .. }) {
                p.log_corrupt_read(offset, &e);
            }
            log_error(e)
        })
    }
}
