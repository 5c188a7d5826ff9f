//! Zero-copy view of a Kafka RecordBatch v2 (magic 2) header, CRC32C validation, and the few
//! in-place rewrites the broker performs (base offset, partition leader epoch, LogAppendTime).
//!
//! The broker never decodes individual records: it reads the fixed 61-byte header, checks the
//! CRC32C of the batch, and stores the bytes as they came. Layout (all big endian):
//!
//! | offset | field                  | type | covered by CRC |
//! |-------:|------------------------|------|----------------|
//! |      0 | baseOffset             | i64  | no             |
//! |      8 | batchLength            | i32  | no             |
//! |     12 | partitionLeaderEpoch   | i32  | no             |
//! |     16 | magic                  | i8   | no             |
//! |     17 | crc                    | u32  | no             |
//! |     21 | attributes             | i16  | yes            |
//! |     23 | lastOffsetDelta        | i32  | yes            |
//! |     27 | baseTimestamp          | i64  | yes            |
//! |     35 | maxTimestamp           | i64  | yes            |
//! |     43 | producerId             | i64  | yes            |
//! |     51 | producerEpoch          | i16  | yes            |
//! |     53 | baseSequence           | i32  | yes            |
//! |     57 | recordsCount           | i32  | yes            |
//! |     61 | records...             |      | yes            |
//!
//! `batchLength` counts the bytes after itself, so a whole batch is `batchLength + 12` bytes.

/// Size of the fields that precede the batch body: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// Size of the fixed RecordBatch v2 header, up to and including `recordsCount`.
pub const BATCH_HEADER_LEN: usize = 61;
/// Largest possible batch (`batchLength` is an `i32`).
pub const MAX_BATCH_LEN: usize = i32::MAX as usize;
/// The only record format this module understands.
pub const MAGIC_V2: i8 = 2;
/// Smallest legal `batchLength`: the header without the log overhead (49).
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;

/// Byte offset of `baseOffset`.
pub const BASE_OFFSET_OFFSET: usize = 0;
/// Byte offset of `batchLength`.
pub const BATCH_LENGTH_OFFSET: usize = 8;
/// Byte offset of `partitionLeaderEpoch`.
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
/// Byte offset of `magic`.
pub const MAGIC_OFFSET: usize = 16;
/// Byte offset of `crc`.
pub const CRC_OFFSET: usize = 17;
/// Byte offset of `attributes`; the CRC covers everything from here to the end of the batch.
pub const ATTRIBUTES_OFFSET: usize = 21;
/// Byte offset of `lastOffsetDelta`.
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
/// Byte offset of `baseTimestamp`.
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
/// Byte offset of `maxTimestamp`.
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
/// Byte offset of `producerId`.
pub const PRODUCER_ID_OFFSET: usize = 43;
/// Byte offset of `producerEpoch`.
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
/// Byte offset of `baseSequence`.
pub const BASE_SEQUENCE_OFFSET: usize = 53;
/// Byte offset of `recordsCount`.
pub const RECORDS_COUNT_OFFSET: usize = 57;

/// Attribute bits 0-2: compression codec.
pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
/// Attribute bit 3: timestamp type (set = LogAppendTime).
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
/// Attribute bit 4: the batch is part of a transaction.
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
/// Attribute bit 5: the batch holds a control record (transaction marker).
pub const CONTROL_FLAG_MASK: i16 = 0x20;

