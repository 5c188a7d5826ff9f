//! The metadata log's files across restarts: what was acknowledged comes back, a torn or
//! corrupt tail is cut, truncation and purges survive a reopen, the vote is durable.

use std::path::Path;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader, Vote};

use super::log_store::MetadataLogStore;
use super::{Entry, LogId, MetadataBatch};
use crate::controller::records::{MetadataRecord, RegisterBroker};
use crate::model::BrokerId;
use crate::runtime;

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term, BrokerId(1)), index)
}

fn entry(term: u64, index: u64) -> Entry {
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(MetadataBatch(vec![MetadataRecord::RegisterBroker(
            RegisterBroker {
                broker_id: BrokerId(index as i32),
                incarnation: uuid::Uuid::from_u128(index as u128),
                endpoints: Vec::new(),
                rack: None,
            },
        )])),
    }
}

async fn open(dir: &Path) -> (MetadataLogStore, super::log_store::Recovered) {
    MetadataLogStore::open(dir).await.expect("opens")
}

fn indexes(store: &MetadataLogStore) -> Vec<u64> {
    store.log_ids().iter().map(|l| l.index).collect()
}

/// Entries 1..=count of term 1, written and the store closed.
async fn write_entries(dir: &Path, count: u64) {
    let (mut store, _) = open(dir).await;
    store
        .blocking_append((1..=count).map(|i| entry(1, i)))
        .await
        .expect("appends");
}

fn log_file(dir: &Path) -> std::path::PathBuf {
    dir.join("log")
}

#[test]
fn appended_entries_and_the_vote_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (mut store, recovered) = open(dir.path()).await;
        assert_eq!(recovered.entries, 0);
        store
            .blocking_append((1..=5).map(|i| entry(1, i)))
            .await
            .expect("appends");
        let vote = Vote::new(3, BrokerId(2));
        store.save_vote(&vote).await.expect("vote saved");
        drop(store);
        let (mut store, recovered) = open(dir.path()).await;
        assert_eq!((recovered.entries, recovered.cut_bytes), (5, 0));
        assert_eq!(indexes(&store), vec![1, 2, 3, 4, 5]);
        assert_eq!(store.read_vote().await.expect("reads"), Some(vote));
        let got = store.try_get_log_entries(2..4).await.expect("reads");
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].log_id, log_id(1, 2));
        let state = store.get_log_state().await.expect("state");
        assert_eq!(state.last_log_id, Some(log_id(1, 5)));
    })
    .expect("executor");
}

#[test]
fn a_torn_tail_is_cut_at_reopen_and_appends_continue_after_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        write_entries(dir.path(), 3).await;
        // A crash in the middle of writing the third entry's frame.
        let len = std::fs::metadata(log_file(dir.path())).expect("meta").len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(log_file(dir.path()))
            .expect("open");
        f.set_len(len - 7).expect("cut");
        drop(f);
        let (mut store, recovered) = open(dir.path()).await;
        assert_eq!(indexes(&store), vec![1, 2]);
        assert!(recovered.cut_bytes > 0);
        store
            .blocking_append([entry(2, 3)])
            .await
            .expect("appends after the cut");
        drop(store);
        let (store, recovered) = open(dir.path()).await;
        assert_eq!(recovered.cut_bytes, 0, "the cut was made durable");
        assert_eq!(store.log_ids().last(), Some(&log_id(2, 3)));
    })
    .expect("executor");
}

#[test]
fn a_bad_crc_ends_the_log_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        write_entries(dir.path(), 3).await;
        let mut bytes = std::fs::read(log_file(dir.path())).expect("read");
        let last = bytes.len() - 2;
        bytes[last] ^= 0x40;
        std::fs::write(log_file(dir.path()), &bytes).expect("write");
        let (store, recovered) = open(dir.path()).await;
        assert_eq!(indexes(&store), vec![1, 2]);
        assert!(recovered.cut_bytes > 0);
    })
    .expect("executor");
}

#[test]
fn truncation_and_purge_are_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (mut store, _) = open(dir.path()).await;
        store
            .blocking_append((1..=10).map(|i| entry(1, i)))
            .await
            .expect("appends");
        store.truncate(log_id(1, 8)).await.expect("truncates");
        assert_eq!(indexes(&store).last(), Some(&7));
        store
            .blocking_append([entry(2, 8)])
            .await
            .expect("appends after truncation");
        store.purge(log_id(1, 4)).await.expect("purges");
        assert_eq!(indexes(&store), vec![5, 6, 7, 8]);
        store
            .blocking_append([entry(2, 9)])
            .await
            .expect("appends after purge");
        drop(store);
        let (mut store, _) = open(dir.path()).await;
        assert_eq!(indexes(&store), vec![5, 6, 7, 8, 9]);
        assert_eq!(store.last_purged(), Some(log_id(1, 4)));
        let state = store.get_log_state().await.expect("state");
        assert_eq!(state.last_purged_log_id, Some(log_id(1, 4)));
        assert_eq!(state.last_log_id, Some(log_id(2, 9)));
        // Purging everything leaves the purge point as the last log id.
        store.purge(log_id(2, 9)).await.expect("purges all");
        drop(store);
        let (mut store, _) = open(dir.path()).await;
        assert!(indexes(&store).is_empty());
        let state = store.get_log_state().await.expect("state");
        assert_eq!(state.last_log_id, Some(log_id(2, 9)));
    })
    .expect("executor");
}

#[test]
fn a_damaged_vote_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (mut store, _) = open(dir.path()).await;
        store
            .save_vote(&Vote::new(1, BrokerId(1)))
            .await
            .expect("saved");
        drop(store);
        let path = dir.path().join("quorum-state");
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        let err = MetadataLogStore::open(dir.path())
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("quorum-state"), "{err}");
    })
    .expect("executor");
}

/// The log file's creation is made durable (its directory fsynced) before anything in it is
/// acknowledged: without it, a power loss right after the first appends can take the whole
/// file away, with entries a quorum counted as stored (issue 32, finding 7).
#[test]
fn a_new_log_file_survives_a_power_loss_with_its_entries() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("__cluster_metadata-0");
    runtime::block_on(async {
        let faults = crate::runtime::fault::FaultScope::install(root.path());
        write_entries(&dir, 3).await;
        faults
            .power_loss(crate::runtime::fault::PowerLoss::DropUnsynced)
            .expect("power loss");
        let (store, recovered) = open(&dir).await;
        assert_eq!(recovered.entries, 3, "the acknowledged entries are there");
        assert_eq!(indexes(&store), vec![1, 2, 3]);
    })
    .expect("executor");
}
