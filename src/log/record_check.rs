//! What an append checks and rewrites inside batches when the topic asks for it (Kafka's
//! LogValidator, for RecordBatch v2): every record of a `cleanup.policy=compact` topic needs a
//! key; CreateTime timestamps must lie within `message.timestamp.before/after.max.ms` of the
//! broker's clock; batches whose codec is not `compression.type`'s are recompressed. With
//! Kafka's defaults none of this runs and batches are stored as sent.
//!
//! Records are walked only as far as the key: length, attributes, timestamp delta, offset
//! delta, key length. A compressed batch is decompressed first, which is CPU work for a
//! blocking thread ([`needs_thread`] says when). Recompression keeps the batch header — base
//! sequence, producer id and epoch, transactional flag, timestamps — and replaces the records
//! section, so idempotent batches keep their producer fields as in Kafka.

use crate::log::config::LogConfig;
use crate::protocol::codecs::{compress_records, decompress_records};
use crate::protocol::record_batch::{
    self, BatchHeader, Compression, TimestampType, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN,
    BATCH_LENGTH_OFFSET, COMPRESSION_CODEC_MASK, CRC_OFFSET, LOG_OVERHEAD,
};
use crate::protocol::varint::{get_varint, get_varlong};

/// Largest records section a compressed batch may decompress to (a bound on what one
/// produce can make the broker allocate).
pub const MAX_DECOMPRESSED: usize = 64 << 20;

/// Kafka's "no timestamp" (-1): never out of range.
const NO_TIMESTAMP: i64 = -1;

/// One invalid record: its index in its batch and why (KIP-467's `record_errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// Why the batches of one append are refused; the whole append is, as in Kafka.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordCheckError {
    #[error("One or more records have been rejected due to invalid timestamp")]
    InvalidTimestamp(Vec<RecordError>),
    #[error("One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: {}", .0.len(), first_three(.0))]
    InvalidRecord(Vec<RecordError>),
    /// The records of a batch cannot be read (or decompressed, or recompressed).
    #[error("{0}")]
    Corrupt(String),
}

impl RecordCheckError {
    /// The per-record errors to answer with.
    pub fn record_errors(&self) -> &[RecordError] {
        match self {
            RecordCheckError::InvalidTimestamp(e) | RecordCheckError::InvalidRecord(e) => e,
            RecordCheckError::Corrupt(_) => &[],
        }
    }
}

fn first_three(errors: &[RecordError]) -> String {
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                e.batch_index, e.message
            )
        })
        .collect();
    format!("[{}]", shown.join(", "))
}

/// What the checks look at, from a topic's config.
struct Rules {
    compact: bool,
    /// `[now - before, now + after]` for CreateTime topics, `None` when unbounded.
    timestamp_range: Option<(i64, i64)>,
}

impl Rules {
    fn new(config: &LogConfig, now_ms: i64) -> Rules {
        let (before, after) = config.timestamp_bounds();
        let bounded = before != i64::MAX || after != i64::MAX;
        Rules {
            compact: config.cleanup_policy.compact,
            timestamp_range: (bounded
                && config.message_timestamp_type == TimestampType::CreateTime)
                .then(|| (now_ms.saturating_sub(before), now_ms.saturating_add(after))),
        }
    }

    fn walks_records(&self) -> bool {
        self.compact || self.timestamp_range.is_some()
    }
}

/// The batches of `records`, as far as their headers parse (the log rejects the rest).
fn headers(records: &[u8]) -> impl Iterator<Item = (usize, BatchHeader)> + '_ {
    let mut position = 0;
    std::iter::from_fn(move || {
        let h = BatchHeader::parse(records.get(position..)?).ok()?;
        let at = position;
        position += h.total_len();
        (position <= records.len()).then_some((at, h))
    })
}

/// Whether checking `records` needs a blocking thread: a compressed batch to look into, or a
/// batch to recompress.
pub fn needs_thread(records: &[u8], config: &LogConfig, now_ms: i64) -> bool {
    let rules = Rules::new(config, now_ms);
    headers(records).any(|(_, h)| {
        let Ok(codec) = h.compression() else {
            return false;
        };
        config.compression.target(codec) != codec
            || (codec != Compression::None && rules.walks_records())
    })
}

