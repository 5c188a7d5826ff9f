//! What every shard's handlers need of the cluster metadata in cluster mode: the live
//! brokers with their advertised endpoints, and the controller. Shard 0 applies the metadata
//! log and publishes a new [`ClusterSummary`] after every change; the other shards read the
//! latest one when they answer Metadata or DescribeCluster.
//!
//! Shared across threads behind a mutex that is held only to swap or clone an `Arc`: a
//! Metadata request is not on the produce/fetch path, and no shard waits for another.

use std::sync::{Arc, Mutex};

use super::cluster_metadata::ClusterMetadata;
use crate::model::{BrokerId, MetadataOffset};

/// A live broker as clients are told about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBroker {
    pub id: BrokerId,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterSummary {
    /// Registered and unfenced, by id.
    pub brokers: Vec<LiveBroker>,
    /// Registered but fenced.
    pub fenced: Vec<BrokerId>,
    /// The Raft leader (the active controller), if known.
    pub controller: Option<BrokerId>,
    pub metadata_offset: Option<MetadataOffset>,
    /// The applied metadata itself (topics are shared `Arc`s, so this is no deep copy).
    pub metadata: Arc<ClusterMetadata>,
}

impl ClusterSummary {
    /// The summary of `meta`; a broker's first advertised endpoint is the one given out.
    pub fn of(meta: &ClusterMetadata, controller: Option<BrokerId>) -> ClusterSummary {
        let mut summary = ClusterSummary {
            controller,
            metadata_offset: meta.applied_offset(),
            metadata: Arc::new(meta.clone()),
            ..ClusterSummary::default()
        };
        for b in meta.brokers() {
            match (b.fenced, b.endpoints.first()) {
                (false, Some(e)) => summary.brokers.push(LiveBroker {
                    id: b.id,
                    host: e.host.clone(),
                    port: e.port,
                    rack: b.rack.clone(),
                }),
                _ => summary.fenced.push(b.id),
            }
        }
        summary
    }

    /// The broker named as controller to clients: any live broker will do (clients cannot
    /// reach the quorum); the active controller when it is one of them.
    pub fn client_controller(&self) -> Option<BrokerId> {
        self.controller
            .filter(|c| self.brokers.iter().any(|b| b.id == *c))
            .or_else(|| self.brokers.first().map(|b| b.id))
    }
}

/// The latest summary, shared by every shard of the process.
#[derive(Debug)]
pub struct PublishedCluster {
    /// From `meta.properties` (or `cluster.id`): fixed for the life of the process.
    pub cluster_id: String,
    latest: Mutex<Arc<ClusterSummary>>,
}

impl PublishedCluster {
    pub fn new(cluster_id: String) -> PublishedCluster {
        PublishedCluster {
            cluster_id,
            latest: Mutex::new(Arc::new(ClusterSummary::default())),
        }
    }

    pub fn get(&self) -> Arc<ClusterSummary> {
        match self.latest.lock() {
            Ok(g) => Arc::clone(&g),
            // A panic while swapping an Arc leaves a valid value: use it.
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    pub fn publish(&self, summary: ClusterSummary) {
        self.publish_shared(Arc::new(summary));
    }

    pub fn publish_shared(&self, summary: Arc<ClusterSummary>) {
        match self.latest.lock() {
            Ok(mut g) => *g = summary,
            Err(poisoned) => *poisoned.into_inner() = summary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{BrokerFencing, Endpoint, MetadataRecord, RegisterBroker};
    use crate::model::BrokerEpoch;

    #[test]
    fn live_brokers_are_listed_and_fenced_ones_are_not() {
        let mut meta = ClusterMetadata::new();
        for id in [1, 2] {
            meta.apply(
                MetadataOffset(id as u64),
                &MetadataRecord::RegisterBroker(RegisterBroker {
                    broker_id: BrokerId(id),
                    incarnation: uuid::Uuid::from_u128(id as u128),
                    endpoints: vec![Endpoint {
                        name: "PLAINTEXT".into(),
                        host: "h".into(),
                        port: 9000 + id as u16,
                    }],
                    rack: None,
                }),
            )
            .expect("registers");
        }
        meta.apply(
            MetadataOffset(3),
            &MetadataRecord::UnfenceBroker(BrokerFencing {
                broker_id: BrokerId(2),
                broker_epoch: BrokerEpoch(2),
            }),
        )
        .expect("unfences");
        let s = ClusterSummary::of(&meta, Some(BrokerId(1)));
        assert_eq!(s.brokers.len(), 1);
        assert_eq!((s.brokers[0].id, s.brokers[0].port), (BrokerId(2), 9002));
        assert_eq!(s.fenced, vec![BrokerId(1)]);
        assert_eq!(s.client_controller(), Some(BrokerId(2)), "a live broker");
        let published = PublishedCluster::new("c".to_string());
        published.publish(s.clone());
        assert_eq!(*published.get(), s);
    }
}
