//! A task that polls a pending I/O operation many times (a sibling future in the same
//! `zip`/`or` wakes it over and over) must not strand itself. glommio added a clone of the
//! task's waker to the operation's waiter list at every poll; its waker reference count is an
//! `i16`, and an overflow during a reactor wake was caught and logged inside glommio, leaving
//! the task marked scheduled but in no queue: the executor slept for ever (a CI hang in
//! `log_truncate_crash`, whose checkpoint loop polled a truncation's pending rename this way).
//! The run is on a thread of its own, waited for from outside: a timer inside the stranded
//! task could not fire.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::on_a_thread_bounded;
use ringbroker::runtime;

/// Far more polls than the `i16` count allows (32,767).
const POLLS: usize = 40_000;

/// Far above a run's time (well under a second of CPU): only a stranded task reaches it.
const HANG_BOUND: Duration = Duration::from_secs(120);

/// Holds a blocking-pool operation pending while `sibling`, in the same task, runs; the
/// operation is released when the sibling is done.
fn hold_pending_while<F: std::future::Future<Output = ()> + 'static>(
    name: &'static str,
    sibling: fn() -> F,
) {
    let finished = on_a_thread_bounded(name, HANG_BOUND, move || {
        runtime::block_on(async move {
            let (release_tx, release_rx) = mpsc::channel::<()>();
            let held = runtime::spawn_blocking(move || release_rx.recv().is_ok());
            let then_release = async move {
                sibling().await;
                release_tx.send(()).is_ok()
            };
            let (held, released) = futures_lite::future::zip(held, then_release).await;
            held && released
        })
        .unwrap_or(false)
    });
    assert!(finished, "{name}: the run did not finish its work");
}

/// The sibling wakes the task on a timer 40,000 times.
#[test]
fn a_pending_blocking_operation_polled_by_a_timer_sibling_does_not_strand_its_task() {
    hold_pending_while("timer sibling", || async {
        for _ in 0..POLLS {
            runtime::sleep(Duration::from_micros(1)).await;
        }
    });
}

/// The sibling yields: the overflow then came during a poll (glommio's 'Waker invariant
/// broken' panic), not a wake.
#[test]
fn a_pending_blocking_operation_polled_by_a_yielding_sibling_does_not_strand_its_task() {
    hold_pending_while("yielding sibling", || async {
        for _ in 0..POLLS {
            futures_lite::future::yield_now().await;
        }
    });
}
