//! Data-directory compatibility (issue 31): a data directory written by an earlier release
//! opens with the code under test with every topic, partition, config, record and committed
//! offset intact.
//!
//! `tests/fixtures/datadir-single-<commit>.tar.gz` is the data directory of a single-node
//! broker built from `<commit>`, stopped cleanly (SIGTERM); `datadir-single-<commit>.json` beside
//! it is what that broker answered just before it stopped (the manifest). The test unpacks every
//! such fixture into a temp dir, starts the broker under test on it and checks, against the
//! manifest: the topics (names, ids, partition counts; the deleted one stays deleted), the
//! topics' dynamic configs, each partition's log start and end offsets, a digest of every record
//! (offset, timestamp, key, value, headers, and its batch's codec and producer fields), the
//! groups' committed offsets and their metadata, the idempotent producer's state (its last batch
//! resent is a duplicate, a gap is refused) and that a new producer id is not one handed out
//! before. Then it produces more, commits, restarts once more (with one shard more, so that
//! partitions and groups move between shards) and checks that everything is still there.
//!
//! `datadir-cluster-<commit>.tar.gz` holds the data directories of a three-node cluster
//! (controller and broker on each: the metadata quorum's log, `meta.properties`, replicated
//! partitions at RF 3): the nodes reopen on the controller ports they were written with (the
//! quorum keeps its voters' addresses in its log), and the replicas, the cluster id, the topics,
//! configs, records and committed offsets are checked the same way, then a record more on every
//! partition and a restart of the three.
//!
//! Regenerate (adds a fixture named after the current commit; never replace an old one):
//!
//! ```sh
//! cargo test --test datadir_compat -- --ignored --nocapture write_single_node_fixture
//! cargo test --test datadir_compat -- --ignored --nocapture write_cluster_fixture
//! ```
//!
//! The generator runs today's broker binary (the one cargo builds for this test), creates the
//! topics, records, producer and groups below, stops it with SIGTERM and packs its data
//! directory (docs/testing.md, "Data-directory fixtures").

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResponse;
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::IncrementalAlterConfigsResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{ApiKey, GroupId, ProducerId};
use kafka_protocol::ResponseError;
use ringbroker::client::compression::compress_batch;
use ringbroker::group::api::offsets_partition_for;
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::decompressed_records::decode_records_decompressed;
use ringbroker::protocol::record_batch::{BatchHeader, Compression};
use serde::{Deserialize, Serialize};

mod broker;
use broker::cluster;
use broker::{
    fetch_request, join_group_request, s, topic_name, until_coordinator_ready, Broker, Client,
};

#[path = "datadir_compat/generate.rs"]
mod generate;
#[path = "datadir_compat/manifest.rs"]
mod manifest;
#[path = "datadir_compat/observe.rs"]
mod observe;
#[path = "datadir_compat/tarball.rs"]
mod tarball;
use manifest::*;
use observe::*;
use tarball::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
const SINGLE_PREFIX: &str = "datadir-single-";

/// Broker settings of the generator, and of the broker under test (from the manifest).
const SETTINGS: &[&str] = &[
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=500",
    // A small offsets topic keeps the fixture small.
    "offsets.topic.num.partitions=3",
];

/// For the broker under test only: the fixture's producer was last active when the fixture was
/// written, and Kafka's rule (and ringbroker's) forgets a producer idle for a day, its
/// snapshot's last activity included. A frozen fixture needs a longer memory.
const KEEP_PRODUCERS: &str = "producer.id.expiration.ms=3153600000000";

/// `DYNAMIC_TOPIC_CONFIG` in DescribeConfigs' `config_source`.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const TOPIC_RESOURCE: i8 = 2;

/// The timestamp of the records the generator writes.
const TS: i64 = 1_700_000_000_000;

// ---------------------------------------------------------------------------------------------
// The check
// ---------------------------------------------------------------------------------------------

