//! Request bodies of every API and version the broker serves, decoded exactly as the handlers
//! do: kafka-protocol's `Decodable::decode(&mut Bytes, version)` for the request type of the
//! API, and the hand-written decoders (`protocol::legacy_*`) for the old versions that crate
//! lacks: Produce v0–v2, Fetch v0–v3, ListOffsets v0, OffsetCommit v0/v1, CreateTopics v0/v1,
//! DescribeConfigs v0, OffsetForLeaderEpoch v0/v1.
//!
//! Input: `[api key, version, body...]`. A served API key picks itself, any other byte picks an
//! entry of the APIS table by index; a version outside the served range is folded into it. So
//! every input decodes something, and a captured request with its header stripped (what
//! capture_corpus.py writes) keeps its meaning.
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;
use ringbroker::protocol::legacy_admin::{decode_create_topics_v0_1, decode_describe_configs_v0};
use ringbroker::protocol::legacy_epoch::decode_request_v0_1 as decode_offset_for_leader_epoch_v0_1;
use ringbroker::protocol::legacy_fetch::decode_fetch_v0_3;
use ringbroker::protocol::legacy_offset_codecs::{
    decode_list_offsets_v0, decode_offset_commit_v0_1,
};
use ringbroker::protocol::legacy_produce::decode_produce_v0_2;
use ringbroker::server::handlers::{spec_for, ApiSpec, APIS};

/// Same allocator as the broker binary: kafka-protocol calls `Vec::with_capacity(count)` with
/// a count read off the wire before reading the elements.
#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

fn pick(key_byte: u8, version_byte: u8) -> (&'static ApiSpec, i16) {
    let spec = ApiKey::try_from(i16::from(key_byte))
        .ok()
        .and_then(spec_for)
        .unwrap_or(&APIS[usize::from(key_byte) % APIS.len()]);
    // Produce v0-v2 are served too (legacy decoder), below the table's minimum.
    let min = if spec.key == ApiKey::Produce {
        0
    } else {
        spec.min_version
    };
    let version = i16::from(version_byte);
    let version = if (min..=spec.max_version).contains(&version) {
        version
    } else {
        min + version % (spec.max_version - min + 1)
    };
    (spec, version)
}

fn decode<T: Decodable>(body: &mut Bytes, version: i16) {
    let _ = T::decode(body, version);
}

fuzz_target!(|data: &[u8]| {
    let [key_byte, version_byte, rest @ ..] = data else {
        return;
    };
    let (spec, version) = pick(*key_byte, *version_byte);
    let mut body = Bytes::copy_from_slice(rest);
    let b = &mut body;
    match spec.key {
        ApiKey::Produce if version <= 2 => {
            let _ = decode_produce_v0_2(b, version);
        }
        ApiKey::Fetch if version <= 3 => {
            let _ = decode_fetch_v0_3(body.clone(), version);
        }
        ApiKey::ListOffsets if version == 0 => {
            let _ = decode_list_offsets_v0(body.clone());
        }
        ApiKey::OffsetCommit if version <= 1 => {
            let _ = decode_offset_commit_v0_1(body.clone(), version);
        }
        ApiKey::CreateTopics if version <= 1 => {
            let _ = decode_create_topics_v0_1(body.clone(), version);
        }
        ApiKey::DescribeConfigs if version == 0 => {
            let _ = decode_describe_configs_v0(body.clone());
        }
        ApiKey::OffsetForLeaderEpoch if version <= 1 => {
            let _ = decode_offset_for_leader_epoch_v0_1(body.clone());
        }
        ApiKey::Produce => decode::<ProduceRequest>(b, version),
        ApiKey::Fetch => decode::<FetchRequest>(b, version),
        ApiKey::ListOffsets => decode::<ListOffsetsRequest>(b, version),
        ApiKey::Metadata => decode::<MetadataRequest>(b, version),
        ApiKey::ApiVersions => decode::<ApiVersionsRequest>(b, version),
        ApiKey::CreateTopics => decode::<CreateTopicsRequest>(b, version),
        ApiKey::DeleteTopics => decode::<DeleteTopicsRequest>(b, version),
        ApiKey::DeleteRecords => decode::<DeleteRecordsRequest>(b, version),
        ApiKey::DescribeConfigs => decode::<DescribeConfigsRequest>(b, version),
        ApiKey::AlterConfigs => decode::<AlterConfigsRequest>(b, version),
        ApiKey::CreatePartitions => decode::<CreatePartitionsRequest>(b, version),
        ApiKey::IncrementalAlterConfigs => decode::<IncrementalAlterConfigsRequest>(b, version),
        ApiKey::DescribeCluster => decode::<DescribeClusterRequest>(b, version),
        ApiKey::FindCoordinator => decode::<FindCoordinatorRequest>(b, version),
        ApiKey::JoinGroup => decode::<JoinGroupRequest>(b, version),
        ApiKey::SyncGroup => decode::<SyncGroupRequest>(b, version),
        ApiKey::Heartbeat => decode::<HeartbeatRequest>(b, version),
        ApiKey::LeaveGroup => decode::<LeaveGroupRequest>(b, version),
        ApiKey::OffsetCommit => decode::<OffsetCommitRequest>(b, version),
        ApiKey::OffsetFetch => decode::<OffsetFetchRequest>(b, version),
        ApiKey::ListGroups => decode::<ListGroupsRequest>(b, version),
        ApiKey::DescribeGroups => decode::<DescribeGroupsRequest>(b, version),
        ApiKey::DeleteGroups => decode::<DeleteGroupsRequest>(b, version),
        ApiKey::OffsetDelete => decode::<OffsetDeleteRequest>(b, version),
        ApiKey::InitProducerId => decode::<InitProducerIdRequest>(b, version),
        ApiKey::OffsetForLeaderEpoch => decode::<OffsetForLeaderEpochRequest>(b, version),
        ApiKey::DescribeLogDirs => decode::<DescribeLogDirsRequest>(b, version),
        ApiKey::DescribeProducers => decode::<DescribeProducersRequest>(b, version),
        // A new entry in APIS must be added here, or fuzzing it silently stops.
        other => panic!("request_body fuzz target does not know {other:?}"),
    }
});
