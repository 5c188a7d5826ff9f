//! The runtime's simulated backend: the broker's own code, run deterministically on one
//! thread, in virtual time, over a simulated network (FoundationDB's simulator and
//! TigerBeetle's VOPR are the models).
//!
//! [`run`] installs a simulation on the current thread and drives a future to its end. While
//! it runs, every runtime call of that thread goes here instead of to glommio: tasks are
//! spawned on the simulation's executor, which picks the next runnable task with a seeded
//! generator (so one seed is one interleaving, and every seed another); `sleep`, timeouts and
//! `Instant::now` read a virtual clock that moves only when no task can run, straight to the
//! next timer (an hour of timeouts takes milliseconds); `connect` and `TcpListener` use
//! in-memory connections between simulated hosts ([`net`]), which tests can cut, delay and
//! reset; files are read and written with synchronous system calls (blocking is harmless:
//! nothing else runs on the thread), still through the fault layer, so power loss works as in
//! the log's tests; `spawn_blocking` runs its work inline.
//!
//! A task belongs to the *node* (simulated host) that spawned it; [`spawn_on`] starts a node's
//! first task, and [`crash`] drops every task of a node at once, as a process killed with
//! `kill -9` loses its memory (its connections reset; its files keep what reached them).
//!
//! Nothing here is reached outside a simulation: [`active`] is one thread-local read.

mod executor;
pub mod net;
mod time;

pub use executor::{check_every_step, current_node, NodeId, SimConfig, SimError};
pub use time::Sleep;

pub(super) use executor::{active, spawn, yield_now};
pub(super) use time::{now, sleep};

use std::future::Future;

/// Runs `future` to its end in a fresh simulation on this thread (see the module's doc).
/// Fails when no task can run and no timer is set while `future` has not finished (a
/// deadlock), or when the run passes `config`'s limits of virtual time or polls.
pub fn run<T: 'static>(
    config: SimConfig,
    future: impl Future<Output = T> + 'static,
) -> Result<T, SimError> {
    assert!(
        !active(),
        "runtime::sim: a simulation already runs on this thread"
    );
    net::install();
    // Hash-table keys and generated ids come from the seed too (a different stream from the
    // scheduler's), so a seed replays the same tables and ids.
    crate::util::entropy::seed_thread(Some(config.seed ^ 0x9E37_79B9_7F4A_7C15));
    let result = executor::run(config, future);
    crate::util::entropy::seed_thread(None);
    net::uninstall();
    result
}

/// Kills `node`'s process: every task of its host is dropped (the next time the executor
/// gets to it), its listeners close and its connections reset.
pub fn crash(node: NodeId) {
    executor::crash(node);
    net::crash_host(node);
}

/// Pauses `node`'s process, as SIGSTOP does: none of its tasks runs until [`resume`] (time
/// goes on; what peers send it waits in its sockets).
pub fn pause(node: NodeId) {
    executor::pause(node);
}

/// Resumes a paused node (SIGCONT).
pub fn resume(node: NodeId) {
    executor::resume(node);
}

/// Spawns a task on `node` (a host's first task: its process starting).
pub fn spawn_on<T: 'static>(
    node: NodeId,
    future: impl Future<Output = T> + 'static,
) -> super::Task<T> {
    super::Task::sim(executor::spawn_on(node, future))
}

/// A number from the simulation's seeded generator (for a test's own choices: which fault,
/// when), so that one seed replays one run.
pub fn random_u64() -> u64 {
    executor::random_u64()
}

/// Task polls of the running simulation so far (a run's livelock limit counts them).
pub fn polls() -> u64 {
    executor::polls()
}

/// Virtual time since the simulation started.
pub fn elapsed() -> std::time::Duration {
    now()
}

/// What the wall clock read when the simulation started (Unix milliseconds).
pub(super) fn start_unix_ms() -> i64 {
    executor::start_unix_ms()
}

#[cfg(test)]
mod tests;
