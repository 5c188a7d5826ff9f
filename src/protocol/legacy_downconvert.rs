//! Down-conversion of stored RecordBatch v2 data to legacy message sets (magic 0 or 1) for
//! Fetch v0–v3, as Kafka does with `message.downconversion.enable` (default true): fetch v0/v1
//! read magic 0, v2/v3 magic 1 (see [`super::legacy`] for the layout).
//!
//! What Kafka also does here: control batches are dropped (old clients cannot read them),
//! records below the fetch offset are skipped, headers are lost (magic < 2 has none), and a
//! LogAppendTime batch gives its messages the timestamp type bit and the batch's max
//! timestamp. Zstd cannot be expressed in a legacy message, so a zstd batch is refused
//! ([`DownConvertError::Zstd`], answered UNSUPPORTED_COMPRESSION_TYPE as Kafka does for fetches
//! before v10).
//!
//! Where we differ: Kafka re-compresses the converted messages with the batch's codec; we
//! write them uncompressed. Every legacy client reads uncompressed messages, and this keeps a
//! compression pass off the reactor (decompressing is needed anyway to reach the records).

use super::batch_builder::{decode_records, DecodeError};
use super::codecs::{decompress_records, CODEC_NONE, CODEC_ZSTD};
use super::legacy_error::LegacyError;
use super::record_batch::{
    compute_crc, BatchHeader, TimestampType, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN,
    BATCH_LENGTH_OFFSET, COMPRESSION_CODEC_MASK, CRC_OFFSET, LOG_OVERHEAD,
};

/// Attribute bit 3 of a magic 1 message: LogAppendTime.
const LEGACY_LOG_APPEND_TIME: i8 = 0x08;

