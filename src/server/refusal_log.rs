//! The warning for connections closed over a limit, rate-limited: a client retrying in a
//! tight loop must not turn into a log flood. One line per interval per shard, counting the
//! refusals it stands for.

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::connection_limits::Refusal;

const INTERVAL: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct RefusalLog {
    last_line: Cell<Option<Instant>>,
    since_last_line: Cell<u64>,
}

impl RefusalLog {
    pub fn record(&self, refusal: &Refusal, peer: &str) {
        let refused = self.since_last_line.get() + 1;
        let now = Instant::now();
        if self
            .last_line
            .get()
            .is_some_and(|t| now.duration_since(t) < INTERVAL)
        {
            self.since_last_line.set(refused);
            return;
        }
        self.last_line.set(Some(now));
        self.since_last_line.set(0);
        tracing::warn!(%peer, refused, "closing new connection: {refusal}");
    }
}