/// Compression codec of a batch (attribute bits 0-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Maps a codec id (0-4) to a codec.
    pub fn from_id(id: u8) -> Result<Compression, BatchError> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(BatchError::UnknownCompression(other)),
        }
    }

    /// The codec id as stored in the attributes.
    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// Which clock the batch timestamps come from (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// Why a byte slice is not an acceptable RecordBatch v2.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum BatchError {
    /// Fewer than [`BATCH_HEADER_LEN`] bytes.
    #[error("record batch too short: {len} bytes, the header alone needs {BATCH_HEADER_LEN}")]
    TooShort { len: usize },
    /// `batchLength` below [`MIN_BATCH_LENGTH`] or larger than what the buffer holds.
    /// `available` is the number of bytes in the buffer after the `batchLength` field
    /// (buffer length minus [`LOG_OVERHEAD`]), i.e. directly comparable with `declared`.
    #[error(
        "bad batch length {declared}: minimum {MIN_BATCH_LENGTH}, {available} bytes available"
    )]
    BadLength { declared: i32, available: usize },
    /// Magic byte other than 2.
    #[error("unsupported record batch magic {0} (only v2 is supported)")]
    UnsupportedMagic(i8),
    /// CRC32C over attributes..end does not match the stored value.
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// `recordsCount` is not positive, or `lastOffsetDelta != recordsCount - 1`.
    #[error("bad record count {records} for last offset delta {last_offset_delta}")]
    BadRecordCount {
        records: i32,
        last_offset_delta: i32,
    },
    /// Compression codec id 5-7.
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    /// [`validate_exact`] was given more bytes than one batch.
    #[error("{extra} bytes after the end of the record batch")]
    TrailingBytes { extra: usize },
}

/// The decoded fixed header of a RecordBatch v2. A plain copy: it borrows nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

type Header = [u8; BATCH_HEADER_LEN];

#[inline]
fn field<const N: usize>(h: &Header, at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&h[at..at + N]);
    out
}

#[inline]
fn be_i16(h: &Header, at: usize) -> i16 {
    i16::from_be_bytes(field(h, at))
}

#[inline]
fn be_i32(h: &Header, at: usize) -> i32 {
    i32::from_be_bytes(field(h, at))
}

#[inline]
fn be_u32(h: &Header, at: usize) -> u32 {
    u32::from_be_bytes(field(h, at))
}

#[inline]
fn be_i64(h: &Header, at: usize) -> i64 {
    i64::from_be_bytes(field(h, at))
}

impl BatchHeader {
    /// Reads the 61-byte header at the start of `buf`.
    ///
    /// Checks, in this order: `buf` holds at least [`BATCH_HEADER_LEN`] bytes
    /// ([`BatchError::TooShort`]), magic is 2 ([`BatchError::UnsupportedMagic`]), and
    /// `batchLength >= 49` ([`BatchError::BadLength`]). It does not require the rest of the batch
    /// to be present and does not check the CRC, the record count or the codec; use [`validate`]
    /// for that.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        let h: &Header = buf
            .get(..BATCH_HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(BatchError::TooShort { len: buf.len() })?;

        let magic = h[MAGIC_OFFSET] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        let batch_length = be_i32(h, BATCH_LENGTH_OFFSET);
        if batch_length < MIN_BATCH_LENGTH {
            return Err(BatchError::BadLength {
                declared: batch_length,
                available: buf.len() - LOG_OVERHEAD,
            });
        }

        Ok(BatchHeader {
            base_offset: be_i64(h, BASE_OFFSET_OFFSET),
            batch_length,
            partition_leader_epoch: be_i32(h, PARTITION_LEADER_EPOCH_OFFSET),
            magic,
            crc: be_u32(h, CRC_OFFSET),
            attributes: be_i16(h, ATTRIBUTES_OFFSET),
            last_offset_delta: be_i32(h, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: be_i64(h, BASE_TIMESTAMP_OFFSET),
            max_timestamp: be_i64(h, MAX_TIMESTAMP_OFFSET),
            producer_id: be_i64(h, PRODUCER_ID_OFFSET),
            producer_epoch: be_i16(h, PRODUCER_EPOCH_OFFSET),
            base_sequence: be_i32(h, BASE_SEQUENCE_OFFSET),
            record_count: be_i32(h, RECORDS_COUNT_OFFSET),
        })
    }

    /// Size of the whole batch in bytes: `batch_length + LOG_OVERHEAD`.
    ///
    /// For a header returned by [`BatchHeader::parse`] this is at least [`BATCH_HEADER_LEN`]; a
    /// hand-made header with a negative `batch_length` is treated as length 0.
    #[inline]
    pub fn total_len(&self) -> usize {
        usize::try_from(self.batch_length).unwrap_or(0) + LOG_OVERHEAD
    }

    /// Offset of the last record: `base_offset + last_offset_delta`.
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(self.last_offset_delta))
    }

    /// Offset after the last record: `last_offset() + 1`.
    #[inline]
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// Compression codec from attribute bits 0-2.
    #[inline]
    pub fn compression(&self) -> Result<Compression, BatchError> {
        Compression::from_id((self.attributes & COMPRESSION_CODEC_MASK) as u8)
    }

    /// Timestamp type from attribute bit 3.
    #[inline]
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Attribute bit 4.
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG_MASK != 0
    }

    /// Attribute bit 5.
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG_MASK != 0
    }

    /// Whether the batch comes from an idempotent/transactional producer (`producer_id >= 0`).
    #[inline]
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
}

