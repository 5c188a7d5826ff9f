//! A partition as its owning shard holds it: the log plus the fetchers waiting for new data.

use std::cell::RefCell;

use crate::log::Log;
use crate::util::local_oneshot;

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub log: Log,
    /// Long-polling fetchers waiting for the next append.
    waiters: RefCell<Vec<local_oneshot::Sender<()>>>,
}

impl Partition {
    pub fn new(topic: String, index: i32, log: Log) -> Self {
        Partition {
            topic,
            index,
            log,
            waiters: RefCell::new(Vec::new()),
        }
    }

    /// Resolves at the next successful append (or when the partition goes away).
    pub fn wait_for_append(&self) -> local_oneshot::Receiver<()> {
        let (tx, rx) = local_oneshot::channel();
        self.waiters.borrow_mut().push(tx);
        rx
    }

    /// Wakes every waiting fetcher.
    pub fn notify_append(&self) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for w in waiters {
            w.send(());
        }
    }
}
