//! Long polls across shards: a Fetch waiting for data on partitions of several shards waits
//! on each owner's partitions (`PartitionManager::wait_for_data`) and wakes on the first.

use crate::util::hash::HashMap;
use std::rc::Rc;
use std::time::Duration;

use super::messages::{PartitionRequest, ShardReply, ShardRequest};
use super::Shard;
use crate::runtime;

impl Shard {
    /// Waits until one of `partitions` (topic, partition, offset) has data at or past its
    /// offset, on whichever shards they live, or until `timeout`. Returns whether data came.
    pub async fn wait_for_data(
        self: &Rc<Self>,
        partitions: Vec<(String, i32, i64)>,
        timeout: Duration,
        log_end: bool,
    ) -> bool {
        let meta = self.image();
        let mut by_shard: HashMap<usize, Vec<(String, i32, i64)>> = HashMap::default();
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
        // Rounded up: a wait of less than a millisecond left must not become no wait at all,
        // or the fetch loop reads and waits again and again until its deadline (in a
        // simulation, where time moves only when nothing runs, for ever).
        let timeout_ms = timeout.as_micros().div_ceil(1000) as u64;
        for (owner, parts) in by_shard {
            let shard = Rc::clone(self);
            let tx_clone = Rc::clone(&tx);
            runtime::spawn_detached(async move {
                let got = if owner == shard.id {
                    shard
                        .partitions
                        .wait_for_data(&parts, timeout_ms, log_end, &shard.stopping)
                        .await
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
}
