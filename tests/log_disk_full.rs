//! A full disk: appends fail with `LogError::DiskFull`, the log stays valid and readable at its
//! last acknowledged append, and appends work again once space is freed.
//!
//! Runs on a small tmpfs mounted for the test (needs root; skipped otherwise). A guard unmounts
//! it (lazily) however the test ends.

mod common;
mod tmpfs;

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use common::{opts, release, seq_batch, verify_log, XorShift};
use ringbroker::log::{Log, LogConfig, LogError};
use ringbroker::runtime::{block_on, spawn};
use tmpfs::Tmpfs;

const FS_SIZE: &str = "8m";
const FILLER_BYTES: usize = 3 << 20;

fn config() -> LogConfig {
    LogConfig {
        // Several segments in 8 MiB, so that the disk also fills around rolls.
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    }
}

/// Writes `len` bytes of real data (tmpfs allocates pages only for what is written).
fn write_filler(path: &Path, len: usize) {
    std::fs::write(path, vec![0xa5u8; len]).expect("writing the filler file");
}

/// Fills whatever space is left with a file of its own, page by page, until ENOSPC.
fn top_up(path: &Path) -> u64 {
    use std::io::Write;
    let mut f = std::fs::File::create(path).expect("creating the top-up file");
    let page = vec![0x5au8; 4096];
    let mut written = 0u64;
    // 8 MiB of pages at most: bounded.
    for _ in 0..(8 << 20) / 4096 + 1 {
        match f.write(&page) {
            Ok(0) | Err(_) => break,
            Ok(n) => written += n as u64,
        }
    }
    written
}

/// Value lengths for a batch of about `bytes` bytes in `records` records.
fn lens(records: usize, bytes: usize) -> Vec<usize> {
    vec![(bytes / records).max(common::VALUE_PREFIX_LEN); records]
}

