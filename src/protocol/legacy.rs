//! Legacy Kafka message sets (message format magic 0 and 1) and their conversion to one
//! RecordBatch v2.
//!
//! Old clients (librdkafka before it enables Produce v3, e.g. Debian's kcat with librdkafka 2.0.2)
//! send Produce v0-v2 requests whose partition data is a *MessageSet*, not a RecordBatch. The
//! broker stores only RecordBatch v2, so such a set is parsed, fully validated (every message
//! CRC, every inner message of a compressed wrapper) and rewritten as one v2 batch.
//!
//! Layout (all big endian):
//!
//! ```text
//! MessageSet  := (offset i64, message_size i32, Message)*
//! Message     := crc u32          CRC32 (IEEE) of magic..end of the message
//!                magic i8         0 or 1
//!                attributes i8    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
//!                                 bit 3 timestamp type (magic 1 only; set = LogAppendTime)
//!                timestamp i64    magic 1 only
//!                key bytes        i32 length, -1 = null
//!                value bytes      i32 length, -1 = null
//! ```
//!
//! A compressed message (a "wrapper") has a value that is a whole compressed MessageSet of
//! uncompressed messages with the wrapper's magic. Kafka allows exactly one level of nesting, so
//! a compressed message inside a wrapper is rejected ([`LegacyError::Nested`]). Inner messages of
//! magic 1 wrappers carry relative offsets (0..n-1); offsets are read but not used, since the
//! broker assigns offsets anyway. The wrapper's timestamp replaces the inner ones when the wrapper
//! says LogAppendTime.
//!
//! Compression framing accepted on input:
//! - gzip: a gzip stream (several concatenated members are accepted, as Java's
//!   `GZIPInputStream` does).
//! - snappy: either the xerial framing the Java client writes (`0x82 "SNAPPY" 0x00`, version
//!   i32, compatible version i32, then blocks of `[i32 length][raw snappy block]`) or one raw
//!   snappy block (what librdkafka writes).
//! - lz4: an LZ4 frame (magic `0x184D2204`). Kafka 0.8-0.9 (magic 0) computed the frame header
//!   checksum over the frame magic *and* the descriptor instead of the descriptor alone
//!   (KAFKA-3160), and librdkafka still writes that broken checksum for magic 0 messages. lz4_flex
//!   verifies the header checksum and has no option to skip it, so for magic 0 the header
//!   checksum byte is recomputed correctly before decoding (the message CRC already protects the
//!   bytes). Magic 1 frames must carry the correct checksum, as Kafka 0.10+ requires.
//!
//! Every decompression is capped by a budget shared by the whole set (`max_decompressed`), so a
//! small compressed message cannot expand into an unbounded allocation.

use bytes::Bytes;

use super::batch_builder::BatchBuilder;
use super::codecs::{
    compress_records, decompress_records, lz4_decompress, CODEC_GZIP, CODEC_LZ4, CODEC_NONE,
    CODEC_SNAPPY,
};
pub use super::legacy_error::LegacyError;
use super::legacy_reader::Reader;
use super::record_batch::{
    compute_crc, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, BATCH_LENGTH_OFFSET, CRC_OFFSET,
    LOG_OVERHEAD, MAX_BATCH_LEN,
};

/// Attribute bits 0-2 of a legacy message: compression codec.
const CODEC_MASK: i8 = 0x07;
/// Attribute bit 3 of a magic 1 message: timestamp type (set = LogAppendTime).
const TIMESTAMP_TYPE_MASK: i8 = 0x08;

/// offset (8) + message_size (4) in front of every message.
pub const MESSAGE_LOG_OVERHEAD: usize = 12;
/// Smallest magic 0 message: crc 4 + magic 1 + attributes 1 + key length 4 + value length 4.
pub const MESSAGE_OVERHEAD_V0: usize = 14;
/// Smallest magic 1 message: the magic 0 overhead plus the timestamp (8).
pub const MESSAGE_OVERHEAD_V1: usize = 22;

/// One record of a legacy message set, after flattening compressed wrappers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyRecord {
    /// The message timestamp (magic 1), the wrapper's timestamp when the wrapper is
    /// LogAppendTime, or `now_ms` for magic 0 messages, which have none.
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
}

/// A legacy message set rewritten as one RecordBatch v2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertedSet {
    /// Exactly one RecordBatch v2; passes [`crate::protocol::record_batch::validate_exact`].
    pub batch: Vec<u8>,
    /// Number of records in the batch.
    pub record_count: usize,
    /// Codec of the batch: the codec of the input set, 0 if it was uncompressed.
    pub codec: u8,
}

