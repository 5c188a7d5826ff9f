//! What clients are told about the cluster (Metadata, DescribeCluster), derived from the
//! metadata: only unfenced brokers are listed; a leaderless partition is leader -1 with
//! LEADER_NOT_AVAILABLE; replicas on fenced or unregistered brokers are offline (v5+).

use super::cluster_metadata::{BrokerRegistration, ClusterMetadata, PartitionState};
use super::records::Endpoint;
use crate::model::BrokerId;
use crate::protocol::ResponseError;

/// Kafka's "no leader" on the wire.
pub const NO_LEADER: i32 = -1;

/// The brokers clients may connect to, by id.
pub fn live_brokers(meta: &ClusterMetadata) -> impl Iterator<Item = &BrokerRegistration> {
    meta.brokers().filter(|b| !b.fenced)
}

/// The endpoint of `listener` a broker advertises, if it has one.
pub fn endpoint<'a>(broker: &'a BrokerRegistration, listener: &str) -> Option<&'a Endpoint> {
    broker.endpoints.iter().find(|e| e.name == listener)
}

/// `controller_id` for clients: they cannot reach the quorum, so any live broker (the
/// lowest id, so that answers agree across brokers), or -1 when none is live.
pub fn controller_id_for_clients(meta: &ClusterMetadata) -> i32 {
    live_brokers(meta)
        .map(|b| b.id.0)
        .min()
        .unwrap_or(NO_LEADER)
}

/// The leader id for the wire and the partition's error code.
pub fn leader_and_error(p: &PartitionState) -> (i32, i16) {
    match p.leader {
        Some(l) => (l.0, 0),
        None => (NO_LEADER, ResponseError::LeaderNotAvailable.code()),
    }
}

/// Replicas on brokers that are fenced or not registered, in assignment order.
pub fn offline_replicas(meta: &ClusterMetadata, p: &PartitionState) -> Vec<BrokerId> {
    p.replicas
        .iter()
        .copied()
        .filter(|r| !meta.is_unfenced(*r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{BrokerFencing, MetadataRecord, RegisterBroker};
    use crate::model::{BrokerEpoch, LeaderEpoch, MetadataOffset, PartitionEpoch};
    use uuid::Uuid;

    fn two_brokers_one_unfenced() -> ClusterMetadata {
        let mut meta = ClusterMetadata::new();
        for (offset, id) in [(1, 2), (2, 3)] {
            let r = MetadataRecord::RegisterBroker(RegisterBroker {
                broker_id: BrokerId(id),
                incarnation: Uuid::from_u128(id as u128),
                endpoints: vec![Endpoint {
                    name: "PLAINTEXT".to_string(),
                    host: format!("b{id}"),
                    port: 9092,
                }],
                rack: None,
            });
            meta.apply(MetadataOffset(offset), &r).expect("applies");
        }
        let unfence = MetadataRecord::UnfenceBroker(BrokerFencing {
            broker_id: BrokerId(3),
            broker_epoch: BrokerEpoch(2),
        });
        meta.apply(MetadataOffset(3), &unfence).expect("applies");
        meta
    }

    #[test]
    fn clients_see_live_brokers_leaders_and_offline_replicas() {
        let meta = two_brokers_one_unfenced();
        let live: Vec<i32> = live_brokers(&meta).map(|b| b.id.0).collect();
        assert_eq!(live, vec![3]);
        assert_eq!(controller_id_for_clients(&meta), 3);
        assert_eq!(controller_id_for_clients(&ClusterMetadata::new()), -1);
        let b3 = meta.broker(BrokerId(3)).expect("registered");
        assert_eq!(
            endpoint(b3, "PLAINTEXT").map(|e| e.host.as_str()),
            Some("b3")
        );
        assert!(endpoint(b3, "SSL").is_none());
        let mut p = PartitionState {
            replicas: vec![BrokerId(2), BrokerId(3), BrokerId(4)],
            isr: vec![BrokerId(3)],
            leader: Some(BrokerId(3)),
            leader_epoch: LeaderEpoch(1),
            partition_epoch: PartitionEpoch(1),
            slot: 0,
        };
        assert_eq!(leader_and_error(&p), (3, 0));
        assert_eq!(offline_replicas(&meta, &p), vec![BrokerId(2), BrokerId(4)]);
        p.leader = None;
        assert_eq!(leader_and_error(&p), (-1, 5));
    }
}