/// Segment base offsets from the `.log` files in `dir`.
fn segment_files(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

/// Checks that the log holds exactly the acknowledged appends, `acked` being (first, last)
/// offsets, one batch each: every record reads back with its value, and the batches of the
/// log are exactly the acknowledged ones (no failed append left a batch or a piece of one).
async fn check_exactly(log: &Log, acked: &[(i64, i64)]) {
    let mut acked = acked.to_vec();
    acked.sort_unstable();
    let end = acked.last().map_or(0, |a| a.1 + 1);
    let o = log.offsets();
    assert_eq!(
        o.log_end_offset, end,
        "the log ends after the last acknowledged append"
    );
    assert_eq!(o.written_end_offset, end);
    let v = verify_log(log, 0)
        .await
        .expect("the log is valid and readable");
    let batches: Vec<i64> = v.crcs.iter().map(|(base, _)| *base).collect();
    let acked_bases: Vec<i64> = acked.iter().map(|a| a.0).collect();
    assert_eq!(
        batches, acked_bases,
        "the log's batches are the acknowledged ones"
    );
    assert_eq!(v.records as i64, end);
}

#[test]
fn full_disk_fails_appends_cleanly_then_recovers() {
    let Some(fs) = Tmpfs::mount_or_skip("full_disk_fails_appends_cleanly_then_recovers", FS_SIZE)
    else {
        return;
    };
    let filler = fs.path.join("filler");
    write_filler(&filler, FILLER_BYTES);
    let dir = fs.path.join("topic-0");
    let mut rng = XorShift::new(42);
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        let mut acked: Vec<(i64, i64)> = Vec::new();
        // 1. Append until the disk is full (8 MiB hold fewer than 8 MiB / 1 KiB appends).
        let mut failure = None;
        for _ in 0..8192 {
            let next = log.offsets().log_end_offset;
            let records = rng.range(1, 21) as usize;
            let bytes = rng.range(1024, 64 * 1024) as usize;
            let batch = seq_batch(next as u64, &lens(records, bytes), 1000 + next);
            match log.append(&batch, opts(rng.range(0, 2) == 0)).await {
                Ok(info) => {
                    assert_eq!(info.base_offset.0, next);
                    acked.push((info.base_offset.0, info.last_offset.0));
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let failure = failure.expect("the disk never filled up");
        assert!(matches!(failure, LogError::DiskFull { .. }), "{failure:?}");
        let segments_at_failure = log.offsets().segments;
        println!(
            "disk full after {} appends ({} bytes in {} segments): {failure}",
            acked.len(),
            log.offsets().size_bytes,
            segments_at_failure
        );
        assert!(
            acked.len() > 10,
            "some appends succeeded before the disk filled"
        );

        // 2. The log is exactly what was acknowledged, and readable.
        check_exactly(&log, &acked).await;
        assert_eq!(
            segment_files(&dir),
            log.segment_bases(),
            "no half-made segment left"
        );

        // 3. Really full now (the failed append may have left some room): further appends
        //    larger than a page fail, each cleanly.
        let topped = top_up(&fs.path.join("top-up"));
        println!("topped up the file system with {topped} more bytes");
        for i in 0..5 {
            let next = log.offsets().log_end_offset;
            let batch = seq_batch(next as u64, &lens(4, 16 * 1024 * (i + 1)), 1000 + next);
            let r = log.append(&batch, opts(i % 2 == 0)).await;
            assert!(
                matches!(r, Err(LogError::DiskFull { .. })),
                "append {i} while full: {r:?}"
            );
            check_exactly(&log, &acked).await;
        }
        assert_eq!(segment_files(&dir), log.segment_bases());

        // 4. Space comes back: appends work again, at the right offsets.
        std::fs::remove_file(&filler).expect("rm filler");
        std::fs::remove_file(fs.path.join("top-up")).expect("rm top-up");
        for _ in 0..60 {
            let next = log.offsets().log_end_offset;
            let batch = seq_batch(next as u64, &lens(10, 20 * 1024), 1000 + next);
            let info = log
                .append(&batch, opts(true))
                .await
                .expect("append after freeing");
            assert_eq!(info.base_offset.0, next);
            acked.push((info.base_offset.0, info.last_offset.0));
        }
        check_exactly(&log, &acked).await;
        assert!(
            log.offsets().segments > segments_at_failure,
            "rolled after the space came back"
        );

        // 5. A clean close and reopen give back every acknowledged record.
        log.close().await.expect("close");
        release(log).await;
        let log = Log::open(&dir, config()).await.expect("reopen");
        let report = log.recovery_report().clone();
        assert!(report.clean_shutdown, "{report:?}");
        assert!(report.truncated_at.is_none(), "{report:?}");
        check_exactly(&log, &acked).await;
        log.close().await.expect("close");
        release(log).await;
    })
    .expect("executor");
    drop(fs);
}

#[test]
fn full_disk_during_concurrent_durable_appends() {
    let Some(fs) = Tmpfs::mount_or_skip("full_disk_during_concurrent_durable_appends", FS_SIZE)
    else {
        return;
    };
    let filler = fs.path.join("filler");
    write_filler(&filler, 2 << 20);
    let dir = fs.path.join("topic-0");
    const APPENDERS: u64 = 4;
    // Each appender stops after this many failures; bounded by count either way.
    const FAILURES_TO_STOP: u32 = 3;
    const MAX_APPENDS: u32 = 4000;

    let acked = block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        let acked: Rc<RefCell<Vec<(i64, i64)>>> = Rc::default();
        let failed = Rc::new(RefCell::new(0u32));
        let tasks: Vec<_> = (0..APPENDERS)
            .map(|t| {
                let log = log.clone();
                let acked = Rc::clone(&acked);
                let failed = Rc::clone(&failed);
                spawn(async move {
                    let mut rng = XorShift::new(1000 + t);
                    let mut failures = 0;
                    for _ in 0..MAX_APPENDS {
                        if failures >= FAILURES_TO_STOP {
                            break;
                        }
                        // Offsets are assigned when `append` is first polled, right below
                        // with nothing in between: number the records with them.
                        let next = log.offsets().log_end_offset;
                        let records = rng.range(1, 21) as usize;
                        let bytes = rng.range(512, 64 * 1024) as usize;
                        let batch = seq_batch(next as u64, &lens(records, bytes), 1000 + next);
                        match log.append(&batch, opts(true)).await {
                            Ok(info) => {
                                assert_eq!(info.base_offset.0, next);
                                assert_eq!(info.last_offset.0, next + records as i64 - 1);
                                acked
                                    .borrow_mut()
                                    .push((info.base_offset.0, info.last_offset.0));
                            }
                            Err(LogError::DiskFull { .. }) => {
                                failures += 1;
                                *failed.borrow_mut() += 1;
                            }
                            Err(e) => panic!("appender {t}: unexpected error {e:?}"),
                        }
                    }
                    assert!(
                        failures >= FAILURES_TO_STOP,
                        "appender {t}: the disk never filled"
                    );
                })
            })
            .collect();
        for t in tasks {
            t.await;
        }
        let acked = acked.borrow().clone();
        println!(
            "{} appends acknowledged, {} failed with DiskFull, log of {} bytes in {} segments",
            acked.len(),
            failed.borrow(),
            log.offsets().size_bytes,
            log.offsets().segments
        );
        // Acknowledged appends tile the log from 0 with no gap: failed ones left nothing.
        check_exactly(&log, &acked).await;
        assert_eq!(segment_files(&dir), log.segment_bases());
        // Stop without closing, as a crash would, while the disk is still full.
        release(log).await;
        acked
    })
    .expect("executor");

    // Reopening needs a little space (checkpoint, index rewrites).
    std::fs::remove_file(&filler).expect("rm filler");
    block_on(async {
        let log = Log::open(&dir, config())
            .await
            .expect("reopen after the crash");
        let report = log.recovery_report().clone();
        println!("{report:?}");
        assert!(!report.clean_shutdown);
        assert!(report.truncated_at.is_none(), "nothing to cut: {report:?}");
        check_exactly(&log, &acked).await;
        // And appends work again.
        let next = log.offsets().log_end_offset;
        let info = log
            .append(&seq_batch(next as u64, &lens(5, 4096), 1), opts(true))
            .await
            .expect("append after freeing space");
        assert_eq!(info.base_offset.0, next);
        log.close().await.expect("close");
        release(log).await;
        let log = Log::open(&dir, config()).await.expect("reopen");
        let mut all = acked.clone();
        all.push((info.base_offset.0, info.last_offset.0));
        check_exactly(&log, &all).await;
        log.close().await.expect("close");
        release(log).await;
    })
    .expect("executor");
    drop(fs);
}

