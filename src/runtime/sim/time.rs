//! Virtual time: timers keyed by deadline; the executor moves the clock.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::executor::state;

/// Virtual time since the simulation started.
pub(crate) fn now() -> Duration {
    state().now.get()
}

/// Waits until the virtual clock reaches now + `duration`.
pub(crate) fn sleep(duration: Duration) -> Sleep {
    Sleep {
        deadline: now().saturating_add(duration),
        key: None,
    }
}

/// A virtual-time sleep; dropping it removes its timer.
pub struct Sleep {
    deadline: Duration,
    key: Option<(Duration, u64)>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let st = state();
        if st.now.get() >= self.deadline {
            if let Some(key) = self.key.take() {
                st.timers.borrow_mut().remove(&key);
            }
            return Poll::Ready(());
        }
        let key = match self.key {
            Some(key) => key,
            None => {
                let key = (self.deadline, st.next_id());
                self.key = Some(key);
                key
            }
        };
        st.timers.borrow_mut().insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            if super::executor::active() {
                state().timers.borrow_mut().remove(&key);
            }
        }
    }
}
