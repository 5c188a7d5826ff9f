//! Storage failures under the log, injected by the fault layer (`runtime::fault`).
//!
//! - A failed fsync takes the log offline: Linux may mark the dirty pages clean after a failed
//!   writeback, so a later successful fsync would acknowledge data that a power loss then
//!   shows to be gone. Before this rule, append 3 below was acknowledged and then lost.
//! - A write that fails with EIO does the same; one that fails for lack of space (ENOSPC or a
//!   short write) is rolled back and later appends succeed.

mod common;

use common::{opts, seq_batch, verify_log};
use ringbroker::log::{Log, LogConfig, LogError};
use ringbroker::runtime::block_on;
use ringbroker::runtime::fault::{FaultRule, FaultScope, FileOp, PowerLoss};

fn batch(first: u64) -> Vec<u8> {
    seq_batch(first, &[100, 100], 1_700_000_000_000)
}

#[test]
fn failed_fsync_takes_the_log_offline_and_nothing_acknowledged_is_lost() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scope = FaultScope::install(tmp.path());
    let dir = tmp.path().join("t-0");
    let acked_end = block_on(async {
        let log = Log::open(&dir, LogConfig::default()).await.expect("open");
        let first = log.append(&batch(0), opts(true)).await.expect("append 1");
        assert_eq!(first.base_offset.0, 0);
        scope.add_rule(
            FaultRule::on(FileOp::Fsync)
                .matching(".log")
                .times(1)
                .errno(libc::EIO),
        );
        let failed = log.append(&batch(2), opts(true)).await;
        assert!(failed.is_err(), "the fsync failed: {failed:?}");
        // The next fsync would succeed; the log must not let it vouch for append 2's pages.
        let third = log.append(&batch(2), opts(true)).await;
        match &third {
            Err(LogError::Offline { .. }) => {}
            other => panic!("append after a failed fsync: want Offline, got {other:?}"),
        }
        assert!(log.offline_reason().is_some());
        assert!(matches!(
            log.read(0, 1 << 20, None).await,
            Err(LogError::Offline { .. })
        ));
        assert!(
            log.checkpoint().await.is_err(),
            "an offline log writes no checkpoint"
        );
        let offsets = log.offsets();
        assert_eq!(offsets.recovery_point, 2, "the recovery point did not move");
        assert!(
            log.close().await.is_err(),
            "close of an offline log says so"
        );
        match third {
            Ok(info) => info.last_offset.0 + 1,
            Err(_) => 2,
        }
    })
    .expect("executor");
    assert_eq!(scope.injected(), 1);
    scope
        .power_loss(PowerLoss::DropUnsynced)
        .expect("power loss");
    block_on(async {
        let log = Log::open(&dir, LogConfig::default()).await.expect("reopen");
        let verified = verify_log(&log, 0).await.expect("a valid prefix");
        let end = log.offsets().log_end_offset;
        assert!(
            end >= acked_end,
            "acknowledged up to {acked_end}, the log ends at {end} ({} records)",
            verified.records
        );
        // Recovered from what is durable, the log serves again.
        let again = log.append(&batch(end as u64), opts(true)).await;
        assert!(again.is_ok(), "after a restart the log works: {again:?}");
        log.close().await.expect("close");
    })
    .expect("executor");
}

#[test]
fn a_write_error_takes_the_log_offline_but_a_full_disk_does_not() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scope = FaultScope::install(tmp.path());
    let dir = tmp.path().join("t-0");
    block_on(async {
        let log = Log::open(&dir, LogConfig::default()).await.expect("open");
        log.append(&batch(0), opts(false)).await.expect("append");
        // A full device: short write, then ENOSPC. Rolled back, the log carries on.
        scope.add_rule(
            FaultRule::on(FileOp::Write)
                .matching(".log")
                .times(1)
                .short_write(10),
        );
        let short = log.append(&batch(2), opts(false)).await;
        assert!(matches!(short, Err(LogError::DiskFull { .. })), "{short:?}");
        scope.clear_rules();
        scope.add_rule(
            FaultRule::on(FileOp::Write)
                .matching(".log")
                .times(1)
                .errno(libc::ENOSPC),
        );
        let full = log.append(&batch(2), opts(false)).await;
        assert!(matches!(full, Err(LogError::DiskFull { .. })), "{full:?}");
        assert!(log.offline_reason().is_none());
        let ok = log
            .append(&batch(2), opts(false))
            .await
            .expect("space is back");
        assert_eq!(ok.base_offset.0, 2);
        // EIO on a write: offline.
        scope.clear_rules();
        scope.add_rule(
            FaultRule::on(FileOp::Write)
                .matching(".log")
                .times(1)
                .errno(libc::EIO),
        );
        assert!(log.append(&batch(4), opts(false)).await.is_err());
        let after = log.append(&batch(4), opts(false)).await;
        assert!(matches!(after, Err(LogError::Offline { .. })), "{after:?}");
    })
    .expect("executor");
}

#[test]
fn a_read_error_fails_that_read_only() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scope = FaultScope::install(tmp.path());
    let dir = tmp.path().join("t-0");
    // Reads from the file, not from the tail cache (this thread's shard budget).
    ringbroker::log::tail_cache::set_shard_budget(0);
    block_on(async {
        let log = Log::open(&dir, LogConfig::default()).await.expect("open");
        log.append(&batch(0), opts(true)).await.expect("append");
        scope.add_rule(
            FaultRule::on(FileOp::Read)
                .matching(".log")
                .times(1)
                .errno(libc::EIO),
        );
        let failed = log.read(0, 1 << 20, None).await;
        assert!(matches!(failed, Err(LogError::Io { .. })), "{failed:?}");
        // Nothing was written wrong: the data is still there for the next read and appends
        // go on.
        let again = log.read(0, 1 << 20, None).await.expect("read again");
        assert!(!again.records.is_empty());
        log.append(&batch(2), opts(true)).await.expect("append");
        log.close().await.expect("close");
    })
    .expect("executor");
}