#[test]
fn full_disk_at_a_segment_roll_leaves_no_segment_behind() {
    let Some(fs) = Tmpfs::mount_or_skip(
        "full_disk_at_a_segment_roll_leaves_no_segment_behind",
        FS_SIZE,
    ) else {
        return;
    };
    let dir = fs.path.join("topic-0");
    let top_up_path = fs.path.join("top-up");
    const BATCH: usize = 60 * 1024;
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        let mut acked = Vec::new();
        // Fill the first segment until the next batch would roll it (bounded: 1 MiB / 60 KiB).
        for _ in 0..64 {
            let o = log.offsets();
            if o.size_bytes + BATCH as u64 + 1024 > config().segment_bytes {
                break;
            }
            let next = o.log_end_offset;
            let info = log
                .append(&seq_batch(next as u64, &lens(8, BATCH), next), opts(true))
                .await
                .expect("append");
            acked.push((info.base_offset.0, info.last_offset.0));
        }
        assert_eq!(log.offsets().segments, 1);
        top_up(&top_up_path);

        // The next append rolls; the new segment cannot get a byte.
        let leo = log.offsets().log_end_offset;
        for i in 0..3 {
            let batch = seq_batch(leo as u64, &lens(8, BATCH), leo);
            let r = log.append(&batch, opts(i != 1)).await;
            assert!(matches!(r, Err(LogError::DiskFull { .. })), "{r:?}");
            assert_eq!(log.offsets().segments, 1, "the new segment was dropped");
            assert_eq!(log.segment_bases(), vec![0]);
            assert_eq!(segment_files(&dir), vec![0], "its files are gone");
            check_exactly(&log, &acked).await;
        }

        // With space, the roll happens and the data lands in the new segment.
        std::fs::remove_file(&top_up_path).expect("rm top-up");
        let batch = seq_batch(leo as u64, &lens(8, BATCH), leo);
        let info = log.append(&batch, opts(true)).await.expect("append");
        assert_eq!(info.base_offset.0, leo);
        acked.push((info.base_offset.0, info.last_offset.0));
        assert_eq!(log.segment_bases(), vec![0, leo]);
        assert_eq!(segment_files(&dir), vec![0, leo]);
        check_exactly(&log, &acked).await;
        log.close().await.expect("close");
        release(log).await;

        let log = Log::open(&dir, config()).await.expect("reopen");
        assert!(log.recovery_report().clean_shutdown);
        assert_eq!(log.recovery_report().scanned_segments, 0);
        check_exactly(&log, &acked).await;
        log.close().await.expect("close");
        release(log).await;
    })
    .expect("executor");
    drop(fs);
}

