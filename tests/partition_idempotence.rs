//! Idempotent produce on a partition (log + producer state): duplicates are answered with their
//! original offsets and not written, gaps and stale epochs are refused, and all of it survives a
//! clean reopen (snapshot), a reopen without snapshots (log replay), and an unclean stop whose
//! recovery cuts the log's tail (the state follows the log, not the snapshot). A full disk
//! (tmpfs, root only) must not leave a failed batch behind as a "duplicate".

mod common;
mod tmpfs;

use std::path::{Path, PathBuf};

use common::{file_batches, opts, producer_seq_batch, release, verify_log};
use ringbroker::idempotence::append::ProduceError;
use ringbroker::idempotence::producer_snapshot::{list_snapshots, snapshot_path};
use ringbroker::log::{AppendInfo, Log, LogConfig};
use ringbroker::model::Offset;
use ringbroker::partition::Partition;
use ringbroker::runtime::{block_on, now_ms};
use tmpfs::Tmpfs;

const PID: i64 = 4242;
const RECORDS_PER_BATCH: usize = 2;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;

async fn open(dir: &Path, config: LogConfig) -> Partition {
    let log = Log::open(dir, config).await.expect("open log");
    let p = Partition::new("t".into(), 0, log);
    p.load_producers(now_ms()).await.expect("load producers");
    p
}

/// The i-th batch of producer `PID` at `epoch`: sequence `2i`, values numbered from `offset`
/// (the offset it is expected at, so that `verify_log` can check the log).
fn batch(epoch: i16, i: i32, offset: i64) -> Vec<u8> {
    producer_seq_batch(
        PID,
        epoch,
        i * RECORDS_PER_BATCH as i32,
        offset as u64,
        &[40; RECORDS_PER_BATCH],
        1_000 + i64::from(i),
    )
}

async fn produce(p: &Partition, bytes: &[u8]) -> Result<AppendInfo, ProduceError> {
    p.produce(bytes, opts(true)).await
}

fn code(r: Result<AppendInfo, ProduceError>) -> i16 {
    match r {
        Ok(info) => panic!("expected an error, got {info:?}"),
        Err(e) => e.kafka_code().expect("a producer error, not a log error"),
    }
}

/// Produces batches `from..to` of epoch 0 in order; each must land at the log end.
async fn produce_in_order(p: &Partition, from: i32, to: i32) {
    for i in from..to {
        let leo = p.log.offsets().log_end_offset;
        let info = produce(p, &batch(0, i, leo)).await.expect("in-order batch");
        assert_eq!(info.base_offset.0, leo, "batch {i}");
    }
}