/// Every `datadir-single-*.tar.gz` under tests/fixtures with its manifest.
fn single_node_fixtures() -> Vec<(PathBuf, Manifest)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(FIXTURES).expect("tests/fixtures") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let Some(stem) = name
            .strip_prefix(SINGLE_PREFIX)
            .and_then(|n| n.strip_suffix(".tar.gz"))
        else {
            continue;
        };
        let json = Path::new(FIXTURES).join(format!("{SINGLE_PREFIX}{stem}.json"));
        let text =
            std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{}: {e}", json.display()));
        let manifest: Manifest = serde_json::from_str(&text).expect("a manifest");
        out.push((path, manifest));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn single_node_data_dirs_of_earlier_releases_open_intact() {
    let fixtures = single_node_fixtures();
    assert!(!fixtures.is_empty(), "no fixture under {FIXTURES}");
    for (tarball, manifest) in fixtures {
        check_single_node_fixture(&tarball, &manifest);
    }
}

fn check_single_node_fixture(tarball: &Path, manifest: &Manifest) {
    let what = tarball.file_name().unwrap().to_string_lossy().to_string();
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    unpack(tarball, &data);
    let mut settings: Vec<&str> = manifest.settings.iter().map(|s| s.as_str()).collect();
    settings.push(KEEP_PRODUCERS);
    let mut broker = Broker::start_with_data_dir(Some(data.clone()), &settings);
    if manifest.shards != 2 {
        // The harness starts 2 shards; a fixture of another count reopens with its own.
        broker.set_shards(manifest.shards);
        broker.restart();
    }

    let route = Route {
        nodes: vec![broker.addr],
    };
    check_against(
        &what,
        &route,
        &manifest.deleted_topics,
        &manifest.topics,
        &manifest.groups,
    );
    let mut c = broker.client();
    check_producers(&what, &mut c, manifest);

    // The directory stays usable: more records, another commit, and a restart.
    let mut topics = manifest.topics.clone();
    let mut groups = manifest.groups.clone();
    for (name, t) in topics.iter_mut().filter(|(_, t)| !t.internal) {
        for p in &mut t.partitions {
            let v = format!("after the upgrade {name}-{}", p.partition);
            let key = format!("k-{name}-{}", p.partition);
            let base = produce_ok(
                &mut c,
                name,
                p.partition,
                batch_of(
                    &[(Some(key.as_bytes()), Some(v.as_bytes()), TS, vec![])],
                    Compression::None,
                ),
            );
            assert_eq!(
                base, p.log_end,
                "{what}: {name}-{}: appended at",
                p.partition
            );
            p.log_end += 1;
            p.records = p.records.map(|r| r + 1);
            p.digest = None;
            p.codecs = None;
        }
    }
    commit(&mut c, "standalone", -1, "", &[("empty", 1, 1, "after")]);
    // One record in the group's partition of the offsets topic.
    let offsets = topics
        .get_mut("__consumer_offsets")
        .expect("the offsets topic");
    let at = offsets_partition_for("standalone", offsets.partitions.len() as i32);
    offsets.partitions[at as usize].log_end += 1;
    groups
        .get_mut("standalone")
        .expect("the standalone group")
        .insert(
            "empty/1".to_string(),
            Committed {
                offset: 1,
                leader_epoch: -1,
                metadata: Some("after".to_string()),
            },
        );
    drop(c);
    // With another shard count, partitions and groups move to other shards.
    broker.set_shards(manifest.shards + 1);
    broker.restart();
    let route = Route {
        nodes: vec![broker.addr],
    };
    check_against(&what, &route, &manifest.deleted_topics, &topics, &groups);
    broker.stop_cleanly();
}

