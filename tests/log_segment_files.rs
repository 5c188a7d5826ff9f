//! `preallocate` and `file.delete.delay.ms` as Kafka's topic configs mean them: a preallocated
//! segment has its blocks allocated up front (its size still says where the data ends), and a
//! segment deleted by retention lives on as `<name>.deleted` for the delay, then goes; a stop
//! before that leaves the files to the next open, which removes them.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use common::{opts, seq_batch, verify_log};
use ringbroker::log::{Log, LogConfig};
use ringbroker::runtime::{block_on, now_ms, sleep};

fn names(dir: &Path, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(suffix))
        .collect();
    v.sort();
    v
}

#[test]
fn a_preallocated_segment_has_its_blocks_and_its_data_size() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("t-0");
    let config = LogConfig {
        segment_bytes: 4 << 20,
        preallocate: true,
        ..LogConfig::default()
    };
    block_on(async {
        let log = Log::open(&dir, config.clone()).await.expect("open");
        log.append(&seq_batch(0, &[100], now_ms()), opts(true))
            .await
            .expect("append");
        let meta = std::fs::metadata(dir.join(format!("{:020}.log", 0))).expect("segment");
        // The data's size (with `ringbroker.log.io=direct`, padded to one 4 KiB block while
        // the segment is written; a close cuts the padding).
        assert!(meta.len() <= 4096, "the size is the data's: {}", meta.len());
        assert!(
            meta.blocks() * 512 >= 4 << 20,
            "{} bytes allocated, segment.bytes is 4 MiB",
            meta.blocks() * 512
        );
        log.close().await.expect("close");
        let closed = std::fs::metadata(dir.join(format!("{:020}.log", 0))).expect("segment");
        assert!(
            closed.len() < 4096,
            "no padding after a close: {}",
            closed.len()
        );
        let log = Log::open(&dir, config).await.expect("reopen");
        assert!(log.recovery_report().clean_shutdown);
        verify_log(&log, 0).await.expect("valid");
        assert_eq!(log.offsets().log_end_offset, 1);
        log.close().await.expect("close");
    })
    .expect("executor");
}

fn retained_config(delay_ms: i64) -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        retention_bytes: 4096,
        file_delete_delay_ms: delay_ms,
        ..LogConfig::default()
    }
}

async fn fill_segments(log: &Log) {
    for _ in 0..40 {
        let next = log.offsets().log_end_offset as u64;
        log.append(&seq_batch(next, &[400], now_ms()), opts(true))
            .await
            .expect("append");
    }
}

#[test]
fn retention_renames_segments_and_deletes_them_after_the_delay() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("t-0");
    block_on(async {
        // A long delay: the files wait as .deleted; the next open removes them.
        let log = Log::open(&dir, retained_config(600_000))
            .await
            .expect("open");
        fill_segments(&log).await;
        let outcome = log.apply_retention(now_ms()).await.expect("retention");
        assert!(!outcome.deleted_segments.is_empty(), "{outcome:?}");
        let first_deleted = format!("{:020}.log", outcome.deleted_segments[0]);
        assert!(!names(&dir, ".log").contains(&first_deleted));
        assert!(
            names(&dir, ".deleted").contains(&format!("{first_deleted}.deleted")),
            "{:?}",
            names(&dir, "")
        );
        verify_log(&log, log.offsets().log_start_offset)
            .await
            .expect("valid");
        log.close().await.expect("close");
        let log = Log::open(&dir, retained_config(600_000))
            .await
            .expect("reopen");
        assert!(names(&dir, ".deleted").is_empty(), "swept at open");
        log.close().await.expect("close");
    })
    .expect("executor");

    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("t-0");
    block_on(async {
        // A short delay: gone by themselves (waited for, bounded).
        let log = Log::open(&dir, retained_config(50)).await.expect("open");
        fill_segments(&log).await;
        let outcome = log.apply_retention(now_ms()).await.expect("retention");
        assert!(!outcome.deleted_segments.is_empty());
        for _ in 0..500 {
            if names(&dir, ".deleted").is_empty() {
                break;
            }
            sleep(Duration::from_millis(10)).await;
        }
        assert!(names(&dir, ".deleted").is_empty(), "{:?}", names(&dir, ""));
        log.close().await.expect("close");
    })
    .expect("executor");
}
