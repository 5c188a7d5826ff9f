//! A single-threaded one-shot channel: one task waits, another completes it.
//!
//! Shards are single threaded, so this needs no atomics: it is an `Rc<RefCell<..>>` holding the
//! value and the waiting task's waker. Used by the log's group commit to wake each appender
//! when the write (and fsync) that carries its batch is done.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_dropped: bool,
}

/// The sending half. Dropping it without sending wakes the receiver with `None`.
pub struct Sender<T> {
    slot: Rc<RefCell<Slot<T>>>,
}

/// The receiving half: a future yielding `Some(value)`, or `None` if the sender was dropped.
pub struct Receiver<T> {
    slot: Rc<RefCell<Slot<T>>>,
}

pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Rc::new(RefCell::new(Slot {
        value: None,
        waker: None,
        sender_dropped: false,
    }));
    (
        Sender {
            slot: Rc::clone(&slot),
        },
        Receiver { slot },
    )
}

impl<T> Sender<T> {
    /// Whether the receiver is gone: a value sent now would be dropped unseen.
    pub fn is_closed(&self) -> bool {
        Rc::strong_count(&self.slot) == 1
    }

    pub fn send(self, value: T) {
        let waker = {
            let mut slot = self.slot.borrow_mut();
            slot.value = Some(value);
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut slot = self.slot.borrow_mut();
            slot.sender_dropped = true;
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut slot = self.slot.borrow_mut();
        if let Some(v) = slot.value.take() {
            return Poll::Ready(Some(v));
        }
        if slot.sender_dropped {
            return Poll::Ready(None);
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    /// Lets go of the waiting task's waker: a sender kept after its receiver was dropped
    /// (a `select` that took the other branch) must not keep the task's waker alive. glommio
    /// counts wakers per task in 16 bits, so enough leaked ones abort the shard.
    fn drop(&mut self) {
        if let Ok(mut slot) = self.slot.try_borrow_mut() {
            slot.waker = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivers_value_and_reports_dropped_sender() {
        let got = crate::runtime::block_on(async {
            let (tx, rx) = channel::<u32>();
            crate::runtime::spawn_detached(async move { tx.send(7) });
            let first = rx.await;
            let (tx, rx) = channel::<u32>();
            drop(tx);
            (first, rx.await)
        })
        .expect("executor");
        assert_eq!(got, (Some(7), None));
    }

    #[test]
    fn a_dropped_receiver_releases_the_waker_and_closes_the_sender() {
        let (tx, mut rx) = channel::<u32>();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(Pin::new(&mut rx).poll(&mut cx).is_pending());
        assert!(tx.slot.borrow().waker.is_some());
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.slot.borrow().waker.is_none());
        assert!(tx.is_closed());
    }
}
