//! Hand-written codecs for OffsetCommit v0/v1 and ListOffsets v0, which the `kafka-protocol`
//! crate no longer knows. Requests decode into the crate's types (plus what only the old
//! version carries), so each handler keeps one code path.
//!
//! ```text
//! OffsetCommit v0: group_id string,
//!                  topics: [name string, partitions: [index i32, offset i64, metadata string]]
//! OffsetCommit v1: group_id string, generation_id i32, member_id string,
//!                  topics: [name, partitions: [index, offset, commit_timestamp i64, metadata]]
//!                  (responses of v0 and v1 are those of v2)
//! ListOffsets v0:  replica_id i32,
//!                  topics: [name string, partitions: [index i32, timestamp i64,
//!                                                     max_num_offsets i32]]
//!        answer:   topics: [name string, partitions: [index i32, error_code i16,
//!                                                     old_style_offsets [i64]]]
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use super::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use super::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use super::messages::{BrokerId, GroupId, TopicName};
use super::wire::{put_count, put_string, WireError, WireReader};
use super::StrBytes;

/// Smallest topic entry: name length (2) + partition count (4).
const MIN_TOPIC_LEN: usize = 6;
/// Smallest OffsetCommit v0 partition: index 4 + offset 8 + metadata length 2.
const MIN_COMMIT_PARTITION_LEN: usize = 14;
/// A ListOffsets v0 partition: index 4 + timestamp 8 + max_num_offsets 4.
const LIST_PARTITION_LEN: usize = 16;

/// An OffsetCommit v0/v1 request: the crate's type (generation -1 and no member for v0, as a
/// commit outside group management) and, per partition in request order, the commit
/// timestamp v1 carries (-1: the broker's time).
pub struct LegacyOffsetCommit {
    pub request: OffsetCommitRequest,
    pub commit_timestamps: Vec<i64>,
}

