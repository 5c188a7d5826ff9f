//! How the broker stops, and the bound on it.
//!
//! A stop has one first cause: an operator's SIGTERM/SIGINT (a clean stop, exit 0) or a
//! failure (a shard that could not start or failed, a panic; exit non-zero). Whatever comes
//! later is a knock-on and is not reported as a cause. From the first cause on, the broker has
//! `ringbroker.shutdown.timeout.ms` to finish; past it, or on a second signal from outside,
//! the process ends at once with one error line naming what each shard was still doing (its
//! logs are crash-safe: the next start recovers them as after `kill -9`).
//!
//! [`StopState`] decides (pure, time passed in); [`StopSupervisor`] is the thread that feeds
//! it signals, failures and the clock, and carries out its decisions.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Why the broker stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCause {
    /// SIGTERM or SIGINT from outside: a clean stop.
    Signal(i32),
    /// Something failed (a shard, a thread): the process exits non-zero.
    Failure(String),
}

impl StopCause {
    pub fn is_clean(&self) -> bool {
        matches!(self, StopCause::Signal(_))
    }
}

impl std::fmt::Display for StopCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopCause::Signal(s) => f.write_str(signal_name(*s)),
            StopCause::Failure(reason) => f.write_str(reason),
        }
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "a stop signal",
    }
}

/// What the supervisor does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The first cause: set the stop flag (and, for a failure, wake the shards).
    Begin(StopCause),
    /// Nothing new (a knock-on failure, the signal the broker raised itself).
    Ignore,
    /// End the process now, non-zero: a second signal from outside, or the deadline passed.
    ExitNow(String),
}

/// The stop's decisions, without I/O.
#[derive(Debug)]
pub struct StopState {
    timeout: Duration,
    first: Option<StopCause>,
    deadline: Option<Instant>,
    /// Signals the broker raised at itself to wake its shards after a failure, not yet seen.
    self_raised: u32,
}

impl StopState {
    pub fn new(timeout: Duration) -> Self {
        StopState {
            timeout,
            first: None,
            deadline: None,
            self_raised: 0,
        }
    }

    pub fn first_cause(&self) -> Option<&StopCause> {
        self.first.as_ref()
    }

    /// When the process must have ended, once a stop began.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// A stop signal arrived.
    pub fn on_signal(&mut self, signal: i32, now: Instant) -> Decision {
        if self.self_raised > 0 {
            self.self_raised -= 1;
            return Decision::Ignore;
        }
        match &self.first {
            None => self.begin(StopCause::Signal(signal), now),
            Some(first) => Decision::ExitNow(format!(
                "a second stop signal ({}) while stopping after {first}",
                signal_name(signal)
            )),
        }
    }

    /// Something failed; only the first failure (or signal) is the cause.
    pub fn on_failure(&mut self, reason: String, now: Instant) -> Decision {
        if self.first.is_some() {
            return Decision::Ignore;
        }
        self.begin(StopCause::Failure(reason), now)
    }

    /// The broker is about to raise a stop signal at itself (to wake its shards).
    pub fn raising_signal(&mut self) {
        self.self_raised += 1;
    }

    /// Time passed with no event.
    pub fn on_tick(&mut self, now: Instant) -> Decision {
        match (self.deadline, &self.first) {
            (Some(deadline), Some(first)) if now >= deadline => Decision::ExitNow(format!(
                "did not stop within {:?} (ringbroker.shutdown.timeout.ms) of {first}",
                self.timeout
            )),
            _ => Decision::Ignore,
        }
    }

    fn begin(&mut self, cause: StopCause, now: Instant) -> Decision {
        self.first = Some(cause.clone());
        self.deadline = Some(now + self.timeout);
        Decision::Begin(cause)
    }
}

/// Where a shard is in its life, for the line that says why a stop did not finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    Starting = 0,
    WaitingToListen = 1,
    Serving = 2,
    StoppingTasks = 3,
    Draining = 4,
    ClosingLogs = 5,
    Stopped = 6,
}

