//! The `__consumer_offsets` rewrite on a replicated partition (issue 32, finding 3): the live
//! state is appended at the end and what came before is deleted. Deleted before the in-sync
//! replicas had the rewrite, a follower elected then would hold neither, and every group's
//! committed offsets would be gone.

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::controller::cluster_metadata::PartitionState;
use crate::log::{Log, LogConfig};
use crate::model::{BrokerId, LeaderEpoch, PartitionEpoch};
use crate::protocol::batch_builder::BatchBuilder;
use crate::replication::leader_state::LeaderConfig;

const ME: BrokerId = BrokerId(1);
const FOLLOWER: BrokerId = BrokerId(2);

struct OnePartition(Rc<Partition>);

impl GroupHost for OnePartition {
    fn offsets_partition(&self, index: i32) -> Option<Rc<Partition>> {
        (index == 0).then(|| Rc::clone(&self.0))
    }

    fn offsets_partitions(&self) -> Vec<Rc<Partition>> {
        vec![Rc::clone(&self.0)]
    }

    fn offsets_partition_count(&self) -> Option<i32> {
        Some(1)
    }
}

/// `__consumer_offsets-0` led here with ISR [1, 2], holding `records` old records.
async fn leading(dir: &std::path::Path, records: usize) -> Rc<Partition> {
    leading_with(dir, records, &[ME, FOLLOWER], LogConfig::default()).await
}

async fn leading_with(
    dir: &std::path::Path,
    records: usize,
    isr: &[BrokerId],
    config: LogConfig,
) -> Rc<Partition> {
    let log = Log::open(dir, config).await.expect("open");
    let p = Rc::new(Partition::replicated(OFFSETS_TOPIC.into(), 0, log));
    let state = PartitionState {
        replicas: vec![ME, FOLLOWER],
        isr: isr.to_vec(),
        leader: Some(ME),
        leader_epoch: LeaderEpoch(1),
        partition_epoch: PartitionEpoch(1),
        slot: 0,
    };
    let config = LeaderConfig {
        min_insync_replicas: 1,
        replica_lag_time_max_ms: 30_000,
    };
    p.lead(ME, &state, config, 0).await.expect("lead");
    for i in 0..records {
        let mut b = BatchBuilder::new(0);
        b.push(Some(format!("k{i}").as_bytes()), Some(b"old"), 0, &[]);
        let options = p.leader_append_options(false, 0).expect("leads");
        p.append_own(&b.build(), options).await.expect("append");
        p.after_leader_append();
    }
    p
}

fn live_state() -> Vec<OffsetsRecord> {
    vec![OffsetsRecord {
        key: Bytes::from_static(b"group-key"),
        value: Some(Bytes::from_static(b"committed-offset")),
    }]
}

#[test]
fn the_rewrite_deletes_nothing_before_the_in_sync_replicas_have_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    crate::runtime::block_on(async move {
        let p = leading(&path, 3).await;
        let old_end = p.log.offsets().written_end_offset;
        let service = Rc::new(GroupService::new(GroupConfig::default(), false));
        let host = Rc::new(OnePartition(Rc::clone(&p)));
        let rewriting = {
            let (service, host) = (Rc::clone(&service), Rc::clone(&host));
            crate::runtime::spawn(async move {
                service.rewrite_partition(&*host, 0, live_state()).await
            })
        };
        crate::runtime::sleep(Duration::from_millis(50)).await;
        let offsets = p.log.offsets();
        assert!(
            offsets.written_end_offset > old_end,
            "the rewrite is appended"
        );
        assert_eq!(
            offsets.log_start_offset, 0,
            "nothing deleted while the follower in the ISR lacks the rewrite"
        );
        // The follower fetches up to the end: the HW passes the rewrite.
        let end = offsets.written_end_offset;
        p.check_replica_fetch(FOLLOWER, end, 1, 1, 1)
            .expect("fetch accepted");
        rewriting.await.expect("rewritten");
        assert_eq!(
            p.log.offsets().log_start_offset,
            old_end,
            "once replicated, what the rewrite replaces is deleted"
        );
    })
    .expect("executor");
}

/// Group records are acks=all writes: with the ISR below `min.insync.replicas` they are
/// refused before anything is appended (Kafka's coordinator answers the client
/// COORDINATOR_NOT_AVAILABLE then), not appended and left to time out.
#[test]
fn a_group_commit_under_min_isr_appends_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().to_path_buf();
    crate::runtime::block_on(async move {
        let config = LogConfig {
            min_insync_replicas: 2,
            ..LogConfig::default()
        };
        let p = leading_with(&path, 0, &[ME], config).await;
        let service = GroupService::new(GroupConfig::default(), false);
        let host = OnePartition(Rc::clone(&p));
        let result = service.append_records(&host, 0, &live_state()).await;
        assert!(
            matches!(result, Err(GroupAppendError::Replication(_))),
            "{result:?}"
        );
        assert_eq!(p.log.offsets().written_end_offset, 0, "nothing appended");
    })
    .expect("executor");
}
