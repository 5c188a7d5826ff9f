//! A real broker process for integration tests; `client` holds the blocking Kafka client,
//! `cluster` the nodes of a cluster, `diagnostics` what a stuck process is doing, `metrics` its Prometheus text. Every wait
//! is bounded by [`WAIT`].
#![allow(dead_code)]

pub mod client;
pub mod cluster;
pub mod cpu_load;
pub mod diagnostics;
pub mod metrics;

#[allow(unused_imports)] // each test binary uses some of them
pub use client::{
    fetch_request, join_group_request, s, topic_name, until_coordinator_ready, Client,
};
use diagnostics::{backtraces, thread_states};

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Bound on every wait (connect, each response, shutdown).
pub const WAIT: Duration = Duration::from_secs(20);
/// Bound on a start or restart: recovery after SIGKILL scans every unclean active segment
/// (the crash soak's grow to ~100 MB each) and may wait on fsyncs behind a busy disk.
pub const START_WAIT: Duration = Duration::from_secs(90);

/// A broker with 2 unpinned shards (see [`Broker::set_shards`]) on a free loopback port over a temp data directory that
/// outlives restarts. Dropping it stops the process (SIGTERM, then SIGKILL).
pub struct Broker {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// Where the metrics endpoint listens, from the broker's `metrics on ADDR` line.
    pub metrics_addr: Option<SocketAddr>,
    dir: tempfile::TempDir,
    /// The data directory when it is not `<dir>/data` (e.g. on a small tmpfs).
    data_dir: Option<PathBuf>,
    settings: Vec<String>,
    /// Extra command-line arguments (e.g. `--log-format json`) and environment variables.
    args: Vec<String>,
    envs: Vec<(String, String)>,
    /// `--shards` of the next start.
    shards: usize,
    /// What the process was doing when a stop timed out (threads, stacks), for the failure.
    stop_hang: Option<String>,
}

impl Broker {
    /// `settings` are `NAME=VALUE` broker properties passed with `--set`.
    pub fn start(settings: &[&str]) -> Broker {
        Broker::start_with_data_dir(None, settings)
    }

    /// Like [`Broker::start`], with extra arguments to `ringbroker` and environment variables.
    pub fn start_with_args(args: &[&str], envs: &[(&str, &str)], settings: &[&str]) -> Broker {
        Broker::start_inner(None, args, envs, settings)
    }

    /// Like [`Broker::start`], with the data in `data_dir` (the log stays in a temp dir).
    pub fn start_with_data_dir(data_dir: Option<PathBuf>, settings: &[&str]) -> Broker {
        Broker::start_inner(data_dir, &[], &[], settings)
    }

    fn start_inner(
        data_dir: Option<PathBuf>,
        args: &[&str],
        envs: &[(&str, &str)],
        settings: &[&str],
    ) -> Broker {
        // RINGBROKER_TEST_KEEP_DIR=1 keeps the data and the log for a post-mortem.
        let dir = tempfile::Builder::new()
            .prefix("ringbroker-test-")
            .disable_cleanup(std::env::var_os("RINGBROKER_TEST_KEEP_DIR").is_some())
            .tempdir()
            .expect("tempdir");
        let mut broker = Broker {
            child: None,
            addr: ([127, 0, 0, 1], 0).into(),
            metrics_addr: None,
            dir,
            data_dir,
            settings: settings.iter().map(|s| s.to_string()).collect(),
            args: args.iter().map(|s| s.to_string()).collect(),
            envs: envs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            shards: 2,
            stop_hang: None,
        };
        broker.spawn();
        broker
    }

