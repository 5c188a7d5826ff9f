//! A byte budget for one shard: a FIFO semaphore counted in bytes, for the memory that produce
//! requests hold (`ringbroker.produce.memory.max.bytes`).
//!
//! Two ways to take bytes:
//! - [`MemoryBudget::acquire`] waits while the budget is full; a connection calls it before it
//!   reads a Produce request's body, so a full budget stops reading sockets (backpressure, like
//!   Kafka muting channels when its request queue is full).
//! - [`MemoryBudget::charge`] never waits: for data that is already in memory and must be
//!   worked on (partition operations forwarded by another shard). Waiting there could deadlock
//!   two shards whose requests wait on each other's budgets; the origin shard already admitted
//!   the request under its own budget, so what one shard can be charged this way is bounded
//!   by the other shards' budgets.
//!
//! Fairness and progress: waiters are served strictly in arrival order (a small request never
//! overtakes a queued large one, so large requests cannot starve), and a request is admitted
//! whenever no other *acquired* bytes are held, even if it is larger than the whole budget or
//! forwarded bytes fill it: one request at a time always makes progress, so nothing hangs.
//!
//! Single-threaded (a shard is one thread): `Rc<RefCell<..>>`, no atomics, no I/O.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A shard's produce memory budget. Cloning shares it.
#[derive(Clone)]
pub struct MemoryBudget {
    state: Rc<RefCell<State>>,
}

/// What the budget reports (metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryBudgetStats {
    pub limit: usize,
    /// Bytes held now: acquired plus charged.
    pub held: usize,
    /// Of `held`, the bytes charged without waiting (forwarded by other shards).
    pub charged: usize,
    /// Highest `held` seen.
    pub peak: usize,
    /// Acquisitions waiting now.
    pub waiting: usize,
    /// Acquisitions that had to wait, since start.
    pub waits: u64,
    /// Their total time waiting.
    pub wait_time: Duration,
}

struct State {
    limit: usize,
    acquired: usize,
    charged: usize,
    peak: usize,
    queue: VecDeque<Rc<RefCell<Slot>>>,
    waits: u64,
    wait_time: Duration,
}

/// One queued acquisition.
struct Slot {
    bytes: usize,
    /// Set when its bytes were taken for it (by a release); the future then completes.
    granted: bool,
    waker: Option<Waker>,
}

impl State {
    /// Whether `bytes` may be acquired now (queue order aside).
    fn fits(&self, bytes: usize) -> bool {
        self.acquired == 0 || self.acquired + self.charged + bytes <= self.limit
    }

    fn note_peak(&mut self) {
        self.peak = self.peak.max(self.acquired + self.charged);
    }

    /// Grants queued acquisitions from the front while they fit; returns their wakers (woken
    /// by the caller once the state is no longer borrowed).
    fn grant(&mut self) -> Vec<Waker> {
        let mut wake = Vec::new();
        while let Some(front) = self.queue.front() {
            let bytes = front.borrow().bytes;
            if !self.fits(bytes) {
                break;
            }
            self.acquired += bytes;
            self.note_peak();
            if let Some(slot) = self.queue.pop_front() {
                let mut slot = slot.borrow_mut();
                slot.granted = true;
                if let Some(w) = slot.waker.take() {
                    wake.push(w);
                }
            }
        }
        wake
    }
}

fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        w.wake();
    }
}

/// Held bytes; dropping it gives them back (and wakes the waiters that now fit).
#[must_use = "the bytes are released when the permit is dropped"]
pub struct MemoryPermit {
    budget: MemoryBudget,
    bytes: usize,
    charged: bool,
}

impl MemoryPermit {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for MemoryPermit {
    fn drop(&mut self) {
        let wake = {
            let mut st = self.budget.state.borrow_mut();
            if self.charged {
                st.charged -= self.bytes;
            } else {
                st.acquired -= self.bytes;
            }
            st.grant()
        };
        wake_all(wake);
    }
}

impl MemoryBudget {
    pub fn new(limit: usize) -> MemoryBudget {
        MemoryBudget {
            state: Rc::new(RefCell::new(State {
                limit,
                acquired: 0,
                charged: 0,
                peak: 0,
                queue: VecDeque::new(),
                waits: 0,
                wait_time: Duration::ZERO,
            })),
        }
    }

