//! The broker's logs and lifecycle as an operator meets them: `serve --check-config`, JSON
//! log lines, and the startup line reporting what recovery found.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use bytes::Bytes;
use ringbroker::protocol::batch_builder::BatchBuilder;
use serde_json::Value;

mod broker;
use broker::{Broker, Client, WAIT};

fn ringbroker() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringbroker"));
    cmd.env_remove("RUST_LOG")
        .env_remove("RINGBROKER_LOG_FORMAT");
    cmd
}

fn check_config(config_file: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = ringbroker()
        .arg("serve")
        .arg("--config")
        .arg(config_file)
        .args(extra)
        .arg("--check-config")
        .output()
        .expect("run ringbroker");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The line of the listing for `name`.
fn listed<'a>(stdout: &'a str, name: &str) -> &'a str {
    let key = format!("\"{name}\" ");
    stdout
        .lines()
        .find(|l| l.starts_with(&key))
        .unwrap_or_else(|| panic!("{name} not listed:\n{stdout}"))
}

#[test]
fn check_config_prints_effective_values_and_touches_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("broker.toml");
    std::fs::write(
        &file,
        "num.partitions = 3\n\"log.retention.hours\" = 2\nringbroker.log.slow.fsync.warn.ms = 250\n",
    )
    .expect("write config");
    let data_dir = dir.path().join("never-created");
    let (code, stdout, stderr) = check_config(
        &file,
        &[
            "--data-dir",
            data_dir.to_str().expect("utf-8 path"),
            "--set",
            "auto.create.topics.enable=false",
            "--listen",
            "127.0.0.1:19555",
        ],
    );
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let line = listed(&stdout, "num.partitions");
    assert!(line.contains("\"3\"") && line.ends_with("# set"), "{line}");
    let line = listed(&stdout, "log.retention.ms");
    assert!(
        line.contains("\"7200000\"") && line.ends_with("# set"),
        "{line}"
    );
    let line = listed(&stdout, "ringbroker.log.slow.fsync.warn.ms");
    assert!(
        line.contains("\"250\"") && line.ends_with("# set"),
        "{line}"
    );
    let line = listed(&stdout, "auto.create.topics.enable");
    assert!(
        line.contains("\"false\"") && line.ends_with("# set"),
        "{line}"
    );
    let line = listed(&stdout, "listeners");
    assert!(
        line.contains("127.0.0.1:19555") && line.ends_with("# set"),
        "{line}"
    );
    let line = listed(&stdout, "log.dirs");
    assert!(line.ends_with("# set"), "{line}");
    let line = listed(&stdout, "log.segment.bytes");
    assert!(
        line.contains("\"1073741824\"") && line.ends_with("# default"),
        "{line}"
    );
    let line = listed(&stdout, "ringbroker.disk.free.warn.bytes");
    assert!(line.ends_with("# default"), "{line}");
    // Sorted by name.
    let names: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with('"'))
        .map(|l| l.split('"').nth(1).unwrap_or(""))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    assert!(
        !data_dir.exists(),
        "--check-config must not create the data dir"
    );
    // The listing is a config file with the same effect.
    let listing = dir.path().join("listing.toml");
    std::fs::write(&listing, &stdout).expect("write listing");
    let (code, again, stderr) = check_config(&listing, &[]);
    assert_eq!(code, 0, "{stderr}");
    let values = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with('"'))
            .map(|l| l.split("  #").next().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(values(&again), values(&stdout));
}

#[test]
fn check_config_rejects_a_bad_value_naming_the_property() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (text, name) in [
        ("num.partitions = 0\n", "num.partitions"),
        (
            "ringbroker.disk.free.warn.percent = 101\n",
            "ringbroker.disk.free.warn.percent",
        ),
        ("log.retention.msec = 5\n", "log.retention.msec"),
    ] {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, text).expect("write config");
        let (code, stdout, stderr) = check_config(&file, &[]);
        assert_eq!(code, 2, "{text}: stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(
            stderr.contains("invalid configuration") && stderr.contains(name),
            "{text}: {stderr}"
        );
        assert!(
            stdout.is_empty(),
            "nothing listed for an invalid config: {stdout}"
        );
    }
}

