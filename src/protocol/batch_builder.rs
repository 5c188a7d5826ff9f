//! Builds uncompressed RecordBatch v2 batches, and decodes the records of one.
//!
//! For tests, tools and the load generator. The broker hot path never decodes records; it only
//! uses [`crate::protocol::record_batch`].
//!
//! Record layout (v2), all integers zigzag varints unless noted:
//!
//! ```text
//! length            varint   bytes of the record after this field
//! attributes        i8       unused, 0
//! timestampDelta    varlong  timestamp - baseTimestamp
//! offsetDelta       varint   offset - baseOffset
//! keyLength         varint   -1 for a null key
//! key               bytes
//! valueLength       varint   -1 for a null value
//! value             bytes
//! headerCount       varint
//! headers           headerKeyLength varint, headerKey (UTF-8),
//!                   headerValueLength varint (-1 for null), headerValue
//! ```

use bytes::{BufMut, Bytes, BytesMut};

use super::record_batch::{
    validate, BatchError, BatchHeader, Compression, TimestampType, BATCH_HEADER_LEN, CRC_OFFSET,
    LOG_OVERHEAD, MAGIC_V2, MAX_BATCH_LEN,
};
use super::varint::{get_varint, get_varlong, put_varint, put_varlong, varint_len, varlong_len};

/// Why a record could not be added to a [`BatchBuilder`].
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum BuildError {
    /// The batch already holds `i32::MAX` records.
    #[error("too many records in one batch")]
    TooManyRecords,
    /// The batch would exceed [`MAX_BATCH_LEN`] bytes (`len` is the size it would have had, or
    /// `usize::MAX` if even that overflowed).
    #[error("record batch would be {len} bytes, more than the maximum {MAX_BATCH_LEN}")]
    BatchTooLarge { len: usize },
}

/// Accumulates records and produces one valid, uncompressed RecordBatch v2.
///
/// ```
/// use ringbroker::protocol::batch_builder::BatchBuilder;
/// use ringbroker::protocol::record_batch::validate_exact;
///
/// let batch = BatchBuilder::new(1_700_000_000_000)
///     .producer(7, 0, 0)
///     .push(Some(b"key"), Some(b"value"), 1_700_000_000_001, &[("trace", b"abc")])
///     .build();
/// let header = validate_exact(&batch).unwrap();
/// assert_eq!(header.record_count, 1);
/// ```
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    base_timestamp: i64,
    max_timestamp: Option<i64>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    count: i32,
    /// Room for the batch header (written by `build`/`finish`), then the encoded records,
    /// back to back.
    records: Vec<u8>,
}

#[inline]
fn len_i32(n: usize) -> Result<i32, BuildError> {
    i32::try_from(n).map_err(|_| BuildError::BatchTooLarge { len: usize::MAX })
}

/// Encoded size of a nullable byte field (length varint + bytes).
#[inline]
fn nullable_len(b: Option<&[u8]>) -> Result<usize, BuildError> {
    Ok(match b {
        None => varint_len(-1),
        Some(b) => varint_len(len_i32(b.len())?) + b.len(),
    })
}

#[inline]
fn put_nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            // Lengths were checked against i32 in try_push before anything is written.
            put_varint(out, b.len() as i32);
            out.put_slice(b);
        }
    }
}

impl BatchBuilder {
    /// An empty builder. `base_timestamp_ms` is the batch's `baseTimestamp`; record timestamps are
    /// stored as deltas from it.
    pub fn new(base_timestamp_ms: i64) -> BatchBuilder {
        BatchBuilder::with_capacity(base_timestamp_ms, BATCH_HEADER_LEN)
    }

    /// Like [`BatchBuilder::new`], with room for a batch of `bytes` before it reallocates.
    pub fn with_capacity(base_timestamp_ms: i64, bytes: usize) -> BatchBuilder {
        let mut records = Vec::with_capacity(bytes.max(BATCH_HEADER_LEN));
        records.resize(BATCH_HEADER_LEN, 0);
        BatchBuilder {
            base_timestamp: base_timestamp_ms,
            max_timestamp: None,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            count: 0,
            records,
        }
    }

