//! A crash at every point of a truncation (file operation by file operation, through the
//! fault layer's countdown), followed by `kill -9` or a power loss, leaves either the whole log
//! (the truncation had not become durable) or exactly the truncated one — never a state in
//! between, such as later segments removed but the segment holding the offset not cut. Before
//! truncation was crash-safe, a crash after the later segments were removed left a log ending
//! at the end of the kept segment. Starting over at a later offset (a follower behind the
//! leader's log start) is checked the same way.

mod common;

use std::path::Path;

use common::{on_a_thread_bounded, opts, seq_batch, verify_log, XorShift};
use ringbroker::log::{Log, LogConfig};
use ringbroker::runtime::block_on;
use ringbroker::runtime::fault::{FaultScope, PowerLoss};

/// Far above a run's milliseconds: only a hang reaches it.
const HANG_BOUND: std::time::Duration = std::time::Duration::from_secs(120);

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Appends durably until the log has 4 segments; returns its end.
async fn fill(log: &Log, rng: &mut XorShift) -> i64 {
    for _ in 0..500 {
        if log.offsets().segments >= 4 {
            break;
        }
        let next = log.offsets().log_end_offset as u64;
        let lens: Vec<usize> = (0..rng.range(1, 4))
            .map(|_| rng.range(21, 400) as usize)
            .collect();
        log.append(&seq_batch(next, &lens, 1_700_000_000_000), opts(true))
            .await
            .expect("append");
    }
    log.offsets().log_end_offset
}

/// One run: build, crash at operation `crash_at` of a truncation to `target` (with
/// `checkpoints_meanwhile`, checkpoints written all along, as housekeeping may), end the
/// process (`power` or not), reopen. Returns (old end, end after reopening, truncation
/// finished without the crash, where a completed truncation ends).
fn run_with(
    dir: &Path,
    scope: &FaultScope,
    seed: u64,
    crash_at: u64,
    power: bool,
    checkpoints_meanwhile: bool,
) -> (i64, i64, bool, i64) {
    let mut rng = XorShift::new(seed);
    let (old_end, target, completed) = block_on(async {
        let log = Log::open(dir, config()).await.expect("open");
        let old_end = fill(&log, &mut rng).await;
        let bases = log.segment_bases();
        // Inside the second segment, so one is kept, one is cut and two are removed.
        let target = bases[1] + (bases[2] - bases[1]) / 2;
        scope.crash_after(crash_at);
        let done = std::cell::Cell::new(!checkpoints_meanwhile);
        let truncation = async {
            let result = log.truncate_to(target).await;
            done.set(true);
            result
        };
        // Bounded, and paced by the timer: a busy yield loop overflowed glommio's waker
        // count while the truncation waited for its I/O. After the crash every write fails.
        let stage = std::cell::Cell::new("not started");
        let checkpoints = async {
            for _ in 0..10_000 {
                if done.get() {
                    break;
                }
                stage.set("writing a checkpoint");
                if log.checkpoint().await.is_err() {
                    break;
                }
                stage.set("sleeping");
                ringbroker::runtime::sleep(std::time::Duration::from_micros(100)).await;
            }
            stage.set("finished");
        };
        // A hang (seen once in CI: the executor asleep, neither side ever woken) fails the
        // run with what each side was doing instead of stalling the suite.
        let both = async { Some(futures_lite::future::zip(truncation, checkpoints).await) };
        let bound = async {
            ringbroker::runtime::sleep(HANG_BOUND).await;
            None
        };
        let Some((result, ())) = futures_lite::future::or(both, bound).await else {
            panic!(
                "seed {seed}, crash at operation {crash_at} (power loss: {power}, checkpoints \
                 meanwhile: {checkpoints_meanwhile}): not finished within {HANG_BOUND:?}; \
                 truncation returned: {}, checkpoint loop: {}",
                done.get(),
                stage.get()
            );
        };
        let completed = result.is_ok() && !scope.crashed();
        scope.crash();
        (old_end, target, completed)
    })
    .expect("executor");
    if power {
        scope
            .power_loss(PowerLoss::DropUnsynced)
            .expect("power loss");
    } else {
        scope.restart();
    }
    let (end, cut_end) = block_on(async {
        let log = Log::open(dir, config()).await.expect("reopen");
        verify_log(&log, 0).await.expect("a valid prefix");
        let end = log.offsets().log_end_offset;
        // Where a finished truncation ends: the last batch boundary at or below the target.
        let cut_end = log.truncate_to(target).await.expect("truncate again");
        log.close().await.expect("close");
        (end, cut_end)
    })
    .expect("executor");
    (old_end, end, completed, cut_end)
}

