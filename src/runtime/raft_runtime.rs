//! openraft's [`AsyncRuntime`] on glommio: the metadata log's Raft node runs as ordinary tasks
//! of shard 0 (openraft's `singlethreaded` feature drops the `Send` bounds). This is the only
//! file that joins openraft and glommio; the controller's quorum module names the runtime by
//! type and never touches glommio itself.
//!
//! openraft drops join handles of tasks it leaves running (tokio semantics), so tasks are
//! detached at spawn: dropping the handle must not cancel them, as dropping a runtime `Task`
//! would. Everything goes through the runtime's own calls, so the node runs in a simulation
//! ([`super::sim`]) as well. Its oneshot channels and watch/mpsc use `tokio::sync`, which needs no tokio runtime.

use std::future::Future;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use openraft::async_runtime::AsyncOneshotSendExt;
use openraft::{AsyncRuntime, OptionalSend};

/// The runtime marker named in the Raft type configuration.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
pub struct GlommioRaftRuntime;

/// A point of the monotonic clock: the runtime's [`super::Instant`], virtual in a simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MonoInstant(super::Instant);

impl Add<Duration> for MonoInstant {
    type Output = MonoInstant;
    fn add(self, d: Duration) -> MonoInstant {
        MonoInstant(self.0 + d)
    }
}

impl AddAssign<Duration> for MonoInstant {
    fn add_assign(&mut self, d: Duration) {
        self.0 += d;
    }
}

impl Sub<Duration> for MonoInstant {
    type Output = MonoInstant;
    fn sub(self, d: Duration) -> MonoInstant {
        // Saturates at the clock's origin instead of panicking on an early instant.
        MonoInstant(self.0 - d)
    }
}

impl Sub<MonoInstant> for MonoInstant {
    type Output = Duration;
    fn sub(self, other: MonoInstant) -> Duration {
        self.0.saturating_duration_since(other.0)
    }
}

impl SubAssign<Duration> for MonoInstant {
    fn sub_assign(&mut self, d: Duration) {
        *self = *self - d;
    }
}

impl openraft::Instant for MonoInstant {
    fn now() -> MonoInstant {
        MonoInstant(super::Instant::now())
    }
}

/// A spawned task ended without a result (cancelled, or it panicked).
#[derive(Debug, thiserror::Error)]
#[error("the raft task ended without a result")]
pub struct TaskGone;

/// A detached task's handle: awaiting it yields the output; dropping it leaves the task running
/// (the task sends its output through a oneshot channel).
pub struct RaftJoinHandle<T>(tokio::sync::oneshot::Receiver<T>);

impl<T> Future for RaftJoinHandle<T> {
    type Output = Result<T, TaskGone>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map_err(|_| TaskGone))
    }
}

/// The runtime's sleep, whose output is `()`, as openraft's `Sleep` must be.
pub struct RaftSleep(Pin<Box<dyn Future<Output = ()>>>);

impl RaftSleep {
    fn new(duration: Duration) -> RaftSleep {
        RaftSleep(Box::pin(super::sleep(duration)))
    }
}

impl Future for RaftSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("deadline elapsed")]
pub struct Elapsed;

/// A future raced against a timer; the future is polled first, so a result that is ready at
/// the deadline wins.
pub struct RaftTimeout<R, F: Future<Output = R>> {
    future: Pin<Box<F>>,
    timer: RaftSleep,
}

impl<R, F: Future<Output = R>> Future for RaftTimeout<R, F> {
    type Output = Result<R, Elapsed>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(r) = self.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(r));
        }
        Pin::new(&mut self.timer).poll(cx).map(|_| Err(Elapsed))
    }
}

/// The sending half of a oneshot channel (`tokio::sync::oneshot`, runtime independent).
pub struct RaftOneshotSender<T>(tokio::sync::oneshot::Sender<T>);

impl<T> std::fmt::Debug for RaftOneshotSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RaftOneshotSender")
    }
}

