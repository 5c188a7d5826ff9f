//! The simulation's executor: one thread, a run queue of woken tasks, the next one picked by
//! a seeded generator, a virtual clock that jumps to the next timer when nothing can run.

use crate::util::hash::HashMap;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_task::{Runnable, Task};

use crate::util::rng::SeededRng;

/// A simulated host. Tasks spawned by a task of a node belong to that node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// How a simulation runs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// The run fails once virtual time passes this.
    pub max_time: Duration,
    /// The run fails after this many task polls (a livelock guard).
    pub max_polls: u64,
    /// What the wall clock (`now_ms`) reads when the run starts.
    pub start_unix_ms: i64,
}

impl SimConfig {
    pub fn seeded(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            max_time: Duration::from_secs(3600),
            max_polls: 100_000_000,
            // 2026-01-01: any fixed date; a constant keeps runs reproducible.
            start_unix_ms: 1_767_225_600_000,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SimError {
    #[error("deadlock at {at:?} of virtual time: no task can run and no timer is set")]
    Deadlock { at: Duration },
    #[error("the run passed its limit of {limit:?} of virtual time")]
    TimeLimit { limit: Duration },
    #[error("the run passed its limit of {limit} polls (a livelock?)")]
    PollLimit { limit: u64 },
    #[error("invariant broken at {at:?} of virtual time, after {polls} polls: {message}")]
    Invariant {
        message: String,
        at: Duration,
        polls: u64,
    },
}

/// A check run after every task poll (see [`check_every_step`]).
type StepCheck = Box<dyn FnMut() -> Result<(), String>>;

/// What is known of one node's tasks: enough to drop them all at once.
#[derive(Default)]
struct NodeTasks {
    /// Each live task's crash flag and last waker, by task number.
    tasks: HashMap<u64, (Rc<Cell<bool>>, Option<Waker>)>,
}

pub(super) struct State {
    queue: RefCell<VecDeque<Runnable>>,
    rng: RefCell<SeededRng>,
    /// Virtual time since the start.
    pub(super) now: Cell<Duration>,
    pub(super) start_unix_ms: i64,
    /// Pending timers: (deadline, number) → waker.
    pub(super) timers: RefCell<BTreeMap<(Duration, u64), Waker>>,
    next_id: Cell<u64>,
    /// Task polls so far.
    polls: Cell<u64>,
    /// The node whose task is being polled.
    node: Cell<Option<NodeId>>,
    nodes: RefCell<HashMap<NodeId, NodeTasks>>,
    step_check: RefCell<Option<StepCheck>>,
    /// Paused nodes (SIGSTOP), with the wakers of their tasks woken meanwhile.
    paused: RefCell<HashMap<NodeId, Vec<Waker>>>,
}

impl State {
    pub(super) fn next_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    pub(super) fn random(&self) -> u64 {
        self.rng.borrow_mut().next_u64()
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<State>>> = const { RefCell::new(None) };
}

/// The running simulation of this thread. Panics outside one: callers check [`active`].
pub(super) fn state() -> Rc<State> {
    CURRENT.with(|c| {
        c.borrow()
            .as_ref()
            .map(Rc::clone)
            .expect("runtime::sim: no simulation runs on this thread")
    })
}

/// Whether a simulation runs on this thread.
pub(crate) fn active() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

pub(super) fn random_u64() -> u64 {
    state().random()
}

/// The node whose task runs now (`None`: the test's own driver task).
pub fn current_node() -> Option<NodeId> {
    if !active() {
        return None;
    }
    state().node.get()
}

/// A task's future, tagged with its node: polled with the node set as current, and dropped
/// unpolled once the node crashed.
struct OnNode<F> {
    node: Option<NodeId>,
    id: u64,
    crashed: Rc<Cell<bool>>,
    future: Option<Pin<Box<F>>>,
}

impl<F: Future> Future for OnNode<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if self.crashed.get() {
            // The node is gone: its state goes with it, and the task never finishes (nobody
            // on another node waits for a crashed node's task).
            self.future = None;
            return Poll::Pending;
        }
        let st = state();
        if let Some(node) = self.node {
            // A paused node's tasks wait, woken or not, until it resumes.
            if let Some(woken) = st.paused.borrow_mut().get_mut(&node) {
                woken.push(cx.waker().clone());
                return Poll::Pending;
            }
            if let Some(t) = st
                .nodes
                .borrow_mut()
                .entry(node)
                .or_default()
                .tasks
                .get_mut(&self.id)
            {
                t.1 = Some(cx.waker().clone());
            }
        }
        let outer = st.node.replace(self.node);
        let Some(future) = self.future.as_mut() else {
            st.node.set(outer);
            return Poll::Pending;
        };
        let result = future.as_mut().poll(cx);
        st.node.set(outer);
        result
    }
}

impl<F> Drop for OnNode<F> {
    fn drop(&mut self) {
        if let Some(node) = self.node {
            if let Some(st) = CURRENT.with(|c| c.borrow().clone()) {
                if let Some(n) = st.nodes.borrow_mut().get_mut(&node) {
                    n.tasks.remove(&self.id);
                }
            }
        }
    }
}

fn spawn_tagged<T: 'static>(
    node: Option<NodeId>,
    future: impl Future<Output = T> + 'static,
) -> Task<T> {
    let st = state();
    let id = st.next_id();
    let crashed = Rc::new(Cell::new(false));
    if let Some(node) = node {
        st.nodes
            .borrow_mut()
            .entry(node)
            .or_default()
            .tasks
            .insert(id, (Rc::clone(&crashed), None));
    }
    let tagged = OnNode {
        node,
        id,
        crashed,
        future: Some(Box::pin(future)),
    };
    let schedule = |runnable: Runnable| {
        if let Some(st) = CURRENT.with(|c| c.borrow().clone()) {
            st.queue.borrow_mut().push_back(runnable);
        }
    };
    let (runnable, task) = async_task::spawn_local(tagged, schedule);
    runnable.schedule();
    task
}