/// Why stored batches could not be down-converted.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum DownConvertError {
    #[error("zstd batches cannot be down-converted to message format {magic}")]
    Zstd { magic: i8 },
    #[error("cannot decompress a stored batch: {0}")]
    Decompress(#[from] LegacyError),
    #[error("cannot read a stored batch: {0}")]
    Decode(#[from] DecodeError),
}

/// The message format a Fetch version reads: magic 0 for v0/v1, magic 1 for v2/v3.
pub fn magic_for_fetch_version(version: i16) -> i8 {
    if version <= 1 {
        0
    } else {
        1
    }
}

/// Converts the RecordBatch v2 data of one partition (whole batches, as the log returns them;
/// a truncated last batch is ignored) into a legacy message set of `magic`, keeping records at
/// or after `fetch_offset`. `max_decompressed` bounds what one batch may decompress to.
pub fn down_convert(
    data: &[u8],
    magic: i8,
    fetch_offset: i64,
    max_decompressed: usize,
) -> Result<Vec<u8>, DownConvertError> {
    let mut out = Vec::with_capacity(data.len());
    let mut rest = data;
    while let Ok(header) = BatchHeader::parse(rest) {
        let len = header.total_len();
        let Some(batch) = rest.get(..len) else {
            break;
        };
        rest = &rest[len..];
        if header.is_control() || header.last_offset() < fetch_offset {
            continue;
        }
        let log_append = header.timestamp_type() == TimestampType::LogAppendTime;
        let plain = uncompressed(batch, &header, magic, max_decompressed)?;
        for r in decode_records(&plain)? {
            if r.offset < fetch_offset {
                continue;
            }
            let timestamp = if log_append {
                header.max_timestamp
            } else {
                r.timestamp
            };
            put_message(
                &mut out,
                magic,
                r.offset,
                timestamp,
                log_append,
                r.key.as_deref(),
                r.value.as_deref(),
            );
        }
    }
    Ok(out)
}

/// The batch with its records section decompressed (attributes, length and CRC rewritten so
/// that it reads as an ordinary uncompressed batch).
fn uncompressed(
    batch: &[u8],
    header: &BatchHeader,
    magic: i8,
    max_decompressed: usize,
) -> Result<Vec<u8>, DownConvertError> {
    let codec = (header.attributes & COMPRESSION_CODEC_MASK) as u8;
    if codec == CODEC_NONE {
        return Ok(batch.to_vec());
    }
    if codec == CODEC_ZSTD {
        return Err(DownConvertError::Zstd { magic });
    }
    let records = decompress_records(codec, &batch[BATCH_HEADER_LEN..], max_decompressed)?;
    let mut plain = Vec::with_capacity(BATCH_HEADER_LEN + records.len());
    plain.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
    plain.extend_from_slice(&records);
    let batch_length =
        i32::try_from(plain.len() - LOG_OVERHEAD).map_err(|_| LegacyError::TooLarge {
            limit: i32::MAX as usize,
        })?;
    plain[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
        .copy_from_slice(&batch_length.to_be_bytes());
    let attributes = header.attributes & !COMPRESSION_CODEC_MASK;
    plain[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(&plain);
    plain[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(plain)
}

/// Appends one uncompressed legacy message (offset, size, then the message with its CRC32).
fn put_message(
    out: &mut Vec<u8>,
    magic: i8,
    offset: i64,
    timestamp: i64,
    log_append: bool,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let mut msg =
        Vec::with_capacity(22 + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len));
    msg.extend_from_slice(&[0; 4]); // CRC, filled below
    msg.push(magic as u8);
    let attributes = if magic >= 1 && log_append {
        LEGACY_LOG_APPEND_TIME
    } else {
        0
    };
    msg.push(attributes as u8);
    if magic >= 1 {
        msg.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            Some(b) => {
                msg.extend_from_slice(&(b.len() as i32).to_be_bytes());
                msg.extend_from_slice(b);
            }
            None => msg.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    let crc = crc32fast::hash(&msg[4..]);
    msg[..4].copy_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(msg.len() as i32).to_be_bytes());
    out.extend_from_slice(&msg);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch_builder::BatchBuilder;
    use crate::protocol::codecs::{CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY};
    use crate::protocol::legacy::parse_message_set;
    use crate::protocol::record_batch::set_base_offset;

    /// A batch of `n` records at `base`, keys "k<i>", values "v<i>", compressed with `codec`.
    fn batch(base: i64, n: usize, codec: u8) -> Vec<u8> {
        let mut b = BatchBuilder::new(1_000);
        for i in 0..n {
            b.push(
                Some(format!("k{i}").as_bytes()),
                Some(format!("v{i}").as_bytes()),
                1_000 + i as i64,
                &[],
            );
        }
        // Reuse the legacy converter's compressor to make a compressed v2 batch.
        let plain = b.build().to_vec();
        let mut out = if codec == CODEC_NONE {
            plain
        } else {
            let records =
                crate::protocol::codecs::compress_records(codec, &plain[BATCH_HEADER_LEN..])
                    .unwrap();
            let mut v = plain[..BATCH_HEADER_LEN].to_vec();
            v.extend_from_slice(&records);
            let len = (v.len() - LOG_OVERHEAD) as i32;
            v[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&len.to_be_bytes());
            v[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2]
                .copy_from_slice(&i16::from(codec).to_be_bytes());
            v
        };
        set_base_offset(&mut out, base);
        let crc = compute_crc(&out);
        out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Offsets, keys and values of a converted set, read back by the legacy parser.
    fn read_back(set: &[u8]) -> Vec<(i64, Vec<u8>)> {
        let mut offsets = Vec::new();
        let mut rest = set;
        while rest.len() >= 12 {
            offsets.push(i64::from_be_bytes(rest[..8].try_into().unwrap()));
            let size = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize;
            rest = &rest[12 + size..];
        }
        let (records, codec) = parse_message_set(set, 1 << 20, 0).unwrap();
        assert_eq!(codec, CODEC_NONE);
        offsets
            .into_iter()
            .zip(records)
            .map(|(o, r)| (o, r.value.unwrap().to_vec()))
            .collect()
    }

    #[test]
    fn every_codec_but_zstd_converts_to_both_magics() {
        for codec in [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4] {
            for magic in [0, 1] {
                let mut data = batch(10, 3, codec);
                data.extend(batch(13, 2, codec));
                let set = down_convert(&data, magic, 10, 1 << 20).unwrap();
                assert_eq!(set[12 + 4], magic as u8, "codec {codec}");
                let got = read_back(&set);
                let offsets: Vec<i64> = got.iter().map(|(o, _)| *o).collect();
                assert_eq!(offsets, vec![10, 11, 12, 13, 14], "codec {codec}");
                assert_eq!(got[3].1, b"v0");
            }
        }
    }

    #[test]
    fn records_below_the_fetch_offset_and_a_truncated_tail_are_left_out() {
        let mut data = batch(0, 4, CODEC_GZIP);
        let second = batch(4, 2, CODEC_NONE);
        data.extend_from_slice(&second[..second.len() - 3]);
        let got = read_back(&down_convert(&data, 1, 2, 1 << 20).unwrap());
        let offsets: Vec<i64> = got.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, vec![2, 3]);
    }

    #[test]
    fn magic_1_messages_keep_the_record_timestamps() {
        let set = down_convert(&batch(0, 2, CODEC_NONE), 1, 0, 1 << 20).unwrap();
        let (records, _) = parse_message_set(&set, 1 << 20, 0).unwrap();
        assert_eq!(records[0].timestamp, 1_000);
        assert_eq!(records[1].timestamp, 1_001);
    }

    #[test]
    fn zstd_batches_are_refused() {
        let data = batch(0, 2, CODEC_ZSTD);
        assert_eq!(
            down_convert(&data, 1, 0, 1 << 20),
            Err(DownConvertError::Zstd { magic: 1 })
        );
    }

    #[test]
    fn fetch_versions_map_to_magics() {
        assert_eq!(magic_for_fetch_version(0), 0);
        assert_eq!(magic_for_fetch_version(1), 0);
        assert_eq!(magic_for_fetch_version(2), 1);
        assert_eq!(magic_for_fetch_version(3), 1);
    }
}