/// Parses and fully validates a legacy message set, flattening compressed wrappers.
///
/// Returns the records in order and the codec of the set (0 if no message was compressed; if
/// several wrappers use different codecs, the last one, as Kafka does). `max_decompressed` caps
/// the total number of decompressed bytes over all wrappers of the set; `now_ms` is the timestamp
/// given to magic 0 messages.
pub fn parse_message_set(
    data: &[u8],
    max_decompressed: usize,
    now_ms: i64,
) -> Result<(Vec<LegacyRecord>, u8), LegacyError> {
    let mut records = Vec::new();
    let codec = walk(
        data,
        max_decompressed,
        now_ms,
        &mut |timestamp, key, value| {
            records.push(LegacyRecord {
                timestamp,
                key: key.map(Bytes::copy_from_slice),
                value: value.map(Bytes::copy_from_slice),
            });
            Ok(())
        },
    )?;
    Ok((records, codec))
}

/// Converts a legacy message set to ONE RecordBatch v2.
///
/// The batch has base offset 0, partition leader epoch -1, no producer (id -1, epoch -1, base
/// sequence -1), CreateTime, offset deltas 0..n-1 in message order, `baseTimestamp` = the first
/// record's timestamp, and a valid CRC32C. Timestamps are those of [`parse_message_set`]. When the
/// input was compressed, the records are compressed with the same codec: gzip as a gzip stream,
/// snappy in xerial framing (as the Java client writes it; librdkafka reads it too), lz4 as a
/// standard LZ4 frame with independent 64 KiB blocks and no checksums (what Kafka's Java
/// `KafkaLZ4BlockOutputStream` writes and reads).
pub fn convert_message_set(
    data: &[u8],
    max_decompressed: usize,
    now_ms: i64,
) -> Result<ConvertedSet, LegacyError> {
    let mut builder: Option<BatchBuilder> = None;
    let mut record_count = 0usize;
    let codec = walk(
        data,
        max_decompressed,
        now_ms,
        &mut |timestamp, key, value| {
            builder
                .get_or_insert_with(|| BatchBuilder::new(timestamp))
                .try_push(key, value, timestamp, &[])
                .map_err(|_| LegacyError::TooLarge {
                    limit: MAX_BATCH_LEN,
                })?;
            record_count += 1;
            Ok(())
        },
    )?;
    let Some(builder) = builder else {
        return Err(LegacyError::Empty);
    };
    let plain = builder.build();
    let batch = if codec == CODEC_NONE {
        Vec::from(plain)
    } else {
        compress_batch(&plain, codec)?
    };
    Ok(ConvertedSet {
        batch,
        record_count,
        codec,
    })
}

/// One message of a set, borrowed from the buffer being parsed.
struct RawMessage<'a> {
    /// Position of the entry (its offset field) in the buffer.
    at: usize,
    magic: i8,
    attributes: i8,
    /// Magic 1 only.
    timestamp: Option<i64>,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

impl RawMessage<'_> {
    fn codec(&self) -> u8 {
        (self.attributes & CODEC_MASK) as u8
    }

    /// The message's own timestamp, or `now_ms` for magic 0.
    fn timestamp_or(&self, now_ms: i64) -> i64 {
        self.timestamp.unwrap_or(now_ms)
    }
}

/// Reads the next `offset, message_size, message` entry and validates the message: size, magic,
/// CRC and that key and value fill the message exactly.
fn next_message<'a>(r: &mut Reader<'a>) -> Result<RawMessage<'a>, LegacyError> {
    let at = r.pos;
    let _offset = r.i64()?;
    let size_at = r.pos;
    let size = r.i32()?;
    let size = usize::try_from(size)
        .ok()
        .filter(|&s| s >= MESSAGE_OVERHEAD_V0)
        .ok_or(LegacyError::Malformed {
            at: size_at,
            reason: "message size below the minimum message size",
        })?;
    let body_at = r.pos;
    let body = r.take(size)?;

    // Checked before the CRC so that a RecordBatch (magic 2 at the same position) is reported as
    // such rather than as a CRC mismatch.
    let magic = body[4] as i8;
    if magic != 0 && magic != 1 {
        return Err(LegacyError::UnsupportedMagic(magic));
    }
    let stored = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let computed = crc32fast::hash(&body[4..]);
    if stored != computed {
        return Err(LegacyError::BadCrc {
            at,
            stored,
            computed,
        });
    }

    let inside = |e: LegacyError| match e {
        LegacyError::Truncated { at } => LegacyError::Malformed {
            at: body_at + at,
            reason: "message fields exceed the message size",
        },
        other => other,
    };
    let mut m = Reader::new(body);
    m.pos = 5;
    let attributes = m.i8().map_err(inside)?;
    let timestamp = if magic == 1 {
        Some(m.i64().map_err(inside)?)
    } else {
        None
    };
    let key = nullable_bytes(&mut m).map_err(inside)?;
    let value = nullable_bytes(&mut m).map_err(inside)?;
    if m.remaining() != 0 {
        return Err(LegacyError::Malformed {
            at: body_at + m.pos,
            reason: "bytes after the message value",
        });
    }
    Ok(RawMessage {
        at,
        magic,
        attributes,
        timestamp,
        key,
        value,
    })
}

