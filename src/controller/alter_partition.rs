//! ISR changes asked for by a partition's leader (Kafka's AlterPartition): the leader never
//! changes the ISR itself, it asks the controller with the leader epoch and partition epoch
//! it knows, a compare-and-set, so that a deposed or paused leader cannot shrink the ISR to
//! itself and keep acknowledging acks=all writes (CLUSTER.md, "Replication").

use uuid::Uuid;

use super::active_controller::ActiveController;
use super::cluster_metadata::ClusterMetadata;
use super::election::partition_change;
use super::error::ControllerError;
use super::records::MetadataRecord;
use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, PartitionEpoch};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionRequest {
    pub broker_id: BrokerId,
    pub broker_epoch: BrokerEpoch,
    pub topic_id: Uuid,
    pub partition: u32,
    /// The epochs the leader's view is at.
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    pub new_isr: Vec<BrokerId>,
}

impl ActiveController {
    /// The PartitionChange that sets the ISR the leader asks for, or why it may not. An ISR
    /// equal to the current one needs no record (the leader's view is already right).
    pub fn alter_partition(
        &self,
        meta: &ClusterMetadata,
        request: &AlterPartitionRequest,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        self.check_broker_epoch(meta, request.broker_id, request.broker_epoch)?;
        let topic = meta
            .topic(request.topic_id)
            .ok_or(ControllerError::UnknownTopicId(request.topic_id))?;
        let p = topic
            .partitions
            .get(request.partition as usize)
            .ok_or(ControllerError::UnknownPartition(request.partition))?;
        if request.leader_epoch != p.leader_epoch {
            return Err(ControllerError::FencedLeaderEpoch {
                given: request.leader_epoch,
                current: p.leader_epoch,
            });
        }
        if p.leader != Some(request.broker_id) {
            return Err(ControllerError::NotLeader(request.broker_id));
        }
        if request.partition_epoch != p.partition_epoch {
            return Err(ControllerError::InvalidUpdateVersion {
                given: request.partition_epoch,
                current: p.partition_epoch,
            });
        }
        if !request.new_isr.contains(&request.broker_id) {
            return Err(ControllerError::InvalidRequest(
                "the new ISR does not contain the leader".to_string(),
            ));
        }
        if let Some(bad) = request
            .new_isr
            .iter()
            .find(|b| !p.replicas.contains(b) || !meta.is_unfenced(**b))
        {
            return Err(ControllerError::IneligibleReplica(*bad));
        }
        let unclean = self.unclean_allowed(topic);
        let change = partition_change(
            topic.id,
            request.partition,
            p,
            &request.new_isr,
            |b| meta.is_unfenced(b),
            unclean,
        );
        Ok(change
            .map(MetadataRecord::PartitionChange)
            .into_iter()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{BrokerFencing, CreateTopic, NewPartition, RegisterBroker};
    use crate::controller::ControllerConfig;
    use crate::model::MetadataOffset;

    const TOPIC: Uuid = Uuid::from_u128(5);

    fn ids(v: &[i32]) -> Vec<BrokerId> {
        v.iter().copied().map(BrokerId).collect()
    }

    /// Brokers 1-3 unfenced (epochs 1, 3, 5), topic with one partition on [1, 2, 3].
    fn cluster() -> ClusterMetadata {
        let mut meta = ClusterMetadata::new();
        let mut offset = 0;
        let mut apply = |meta: &mut ClusterMetadata, r: MetadataRecord| {
            offset += 1;
            meta.apply(MetadataOffset(offset), &r).expect("applies");
        };
        for id in 1..=3 {
            apply(
                &mut meta,
                MetadataRecord::RegisterBroker(RegisterBroker {
                    broker_id: BrokerId(id),
                    incarnation: Uuid::from_u128(id as u128),
                    endpoints: Vec::new(),
                    rack: None,
                }),
            );
            let epoch = meta.broker(BrokerId(id)).expect("registered").epoch;
            apply(
                &mut meta,
                MetadataRecord::UnfenceBroker(BrokerFencing {
                    broker_id: BrokerId(id),
                    broker_epoch: epoch,
                }),
            );
        }
        apply(
            &mut meta,
            MetadataRecord::CreateTopic(CreateTopic {
                name: "t".to_string(),
                topic_id: TOPIC,
                partitions: vec![NewPartition {
                    replicas: ids(&[1, 2, 3]),
                    isr: ids(&[1, 2, 3]),
                    leader: Some(BrokerId(1)),
                    slot: 0,
                }],
                configs: Default::default(),
            }),
        );
        meta
    }

    fn request(isr: &[i32]) -> AlterPartitionRequest {
        AlterPartitionRequest {
            broker_id: BrokerId(1),
            broker_epoch: BrokerEpoch(1),
            topic_id: TOPIC,
            partition: 0,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: PartitionEpoch(0),
            new_isr: ids(isr),
        }
    }

    #[test]
    fn the_leader_shrinks_and_expands_the_isr() {
        let mut meta = cluster();
        let controller = ActiveController::new(ControllerConfig::default(), 0);
        let records = controller
            .alter_partition(&meta, &request(&[1, 3]))
            .expect("accepted");
        let [MetadataRecord::PartitionChange(c)] = records.as_slice() else {
            panic!("one change: {records:?}");
        };
        assert_eq!((c.isr.clone(), c.leader), (ids(&[1, 3]), Some(BrokerId(1))));
        assert_eq!(
            (c.leader_epoch, c.partition_epoch),
            (LeaderEpoch(0), PartitionEpoch(1))
        );
        meta.apply(MetadataOffset(100), &records[0])
            .expect("applies");
        let mut expand = request(&[1, 2, 3]);
        expand.partition_epoch = PartitionEpoch(1);
        let records = controller
            .alter_partition(&meta, &expand)
            .expect("accepted");
        assert_eq!(records.len(), 1);
        // Asking for what is already the ISR needs no record.
        let same = request(&[1, 2, 3]);
        let meta = cluster();
        assert_eq!(controller.alter_partition(&meta, &same), Ok(Vec::new()));
    }

    #[test]
    fn stale_or_invalid_requests_are_refused_with_kafkas_codes() {
        let meta = cluster();
        let controller = ActiveController::new(ControllerConfig::default(), 0);
        let with = |f: &dyn Fn(&mut AlterPartitionRequest)| {
            let mut r = request(&[1, 2]);
            f(&mut r);
            controller
                .alter_partition(&meta, &r)
                .expect_err("refused")
                .code()
        };
        assert_eq!(with(&|r| r.broker_epoch = BrokerEpoch(9)), 77);
        assert_eq!(with(&|r| r.leader_epoch = LeaderEpoch(3)), 74);
        assert_eq!(with(&|r| r.partition_epoch = PartitionEpoch(3)), 95);
        assert_eq!(
            with(&|r| {
                r.broker_id = BrokerId(2);
                r.broker_epoch = BrokerEpoch(3);
            }),
            6
        );
        assert_eq!(with(&|r| r.new_isr = ids(&[2, 3])), 42);
        assert_eq!(with(&|r| r.new_isr = ids(&[1, 7])), 107);
        assert_eq!(with(&|r| r.topic_id = Uuid::from_u128(99)), 100);
        assert_eq!(with(&|r| r.partition = 4), 3);
    }
}