/// Waits until the broker's stderr holds a JSON line for which `pick` is true.
fn wait_for_json_line(b: &Broker, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = json_lines(b).into_iter().find(|v| pick(v)) {
            return v;
        }
        assert!(Instant::now() < deadline, "no {what} line:\n{}", b.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Every line of the broker's stderr, each parsed as JSON (panics on any that is not).
fn json_lines(b: &Broker) -> Vec<Value> {
    b.full_log()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

fn is_startup(v: &Value) -> bool {
    v["message"] == "ringbroker started"
}

#[test]
fn json_log_lines_with_a_structured_startup_line_and_a_low_disk_warning() {
    // 100%: any real disk is "low", so the warning shows up at once.
    let b = Broker::start_with_args(
        &["--log-format", "json"],
        &[],
        &["ringbroker.disk.free.warn.percent=100"],
    );
    let start = wait_for_json_line(&b, "startup", is_startup);
    assert_eq!(start["level"], "INFO", "{start}");
    assert_eq!(start["version"], env!("CARGO_PKG_VERSION"), "{start}");
    assert_eq!(start["shards"], 2, "{start}");
    assert_eq!(start["listeners"], b.addr.to_string(), "{start}");
    for field in [
        "partitions",
        "segments",
        "log_bytes",
        "truncated_bytes",
        "producer_snapshots",
        "recovery_ms",
        "retention_ms",
        "flush_messages",
    ] {
        assert!(
            start[field].is_u64() || start[field].is_i64(),
            "{field}: {start}"
        );
    }
    assert!(start["data_dir"].is_string(), "{start}");
    let low = wait_for_json_line(&b, "low disk", |v| {
        v["level"] == "WARN"
            && v["message"]
                .as_str()
                .is_some_and(|m| m.contains("disk space low"))
    });
    assert!(
        low["free_bytes"].is_u64() && low["total_bytes"].is_u64(),
        "{low}"
    );
    assert_eq!(low["warn_below_percent"], 100, "{low}");
    b.stop_cleanly();
}

const TOPIC: &str = "recovered";

fn produce(c: &mut Client, partition: i32, first: u64) {
    let mut builder = BatchBuilder::new(1_700_000_000_000);
    for i in first..first + 10 {
        builder.push(
            None,
            Some(format!("value-{i}").as_bytes()),
            1_700_000_000_000,
            &[],
        );
    }
    let records: Bytes = builder.build();
    assert_eq!(c.produce_records(9, 1, TOPIC, partition, records).0, 0);
}

#[test]
fn startup_line_reports_recovery_after_a_restart_with_data() {
    // The environment variable selects JSON as well as the flag does.
    let mut b = Broker::start_with_args(&[], &[("RINGBROKER_LOG_FORMAT", "json")], &[]);
    let first = wait_for_json_line(&b, "startup", is_startup);
    assert_eq!(
        first["unclean_logs"], 0,
        "new partitions are not unclean: {first}"
    );
    {
        let mut c = b.client();
        c.create_topic(TOPIC, 2, &[]);
        for round in 0..5 {
            produce(&mut c, 0, round * 10);
            produce(&mut c, 1, round * 10);
        }
    }
    // A clean stop, then garbage after the last batch of one partition: recovery must find
    // and cut it.
    b.assert_clean_stop();
    let segment = b
        .data_dir()
        .join(format!("{TOPIC}-0"))
        .join(format!("{:020}.log", 0));
    let len = std::fs::metadata(&segment).expect("segment").len();
    let garbage = [0xabu8; 37];
    let mut bytes = std::fs::read(&segment).expect("read segment");
    bytes.extend_from_slice(&garbage);
    std::fs::write(&segment, &bytes).expect("append garbage");
    b.spawn();
    let starts: Vec<Value> = json_lines(&b).into_iter().filter(is_startup).collect();
    assert_eq!(starts.len(), 2, "one startup line per start");
    let second = &starts[1];
    // The two partitions of the topic plus those of __consumer_offsets (created on the
    // first start, so loaded at this one).
    assert!(
        second["partitions"].as_u64().is_some_and(|n| n >= 2),
        "{second}"
    );
    assert!(
        second["log_bytes"].as_u64().is_some_and(|n| n >= len),
        "{second}"
    );
    assert_eq!(second["truncated_logs"], 1, "{second}");
    assert_eq!(second["truncated_bytes"], garbage.len() as u64, "{second}");
    assert_eq!(second["unclean_logs"], 0, "a clean stop: {second}");
    assert!(
        second["producer_snapshots"]
            .as_u64()
            .is_some_and(|n| n >= 2),
        "snapshots written at the clean close are loaded: {second}"
    );
    assert!(second["recovery_ms"].is_u64(), "{second}");
    assert_eq!(
        std::fs::metadata(&segment).expect("segment").len(),
        len,
        "cut back"
    );
    // kill -9: no clean-shutdown markers, so the next start scans the logs with data.
    b.kill9_and_restart();
    let starts: Vec<Value> = json_lines(&b).into_iter().filter(is_startup).collect();
    assert_eq!(starts.len(), 3, "one startup line per start");
    let third = &starts[2];
    assert!(
        third["unclean_logs"].as_u64().is_some_and(|n| n >= 2),
        "{third}"
    );
    assert!(
        third["scanned_segments"].as_u64().is_some_and(|n| n >= 2),
        "{third}"
    );
    assert_eq!(third["truncated_logs"], 0, "{third}");
    b.stop_cleanly();
}