    /// Sets the idempotent-producer fields (default: no producer, -1 / -1 / -1).
    pub fn producer(mut self, producer_id: i64, epoch: i16, base_sequence: i32) -> BatchBuilder {
        self.producer_id = producer_id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Appends a record at offset delta `self.len()`.
    ///
    /// # Panics
    /// If the batch would exceed [`MAX_BATCH_LEN`] bytes or `i32::MAX` records; use
    /// [`BatchBuilder::try_push`] to get an error instead.
    pub fn push(
        &mut self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp_ms: i64,
        headers: &[(&str, &[u8])],
    ) -> &mut BatchBuilder {
        if let Err(e) = self.try_push(key, value, timestamp_ms, headers) {
            panic!("BatchBuilder::push: {e}");
        }
        self
    }

    /// Like [`BatchBuilder::push`], but returns an error (and leaves the builder unchanged) when
    /// the record does not fit.
    pub fn try_push(
        &mut self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp_ms: i64,
        headers: &[(&str, &[u8])],
    ) -> Result<&mut BatchBuilder, BuildError> {
        if self.count == i32::MAX {
            return Err(BuildError::TooManyRecords);
        }
        let offset_delta = self.count;
        let timestamp_delta = timestamp_ms.wrapping_sub(self.base_timestamp);

        // Size everything first so that nothing is written on error.
        let mut body: usize = 1 // attributes
            + varlong_len(timestamp_delta)
            + varint_len(offset_delta)
            + nullable_len(key)?
            + nullable_len(value)?
            + varint_len(len_i32(headers.len())?);
        for (k, v) in headers {
            let h = nullable_len(Some(k.as_bytes()))? + nullable_len(Some(v))?;
            body = body
                .checked_add(h)
                .ok_or(BuildError::BatchTooLarge { len: usize::MAX })?;
        }
        let body_i32 = len_i32(body)?;
        let new_len = self
            .records
            .len()
            .checked_add(varint_len(body_i32) + body)
            .ok_or(BuildError::BatchTooLarge { len: usize::MAX })?;
        if new_len - LOG_OVERHEAD > MAX_BATCH_LEN {
            return Err(BuildError::BatchTooLarge { len: new_len });
        }

        let out = &mut self.records;
        out.reserve(varint_len(body_i32) + body);
        put_varint(out, body_i32);
        out.put_i8(0);
        put_varlong(out, timestamp_delta);
        put_varint(out, offset_delta);
        put_nullable(out, key);
        put_nullable(out, value);
        put_varint(out, headers.len() as i32);
        for (k, v) in headers {
            put_nullable(out, Some(k.as_bytes()));
            put_nullable(out, Some(v));
        }

        self.count += 1;
        self.max_timestamp = Some(
            self.max_timestamp
                .map_or(timestamp_ms, |m| m.max(timestamp_ms)),
        );
        Ok(self)
    }

    /// Number of records pushed so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record has been pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size in bytes of the batch [`BatchBuilder::build`] would return now.
    pub fn encoded_len(&self) -> usize {
        self.records.len()
    }

    /// The batch: base offset 0, partition leader epoch -1, attributes 0 (uncompressed,
    /// CreateTime, not transactional, not control), `lastOffsetDelta = len() - 1`,
    /// `maxTimestamp` = the largest record timestamp, valid CRC32C.
    ///
    /// An empty builder yields a batch with 0 records, `lastOffsetDelta` -1 and `maxTimestamp` -1
    /// (as Kafka writes them), which [`validate`] rejects; useful in tests.
    pub fn build(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.encoded_len());
        buf.put_slice(&self.header());
        buf.put_slice(&self.records[BATCH_HEADER_LEN..]);
        let crc = super::record_batch::compute_crc(&buf);
        buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        buf.freeze()
    }

