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

/// What the broker that wrote a fixture answered just before it stopped.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Manifest {
    /// The commit the writing broker was built from.
    written_by: String,
    /// How it was written (the command that regenerates a fixture).
    generator: String,
    /// `--shards` and `--set` of the writing broker (the broker under test gets the same).
    shards: usize,
    settings: Vec<String>,
    /// Every topic, internal ones included, by name.
    topics: BTreeMap<String, TopicManifest>,
    /// Topics deleted before the stop: they must not come back.
    deleted_topics: Vec<String>,
    /// Committed offsets by group, then `topic/partition`.
    groups: BTreeMap<String, BTreeMap<String, Committed>>,
    /// The idempotent producers, by `topic/partition`.
    producers: BTreeMap<String, ProducerManifest>,
    /// The highest producer id InitProducerId handed out.
    highest_producer_id: i64,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
struct TopicManifest {
    id: String,
    internal: bool,
    /// The configs DescribeConfigs reports with source DYNAMIC_TOPIC_CONFIG.
    dynamic_configs: BTreeMap<String, String>,
    partitions: Vec<PartitionManifest>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
struct PartitionManifest {
    partition: i32,
    /// ListOffsets earliest and latest.
    log_start: i64,
    log_end: i64,
    /// Records at or past `log_start`, and their digest (see [`RecordDigest`]). Not recorded for
    /// internal topics (their records are the broker's own and may be rewritten).
    records: Option<u64>,
    digest: Option<String>,
    /// The codecs of the batches read, in order of first appearance.
    codecs: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
struct Committed {
    offset: i64,
    leader_epoch: i32,
    metadata: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Clone)]
struct ProducerManifest {
    producer_id: i64,
    epoch: i16,
    /// The last batch it sent: its first sequence, record count and base offset.
    last_base_sequence: i32,
    last_count: usize,
    last_base_offset: i64,
    /// Its records' values (the batch is rebuilt from them to resend it).
    last_values: Vec<String>,
    last_timestamp: i64,
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// Metadata v12 of every topic: name -> (id, internal, partition count, error).
fn all_topics(c: &mut Client) -> BTreeMap<String, (String, bool, usize)> {
    let mut req = MetadataRequest::default();
    req.topics = None;
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    resp.topics
        .iter()
        .map(|t| {
            assert_eq!(t.error_code, 0, "Metadata of {:?}", t.name);
            let name = t.name.as_ref().expect("a name").0.to_string();
            let mut indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
            indexes.sort_unstable();
            assert_eq!(
                indexes,
                (0..indexes.len() as i32).collect::<Vec<_>>(),
                "partitions of {name}"
            );
            for p in &t.partitions {
                assert_eq!(p.error_code, 0, "{name}-{}: {:?}", p.partition_index, p);
            }
            (
                name,
                (t.topic_id.to_string(), t.is_internal, t.partitions.len()),
            )
        })
        .collect()
}

/// DescribeConfigs v4 of a topic: the entries whose source is DYNAMIC_TOPIC_CONFIG.
fn dynamic_configs(c: &mut Client, topic: &str) -> BTreeMap<String, String> {
    let mut r = DescribeConfigsResource::default();
    r.resource_type = TOPIC_RESOURCE;
    r.resource_name = s(topic);
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![r];
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    let result = &resp.results[0];
    assert_eq!(
        result.error_code, 0,
        "DescribeConfigs {topic}: {:?}",
        result.error_message
    );
    result
        .configs
        .iter()
        .filter(|e| e.config_source == DYNAMIC_TOPIC_CONFIG)
        .map(|e| {
            (
                e.name.to_string(),
                e.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

fn incremental_set(c: &mut Client, topic: &str, name: &str, value: &str) {
    let mut cfg = AlterableConfig::default();
    cfg.name = s(name);
    cfg.config_operation = 0;
    cfg.value = Some(s(value));
    let mut r = AlterConfigsResource::default();
    r.resource_type = TOPIC_RESOURCE;
    r.resource_name = s(topic);
    r.configs = vec![cfg];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let r = &resp.responses[0];
    assert_eq!(
        r.error_code, 0,
        "{topic} {name}={value}: {:?}",
        r.error_message
    );
}

/// ListOffsets earliest and latest of one partition.
fn log_bounds(c: &mut Client, topic: &str, partition: i32) -> (i64, i64) {
    let (e1, start) = c.list_offset(topic, partition, -2);
    let (e2, end) = c.list_offset(topic, partition, -1);
    assert_eq!((e1, e2), (0, 0), "ListOffsets {topic}-{partition}");
    (start, end)
}

/// Builds the digest of a partition's records from `start` to `end` (Fetch v11).
fn read_partition(
    c: &mut Client,
    topic: &str,
    partition: i32,
    start: i64,
    end: i64,
) -> RecordDigest {
    let mut digest = RecordDigest::default();
    let mut next = start;
    let mut empty_reads = 0;
    while next < end {
        let mut req = fetch_request(topic, &[(partition, next)], 1 << 20, 1 << 20);
        req.max_wait_ms = 0;
        let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &req);
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "Fetch {topic}-{partition} at {next}");
        assert_eq!(
            (p.log_start_offset, p.high_watermark),
            (start, end),
            "Fetch {topic}-{partition}: log start and high watermark"
        );
        let records = p.records.clone().unwrap_or_default();
        let before = next;
        let mut rest: &[u8] = &records;
        while let Ok(h) = BatchHeader::parse(rest) {
            if h.total_len() > rest.len() {
                break;
            }
            let batch = &rest[..h.total_len()];
            digest.batch(&h, batch, next);
            next = next.max(h.next_offset());
            rest = &rest[h.total_len()..];
        }
        if next == before {
            empty_reads += 1;
            assert!(
                empty_reads < 50,
                "{topic}-{partition}: no batch at {next} (end {end})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert_eq!(next, end, "{topic}-{partition}: read past the log end");
    digest
}

/// A CRC32C over every record at or past the read's start: offset, timestamp, key, value,
/// headers, and its batch's codec, producer id, epoch and base sequence.
#[derive(Default)]
struct RecordDigest {
    crc: u32,
    records: u64,
    codecs: Vec<String>,
}

impl RecordDigest {
    fn batch(&mut self, h: &BatchHeader, batch: &[u8], from: i64) {
        let codec = format!("{:?}", h.compression().expect("a known codec"));
        if !self.codecs.contains(&codec) {
            self.codecs.push(codec.clone());
        }
        let records = decode_records_decompressed(batch, 64 << 20).expect("decodable records");
        for r in records.iter().filter(|r| r.offset >= from) {
            let mut bytes = Vec::new();
            bytes.extend_from_slice(codec.as_bytes());
            bytes.extend_from_slice(&h.producer_id.to_be_bytes());
            bytes.extend_from_slice(&h.producer_epoch.to_be_bytes());
            bytes.extend_from_slice(&h.base_sequence.to_be_bytes());
            bytes.extend_from_slice(&r.offset.to_be_bytes());
            bytes.extend_from_slice(&r.timestamp.to_be_bytes());
            let mut field = |b: &Option<Vec<u8>>| match b {
                None => bytes.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(b) => {
                    bytes.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    bytes.extend_from_slice(b);
                }
            };
            field(&r.key);
            field(&r.value);
            for (k, v) in &r.headers {
                field(&Some(k.as_bytes().to_vec()));
                field(v);
            }
            self.crc = crc32c::crc32c_append(self.crc, &bytes);
            self.records += 1;
        }
    }

    fn hex(&self) -> String {
        format!("{:08x}", self.crc)
    }
}

/// OffsetFetch v7 of a group, every topic: `topic/partition` -> committed.
fn committed_offsets(c: &mut Client, group: &str) -> BTreeMap<String, Committed> {
    let resp: OffsetFetchResponse = until_coordinator_ready(|| {
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(s(group));
        req.topics = None;
        let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req);
        if resp.error_code != 0 {
            return Err(resp.error_code);
        }
        Ok(resp)
    });
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            assert_eq!(p.error_code, 0, "OffsetFetch {group} {:?}", t.name);
            out.insert(
                format!("{}/{}", t.name.0, p.partition_index),
                Committed {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.metadata.as_ref().map(|m| m.to_string()),
                },
            );
        }
    }
    out
}

fn list_groups(c: &mut Client) -> Vec<String> {
    let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    assert_eq!(resp.error_code, 0, "ListGroups");
    let mut groups: Vec<String> = resp
        .groups
        .iter()
        .map(|g| g.group_id.0.to_string())
        .collect();
    groups.sort();
    groups
}

/// OffsetCommit v8 of `offsets` (topic, partition, offset, metadata) as `member` of
/// `generation` (-1 and "": outside group management).
fn commit(
    c: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    offsets: &[(&str, i32, i64, &str)],
) {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset, metadata) in offsets {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = *partition;
        p.committed_offset = *offset;
        p.committed_leader_epoch = -1;
        p.committed_metadata = Some(s(metadata));
        match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
            Some(t) => t.partitions.push(p),
            None => {
                let mut t = OffsetCommitRequestTopic::default();
                t.name = topic_name(topic);
                t.partitions = vec![p];
                topics.push(t);
            }
        }
    }
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s(group));
    req.generation_id_or_member_epoch = generation;
    req.member_id = s(member);
    req.topics = topics;
    until_coordinator_ready(|| {
        let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
        match resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.error_code != 0)
        {
            Some(p) => Err(p.error_code),
            None => Ok(()),
        }
    });
}