/// CRC32C (Castagnoli) of `batch[21..]`, the range a RecordBatch v2 CRC covers.
///
/// Covers everything up to the end of the slice, so pass exactly one batch. A slice shorter than
/// 21 bytes yields the CRC of the empty input (0).
#[inline]
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(ATTRIBUTES_OFFSET..).unwrap_or(&[]))
}

/// Validates the batch that starts at `buf[0]`; bytes after it are allowed and ignored.
///
/// Checks, in this order: the header ([`BatchHeader::parse`]), that the whole batch
/// (`batch_length + 12` bytes) is present ([`BatchError::BadLength`]), the CRC32C over exactly
/// that batch ([`BatchError::CrcMismatch`]), `record_count > 0` and
/// `last_offset_delta == record_count - 1` ([`BatchError::BadRecordCount`]), and a known
/// compression codec ([`BatchError::UnknownCompression`]).
///
/// These are the checks for batches a producer sends. Batches that went through log compaction
/// may legitimately have fewer records than `last_offset_delta + 1` (or none); those must not be
/// re-validated with this function.
pub fn validate(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(buf)?;
    let batch = buf.get(..header.total_len()).ok_or(BatchError::BadLength {
        declared: header.batch_length,
        available: buf.len() - LOG_OVERHEAD,
    })?;

    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    if header.record_count <= 0 || header.last_offset_delta != header.record_count - 1 {
        return Err(BatchError::BadRecordCount {
            records: header.record_count,
            last_offset_delta: header.last_offset_delta,
        });
    }
    header.compression()?;
    Ok(header)
}

/// Like [`validate`], but `buf` must be exactly one batch: any byte after the batch is
/// [`BatchError::TrailingBytes`] (checked after all of [`validate`]'s checks).
pub fn validate_exact(buf: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = validate(buf)?;
    let extra = buf.len() - header.total_len();
    if extra != 0 {
        return Err(BatchError::TrailingBytes { extra });
    }
    Ok(header)
}

/// Overwrites `baseOffset`. The CRC does not cover it, so the batch stays valid.
///
/// Assumes `batch` was validated; does nothing if it is shorter than [`BATCH_HEADER_LEN`].
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    if batch.len() < BATCH_HEADER_LEN {
        return;
    }
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Overwrites `partitionLeaderEpoch`. The CRC does not cover it, so the batch stays valid.
///
/// Assumes `batch` was validated; does nothing if it is shorter than [`BATCH_HEADER_LEN`].
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    if batch.len() < BATCH_HEADER_LEN {
        return;
    }
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Applies Kafka's LogAppendTime semantics: sets the timestamp-type attribute bit, sets
/// `maxTimestamp = now_ms` (consumers then report it as every record's timestamp), and
/// recomputes and stores the CRC over the batch's own `batch_length + 12` bytes (bytes after the
/// batch in `batch` are not touched).
///
/// Assumes `batch` was validated. Does nothing if the header does not parse (too short, wrong
/// magic, bad length) or the buffer is shorter than the declared batch. It does not check the old
/// CRC: a corrupt batch gets a fresh, valid CRC, so validate first.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let Ok(header) = BatchHeader::parse(batch) else {
        return;
    };
    let total = header.total_len();
    let Some(batch) = batch.get_mut(..total) else {
        return;
    };
    let attributes = header.attributes | TIMESTAMP_TYPE_MASK;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

#[cfg(test)]
#[path = "record_batch_tests.rs"]
mod tests;
