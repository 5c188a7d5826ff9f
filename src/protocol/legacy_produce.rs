//! Hand-written codec for Produce requests and responses v0-v2, which the `kafka-protocol` crate
//! does not support (it starts at Produce v3). Old librdkafka only compresses when the broker
//! advertises these versions; their partition data is a legacy MessageSet (see
//! [`super::legacy`]).
//!
//! Request body (after the request header), all big endian, identical for v0, v1 and v2:
//!
//! ```text
//! acks i16
//! timeout_ms i32
//! topics: i32 count, each:
//!     name: string (i16 length, UTF-8)
//!     partitions: i32 count, each:
//!         partition i32
//!         records: bytes (i32 length, -1 = null)
//! ```
//!
//! Response body (after the correlation id):
//!
//! ```text
//! topics: i32 count, each:
//!     name: string
//!     partitions: i32 count, each:
//!         partition i32, error_code i16, base_offset i64,
//!         log_append_time_ms i64          (v2 only)
//! throttle_time_ms i32                    (v1 and v2)
//! ```

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Smallest encoded topic entry: name length (2) + partition count (4).
const MIN_TOPIC_LEN: usize = 6;
/// Smallest encoded partition entry: partition (4) + records length (4).
const MIN_PARTITION_LEN: usize = 8;

/// Why a Produce v0-v2 request body could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum LegacyProduceError {
    /// Only versions 0, 1 and 2 are decoded here.
    #[error("unsupported Produce version {0} for the legacy decoder (v0-v2)")]
    UnsupportedVersion(i16),
    /// The body ended while reading `what`.
    #[error("Produce request truncated while reading {what}")]
    Truncated { what: &'static str },
    /// A length or count field is negative where that is not allowed.
    #[error("negative {what}: {value}")]
    Negative { what: &'static str, value: i32 },
    /// An array count larger than the remaining bytes could possibly hold.
    #[error("{what} count {count} does not fit in the {remaining} remaining bytes")]
    BadCount {
        what: &'static str,
        count: i32,
        remaining: usize,
    },
    /// A topic name that is not UTF-8.
    #[error("topic name is not valid UTF-8")]
    BadUtf8,
    /// Bytes left after the last field.
    #[error("{0} bytes after the end of the Produce request")]
    TrailingBytes(usize),
}

/// A decoded Produce v0-v2 request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyProduceRequest {
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: Vec<LegacyTopicData>,
}

/// One topic of a Produce v0-v2 request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyTopicData {
    pub name: String,
    pub partitions: Vec<LegacyPartitionData>,
}

/// One partition of a Produce v0-v2 request: its legacy MessageSet, as sent (zero copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyPartitionData {
    pub partition: i32,
    pub records: Option<Bytes>,
}

/// One partition of a Produce v0-v2 response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyPartitionResponse {
    pub partition: i32,
    pub error_code: i16,
    pub base_offset: i64,
    /// Written by v2 only; -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
}

fn need(body: &Bytes, n: usize, what: &'static str) -> Result<(), LegacyProduceError> {
    if body.remaining() < n {
        return Err(LegacyProduceError::Truncated { what });
    }
    Ok(())
}

fn get_i16(body: &mut Bytes, what: &'static str) -> Result<i16, LegacyProduceError> {
    need(body, 2, what)?;
    Ok(body.get_i16())
}

fn get_i32(body: &mut Bytes, what: &'static str) -> Result<i32, LegacyProduceError> {
    need(body, 4, what)?;
    Ok(body.get_i32())
}

/// An array count, checked against the remaining bytes (each element needs `min_len` bytes).
fn get_count(
    body: &mut Bytes,
    what: &'static str,
    min_len: usize,
) -> Result<usize, LegacyProduceError> {
    let count = get_i32(body, what)?;
    let n =
        usize::try_from(count).map_err(|_| LegacyProduceError::Negative { what, value: count })?;
    if n > body.remaining() / min_len {
        return Err(LegacyProduceError::BadCount {
            what,
            count,
            remaining: body.remaining(),
        });
    }
    Ok(n)
}

