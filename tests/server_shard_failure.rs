//! How the broker process ends, whatever happens: a shard that fails to start or panics ends
//! it, non-zero, with one error line naming the first cause (not the knock-on stops of the
//! other shards); a SIGTERM during start-up is a clean stop; a stop that cannot finish is ended
//! by `ringbroker.shutdown.timeout.ms` or a second SIGTERM, naming what was still open. Uses
//! the broker's `RINGBROKER_FAILPOINT` test hook.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The broker must be gone within this (its own deadline is 15 s by default).
const EXIT_WAIT: Duration = Duration::from_secs(60);

struct Run {
    child: Child,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// Starts a 2-shard broker with `failpoint` and extra `--set` settings.
fn start(failpoint: &str, settings: &[&str]) -> Run {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("broker.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringbroker"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--shards", "2"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--set", "ringbroker.metrics.listen=none"]);
    for s in settings {
        cmd.args(["--set", s]);
    }
    let child = cmd
        .env("RINGBROKER_FAILPOINT", failpoint)
        .env("RUST_LOG", "info")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn the broker");
    Run {
        child,
        log,
        _dir: dir,
    }
}

impl Run {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (bounded) until the log holds `text`.
    fn wait_for_log(&self, text: &str) {
        let deadline = Instant::now() + EXIT_WAIT;
        while !self.log().contains(text) {
            assert!(
                Instant::now() < deadline,
                "no {text:?} in the log within {EXIT_WAIT:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// Waits for the exit; its code, how long it took, and the log.
    fn wait_exit(mut self) -> (Option<i32>, Duration, String) {
        let started = Instant::now();
        let deadline = started + EXIT_WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = self.log();
        let Some(status) = status else {
            panic!("the broker was still running after {EXIT_WAIT:?}:\n{text}");
        };
        (status.code(), started.elapsed(), text)
    }
}

fn error_lines(log: &str) -> Vec<&str> {
    log.lines().filter(|l| l.contains("ERROR")).collect()
}

#[test]
fn a_shard_that_cannot_start_ends_the_process_naming_the_first_cause() {
    let (code, _, log) = start("shard-start:1", &[]).wait_exit();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("stopping the broker")
            && log.contains("shard 1 failed: failpoint shard-start"),
        "{log}"
    );
    // Shard 0 stopped because shard 1 failed: that is not a second cause.
    let errors = error_lines(&log);
    assert!(
        errors.first().is_some_and(|l| l.contains("shard 1 failed")),
        "the first error line names the cause: {errors:#?}"
    );
    assert!(!log.contains("ERROR ringbroker::server: shard"), "{log}");
    assert!(!log.contains("stopped cleanly"), "{log}");
}

#[test]
fn a_shard_that_panics_ends_the_process() {
    let (code, _, log) = start("shard-panic:1", &[]).wait_exit();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("a broker thread panicked; stopping the broker"),
        "{log}"
    );
}

#[test]
fn sigterm_during_start_up_is_a_clean_stop() {
    // Shard 0's start-up takes until the stop (as a long recovery would); shard 1 waits for
    // its turn to listen. Before the fix this exited 1 with "stopped before listening".
    let run = start("shard-hold:0", &[]);
    run.wait_for_log("starting");
    std::thread::sleep(Duration::from_millis(300));
    run.signal(libc::SIGTERM);
    let (code, _, log) = run.wait_exit();
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("stopped cleanly"), "{log}");
    assert!(error_lines(&log).is_empty(), "{log}");
}

#[test]
fn a_stop_that_cannot_finish_ends_at_the_deadline_naming_what_was_open() {
    let run = start("stop-hang:1", &["ringbroker.shutdown.timeout.ms=1500"]);
    run.wait_for_log("ringbroker started");
    run.signal(libc::SIGTERM);
    let (code, took, log) = run.wait_exit();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("did not stop within 1.5s (ringbroker.shutdown.timeout.ms) of SIGTERM")
            && log.contains("shard 1: closing its logs"),
        "{log}"
    );
    assert!(took < EXIT_WAIT, "{took:?}");
}

#[test]
fn a_second_sigterm_ends_a_stop_at_once() {
    let run = start("stop-hang:0", &["ringbroker.shutdown.timeout.ms=600000"]);
    run.wait_for_log("ringbroker started");
    run.signal(libc::SIGTERM);
    run.wait_for_log("shutting down: no new connections");
    run.signal(libc::SIGTERM);
    let (code, _, log) = run.wait_exit();
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("a second stop signal (SIGTERM) while stopping after SIGTERM")
            && log.contains("shard 0: closing its logs"),
        "{log}"
    );
}