impl<T> AsyncOneshotSendExt<T> for RaftOneshotSender<T> {
    fn send(self, t: T) -> Result<(), T> {
        self.0.send(t)
    }
}

/// openraft's randomness (election timeouts): the thread's generator, or in a simulation its
/// seeded one, so that a seed replays the same elections.
pub struct RaftRng(Option<rand::rngs::ThreadRng>);

impl rand::RngCore for RaftRng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }

    fn next_u64(&mut self) -> u64 {
        match &mut self.0 {
            Some(rng) => rng.next_u64(),
            None => super::sim::random_u64(),
        }
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

fn until(deadline: MonoInstant) -> Duration {
    deadline.0.saturating_duration_since(super::Instant::now())
}

impl AsyncRuntime for GlommioRaftRuntime {
    type JoinError = TaskGone;
    type JoinHandle<T: OptionalSend + 'static> = RaftJoinHandle<T>;
    type Sleep = RaftSleep;
    type Instant = MonoInstant;
    type TimeoutError = Elapsed;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = RaftTimeout<R, T>;
    type ThreadLocalRng = RaftRng;
    type OneshotSender<T: OptionalSend> = RaftOneshotSender<T>;
    type OneshotReceiverError = tokio::sync::oneshot::error::RecvError;
    type OneshotReceiver<T: OptionalSend> = tokio::sync::oneshot::Receiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        super::spawn_detached(async move {
            let _ = tx.send(future.await);
        });
        RaftJoinHandle(rx)
    }

    fn sleep(duration: Duration) -> RaftSleep {
        RaftSleep::new(duration)
    }

    fn sleep_until(deadline: MonoInstant) -> RaftSleep {
        RaftSleep::new(until(deadline))
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> RaftTimeout<R, F> {
        RaftTimeout {
            future: Box::pin(future),
            timer: RaftSleep::new(duration),
        }
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: MonoInstant,
        future: F,
    ) -> RaftTimeout<R, F> {
        Self::timeout(until(deadline), future)
    }

    fn is_panic(_: &TaskGone) -> bool {
        // The runtime does not say why a task ended; a lost result is treated as fatal.
        true
    }

    fn thread_rng() -> RaftRng {
        if super::sim::active() {
            RaftRng(None)
        } else {
            RaftRng(Some(rand::thread_rng()))
        }
    }

    fn oneshot<T: OptionalSend>() -> (RaftOneshotSender<T>, tokio::sync::oneshot::Receiver<T>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (RaftOneshotSender(tx), rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::Instant as _;

    #[test]
    fn tasks_sleeps_and_timeouts_run_on_glommio() {
        super::super::block_on(async {
            let handle = GlommioRaftRuntime::spawn(async { 7 });
            assert_eq!(handle.await.expect("task result"), 7);
            let start = MonoInstant::now();
            GlommioRaftRuntime::sleep(Duration::from_millis(5)).await;
            assert!(start.elapsed() >= Duration::from_millis(5));
            let slow = GlommioRaftRuntime::timeout(
                Duration::from_millis(5),
                GlommioRaftRuntime::sleep(Duration::from_secs(60)),
            );
            assert!(slow.await.is_err());
            let fast = GlommioRaftRuntime::timeout(Duration::from_secs(60), async { 3 });
            assert_eq!(fast.await.expect("in time"), 3);
            let (tx, rx) = GlommioRaftRuntime::oneshot();
            tx.send(5u8).expect("receiver alive");
            assert_eq!(rx.await.expect("sent"), 5);
        })
        .expect("executor");
    }

    #[test]
    fn a_dropped_handle_leaves_the_task_running() {
        super::super::block_on(async {
            let (tx, rx) = GlommioRaftRuntime::oneshot();
            drop(GlommioRaftRuntime::spawn(async move {
                GlommioRaftRuntime::sleep(Duration::from_millis(1)).await;
                let _ = tx.send(1u8);
            }));
            assert_eq!(rx.await.expect("the task ran"), 1);
        })
        .expect("executor");
    }
}