impl Phase {
    fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Starting,
            1 => Phase::WaitingToListen,
            2 => Phase::Serving,
            3 => Phase::StoppingTasks,
            4 => Phase::Draining,
            5 => Phase::ClosingLogs,
            _ => Phase::Stopped,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Phase::Starting => "starting (recovering logs, joining the cluster)",
            Phase::WaitingToListen => "waiting for its turn to listen",
            Phase::Serving => "serving",
            Phase::StoppingTasks => "stopping its tasks (accept, housekeeping, cluster)",
            Phase::Draining => "draining connections",
            Phase::ClosingLogs => "closing its logs",
            Phase::Stopped => "stopped",
        }
    }
}

/// Each shard's phase and open connections, written by the shard, read by the supervisor
/// (atomics: observability only, no shard waits on it).
pub struct Progress {
    shards: Vec<ShardProgress>,
}

#[derive(Default)]
struct ShardProgress {
    phase: AtomicU8,
    connections: AtomicUsize,
}

impl Progress {
    pub fn new(shards: usize) -> Self {
        Progress {
            shards: (0..shards).map(|_| ShardProgress::default()).collect(),
        }
    }

    pub fn set_phase(&self, shard: usize, phase: Phase) {
        if let Some(s) = self.shards.get(shard) {
            s.phase.store(phase as u8, Ordering::Relaxed);
        }
    }

    pub fn set_connections(&self, shard: usize, open: usize) {
        if let Some(s) = self.shards.get(shard) {
            s.connections.store(open, Ordering::Relaxed);
        }
    }

