//! A one-way "stop now" signal shared by the tasks of one shard.

use std::cell::{Cell, RefCell};

use super::local_oneshot;

#[derive(Default)]
pub struct ShutdownSignal {
    triggered: Cell<bool>,
    waiters: RefCell<Vec<local_oneshot::Sender<()>>>,
    /// Waiter count at which abandoned waiters are pruned next.
    prune_at: Cell<usize>,
}

/// Fewest waiters worth a pruning pass.
const MIN_PRUNE_AT: usize = 64;

impl ShutdownSignal {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_triggered(&self) -> bool {
        self.triggered.get()
    }

    pub fn trigger(&self) {
        self.triggered.set(true);
        for w in self.waiters.borrow_mut().drain(..) {
            w.send(());
        }
    }

    /// Resolves once the signal is triggered (at once if it already was).
    pub async fn wait(&self) {
        if self.triggered.get() {
            return;
        }
        let (tx, rx) = local_oneshot::channel();
        {
            // Most waits are abandoned (a connection waits on "read a frame or shutdown" for
            // every request): drop those, with the threshold doubling so pruning stays
            // amortized O(1) per wait.
            let mut waiters = self.waiters.borrow_mut();
            if waiters.len() >= self.prune_at.get().max(MIN_PRUNE_AT) {
                waiters.retain(|w| !w.is_closed());
                self.prune_at.set(2 * waiters.len());
            }
            waiters.push(tx);
        }
        rx.await;
    }

    /// Waiters held (tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiters.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abandoned_waits_do_not_accumulate_and_live_ones_are_woken() {
        crate::runtime::block_on(async {
            let signal = std::rc::Rc::new(ShutdownSignal::new());
            let live = {
                let signal = std::rc::Rc::clone(&signal);
                crate::runtime::spawn(async move { signal.wait().await })
            };
            crate::runtime::yield_if_needed().await;
            for _ in 0..100_000 {
                // A select that takes the other branch, as the connection loop does.
                futures_lite::future::or(signal.wait(), async {}).await;
            }
            assert!(signal.waiting() < 1000, "{} waiters kept", signal.waiting());
            signal.trigger();
            live.await;
        })
        .expect("executor");
    }
}
