//! One-at-a-time sections on a single-threaded shard (an async mutex without data).
//!
//! [`Exclusive::enter`] waits until no other task is inside and returns a guard; dropping the
//! guard leaves and wakes the waiters. Because leaving is the guard's `Drop`, a task that is
//! cancelled inside (its future dropped: a connection closed, a `select` that took another
//! branch) still leaves, so later callers never wait forever.

use std::cell::{Cell, RefCell};

use crate::util::local_oneshot;

#[derive(Default)]
pub struct Exclusive {
    busy: Cell<bool>,
    waiters: RefCell<Vec<local_oneshot::Sender<()>>>,
}

/// Inside the section until dropped.
#[must_use = "the section is left when the guard is dropped"]
pub struct ExclusiveGuard<'a> {
    owner: &'a Exclusive,
}

impl Exclusive {
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits until the section is free, then enters it.
    pub async fn enter(&self) -> ExclusiveGuard<'_> {
        while self.busy.get() {
            let (tx, rx) = local_oneshot::channel();
            self.waiters.borrow_mut().push(tx);
            rx.await;
        }
        self.busy.set(true);
        ExclusiveGuard { owner: self }
    }

    /// Whether a task is inside.
    pub fn is_busy(&self) -> bool {
        self.busy.get()
    }
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        self.owner.busy.set(false);
        // Every waiter re-checks `busy`; one that was itself cancelled meanwhile is gone and
        // its wake-up is simply dropped, so it cannot strand the others.
        let waiters: Vec<_> = self.owner.waiters.borrow_mut().drain(..).collect();
        for w in waiters {
            w.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future;
    use std::rc::Rc;

    #[test]
    fn a_cancelled_holder_leaves_the_section() {
        future::block_on(async {
            let section = Rc::new(Exclusive::new());
            let (_never, stuck) = local_oneshot::channel::<()>();
            // A task that enters and then waits forever: dropped while inside.
            let s = Rc::clone(&section);
            let holder = async move {
                let _inside = s.enter().await;
                stuck.await;
            };
            let mut holder = Box::pin(holder);
            assert!(future::poll_once(&mut holder).await.is_none());
            assert!(section.is_busy());
            drop(holder);
            assert!(!section.is_busy(), "dropping the holder leaves");
            let second = future::poll_once(section.enter()).await;
            assert!(second.is_some(), "the next caller enters at once");
        });
    }

    #[test]
    fn waiters_enter_one_after_another_even_if_one_is_cancelled() {
        future::block_on(async {
            let section = Exclusive::new();
            let first = section.enter().await;
            let mut cancelled = Box::pin(section.enter());
            let mut waiting = Box::pin(section.enter());
            assert!(future::poll_once(&mut cancelled).await.is_none());
            assert!(future::poll_once(&mut waiting).await.is_none());
            drop(cancelled);
            drop(first);
            let inside = future::poll_once(&mut waiting).await;
            assert!(inside.is_some(), "the remaining waiter gets in");
            assert!(section.is_busy());
            drop(inside);
            assert!(!section.is_busy());
        });
    }
}
