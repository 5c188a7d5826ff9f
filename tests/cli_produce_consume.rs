//! `ringbroker produce` and `ringbroker consume` as a user runs them, against a real broker:
//! round trips of keys, values and headers through a codec, `-n`, `--from`, consumer groups
//! (resuming from committed offsets, two processes sharing partitions), and the errors of an
//! unknown topic and an unreachable broker. Every wait is bounded; children are killed when a
//! test fails. No wall-clock thresholds.

mod broker;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use broker::{Broker, WAIT};
use serde_json::Value;

const BROKER_SETTINGS: &[&str] = &[
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=500",
];

/// A `ringbroker` child whose stdout and stderr are collected by threads; killed on drop.
struct Cli {
    child: Option<Child>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    args: Vec<String>,
}

fn collect(mut from: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let to = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 {
                break;
            }
            to.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    buf
}

impl Cli {
    fn spawn(args: &[&str], stdin: Option<&[u8]>) -> Cli {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ringbroker");
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("stdin");
            let input = input.to_vec();
            // A writer thread: a child that stops reading must not block the test.
            std::thread::spawn(move || {
                let _ = pipe.write_all(&input);
            });
        }
        let stdout = collect(child.stdout.take().expect("stdout"));
        let stderr = collect(child.stderr.take().expect("stderr"));
        Cli {
            child: Some(child),
            stdout,
            stderr,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits (bounded by [`WAIT`]) for the exit; panics with the output on a timeout.
    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        let child = self.child.as_mut().expect("running");
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                // Let the reader threads drain the pipes.
                std::thread::sleep(Duration::from_millis(50));
                self.child = None;
                return status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "ringbroker {:?} did not exit within {WAIT:?}\nstdout:\n{}\nstderr:\n{}",
                    self.args,
                    self.stdout(),
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn interrupt(&self) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on the pid of our own unreaped child.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGINT);
            }
        }
    }

    /// Runs to completion and asserts the exit code.
    fn run(args: &[&str], stdin: Option<&[u8]>, code: i32) -> Cli {
        let mut cli = Cli::spawn(args, stdin);
        let status = cli.wait();
        assert_eq!(
            status.code(),
            Some(code),
            "ringbroker {args:?}\nstdout:\n{}\nstderr:\n{}",
            cli.stdout(),
            cli.stderr()
        );
        cli
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `cond` every 50 ms up to [`WAIT`]; panics with `what` and the context otherwise.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {WAIT:?}\n{}",
            context()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// (key, value, headers) of a consumed JSON record.
fn kvh(v: &Value) -> (Value, Value, Value) {
    (v["key"].clone(), v["value"].clone(), v["headers"].clone())
}

#[test]
fn produced_lines_come_back_exactly_with_keys_headers_and_codec() {
    let mut broker = Broker::start(BROKER_SETTINGS);
    broker.client().create_topic("roundtrip", 3, &[]);
    let b = broker.addr.to_string();
    // Keys, an empty line, a line without a key, a value with the separator in it, UTF-8,
    // and a last line without a newline.
    let input = "k1:v1\nk2:v2\n\nnokey\nk3:a:b\nk4:\n:empty key\nk5:héllo\nk6:last";
    let produce = Cli::run(
        &[
            "produce",
            "roundtrip",
            "-b",
            &b,
            "--key-separator",
            ":",
            "-H",
            "source=cli",
            "-H",
            "eq=a=b",
            "--compression",
            "zstd",
        ],
        Some(input.as_bytes()),
        0,
    );
    let summary = produce.stderr();
    assert!(summary.contains("9 records"), "{summary}");
    assert!(summary.contains("9 delivered, 0 failed"), "{summary}");

    let consume = Cli::run(
        &[
            "consume",
            "roundtrip",
            "-b",
            &b,
            "--from",
            "beginning",
            "-e",
            "--format",
            "json",
        ],
        None,
        0,
    );
    let mut got: Vec<_> = json_lines(&consume.stdout()).iter().map(kvh).collect();
    let headers = serde_json::json!([
        {"key": "source", "value": "cli"},
        {"key": "eq", "value": "a=b"},
    ]);
    let mut want: Vec<_> = [
        (Some("k1"), "v1"),
        (Some("k2"), "v2"),
        (None, ""),
        (None, "nokey"),
        (Some("k3"), "a:b"),
        (Some("k4"), ""),
        (Some(""), "empty key"),
        (Some("k5"), "héllo"),
        (Some("k6"), "last"),
    ]
    .iter()
    .map(|(k, v)| {
        let key = k.map_or(Value::Null, |k| Value::String(k.into()));
        (key, Value::String(v.to_string()), headers.clone())
    })
    .collect();
    let order = |a: &(Value, Value, Value), b: &(Value, Value, Value)| {
        (a.0.to_string(), a.1.to_string()).cmp(&(b.0.to_string(), b.1.to_string()))
    };
    got.sort_by(order);
    want.sort_by(order);
    assert_eq!(got, want);
    // Records of a key all went to one partition, in input order there.
    assert!(
        consume.stderr().contains("9 records"),
        "{}",
        consume.stderr()
    );
    broker.assert_clean_stop();
}

#[test]
fn count_offsets_and_templates() {
    let mut broker = Broker::start(BROKER_SETTINGS);
    broker.client().create_topic("numbers", 2, &[]);
    let b = broker.addr.to_string();
    let input: String = (0..10).map(|i| format!("v{i}\n")).collect();
    Cli::run(
        &[
            "produce",
            "numbers",
            "-b",
            &b,
            "--partition",
            "1",
            "--compression",
            "lz4",
            "-q",
        ],
        Some(input.as_bytes()),
        0,
    );
    let consume = |extra: &[&str]| {
        let mut args = vec!["consume", "numbers", "-b", &b, "-q"];
        args.extend_from_slice(extra);
        Cli::run(&args, None, 0).stdout()
    };
    // -n stops after that many records, even though more are there.
    assert_eq!(consume(&["--from", "beginning", "-n", "3"]), "v0\nv1\nv2\n");
    // An offset in one partition, with a template.
    assert_eq!(
        consume(&["-p", "1", "--from", "7", "-e", "-f", "%p:%o %s|%K|%h\\n"]),
        "1:7 v7|-1|\n1:8 v8|-1|\n1:9 v9|-1|\n"
    );
    // -N: the last N of each partition (partition 0 is empty).
    assert_eq!(consume(&["--from", "-2", "-e"]), "v8\nv9\n");
    // The end of an empty partition is its start.
    assert_eq!(consume(&["-p", "0", "--from", "beginning", "-e"]), "");
    // A timestamp far in the future: nothing at or after it.
    assert_eq!(consume(&["--from", "@99999999999999", "-e"]), "");
    assert_eq!(consume(&["--from", "@0", "-e", "-n", "1"]), "v0\n");
    broker.assert_clean_stop();
}

#[test]
fn a_group_continues_where_its_last_run_stopped() {
    let mut broker = Broker::start(BROKER_SETTINGS);
    broker.client().create_topic("resume", 2, &[]);
    let b = broker.addr.to_string();
    let input: String = (0..10).map(|i| format!("k{i}:v{i}\n")).collect();
    Cli::run(
        &["produce", "resume", "-b", &b, "-K", ":", "-q"],
        Some(input.as_bytes()),
        0,
    );
    let run = |n: Option<&str>| {
        let mut args = vec![
            "consume",
            "resume",
            "-b",
            &b,
            "--group",
            "resumers",
            "--from",
            "beginning",
            "--session-timeout",
            "2s",
        ];
        match n {
            Some(n) => args.extend_from_slice(&["-n", n]),
            None => args.push("-e"),
        }
        let cli = Cli::run(&args, None, 0);
        assert!(cli.stderr().contains("group resumers"), "{}", cli.stderr());
        cli.stdout().lines().map(String::from).collect::<Vec<_>>()
    };
    let first = run(Some("4"));
    let second = run(Some("6"));
    assert_eq!(first.len(), 4);
    assert_eq!(second.len(), 6);
    let mut all: Vec<String> = first.into_iter().chain(second).collect();
    all.sort();
    let mut want: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    want.sort();
    assert_eq!(all, want, "every record once over the two runs");
    // Everything is committed: a third run reaches the end without printing anything.
    assert!(run(None).is_empty());
    broker.assert_clean_stop();
}

#[test]
fn a_committed_offset_that_left_the_log_restarts_at_from() {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::delete_records_response::DeleteRecordsResponse;
    use kafka_protocol::messages::ApiKey;

    let mut broker = Broker::start(BROKER_SETTINGS);
    broker.client().create_topic("trimmed", 1, &[]);
    let b = broker.addr.to_string();
    let input: String = (0..10).map(|i| format!("v{i}\n")).collect();
    Cli::run(
        &["produce", "trimmed", "-b", &b, "-q"],
        Some(input.as_bytes()),
        0,
    );
    let group = ["--group", "trimmers", "--from", "beginning"];
    let mut args = vec!["consume", "trimmed", "-b", &b, "-n", "3"];
    args.extend_from_slice(&group);
    assert_eq!(Cli::run(&args, None, 0).stdout(), "v0\nv1\nv2\n");
    // The log now starts at 6: the committed offset 3 is gone.
    let mut p = DeleteRecordsPartition::default();
    p.partition_index = 0;
    p.offset = 6;
    let mut t = DeleteRecordsTopic::default();
    t.name = broker::topic_name("trimmed");
    t.partitions = vec![p];
    let mut req = DeleteRecordsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 5000;
    let resp: DeleteRecordsResponse = broker.client().call(ApiKey::DeleteRecords, 1, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    let mut args = vec!["consume", "trimmed", "-b", &b, "-e"];
    args.extend_from_slice(&group);
    let cli = Cli::run(&args, None, 0);
    assert_eq!(cli.stdout(), "v6\nv7\nv8\nv9\n");
    assert!(
        cli.stderr().contains("not in the log any more"),
        "{}",
        cli.stderr()
    );
    broker.assert_clean_stop();
}

/// The partitions in the last "assigned [...]" line of a consume process's stderr.
fn last_assignment(stderr: &str) -> Option<Vec<String>> {
    let line = stderr.lines().rev().find(|l| l.contains("assigned ["))?;
    let inner = line.split("assigned [").nth(1)?.trim_end_matches(']');
    Some(
        inner
            .split(", ")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
    )
}

#[test]
fn two_group_members_split_the_partitions_and_read_each_record_once() {
    let mut broker = Broker::start(BROKER_SETTINGS);
    broker.client().create_topic("shared", 4, &[]);
    let b = broker.addr.to_string();
    let member = || {
        Cli::spawn(
            &[
                "consume",
                "shared",
                "-b",
                &b,
                "--group",
                "pair",
                "--from",
                "beginning",
                "--session-timeout",
                "3s",
                "-f",
                "%p %s\\n",
            ],
            None,
        )
    };
    let mut a = member();
    wait_until(
        "the first member owns every partition",
        || last_assignment(&a.stderr()).is_some_and(|p| p.len() == 4),
        || a.stderr(),
    );
    let mut c = member();
    let split = || {
        let (x, y) = (last_assignment(&a.stderr()), last_assignment(&c.stderr()));
        match (x, y) {
            (Some(x), Some(y)) => {
                let mut all: Vec<String> = x.iter().chain(&y).cloned().collect();
                all.sort();
                x.len() == 2 && y.len() == 2 && all.windows(2).all(|w| w[0] != w[1])
            }
            _ => false,
        }
    };
    wait_until("the two members split the 4 partitions", split, || {
        format!("A:\n{}\nB:\n{}", a.stderr(), c.stderr())
    });
    // 10 records into each partition.
    for p in 0..4 {
        let input: String = (0..10).map(|i| format!("p{p}-{i}\n")).collect();
        let ps = p.to_string();
        Cli::run(
            &["produce", "shared", "-b", &b, "-p", &ps, "-q"],
            Some(input.as_bytes()),
            0,
        );
    }
    let total = || a.stdout().lines().count() + c.stdout().lines().count();
    wait_until(
        "40 records consumed in total",
        || total() >= 40,
        || {
            format!(
                "A:\n{}{}\nB:\n{}{}",
                a.stderr(),
                a.stdout(),
                c.stderr(),
                c.stdout()
            )
        },
    );
    a.interrupt();
    c.interrupt();
    for (name, cli) in [("A", &mut a), ("B", &mut c)] {
        let status = cli.wait();
        assert!(status.success(), "{name}: {status}\n{}", cli.stderr());
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for cli in [&a, &c] {
        let lines = cli.stdout();
        assert_eq!(
            lines.lines().count(),
            20,
            "each member reads its 2 partitions"
        );
        for line in lines.lines() {
            *seen.entry(line.to_string()).or_default() += 1;
        }
    }
    assert_eq!(seen.len(), 40);
    assert!(seen.values().all(|&n| n == 1), "{seen:?}");
    broker.assert_clean_stop();
}

#[test]
fn failed_records_are_counted_by_kafka_name_and_exit_1() {
    let mut broker = Broker::start(BROKER_SETTINGS);
    broker
        .client()
        .create_topic("small", 1, &[("max.message.bytes", "1000")]);
    let b = broker.addr.to_string();
    let input = format!("{}\n", "x".repeat(5000));
    let cli = Cli::run(&["produce", "small", "-b", &b], Some(input.as_bytes()), 1);
    let err = cli.stderr();
    assert!(
        err.contains("1 records failed with MESSAGE_TOO_LARGE"),
        "{err}"
    );
    assert!(err.contains("max.message.bytes"), "{err}");
    assert!(err.contains("0 delivered, 1 failed"), "{err}");
    broker.assert_clean_stop();
}

#[test]
fn an_unknown_topic_is_named_and_explained() {
    let mut broker = Broker::start(BROKER_SETTINGS);
    let b = broker.addr.to_string();
    for args in [
        vec!["consume", "nosuch", "-b", &b, "-e"],
        vec!["produce", "nosuch", "-b", &b],
    ] {
        let cli = Cli::run(&args, Some(b"x\n"), 1);
        let err = cli.stderr();
        assert!(err.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{err}");
        assert!(err.contains("does not exist"), "{err}");
    }
    broker.assert_clean_stop();
}

#[test]
fn an_unreachable_broker_is_said_plainly() {
    // A port nobody listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let b = format!("127.0.0.1:{port}");
    for command in ["consume", "produce"] {
        let cli = Cli::run(
            &[command, "t", "-b", &b, "--timeout", "2s"],
            Some(b"x\n"),
            2,
        );
        assert!(cli.stderr().contains("cannot reach"), "{}", cli.stderr());
    }
}

#[test]
fn group_member_shares_a_group_with_confluent_kafka() {
    let ok = Command::new("python3")
        .args(["-c", "import confluent_kafka"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIP: python3 with confluent_kafka is not installed");
        return;
    }
    let mut broker = Broker::start(BROKER_SETTINGS);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/groups_cli.py");
    let mut cli = Command::new("python3")
        .args([
            script,
            "--bootstrap",
            &broker.addr.to_string(),
            "--bin",
            env!("CARGO_BIN_EXE_ringbroker"),
            "--session-timeout-ms",
            "3000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let out = collect(cli.stdout.take().expect("stdout"));
    let err = collect(cli.stderr.take().expect("stderr"));
    let deadline = Instant::now() + WAIT * 4;
    let status = loop {
        if let Some(s) = cli.try_wait().expect("try_wait") {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = cli.kill();
            let _ = cli.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(50));
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.lock().unwrap()),
        String::from_utf8_lossy(&err.lock().unwrap())
    );
    assert!(status.is_some_and(|s| s.success()), "{text}");
    assert!(text.contains("PASS") && !text.contains("FAIL"), "{text}");
    broker.assert_clean_stop();
}
