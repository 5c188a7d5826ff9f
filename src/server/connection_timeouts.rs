//! When a connection is closed for want of traffic: Kafka's `connections.max.idle.ms`, and a
//! bound on reading one request (`ringbroker.request.read.timeout.ms`).
//!
//! Idle means no request being read and none in flight: a long-polling Fetch, a Produce
//! waiting for its acks or a response being written keep the connection busy, however long
//! they take. The idle time runs from the end of the last request (its response written).
//! Kafka times idleness by socket activity, so a client trickling a byte now and then would
//! hold a connection (and the buffer of its announced request) forever: here, once a
//! request's first bytes arrive, the whole request must arrive within the read bound.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use crate::runtime::Instant;

use crate::config::BrokerConfig;
use crate::protocol::frame::FrameError;
use crate::runtime;

/// The two bounds of a connection, from the broker config.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// `connections.max.idle.ms`; `None`: never closed for idleness.
    pub idle: Option<Duration>,
    /// Time for the rest of a request once its first bytes arrived.
    pub read: Duration,
}

impl Timeouts {
    pub fn from_config(config: &BrokerConfig) -> Timeouts {
        Timeouts {
            idle: config.connection_idle_timeout(),
            read: config.request_read_timeout(),
        }
    }
}

/// Why reading the next request failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("no request for {0:?} (connections.max.idle.ms)")]
    Idle(Duration),
    #[error(
        "request not received within {0:?} of its first bytes (ringbroker.request.read.timeout.ms)"
    )]
    Stalled(Duration),
}

/// The requests of one connection in flight, and when the last one ended. Shared by its
/// reader, which counts requests in, and its writer, which counts them out.
#[derive(Debug)]
pub struct Activity {
    in_flight: Cell<usize>,
    last: Cell<Instant>,
}

impl Activity {
    pub fn new(now: Instant) -> Activity {
        Activity {
            in_flight: Cell::new(0),
            last: Cell::new(now),
        }
    }

    /// A request was read; it is in flight until [`Activity::finished`].
    pub fn started(&self, now: Instant) {
        self.in_flight.set(self.in_flight.get() + 1);
        self.last.set(now);
    }

    /// A request was answered (its response written, or it had none).
    pub fn finished(&self, now: Instant) {
        self.in_flight.set(self.in_flight.get().saturating_sub(1));
        self.last.set(now);
    }

    /// How much longer the connection must stay quiet to be idle for `idle`; `None` once it
    /// is. While requests are in flight the whole `idle` is left: the time only starts
    /// when the last one ends.
    fn idle_left(&self, idle: Duration, now: Instant) -> Option<Duration> {
        if self.in_flight.get() > 0 {
            return Some(idle);
        }
        let left = (self.last.get() + idle).saturating_duration_since(now);
        (!left.is_zero()).then_some(left)
    }

    /// Resolves once the connection has been idle for `idle`. A busy connection wakes this
    /// once per `idle` to look again, not once per request.
    pub async fn idle_for(&self, idle: Duration) {
        while let Some(left) = self.idle_left(idle, Instant::now()) {
            runtime::sleep(left).await;
        }
    }
}

/// Runs `work`, giving up after `limit`.
pub async fn within<T>(limit: Duration, work: impl Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(work.await) }, async {
        runtime::sleep(limit).await;
        None
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_time_runs_from_the_end_of_the_last_request() {
        let t0 = Instant::now();
        let idle = Duration::from_millis(300);
        let ms = Duration::from_millis;
        let a = Activity::new(t0);
        assert_eq!(a.idle_left(idle, t0 + ms(100)), Some(ms(200)));
        assert_eq!(
            a.idle_left(idle, t0 + ms(300)),
            None,
            "idle since it opened"
        );
        a.started(t0 + ms(50));
        assert_eq!(
            a.idle_left(idle, t0 + ms(10_000)),
            Some(idle),
            "a request in flight (a long poll) is never idle"
        );
        a.started(t0 + ms(60));
        a.finished(t0 + ms(10_000));
        assert_eq!(a.idle_left(idle, t0 + ms(10_000)), Some(idle), "one left");
        a.finished(t0 + ms(10_100));
        assert_eq!(a.idle_left(idle, t0 + ms(10_200)), Some(ms(200)));
        assert_eq!(a.idle_left(idle, t0 + ms(10_400)), None);
    }

    #[test]
    fn within_gives_up_at_the_limit() {
        crate::runtime::block_on(async {
            assert_eq!(within(Duration::from_secs(60), async { 7 }).await, Some(7));
            let never = within(Duration::from_millis(10), std::future::pending::<()>()).await;
            assert_eq!(never, None);
        })
        .expect("runtime");
    }
}