    /// "shard 0: draining connections (2 open); shard 1: stopped".
    pub fn describe(&self) -> String {
        self.shards
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let phase = Phase::from_u8(s.phase.load(Ordering::Relaxed));
                let open = s.connections.load(Ordering::Relaxed);
                if phase == Phase::Stopped || open == 0 {
                    format!("shard {i}: {}", phase.describe())
                } else {
                    format!("shard {i}: {} ({open} connections open)", phase.describe())
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

enum Event {
    Signal(i32),
    Failure(String),
}

/// Where [`request_stop`] sends failures (one supervisor per process).
static EVENTS: OnceLock<mpsc::Sender<Event>> = OnceLock::new();

/// Reports a failure that must stop the broker (a shard failed, a thread panicked). The
/// first cause is logged by the supervisor; later ones are knock-ons.
pub fn request_stop(reason: String) {
    match EVENTS.get() {
        Some(tx) => {
            let _ = tx.send(Event::Failure(reason));
        }
        // No supervisor (not `serve`): nothing else would end the process.
        None => {
            tracing::error!(%reason, "stopping: no stop supervisor; exiting");
            // SAFETY: ends the process at once.
            unsafe { libc::_exit(1) }
        }
    }
}

/// The thread that owns the stop: it sets `flag` on the first cause (the shards poll it
/// during start-up; their signal listeners wake them once they serve), raises SIGTERM at the
/// process after a failure so every shard wakes, and ends the process at the deadline or on
/// a second signal.
pub struct StopSupervisor {
    cause: Arc<OnceLock<StopCause>>,
}

impl StopSupervisor {
    /// Installs the handlers for `signals` (the flag is also set from the handler itself, so
    /// a shard that registers its own listener late still sees a signal that came before).
    pub fn start(
        signals: &[i32],
        flag: Arc<AtomicBool>,
        timeout: Duration,
        progress: Arc<Progress>,
    ) -> std::io::Result<StopSupervisor> {
        for &signal in signals {
            signal_hook::flag::register(signal, Arc::clone(&flag))?;
        }
        let (tx, rx) = mpsc::channel();
        let mut incoming = signal_hook::iterator::Signals::new(signals)?;
        {
            let tx = tx.clone();
            std::thread::Builder::new()
                .name("ringbroker-signals".into())
                .spawn(move || {
                    for signal in incoming.forever() {
                        if tx.send(Event::Signal(signal)).is_err() {
                            break;
                        }
                    }
                })?;
        }
        // A second `serve` in one process keeps the first supervisor (tests only).
        let _ = EVENTS.set(tx);
        let cause = Arc::new(OnceLock::new());
        let seen = Arc::clone(&cause);
        std::thread::Builder::new()
            .name("ringbroker-stop".into())
            .spawn(move || supervise(rx, StopState::new(timeout), &flag, &progress, &seen))?;
        Ok(StopSupervisor { cause })
    }

    /// The stop's first cause, once there is one.
    pub fn cause(&self) -> Option<StopCause> {
        self.cause.get().cloned()
    }
}

fn supervise(
    rx: mpsc::Receiver<Event>,
    mut state: StopState,
    flag: &AtomicBool,
    progress: &Progress,
    cause: &OnceLock<StopCause>,
) {
    loop {
        let event = match state.deadline() {
            None => rx.recv().ok(),
            Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(e) => Some(e),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            },
        };
        let now = Instant::now();
        let decision = match event {
            Some(Event::Signal(s)) => state.on_signal(s, now),
            Some(Event::Failure(reason)) => state.on_failure(reason, now),
            None if state.deadline().is_none() => return, // every sender is gone
            None => state.on_tick(now),
        };
        match decision {
            Decision::Ignore => {}
            Decision::Begin(first) => {
                let _ = cause.set(first.clone());
                flag.store(true, Ordering::Release);
                match &first {
                    StopCause::Signal(_) => {
                        tracing::info!(cause = %first, "stopping");
                    }
                    StopCause::Failure(reason) => {
                        tracing::error!(%reason, "stopping the broker");
                        state.raising_signal();
                        // SAFETY: kill(2) of our own process with a signal whose handlers are
                        // installed: it wakes every shard's signal listener.
                        unsafe {
                            libc::kill(libc::getpid(), libc::SIGTERM);
                        }
                    }
                }
            }
            Decision::ExitNow(why) => {
                tracing::error!(
                    still = %progress.describe(),
                    "{why}; exiting now (logs are recovered at the next start)"
                );
                // SAFETY: ends the process at once; the logs are crash-safe.
                unsafe { libc::_exit(1) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn the_first_cause_wins_and_a_knock_on_failure_is_ignored() {
        let now = Instant::now();
        let mut s = StopState::new(T);
        assert_eq!(
            s.on_failure("shard 0 failed: disk".into(), now),
            Decision::Begin(StopCause::Failure("shard 0 failed: disk".into()))
        );
        s.raising_signal();
        // The SIGTERM raised to wake the shards is not an operator's second signal.
        assert_eq!(s.on_signal(libc::SIGTERM, now), Decision::Ignore);
        assert_eq!(
            s.on_failure("shard 1: stopped before listening".into(), now),
            Decision::Ignore
        );
        assert_eq!(
            s.first_cause(),
            Some(&StopCause::Failure("shard 0 failed: disk".into()))
        );
    }

    #[test]
    fn a_second_signal_from_outside_ends_the_process() {
        let now = Instant::now();
        let mut s = StopState::new(T);
        assert_eq!(
            s.on_signal(libc::SIGTERM, now),
            Decision::Begin(StopCause::Signal(libc::SIGTERM))
        );
        assert!(s.first_cause().is_some_and(StopCause::is_clean));
        assert!(matches!(
            s.on_signal(libc::SIGINT, now),
            Decision::ExitNow(why) if why.contains("second stop signal (SIGINT)")
        ));
    }

    #[test]
    fn the_deadline_counts_from_the_first_cause() {
        let now = Instant::now();
        let mut s = StopState::new(T);
        assert_eq!(s.on_tick(now + 2 * T), Decision::Ignore, "no stop yet");
        s.on_signal(libc::SIGTERM, now);
        assert_eq!(
            s.on_tick(now + T - Duration::from_millis(1)),
            Decision::Ignore
        );
        assert!(matches!(
            s.on_tick(now + T),
            Decision::ExitNow(why) if why.contains("did not stop within 10s") && why.contains("SIGTERM")
        ));
    }

    #[test]
    fn progress_names_what_each_shard_is_doing() {
        let p = Progress::new(2);
        p.set_phase(0, Phase::Draining);
        p.set_connections(0, 2);
        p.set_phase(1, Phase::Stopped);
        assert_eq!(
            p.describe(),
            "shard 0: draining connections (2 connections open); shard 1: stopped"
        );
    }
}
