//! Cluster mode: partition roles applied on every shard before the broker publishes new
//! metadata, so that a client told this broker leads a partition finds it leading.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::messages::{MetadataRequest, ShardRequest};
use super::Shard;
use crate::controller::published::ClusterSummary;
use crate::runtime;

/// How long the publisher waits for a shard to apply new roles before publishing anyway
/// (a shard stuck on a disk must not hold back the metadata of all the others).
const APPLY_ROLES_TIMEOUT: Duration = Duration::from_secs(5);

impl Shard {
    /// Every shard leads or follows as `summary` says; returns once all did (or after
    /// [`APPLY_ROLES_TIMEOUT`]). The publisher calls this before publishing `summary`, so
    /// a client told that this broker leads a partition finds it leading (Kafka's brokers
    /// too apply a metadata delta before it reaches their metadata cache).
    pub async fn apply_roles_everywhere(self: &Rc<Self>, summary: &Arc<ClusterSummary>) {
        let mut tasks = Vec::with_capacity(self.count);
        for to in 0..self.count {
            let shard = Rc::clone(self);
            let summary = Arc::clone(summary);
            tasks.push(runtime::spawn(async move {
                let apply = async {
                    if to == shard.id {
                        if let Some(manager) = shard.replicas.get() {
                            manager.apply_roles(summary).await;
                        }
                        true
                    } else {
                        shard
                            .request(
                                to,
                                ShardRequest::Metadata(MetadataRequest::ApplyRoles(summary)),
                            )
                            .await
                            .is_some()
                    }
                };
                let late = async {
                    runtime::sleep(APPLY_ROLES_TIMEOUT).await;
                    false
                };
                (to, futures_lite::future::or(apply, late).await)
            }));
        }
        for t in tasks {
            let (to, applied) = t.await;
            if !applied {
                tracing::warn!(
                    shard = to,
                    "a shard did not apply new partition roles in time; publishing anyway"
                );
            }
        }
    }
}