/// An i32-length-prefixed byte string; -1 is null, other negative lengths are malformed.
fn nullable_bytes<'a>(r: &mut Reader<'a>) -> Result<Option<&'a [u8]>, LegacyError> {
    let at = r.pos;
    let len = r.i32()?;
    if len == -1 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| LegacyError::Malformed {
        at,
        reason: "negative key or value length",
    })?;
    r.take(len)
        .map(Some)
        .map_err(|_| LegacyError::Truncated { at })
}

/// Receives every record of a set in order: `(timestamp, key, value)`.
type Sink<'s> = dyn FnMut(i64, Option<&[u8]>, Option<&[u8]>) -> Result<(), LegacyError> + 's;

/// Remaining decompression allowance of one message set.
struct Budget {
    max: usize,
    left: usize,
}

/// Walks a message set, calling `sink(timestamp, key, value)` for every record in order
/// (wrappers flattened). Returns the codec of the set.
fn walk(
    data: &[u8],
    max_decompressed: usize,
    now_ms: i64,
    sink: &mut Sink<'_>,
) -> Result<u8, LegacyError> {
    if data.is_empty() {
        return Err(LegacyError::Empty);
    }
    let mut budget = Budget {
        max: max_decompressed,
        left: max_decompressed,
    };
    let mut set_codec = CODEC_NONE;
    let mut r = Reader::new(data);
    while r.remaining() > 0 {
        let msg = next_message(&mut r)?;
        match msg.codec() {
            CODEC_NONE => sink(msg.timestamp_or(now_ms), msg.key, msg.value)?,
            codec @ (CODEC_GZIP | CODEC_SNAPPY | CODEC_LZ4) => {
                walk_wrapper(&msg, codec, &mut budget, now_ms, sink)?;
                set_codec = codec;
            }
            other => return Err(LegacyError::UnsupportedCodec(other)),
        }
    }
    Ok(set_codec)
}

/// Decompresses a wrapper's value and feeds its inner messages to `sink`.
fn walk_wrapper(
    wrapper: &RawMessage<'_>,
    codec: u8,
    budget: &mut Budget,
    now_ms: i64,
    sink: &mut Sink<'_>,
) -> Result<(), LegacyError> {
    let Some(value) = wrapper.value else {
        return Err(LegacyError::Malformed {
            at: wrapper.at,
            reason: "compressed message with a null value",
        });
    };
    let inner = match codec {
        CODEC_LZ4 => lz4_decompress(value, wrapper.magic == 0, budget.left),
        _ => decompress_records(codec, value, budget.left),
    }
    .map_err(|e| match e {
        LegacyError::TooLarge { .. } => LegacyError::TooLarge { limit: budget.max },
        other => other,
    })?;
    budget.left = budget.left.saturating_sub(inner.len());
    if inner.is_empty() {
        return Err(LegacyError::Malformed {
            at: wrapper.at,
            reason: "compressed message holds no messages",
        });
    }

    let log_append_time = wrapper.attributes & TIMESTAMP_TYPE_MASK != 0;
    let wrapper_timestamp = match (log_append_time, wrapper.timestamp) {
        (true, Some(ts)) => Some(ts),
        _ => None,
    };
    let mut r = Reader::new(&inner);
    while r.remaining() > 0 {
        let msg = next_message(&mut r)?;
        if msg.codec() != CODEC_NONE {
            return Err(LegacyError::Nested);
        }
        if msg.magic != wrapper.magic {
            return Err(LegacyError::MagicMismatch {
                wrapper: wrapper.magic,
                inner: msg.magic,
            });
        }
        let timestamp = wrapper_timestamp.unwrap_or_else(|| msg.timestamp_or(now_ms));
        sink(timestamp, msg.key, msg.value)?;
    }
    Ok(())
}

/// Turns an uncompressed batch from [`BatchBuilder`] into the same batch with its records
/// section compressed by `codec`: attributes, `batchLength` and CRC32C are rewritten.
fn compress_batch(plain: &[u8], codec: u8) -> Result<Vec<u8>, LegacyError> {
    let (header, records) = plain.split_at(BATCH_HEADER_LEN.min(plain.len()));
    let compressed = compress_records(codec, records)?;
    let too_large = LegacyError::TooLarge {
        limit: MAX_BATCH_LEN,
    };
    let batch_length = (BATCH_HEADER_LEN - LOG_OVERHEAD)
        .checked_add(compressed.len())
        .and_then(|n| i32::try_from(n).ok())
        .ok_or(too_large)?;
    let mut out = Vec::with_capacity(BATCH_HEADER_LEN + compressed.len());
    out.extend_from_slice(header);
    out.extend_from_slice(&compressed);
    out[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&batch_length.to_be_bytes());
    // BatchBuilder writes attributes 0 (CreateTime, not transactional): only the codec is set.
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&i16::from(codec).to_be_bytes());
    let crc = compute_crc(&out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

#[cfg(test)]
#[path = "legacy_tests.rs"]
mod tests;