fn str_bytes(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

pub fn decode_offset_commit_v0_1(
    body: Bytes,
    version: i16,
) -> Result<LegacyOffsetCommit, WireError> {
    if !(0..=1).contains(&version) {
        return Err(WireError::Version(version));
    }
    let mut r = WireReader::new(body);
    let mut request = OffsetCommitRequest::default();
    request.group_id = GroupId(str_bytes(r.string("group_id")?));
    request.generation_id_or_member_epoch = -1;
    if version >= 1 {
        request.generation_id_or_member_epoch = r.i32("generation_id")?;
        request.member_id = str_bytes(r.string("member_id")?);
    }
    let mut commit_timestamps = Vec::new();
    for _ in 0..r.count("topics", MIN_TOPIC_LEN)? {
        let mut topic = OffsetCommitRequestTopic::default();
        topic.name = TopicName(str_bytes(r.string("topic")?));
        for _ in 0..r.count("partitions", MIN_COMMIT_PARTITION_LEN)? {
            let mut p = OffsetCommitRequestPartition::default();
            p.partition_index = r.i32("partition")?;
            p.committed_offset = r.i64("offset")?;
            p.committed_leader_epoch = -1;
            commit_timestamps.push(if version >= 1 {
                r.i64("commit_timestamp")?
            } else {
                -1
            });
            p.committed_metadata = r.nullable_string("metadata")?.map(str_bytes);
            topic.partitions.push(p);
        }
        request.topics.push(topic);
    }
    r.finish()?;
    Ok(LegacyOffsetCommit {
        request,
        commit_timestamps,
    })
}

/// A ListOffsets v0 request: the crate's type and, per partition in request order,
/// `max_num_offsets`.
pub struct LegacyListOffsets {
    pub request: ListOffsetsRequest,
    pub max_num_offsets: Vec<i32>,
}

pub fn decode_list_offsets_v0(body: Bytes) -> Result<LegacyListOffsets, WireError> {
    let mut r = WireReader::new(body);
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(r.i32("replica_id")?);
    let mut max_num_offsets = Vec::new();
    for _ in 0..r.count("topics", MIN_TOPIC_LEN)? {
        let mut topic = ListOffsetsTopic::default();
        topic.name = TopicName(str_bytes(r.string("topic")?));
        for _ in 0..r.count("partitions", LIST_PARTITION_LEN)? {
            let mut p = ListOffsetsPartition::default();
            p.partition_index = r.i32("partition")?;
            p.timestamp = r.i64("timestamp")?;
            max_num_offsets.push(r.i32("max_num_offsets")?);
            topic.partitions.push(p);
        }
        request.topics.push(topic);
    }
    r.finish()?;
    Ok(LegacyListOffsets {
        request,
        max_num_offsets,
    })
}

/// One partition of a ListOffsets v0 answer.
pub struct LegacyOffsetsAnswer {
    pub partition: i32,
    pub error_code: i16,
    pub offsets: Vec<i64>,
}

pub fn encode_list_offsets_response_v0(topics: &[(String, Vec<LegacyOffsetsAnswer>)]) -> Bytes {
    let mut out = BytesMut::new();
    put_count(&mut out, topics.len());
    for (name, partitions) in topics {
        put_string(&mut out, name);
        put_count(&mut out, partitions.len());
        for p in partitions {
            out.put_i32(p.partition);
            out.put_i16(p.error_code);
            put_count(&mut out, p.offsets.len());
            for o in &p.offsets {
                out.put_i64(*o);
            }
        }
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::wire::put_nullable_string;
    use bytes::Buf;

    fn commit_body(version: i16) -> Bytes {
        let mut b = BytesMut::new();
        put_string(&mut b, "g");
        if version >= 1 {
            b.put_i32(3);
            put_string(&mut b, "m-1");
        }
        put_count(&mut b, 1);
        put_string(&mut b, "t");
        put_count(&mut b, 2);
        for (i, meta) in [(0, Some("x")), (1, None)] {
            b.put_i32(i);
            b.put_i64(10 + i64::from(i));
            if version >= 1 {
                b.put_i64(if i == 0 { 1_000 } else { -1 });
            }
            put_nullable_string(&mut b, meta);
        }
        b.freeze()
    }

    #[test]
    fn offset_commit_v0_is_a_commit_outside_group_management() {
        let c = decode_offset_commit_v0_1(commit_body(0), 0).unwrap();
        assert_eq!(c.request.generation_id_or_member_epoch, -1);
        assert_eq!(&*c.request.member_id, "");
        assert_eq!(c.commit_timestamps, vec![-1, -1]);
        let p = &c.request.topics[0].partitions;
        assert_eq!(p[0].committed_offset, 10);
        assert_eq!(p[0].committed_metadata.as_deref(), Some("x"));
        assert_eq!(p[1].committed_metadata, None);
    }

    #[test]
    fn offset_commit_v1_carries_generation_member_and_timestamps() {
        let c = decode_offset_commit_v0_1(commit_body(1), 1).unwrap();
        assert_eq!(c.request.generation_id_or_member_epoch, 3);
        assert_eq!(&*c.request.member_id, "m-1");
        assert_eq!(c.commit_timestamps, vec![1_000, -1]);
        assert_eq!(c.request.topics[0].partitions[1].committed_offset, 11);
        // A v0 body is not a v1 body.
        assert!(decode_offset_commit_v0_1(commit_body(0), 1).is_err());
    }

    #[test]
    fn list_offsets_v0_round_trip() {
        let mut b = BytesMut::new();
        b.put_i32(-1);
        put_count(&mut b, 1);
        put_string(&mut b, "t");
        put_count(&mut b, 1);
        b.put_i32(0);
        b.put_i64(-1);
        b.put_i32(5);
        let l = decode_list_offsets_v0(b.freeze()).unwrap();
        assert_eq!(l.request.topics[0].partitions[0].timestamp, -1);
        assert_eq!(l.max_num_offsets, vec![5]);

        let mut out = encode_list_offsets_response_v0(&[(
            "t".to_string(),
            vec![LegacyOffsetsAnswer {
                partition: 0,
                error_code: 0,
                offsets: vec![9, 0],
            }],
        )]);
        assert_eq!(out.get_i32(), 1);
        assert_eq!(out.get_i16(), 1);
        out.advance(1);
        assert_eq!((out.get_i32(), out.get_i32(), out.get_i16()), (1, 0, 0));
        assert_eq!(out.get_i32(), 2);
        assert_eq!((out.get_i64(), out.get_i64()), (9, 0));
        assert!(out.is_empty());
    }
}
