//! The cost of a restart after a crash is bounded by the active segment: a sealed segment is
//! synced whole and moves the recovery point (written to the checkpoint at the roll), and the
//! producer state is snapshotted at every roll. Before, sealing never moved the recovery
//! point and snapshots came every 60 s, so a broker killed often re-read every partition from
//! its start.

mod common;

use std::time::Duration;

use common::{opts, producer_seq_batch, seq_batch};
use ringbroker::idempotence::producer_snapshot::list_snapshots;
use ringbroker::log::{Log, LogConfig};
use ringbroker::model::Offset;
use ringbroker::partition::Partition;
use ringbroker::runtime::{block_on, now_ms, sleep};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

/// Appends small batches until the active segment did not change on the last one, so the
/// committer is past the checkpoint of the last roll (bounded).
async fn settle_on_one_segment(log: &Log) {
    for _ in 0..16 {
        let before = log.active_segment_base();
        let next = log.offsets().log_end_offset as u64;
        log.append(&seq_batch(next, &[21], now_ms()), opts(false))
            .await
            .expect("append");
        if log.active_segment_base() == before {
            return;
        }
    }
    panic!("every small append rolled a segment");
}

#[test]
fn after_a_crash_only_the_active_segment_is_scanned() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("t-0");
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        for _ in 0..40 {
            let next = log.offsets().log_end_offset as u64;
            log.append(&seq_batch(next, &[400, 400], now_ms()), opts(false))
                .await
                .expect("append");
        }
        settle_on_one_segment(&log).await;
        assert!(log.offsets().segments >= 5, "{:?}", log.offsets());
        // A crash: no close, nothing flushed on purpose.
    })
    .expect("executor");
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("reopen");
        let report = log.recovery_report().clone();
        assert!(!report.clean_shutdown);
        assert!(report.segments >= 5, "{report:?}");
        assert!(
            report.scanned_segments <= 1,
            "only the active segment is scanned after a crash: {report:?}"
        );
        common::verify_log(&log, 0).await.expect("valid");
        log.close().await.expect("close");
    })
    .expect("executor");
}

#[test]
fn after_a_crash_producer_state_replays_at_most_the_active_segment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("t-0");
    let (batches, active_base) = block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        let p = Partition::new("t".into(), 0, log.clone());
        p.load_producers(now_ms()).await.expect("load");
        let mut batches = 0u64;
        for i in 0..40 {
            let next = log.offsets().log_end_offset as u64;
            let b = producer_seq_batch(7, 0, 2 * i, next, &[400, 400], now_ms());
            p.produce(&b, opts(false)).await.expect("produce");
            batches += 1;
        }
        let active = log.active_segment_base();
        // The snapshot of the last roll is written in the background: wait for it (bounded).
        for _ in 0..500 {
            let newest = list_snapshots(&dir).expect("list").last().copied();
            if newest.is_some_and(|o| o >= Offset(active)) {
                break;
            }
            sleep(Duration::from_millis(10)).await;
        }
        (batches, active)
    })
    .expect("executor");
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("reopen");
        let p = Partition::new("t".into(), 0, log.clone());
        let load = p.load_producers(now_ms()).await.expect("load");
        let in_active = log.offsets().log_end_offset - active_base;
        assert!(
            load.snapshot_offset
                .is_some_and(|o| o >= Offset(active_base)),
            "a snapshot from the last roll: {load:?}, active segment from {active_base}"
        );
        assert!(
            (load.replayed_batches as i64) <= in_active,
            "replayed {} of {batches} batches; the active segment holds {in_active} records",
            load.replayed_batches
        );
        // The producer's next sequence is known: a duplicate of the last batch is detected.
        let next = log.offsets().log_end_offset as u64;
        let b = producer_seq_batch(7, 0, 2 * 40, next, &[400, 400], now_ms());
        p.produce(&b, opts(false))
            .await
            .expect("in sequence after the restart");
        p.close().await.expect("close");
    })
    .expect("executor");
}
