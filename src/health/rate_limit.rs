//! Rate-limited reporting: a slow disk can make every fsync slow, and a line per fsync would
//! bury everything else in the log (and cost I/O on the very disk that is struggling).

use std::time::{Duration, Instant};

/// Lets at most one report through per `interval`; events in between are counted and the
/// count goes out with the next report. No I/O and no clock: callers pass the time.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    interval: Duration,
    last_report: Option<Instant>,
    /// Events since the last report, not yet reported.
    pending: u64,
}

impl RateLimiter {
    pub fn new(interval: Duration) -> Self {
        RateLimiter {
            interval,
            last_report: None,
            pending: 0,
        }
    }

    fn due(&self, now: Instant) -> bool {
        self.last_report
            .is_none_or(|last| now.saturating_duration_since(last) >= self.interval)
    }

    /// Records one event at `now`. Returns `Some(n)` when a line should be written now,
    /// `n` being the events it stands for (this one and those held back since the last).
    pub fn event(&mut self, now: Instant) -> Option<u64> {
        self.pending += 1;
        self.flush(now)
    }

    /// Called periodically: reports events held back once the interval has passed, so the
    /// last burst is not left unreported until the next event.
    pub fn flush(&mut self, now: Instant) -> Option<u64> {
        if self.pending == 0 || !self.due(now) {
            return None;
        }
        self.last_report = Some(now);
        Some(std::mem::take(&mut self.pending))
    }

    /// Forgets the last report: the next event is reported at once (e.g. a condition that
    /// cleared and came back is news).
    pub fn reset(&mut self) {
        self.last_report = None;
        self.pending = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_event_reports_then_counts_until_the_interval_passes() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut r = RateLimiter::new(s(30));
        assert_eq!(r.event(t0), Some(1));
        assert_eq!(r.event(t0 + s(1)), None);
        assert_eq!(r.event(t0 + s(2)), None);
        assert_eq!(r.flush(t0 + s(29)), None, "interval not over");
        assert_eq!(r.event(t0 + s(30)), Some(3), "two held back and this one");
        assert_eq!(r.flush(t0 + s(100)), None, "nothing pending");
        assert_eq!(r.event(t0 + s(100)), Some(1));
    }

    #[test]
    fn flush_reports_a_held_back_burst_without_a_new_event() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut r = RateLimiter::new(s(10));
        assert_eq!(r.event(t0), Some(1));
        for i in 1..=5 {
            assert_eq!(r.event(t0 + Duration::from_millis(i * 100)), None);
        }
        assert_eq!(r.flush(t0 + s(9)), None);
        assert_eq!(r.flush(t0 + s(10)), Some(5));
        assert_eq!(r.flush(t0 + s(30)), None);
        // The next event is 20 s after the last report: reported at once.
        assert_eq!(r.event(t0 + s(30)), Some(1));
    }

    #[test]
    fn reset_makes_the_next_event_news_and_time_going_backwards_is_harmless() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let mut r = RateLimiter::new(Duration::from_secs(60));
        assert_eq!(r.event(t0), Some(1));
        assert_eq!(r.event(t0 - Duration::from_secs(50)), None);
        r.reset();
        assert_eq!(r.event(t0 + Duration::from_secs(1)), Some(1));
    }
}