    pub fn stats(&self) -> MemoryBudgetStats {
        let st = self.state.borrow();
        MemoryBudgetStats {
            limit: st.limit,
            held: st.acquired + st.charged,
            charged: st.charged,
            peak: st.peak,
            waiting: st.queue.len(),
            waits: st.waits,
            wait_time: st.wait_time,
        }
    }

    fn permit(&self, bytes: usize, charged: bool) -> MemoryPermit {
        MemoryPermit {
            budget: self.clone(),
            bytes,
            charged,
        }
    }

    /// Takes `bytes` now if nobody is queued and they fit.
    pub fn try_acquire(&self, bytes: usize) -> Option<MemoryPermit> {
        let mut st = self.state.borrow_mut();
        if !st.queue.is_empty() || !st.fits(bytes) {
            return None;
        }
        st.acquired += bytes;
        st.note_peak();
        drop(st);
        Some(self.permit(bytes, false))
    }

    /// Takes `bytes`, waiting (in arrival order) while the budget is full. Dropping the future
    /// before it completes leaves the queue without taking anything.
    pub fn acquire(&self, bytes: usize) -> Acquire {
        Acquire {
            budget: self.clone(),
            bytes,
            slot: None,
            since: None,
        }
    }

    /// Takes `bytes` without waiting, even past the limit (data already in memory).
    pub fn charge(&self, bytes: usize) -> MemoryPermit {
        let mut st = self.state.borrow_mut();
        st.charged += bytes;
        st.note_peak();
        drop(st);
        self.permit(bytes, true)
    }
}

/// The future of [`MemoryBudget::acquire`].
pub struct Acquire {
    budget: MemoryBudget,
    bytes: usize,
    slot: Option<Rc<RefCell<Slot>>>,
    /// When it started waiting (only measured when it has to).
    since: Option<Instant>,
}

impl Future for Acquire {
    type Output = MemoryPermit;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MemoryPermit> {
        let this = &mut *self;
        match &this.slot {
            None => {
                if let Some(permit) = this.budget.try_acquire(this.bytes) {
                    return Poll::Ready(permit);
                }
                let slot = Rc::new(RefCell::new(Slot {
                    bytes: this.bytes,
                    granted: false,
                    waker: Some(cx.waker().clone()),
                }));
                let mut st = this.budget.state.borrow_mut();
                st.queue.push_back(Rc::clone(&slot));
                st.waits += 1;
                drop(st);
                this.slot = Some(slot);
                this.since = Some(Instant::now());
                Poll::Pending
            }
            Some(slot) => {
                let mut s = slot.borrow_mut();
                if !s.granted {
                    s.waker = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                drop(s);
                this.slot = None;
                if let Some(since) = this.since.take() {
                    this.budget.state.borrow_mut().wait_time += since.elapsed();
                }
                Poll::Ready(this.budget.permit(this.bytes, false))
            }
        }
    }
}

impl Drop for Acquire {
    /// A cancelled acquisition: give back bytes granted to it but never handed out, or leave
    /// the queue (the ones behind it may fit now).
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        let wake = {
            let Ok(mut st) = self.budget.state.try_borrow_mut() else {
                return;
            };
            if slot.borrow().granted {
                st.acquired -= self.bytes;
            } else {
                st.queue.retain(|q| !Rc::ptr_eq(q, &slot));
            }
            if let Some(since) = self.since.take() {
                st.wait_time += since.elapsed();
            }
            st.grant()
        };
        wake_all(wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::rng::Rng;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    /// A waker that records that it was woken, as an executor would.
    struct Flag(AtomicBool);

    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn poll(fut: &mut Acquire, flag: &Arc<Flag>) -> Option<MemoryPermit> {
        flag.0.store(false, Ordering::SeqCst);
        let waker = Waker::from(Arc::clone(flag));
        let mut cx = Context::from_waker(&waker);
        match Pin::new(fut).poll(&mut cx) {
            Poll::Ready(p) => Some(p),
            Poll::Pending => None,
        }
    }

    fn flag() -> Arc<Flag> {
        Arc::new(Flag(AtomicBool::new(false)))
    }

    #[test]
    fn waits_when_full_and_is_woken_by_a_release() {
        let b = MemoryBudget::new(100);
        let p1 = b.try_acquire(60).expect("fits");
        let (mut f, w) = (b.acquire(50), flag());
        assert!(poll(&mut f, &w).is_none());
        assert_eq!(b.stats().waiting, 1);
        drop(p1);
        assert!(w.0.load(Ordering::SeqCst), "the release woke the waiter");
        let p2 = poll(&mut f, &w).expect("granted");
        assert_eq!(p2.bytes(), 50);
        let s = b.stats();
        assert_eq!((s.held, s.peak, s.waits, s.waiting), (50, 60, 1, 0));
        drop(p2);
        assert_eq!(b.stats().held, 0);
    }

    #[test]
    fn a_request_larger_than_the_budget_goes_alone() {
        let b = MemoryBudget::new(100);
        let small = b.try_acquire(10).expect("fits");
        let (mut big, w) = (b.acquire(1000), flag());
        assert!(
            poll(&mut big, &w).is_none(),
            "waits while others hold bytes"
        );
        // Nobody overtakes it, even though 10 bytes would fit.
        assert!(b.try_acquire(10).is_none());
        drop(small);
        let big = poll(&mut big, &w).expect("alone now");
        assert_eq!(b.stats().held, 1000);
        assert!(b.try_acquire(1).is_none(), "nothing joins it");
        drop(big);
        assert!(b.try_acquire(100).is_some());
    }

    #[test]
    fn charges_never_wait_and_never_block_progress_forever() {
        let b = MemoryBudget::new(100);
        let forwarded = b.charge(500);
        assert_eq!(b.stats().held, 500);
        // Nothing acquired: one request still goes, so the shard keeps serving its clients.
        let p = b.try_acquire(30).expect("progress despite forwarded bytes");
        assert!(b.try_acquire(30).is_none(), "but only one while over");
        drop(forwarded);
        assert!(b.try_acquire(30).is_some());
        drop(p);
        assert_eq!(b.stats().charged, 0);
    }

    #[test]
    fn a_cancelled_waiter_lets_the_next_one_through() {
        let b = MemoryBudget::new(100);
        let held = b.try_acquire(50).expect("fits");
        let (mut big, wb) = (b.acquire(80), flag());
        let (mut small, ws) = (b.acquire(40), flag());
        assert!(poll(&mut big, &wb).is_none());
        assert!(poll(&mut small, &ws).is_none(), "queued behind the big one");
        drop(big);
        assert!(ws.0.load(Ordering::SeqCst));
        assert!(poll(&mut small, &ws).is_some());
        drop(held);
        // A waiter granted but dropped before it saw the grant gives its bytes back.
        let held = b.try_acquire(100).expect("fits");
        let (mut f, w) = (b.acquire(70), flag());
        assert!(poll(&mut f, &w).is_none());
        drop(held);
        assert_eq!(b.stats().held, 70, "granted on release");
        drop(f);
        assert_eq!(b.stats().held, 0);
    }

    /// Uniform in `0..n` from the project's seeded generator.
    fn below(rng: &mut Rng, n: u64) -> u64 {
        rng.range(0, n - 1)
    }

    struct Waiting {
        seq: u64,
        fut: Acquire,
        flag: Arc<Flag>,
    }

    /// Random acquisitions (some larger than the budget), charges, releases and cancellations
    /// in seeded orders. After every step: the bytes add up, acquired bytes stay within the
    /// limit unless a single request holds them, nobody waits while nothing acquired is held,
    /// waiters are granted in arrival order and only after being woken, and everything
    /// drains at the end.
    #[test]
    fn seeded_simulation_of_acquire_and_release_orders() {
        // What the runs exercised, so that the checks are not vacuous.
        let (mut granted_after_waiting, mut cancelled, mut oversized_held) = (0, 0, 0);
        for seed in 1..=300u64 {
            let mut rng = Rng::new(seed);
            let limit = 1 + below(&mut rng, 1000) as usize;
            let b = MemoryBudget::new(limit);
            let mut held: Vec<MemoryPermit> = Vec::new();
            let mut waiting: Vec<Waiting> = Vec::new();
            let mut next_seq = 0u64;
            let mut last_granted_seq: Option<u64> = None;
            for _ in 0..400 {
                match below(&mut rng, 10) {
                    0..=3 => {
                        let bytes = if below(&mut rng, 20) == 0 {
                            limit + 1 + below(&mut rng, limit as u64) as usize
                        } else {
                            1 + below(&mut rng, limit as u64 / 2 + 1) as usize
                        };
                        let (mut fut, flag) = (b.acquire(bytes), flag());
                        let queued_before = b.stats().waiting;
                        match poll(&mut fut, &flag) {
                            Some(p) => {
                                assert_eq!(queued_before, 0, "seed {seed}: overtook a waiter");
                                held.push(p);
                            }
                            None => {
                                waiting.push(Waiting {
                                    seq: next_seq,
                                    fut,
                                    flag,
                                });
                                next_seq += 1;
                            }
                        }
                    }
                    4 => held.push(b.charge(1 + below(&mut rng, limit as u64) as usize)),
                    5..=7 if !held.is_empty() => {
                        let i = below(&mut rng, held.len() as u64) as usize;
                        drop(held.swap_remove(i));
                    }
                    8 if !waiting.is_empty() => {
                        let i = below(&mut rng, waiting.len() as u64) as usize;
                        waiting.remove(i);
                        cancelled += 1;
                    }
                    _ => {}
                }
                // Run what an executor would run: the woken waiters.
                let mut i = 0;
                while i < waiting.len() {
                    if !waiting[i].flag.0.load(Ordering::SeqCst) {
                        i += 1;
                        continue;
                    }
                    let w = &mut waiting[i];
                    if let Some(p) = poll(&mut w.fut, &w.flag) {
                        let seq = w.seq;
                        // `waiting` keeps arrival order, so granted ones leave from its front.
                        assert!(
                            last_granted_seq.is_none_or(|l| seq > l),
                            "seed {seed}: grant out of order"
                        );
                        last_granted_seq = Some(seq);
                        granted_after_waiting += 1;
                        if p.bytes() > limit {
                            oversized_held += 1;
                        }
                        held.push(p);
                        waiting.remove(i);
                    } else {
                        i += 1;
                    }
                }
                check(&b, &held, &waiting, seed);
            }
            // Drain: drop everything held; every waiter must get through, in order.
            while !held.is_empty() || !waiting.is_empty() {
                held.clear();
                check(&b, &held, &waiting, seed);
                if let Some(w) = waiting.first_mut() {
                    assert!(
                        w.flag.0.load(Ordering::SeqCst),
                        "seed {seed}: the head waiter was not woken once everything was released"
                    );
                    let p = poll(&mut w.fut, &w.flag).expect("the head is granted");
                    held.push(p);
                    waiting.remove(0);
                }
            }
            let s = b.stats();
            assert_eq!((s.held, s.charged, s.waiting), (0, 0, 0), "seed {seed}");
        }
        assert!(
            granted_after_waiting > 1000 && cancelled > 1000 && oversized_held > 10,
            "{granted_after_waiting} grants after waiting, {cancelled} cancelled, {oversized_held} oversized"
        );
    }

    fn check(b: &MemoryBudget, held: &[MemoryPermit], waiting: &[Waiting], seed: u64) {
        let st = b.state.borrow();
        let acquired: Vec<usize> = held
            .iter()
            .filter(|p| !p.charged)
            .map(|p| p.bytes)
            .collect();
        let charged: usize = held.iter().filter(|p| p.charged).map(|p| p.bytes).sum();
        // Granted but not yet polled waiters hold bytes too.
        let granted: usize = waiting
            .iter()
            .filter_map(|w| w.fut.slot.as_ref())
            .filter(|s| s.borrow().granted)
            .map(|s| s.borrow().bytes)
            .sum();
        let granted_count = waiting
            .iter()
            .filter_map(|w| w.fut.slot.as_ref())
            .filter(|s| s.borrow().granted)
            .count();
        assert_eq!(
            st.acquired,
            acquired.iter().sum::<usize>() + granted,
            "seed {seed}"
        );
        assert_eq!(st.charged, charged, "seed {seed}");
        if acquired.len() + granted_count > 1 {
            assert!(
                st.acquired <= st.limit,
                "seed {seed}: {} acquired over the limit {}",
                st.acquired,
                st.limit
            );
        }
        if !st.queue.is_empty() {
            assert!(
                st.acquired > 0,
                "seed {seed}: a waiter stalls with nothing acquired"
            );
        }
        assert!(st.peak >= st.acquired + st.charged);
    }
}