/// Closing and opening a log need a little space too (the checkpoint is rewritten). On a
/// completely full disk they may fail with `DiskFull` (they do today); either way nothing
/// acknowledged is lost, reads keep working, and the log opens once space is back.
#[test]
fn close_and_open_on_a_full_disk_lose_nothing() {
    let Some(fs) = Tmpfs::mount_or_skip("close_and_open_on_a_full_disk_lose_nothing", FS_SIZE)
    else {
        return;
    };
    let dir = fs.path.join("topic-0");
    let top_up_path = fs.path.join("top-up");
    let mut rng = XorShift::new(7);
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        let mut acked = Vec::new();
        for _ in 0..8192 {
            let next = log.offsets().log_end_offset;
            let bytes = rng.range(1024, 64 * 1024) as usize;
            let batch = seq_batch(next as u64, &lens(7, bytes), next);
            match log.append(&batch, opts(true)).await {
                Ok(info) => acked.push((info.base_offset.0, info.last_offset.0)),
                Err(LogError::DiskFull { .. }) => break,
                Err(e) => panic!("{e:?}"),
            }
        }
        top_up(&top_up_path);

        let closed = log.close().await;
        println!("close on a full disk: {closed:?}");
        assert!(
            matches!(closed, Ok(()) | Err(LogError::DiskFull { .. })),
            "{closed:?}"
        );
        // Closed (or half closed): no more appends, but what is there reads back.
        let r = log
            .append(&seq_batch(0, &lens(1, 100), 0), opts(true))
            .await;
        assert!(matches!(r, Err(LogError::Closed(_))), "{r:?}");
        check_exactly(&log, &acked).await;
        release(log).await;

        match Log::open(&dir, config()).await {
            Ok(log) => {
                println!("open on a full disk: ok, {:?}", log.recovery_report());
                check_exactly(&log, &acked).await;
                release(log).await;
            }
            Err(e) => {
                println!("open on a full disk: {e}");
                assert!(matches!(e, LogError::DiskFull { .. }), "{e:?}");
            }
        }

        std::fs::remove_file(&top_up_path).expect("rm top-up");
        let log = Log::open(&dir, config()).await.expect("open with space");
        println!("open with space: {:?}", log.recovery_report());
        assert!(log.recovery_report().truncated_at.is_none());
        check_exactly(&log, &acked).await;
        let next = log.offsets().log_end_offset;
        let info = log
            .append(&seq_batch(next as u64, &lens(3, 3000), next), opts(true))
            .await
            .expect("append");
        assert_eq!(info.base_offset.0, next);
        acked.push((info.base_offset.0, info.last_offset.0));
        log.close().await.expect("close");
        release(log).await;
        let log = Log::open(&dir, config()).await.expect("reopen");
        check_exactly(&log, &acked).await;
        release(log).await;
    })
    .expect("executor");
    drop(fs);
}