/// Checks the records of every batch and recompresses those whose codec differs from the
/// topic's. `Ok(None)`: store `records` as they are; `Ok(Some(bytes))`: store `bytes`.
/// Batches that do not parse or fail their CRC are left for the log to reject.
pub fn check_records(
    records: &[u8],
    config: &LogConfig,
    now_ms: i64,
    topic_partition: &str,
) -> Result<Option<Vec<u8>>, RecordCheckError> {
    let rules = Rules::new(config, now_ms);
    let mut rewritten: Option<Vec<u8>> = None;
    let mut end = 0;
    for (at, header) in headers(records) {
        let batch = &records[at..at + header.total_len()];
        end = at + header.total_len();
        if record_batch::validate(batch).is_err() {
            return Ok(None);
        }
        let Ok(codec) = header.compression() else {
            return Ok(None);
        };
        let target = config.compression.target(codec);
        let section = &batch[BATCH_HEADER_LEN..];
        let plain = if codec == Compression::None || (target == codec && !rules.walks_records()) {
            std::borrow::Cow::Borrowed(section)
        } else {
            std::borrow::Cow::Owned(
                decompress_records(codec.id(), section, MAX_DECOMPRESSED).map_err(|e| {
                    RecordCheckError::Corrupt(format!("the records of a {codec:?} batch: {e}"))
                })?,
            )
        };
        if rules.walks_records() {
            check_batch(&header, &plain, &rules, topic_partition)?;
        }
        // Copied only from the first batch that changes.
        if target != codec {
            let out = rewritten.get_or_insert_with(|| records[..at].to_vec());
            out.extend_from_slice(&recompress(batch, &plain, target)?);
        } else if let Some(out) = &mut rewritten {
            out.extend_from_slice(batch);
        }
    }
    if let Some(out) = &mut rewritten {
        out.extend_from_slice(&records[end..]);
    }
    Ok(rewritten)
}

/// Walks the records of one batch (`plain`: its records section, uncompressed).
fn check_batch(
    header: &BatchHeader,
    plain: &[u8],
    rules: &Rules,
    topic_partition: &str,
) -> Result<(), RecordCheckError> {
    let corrupt =
        |i: i32| RecordCheckError::Corrupt(format!("record {i} of a batch cannot be read"));
    let mut timestamp_errors = Vec::new();
    let mut key_errors = Vec::new();
    let mut pos = 0usize;
    for i in 0..header.record_count.max(0) {
        let (len, n) = get_varint(&plain[pos..]).map_err(|_| corrupt(i))?;
        let body_start = pos + n;
        let body_end = usize::try_from(len)
            .ok()
            .and_then(|l| body_start.checked_add(l))
            .filter(|e| *e <= plain.len())
            .ok_or_else(|| corrupt(i))?;
        let body = &plain[body_start..body_end];
        // attributes (1 byte), timestamp delta, offset delta, key length.
        let mut p = 1usize;
        let (ts_delta, n) = body
            .get(p..)
            .and_then(|b| get_varlong(b).ok())
            .ok_or_else(|| corrupt(i))?;
        p += n;
        let (offset_delta, n) = body
            .get(p..)
            .and_then(|b| get_varint(b).ok())
            .ok_or_else(|| corrupt(i))?;
        p += n;
        let (key_len, _) = body
            .get(p..)
            .and_then(|b| get_varint(b).ok())
            .ok_or_else(|| corrupt(i))?;
        if rules.compact && key_len < 0 {
            key_errors.push(RecordError {
                batch_index: i,
                message: format!(
                    "Compacted topic cannot accept message without key in topic partition {topic_partition}."
                ),
            });
        }
        if let Some((low, high)) = rules.timestamp_range {
            let timestamp = header.base_timestamp.wrapping_add(ts_delta);
            if timestamp != NO_TIMESTAMP && (timestamp < low || timestamp > high) {
                timestamp_errors.push(RecordError {
                    batch_index: i,
                    message: format!(
                        "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{low}, {high}]",
                        header.base_offset.wrapping_add(i64::from(offset_delta))
                    ),
                });
            }
        }
        pos = body_end;
    }
    // Kafka reports INVALID_TIMESTAMP when any record has a bad timestamp.
    if !timestamp_errors.is_empty() {
        timestamp_errors.extend(key_errors);
        timestamp_errors.sort_by_key(|e| e.batch_index);
        return Err(RecordCheckError::InvalidTimestamp(timestamp_errors));
    }
    if !key_errors.is_empty() {
        return Err(RecordCheckError::InvalidRecord(key_errors));
    }
    Ok(())
}

/// `batch` with its records section (`plain`, uncompressed) compressed with `target`.
fn recompress(
    batch: &[u8],
    plain: &[u8],
    target: Compression,
) -> Result<Vec<u8>, RecordCheckError> {
    let section = compress_records(target.id(), plain)
        .map_err(|e| RecordCheckError::Corrupt(format!("recompressing with {target:?}: {e}")))?;
    with_records_section(&batch[..BATCH_HEADER_LEN], &section, target)
        .ok_or_else(|| RecordCheckError::Corrupt("recompressed batch too large".to_string()))
}