    /// The same batch as [`BatchBuilder::build`], in the builder's own buffer (no copy).
    pub fn finish(mut self) -> Bytes {
        let header = self.header();
        self.records[..BATCH_HEADER_LEN].copy_from_slice(&header);
        let crc = super::record_batch::compute_crc(&self.records);
        self.records[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        Bytes::from(self.records)
    }

    /// The batch header, CRC field 0.
    fn header(&self) -> [u8; BATCH_HEADER_LEN] {
        // try_push keeps total - LOG_OVERHEAD <= MAX_BATCH_LEN = i32::MAX.
        let batch_length = (self.encoded_len() - LOG_OVERHEAD) as i32;
        let mut header = [0u8; BATCH_HEADER_LEN];
        let mut out = &mut header[..];
        out.put_i64(0); // baseOffset
        out.put_i32(batch_length);
        out.put_i32(-1); // partitionLeaderEpoch
        out.put_i8(MAGIC_V2);
        out.put_u32(0); // crc, filled in by the caller
        out.put_i16(0); // attributes
        out.put_i32(self.count - 1); // lastOffsetDelta
        out.put_i64(self.base_timestamp);
        out.put_i64(self.max_timestamp.unwrap_or(-1));
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        out.put_i32(self.base_sequence);
        out.put_i32(self.count);
        header
    }
}

/// One record of a decoded batch, with absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord {
    pub offset: i64,
    /// `baseTimestamp + timestampDelta`, or the batch's `maxTimestamp` for LogAppendTime batches.
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Why [`decode_records`] failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum DecodeError {
    /// The batch itself is invalid (see [`validate`]).
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// Records of compressed batches are not decoded here.
    #[error("cannot decode records of a {0:?}-compressed batch")]
    Compressed(Compression),
    /// A record is malformed; `at` is the byte position within the batch.
    #[error("malformed record at byte {at}: {reason}")]
    Malformed { at: usize, reason: &'static str },
}

/// Bounds-checked reader over the records section; positions are reported relative to the batch.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Position of `buf[0]` within the batch, for error messages.
    origin: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8], origin: usize) -> Cursor<'a> {
        Cursor {
            buf,
            pos: 0,
            origin,
        }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn err(&self, reason: &'static str) -> DecodeError {
        DecodeError::Malformed {
            at: self.origin + self.pos,
            reason,
        }
    }

    fn varint(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        let (v, n) = get_varint(&self.buf[self.pos..]).map_err(|_| self.err(what))?;
        self.pos += n;
        Ok(v)
    }

    fn varlong(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        let (v, n) = get_varlong(&self.buf[self.pos..]).map_err(|_| self.err(what))?;
        self.pos += n;
        Ok(v)
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.err(what));
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// A length-prefixed byte string; length -1 means null, other negative lengths are errors.
    fn nullable(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, DecodeError> {
        let start = self.pos;
        let len = self.varint(what)?;
        if len == -1 {
            return Ok(None);
        }
        let Ok(len) = usize::try_from(len) else {
            self.pos = start;
            return Err(self.err(what));
        };
        self.take(len, what).map(Some)
    }
}

/// Decodes every record of the uncompressed batch at the start of `batch` (bytes after the first
/// batch are ignored). The batch is [`validate`]d first, CRC included.
///
/// For tests and tools only; the broker never decodes records. No allocation is sized by a length
/// read from the input before that length has been checked against the bytes remaining.
pub fn decode_records(batch: &[u8]) -> Result<Vec<DecodedRecord>, DecodeError> {
    let header = validate(batch)?;
    decode_validated(batch, &header)
}

