//! Produce request bodies (v3 to v9) encoded without copying their record batches: the body is
//! a list of segments, the small fields between the batches in their own buffers and each batch
//! as it is, for one vectored write ([`super::connection::Connection::send_segments`]).

use bytes::{BufMut, Bytes, BytesMut};

/// The first and last Produce versions encoded here (record batches v2; v9 is flexible).
pub const MIN_VERSION: i16 = 3;
pub const MAX_VERSION: i16 = 9;
const FIRST_FLEXIBLE: i16 = 9;

/// One topic's batches: (partition, batch).
pub struct TopicBatches<'a> {
    pub topic: &'a str,
    pub batches: Vec<(i32, Bytes)>,
}

/// Segments of a body under construction.
struct Segments {
    done: Vec<Bytes>,
    open: BytesMut,
    flexible: bool,
}

impl Segments {
    /// A length (array count, string or bytes length): compact (unsigned varint of n + 1) in
    /// flexible versions, else `i16`/`i32` as `wide` says.
    fn len(&mut self, n: usize, wide: bool) {
        if self.flexible {
            put_uvarint(&mut self.open, n as u64 + 1);
        } else if wide {
            self.open.put_i32(n as i32);
        } else {
            self.open.put_i16(n as i16);
        }
    }

    fn string(&mut self, s: &str) {
        self.len(s.len(), false);
        self.open.put_slice(s.as_bytes());
    }

    fn null_string(&mut self) {
        if self.flexible {
            put_uvarint(&mut self.open, 0);
        } else {
            self.open.put_i16(-1);
        }
    }

    fn no_tagged_fields(&mut self) {
        if self.flexible {
            put_uvarint(&mut self.open, 0);
        }
    }

    /// A bytes field whose content is its own segment.
    fn bytes(&mut self, b: Bytes) {
        self.len(b.len(), true);
        self.done.push(self.open.split().freeze());
        self.done.push(b);
    }

    fn finish(mut self) -> Vec<Bytes> {
        if !self.open.is_empty() {
            self.done.push(self.open.freeze());
        }
        self.done
    }
}

fn put_uvarint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// The body of a Produce request at `version` (between [`MIN_VERSION`] and [`MAX_VERSION`]),
/// no transactional id.
pub fn encode_body(
    version: i16,
    acks: i16,
    timeout_ms: i32,
    topics: Vec<TopicBatches<'_>>,
) -> Vec<Bytes> {
    let mut out = Segments {
        done: Vec::with_capacity(2 + 2 * topics.iter().map(|t| t.batches.len()).sum::<usize>()),
        open: BytesMut::with_capacity(256),
        flexible: version >= FIRST_FLEXIBLE,
    };
    out.null_string();
    out.open.put_i16(acks);
    out.open.put_i32(timeout_ms);
    out.len(topics.len(), true);
    for t in topics {
        out.string(t.topic);
        out.len(t.batches.len(), true);
        for (partition, batch) in t.batches {
            out.open.put_i32(partition);
            out.bytes(batch);
            out.no_tagged_fields();
        }
        out.no_tagged_fields();
    }
    out.no_tagged_fields();
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_request::{
        PartitionProduceData, ProduceRequest, TopicProduceData,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    /// The same request through kafka-protocol's encoder, for comparison.
    fn reference(version: i16, topics: &[(&str, Vec<(i32, Bytes)>)]) -> Vec<u8> {
        let mut req = ProduceRequest::default();
        req.acks = -1;
        req.timeout_ms = 30_000;
        req.topic_data = topics
            .iter()
            .map(|(name, batches)| {
                let mut t = TopicProduceData::default();
                t.name = TopicName(StrBytes::from_string(name.to_string()));
                t.partition_data = batches
                    .iter()
                    .map(|(p, b)| {
                        let mut d = PartitionProduceData::default();
                        d.index = *p;
                        d.records = Some(b.clone());
                        d
                    })
                    .collect();
                t
            })
            .collect();
        let mut out = BytesMut::new();
        req.encode(&mut out, version).expect("encode");
        out.to_vec()
    }

    #[test]
    fn matches_kafka_protocols_encoding_in_every_version() {
        let big = Bytes::from(vec![7u8; 300]);
        let topics = vec![
            ("orders", vec![(0, Bytes::from_static(b"abc")), (3, big)]),
            ("t", vec![(1, Bytes::new())]),
        ];
        for version in MIN_VERSION..=MAX_VERSION {
            let ours: Vec<TopicBatches<'_>> = topics
                .iter()
                .map(|(topic, batches)| TopicBatches {
                    topic,
                    batches: batches.clone(),
                })
                .collect();
            let segments = encode_body(version, -1, 30_000, ours);
            assert_eq!(
                segments.concat(),
                reference(version, &topics),
                "version {version}"
            );
        }
    }
}
