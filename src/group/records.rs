//! Kafka's `__consumer_offsets` record schemas (OffsetCommitKey/Value, GroupMetadataKey/Value),
//! so the partition stays readable by Kafka tools and a log written by Kafka can be replayed.
//!
//! The key's leading version says what the record is: 0 and 1 are offset commits, 2 is group
//! metadata; newer record types (KIP-848 groups, share groups, ...) are reported as
//! [`RecordKey::Other`] so a loader can skip them. Values are written in the newest non-flexible
//! version; every version up to the first flexible one (4) is read.

use bytes::{BufMut, Bytes, BytesMut};

/// Why a record could not be decoded. Decoding never panics: every length is checked against
/// the bytes that are left.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("record ends early: {needed} more bytes needed at offset {at}")]
    Truncated { at: usize, needed: usize },
    #[error("invalid length {length} at offset {at}")]
    InvalidLength { at: usize, length: i64 },
    #[error("null where a value is required at offset {at}")]
    UnexpectedNull { at: usize },
    #[error("string at offset {at} is not UTF-8")]
    InvalidUtf8 { at: usize },
    #[error("{record} version {version} is not supported")]
    UnsupportedVersion { record: &'static str, version: i16 },
    #[error("varint at offset {at} is too long")]
    InvalidVarint { at: usize },
    #[error("__consumer_offsets partition {0} is not being loaded")]
    PartitionNotLoading(i32),
}

/// What a `__consumer_offsets` key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKey {
    OffsetCommit {
        group: String,
        topic: String,
        partition: i32,
    },
    GroupMetadata {
        group: String,
    },
    /// A record type this coordinator does not use (its key version).
    Other(i16),
}

/// A committed offset as stored in an OffsetCommitValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: i64,
    /// -1 when unknown (and in versions before 3).
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Only version 1 carries it: old clients' per-commit retention.
    pub expire_timestamp: Option<i64>,
}

/// One member as stored in a GroupMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadataValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's chosen protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A group's membership and generation as stored in a GroupMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// When the group entered its current state; -1 when unknown (versions before 2).
    pub current_state_timestamp: i64,
    pub members: Vec<MemberMetadataValue>,
}

const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
const GROUP_METADATA_KEY_VERSION: i16 = 2;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// The only version with an expire timestamp.
const OFFSET_COMMIT_VALUE_EXPIRING_VERSION: i16 = 1;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;
/// Versions from this one on use Kafka's compact ("flexible") encoding.
const FIRST_FLEXIBLE_VALUE_VERSION: i16 = 4;

pub fn encode_offset_commit_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut buf = BytesMut::with_capacity(2 + 2 + group.len() + 2 + topic.len() + 4);
    buf.put_i16(OFFSET_COMMIT_KEY_VERSION);
    put_string(&mut buf, group);
    put_string(&mut buf, topic);
    buf.put_i32(partition);
    buf.freeze()
}

pub fn encode_group_metadata_key(group: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(2 + 2 + group.len());
    buf.put_i16(GROUP_METADATA_KEY_VERSION);
    put_string(&mut buf, group);
    buf.freeze()
}

pub fn decode_key(bytes: &[u8]) -> Result<RecordKey, RecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    match version {
        0 | 1 => Ok(RecordKey::OffsetCommit {
            group: r.string()?,
            topic: r.string()?,
            partition: r.i32()?,
        }),
        2 => Ok(RecordKey::GroupMetadata { group: r.string()? }),
        other => Ok(RecordKey::Other(other)),
    }
}

impl OffsetCommitValue {
    /// Version 3, or version 1 when the offset carries an old-style expire timestamp (so a
    /// rewrite keeps its retention semantics).
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(2 + 8 + 4 + 2 + self.metadata.len() + 16);
        match self.expire_timestamp {
            Some(expire) => {
                buf.put_i16(OFFSET_COMMIT_VALUE_EXPIRING_VERSION);
                buf.put_i64(self.offset);
                put_string(&mut buf, &self.metadata);
                buf.put_i64(self.commit_timestamp);
                buf.put_i64(expire);
            }
            None => {
                buf.put_i16(OFFSET_COMMIT_VALUE_VERSION);
                buf.put_i64(self.offset);
                buf.put_i32(self.leader_epoch);
                put_string(&mut buf, &self.metadata);
                buf.put_i64(self.commit_timestamp);
            }
        }
        buf.freeze()
    }

    pub fn decode(bytes: &[u8]) -> Result<OffsetCommitValue, RecordError> {
        let mut r = Reader::new(bytes);
        let version = r.i16()?;
        if !(0..=FIRST_FLEXIBLE_VALUE_VERSION).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                record: "OffsetCommitValue",
                version,
            });
        }
        let flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION;
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.string_in(flexible)?;
        let commit_timestamp = r.i64()?;
        let expire_timestamp = if version == 1 { Some(r.i64()?) } else { None };
        if flexible {
            r.skip_tagged_fields()?;
        }
        Ok(OffsetCommitValue {
            offset,
            leader_epoch,
            metadata,
            commit_timestamp,
            expire_timestamp,
        })
    }
}

