//! The state machine: records get consecutive offsets across batches, a snapshot restores
//! the same metadata on another node and after a restart, a damaged snapshot is refused.

use std::path::Path;

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};

use super::state_machine::MetadataStateMachine;
use super::{Entry, LogId, MetadataBatch};
use crate::controller::records::{MetadataRecord, RegisterBroker};
use crate::model::{BrokerId, MetadataOffset};
use crate::runtime;

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(1, BrokerId(1)), index)
}

fn batch(index: u64, brokers: &[i32]) -> Entry {
    let records = brokers
        .iter()
        .map(|id| {
            MetadataRecord::RegisterBroker(RegisterBroker {
                broker_id: BrokerId(*id),
                incarnation: uuid::Uuid::from_u128(*id as u128),
                endpoints: Vec::new(),
                rack: None,
            })
        })
        .collect();
    Entry {
        log_id: log_id(index),
        payload: EntryPayload::Normal(MetadataBatch(records)),
    }
}

async fn open(dir: &Path) -> MetadataStateMachine {
    MetadataStateMachine::open(dir).await.expect("opens")
}

fn brokers(sm: &MetadataStateMachine) -> Vec<i32> {
    sm.view().get().brokers().map(|b| b.id.0).collect()
}

#[test]
fn offsets_number_records_and_snapshots_restore_the_metadata() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let mut sm = open(a.path()).await;
        let blank = Entry {
            log_id: log_id(1),
            payload: EntryPayload::Blank,
        };
        let replies = sm
            .apply([blank, batch(2, &[1, 2, 3]), batch(3, &[4])])
            .await
            .expect("applies");
        let firsts: Vec<_> = replies.iter().map(|r| r.first_offset).collect();
        assert_eq!(
            firsts,
            vec![None, Some(MetadataOffset(1)), Some(MetadataOffset(4))]
        );
        assert_eq!(sm.view().applied_offset(), Some(MetadataOffset(4)));
        let snapshot = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("builds");
        assert_eq!(snapshot.meta.last_log_id, Some(log_id(3)));

        // Another node installs it.
        let mut other = open(b.path()).await;
        other
            .install_snapshot(&snapshot.meta, snapshot.snapshot)
            .await
            .expect("installs");
        assert_eq!(brokers(&other), vec![1, 2, 3, 4]);
        assert_eq!(*other.view().get(), *sm.view().get());
        let (applied, _) = other.applied_state().await.expect("state");
        assert_eq!(applied, Some(log_id(3)));

        // A restart starts from the snapshot file; later entries continue the offsets.
        drop(sm);
        let mut again = open(a.path()).await;
        assert_eq!(brokers(&again), vec![1, 2, 3, 4]);
        let (applied, _) = again.applied_state().await.expect("state");
        assert_eq!(applied, Some(log_id(3)));
        let replies = again.apply([batch(4, &[5])]).await.expect("applies");
        assert_eq!(replies[0].first_offset, Some(MetadataOffset(5)));
        assert!(again.get_current_snapshot().await.expect("reads").is_some());
    })
    .expect("executor");
}

#[test]
fn a_damaged_snapshot_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let mut sm = open(dir.path()).await;
        sm.apply([batch(1, &[1])]).await.expect("applies");
        sm.get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("builds");
        drop(sm);
        let path = dir.path().join("snapshot");
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        assert!(MetadataStateMachine::open(dir.path()).await.is_err());
    })
    .expect("executor");
}

/// A producer-id block decided on an older view (its start is no longer the next free id) is
/// skipped, and the apply says so: the controller confirms a block only from its own record
/// having applied, never from the ids having moved past it (someone else's block moves them).
#[test]
fn a_stale_producer_id_block_is_reported_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let mut sm = open(dir.path()).await;
        sm.apply([batch(1, &[7, 8])]).await.expect("registers");
        let block = |broker: i32| {
            let epoch = sm
                .view()
                .get()
                .broker(BrokerId(broker))
                .expect("registered")
                .epoch;
            MetadataRecord::ProducerIdBlock(crate::controller::records::ProducerIdBlockAllocation {
                broker_id: BrokerId(broker),
                broker_epoch: epoch,
                start: 0,
                size: 1_000,
            })
        };
        let (first, stale) = (block(7), block(8));
        let entry = |index, record| Entry {
            log_id: log_id(index),
            payload: EntryPayload::Normal(MetadataBatch(vec![record])),
        };
        let replies = sm
            .apply([entry(2, first), entry(3, stale)])
            .await
            .expect("applies");
        let skipped: Vec<usize> = replies.iter().map(|r| r.skipped).collect();
        assert_eq!(skipped, vec![0, 1]);
        assert_eq!(sm.view().get().next_producer_id(), 1_000);
    })
    .expect("executor");
}