/// [`decode_records`] of a batch whose header [`validate`] accepted (the CRC is not computed
/// again).
pub(super) fn decode_validated(
    batch: &[u8],
    header: &BatchHeader,
) -> Result<Vec<DecodedRecord>, DecodeError> {
    let codec = header.compression()?;
    if codec != Compression::None {
        return Err(DecodeError::Compressed(codec));
    }
    let log_append_time = header.timestamp_type() == TimestampType::LogAppendTime;
    let mut cur = Cursor::new(
        &batch[BATCH_HEADER_LEN..header.total_len()],
        BATCH_HEADER_LEN,
    );

    // validate() guarantees record_count > 0. The smallest record is 7 bytes.
    let count = header.record_count as usize;
    let mut records = Vec::with_capacity(count.min(cur.remaining() / 7));
    for _ in 0..count {
        let len_at = cur.pos;
        let len = cur.varint("bad record length")?;
        let Ok(len) = usize::try_from(len) else {
            cur.pos = len_at;
            return Err(cur.err("negative record length"));
        };
        let body_origin = cur.origin + cur.pos;
        let body = cur.take(len, "record length exceeds the batch")?;
        let mut r = Cursor::new(body, body_origin);

        let _attributes = r.take(1, "truncated record attributes")?;
        let timestamp_delta = r.varlong("bad timestamp delta")?;
        let offset_delta = r.varint("bad offset delta")?;
        let key = r.nullable("bad key")?.map(<[u8]>::to_vec);
        let value = r.nullable("bad value")?.map(<[u8]>::to_vec);

        let header_count = r.varint("bad header count")?;
        let Ok(header_count) = usize::try_from(header_count) else {
            return Err(r.err("negative header count"));
        };
        // The smallest header is 2 bytes (two zero-length varints).
        if header_count > r.remaining() / 2 {
            return Err(r.err("header count exceeds the record"));
        }
        let mut headers = Vec::with_capacity(header_count);
        for _ in 0..header_count {
            let key_at = r.pos;
            let Some(k) = r.nullable("bad header key")? else {
                r.pos = key_at;
                return Err(r.err("null header key"));
            };
            let Ok(k) = std::str::from_utf8(k) else {
                r.pos = key_at;
                return Err(r.err("header key is not UTF-8"));
            };
            let v = r.nullable("bad header value")?.map(<[u8]>::to_vec);
            headers.push((k.to_owned(), v));
        }
        if r.remaining() != 0 {
            return Err(r.err("bytes left over at the end of the record"));
        }

        let Some(offset) = header.base_offset.checked_add(i64::from(offset_delta)) else {
            return Err(DecodeError::Malformed {
                at: body_origin,
                reason: "offset overflows i64",
            });
        };
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(timestamp_delta)
        };
        records.push(DecodedRecord {
            offset,
            timestamp,
            key,
            value,
            headers,
        });
    }
    if cur.remaining() != 0 {
        return Err(cur.err("bytes after the last record"));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::record_batch::{
        compute_crc, set_base_offset, set_log_append_time, validate_exact, ATTRIBUTES_OFFSET,
        BATCH_LENGTH_OFFSET, LAST_OFFSET_DELTA_OFFSET, RECORDS_COUNT_OFFSET,
    };
    use proptest::prelude::*;

    fn fix_crc(buf: &mut [u8]) {
        let crc = compute_crc(buf);
        buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    }

    /// A batch header around hand-written record bytes, with correct length and CRC.
    fn raw_batch(records: &[u8], count: i32) -> Vec<u8> {
        let mut buf = BatchBuilder::new(100).build().to_vec();
        buf.extend_from_slice(records);
        let batch_length = (buf.len() - LOG_OVERHEAD) as i32;
        buf[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
            .copy_from_slice(&batch_length.to_be_bytes());
        buf[LAST_OFFSET_DELTA_OFFSET..LAST_OFFSET_DELTA_OFFSET + 4]
            .copy_from_slice(&(count.wrapping_sub(1)).to_be_bytes());
        buf[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&count.to_be_bytes());
        fix_crc(&mut buf);
        buf
    }

    #[test]
    fn finish_is_build_without_the_copy() {
        let mut b = BatchBuilder::with_capacity(5, 4096).producer(9, 1, 3);
        b.push(Some(b"k"), Some(b"v1"), 6, &[("h", b"x")])
            .push(None, Some(b"v2"), 7, &[]);
        assert_eq!(b.clone().finish(), b.build());
        assert_eq!(validate_exact(&b.finish()).map(|h| h.record_count), Ok(2));
    }

    /// Wraps a record body in its length prefix.
    fn record(body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, body.len() as i32);
        out.extend_from_slice(body);
        out
    }

    fn malformed(r: Result<Vec<DecodedRecord>, DecodeError>) -> &'static str {
        match r {
            Err(DecodeError::Malformed { reason, .. }) => reason,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn round_trip_builder_validate_decode() {
        let mut b = BatchBuilder::new(1_000).producer(5, 1, 100);
        assert!(b.is_empty());
        b.push(Some(b"k0"), Some(b"v0"), 1_000, &[]);
        b.push(None, Some(b"v1"), 990, &[("a", b"1"), ("bb", b"")]);
        b.push(Some(b""), None, 1_050, &[]);
        b.push(None, None, 1_010, &[("", b"z")]);
        assert_eq!(b.len(), 4);
        let batch = b.build();
        assert_eq!(batch.len(), b.encoded_len());

        let h = validate_exact(&batch).expect("valid batch");
        assert_eq!(h.base_offset, 0);
        assert_eq!(h.partition_leader_epoch, -1);
        assert_eq!(h.attributes, 0);
        assert_eq!(h.record_count, 4);
        assert_eq!(h.last_offset_delta, 3);
        assert_eq!(h.base_timestamp, 1_000);
        assert_eq!(h.max_timestamp, 1_050);
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (5, 1, 100)
        );

        let records = decode_records(&batch).expect("decodes");
        let expected = vec![
            DecodedRecord {
                offset: 0,
                timestamp: 1_000,
                key: Some(b"k0".to_vec()),
                value: Some(b"v0".to_vec()),
                headers: vec![],
            },
            DecodedRecord {
                offset: 1,
                timestamp: 990,
                key: None,
                value: Some(b"v1".to_vec()),
                headers: vec![
                    ("a".to_owned(), Some(b"1".to_vec())),
                    ("bb".to_owned(), Some(Vec::new())),
                ],
            },
            DecodedRecord {
                offset: 2,
                timestamp: 1_050,
                key: Some(Vec::new()),
                value: None,
                headers: vec![],
            },
            DecodedRecord {
                offset: 3,
                timestamp: 1_010,
                key: None,
                value: None,
                headers: vec![("".to_owned(), Some(b"z".to_vec()))],
            },
        ];
        assert_eq!(records, expected);
    }

    #[test]
    fn defaults_and_build_is_repeatable() {
        let mut b = BatchBuilder::new(7);
        b.push(None, Some(b"x"), 7, &[]);
        let first = b.build();
        assert_eq!(first, b.build());
        let h = validate_exact(&first).expect("valid");
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (-1, -1, -1)
        );
        assert!(!h.has_producer_id());
        b.push(None, Some(b"y"), 8, &[]);
        assert_eq!(validate_exact(&b.build()).expect("valid").record_count, 2);
    }

    #[test]
    fn exact_record_bytes() {
        // Record: attrs 0, tsDelta 1 (0x02), offsetDelta 0, key "k", value null, no headers.
        let batch = BatchBuilder::new(10)
            .push(Some(b"k"), None, 11, &[])
            .build();
        assert_eq!(
            &batch[BATCH_HEADER_LEN..],
            &[0x0e, 0x00, 0x02, 0x00, 0x02, b'k', 0x01, 0x00]
        );
    }

    #[test]
    fn decode_applies_base_offset_and_log_append_time() {
        let mut batch = BatchBuilder::new(1_000)
            .push(None, Some(b"a"), 1_001, &[])
            .push(None, Some(b"b"), 1_002, &[])
            .build()
            .to_vec();
        set_base_offset(&mut batch, 500);
        set_log_append_time(&mut batch, 42);
        let records = decode_records(&batch).expect("decodes");
        assert_eq!(records.len(), 2);
        assert_eq!((records[0].offset, records[0].timestamp), (500, 42));
        assert_eq!((records[1].offset, records[1].timestamp), (501, 42));
    }

    #[test]
    fn decode_null_header_value() {
        // attrs, tsDelta 0, offsetDelta 0, key null, value null, 1 header "h" -> null
        let body = [0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x02, b'h', 0x01];
        let batch = raw_batch(&record(&body), 1);
        let records = decode_records(&batch).expect("decodes");
        assert_eq!(records[0].headers, vec![("h".to_owned(), None)]);
    }

    #[test]
    fn decode_rejects_invalid_batches_and_compression() {
        let batch = BatchBuilder::new(0).push(None, None, 0, &[]).build();
        let mut bad = batch.to_vec();
        bad[BATCH_HEADER_LEN] ^= 0xff;
        assert!(matches!(
            decode_records(&bad),
            Err(DecodeError::Batch(BatchError::CrcMismatch { .. }))
        ));

        let mut gz = batch.to_vec();
        gz[ATTRIBUTES_OFFSET + 1] = 1;
        fix_crc(&mut gz);
        assert_eq!(
            decode_records(&gz),
            Err(DecodeError::Compressed(Compression::Gzip))
        );
    }

    #[test]
    fn decode_rejects_malformed_records() {
        let ok_body = [0x00, 0x00, 0x00, 0x01, 0x01, 0x00];
        assert!(decode_records(&raw_batch(&record(&ok_body), 1)).is_ok());

        // Declared count larger than the records present.
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&ok_body), 2))),
            "bad record length"
        );
        // Extra bytes after the last record.
        let mut extra = record(&ok_body);
        extra.push(0);
        assert_eq!(
            malformed(decode_records(&raw_batch(&extra, 1))),
            "bytes after the last record"
        );
        // Negative record length.
        assert_eq!(
            malformed(decode_records(&raw_batch(&[0x03], 1))),
            "negative record length"
        );
        // Record length beyond the batch.
        assert_eq!(
            malformed(decode_records(&raw_batch(&[0x7e, 0x00], 1))),
            "record length exceeds the batch"
        );
        // Key length beyond the record (and a huge one must not allocate).
        let huge_key = [0x00, 0x00, 0x00, 0xfe, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x00];
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&huge_key), 1))),
            "bad key"
        );
        // Key length -2.
        let neg_key = [0x00, 0x00, 0x00, 0x03, 0x01, 0x00];
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&neg_key), 1))),
            "bad key"
        );
        // Huge header count.
        let many_headers = [0x00, 0x00, 0x00, 0x01, 0x01, 0xfe, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&many_headers), 1))),
            "header count exceeds the record"
        );
        // Negative header count.
        let neg_headers = [0x00, 0x00, 0x00, 0x01, 0x01, 0x01];
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&neg_headers), 1))),
            "negative header count"
        );
        // Null header key.
        let null_hkey = [0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x01, 0x01];
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&null_hkey), 1))),
            "null header key"
        );
        // Header key not UTF-8.
        let bad_utf8 = [0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x02, 0xff, 0x01];
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&bad_utf8), 1))),
            "header key is not UTF-8"
        );
        // Record body longer than its fields.
        let mut long_body = ok_body.to_vec();
        long_body.push(0);
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&long_body), 1))),
            "bytes left over at the end of the record"
        );
        // Truncated varint inside the record.
        let truncated = [0x00, 0x80];
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&truncated), 1))),
            "bad timestamp delta"
        );
        // Empty body: no attributes byte.
        assert_eq!(
            malformed(decode_records(&raw_batch(&record(&[]), 1))),
            "truncated record attributes"
        );
    }

    #[test]
    fn try_push_reports_errors_without_changing_the_builder() {
        let mut b = BatchBuilder::new(0);
        b.count = i32::MAX;
        assert_eq!(
            b.try_push(None, None, 0, &[]).err(),
            Some(BuildError::TooManyRecords)
        );
        assert_eq!(b.encoded_len(), BATCH_HEADER_LEN);
    }

    type ArbRecord = (
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        i64,
        Vec<(String, Vec<u8>)>,
    );

    fn arb_records() -> impl Strategy<Value = Vec<ArbRecord>> {
        proptest::collection::vec(
            (
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..32)),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
                any::<i64>(),
                proptest::collection::vec(
                    (
                        "[a-z\u{e9}]{0,6}",
                        proptest::collection::vec(any::<u8>(), 0..8),
                    ),
                    0..3,
                ),
            ),
            1..20,
        )
    }

    proptest! {
        #[test]
        fn arbitrary_records_round_trip(base_ts in any::<i64>(), recs in arb_records()) {
            let mut b = BatchBuilder::new(base_ts);
            for (k, v, ts, hs) in &recs {
                let hs: Vec<(&str, &[u8])> =
                    hs.iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
                b.push(k.as_deref(), v.as_deref(), *ts, &hs);
            }
            let batch = b.build();
            let h = validate_exact(&batch);
            prop_assert!(h.is_ok(), "{:?}", h);
            if let Ok(h) = h {
                prop_assert_eq!(h.record_count as usize, recs.len());
                prop_assert_eq!(h.max_timestamp, recs.iter().map(|r| r.2).max().unwrap_or(-1));
            }
            let decoded = decode_records(&batch);
            prop_assert!(decoded.is_ok(), "{:?}", decoded);
            let decoded = decoded.unwrap_or_default();
            prop_assert_eq!(decoded.len(), recs.len());
            for (i, (d, (k, v, ts, hs))) in decoded.iter().zip(&recs).enumerate() {
                prop_assert_eq!(d.offset, i as i64);
                prop_assert_eq!(d.timestamp, *ts);
                prop_assert_eq!(&d.key, k);
                prop_assert_eq!(&d.value, v);
                let hs: Vec<(String, Option<Vec<u8>>)> =
                    hs.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect();
                prop_assert_eq!(&d.headers, &hs);
            }
        }

        #[test]
        fn decode_never_panics_on_arbitrary_records(
            body in proptest::collection::vec(any::<u8>(), 0..200),
            count in 1i32..50,
        ) {
            let _ = decode_records(&raw_batch(&body, count));
        }

        #[test]
        fn decode_never_panics_on_arbitrary_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let _ = decode_records(&bytes);
        }
    }
}