/// Decodes a Produce v0, v1 or v2 request body. `body` must be positioned after the request
/// header and hold exactly the body; on success it is fully consumed. Record sets are split off
/// `body` without copying; they are not parsed here (see [`super::legacy`]).
pub fn decode_produce_v0_2(
    body: &mut Bytes,
    version: i16,
) -> Result<LegacyProduceRequest, LegacyProduceError> {
    if !(0..=2).contains(&version) {
        return Err(LegacyProduceError::UnsupportedVersion(version));
    }
    let acks = get_i16(body, "acks")?;
    let timeout_ms = get_i32(body, "timeout_ms")?;
    let topic_count = get_count(body, "topic", MIN_TOPIC_LEN)?;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let name_len = get_i16(body, "topic name length")?;
        let name_len = usize::try_from(name_len).map_err(|_| LegacyProduceError::Negative {
            what: "topic name length",
            value: i32::from(name_len),
        })?;
        need(body, name_len, "topic name")?;
        let name = String::from_utf8(body.split_to(name_len).to_vec())
            .map_err(|_| LegacyProduceError::BadUtf8)?;

        let partition_count = get_count(body, "partition", MIN_PARTITION_LEN)?;
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            let partition = get_i32(body, "partition index")?;
            let len = get_i32(body, "records length")?;
            let records = if len == -1 {
                None
            } else {
                let n = usize::try_from(len).map_err(|_| LegacyProduceError::Negative {
                    what: "records length",
                    value: len,
                })?;
                need(body, n, "records")?;
                Some(body.split_to(n))
            };
            partitions.push(LegacyPartitionData { partition, records });
        }
        topics.push(LegacyTopicData { name, partitions });
    }
    if body.has_remaining() {
        return Err(LegacyProduceError::TrailingBytes(body.remaining()));
    }
    Ok(LegacyProduceRequest {
        acks,
        timeout_ms,
        topics,
    })
}