    /// Starts the process over this broker's data directory; returns once it accepts.
    pub fn spawn(&mut self) {
        let log_start = std::fs::metadata(self.log_path()).map_or(0, |m| m.len() as usize);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("log file");
        let mut cmd = Command::new(broker_binary());
        cmd.arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--shards")
            .arg(self.shards.to_string());
        // Never the default metrics port: tests run side by side, and a scrape meant for one
        // broker must not reach another. Port 0; the broker prints the one it got.
        if !self
            .settings
            .iter()
            .any(|s| s.starts_with("ringbroker.metrics.listen="))
        {
            cmd.arg("--set")
                .arg("ringbroker.metrics.listen=127.0.0.1:0");
        }
        for s in &self.settings {
            cmd.arg("--set").arg(s);
        }
        cmd.args(&self.args);
        cmd.envs(self.envs.iter().map(|(k, v)| (k, v)));
        let rust_log_given = self.envs.iter().any(|(k, _)| k == "RUST_LOG");
        if std::env::var_os("RUST_LOG").is_none() && !rust_log_given {
            cmd.env("RUST_LOG", "info");
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn the broker");
        // Port 0: the broker prints the port it got.
        let rx = stdout_lines(&mut child);
        self.child = Some(child);
        self.metrics_addr = None;
        let deadline = Instant::now() + START_WAIT;
        self.addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(addr) = parse_metrics_line(&line) {
                        self.metrics_addr = Some(addr);
                    }
                    if let Some(addr) = parse_listen_line(&line) {
                        break addr;
                    }
                }
                Err(_) => panic!(
                    "the broker printed no 'listening on' line within {START_WAIT:?} \
                     (log {}, threads: {}):\n{}\n{}",
                    self.log_path().display(),
                    thread_states(self.pid()),
                    self.log_from(log_start),
                    backtraces(self.pid())
                ),
            }
        };
        while TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the broker does not accept on {}:\n{}",
                self.addr,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The shard count of the next (re)start.
    pub fn set_shards(&mut self, shards: usize) {
        self.shards = shards;
    }

    /// The `NAME=VALUE` broker properties of the next (re)start, replacing the current ones.
    pub fn set_settings(&mut self, settings: &[&str]) {
        self.settings = settings.iter().map(|s| s.to_string()).collect();
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(0)
    }

    /// The exit status if the process has ended (None while it runs or when stopped here).
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| self.dir.path().join("data"))
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("broker.log")
    }

    /// Everything the broker wrote to stderr, across restarts.
    pub fn full_log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.log_path()).unwrap_or_default()).into_owned()
    }

    /// The log from byte `start` (this start's lines): its head, where a first cause is, and
    /// its tail, what happened last (recovery after a kill logs a line per partition, and a
    /// tail alone lost the cause).
    fn log_from(&self, start: usize) -> String {
        const HALF: usize = 24 * 1024;
        let log = std::fs::read(self.log_path()).unwrap_or_default();
        let this = &log[start.min(log.len())..];
        if this.len() <= 2 * HALF {
            return String::from_utf8_lossy(this).into_owned();
        }
        format!(
            "{}\n[... {} bytes ...]\n{}",
            String::from_utf8_lossy(&this[..HALF]),
            this.len() - 2 * HALF,
            String::from_utf8_lossy(&this[this.len() - HALF..])
        )
    }

    pub fn log(&self) -> String {
        let log = std::fs::read(self.log_path()).unwrap_or_default();
        let tail = &log[log.len().saturating_sub(8000)..];
        String::from_utf8_lossy(tail).into_owned()
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// A clean stop (SIGTERM, exit 0) and a start over the same data.
    pub fn restart(&mut self) {
        self.assert_clean_stop();
        self.spawn();
    }

    /// SIGKILL (no shutdown work at all) and a start over the same data.
    pub fn kill9_and_restart(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.spawn();
    }

    /// SIGTERM, then wait (bounded) for the exit status; `None` if the broker had to be
    /// killed. Never panics (it also runs in `Drop`).
    pub fn terminate(&mut self) -> Option<ExitStatus> {
        self.signal(libc::SIGTERM);
        self.wait_exit()
    }

    /// Sends `signal` to the process, if it runs.
    pub fn signal(&self, signal: i32) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
            unsafe {
                libc::kill(child.id() as libc::pid_t, signal);
            }
        }
    }

    /// Waits (bounded by [`WAIT`]) for a process already signalled to exit; `None` if it had
    /// to be killed, with what its threads were doing kept for the failure message.
    pub fn wait_exit(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        // Before the SIGKILL: what every thread was doing is what explains a hung stop.
        let pid = child.id() as i32;
        self.stop_hang = Some(format!(
            "threads: {}\n{}",
            thread_states(pid),
            backtraces(pid)
        ));
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    pub fn assert_clean_stop(&mut self) {
        let Some(status) = self.terminate() else {
            panic!(
                "the broker did not exit within {WAIT:?} of SIGTERM:\n{}\n{}",
                self.log(),
                self.stop_hang.take().unwrap_or_default()
            );
        };
        assert!(
            status.success(),
            "the broker exited with {status}:\n{}",
            self.log()
        );
    }

    /// Stops the broker and checks that it shut down cleanly.
    pub fn stop_cleanly(mut self) {
        self.assert_clean_stop();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let status = self.terminate();
        if std::thread::panicking() {
            eprintln!("broker exit status {status:?}; its log:\n{}", self.log());
            if let Some(hang) = self.stop_hang.take() {
                eprintln!("it did not stop on SIGTERM: {hang}");
            }
        }
    }
}

fn parse_metrics_line(line: &str) -> Option<SocketAddr> {
    line.strip_prefix("metrics on ")?.trim().parse().ok()
}

/// The broker binary under test; `RINGBROKER_BIN` overrides it (long soak runs use a copy so
/// that rebuilding meanwhile does not swap the binary under them).
fn broker_binary() -> std::ffi::OsString {
    std::env::var_os("RINGBROKER_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_ringbroker").into())
}

/// The lines the process prints on stdout. The reader thread also keeps the pipe drained
/// until the process exits (then the receiver reports the end).
pub fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("a piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The address of the broker's `listening on ADDR` line.
pub fn parse_listen_line(line: &str) -> Option<SocketAddr> {
    let rest = line.split("listening on ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}
