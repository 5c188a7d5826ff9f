//! The requests the generator and the check send, and what a broker answers about its data
//! (the manifest's contents).

use super::*;

/// Metadata v12 of every topic: name -> (id, internal, partition count, error).
pub(crate) fn all_topics(c: &mut Client) -> BTreeMap<String, (String, bool, usize)> {
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
pub(crate) fn dynamic_configs(c: &mut Client, topic: &str) -> BTreeMap<String, String> {
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

pub(crate) fn incremental_set(c: &mut Client, topic: &str, name: &str, value: &str) {
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
pub(crate) fn log_bounds(c: &mut Client, topic: &str, partition: i32) -> (i64, i64) {
    let (e1, start) = c.list_offset(topic, partition, -2);
    let (e2, end) = c.list_offset(topic, partition, -1);
    assert_eq!((e1, e2), (0, 0), "ListOffsets {topic}-{partition}");
    (start, end)
}

/// Builds the digest of a partition's records from `start` to `end` (Fetch v11).
pub(crate) fn read_partition(
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
pub(crate) struct RecordDigest {
    pub(crate) crc: u32,
    pub(crate) records: u64,
    pub(crate) codecs: Vec<String>,
}

impl RecordDigest {
    pub(crate) fn batch(&mut self, h: &BatchHeader, batch: &[u8], from: i64) {
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

    pub(crate) fn hex(&self) -> String {
        format!("{:08x}", self.crc)
    }
}

/// OffsetFetch v7 of a group, every topic: `topic/partition` -> committed.
pub(crate) fn committed_offsets(c: &mut Client, group: &str) -> BTreeMap<String, Committed> {
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

pub(crate) fn list_groups(c: &mut Client) -> Vec<String> {
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
pub(crate) fn commit(
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
pub(crate) fn init_producer_id(c: &mut Client) -> (i64, i16) {
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
pub(crate) type Rec<'a> = (
    Option<&'a [u8]>,
    Option<&'a [u8]>,
    i64,
    Vec<(&'a str, &'a [u8])>,
);

pub(crate) fn batch_of(records: &[Rec], codec: Compression) -> Bytes {
    let mut b = BatchBuilder::new(records[0].2);
    for (k, v, ts, h) in records {
        b.push(*k, *v, *ts, h);
    }
    compress_batch(b.build(), codec).expect("compress")
}

pub(crate) fn produce_ok(c: &mut Client, topic: &str, partition: i32, batch: Bytes) -> i64 {
    let (code, base) = c.produce_records(9, -1, topic, partition, batch);
    assert_eq!(code, 0, "produce to {topic}-{partition}");
    base
}

pub(crate) fn idempotent_batch(
    pid: i64,
    epoch: i16,
    seq: i32,
    values: &[String],
    ts: i64,
) -> Bytes {
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
pub(crate) struct Route {
    pub(crate) nodes: Vec<SocketAddr>,
}

impl Route {
    pub(crate) fn any(&self) -> Client {
        Client::connect(self.nodes[0])
    }

    /// A connection to the leader of `topic`-`partition`, as Metadata names it.
    pub(crate) fn leader(&self, topic: &str, partition: i32) -> Client {
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
    pub(crate) fn coordinator(&self, group: &str) -> Client {
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
    pub(crate) fn groups(&self) -> Vec<String> {
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
pub(crate) fn observe_topics(route: &Route) -> BTreeMap<String, TopicManifest> {
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

pub(crate) fn observe_groups(route: &Route) -> BTreeMap<String, BTreeMap<String, Committed>> {
    route
        .groups()
        .into_iter()
        .map(|g| {
            let offsets = committed_offsets(&mut route.coordinator(&g), &g);
            (g, offsets)
        })
        .collect()
}