/// A batch of `header` (its first [`BATCH_HEADER_LEN`] bytes) and `section`, records encoded
/// with `codec`: the same header with the codec bits, length and CRC rewritten. `None` if
/// the batch would be too large for its length field.
pub fn with_records_section(header: &[u8], section: &[u8], codec: Compression) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(BATCH_HEADER_LEN + section.len());
    out.extend_from_slice(header.get(..BATCH_HEADER_LEN)?);
    out.extend_from_slice(section);
    let attributes = i16::from_be_bytes([out[ATTRIBUTES_OFFSET], out[ATTRIBUTES_OFFSET + 1]]);
    let attributes = (attributes & !COMPRESSION_CODEC_MASK) | i16::from(codec.id());
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let length = i32::try_from(out.len() - LOG_OVERHEAD).ok()?;
    out[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    let crc = record_batch::compute_crc(&out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::config::{CleanupPolicy, TopicCompression};
    use crate::protocol::batch_builder::BatchBuilder;
    use crate::protocol::decompressed_records::decode_records_decompressed;

    fn batch(keys: &[Option<&[u8]>], timestamps: &[i64]) -> Vec<u8> {
        let mut b = BatchBuilder::new(timestamps[0]).producer(7, 3, 42);
        for (k, t) in keys.iter().zip(timestamps) {
            b.push(*k, Some(b"v"), *t, &[]);
        }
        b.build().to_vec()
    }

    fn compact() -> LogConfig {
        LogConfig {
            cleanup_policy: CleanupPolicy {
                delete: false,
                compact: true,
            },
            ..LogConfig::default()
        }
    }

    #[test]
    fn compacted_topics_need_keys() {
        let b = batch(&[Some(b"k"), None, Some(b"k"), None], &[1, 2, 3, 4]);
        let e = check_records(&b, &compact(), 0, "t-0").unwrap_err();
        let idx: Vec<i32> = e.record_errors().iter().map(|e| e.batch_index).collect();
        assert_eq!(idx, [1, 3]);
        assert!(e.to_string().contains("2 record errors"), "{e}");
        assert!(e.record_errors()[0].message.contains("topic partition t-0"));
        let ok = batch(&[Some(b"k")], &[1]);
        assert_eq!(check_records(&ok, &compact(), 0, "t-0"), Ok(None));
        assert!(
            !needs_thread(&ok, &compact(), 0),
            "uncompressed: walked inline"
        );
    }

    #[test]
    fn timestamps_out_of_range_are_invalid() {
        let config = LogConfig {
            message_timestamp_before_max_ms: 100,
            message_timestamp_after_max_ms: 10,
            ..LogConfig::default()
        };
        let now = 1_000;
        let b = batch(&[None, None, None, None], &[899, 900, 1010, 1011]);
        let e = check_records(&b, &config, now, "t-0").unwrap_err();
        assert!(matches!(e, RecordCheckError::InvalidTimestamp(_)));
        let idx: Vec<i32> = e.record_errors().iter().map(|e| e.batch_index).collect();
        assert_eq!(idx, [0, 3]);
        assert!(e.record_errors()[0].message.contains("within [900, 1010]"));
        // LogAppendTime topics take any producer timestamp.
        let lat = LogConfig {
            message_timestamp_type: TimestampType::LogAppendTime,
            ..config.clone()
        };
        assert_eq!(check_records(&b, &lat, now, "t-0"), Ok(None));
        // The deprecated difference bound applies where before/after are unset.
        let diff = LogConfig {
            message_timestamp_difference_max_ms: 50,
            ..LogConfig::default()
        };
        let e = check_records(&b, &diff, now, "t-0").unwrap_err();
        let idx: Vec<i32> = e.record_errors().iter().map(|e| e.batch_index).collect();
        assert_eq!(idx, [0, 1], "within [950, 1050]");
    }

    #[test]
    fn recompression_keeps_records_and_producer_fields() {
        let plain = batch(&[Some(b"a"), None, Some(b"c")], &[5, 6, 7]);
        let original = decode_records_decompressed(&plain, 1 << 20).expect("decode");
        let mut current = plain.clone();
        for target in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
            Compression::None,
        ] {
            let config = LogConfig {
                compression: TopicCompression::Codec(target),
                ..LogConfig::default()
            };
            assert!(needs_thread(&current, &config, 0));
            let out = check_records(&current, &config, 0, "t-0")
                .expect("valid")
                .expect("rewritten");
            let h = record_batch::validate_exact(&out).expect("valid batch");
            assert_eq!(h.compression(), Ok(target));
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (7, 3, 42)
            );
            assert_eq!(h.record_count, 3);
            let decoded = decode_records_decompressed(&out, 1 << 20).expect("decode");
            assert_eq!(decoded, original, "{target:?}");
            // Already in the topic's codec: stored as is.
            assert_eq!(check_records(&out, &config, 0, "t-0"), Ok(None));
            current = out;
        }
        // Keys are checked inside compressed batches too.
        let gzip = LogConfig {
            compression: TopicCompression::Codec(Compression::Gzip),
            ..LogConfig::default()
        };
        let compressed = check_records(&plain, &gzip, 0, "t-0").unwrap().unwrap();
        assert!(needs_thread(&compressed, &compact(), 0));
        let e = check_records(&compressed, &compact(), 0, "t-0").unwrap_err();
        assert_eq!(e.record_errors()[0].batch_index, 1);
    }

    #[test]
    fn garbage_is_left_to_the_log() {
        assert_eq!(check_records(b"nonsense", &compact(), 0, "t-0"), Ok(None));
        let mut b = batch(&[None], &[1]);
        let last = b.len() - 1;
        b[last] ^= 0xff;
        assert_eq!(check_records(&b, &compact(), 0, "t-0"), Ok(None), "bad CRC");
    }
}
