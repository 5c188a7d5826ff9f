//! `ringbroker topic ...` and `ringbroker group ...` as a user runs them, against a real
//! broker: exit codes, error names on stderr, and the `--format json` documents.

mod broker;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use broker::{s, topic_name, Broker, Client, WAIT};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition as AssignedPartitions,
};
use kafka_protocol::messages::consumer_protocol_subscription::ConsumerProtocolSubscription;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{ApiKey, GroupId};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::ResponseError;
use ringbroker::client::accumulator::TopicPartition;
use ringbroker::client::group_coordinator::{commit_offsets, fetch_offsets, CommitIdentity};
use ringbroker::client::{ClientConfig, Cluster, Producer, ProducerConfig, ProducerRecord};
use serde_json::Value;

/// Runs `ringbroker ARGS` against `bootstrap`, killed if it outlives [`WAIT`].
fn run_at(bootstrap: &str, args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(args)
        .env("RINGBROKER_BOOTSTRAP", bootstrap)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ringbroker");
    let pid = child.id() as libc::pid_t;
    let (done, finished) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if finished.recv_timeout(WAIT).is_err() {
            // SAFETY: kill(2) on our child, which has not been reaped (we wait below).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    });
    let out = child.wait_with_output().expect("wait for ringbroker");
    let _ = done.send(());
    let _ = watchdog.join();
    out
}

fn run(broker: &Broker, args: &[&str]) -> Output {
    run_at(&broker.addr.to_string(), args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a command that must succeed and returns its stdout.
fn ok(broker: &Broker, args: &[&str]) -> String {
    let out = run(broker, args);
    assert!(
        out.status.success(),
        "{args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs a command with `--format json` that must succeed and parses its stdout.
fn json(broker: &Broker, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["--format", "json"]);
    let stdout = ok(broker, &args);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}:\n{stdout}"))
}

/// Runs a command that must fail with exit code `code`; returns its stderr.
fn fails(broker: &Broker, args: &[&str], code: i32) -> String {
    let out = run(broker, args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?}:\nstdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stderr)
}

fn topic_names(list: &Value) -> Vec<String> {
    list["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

/// The value of config `name` in a `topic describe --format json` document.
fn config_value(description: &Value, name: &str) -> Option<String> {
    description["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .find(|c| c["name"] == name)
        .and_then(|c| c["value"].as_str().map(str::to_string))
}

fn cluster(broker: &Broker) -> Cluster {
    let mut config = ClientConfig::new(&broker.addr.to_string());
    config.request_timeout = WAIT;
    Cluster::connect(config).expect("connect")
}

/// Produces `per_partition[p]` records to each partition `p` of `topic`.
fn produce(broker: &Broker, topic: &str, per_partition: &[usize]) {
    let producer = Producer::new(cluster(broker), ProducerConfig::default()).expect("producer");
    let failures = Arc::new(Mutex::new(Vec::new()));
    for (p, &n) in per_partition.iter().enumerate() {
        for _ in 0..n {
            let failures = failures.clone();
            let record = ProducerRecord::new(topic, b"value").partition(p as i32);
            producer
                .send(
                    record,
                    Box::new(move |r| {
                        if let Err(e) = r {
                            failures.lock().unwrap().push(e.to_string());
                        }
                    }),
                )
                .expect("send");
        }
    }
    assert_eq!(producer.flush(WAIT), 0, "every record delivered in time");
    assert!(failures.lock().unwrap().is_empty(), "{failures:?}");
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: Arc::from(topic),
        partition,
    }
}

fn commit(broker: &Broker, group: &str, offsets: &[(&str, i32, i64)]) {
    let offsets: BTreeMap<TopicPartition, i64> =
        offsets.iter().map(|&(t, p, o)| (tp(t, p), o)).collect();
    commit_offsets(
        &cluster(broker),
        group,
        &CommitIdentity::standalone(),
        &offsets,
    )
    .expect("commit");
}

fn committed(broker: &Broker, group: &str) -> BTreeMap<TopicPartition, i64> {
    fetch_offsets(&cluster(broker), group, None).expect("fetch offsets")
}

#[test]
fn topic_lifecycle() {
    let broker = Broker::start(&[]);
    let out = ok(
        &broker,
        &[
            "topic",
            "create",
            "orders",
            "-p",
            "2",
            "-c",
            "retention.ms=123456",
        ],
    );
    assert!(out.contains("created topic orders"), "{out}");

    let list = json(&broker, &["topic", "list"]);
    assert_eq!(topic_names(&list), ["orders"], "internal topics are hidden");
    assert_eq!(list["topics"][0]["partitions"], 2);
    assert_eq!(list["topics"][0]["internal"], false);
    let table = ok(&broker, &["topic", "list"]);
    assert!(table.lines().any(|l| l.starts_with("orders ")), "{table}");

    produce(&broker, "orders", &[3, 1]);
    let d = json(&broker, &["topic", "describe", "orders"]);
    let partitions = d["partitions"].as_array().expect("partitions");
    assert_eq!(partitions.len(), 2);
    assert_eq!(partitions[0]["high_watermark"], 3);
    assert_eq!(partitions[0]["log_start_offset"], 0);
    assert_eq!(partitions[0]["messages"], 3);
    assert_eq!(partitions[1]["messages"], 1);
    assert_eq!(partitions[0]["leader"], 0);
    // Sizes from DescribeLogDirs: three records take more than one.
    let size = |p: &Value| p["size_bytes"].as_i64().expect("a size");
    assert!(size(&partitions[0]) > size(&partitions[1]), "{d}");
    assert!(size(&partitions[1]) > 0, "{d}");
    assert_eq!(config_value(&d, "retention.ms").as_deref(), Some("123456"));
    assert_eq!(
        config_value(&d, "segment.bytes"),
        None,
        "only configs set on the topic"
    );
    let table = ok(&broker, &["topic", "describe", "orders"]);
    assert!(table.contains("retention.ms"), "{table}");
    assert!(table.contains("HIGH-WATERMARK"), "{table}");
    let lines: Vec<&str> = table.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.trim_start().starts_with("PARTITION"))
        .expect("a partition table");
    assert!(lines[header].trim_end().ends_with("SIZE-BYTES"), "{table}");
    let row0 = lines[header + 1];
    assert_eq!(
        row0.split_whitespace().last(),
        Some(size(&partitions[0]).to_string().as_str()),
        "{table}"
    );

    ok(
        &broker,
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "segment.bytes=1048576",
            "--delete",
            "retention.ms",
        ],
    );
    let d = json(&broker, &["topic", "describe", "orders"]);
    assert_eq!(
        config_value(&d, "segment.bytes").as_deref(),
        Some("1048576")
    );
    assert_eq!(
        config_value(&d, "retention.ms"),
        None,
        "back to the default"
    );
    let all = json(&broker, &["topic", "describe", "orders", "--all-configs"]);
    assert!(config_value(&all, "retention.ms").is_some(), "{all:#}");

    ok(
        &broker,
        &["topic", "add-partitions", "orders", "--num", "2"],
    );
    let d = json(&broker, &["topic", "describe", "orders"]);
    assert_eq!(d["partitions"].as_array().map(Vec::len), Some(4));

    let out = ok(&broker, &["topic", "delete", "orders"]);
    assert!(out.contains("deleted topic orders"), "{out}");
    let list = json(&broker, &["topic", "list"]);
    assert!(topic_names(&list).is_empty(), "{list:#}");
    let internal = json(&broker, &["topic", "list", "--internal"]);
    assert!(
        topic_names(&internal).iter().all(|t| t.starts_with("__")),
        "{internal:#}"
    );
    broker.stop_cleanly();
}

#[test]
fn creating_an_existing_topic_fails_unless_if_not_exists() {
    let broker = Broker::start(&[]);
    ok(&broker, &["topic", "create", "t", "-p", "1"]);
    let err = fails(&broker, &["topic", "create", "t", "-p", "1"], 1);
    assert!(err.contains("TOPIC_ALREADY_EXISTS"), "{err}");
    assert!(err.contains("exists already"), "explained: {err}");
    let out = json(&broker, &["topic", "create", "t", "--if-not-exists"]);
    assert_eq!(out["created"], false);
    assert_eq!(out["partitions"], 1);
    broker.stop_cleanly();
}

#[test]
fn replica_assignments_are_given_as_kafka_topics_takes_them() {
    let broker = Broker::start(&["node.id=3"]);
    let out = json(
        &broker,
        &["topic", "create", "placed", "--replica-assignment", "3,3"],
    );
    assert_eq!(out["partitions"], 2);
    // Only this broker exists: another broker id is the broker's refusal, explained.
    let err = fails(
        &broker,
        &[
            "topic",
            "create",
            "elsewhere",
            "--replica-assignment",
            "3:4",
        ],
        1,
    );
    assert!(err.contains("INVALID_REPLICA_ASSIGNMENT"), "{err}");
    // The partition count comes from the assignment; both given is the CLI's refusal.
    let err = fails(
        &broker,
        &[
            "topic",
            "create",
            "both",
            "-p",
            "2",
            "--replica-assignment",
            "3",
        ],
        2,
    );
    assert!(err.contains("cannot be used with"), "{err}");
    broker.stop_cleanly();
}

#[test]
fn unknown_topics_are_unknown_topic_or_partition() {
    let broker = Broker::start(&[]);
    for args in [
        &["topic", "describe", "nope"][..],
        &["topic", "delete", "nope"],
        &["topic", "alter-config", "nope", "--set", "retention.ms=1"],
        &["topic", "add-partitions", "nope", "--num", "1"],
        &[
            "group",
            "reset-offsets",
            "g",
            "--topic",
            "nope",
            "--to-earliest",
        ],
    ] {
        let err = fails(&broker, args, 1);
        assert!(
            err.contains("UNKNOWN_TOPIC_OR_PARTITION"),
            "{args:?}: {err}"
        );
    }
    broker.stop_cleanly();
}

#[test]
fn an_unreachable_broker_is_reported_as_such() {
    // A port that nothing listens on: bind one, then free it.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let bootstrap = format!("127.0.0.1:{port}");
    for args in [&["topic", "list"][..], &["group", "list"]] {
        let mut args = args.to_vec();
        args.extend(["--timeout", "2s"]);
        let out = run_at(&bootstrap, &args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("cannot reach a broker"), "{err}");
        assert!(err.contains(&bootstrap), "{err}");
    }
}

#[test]
fn group_describe_shows_committed_offsets_and_lag() {
    let broker = Broker::start(&[]);
    ok(&broker, &["topic", "create", "events", "-p", "2"]);
    produce(&broker, "events", &[10, 4]);
    commit(&broker, "billing", &[("events", 0, 7), ("events", 1, 4)]);

    let d = json(&broker, &["group", "describe", "billing"]);
    assert_eq!(d["group"], "billing");
    assert_eq!(d["state"], "Empty");
    assert_eq!(d["members"].as_array().map(Vec::len), Some(0));
    let partitions = d["partitions"].as_array().expect("partitions");
    assert_eq!(partitions.len(), 2, "{d:#}");
    assert_eq!(partitions[0]["topic"], "events");
    assert_eq!(partitions[0]["partition"], 0);
    assert_eq!(partitions[0]["committed_offset"], 7);
    assert_eq!(partitions[0]["log_end_offset"], 10);
    assert_eq!(partitions[0]["lag"], 3);
    assert_eq!(partitions[1]["committed_offset"], 4);
    assert_eq!(partitions[1]["lag"], 0);
    assert_eq!(d["total_lag"], 3);
    let table = ok(&broker, &["group", "describe", "billing"]);
    assert!(table.contains("LAG"), "{table}");
    assert!(table.contains("Total lag: 3"), "{table}");

    let err = fails(&broker, &["group", "describe", "nobody"], 1);
    assert!(err.contains("GROUP_ID_NOT_FOUND"), "{err}");
    broker.stop_cleanly();
}

#[test]
fn groups_are_listed_and_deleted() {
    let broker = Broker::start(&[]);
    ok(&broker, &["topic", "create", "events", "-p", "1"]);
    commit(&broker, "a", &[("events", 0, 0)]);
    commit(&broker, "b", &[("events", 0, 0)]);
    let list = json(&broker, &["group", "list"]);
    let groups: Vec<(&str, &str)> = list["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["group"].as_str().unwrap_or(""),
                g["state"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(groups, [("a", "Empty"), ("b", "Empty")]);
    let table = ok(&broker, &["group", "list"]);
    assert!(table.lines().any(|l| l.starts_with("a ")), "{table}");

    let out = ok(&broker, &["group", "delete", "a"]);
    assert!(out.contains("deleted group a"), "{out}");
    let list = json(&broker, &["group", "list"]);
    assert_eq!(list["groups"].as_array().map(Vec::len), Some(1), "{list:#}");
    assert_eq!(list["groups"][0]["group"], "b");
    assert!(committed(&broker, "a").is_empty(), "offsets went too");

    let err = fails(&broker, &["group", "delete", "a"], 1);
    assert!(err.contains("GROUP_ID_NOT_FOUND"), "{err}");
    broker.stop_cleanly();
}

#[test]
fn reset_offsets_is_a_dry_run_unless_executed() {
    let broker = Broker::start(&[]);
    ok(&broker, &["topic", "create", "events", "-p", "2"]);
    produce(&broker, "events", &[10, 6]);
    commit(&broker, "g", &[("events", 0, 2), ("events", 1, 3)]);
    let reset = ["group", "reset-offsets", "g", "--topic", "events"];
    let args = |extra: &[&'static str]| -> Vec<&str> {
        let mut a = reset.to_vec();
        a.extend(extra);
        a
    };

    let dry = json(&broker, &args(&["--to-latest"]));
    assert_eq!(dry["executed"], false);
    let rows = dry["partitions"].as_array().expect("partitions");
    assert_eq!(rows[0]["current_offset"], 2);
    assert_eq!(rows[0]["new_offset"], 10);
    assert_eq!(rows[1]["current_offset"], 3);
    assert_eq!(rows[1]["new_offset"], 6);
    let before = committed(&broker, "g");
    assert_eq!(
        before.get(&tp("events", 0)),
        Some(&2),
        "a dry run changes nothing"
    );
    let table = run(&broker, &args(&["--to-latest"]));
    assert!(text(&table.stdout).contains("NEW-OFFSET"));
    assert!(
        text(&table.stderr).contains("--execute"),
        "says how to apply"
    );

    let done = json(&broker, &args(&["--to-latest", "--execute"]));
    assert_eq!(done["executed"], true);
    let after = committed(&broker, "g");
    assert_eq!(after.get(&tp("events", 0)), Some(&10));
    assert_eq!(after.get(&tp("events", 1)), Some(&6));

    json(
        &broker,
        &args(&["--partition", "0", "--shift-by", "-4", "--execute"]),
    );
    let after = committed(&broker, "g");
    assert_eq!(after.get(&tp("events", 0)), Some(&6));
    assert_eq!(
        after.get(&tp("events", 1)),
        Some(&6),
        "other partitions stay"
    );

    json(&broker, &args(&["--to-earliest", "--execute"]));
    let after = committed(&broker, "g");
    assert_eq!(after.get(&tp("events", 0)), Some(&0));
    json(
        &broker,
        &args(&["--partition", "1", "--to-offset", "99", "--execute"]),
    );
    assert_eq!(
        committed(&broker, "g").get(&tp("events", 1)),
        Some(&6),
        "clamped to the log end"
    );
    // Every record was written just now: the epoch is before all of them.
    json(&broker, &args(&["--to-datetime", "0", "--execute"]));
    assert_eq!(committed(&broker, "g").get(&tp("events", 1)), Some(&0));
    broker.stop_cleanly();
}

fn subscription(topic: &str) -> Bytes {
    let mut sub = ConsumerProtocolSubscription::default();
    sub.topics = vec![s(topic)];
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    sub.encode(&mut buf, 0).expect("encode subscription");
    buf.freeze()
}

/// A member joins `group` (JoinGroup v3: no MEMBER_ID_REQUIRED round) and stays until the
/// session times out; returns the join response.
fn join(client: &mut Client, group: &str, topic: &str) -> JoinGroupResponse {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = subscription(topic);
    let mut req = JoinGroupRequest::default();
    req.group_id = GroupId(s(group));
    req.session_timeout_ms = 30_000;
    req.rebalance_timeout_ms = 5_000;
    req.member_id = s("");
    req.protocol_type = s("consumer");
    req.protocols = vec![p];
    // The coordinator may still be loading its offsets partition right after start.
    for _ in 0..100 {
        let resp: JoinGroupResponse = client.call(ApiKey::JoinGroup, 3, &req);
        let loading = [
            ResponseError::CoordinatorLoadInProgress.code(),
            ResponseError::CoordinatorNotAvailable.code(),
            ResponseError::NotCoordinator.code(),
        ];
        if !loading.contains(&resp.error_code) {
            return resp;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the coordinator of {group} never became available");
}

/// The leader's SyncGroup (v3), assigning itself `partitions` of `topic`.
fn sync_alone(
    client: &mut Client,
    group: &str,
    joined: &JoinGroupResponse,
    topic: &str,
    partitions: Vec<i32>,
) {
    let mut assigned = AssignedPartitions::default();
    assigned.topic = topic_name(topic);
    assigned.partitions = partitions;
    let mut assignment = ConsumerProtocolAssignment::default();
    assignment.assigned_partitions = vec![assigned];
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    assignment.encode(&mut buf, 0).expect("encode assignment");
    let mut a = SyncGroupRequestAssignment::default();
    a.member_id = joined.member_id.clone();
    a.assignment = buf.freeze();
    let mut req = SyncGroupRequest::default();
    req.group_id = GroupId(s(group));
    req.generation_id = joined.generation_id;
    req.member_id = joined.member_id.clone();
    req.assignments = vec![a];
    let resp: SyncGroupResponse = client.call(ApiKey::SyncGroup, 3, &req);
    assert_eq!(resp.error_code, 0, "sync");
}

#[test]
fn reset_offsets_refuses_while_the_group_has_members() {
    let broker = Broker::start(&[]);
    ok(&broker, &["topic", "create", "events", "-p", "1"]);
    let mut client = broker.client();
    let joined = join(&mut client, "busy", "events");
    assert_eq!(joined.error_code, 0, "join");

    sync_alone(&mut client, "busy", &joined, "events", vec![0]);

    let d = json(&broker, &["group", "describe", "busy"]);
    assert_eq!(d["state"], "Stable", "{d:#}");
    assert_eq!(d["members"].as_array().map(Vec::len), Some(1), "{d:#}");
    let member = &d["members"][0];
    assert_eq!(member["client_id"], "ringbroker-test");
    assert_eq!(member["assignment"][0]["topic"], "events");
    assert_eq!(member["assignment"][0]["partitions"][0], 0);
    // Assigned but never committed: no offset, no lag, and the member named.
    assert_eq!(d["partitions"][0]["committed_offset"], Value::Null);
    assert_eq!(d["partitions"][0]["lag"], Value::Null);
    assert_eq!(d["partitions"][0]["member_id"], member["member_id"]);
    for extra in [&[][..], &["--execute"]] {
        let mut args = vec!["group", "reset-offsets", "busy", "--topic", "events"];
        args.push("--to-earliest");
        args.extend(extra);
        let err = fails(&broker, &args, 1);
        assert!(err.contains("active member"), "{err}");
        assert!(err.contains("stop its consumers"), "{err}");
    }
    let err = fails(&broker, &["group", "delete", "busy"], 1);
    assert!(err.contains("NON_EMPTY_GROUP"), "{err}");
    broker.stop_cleanly();
}

/// The admin calls the CLI does not use yet: broker configs and OffsetDelete.
#[test]
fn broker_configs_and_offset_delete_through_the_library() {
    use ringbroker::client::admin::{self, ConfigResource};
    let broker = Broker::start(&[]);
    ok(&broker, &["topic", "create", "events", "-p", "2"]);
    let c = cluster(&broker);
    let configs = admin::describe_configs(&c, &ConfigResource::Broker(0)).expect("broker configs");
    assert!(
        configs.iter().any(|e| e.name == "log.retention.ms"),
        "{configs:?}"
    );

    commit(&broker, "g", &[("events", 0, 1), ("events", 1, 1)]);
    let results = admin::delete_offsets(&c, "g", &[tp("events", 0)]).expect("offset delete");
    assert_eq!(results.len(), 1);
    assert!(results[0].1.is_ok(), "{results:?}");
    let left: Vec<TopicPartition> = committed(&broker, "g").into_keys().collect();
    assert_eq!(left, [tp("events", 1)]);
    broker.stop_cleanly();
}