/// Checks what the broker answers against `topics` and `groups` (a `None` digest: records
/// counted only) and the `deleted` topics.
fn check_against(
    what: &str,
    route: &Route,
    deleted: &[String],
    topics: &BTreeMap<String, TopicManifest>,
    groups: &BTreeMap<String, BTreeMap<String, Committed>>,
) {
    let mut c = route.any();
    let seen = all_topics(&mut c);
    let names: Vec<&String> = seen.keys().collect();
    let expected: Vec<&String> = topics.keys().collect();
    assert_eq!(names, expected, "{what}: the topics");
    for gone in deleted {
        assert_eq!(
            c.topic_metadata(gone).0,
            ResponseError::UnknownTopicOrPartition.code(),
            "{what}: deleted topic {gone} came back"
        );
    }
    for (name, t) in topics {
        let (id, internal, count) = &seen[name];
        assert_eq!(
            (id, *internal, *count),
            (&t.id, t.internal, t.partitions.len()),
            "{what}: {name}: topic id, internal, partition count"
        );
        if !t.internal {
            assert_eq!(
                dynamic_configs(&mut c, name),
                t.dynamic_configs,
                "{what}: {name}: configs with source DYNAMIC_TOPIC_CONFIG"
            );
        }
        for p in &t.partitions {
            let at = format!("{what}: {name}-{}", p.partition);
            let mut leader = route.leader(name, p.partition);
            let (start, end) = log_bounds(&mut leader, name, p.partition);
            if t.internal {
                // The coordinator's own records: it appends one when the session of a member
                // loaded from the log ends (~10 s after the start), but loses none.
                assert!(
                    start == p.log_start && end >= p.log_end,
                    "{at}: log offsets {start}..{end}, expected {}..(at least) {}",
                    p.log_start,
                    p.log_end
                );
                continue;
            }
            assert_eq!(
                (start, end),
                (p.log_start, p.log_end),
                "{at}: log start and end offsets"
            );
            let d = read_partition(&mut leader, name, p.partition, p.log_start, p.log_end);
            assert_eq!(Some(d.records), p.records, "{at}: records");
            if let Some(digest) = &p.digest {
                assert_eq!(&d.hex(), digest, "{at}: digest of the records");
            }
            if let Some(codecs) = &p.codecs {
                assert_eq!(&d.codecs, codecs, "{at}: codecs of the batches");
            }
        }
    }
    let listed = route.groups();
    let expected: Vec<&String> = groups.keys().collect();
    assert_eq!(
        listed.iter().collect::<Vec<_>>(),
        expected,
        "{what}: the groups"
    );
    for (group, offsets) in groups {
        assert_eq!(
            &committed_offsets(&mut route.coordinator(group), group),
            offsets,
            "{what}: offsets committed by {group}"
        );
    }
}

/// The idempotent producer's last batch resent is a duplicate (answered with its offset, not
/// written), a batch after a gap in its sequence is refused, and a new producer id is not one
/// handed out before.
fn check_producers(what: &str, c: &mut Client, manifest: &Manifest) {
    for (at, p) in &manifest.producers {
        let (topic, partition) = at.split_once('/').expect("topic/partition");
        let partition: i32 = partition.parse().expect("a partition");
        let (_, end) = log_bounds(c, topic, partition);
        let batch = idempotent_batch(
            p.producer_id,
            p.epoch,
            p.last_base_sequence,
            &p.last_values,
            p.last_timestamp,
        );
        let (code, base) = c.produce_records(9, -1, topic, partition, batch);
        assert_eq!(
            (code, base),
            (0, p.last_base_offset),
            "{what}: {at}: the producer's last batch resent is a duplicate"
        );
        assert_eq!(
            log_bounds(c, topic, partition).1,
            end,
            "{what}: {at}: a duplicate is not written"
        );
        let gap = p.last_base_sequence + p.last_count as i32 + 5;
        let batch = idempotent_batch(p.producer_id, p.epoch, gap, &["gap".into()], TS);
        let (code, _) = c.produce_records(9, -1, topic, partition, batch);
        assert_eq!(
            code,
            ResponseError::OutOfOrderSequenceNumber.code(),
            "{what}: {at}: a gap in the producer's sequence"
        );
    }
    let (fresh, _) = init_producer_id(c);
    assert!(
        fresh > manifest.highest_producer_id,
        "{what}: a new producer id ({fresh}) after {} was handed out",
        manifest.highest_producer_id
    );
}

// ---------------------------------------------------------------------------------------------
// A cluster node's data directory
// ---------------------------------------------------------------------------------------------

const CLUSTER_PREFIX: &str = "datadir-cluster-";

/// The controller listeners of the fixture's three nodes. They are fixed: the metadata quorum
/// keeps its voters' addresses in its log, and a voter reopened on other ports would call the
/// old ones. Below the ports the cluster tests take (`broker::cluster::free_ports`) and the
/// kernel's ephemeral range.
const CLUSTER_CONTROLLER_PORTS: [u16; 3] = [21191, 21192, 21193];

