//! A shard that fails to start or panics ends the whole process, non-zero, with a log line
//! naming it: a supervisor never sees a half-alive broker. Uses the broker's
//! `RINGBROKER_FAILPOINT` test hook.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The broker must be gone within this (its own grace after a failure is 30 s).
const EXIT_WAIT: Duration = Duration::from_secs(60);

/// Runs a 2-shard broker with `failpoint` until it exits; its exit code and stderr.
fn run_with_failpoint(failpoint: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("broker.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["serve", "--listen", "127.0.0.1:0", "--shards", "2"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--set", "ringbroker.metrics.listen=none"])
        .env("RINGBROKER_FAILPOINT", failpoint)
        .env("RUST_LOG", "info")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("spawn the broker");
    let deadline = Instant::now() + EXIT_WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let Some(status) = status else {
        panic!("the broker with {failpoint} was still running after {EXIT_WAIT:?}:\n{text}");
    };
    (status.code(), text)
}

#[test]
fn a_shard_that_cannot_start_ends_the_process() {
    let (code, log) = run_with_failpoint("shard-start:1");
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("shard failed; stopping the broker"), "{log}");
    assert!(!log.contains("stopped cleanly"), "{log}");
}

#[test]
fn a_shard_that_panics_ends_the_process() {
    let (code, log) = run_with_failpoint("shard-panic:1");
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("a broker thread panicked; stopping the broker"),
        "{log}"
    );
}
