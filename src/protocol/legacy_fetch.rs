//! Hand-written codec for Fetch v0–v3, which the `kafka-protocol` crate no longer knows.
//! Requests decode into the crate's [`FetchRequest`] so the handler stays one code path;
//! responses are written from the crate's [`FetchResponse`] once its records have been
//! down-converted (see [`super::legacy_downconvert`]).
//!
//! ```text
//! request:  replica_id i32, max_wait_ms i32, min_bytes i32, max_bytes i32 (v3+),
//!           topics: [name string, partitions: [partition i32, fetch_offset i64,
//!                                              partition_max_bytes i32]]
//! response: throttle_time_ms i32 (v1+),
//!           responses: [name string, partitions: [partition i32, error_code i16,
//!                                                 high_watermark i64, records bytes]]
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use super::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use super::messages::fetch_response::FetchResponse;
use super::messages::{BrokerId, TopicName};
use super::wire::{put_bytes, put_count, put_string, WireError, WireReader};
use super::StrBytes;

/// Smallest topic entry: name length (2) + partition count (4).
const MIN_TOPIC_LEN: usize = 6;
/// A partition entry: partition (4) + fetch offset (8) + max bytes (4).
const PARTITION_LEN: usize = 16;

pub fn decode_fetch_v0_3(body: Bytes, version: i16) -> Result<FetchRequest, WireError> {
    if !(0..=3).contains(&version) {
        return Err(WireError::Version(version));
    }
    let mut r = WireReader::new(body);
    let mut request = FetchRequest::default();
    request.replica_id = BrokerId(r.i32("replica_id")?);
    request.max_wait_ms = r.i32("max_wait_ms")?;
    request.min_bytes = r.i32("min_bytes")?;
    // Before v3 there is no response limit: only the per-partition ones (0 = the broker's).
    request.max_bytes = if version >= 3 { r.i32("max_bytes")? } else { 0 };
    let topics = r.count("topics", MIN_TOPIC_LEN)?;
    for _ in 0..topics {
        let mut topic = FetchTopic::default();
        topic.topic = TopicName(StrBytes::from_string(r.string("topic")?));
        let partitions = r.count("partitions", PARTITION_LEN)?;
        for _ in 0..partitions {
            let mut p = FetchPartition::default();
            p.partition = r.i32("partition")?;
            p.fetch_offset = r.i64("fetch_offset")?;
            p.partition_max_bytes = r.i32("partition_max_bytes")?;
            topic.partitions.push(p);
        }
        request.topics.push(topic);
    }
    r.finish()?;
    Ok(request)
}

/// Writes the v0–v3 response body; the records must already be legacy message sets.
pub fn encode_fetch_response_v0_3(response: &FetchResponse, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    if version >= 1 {
        out.put_i32(response.throttle_time_ms);
    }
    put_count(&mut out, response.responses.len());
    for topic in &response.responses {
        put_string(&mut out, &topic.topic.0);
        put_count(&mut out, topic.partitions.len());
        for p in &topic.partitions {
            out.put_i32(p.partition_index);
            out.put_i16(p.error_code);
            out.put_i64(p.high_watermark);
            put_bytes(&mut out, p.records.as_deref().unwrap_or_default());
        }
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};

    fn request(version: i16) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i32(-1);
        b.put_i32(500);
        b.put_i32(1);
        if version >= 3 {
            b.put_i32(1 << 20);
        }
        put_count(&mut b, 1);
        put_string(&mut b, "t");
        put_count(&mut b, 1);
        b.put_i32(2);
        b.put_i64(42);
        b.put_i32(4096);
        b.freeze()
    }

    #[test]
    fn v2_and_v3_requests_decode_into_the_crate_type() {
        for version in [0, 2, 3] {
            let r = decode_fetch_v0_3(request(version), version).unwrap();
            assert_eq!(r.max_wait_ms, 500);
            assert_eq!(r.max_bytes, if version >= 3 { 1 << 20 } else { 0 });
            assert_eq!(&*r.topics[0].topic.0, "t");
            assert_eq!(r.topics[0].partitions[0].fetch_offset, 42);
            assert_eq!(r.topics[0].partitions[0].partition_max_bytes, 4096);
        }
    }

    #[test]
    fn a_v2_body_read_as_v3_is_refused() {
        assert!(decode_fetch_v0_3(request(2), 3).is_err());
    }

    #[test]
    fn responses_carry_the_throttle_time_from_v1() {
        let mut response = FetchResponse::default();
        let mut t = FetchableTopicResponse::default();
        t.topic = TopicName(StrBytes::from_static_str("t"));
        let mut p = PartitionData::default();
        p.high_watermark = 7;
        p.records = Some(Bytes::from_static(b"abc"));
        t.partitions.push(p);
        response.responses.push(t);
        let v0 = encode_fetch_response_v0_3(&response, 0);
        let v1 = encode_fetch_response_v0_3(&response, 1);
        assert_eq!(v1.len(), v0.len() + 4);
        // count 1, "t", count 1, partition 0, error 0, hw 7, 3 bytes of records.
        assert_eq!(v0.len(), 4 + 3 + 4 + 4 + 2 + 8 + 4 + 3);
        assert_eq!(&v0[v0.len() - 3..], b"abc");
    }
}
