//! A wake-up for one task of this shard: [`Notify::notify`] wakes the task waiting in
//! [`Notify::notified`], or, if none waits, the next one to wait. Lets a timer loop sleep until
//! its real next deadline and still see a new, earlier deadline at once.

use std::cell::{Cell, RefCell};

use super::local_oneshot;

#[derive(Default)]
pub struct Notify {
    /// A notification that no waiter has taken yet.
    pending: Cell<bool>,
    waiter: RefCell<Option<local_oneshot::Sender<()>>>,
}

impl Notify {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn notify(&self) {
        match self.waiter.borrow_mut().take() {
            Some(tx) if !tx.is_closed() => tx.send(()),
            // Nobody waits (or the waiter gave up): keep it for the next wait.
            _ => self.pending.set(true),
        }
    }

    /// Drops a notification no waiter has taken (the caller is about to look at the state
    /// the notification was about).
    pub fn forget_pending(&self) {
        self.pending.set(false);
    }

    /// Resolves at the next notification (at once if one is pending).
    pub async fn notified(&self) {
        if self.pending.replace(false) {
            return;
        }
        let (tx, rx) = local_oneshot::channel();
        *self.waiter.borrow_mut() = Some(tx);
        rx.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_notification_reaches_the_waiter_or_the_next_wait() {
        crate::runtime::block_on(async {
            let notify = Rc::new(Notify::new());
            // Pending before anyone waits: the next wait returns at once.
            notify.notify();
            notify.notified().await;
            // A waiter that is woken.
            let waiter = {
                let notify = Rc::clone(&notify);
                crate::runtime::spawn(async move { notify.notified().await })
            };
            crate::runtime::sleep(std::time::Duration::from_millis(1)).await;
            notify.notify();
            waiter.await;
            // An abandoned wait does not swallow the next notification.
            futures_lite::future::or(notify.notified(), async {}).await;
            notify.notify();
            notify.notified().await;
        })
        .expect("executor");
    }
}
