//! Reactor stalls: how long one poll of a task kept this shard's thread from everything else.
//!
//! Every task spawned through the runtime (and each shard's main future) is wrapped in
//! [`Timed`], which reads a coarse monotonic clock (a few ns, jiffy resolution: stalls worth
//! reporting are tens of ms) around each poll. The wall time counts, so a thread the OS did not
//! run in the middle of a poll shows up too. The longest stall per shard is a metric; stalls of
//! [`STALL_WARN`] or more are logged, at most one line per [`WARN_EVERY`] per shard.

use std::cell::Cell;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// A poll this long is logged as a stall.
pub const STALL_WARN: Duration = Duration::from_millis(100);
/// At most one stall warning per shard this often (with the count since the last one).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// This shard's stalls since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StallStats {
    /// The longest single poll.
    pub longest: Duration,
    /// Polls of [`STALL_WARN`] or longer.
    pub over_threshold: u64,
}

#[derive(Default)]
struct StallLog {
    stats: Cell<StallStats>,
    /// Stalls not yet reported in a log line, the worst of them, and when the last line went out.
    unreported: Cell<(u64, Duration)>,
    last_warn: Cell<Option<Duration>>,
}

thread_local! {
    static STALLS: StallLog = StallLog::default();
}

/// The calling shard's stalls.
pub fn stats() -> StallStats {
    STALLS.with(|s| s.stats.get())
}

/// A coarse monotonic clock (CLOCK_MONOTONIC_COARSE: read from the vDSO, no syscall).
fn coarse_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass; the clock id is valid on Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts);
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

fn record(took: Duration, now: Duration, spawned_at: &'static Location<'static>) {
    STALLS.with(|s| {
        let mut stats = s.stats.get();
        stats.longest = stats.longest.max(took);
        if took < STALL_WARN {
            s.stats.set(stats);
            return;
        }
        stats.over_threshold += 1;
        s.stats.set(stats);
        let (count, worst) = s.unreported.get();
        let (count, worst) = (count + 1, worst.max(took));
        let due = s
            .last_warn
            .get()
            .is_none_or(|last| now.saturating_sub(last) >= WARN_EVERY);
        if due {
            tracing::warn!(
                stalls = count,
                task = %spawned_at,
                worst_ms = worst.as_millis() as u64,
                longest_ever_ms = stats.longest.as_millis() as u64,
                "the shard's thread was held by one task for {} ms: nothing else on this shard ran meanwhile",
                took.as_millis()
            );
            s.unreported.set((0, Duration::ZERO));
            s.last_warn.set(Some(now));
        } else {
            s.unreported.set((count, worst));
        }
    });
}

/// A future whose polls are timed.
pub struct Timed<F> {
    inner: F,
    /// Where the task was spawned: a stall warning names it.
    spawned_at: &'static Location<'static>,
}

impl<F> Timed<F> {
    #[track_caller]
    pub fn new(inner: F) -> Timed<F> {
        Timed {
            inner,
            spawned_at: Location::caller(),
        }
    }
}

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let started = coarse_now();
        let spawned_at = self.spawned_at;
        // SAFETY: `inner` is never moved out of the pinned `Timed`; this is plain projection.
        let inner = unsafe { self.map_unchecked_mut(|t| &mut t.inner) };
        let result = inner.poll(cx);
        let now = coarse_now();
        record(now.saturating_sub(started), now, spawned_at);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_poll_is_counted_and_short_ones_are_not() {
        // A fresh thread: its own thread-local record.
        std::thread::spawn(|| {
            crate::runtime::block_on(async {
                let before = stats();
                Timed::new(async {}).await;
                assert_eq!(stats().over_threshold, before.over_threshold);
                Timed::new(async { std::thread::sleep(STALL_WARN + Duration::from_millis(20)) })
                    .await;
                let after = stats();
                assert_eq!(after.over_threshold, before.over_threshold + 1);
                assert!(after.longest >= STALL_WARN, "{after:?}");
            })
            .expect("executor");
        })
        .join()
        .expect("thread");
    }
}