#[test]
fn duplicates_and_errors_survive_a_clean_reopen_and_a_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    block_on(async {
        let p = open(dir.path(), LogConfig::default()).await;
        produce_in_order(&p, 0, 10).await;
        let leo = p.log.offsets().log_end_offset;
        assert_eq!(leo, 20);
        // Each of the last five is a duplicate with its own offsets; nothing is written.
        for i in 5..10 {
            let info = produce(&p, &batch(0, i, 0)).await.expect("duplicate");
            assert_eq!(info.base_offset.0, i64::from(i) * 2);
            assert_eq!(info.last_offset.0, i64::from(i) * 2 + 1);
        }
        assert_eq!(p.log.offsets().log_end_offset, leo);
        assert_eq!(
            code(produce(&p, &batch(0, 4, 0)).await),
            OUT_OF_ORDER_SEQUENCE_NUMBER
        );
        assert_eq!(
            code(produce(&p, &batch(0, 11, 0)).await),
            OUT_OF_ORDER_SEQUENCE_NUMBER
        );
        // A new epoch at 0, then the old epoch is fenced.
        produce(&p, &batch(1, 0, 20)).await.expect("new epoch");
        assert_eq!(
            code(produce(&p, &batch(0, 10, 0)).await),
            INVALID_PRODUCER_EPOCH
        );
        let before = p.producers.table();
        p.close().await.expect("close");
        assert!(!list_snapshots(dir.path()).expect("list").is_empty());
        release_partition(p).await;

        // Clean reopen: from the snapshot.
        let p = open(dir.path(), LogConfig::default()).await;
        assert_eq!(p.producers.table().entry(PID), before.entry(PID));
        let info = produce(&p, &batch(1, 0, 0)).await.expect("duplicate");
        assert_eq!(info.base_offset.0, 20);
        assert_eq!(
            code(produce(&p, &batch(0, 9, 0)).await),
            INVALID_PRODUCER_EPOCH
        );
        p.close().await.expect("close");
        release_partition(p).await;

        // No snapshot at all: rebuilt from the whole log, same state.
        for offset in list_snapshots(dir.path()).expect("list") {
            std::fs::remove_file(snapshot_path(dir.path(), offset)).expect("remove");
        }
        let p = open(dir.path(), LogConfig::default()).await;
        let entry = p.producers.table().entry(PID).cloned().expect("rebuilt");
        let expected = before.entry(PID).expect("before");
        assert_eq!(entry.epoch, expected.epoch);
        assert_eq!(entry.batches, expected.batches);
        let info = produce(&p, &batch(1, 1, 22))
            .await
            .expect("next in epoch 1");
        assert_eq!(info.base_offset.0, 22);
        verify_log(&p.log, 0).await.expect("valid log");
        p.close().await.expect("close");
        release_partition(p).await;
    })
    .expect("executor");
}

/// Drops the partition and lets the executor close its files (see `common::release`).
async fn release_partition(p: Partition) {
    let log = p.log.clone();
    drop(p);
    release(log).await;
}

fn segment_file(dir: &Path) -> PathBuf {
    dir.join(format!("{:020}.log", 0))
}

#[test]
fn unclean_stop_with_a_cut_tail_rebuilds_what_the_log_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    block_on(async {
        let p = open(dir.path(), LogConfig::default()).await;
        produce_in_order(&p, 0, 4).await;
        p.producers.snapshot(&p.log).await.expect("snapshot at 8");
        produce_in_order(&p, 4, 6).await;
        p.producers.snapshot(&p.log).await.expect("snapshot at 12");
        assert_eq!(
            list_snapshots(dir.path()).expect("list"),
            vec![Offset(8), Offset(12)]
        );
        // Crash: no close. The last batch is then lost from the file (a cut tail).
        release_partition(p).await;
        let batches = file_batches(&segment_file(dir.path()));
        assert_eq!(batches.len(), 6);
        let cut_at = batches[5].0;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(segment_file(dir.path()))
            .expect("segment");
        f.set_len(cut_at).expect("cut");
        drop(f);
        let _ = std::fs::remove_file(dir.path().join(".kafka_cleanshutdown"));

        let p = open(dir.path(), LogConfig::default()).await;
        assert_eq!(p.log.offsets().log_end_offset, 10);
        // The snapshot past the log end is gone; the one at 8 was used, and a new one at the
        // recovered end is written so that the next start replays nothing again.
        assert_eq!(
            list_snapshots(dir.path()).expect("list"),
            vec![Offset(8), Offset(10)]
        );
        let info = produce(&p, &batch(0, 4, 0)).await.expect("duplicate");
        assert_eq!(info.base_offset.0, 8);
        // The lost batch is not a duplicate: its retry is written.
        let info = produce(&p, &batch(0, 5, 10))
            .await
            .expect("retry of the lost batch");
        assert_eq!(info.base_offset.0, 10);
        assert_eq!(p.log.offsets().log_end_offset, 12);
        release_partition(p).await;

        // Another crash, and the remaining snapshot is corrupt: replay from the log start.
        std::fs::write(snapshot_path(dir.path(), Offset(8)), b"not a snapshot").expect("corrupt");
        let _ = std::fs::remove_file(dir.path().join(".kafka_cleanshutdown"));
        let p = open(dir.path(), LogConfig::default()).await;
        let info = produce(&p, &batch(0, 5, 0)).await.expect("duplicate");
        assert_eq!(info.base_offset.0, 10);
        let info = produce(&p, &batch(0, 1, 0)).await.expect("duplicate");
        assert_eq!(info.base_offset.0, 2);
        verify_log(&p.log, 0).await.expect("valid log");
        p.close().await.expect("close");
        release_partition(p).await;
    })
    .expect("executor");
}