/// Encodes a Produce v0, v1 or v2 response body (without the response header / correlation id).
///
/// Versions below 0 are encoded as v0 and above 2 as v2. Topic names longer than `i16::MAX`
/// bytes and arrays longer than `i32::MAX` elements (impossible for real topics) are truncated so
/// that the encoding stays self-consistent.
pub fn encode_produce_response_v0_2(
    version: i16,
    topics: &[(String, Vec<LegacyPartitionResponse>)],
    throttle_time_ms: i32,
) -> Bytes {
    let version = version.clamp(0, 2);
    let per_partition = if version >= 2 { 22 } else { 14 };
    let size = 4
        + topics
            .iter()
            .map(|(name, parts)| 6 + name.len() + parts.len() * per_partition)
            .sum::<usize>()
        + if version >= 1 { 4 } else { 0 };
    let mut out = BytesMut::with_capacity(size);

    let topic_count = i32::try_from(topics.len()).unwrap_or(i32::MAX);
    out.put_i32(topic_count);
    for (name, partitions) in topics.iter().take(topic_count as usize) {
        let name_len = i16::try_from(name.len()).unwrap_or(i16::MAX);
        out.put_i16(name_len);
        out.put_slice(&name.as_bytes()[..name_len as usize]);
        let count = i32::try_from(partitions.len()).unwrap_or(i32::MAX);
        out.put_i32(count);
        for p in partitions.iter().take(count as usize) {
            out.put_i32(p.partition);
            out.put_i16(p.error_code);
            out.put_i64(p.base_offset);
            if version >= 2 {
                out.put_i64(p.log_append_time_ms);
            }
        }
    }
    if version >= 1 {
        out.put_i32(throttle_time_ms);
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Test-side encoder of a request body.
    fn encode_request(req: &LegacyProduceRequest) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(req.acks);
        out.put_i32(req.timeout_ms);
        out.put_i32(req.topics.len() as i32);
        for t in &req.topics {
            out.put_i16(t.name.len() as i16);
            out.put_slice(t.name.as_bytes());
            out.put_i32(t.partitions.len() as i32);
            for p in &t.partitions {
                out.put_i32(p.partition);
                match &p.records {
                    None => out.put_i32(-1),
                    Some(r) => {
                        out.put_i32(r.len() as i32);
                        out.put_slice(r);
                    }
                }
            }
        }
        out
    }

    type Topics = Vec<(String, Vec<LegacyPartitionResponse>)>;

    /// Test-side decoder of a response body.
    fn decode_response(version: i16, mut b: &[u8]) -> (Topics, i32) {
        let mut topics = Vec::new();
        for _ in 0..b.get_i32() {
            let n = b.get_i16() as usize;
            let name = String::from_utf8(b[..n].to_vec()).unwrap();
            b.advance(n);
            let mut parts = Vec::new();
            for _ in 0..b.get_i32() {
                let partition = b.get_i32();
                let error_code = b.get_i16();
                let base_offset = b.get_i64();
                let log_append_time_ms = if version >= 2 { b.get_i64() } else { -1 };
                parts.push(LegacyPartitionResponse {
                    partition,
                    error_code,
                    base_offset,
                    log_append_time_ms,
                });
            }
            topics.push((name, parts));
        }
        let throttle = if version >= 1 { b.get_i32() } else { 0 };
        assert!(b.is_empty(), "response has trailing bytes");
        (topics, throttle)
    }

    #[test]
    fn decodes_a_hand_built_request() {
        #[rustfmt::skip]
        let raw: Vec<u8> = vec![
            0xff, 0xff,             // acks -1
            0, 0, 0x75, 0x30,       // timeout 30000
            0, 0, 0, 2,             // 2 topics
            0, 3, b'f', b'o', b'o', // "foo"
            0, 0, 0, 2,             // 2 partitions
            0, 0, 0, 0,             // partition 0
            0, 0, 0, 3, 1, 2, 3,    // records [1, 2, 3]
            0, 0, 0, 5,             // partition 5
            0xff, 0xff, 0xff, 0xff, // null records
            0, 0,                   // ""
            0, 0, 0, 0,             // no partitions
        ];
        for version in 0..=2 {
            let mut body = Bytes::from(raw.clone());
            let req = decode_produce_v0_2(&mut body, version).unwrap();
            assert!(body.is_empty());
            assert_eq!(
                req,
                LegacyProduceRequest {
                    acks: -1,
                    timeout_ms: 30_000,
                    topics: vec![
                        LegacyTopicData {
                            name: "foo".to_owned(),
                            partitions: vec![
                                LegacyPartitionData {
                                    partition: 0,
                                    records: Some(Bytes::from_static(&[1, 2, 3])),
                                },
                                LegacyPartitionData {
                                    partition: 5,
                                    records: None,
                                },
                            ],
                        },
                        LegacyTopicData {
                            name: String::new(),
                            partitions: vec![],
                        },
                    ],
                }
            );
            assert_eq!(encode_request(&req), raw);
        }
    }

    #[test]
    fn rejects_bad_requests() {
        let ok = [0, 1, 0, 0, 0, 100, 0, 0, 0, 0];
        assert!(decode_produce_v0_2(&mut Bytes::copy_from_slice(&ok), 0).is_ok());
        assert_eq!(
            decode_produce_v0_2(&mut Bytes::copy_from_slice(&ok), 3),
            Err(LegacyProduceError::UnsupportedVersion(3))
        );
        assert_eq!(
            decode_produce_v0_2(&mut Bytes::copy_from_slice(&ok), -1),
            Err(LegacyProduceError::UnsupportedVersion(-1))
        );
        // Every strict prefix is truncated.
        for cut in 0..ok.len() {
            assert!(matches!(
                decode_produce_v0_2(&mut Bytes::copy_from_slice(&ok[..cut]), 1),
                Err(LegacyProduceError::Truncated { .. })
            ));
        }
        // Trailing byte.
        let mut extra = ok.to_vec();
        extra.push(0);
        assert_eq!(
            decode_produce_v0_2(&mut Bytes::from(extra), 2),
            Err(LegacyProduceError::TrailingBytes(1))
        );
        // Huge topic count must not allocate.
        let huge = [0, 1, 0, 0, 0, 100, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            decode_produce_v0_2(&mut Bytes::copy_from_slice(&huge), 0),
            Err(LegacyProduceError::BadCount {
                what: "topic",
                count: i32::MAX,
                remaining: 6
            })
        );
        // Negative topic count.
        let neg = [0, 1, 0, 0, 0, 100, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            decode_produce_v0_2(&mut Bytes::copy_from_slice(&neg), 0),
            Err(LegacyProduceError::Negative { .. })
        ));
        // Huge partition count.
        let parts = [
            0, 1, 0, 0, 0, 100, 0, 0, 0, 1, 0, 1, b't', 0x10, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert!(matches!(
            decode_produce_v0_2(&mut Bytes::copy_from_slice(&parts), 0),
            Err(LegacyProduceError::BadCount {
                what: "partition",
                ..
            })
        ));
        // Records length beyond the body, and -2.
        let base = [
            0, 1, 0, 0, 0, 100, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0,
        ];
        let mut long = base.to_vec();
        long.extend_from_slice(&[0, 0, 0, 9, 1, 2]);
        assert_eq!(
            decode_produce_v0_2(&mut Bytes::from(long), 0),
            Err(LegacyProduceError::Truncated { what: "records" })
        );
        let mut neg = base.to_vec();
        neg.extend_from_slice(&[0xff, 0xff, 0xff, 0xfe]);
        assert!(matches!(
            decode_produce_v0_2(&mut Bytes::from(neg), 0),
            Err(LegacyProduceError::Negative { value: -2, .. })
        ));
        // Negative name length, and a name that is not UTF-8.
        let neg_name = [0, 1, 0, 0, 0, 100, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0];
        assert!(matches!(
            decode_produce_v0_2(&mut Bytes::copy_from_slice(&neg_name), 0),
            Err(LegacyProduceError::Negative { value: -1, .. })
        ));
        let bad_name = [0, 1, 0, 0, 0, 100, 0, 0, 0, 1, 0, 1, 0xff, 0, 0, 0, 0];
        assert_eq!(
            decode_produce_v0_2(&mut Bytes::copy_from_slice(&bad_name), 0),
            Err(LegacyProduceError::BadUtf8)
        );
    }

    #[test]
    fn encodes_responses_byte_exact() {
        let topics = vec![(
            "ab".to_owned(),
            vec![LegacyPartitionResponse {
                partition: 1,
                error_code: 2,
                base_offset: 3,
                log_append_time_ms: 4,
            }],
        )];
        let v0: &[u8] = &[
            0, 0, 0, 1, 0, 2, b'a', b'b', 0, 0, 0, 1, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3,
        ];
        assert_eq!(&encode_produce_response_v0_2(0, &topics, 9)[..], v0);
        let mut v1 = v0.to_vec();
        v1.extend_from_slice(&[0, 0, 0, 9]);
        assert_eq!(&encode_produce_response_v0_2(1, &topics, 9)[..], &v1[..]);
        let mut v2 = v0.to_vec();
        v2.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 9]);
        assert_eq!(&encode_produce_response_v0_2(2, &topics, 9)[..], &v2[..]);
        assert_eq!(&encode_produce_response_v0_2(0, &[], 9)[..], &[0, 0, 0, 0]);
    }

    fn arb_request() -> impl Strategy<Value = LegacyProduceRequest> {
        let partition = (
            any::<i32>(),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        )
            .prop_map(|(partition, records)| LegacyPartitionData {
                partition,
                records: records.map(Bytes::from),
            });
        let topic = ("[a-z._-]{0,20}", proptest::collection::vec(partition, 0..4))
            .prop_map(|(name, partitions)| LegacyTopicData { name, partitions });
        (
            any::<i16>(),
            any::<i32>(),
            proptest::collection::vec(topic, 0..4),
        )
            .prop_map(|(acks, timeout_ms, topics)| LegacyProduceRequest {
                acks,
                timeout_ms,
                topics,
            })
    }

    fn arb_response() -> impl Strategy<Value = Topics> {
        let part = (any::<i32>(), any::<i16>(), any::<i64>(), any::<i64>()).prop_map(
            |(partition, error_code, base_offset, log_append_time_ms)| LegacyPartitionResponse {
                partition,
                error_code,
                base_offset,
                log_append_time_ms,
            },
        );
        proptest::collection::vec(
            ("[a-z._-]{0,20}", proptest::collection::vec(part, 0..4)),
            0..4,
        )
    }

    proptest! {
        #[test]
        fn request_round_trips(req in arb_request(), version in 0i16..3) {
            let mut body = Bytes::from(encode_request(&req));
            prop_assert_eq!(decode_produce_v0_2(&mut body, version), Ok(req));
            prop_assert!(body.is_empty());
        }

        #[test]
        fn response_round_trips(topics in arb_response(), version in 0i16..3, throttle in any::<i32>()) {
            let encoded = encode_produce_response_v0_2(version, &topics, throttle);
            let (decoded, t) = decode_response(version, &encoded);
            let expected: Topics = topics
                .iter()
                .map(|(n, ps)| {
                    let ps = ps
                        .iter()
                        .map(|p| LegacyPartitionResponse {
                            log_append_time_ms: if version >= 2 { p.log_append_time_ms } else { -1 },
                            ..*p
                        })
                        .collect();
                    (n.clone(), ps)
                })
                .collect();
            prop_assert_eq!(decoded, expected);
            prop_assert_eq!(t, if version >= 1 { throttle } else { 0 });
        }

        #[test]
        fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), version in -1i16..4) {
            let _ = decode_produce_v0_2(&mut Bytes::from(data), version);
        }

        #[test]
        fn decode_never_panics_on_mutated_requests(
            req in arb_request(),
            idx in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut raw = encode_request(&req);
            let i = idx.index(raw.len());
            raw[i] = byte;
            let _ = decode_produce_v0_2(&mut Bytes::from(raw), 1);
        }
    }
}