/// InitProducerId v4 without a transactional id: (producer id, epoch).
fn init_producer_id(c: &mut Client) -> (i64, i16) {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    let resp: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!(resp.error_code, 0, "InitProducerId");
    (resp.producer_id.0, resp.producer_epoch)
}

/// An uncompressed batch: (key, value, timestamp, headers) per record.
type Rec<'a> = (
    Option<&'a [u8]>,
    Option<&'a [u8]>,
    i64,
    Vec<(&'a str, &'a [u8])>,
);

fn batch_of(records: &[Rec], codec: Compression) -> Bytes {
    let mut b = BatchBuilder::new(records[0].2);
    for (k, v, ts, h) in records {
        b.push(*k, *v, *ts, h);
    }
    compress_batch(b.build(), codec).expect("compress")
}

fn produce_ok(c: &mut Client, topic: &str, partition: i32, batch: Bytes) -> i64 {
    let (code, base) = c.produce_records(9, -1, topic, partition, batch);
    assert_eq!(code, 0, "produce to {topic}-{partition}");
    base
}

fn idempotent_batch(pid: i64, epoch: i16, seq: i32, values: &[String], ts: i64) -> Bytes {
    let mut b = BatchBuilder::new(ts).producer(pid, epoch, seq);
    for (i, v) in values.iter().enumerate() {
        b.push(
            Some(format!("idem-{}", seq + i as i32).as_bytes()),
            Some(v.as_bytes()),
            ts + i as i64,
            &[],
        );
    }
    b.build()
}

