//! The two ways segment files are written (`ringbroker.log.io`): direct (O_DIRECT from
//! aligned buffers, each write padded to a 4 KiB block and the next one repeating the last
//! partial block) and buffered (the page cache). Each must append, read back, restart cleanly
//! and uncleanly, roll and truncate; a log written one way must open and go on the other way.

mod common;

use common::{data_len, opts, release, seq_batch, verify_log};
use ringbroker::log::{Log, LogConfig};
use ringbroker::runtime::{block_on, now_ms, FileIo};

fn config(io: FileIo) -> LogConfig {
    LogConfig {
        segment_bytes: 256 << 10,
        io,
        ..LogConfig::default()
    }
}

/// Appends batches of odd sizes (so that writes start and end inside blocks), some durable,
/// several in flight at once; returns the log end.
async fn fill(log: &Log, batches: u64) -> i64 {
    for i in 0..batches {
        let next = log.offsets().log_end_offset as u64;
        let lens = [100 + (i as usize * 997) % 5000, 33];
        let first = log
            .append(&seq_batch(next, &lens, now_ms()), opts(i % 3 == 0))
            .await
            .expect("append");
        assert_eq!(first.base_offset.0, next as i64);
    }
    log.offsets().log_end_offset
}

#[test]
fn both_modes_append_read_restart_and_switch() {
    for (first, second) in [
        (FileIo::Direct, FileIo::Direct),
        (FileIo::Buffered, FileIo::Buffered),
        (FileIo::Direct, FileIo::Buffered),
        (FileIo::Buffered, FileIo::Direct),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("t-0");
        block_on(async {
            let log = Log::open(&dir, config(first)).await.expect("open");
            let end = fill(&log, 120).await;
            assert!(log.offsets().segments > 1, "the test rolls segments");
            let v = verify_log(&log, 0).await.expect("valid before restart");
            assert_eq!(v.records as i64, end);
            log.close().await.expect("close");
            release(log).await;

            let log = Log::open(&dir, config(second)).await.expect("reopen");
            assert!(log.recovery_report().clean_shutdown);
            let end = fill(&log, 60).await;
            let v = verify_log(&log, 0)
                .await
                .unwrap_or_else(|e| panic!("{first:?} then {second:?}: {e}"));
            assert_eq!(v.records as i64, end);
            // Truncation inside the active segment, then appends after it.
            let cut = log.truncate_to(end - 5).await.expect("truncate");
            let end = fill(&log, 10).await;
            assert!(end > cut);
            verify_log(&log, 0).await.expect("valid after truncation");
            log.close().await.expect("close");
            release(log).await;
        })
        .expect("executor");
    }
}

#[test]
fn direct_padding_after_an_unclean_stop_is_cut_quietly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("t-0");
    block_on(async {
        let log = Log::open(&dir, config(FileIo::Direct)).await.expect("open");
        let end = fill(&log, 7).await;
        log.flush().await.expect("flush");
        let active = log.active_segment_base();
        // No close: the active segment keeps its padding, as after kill -9.
        release(log).await;
        let path = dir.join(format!("{active:020}.log"));
        let len = std::fs::metadata(&path).expect("segment").len();
        let data = data_len(&path);
        assert_eq!(len % 4096, 0, "padded to the block: {len}");
        assert!(data < len, "some padding: data {data}, file {len}");

        let log = Log::open(&dir, config(FileIo::Direct))
            .await
            .expect("reopen");
        let report = log.recovery_report().clone();
        assert!(!report.clean_shutdown);
        assert_eq!(
            report.truncated_at, None,
            "padding is not a cut: {report:?}"
        );
        assert_eq!(report.padding_bytes, len - data);
        assert_eq!(log.offsets().log_end_offset, end);
        verify_log(&log, 0).await.expect("valid");
        let end = fill(&log, 5).await;
        assert_eq!(
            verify_log(&log, 0).await.expect("valid").records as i64,
            end
        );
        log.close().await.expect("close");
        release(log).await;
    })
    .expect("executor");
}

#[test]
fn reads_near_the_end_come_from_the_tail_cache_and_older_ones_from_the_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("t-0");
    block_on(async {
        let log = Log::open(&dir, config(FileIo::Direct)).await.expect("open");
        let end = fill(&log, 40).await;
        let before = log.tail_cache_stats();
        let last = log
            .read(end - 1, 1 << 20, None)
            .await
            .expect("read the tail");
        assert!(!last.records.is_empty());
        let after = log.tail_cache_stats();
        assert_eq!(after.hits, before.hits + 1, "{after:?}");
        // Everything reads back the same whether it came from memory or the file.
        verify_log(&log, 0).await.expect("valid");
        log.close().await.expect("close");
        release(log).await;

        // A reopened log has an empty cache: the same read goes to the file.
        let log = Log::open(&dir, config(FileIo::Direct))
            .await
            .expect("reopen");
        let again = log.read(end - 1, 1 << 20, None).await.expect("read");
        assert_eq!(again.records, last.records);
        let stats = log.tail_cache_stats();
        assert_eq!((stats.hits, stats.misses), (0, 1), "{stats:?}");
        release(log).await;
    })
    .expect("executor");
}

#[test]
fn buffered_logs_leave_the_tail_to_the_page_cache() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("t-0");
    block_on(async {
        let log = Log::open(&dir, config(FileIo::Buffered))
            .await
            .expect("open");
        let end = fill(&log, 5).await;
        log.read(end - 1, 1 << 20, None).await.expect("read");
        assert_eq!(log.tail_cache_stats().hits, 0);
        release(log).await;
    })
    .expect("executor");
}