#[test]
fn pipelined_batches_of_one_producer_are_group_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    block_on(async {
        let p = std::rc::Rc::new(open(dir.path(), LogConfig::default()).await);
        let flights_before = p.log.stats().flights;
        let mut tasks = Vec::new();
        for i in 0..5 {
            let p = std::rc::Rc::clone(&p);
            tasks.push(ringbroker::runtime::spawn(async move {
                produce(&p, &batch(0, i, i64::from(i) * 2)).await
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            let info = t.await.expect("pipelined batch");
            assert_eq!(info.base_offset.0, i as i64 * 2);
        }
        assert!(
            p.log.stats().flights - flights_before < 5,
            "five in-flight batches were written one flight each"
        );
        // Retries of all five while nothing is in flight: duplicates.
        for i in 0..5 {
            let info = produce(&p, &batch(0, i, 0)).await.expect("duplicate");
            assert_eq!(info.base_offset.0, i64::from(i) * 2);
        }
        // A retry sent while its original is still being written waits for the original's
        // outcome, then gets its offset; nothing is written twice.
        let original = {
            let p = std::rc::Rc::clone(&p);
            ringbroker::runtime::spawn(async move { produce(&p, &batch(0, 5, 10)).await })
        };
        let retry = {
            let p = std::rc::Rc::clone(&p);
            ringbroker::runtime::spawn(async move { produce(&p, &batch(0, 5, 10)).await })
        };
        assert_eq!(original.await.expect("original").base_offset.0, 10);
        assert_eq!(retry.await.expect("retry").base_offset.0, 10);
        assert_eq!(p.log.offsets().log_end_offset, 12);
        verify_log(&p.log, 0).await.expect("valid log");
        p.close().await.expect("close");
        let p = std::rc::Rc::try_unwrap(p)
            .ok()
            .expect("no task holds the partition");
        release_partition(p).await;
    })
    .expect("executor");
}

#[test]
fn a_batch_whose_write_failed_is_written_on_retry_not_taken_for_a_duplicate() {
    let fs = match Tmpfs::mount("8m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let dir = fs.path.join("t-0");
    std::fs::create_dir_all(&dir).expect("dir");
    block_on(async {
        let p = open(&dir, LogConfig::default()).await;
        produce_in_order(&p, 0, 2).await;
        // Fill the disk, leaving less than one batch.
        let filler = fs.path.join("filler");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&filler).expect("filler");
            for chunk in [1usize << 20, 64 << 10, 4 << 10, 256, 16] {
                let zeros = vec![0u8; chunk];
                while f.write_all(&zeros).is_ok() {}
            }
        }
        let big = producer_seq_batch(PID, 0, 4, 4, &[8 << 10; 4], 1_000);
        let failed = produce(&p, &big).await;
        assert!(
            matches!(failed, Err(ProduceError::Log(_))),
            "expected a storage error, got {failed:?}"
        );
        std::fs::remove_file(&filler).expect("free space");
        let info = produce(&p, &big).await.expect("retry once space is back");
        assert_eq!(info.base_offset.0, 4);
        let info = produce(&p, &big).await.expect("now a duplicate");
        assert_eq!(info.base_offset.0, 4);
        assert_eq!(p.log.offsets().log_end_offset, 8);
        p.close().await.expect("close");
        release_partition(p).await;
    })
    .expect("executor");
}
