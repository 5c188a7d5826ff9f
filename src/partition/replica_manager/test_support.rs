//! What the replica manager's tests share: a two-broker cluster's metadata, the controller
//! as a script, a manager of broker 1 over a real partition in a temporary directory.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use uuid::Uuid;

use super::{IsrChannel, ReplicaManager, ReplicaSettings, RoleListener};
use crate::controller::alter_partition::AlterPartitionRequest;
use crate::controller::cluster_metadata::ClusterMetadata;
use crate::controller::quorum::controller_link::{CommittedPartition, ForwardError};
use crate::controller::records::{
    BrokerFencing, CreateTopic, MetadataRecord, NewPartition, RegisterBroker,
};
use crate::log::LogConfig;
use crate::metadata::MetadataCache;
use crate::model::{BrokerId, MetadataOffset};
use crate::partition::manager::{ManagerSettings, PartitionManager};
use crate::partition::Partition;

pub const ME: BrokerId = BrokerId(1);
pub const NEW: BrokerId = BrokerId(2);
pub const TOPIC_ID: Uuid = Uuid::from_u128(7);
pub const LAG_MS: i64 = 10_000;

/// The controller as a script: each request takes the next answer; none left, no answer.
#[derive(Default)]
pub struct Scripted {
    pub answers: RefCell<VecDeque<Result<CommittedPartition, ForwardError>>>,
    pub asked: RefCell<Vec<AlterPartitionRequest>>,
}

impl IsrChannel for Scripted {
    fn alter_partition<'a>(
        &'a self,
        request: AlterPartitionRequest,
        within: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<CommittedPartition, ForwardError>> + 'a>> {
        self.asked.borrow_mut().push(request);
        let answer = self.answers.borrow_mut().pop_front();
        Box::pin(async move { answer.unwrap_or(Err(ForwardError::NoController(within))) })
    }
}

pub struct NoGroups;

impl RoleListener for NoGroups {
    fn followed(&self, _: &Partition) {}
    fn leading(&self, _: &[Rc<Partition>]) {}
}

/// Brokers 1 and 2 unfenced; topic `t` with one partition on [1, 2], ISR [1], led by 1.
pub fn cluster() -> ClusterMetadata {
    let mut meta = ClusterMetadata::new();
    let mut offset = 0;
    let mut apply = |meta: &mut ClusterMetadata, r: MetadataRecord| {
        offset += 1;
        meta.apply(MetadataOffset(offset), &r).expect("applies");
    };
    for id in [ME, NEW] {
        apply(
            &mut meta,
            MetadataRecord::RegisterBroker(RegisterBroker {
                broker_id: id,
                incarnation: Uuid::from_u128(id.0 as u128),
                endpoints: Vec::new(),
                rack: None,
            }),
        );
        let epoch = meta.broker(id).expect("registered").epoch;
        apply(
            &mut meta,
            MetadataRecord::UnfenceBroker(BrokerFencing {
                broker_id: id,
                broker_epoch: epoch,
            }),
        );
    }
    apply(
        &mut meta,
        MetadataRecord::CreateTopic(CreateTopic {
            name: "t".into(),
            topic_id: TOPIC_ID,
            partitions: vec![NewPartition {
                replicas: vec![ME, NEW],
                isr: vec![ME],
                leader: Some(ME),
                slot: 0,
            }],
            configs: BTreeMap::new(),
        }),
    );
    meta
}

/// The replica manager of broker 1 (partition `t-0` open, roles not applied yet), with
/// `channel` as its controller and [`cluster`] published.
pub async fn manager(
    dir: &std::path::Path,
    channel: Rc<Scripted>,
) -> (Rc<ReplicaManager>, Rc<Partition>) {
    let partitions = Rc::new(PartitionManager::new(ManagerSettings {
        shard: 0,
        shards: 1,
        broker: BrokerId(1),
        data_dir: dir.to_path_buf(),
        cluster_mode: true,
    }));
    let image = crate::controller::image::shard_image(&cluster(), 1, "c".into(), None);
    partitions.open_owned(&image, &LogConfig::default()).await;
    let p = partitions.get("t", 0).expect("opened");
    let published = Rc::new(MetadataCache::new(image));
    let settings = ReplicaSettings {
        replica_lag_time_max_ms: LAG_MS as u64,
        replica_fetch_wait_max_ms: 500,
        replica_fetch_max_bytes: 1 << 20,
        replica_fetch_response_max_bytes: 1 << 20,
    };
    let manager = Rc::new(ReplicaManager::new(
        ME,
        Uuid::from_u128(ME.0 as u128),
        settings,
        channel,
        partitions,
        published,
        Rc::new(NoGroups),
    ));
    (manager, p)
}
