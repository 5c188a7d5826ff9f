//! Cluster mode: a new metadata image applied on every shard (logs placed, partition roles
//! applied) before the broker publishes it, so that a client told this broker leads a
//! partition finds it leading; then the image published to every shard's metadata cache.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::messages::{MetadataRequest, ShardRequest};
use super::Shard;
use crate::metadata::MetadataImage;
use crate::runtime;

/// How long the publisher waits for a shard to apply an image before publishing anyway (a
/// shard stuck on a disk must not hold back the metadata of all the others for long; opening
/// the logs of a large new topic takes a while on a busy machine).
const APPLY_TIMEOUT: Duration = Duration::from_secs(30);

impl Shard {
    /// Every shard places its logs and leads or follows as `image` says; returns once all
    /// did (or after [`APPLY_TIMEOUT`]). The publisher calls this before publishing `image`,
    /// so a client told that this broker leads a partition finds it leading (Kafka's brokers
    /// too apply a metadata delta before it reaches their metadata cache).
    pub async fn apply_everywhere(self: &Rc<Self>, image: &Arc<MetadataImage>) {
        let mut tasks = Vec::with_capacity(self.count);
        for to in 0..self.count {
            let shard = Rc::clone(self);
            let image = Arc::clone(image);
            tasks.push(runtime::spawn(async move {
                let apply = async {
                    if to == shard.id {
                        shard.adopt_image(image).await;
                        true
                    } else {
                        shard
                            .request(to, ShardRequest::Metadata(MetadataRequest::Apply(image)))
                            .await
                            .is_some()
                    }
                };
                let late = async {
                    runtime::sleep(APPLY_TIMEOUT).await;
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
                    "a shard did not apply new metadata in time; publishing anyway"
                );
            }
        }
    }

    /// Every shard answers from `image` from now on; returns once all took it. Called after
    /// [`Shard::apply_everywhere`], in publication order (Kafka's brokers publish a new
    /// image to their metadata cache once its listeners applied the delta).
    pub async fn publish_everywhere(self: &Rc<Self>, image: Arc<MetadataImage>) {
        let mut tasks = Vec::with_capacity(self.count);
        for to in 0..self.count {
            if to == self.id {
                continue;
            }
            let shard = Rc::clone(self);
            let image = Arc::clone(&image);
            tasks.push(runtime::spawn(async move {
                let sent = shard
                    .request(to, ShardRequest::Metadata(MetadataRequest::Publish(image)))
                    .await;
                (to, sent.is_some())
            }));
        }
        self.metadata_cache.publish(image);
        for t in tasks {
            let (to, published) = t.await;
            if !published {
                tracing::warn!(shard = to, "a shard did not take the published metadata");
            }
        }
    }
}