impl GroupMetadataValue {
    /// Version 3 (the newest non-flexible one).
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(64 + self.members.len() * 128);
        buf.put_i16(GROUP_METADATA_VALUE_VERSION);
        put_string(&mut buf, &self.protocol_type);
        buf.put_i32(self.generation);
        put_nullable_string(&mut buf, self.protocol.as_deref());
        put_nullable_string(&mut buf, self.leader.as_deref());
        buf.put_i64(self.current_state_timestamp);
        buf.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_string(&mut buf, &m.member_id);
            put_nullable_string(&mut buf, m.group_instance_id.as_deref());
            put_string(&mut buf, &m.client_id);
            put_string(&mut buf, &m.client_host);
            buf.put_i32(m.rebalance_timeout_ms);
            buf.put_i32(m.session_timeout_ms);
            put_bytes(&mut buf, &m.subscription);
            put_bytes(&mut buf, &m.assignment);
        }
        buf.freeze()
    }

    pub fn decode(bytes: &[u8]) -> Result<GroupMetadataValue, RecordError> {
        let mut r = Reader::new(bytes);
        let version = r.i16()?;
        if !(0..=FIRST_FLEXIBLE_VALUE_VERSION).contains(&version) {
            return Err(RecordError::UnsupportedVersion {
                record: "GroupMetadataValue",
                version,
            });
        }
        let flexible = version >= FIRST_FLEXIBLE_VALUE_VERSION;
        let protocol_type = r.string_in(flexible)?;
        let generation = r.i32()?;
        let protocol = r.nullable_string_in(flexible)?;
        let leader = r.nullable_string_in(flexible)?;
        let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
        let count = r.array_len_in(flexible)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            let member_id = r.string_in(flexible)?;
            let group_instance_id = if version >= 3 {
                r.nullable_string_in(flexible)?
            } else {
                None
            };
            let client_id = r.string_in(flexible)?;
            let client_host = r.string_in(flexible)?;
            let rebalance_timeout = if version >= 1 { Some(r.i32()?) } else { None };
            let session_timeout_ms = r.i32()?;
            let subscription = r.bytes_in(flexible)?;
            let assignment = r.bytes_in(flexible)?;
            if flexible {
                r.skip_tagged_fields()?;
            }
            members.push(MemberMetadataValue {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                // Version 0 predates the rebalance timeout: Kafka used the session timeout.
                rebalance_timeout_ms: rebalance_timeout.unwrap_or(session_timeout_ms),
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        if flexible {
            r.skip_tagged_fields()?;
        }
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}

fn put_string(buf: &mut BytesMut, s: &str) {
    // Kafka strings are at most i16::MAX bytes; longer ones are cut rather than corrupting the
    // length prefix (callers bound group ids, topics and metadata well below this).
    let bytes = &s.as_bytes()[..s.len().min(i16::MAX as usize)];
    buf.put_i16(bytes.len() as i16);
    buf.put_slice(bytes);
}

fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_string(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(b.len() as i32);
    buf.put_slice(b);
}

/// A bounds-checked cursor over big-endian Kafka primitives.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let left = self.bytes.len() - self.at;
        if n > left {
            return Err(RecordError::Truncated {
                at: self.at,
                needed: n - left,
            });
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, RecordError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, RecordError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, RecordError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    fn unsigned_varint(&mut self) -> Result<u64, RecordError> {
        let start = self.at;
        let mut value: u64 = 0;
        for shift in (0..35).step_by(7) {
            let [b] = self.array::<1>()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::InvalidVarint { at: start })
    }

    /// A length prefix: `None` for null, otherwise a length that fits in what is left.
    fn length(&mut self, raw: i64) -> Result<Option<usize>, RecordError> {
        if raw == -1 {
            return Ok(None);
        }
        let left = self.bytes.len() - self.at;
        match usize::try_from(raw) {
            Ok(n) if n <= left => Ok(Some(n)),
            Ok(n) => Err(RecordError::Truncated {
                at: self.at,
                needed: n - left,
            }),
            Err(_) => Err(RecordError::InvalidLength {
                at: self.at,
                length: raw,
            }),
        }
    }

    fn string_len(&mut self, flexible: bool) -> Result<Option<usize>, RecordError> {
        let raw = if flexible {
            // Compact: length + 1, 0 = null.
            self.unsigned_varint()? as i64 - 1
        } else {
            i64::from(self.i16()?)
        };
        self.length(raw)
    }

    fn utf8(&mut self, n: usize) -> Result<String, RecordError> {
        let at = self.at;
        let raw = self.take(n)?;
        String::from_utf8(raw.to_vec()).map_err(|_| RecordError::InvalidUtf8 { at })
    }

    fn nullable_string_in(&mut self, flexible: bool) -> Result<Option<String>, RecordError> {
        match self.string_len(flexible)? {
            Some(n) => Ok(Some(self.utf8(n)?)),
            None => Ok(None),
        }
    }

    fn string_in(&mut self, flexible: bool) -> Result<String, RecordError> {
        let at = self.at;
        self.nullable_string_in(flexible)?
            .ok_or(RecordError::UnexpectedNull { at })
    }

    fn string(&mut self) -> Result<String, RecordError> {
        self.string_in(false)
    }

    fn bytes_in(&mut self, flexible: bool) -> Result<Bytes, RecordError> {
        let at = self.at;
        let raw = if flexible {
            self.unsigned_varint()? as i64 - 1
        } else {
            i64::from(self.i32()?)
        };
        let n = self
            .length(raw)?
            .ok_or(RecordError::UnexpectedNull { at })?;
        Ok(Bytes::copy_from_slice(self.take(n)?))
    }

    /// An array's element count, bounded by the bytes left (every element takes at least one).
    fn array_len_in(&mut self, flexible: bool) -> Result<usize, RecordError> {
        let at = self.at;
        let raw = if flexible {
            self.unsigned_varint()? as i64 - 1
        } else {
            i64::from(self.i32()?)
        };
        self.length(raw)?.ok_or(RecordError::UnexpectedNull { at })
    }

    fn skip_tagged_fields(&mut self) -> Result<(), RecordError> {
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            let _tag = self.unsigned_varint()?;
            let size = self.unsigned_varint()? as i64;
            let n = self.length(size)?.unwrap_or(0);
            self.take(n)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_group() -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("c-1".into()),
            current_state_timestamp: 1_700_000_000_000,
            members: vec![
                MemberMetadataValue {
                    member_id: "c-1".into(),
                    group_instance_id: Some("instance-a".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout_ms: 300_000,
                    session_timeout_ms: 45_000,
                    subscription: Bytes::from_static(b"sub"),
                    assignment: Bytes::from_static(b"assign"),
                },
                MemberMetadataValue {
                    member_id: "c-2".into(),
                    group_instance_id: None,
                    client_id: "c".into(),
                    client_host: "/127.0.0.2".into(),
                    rebalance_timeout_ms: 60_000,
                    session_timeout_ms: 10_000,
                    subscription: Bytes::new(),
                    assignment: Bytes::new(),
                },
            ],
        }
    }

    #[test]
    fn keys_round_trip() {
        let key = encode_offset_commit_key("g", "topic", 3);
        assert_eq!(
            decode_key(&key).unwrap(),
            RecordKey::OffsetCommit {
                group: "g".into(),
                topic: "topic".into(),
                partition: 3
            }
        );
        let key = encode_group_metadata_key("my-group");
        assert_eq!(
            decode_key(&key).unwrap(),
            RecordKey::GroupMetadata {
                group: "my-group".into()
            }
        );
        assert_eq!(decode_key(&[0, 9, 1, 2]).unwrap(), RecordKey::Other(9));
    }

    #[test]
    fn offset_commit_key_is_kafkas_layout() {
        let key = encode_offset_commit_key("g", "t", 1);
        assert_eq!(&key[..], &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 1]);
        // Version 0 has the same fields.
        let v0 = [0, 0, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 1];
        assert!(matches!(
            decode_key(&v0).unwrap(),
            RecordKey::OffsetCommit { partition: 1, .. }
        ));
    }

    #[test]
    fn offset_value_round_trips_in_both_written_versions() {
        let current = OffsetCommitValue {
            offset: 42,
            leader_epoch: 5,
            metadata: "meta".into(),
            commit_timestamp: 1234,
            expire_timestamp: None,
        };
        assert_eq!(
            OffsetCommitValue::decode(&current.encode()).unwrap(),
            current
        );
        let expiring = OffsetCommitValue {
            leader_epoch: -1,
            expire_timestamp: Some(9999),
            ..current.clone()
        };
        let encoded = expiring.encode();
        assert_eq!(&encoded[..2], &[0, 1]);
        assert_eq!(OffsetCommitValue::decode(&encoded).unwrap(), expiring);
    }

    #[test]
    fn offset_value_reads_version_0_and_flexible_4() {
        let mut v0 = BytesMut::new();
        v0.put_i16(0);
        v0.put_i64(10);
        put_string(&mut v0, "m");
        v0.put_i64(77);
        let decoded = OffsetCommitValue::decode(&v0).unwrap();
        assert_eq!(
            decoded,
            OffsetCommitValue {
                offset: 10,
                leader_epoch: -1,
                metadata: "m".into(),
                commit_timestamp: 77,
                expire_timestamp: None
            }
        );
        let mut v4 = BytesMut::new();
        v4.put_i16(4);
        v4.put_i64(11);
        v4.put_i32(2);
        v4.put_u8(2); // compact string "x"
        v4.put_u8(b'x');
        v4.put_i64(88);
        v4.put_u8(1); // one tagged field
        v4.put_u8(0);
        v4.put_u8(1);
        v4.put_u8(0xff);
        let decoded = OffsetCommitValue::decode(&v4).unwrap();
        assert_eq!((decoded.offset, decoded.leader_epoch), (11, 2));
        assert_eq!(decoded.metadata, "x");
    }

    #[test]
    fn group_value_round_trips() {
        let group = sample_group();
        assert_eq!(GroupMetadataValue::decode(&group.encode()).unwrap(), group);
        let empty = GroupMetadataValue {
            protocol: None,
            leader: None,
            members: vec![],
            ..group
        };
        assert_eq!(GroupMetadataValue::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn group_value_reads_version_0() {
        let mut v0 = BytesMut::new();
        v0.put_i16(0);
        put_string(&mut v0, "consumer");
        v0.put_i32(3);
        put_string(&mut v0, "range");
        put_string(&mut v0, "m1");
        v0.put_i32(1);
        put_string(&mut v0, "m1");
        put_string(&mut v0, "client");
        put_string(&mut v0, "host");
        v0.put_i32(10_000);
        put_bytes(&mut v0, b"s");
        put_bytes(&mut v0, b"a");
        let decoded = GroupMetadataValue::decode(&v0).unwrap();
        assert_eq!(decoded.generation, 3);
        assert_eq!(decoded.current_state_timestamp, -1);
        assert_eq!(decoded.members[0].rebalance_timeout_ms, 10_000);
        assert_eq!(decoded.members[0].group_instance_id, None);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(decode_key(&[]).is_err());
        assert!(decode_key(&[0, 1, 0x7f, 0xff]).is_err());
        assert!(OffsetCommitValue::decode(&[0, 9]).is_err());
        let mut huge_array = BytesMut::new();
        huge_array.put_i16(3);
        put_string(&mut huge_array, "consumer");
        huge_array.put_i32(1);
        huge_array.put_i16(-1);
        huge_array.put_i16(-1);
        huge_array.put_i64(0);
        huge_array.put_i32(i32::MAX);
        assert!(matches!(
            GroupMetadataValue::decode(&huge_array),
            Err(RecordError::Truncated { .. })
        ));
        let mut null_type = BytesMut::new();
        null_type.put_i16(3);
        null_type.put_i16(-1);
        assert!(matches!(
            GroupMetadataValue::decode(&null_type),
            Err(RecordError::UnexpectedNull { .. })
        ));
    }

    #[test]
    fn every_prefix_of_a_valid_value_fails_cleanly() {
        let encoded = sample_group().encode();
        for n in 0..encoded.len() {
            assert!(GroupMetadataValue::decode(&encoded[..n]).is_err(), "{n}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_key(&bytes);
            let _ = OffsetCommitValue::decode(&bytes);
            let _ = GroupMetadataValue::decode(&bytes);
        }

        #[test]
        fn versioned_garbage_never_panics(
            version in 0i16..6,
            tail in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut bytes = version.to_be_bytes().to_vec();
            bytes.extend(tail);
            let _ = decode_key(&bytes);
            let _ = OffsetCommitValue::decode(&bytes);
            let _ = GroupMetadataValue::decode(&bytes);
        }
    }
}