const CLUSTER_SETTINGS: &[&str] = &[
    "group.initial.rebalance.delay.ms=0",
    "offsets.topic.num.partitions=2",
];

/// Node settings: fixed controller ports, the Kafka listeners on free ports.
fn cluster_node_settings(controller_ports: &[u16], kafka_ports: &[u16]) -> Vec<Vec<String>> {
    let voters = (0..3)
        .map(|i| format!("{}@127.0.0.1:{}", i + 1, controller_ports[i]))
        .collect::<Vec<_>>()
        .join(",");
    (0..3)
        .map(|i| {
            let mut s =
                cluster::settings(i as i32 + 1, kafka_ports[i], controller_ports[i], &voters);
            s.extend(CLUSTER_SETTINGS.iter().map(|s| s.to_string()));
            s
        })
        .collect()
}

/// Holds the fixture's controller ports for this process: an exclusive lock on a file named
/// after them, taken (bounded wait) before the ports are used and released on drop, so that two
/// runs of this test on one machine (two worktrees, say) take turns.
struct PortsLock(#[allow(dead_code)] std::fs::File);

impl PortsLock {
    fn take(ports: &[u16]) -> PortsLock {
        use std::os::fd::AsRawFd;
        let path = std::env::temp_dir().join(format!(
            "ringbroker-datadir-compat-ports-{}.lock",
            ports
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("-")
        ));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .expect("the ports' lock file");
        for _ in 0..(2 * cluster::MAX_POLLS) {
            // SAFETY: flock(2) on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                wait_ports_free(ports);
                return PortsLock(file);
            }
            std::thread::sleep(cluster::POLL);
        }
        panic!("{} stays locked by another run", path.display());
    }
}

/// Waits (bounded) until `ports` can be bound: another process may hold one for a moment.
fn wait_ports_free(ports: &[u16]) {
    for _ in 0..cluster::MAX_POLLS {
        if ports
            .iter()
            .all(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        {
            return;
        }
        std::thread::sleep(cluster::POLL);
    }
    panic!("the fixture's controller ports {ports:?} stay taken");
}

/// Every partition of every topic (internal ones too) led, with all three replicas in sync,
/// as every node tells it; the replicas by topic.
fn wait_all_led(nodes: &[cluster::Node]) -> BTreeMap<String, Vec<Vec<i32>>> {
    let mut last = None;
    for _ in 0..cluster::MAX_POLLS {
        let seen: Vec<Option<MetadataResponse>> = nodes
            .iter()
            .map(|n| {
                std::net::TcpStream::connect_timeout(&n.addr, cluster::POLL).ok()?;
                let mut req = MetadataRequest::default();
                req.topics = None;
                Some(Client::connect(n.addr).call(ApiKey::Metadata, 12, &req))
            })
            .collect();
        if let Some(Some(first)) = seen.first() {
            let ok = first.brokers.len() == 3
                && first.topics.iter().all(|t| {
                    t.error_code == 0
                        && t.partitions.iter().all(|p| {
                            p.error_code == 0 && p.leader_id.0 > 0 && p.isr_nodes.len() == 3
                        })
                });
            let replicas: BTreeMap<String, Vec<Vec<i32>>> = first
                .topics
                .iter()
                .map(|t| {
                    let mut ps: Vec<_> = t.partitions.iter().collect();
                    ps.sort_by_key(|p| p.partition_index);
                    (
                        t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                        ps.iter()
                            .map(|p| p.replica_nodes.iter().map(|b| b.0).collect())
                            .collect(),
                    )
                })
                .collect();
            let agreed = seen.iter().all(|m| {
                m.as_ref()
                    .is_some_and(|m| m.topics.len() == first.topics.len() && m.brokers.len() == 3)
            });
            if ok && agreed {
                return replicas;
            }
            last = Some(replicas);
        }
        std::thread::sleep(cluster::POLL);
    }
    panic!("not every partition led with 3 in sync; last seen replicas {last:?}");
}

/// SIGTERM to the three at once (a node stopped alone last would wait for a quorum that is
/// gone), then a bounded wait for each; every one must exit 0.
fn stop_all(nodes: &mut [cluster::Node]) {
    for n in nodes.iter() {
        n.signal(libc::SIGTERM);
    }
    for n in nodes.iter_mut() {
        let status = n.wait_exit();
        assert!(
            status.is_some_and(|s| s.success()),
            "node {} stopped with {status:?}:\n{}",
            n.id,
            n.log_tail()
        );
    }
}

fn cluster_id(route: &Route) -> String {
    let resp: MetadataResponse =
        route
            .any()
            .call(ApiKey::Metadata, 12, &MetadataRequest::default());
    resp.cluster_id.map(|c| c.to_string()).unwrap_or_default()
}

#[test]
fn cluster_data_dirs_of_earlier_releases_open_intact() {
    let mut found = 0;
    for entry in std::fs::read_dir(FIXTURES).expect("tests/fixtures") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let Some(stem) = name
            .strip_prefix(CLUSTER_PREFIX)
            .and_then(|n| n.strip_suffix(".tar.gz"))
        else {
            continue;
        };
        let json = Path::new(FIXTURES).join(format!("{CLUSTER_PREFIX}{stem}.json"));
        let text =
            std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{}: {e}", json.display()));
        let manifest: ClusterManifest = serde_json::from_str(&text).expect("a manifest");
        check_cluster_fixture(&path, &manifest);
        found += 1;
    }
    assert!(found > 0, "no cluster fixture under {FIXTURES}");
}