#[test]
fn a_crash_anywhere_in_a_truncation_leaves_the_whole_log_or_the_truncated_one() {
    crash_anywhere(false);
}

/// A checkpoint written while the truncation runs carried no intent and the old recovery
/// point: a crash after it, with later segments removed and the kept one not yet cut, left
/// a log ending at the kept segment's end.
#[test]
fn checkpoints_written_during_a_truncation_keep_its_intent() {
    crash_anywhere(true);
}

fn crash_anywhere(checkpoints_meanwhile: bool) {
    let mut steps = 0;
    for power in [false, true] {
        let mut finished = false;
        for crash_at in 0..600u64 {
            let tmp = tempfile::tempdir().expect("tempdir");
            let scope = FaultScope::install(tmp.path());
            let dir = tmp.path().join("t-0");
            let (old_end, end, completed, cut_end) = on_a_thread_bounded(
                &format!("crash at operation {crash_at} (power loss: {power})"),
                HANG_BOUND * 2,
                move || run_with(&dir, &scope, 7, crash_at, power, checkpoints_meanwhile),
            );
            assert!(
                end == old_end || end == cut_end,
                "crash at operation {crash_at} of the truncation (power loss: {power}): the log ends at {end}, neither the whole log ({old_end}) nor the truncated one ({cut_end})"
            );
            if completed {
                assert_eq!(end, cut_end, "a truncation that returned is durable");
                finished = true;
                break;
            }
            steps += 1;
        }
        assert!(
            finished,
            "the truncation never completed within the countdown range"
        );
    }
    assert!(
        steps > 10,
        "the countdown walked through the truncation's steps ({steps})"
    );
}

/// One run of starting over at `start` (past the end), crashed at operation `crash_at`:
/// returns (old end, (log start, log end) after reopening, finished without the crash).
fn run_start_over(
    dir: &Path,
    scope: &FaultScope,
    crash_at: u64,
    power: bool,
    start: i64,
) -> (i64, (i64, i64), bool) {
    let mut rng = XorShift::new(11);
    let (old_end, completed) = block_on(async {
        let log = Log::open(dir, config()).await.expect("open");
        let old_end = fill(&log, &mut rng).await;
        scope.crash_after(crash_at);
        let result = log.truncate_fully_and_start_at(start).await;
        let completed = result.is_ok() && !scope.crashed();
        scope.crash();
        (old_end, completed)
    })
    .expect("executor");
    if power {
        scope
            .power_loss(PowerLoss::DropUnsynced)
            .expect("power loss");
    } else {
        scope.restart();
    }
    let reopened = block_on(async {
        let log = Log::open(dir, config()).await.expect("reopen");
        let o = log.offsets();
        // The log takes appends where it ends, whichever state it is in.
        let info = log
            .append(&seq_batch(0, &[50], 1_700_000_000_000), opts(true))
            .await
            .expect("append after reopening");
        assert_eq!(
            info.base_offset.0, o.log_end_offset,
            "appends go on at the end"
        );
        log.close().await.expect("close");
        (o.log_start_offset, o.log_end_offset)
    })
    .expect("executor");
    (old_end, reopened, completed)
}

#[test]
fn a_crash_anywhere_in_starting_over_leaves_the_whole_log_or_an_empty_one_at_the_new_start() {
    let start = 10_000;
    for power in [false, true] {
        let mut finished = false;
        for crash_at in 0..200u64 {
            let tmp = tempfile::tempdir().expect("tempdir");
            let scope = FaultScope::install(tmp.path());
            let dir = tmp.path().join("t-0");
            let (old_end, reopened, completed) =
                run_start_over(&dir, &scope, crash_at, power, start);
            assert!(
                reopened == (0, old_end) || reopened == (start, start),
                "crash at operation {crash_at} of starting over (power loss: {power}): the log is {reopened:?}, neither the whole log (0, {old_end}) nor empty at {start}"
            );
            if completed {
                assert_eq!(
                    reopened,
                    (start, start),
                    "a start-over that returned is durable"
                );
                finished = true;
                break;
            }
        }
        assert!(
            finished,
            "starting over never completed within the countdown range"
        );
    }
}

#[test]
fn starting_over_below_the_end_is_refused_and_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    block_on(async {
        let log = Log::open(tmp.path(), config()).await.expect("open");
        let end = fill(&log, &mut XorShift::new(3)).await;
        let refused = log.truncate_fully_and_start_at(end).await;
        assert!(
            refused.is_err(),
            "a start at the end is refused: {refused:?}"
        );
        assert_eq!(log.offsets().log_end_offset, end);
        verify_log(&log, 0).await.expect("the log is intact");
        log.close().await.expect("close");
    })
    .expect("executor");
}