/// Spawns a task on the current node.
pub(crate) fn spawn<T: 'static>(future: impl Future<Output = T> + 'static) -> Task<T> {
    let node = state().node.get();
    spawn_tagged(node, future)
}

/// Spawns a task on `node` (a host's first task: its process starting).
pub fn spawn_on<T: 'static>(node: NodeId, future: impl Future<Output = T> + 'static) -> Task<T> {
    spawn_tagged(Some(node), future)
}

/// Drops every task of `node` (its process is killed): their futures are dropped the next
/// time the executor gets to them.
pub(super) fn crash(node: NodeId) {
    let st = state();
    let tasks = st
        .nodes
        .borrow_mut()
        .remove(&node)
        .map(|n| n.tasks)
        .unwrap_or_default();
    for (_, (crashed, waker)) in tasks {
        crashed.set(true);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Stops running `node`'s tasks (SIGSTOP): its timers and sockets go on filling, nothing of
/// it runs until [`resume`].
pub(super) fn pause(node: NodeId) {
    state().paused.borrow_mut().entry(node).or_default();
}

/// Runs `node`'s tasks again (SIGCONT): those woken while it was paused run.
pub(super) fn resume(node: NodeId) {
    let woken = state()
        .paused
        .borrow_mut()
        .remove(&node)
        .unwrap_or_default();
    for w in woken {
        w.wake();
    }
}

/// Yields once: the task goes to the back of the run queue.
pub(crate) async fn yield_now() {
    let mut yielded = false;
    futures_lite::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// Removes the installed simulation when the run ends, however it ends, dropping what is
/// left (tasks, timers) while it is still installed: their drops may call the runtime.
struct Installed(Rc<State>);

impl Drop for Installed {
    fn drop(&mut self) {
        let queue: Vec<Runnable> = self.0.queue.borrow_mut().drain(..).collect();
        drop(queue);
        let timers = std::mem::take(&mut *self.0.timers.borrow_mut());
        drop(timers);
        let nodes = std::mem::take(&mut *self.0.nodes.borrow_mut());
        drop(nodes);
        // The check may hold the run's state (its brokers): it goes with the run.
        let check = self.0.step_check.borrow_mut().take();
        drop(check);
        let paused = std::mem::take(&mut *self.0.paused.borrow_mut());
        drop(paused);
        CURRENT.with(|c| c.borrow_mut().take());
    }
}

/// Runs the simulation; [`super::run`] has checked that none runs on this thread.
pub(super) fn run<T: 'static>(
    config: SimConfig,
    future: impl Future<Output = T> + 'static,
) -> Result<T, SimError> {
    let st = Rc::new(State {
        queue: RefCell::new(VecDeque::new()),
        rng: RefCell::new(SeededRng::new(config.seed)),
        now: Cell::new(Duration::ZERO),
        start_unix_ms: config.start_unix_ms,
        timers: RefCell::new(BTreeMap::new()),
        next_id: Cell::new(0),
        polls: Cell::new(0),
        node: Cell::new(None),
        nodes: RefCell::new(HashMap::default()),
        step_check: RefCell::new(None),
        paused: RefCell::new(HashMap::default()),
    });
    CURRENT.with(|c| *c.borrow_mut() = Some(Rc::clone(&st)));
    let _installed = Installed(Rc::clone(&st));
    let main = spawn_tagged(None, future);
    loop {
        loop {
            let next = {
                let mut queue = st.queue.borrow_mut();
                match queue.len() {
                    0 => None,
                    1 => queue.pop_front(),
                    n => {
                        // The seeded choice of which woken task runs next: one seed, one
                        // interleaving.
                        let i = (st.random() % n as u64) as usize;
                        queue.swap_remove_back(i)
                    }
                }
            };
            let Some(runnable) = next else { break };
            runnable.run();
            st.polls.set(st.polls.get() + 1);
            // Taken out while it runs: the check may read anything, even the simulation.
            let check = st.step_check.borrow_mut().take();
            if let Some(mut check) = check {
                if let Err(message) = check() {
                    return Err(SimError::Invariant {
                        message,
                        at: st.now.get(),
                        polls: st.polls.get(),
                    });
                }
                st.step_check.borrow_mut().get_or_insert(check);
            }
            if st.polls.get() > config.max_polls {
                return Err(SimError::PollLimit {
                    limit: config.max_polls,
                });
            }
        }
        if main.is_finished() {
            return Ok(futures_lite::future::block_on(main));
        }
        // Nothing can run: the clock jumps to the next timer.
        let due = st.timers.borrow().keys().next().copied();
        let Some((deadline, _)) = due else {
            return Err(SimError::Deadlock { at: st.now.get() });
        };
        if deadline > config.max_time {
            return Err(SimError::TimeLimit {
                limit: config.max_time,
            });
        }
        if deadline > st.now.get() {
            st.now.set(deadline);
        }
        let fired: Vec<Waker> = {
            let mut timers = st.timers.borrow_mut();
            let later = timers.split_off(&(deadline, u64::MAX));
            std::mem::replace(&mut *timers, later)
                .into_values()
                .collect()
        };
        for w in fired {
            w.wake();
        }
    }
}

/// Runs `check` after every task poll from now on (replacing an earlier one): the run fails
/// with [`SimError::Invariant`] at the first step after which it answers an error, so a
/// broken invariant is caught at the step that broke it, not at the end of the run.
pub fn check_every_step(check: impl FnMut() -> Result<(), String> + 'static) {
    *state().step_check.borrow_mut() = Some(Box::new(check));
}

/// Task polls of the running simulation so far.
pub(super) fn polls() -> u64 {
    state().polls.get()
}

pub(super) fn start_unix_ms() -> i64 {
    state().start_unix_ms
}