fn check_cluster_fixture(tarball: &Path, manifest: &ClusterManifest) {
    let what = tarball.file_name().unwrap().to_string_lossy().to_string();
    let root = tempfile::tempdir().expect("tempdir");
    unpack(tarball, root.path());
    let _ports = PortsLock::take(&manifest.controller_ports);
    let kafka_ports = cluster::free_ports(3);
    let mut settings = cluster_node_settings(&manifest.controller_ports, &kafka_ports);
    for s in &mut settings {
        s.retain(|x| !CLUSTER_SETTINGS.contains(&x.as_str()));
        s.extend(manifest.settings.iter().cloned());
    }
    let mut nodes: Vec<cluster::Node> = (0..3)
        .map(|i| cluster::start_node(root.path(), i as i32 + 1, &settings[i]))
        .collect();
    let replicas = wait_all_led(&nodes);
    assert_eq!(
        replicas, manifest.replicas,
        "{what}: the replicas of each partition"
    );
    let route = Route {
        nodes: nodes.iter().map(|n| n.addr).collect(),
    };
    assert_eq!(
        cluster_id(&route),
        manifest.cluster_id,
        "{what}: cluster id"
    );
    check_against(
        &what,
        &route,
        &manifest.deleted_topics,
        &manifest.topics,
        &manifest.groups,
    );
    // Still usable: a record more on every partition, at the end the manifest names, and all
    // of it there after a restart of the three.
    let mut expected = manifest.topics.clone();
    for (name, t) in expected.iter_mut().filter(|(_, t)| !t.internal) {
        for p in &mut t.partitions {
            // A key: a compacted topic refuses records without one.
            let base = produce_ok(
                &mut route.leader(name, p.partition),
                name,
                p.partition,
                batch_of(
                    &[(Some(b"k"), Some(b"after"), TS, vec![])],
                    Compression::None,
                ),
            );
            assert_eq!(
                base, p.log_end,
                "{what}: {name}-{}: appended at",
                p.partition
            );
            p.log_end += 1;
            p.records = p.records.map(|r| r + 1);
            p.digest = None;
            p.codecs = None;
        }
    }
    stop_all(&mut nodes);
    let mut nodes: Vec<cluster::Node> = (0..3)
        .map(|i| cluster::start_node(root.path(), i as i32 + 1, &settings[i]))
        .collect();
    wait_all_led(&nodes);
    let route = Route {
        nodes: nodes.iter().map(|n| n.addr).collect(),
    };
    check_against(
        &what,
        &route,
        &manifest.deleted_topics,
        &expected,
        &manifest.groups,
    );
    stop_all(&mut nodes);
}