/// Where requests go: the broker's nodes; partition requests to the partition's leader, group
/// requests to the group's coordinator (one node: itself).
struct Route {
    nodes: Vec<SocketAddr>,
}

impl Route {
    fn any(&self) -> Client {
        Client::connect(self.nodes[0])
    }

    /// A connection to the leader of `topic`-`partition`, as Metadata names it.
    fn leader(&self, topic: &str, partition: i32) -> Client {
        let mut t = MetadataRequestTopic::default();
        t.name = Some(topic_name(topic));
        let mut req = MetadataRequest::default();
        req.topics = Some(vec![t]);
        let resp: MetadataResponse = self.any().call(ApiKey::Metadata, 12, &req);
        let p = resp.topics[0]
            .partitions
            .iter()
            .find(|p| p.partition_index == partition)
            .unwrap_or_else(|| panic!("{topic}-{partition} in Metadata"));
        let b = resp
            .brokers
            .iter()
            .find(|b| b.node_id == p.leader_id)
            .unwrap_or_else(|| {
                panic!(
                    "{topic}-{partition}: no endpoint of leader {:?}",
                    p.leader_id
                )
            });
        Client::connect(
            format!("{}:{}", b.host, b.port)
                .parse()
                .expect("a socket address"),
        )
    }

    /// A connection to the coordinator of `group` (FindCoordinator v4).
    fn coordinator(&self, group: &str) -> Client {
        let mut c = self.any();
        let addr: SocketAddr = until_coordinator_ready(|| {
            let mut req = FindCoordinatorRequest::default();
            req.key_type = 0;
            req.coordinator_keys = vec![s(group)];
            let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &req);
            let found = &resp.coordinators[0];
            if found.error_code != 0 {
                return Err(found.error_code);
            }
            Ok(format!("{}:{}", found.host, found.port)
                .parse()
                .expect("a socket address"))
        });
        Client::connect(addr)
    }

    /// The groups every node lists.
    fn groups(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .nodes
            .iter()
            .flat_map(|n| list_groups(&mut Client::connect(*n)))
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

// ---------------------------------------------------------------------------------------------
// What a broker answers about its data: the manifest's contents
// ---------------------------------------------------------------------------------------------

/// The topics part of a manifest, as the broker answers it now.
fn observe_topics(route: &Route) -> BTreeMap<String, TopicManifest> {
    let mut c = route.any();
    let mut out = BTreeMap::new();
    for (name, (id, internal, count)) in all_topics(&mut c) {
        let mut partitions = Vec::new();
        for p in 0..count as i32 {
            let mut leader = route.leader(&name, p);
            let (log_start, log_end) = log_bounds(&mut leader, &name, p);
            let (records, digest, codecs) = if internal {
                (None, None, None)
            } else {
                let d = read_partition(&mut leader, &name, p, log_start, log_end);
                (Some(d.records), Some(d.hex()), Some(d.codecs.clone()))
            };
            partitions.push(PartitionManifest {
                partition: p,
                log_start,
                log_end,
                records,
                digest,
                codecs,
            });
        }
        let dynamic_configs = if internal {
            BTreeMap::new()
        } else {
            dynamic_configs(&mut c, &name)
        };
        out.insert(
            name,
            TopicManifest {
                id,
                internal,
                dynamic_configs,
                partitions,
            },
        );
    }
    out
}

fn observe_groups(route: &Route) -> BTreeMap<String, BTreeMap<String, Committed>> {
    route
        .groups()
        .into_iter()
        .map(|g| {
            let offsets = committed_offsets(&mut route.coordinator(&g), &g);
            (g, offsets)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------------------------

const TS: i64 = 1_700_000_000_000;

/// Writes `tests/fixtures/datadir-single-<commit>.{tar.gz,json}` from today's broker.
#[test]
#[ignore = "writes a new fixture: run by hand when the on-disk format changes"]
fn write_single_node_fixture() {
    let head = git(&["rev-parse", "--short=7", "HEAD"]);
    // The broker is built from src/ (and the vendored glommio): changes elsewhere, this
    // test's own included, do not make another on-disk format.
    let source_changes = git(&["status", "--porcelain", "--", "src", "vendor"]);
    let described = if source_changes.is_empty() {
        git(&["rev-parse", "HEAD"])
    } else {
        format!(
            "{} with uncommitted changes to src/",
            git(&["rev-parse", "HEAD"])
        )
    };
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let broker = Broker::start_with_data_dir(Some(data.clone()), SETTINGS);
    let mut c = broker.client();

    // Topics: several partition counts, configs at creation, one altered later, one grown.
    c.create_topic("events", 4, &[]);
    c.create_topic(
        "compacted",
        2,
        &[
            ("cleanup.policy", "compact"),
            ("retention.ms", "-1"),
            ("max.message.bytes", "65536"),
            ("segment.bytes", "1024"),
            ("min.compaction.lag.ms", "3600000"),
        ],
    );
    c.create_topic("idem", 1, &[("message.timestamp.type", "LogAppendTime")]);
    c.create_topic("grown", 1, &[]);
    c.create_topic("empty", 2, &[]);
    c.create_topic("gone", 2, &[]);
    incremental_set(&mut c, "events", "retention.bytes", "1073741824");
    let (code, msg) = c.create_partitions("grown", 3, None, false);
    assert_eq!(code, 0, "CreatePartitions grown: {msg:?}");

    // events: every codec, keys (and a null key), values (and a null one), headers.
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for round in 0..3i64 {
        for p in 0..4i32 {
            let codec = codecs[(p as usize + round as usize) % codecs.len()];
            let keys: Vec<String> = (0..5).map(|i| format!("key-{p}-{round}-{i}")).collect();
            let values: Vec<String> = (0..5)
                .map(|i| format!("value {p}/{round}/{i} {}", "x".repeat(i * 7)))
                .collect();
            let recs: Vec<Rec> = (0..5)
                .map(|i| {
                    let key = (i != 3).then(|| keys[i].as_bytes());
                    let value = (i != 4).then(|| values[i].as_bytes());
                    let headers = if i % 2 == 0 {
                        vec![("trace", b"abc".as_slice()), ("n", keys[i].as_bytes())]
                    } else {
                        vec![]
                    };
                    (key, value, TS + round * 1000 + i as i64 * 3, headers)
                })
                .collect();
            produce_ok(&mut c, "events", p, batch_of(&recs, codec));
        }
    }
    // A log start moved by DeleteRecords, mid-batch.
    let (code, low) = c.delete_records("events", 1, 7);
    assert_eq!((code, low), (0, 7), "DeleteRecords events-1");

    // compacted: unique keys (the cleaner has nothing to remove), enough to roll segments.
    for p in 0..2i32 {
        for b in 0..6i64 {
            let keys: Vec<String> = (0..4).map(|i| format!("ck-{p}-{b}-{i}")).collect();
            let value = "c".repeat(200);
            let recs: Vec<Rec> = (0..4)
                .map(|i| {
                    (
                        Some(keys[i].as_bytes()),
                        Some(value.as_bytes()),
                        TS + b * 100 + i as i64,
                        vec![],
                    )
                })
                .collect();
            let codec = if b % 2 == 0 {
                Compression::None
            } else {
                Compression::Gzip
            };
            produce_ok(&mut c, "compacted", p, batch_of(&recs, codec));
        }
    }

    // grown: records in the old partition and the new ones.
    for p in 0..3 {
        let v = format!("grown {p}");
        produce_ok(
            &mut c,
            "grown",
            p,
            batch_of(&[(None, Some(v.as_bytes()), TS, vec![])], Compression::None),
        );
    }

    // idem: an idempotent producer's batches (and one of another producer).
    let (pid, epoch) = init_producer_id(&mut c);
    let mut producers = BTreeMap::new();
    let mut seq = 0;
    let mut last = None;
    for b in 0..4i64 {
        let values: Vec<String> = (0..3).map(|i| format!("idem {b}/{i}")).collect();
        let batch = idempotent_batch(pid, epoch, seq, &values, TS + b * 10);
        let base = produce_ok(&mut c, "idem", 0, batch);
        last = Some((seq, base, values.clone(), TS + b * 10));
        seq += values.len() as i32;
    }
    let (last_seq, last_base, last_values, last_ts) = last.expect("batches");
    producers.insert(
        "idem/0".to_string(),
        ProducerManifest {
            producer_id: pid,
            epoch,
            last_base_sequence: last_seq,
            last_count: last_values.len(),
            last_base_offset: last_base,
            last_values,
            last_timestamp: last_ts,
        },
    );
    let (other, other_epoch) = init_producer_id(&mut c);
    produce_ok(
        &mut c,
        "events",
        0,
        idempotent_batch(other, other_epoch, 0, &["other producer".to_string()], TS),
    );

    // gone: records, committed offsets, then deleted.
    produce_ok(
        &mut c,
        "gone",
        0,
        batch_of(&[(None, Some(b"soon gone"), TS, vec![])], Compression::None),
    );

    // Groups: a member of a real generation, and commits outside group management.
    let mut member = broker.client();
    let first: JoinGroupResponse = until_coordinator_ready(|| {
        let r: JoinGroupResponse =
            member.call(ApiKey::JoinGroup, 7, &join_group_request("consumers", ""));
        if r.error_code == ResponseError::MemberIdRequired.code() {
            Ok(r)
        } else {
            Err(r.error_code)
        }
    });
    let joined: JoinGroupResponse = member.call(
        ApiKey::JoinGroup,
        7,
        &join_group_request("consumers", &first.member_id),
    );
    assert_eq!(joined.error_code, 0, "JoinGroup");
    let member_id = joined.member_id.to_string();
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(s("consumers"));
    sync.generation_id = joined.generation_id;
    sync.member_id = s(&member_id);
    sync.protocol_type = Some(s("consumer"));
    sync.protocol_name = Some(s("range"));
    let mut a = SyncGroupRequestAssignment::default();
    a.member_id = s(&member_id);
    a.assignment = Bytes::from_static(b"all of events");
    sync.assignments = vec![a];
    let synced: SyncGroupResponse = member.call(ApiKey::SyncGroup, 5, &sync);
    assert_eq!(synced.error_code, 0, "SyncGroup");
    commit(
        &mut member,
        "consumers",
        joined.generation_id,
        &member_id,
        &[
            ("events", 0, 3, "first"),
            ("events", 1, 8, ""),
            ("events", 2, 5, "m2"),
        ],
    );
    // A later commit of the same partition wins.
    commit(
        &mut member,
        "consumers",
        joined.generation_id,
        &member_id,
        &[("events", 0, 11, "second"), ("events", 3, 15, "m3")],
    );
    commit(
        &mut c,
        "standalone",
        -1,
        "",
        &[
            ("compacted", 0, 10, "c0"),
            ("compacted", 1, 24, "c1"),
            ("idem", 0, 6, "{\"json\": true}"),
            ("grown", 2, 1, "new partition"),
        ],
    );
    commit(&mut c, "gone-readers", -1, "", &[("gone", 0, 1, "")]);
    let (code, _) = c.delete_topic(Some("gone"), uuid::Uuid::nil());
    assert_eq!(code, 0, "DeleteTopics gone");
    for _ in 0..100 {
        if c.topic_metadata("gone").0 == ResponseError::UnknownTopicOrPartition.code() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // What the broker answers now is the manifest.
    let route = Route {
        nodes: vec![broker.addr],
    };
    let manifest = Manifest {
        written_by: described,
        generator: "cargo test --test datadir_compat -- --ignored write_single_node_fixture"
            .to_string(),
        shards: 2,
        settings: SETTINGS.iter().map(|s| s.to_string()).collect(),
        topics: observe_topics(&route),
        deleted_topics: vec!["gone".to_string()],
        groups: observe_groups(&route),
        producers,
        highest_producer_id: pid.max(other),
    };
    assert!(!manifest.topics.contains_key("gone"));
    drop(member);
    drop(c);
    broker.stop_cleanly();

    std::fs::create_dir_all(FIXTURES).expect("fixtures dir");
    let name = format!("{SINGLE_PREFIX}{head}");
    let tarball = Path::new(FIXTURES).join(format!("{name}.tar.gz"));
    assert!(
        !tarball.exists(),
        "{} exists: a fixture is never replaced",
        tarball.display()
    );
    pack(&data, &tarball);
    let json = serde_json::to_string_pretty(&manifest).expect("manifest json");
    std::fs::write(
        Path::new(FIXTURES).join(format!("{name}.json")),
        json + "\n",
    )
    .expect("write the manifest");
    eprintln!(
        "wrote {} ({} bytes) and its manifest",
        tarball.display(),
        std::fs::metadata(&tarball).expect("tarball").len()
    );
}

fn git(args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// Packs `data` (paths relative to it, sorted, no owner or time) into a gzip'ed tarball.
fn pack(data: &Path, tarball: &Path) {
    let file = std::fs::File::create(tarball).expect("create the tarball");
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    let mut stack = vec![data.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            files.push(path);
        }
    }
    files.sort();
    for path in files {
        append(
            &mut tar,
            &path,
            path.strip_prefix(data).expect("under data"),
        );
    }
    tar.into_inner()
        .expect("finish the tar")
        .finish()
        .expect("finish the gzip");
}

// ---------------------------------------------------------------------------------------------
// The check
// ---------------------------------------------------------------------------------------------

fn unpack(tarball: &Path, into: &Path) {
    let file = std::fs::File::open(tarball).expect("open the fixture");
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    archive.set_preserve_mtime(false);
    archive.unpack(into).expect("unpack the fixture");
}

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

/// What the three nodes answered before they stopped.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct ClusterManifest {
    written_by: String,
    generator: String,
    /// Node i+1's controller listener; the fixture opens only on these.
    controller_ports: Vec<u16>,
    settings: Vec<String>,
    cluster_id: String,
    /// Each partition's replicas, by topic.
    replicas: BTreeMap<String, Vec<Vec<i32>>>,
    topics: BTreeMap<String, TopicManifest>,
    deleted_topics: Vec<String>,
    groups: BTreeMap<String, BTreeMap<String, Committed>>,
}

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

/// Writes `tests/fixtures/datadir-cluster-<commit>.{tar.gz,json}`: three nodes (controller and
/// broker each) of today's broker.
#[test]
#[ignore = "writes a new fixture: run by hand when the on-disk format changes"]
fn write_cluster_fixture() {
    let head = git(&["rev-parse", "--short=7", "HEAD"]);
    let root = tempfile::tempdir().expect("tempdir");
    let _ports = PortsLock::take(&CLUSTER_CONTROLLER_PORTS);
    let kafka_ports = cluster::free_ports(3);
    let settings = cluster_node_settings(&CLUSTER_CONTROLLER_PORTS, &kafka_ports);
    let mut nodes: Vec<cluster::Node> = (0..3)
        .map(|i| cluster::start_node(root.path(), i as i32 + 1, &settings[i]))
        .collect();
    cluster::wait_for(&nodes, &[0, 1, 2], "three brokers and a controller", |m| {
        cluster::broker_ids(m) == vec![1, 2, 3] && m.controller_id.0 > 0
    });
    let route = Route {
        nodes: nodes.iter().map(|n| n.addr).collect(),
    };
    let mut c = route.any();
    for (name, partitions, configs) in [
        ("orders", 3, vec![]),
        (
            "profiles",
            2,
            vec![
                ("cleanup.policy", "compact"),
                ("retention.ms", "-1"),
                ("segment.bytes", "1024"),
                ("max.message.bytes", "65536"),
            ],
        ),
        ("gone", 1, vec![]),
    ] {
        let r = c.try_create_replicated_topic(name, partitions, 3, &configs, false);
        assert_eq!(r.error_code, 0, "create {name}: {:?}", r.error_message);
    }
    wait_all_led(&nodes);
    let codecs = [Compression::None, Compression::Gzip, Compression::Zstd];
    for round in 0..4i64 {
        for (topic, partitions) in [("orders", 3), ("profiles", 2), ("gone", 1)] {
            for p in 0..partitions {
                let keys: Vec<String> =
                    (0..4).map(|i| format!("{topic}-{p}-{round}-{i}")).collect();
                let value = format!("{topic} value {}", "v".repeat(100));
                let recs: Vec<Rec> = (0..4)
                    .map(|i| {
                        (
                            Some(keys[i].as_bytes()),
                            Some(value.as_bytes()),
                            TS + round * 100 + i as i64,
                            vec![("h", keys[i].as_bytes())],
                        )
                    })
                    .collect();
                let codec = codecs[(round as usize + p as usize) % codecs.len()];
                produce_ok(
                    &mut route.leader(topic, p),
                    topic,
                    p,
                    batch_of(&recs, codec),
                );
            }
        }
    }
    let (code, low) = route.leader("orders", 2).delete_records("orders", 2, 5);
    assert_eq!((code, low), (0, 5), "DeleteRecords orders-2");
    commit(
        &mut route.coordinator("cluster-readers"),
        "cluster-readers",
        -1,
        "",
        &[
            ("orders", 0, 16, "o0"),
            ("orders", 2, 9, ""),
            ("profiles", 1, 12, "p1"),
        ],
    );
    commit(
        &mut route.coordinator("other-readers"),
        "other-readers",
        -1,
        "",
        &[("orders", 1, 4, "x")],
    );
    let (code, _) = c.delete_topic(Some("gone"), uuid::Uuid::nil());
    assert_eq!(code, 0, "DeleteTopics gone");
    cluster::wait_for(&nodes, &[0, 1, 2], "gone deleted everywhere", |m| {
        m.topics
            .iter()
            .all(|t| t.name.as_ref().is_none_or(|n| n.0.as_str() != "gone"))
    });
    let replicas = wait_all_led(&nodes);
    let manifest = ClusterManifest {
        written_by: git(&["rev-parse", "HEAD"]),
        generator: "cargo test --test datadir_compat -- --ignored write_cluster_fixture"
            .to_string(),
        controller_ports: CLUSTER_CONTROLLER_PORTS.to_vec(),
        settings: CLUSTER_SETTINGS.iter().map(|s| s.to_string()).collect(),
        cluster_id: cluster_id(&route),
        replicas,
        topics: observe_topics(&route),
        deleted_topics: vec!["gone".to_string()],
        groups: observe_groups(&route),
    };
    drop(c);
    stop_all(&mut nodes);

    let name = format!("{CLUSTER_PREFIX}{head}");
    let tarball = Path::new(FIXTURES).join(format!("{name}.tar.gz"));
    assert!(
        !tarball.exists(),
        "{} exists: a fixture is never replaced",
        tarball.display()
    );
    pack_dirs(root.path(), &["data-1", "data-2", "data-3"], &tarball);
    let json = serde_json::to_string_pretty(&manifest).expect("manifest json");
    std::fs::write(
        Path::new(FIXTURES).join(format!("{name}.json")),
        json + "\n",
    )
    .expect("write the manifest");
    eprintln!(
        "wrote {} ({} bytes) and its manifest",
        tarball.display(),
        std::fs::metadata(&tarball).expect("tarball").len()
    );
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

/// Appends `path` as `rel`: no owner, no time, mode 644 or 755.
fn append<W: std::io::Write>(tar: &mut tar::Builder<W>, path: &Path, rel: &Path) {
    let meta = std::fs::metadata(path).expect("metadata");
    let mut header = tar::Header::new_gnu();
    header.set_mode(if meta.is_dir() { 0o755 } else { 0o644 });
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    if meta.is_dir() {
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        tar.append_data(&mut header, rel, std::io::empty())
            .expect("append a directory");
    } else {
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(meta.len());
        let f = std::fs::File::open(path).expect("open");
        tar.append_data(&mut header, rel, f).expect("append a file");
    }
}

/// Packs the directories `dirs` of `base` (paths relative to `base`) into a gzip'ed tarball.
fn pack_dirs(base: &Path, dirs: &[&str], tarball: &Path) {
    let file = std::fs::File::create(tarball).expect("create the tarball");
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    let mut files: Vec<PathBuf> = Vec::new();
    let mut stack: Vec<PathBuf> = dirs.iter().map(|d| base.join(d)).collect();
    files.extend(stack.iter().cloned());
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path.clone());
            }
            files.push(path);
        }
    }
    files.sort();
    for path in files {
        append(
            &mut tar,
            &path,
            path.strip_prefix(base).expect("under base"),
        );
    }
    tar.into_inner()
        .expect("finish the tar")
        .finish()
        .expect("finish the gzip");
}
