//! Hand-written codec for OffsetForLeaderEpoch v0/v1, which the `kafka-protocol` crate no
//! longer knows (v2 inserted `current_leader_epoch`, so v2's codec cannot read them).
//!
//! ```text
//! request v0/v1:  topics: [topic string, partitions: [partition i32, leader_epoch i32]]
//! response v0:    topics: [topic string, partitions: [error_code i16, partition i32,
//!                                                     end_offset i64]]
//! response v1:    v0 with leader_epoch i32 before end_offset
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use super::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderEpochRequest, OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use super::messages::offset_for_leader_epoch_response::OffsetForLeaderEpochResponse;
use super::messages::TopicName;
use super::wire::{put_count, put_string, WireError, WireReader};
use super::StrBytes;

/// Smallest topic entry: name length (2) + partition count (4).
const MIN_TOPIC_LEN: usize = 6;
/// A partition entry: partition (4) + leader epoch (4).
const PARTITION_LEN: usize = 8;

/// Decodes a v0/v1 request into the crate's type; `current_leader_epoch` is -1 (not checked).
pub fn decode_request_v0_1(body: Bytes) -> Result<OffsetForLeaderEpochRequest, WireError> {
    let mut r = WireReader::new(body);
    let mut request = OffsetForLeaderEpochRequest::default();
    for _ in 0..r.count("topics", MIN_TOPIC_LEN)? {
        let mut topic = OffsetForLeaderTopic::default();
        topic.topic = TopicName(StrBytes::from_string(r.string("topic")?));
        for _ in 0..r.count("partitions", PARTITION_LEN)? {
            let mut p = OffsetForLeaderPartition::default();
            p.partition = r.i32("partition")?;
            p.leader_epoch = r.i32("leader_epoch")?;
            p.current_leader_epoch = -1;
            topic.partitions.push(p);
        }
        request.topics.push(topic);
    }
    r.finish()?;
    Ok(request)
}

/// Encodes the crate's response as v0 or v1 (no throttle time in either).
pub fn encode_response_v0_1(response: &OffsetForLeaderEpochResponse, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    put_count(&mut out, response.topics.len());
    for t in &response.topics {
        put_string(&mut out, &t.topic.0);
        put_count(&mut out, t.partitions.len());
        for p in &t.partitions {
            out.put_i16(p.error_code);
            out.put_i32(p.partition);
            if version >= 1 {
                out.put_i32(p.leader_epoch);
            }
            out.put_i64(p.end_offset);
        }
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::offset_for_leader_epoch_response::{
        EpochEndOffset, OffsetForLeaderTopicResult,
    };
    use bytes::Buf;

    #[test]
    fn a_v0_request_decodes_with_unchecked_current_epoch() {
        let mut b = BytesMut::new();
        put_count(&mut b, 1);
        put_string(&mut b, "t");
        put_count(&mut b, 1);
        b.put_i32(3);
        b.put_i32(0);
        let request = decode_request_v0_1(b.freeze()).unwrap();
        let p = &request.topics[0].partitions[0];
        assert_eq!(&*request.topics[0].topic.0, "t");
        assert_eq!(
            (p.partition, p.leader_epoch, p.current_leader_epoch),
            (3, 0, -1)
        );
    }

    #[test]
    fn a_truncated_request_is_refused() {
        let mut b = BytesMut::new();
        put_count(&mut b, 1);
        put_string(&mut b, "t");
        put_count(&mut b, 1);
        b.put_i32(3);
        assert!(decode_request_v0_1(b.freeze()).is_err());
    }

    #[test]
    fn v1_adds_the_leader_epoch_before_the_end_offset() {
        let mut p = EpochEndOffset::default();
        p.partition = 2;
        p.leader_epoch = 0;
        p.end_offset = 9;
        let mut t = OffsetForLeaderTopicResult::default();
        t.topic = TopicName(StrBytes::from_static_str("t"));
        t.partitions.push(p);
        let mut response = OffsetForLeaderEpochResponse::default();
        response.topics.push(t);
        let v0 = encode_response_v0_1(&response, 0);
        let v1 = encode_response_v0_1(&response, 1);
        assert_eq!(v1.len(), v0.len() + 4);
        let mut r = v1.slice(v1.len() - 18..);
        assert_eq!(r.get_i16(), 0);
        assert_eq!(r.get_i32(), 2);
        assert_eq!(r.get_i32(), 0);
        assert_eq!(r.get_i64(), 9);
    }
}
