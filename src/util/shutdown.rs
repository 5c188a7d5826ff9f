//! A one-way "stop now" signal shared by the tasks of one shard.

use std::cell::{Cell, RefCell};

use super::local_oneshot;

#[derive(Default)]
pub struct ShutdownSignal {
    triggered: Cell<bool>,
    waiters: RefCell<Vec<local_oneshot::Sender<()>>>,
}

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
        self.waiters.borrow_mut().push(tx);
        rx.await;
    }
}
