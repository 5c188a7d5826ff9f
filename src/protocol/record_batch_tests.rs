//! Tests of the RecordBatch v2 view: header fields, CRC, the in-place rewrites, and validation of malformed batches.

use super::*;
use crate::protocol::batch_builder::BatchBuilder;
use proptest::prelude::*;

fn sample_batch() -> Vec<u8> {
    let mut b = BatchBuilder::new(1_000);
    b.push(Some(b"k1"), Some(b"v1"), 1_000, &[]);
    b.push(None, Some(b"value two"), 1_005, &[("h", b"x")]);
    b.push(Some(b"k3"), None, 1_003, &[]);
    b.build().to_vec()
}

fn put_i16(buf: &mut [u8], at: usize, v: i16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

fn put_i32(buf: &mut [u8], at: usize, v: i32) {
    buf[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

fn fix_crc(buf: &mut [u8]) {
    let crc = compute_crc(buf);
    buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn crc32c_known_answer() {
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    let mut buf = vec![0u8; ATTRIBUTES_OFFSET];
    buf.extend_from_slice(b"123456789");
    assert_eq!(compute_crc(&buf), 0xE306_9283);
    assert_eq!(compute_crc(&[1, 2, 3]), 0);
}

#[test]
fn parse_reads_every_field() {
    let batch = BatchBuilder::new(1_234)
        .producer(77, 3, 10)
        .push(Some(b"a"), Some(b"b"), 1_240, &[])
        .push(Some(b"c"), Some(b"d"), 1_239, &[])
        .build();
    let h = validate_exact(&batch).expect("valid");
    assert_eq!(h.base_offset, 0);
    assert_eq!(h.batch_length as usize + LOG_OVERHEAD, batch.len());
    assert_eq!(h.total_len(), batch.len());
    assert_eq!(h.partition_leader_epoch, -1);
    assert_eq!(h.magic, 2);
    assert_eq!(h.crc, compute_crc(&batch));
    assert_eq!(h.attributes, 0);
    assert_eq!(h.last_offset_delta, 1);
    assert_eq!(h.base_timestamp, 1_234);
    assert_eq!(h.max_timestamp, 1_240);
    assert_eq!(h.producer_id, 77);
    assert_eq!(h.producer_epoch, 3);
    assert_eq!(h.base_sequence, 10);
    assert_eq!(h.record_count, 2);
    assert_eq!(h.last_offset(), 1);
    assert_eq!(h.next_offset(), 2);
    assert_eq!(h.compression(), Ok(Compression::None));
    assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
    assert!(!h.is_transactional());
    assert!(!h.is_control());
    assert!(h.has_producer_id());
    assert_eq!(BatchHeader::parse(&batch[..BATCH_HEADER_LEN]), Ok(h));
}

#[test]
fn attribute_bits() {
    let mut batch = sample_batch();
    for (id, codec) in [
        (0, Compression::None),
        (1, Compression::Gzip),
        (2, Compression::Snappy),
        (3, Compression::Lz4),
        (4, Compression::Zstd),
    ] {
        assert_eq!(Compression::from_id(id), Ok(codec));
        assert_eq!(codec.id(), id);
        put_i16(&mut batch, ATTRIBUTES_OFFSET, 0x38 | i16::from(id));
        fix_crc(&mut batch);
        let h = validate(&batch).expect("valid");
        assert_eq!(h.compression(), Ok(codec));
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        assert!(h.is_transactional());
        assert!(h.is_control());
        assert!(!h.has_producer_id());
    }
}

#[test]
fn error_too_short() {
    let batch = sample_batch();
    assert_eq!(
        BatchHeader::parse(&[]),
        Err(BatchError::TooShort { len: 0 })
    );
    assert_eq!(
        validate(&batch[..60]),
        Err(BatchError::TooShort { len: 60 })
    );
}

#[test]
fn error_bad_length() {
    let mut batch = sample_batch();
    let len = batch.len();
    // Declared longer than the buffer: the header parses, validate rejects.
    assert!(BatchHeader::parse(&batch[..len - 1]).is_ok());
    assert_eq!(
        validate(&batch[..len - 1]),
        Err(BatchError::BadLength {
            declared: (len - LOG_OVERHEAD) as i32,
            available: len - 1 - LOG_OVERHEAD,
        })
    );
    // Shorter than the header.
    put_i32(&mut batch, BATCH_LENGTH_OFFSET, 48);
    assert_eq!(
        BatchHeader::parse(&batch),
        Err(BatchError::BadLength {
            declared: 48,
            available: len - LOG_OVERHEAD
        })
    );
    put_i32(&mut batch, BATCH_LENGTH_OFFSET, -1);
    assert!(matches!(
        validate(&batch),
        Err(BatchError::BadLength { declared: -1, .. })
    ));
    put_i32(&mut batch, BATCH_LENGTH_OFFSET, i32::MAX);
    assert!(matches!(
        validate(&batch),
        Err(BatchError::BadLength {
            declared: i32::MAX,
            ..
        })
    ));
}

#[test]
fn error_unsupported_magic() {
    let mut batch = sample_batch();
    for magic in [0u8, 1, 3, 0xff] {
        batch[MAGIC_OFFSET] = magic;
        assert_eq!(
            validate(&batch),
            Err(BatchError::UnsupportedMagic(magic as i8))
        );
    }
}

#[test]
fn error_crc_mismatch() {
    let mut batch = sample_batch();
    let stored = compute_crc(&batch);
    let last = batch.len() - 1;
    batch[last] ^= 0x01;
    assert_eq!(
        validate(&batch),
        Err(BatchError::CrcMismatch {
            stored,
            computed: compute_crc(&batch)
        })
    );
}

#[test]
fn error_bad_record_count() {
    let mut batch = sample_batch();
    // Count does not match lastOffsetDelta (2).
    put_i32(&mut batch, RECORDS_COUNT_OFFSET, 2);
    fix_crc(&mut batch);
    assert_eq!(
        validate(&batch),
        Err(BatchError::BadRecordCount {
            records: 2,
            last_offset_delta: 2
        })
    );
    // Empty batch.
    put_i32(&mut batch, RECORDS_COUNT_OFFSET, 0);
    put_i32(&mut batch, LAST_OFFSET_DELTA_OFFSET, -1);
    fix_crc(&mut batch);
    assert_eq!(
        validate(&batch),
        Err(BatchError::BadRecordCount {
            records: 0,
            last_offset_delta: -1
        })
    );
    // Negative count.
    put_i32(&mut batch, RECORDS_COUNT_OFFSET, -5);
    put_i32(&mut batch, LAST_OFFSET_DELTA_OFFSET, -6);
    fix_crc(&mut batch);
    assert_eq!(
        validate(&batch),
        Err(BatchError::BadRecordCount {
            records: -5,
            last_offset_delta: -6
        })
    );
    // i32::MIN must not overflow.
    put_i32(&mut batch, RECORDS_COUNT_OFFSET, i32::MIN);
    fix_crc(&mut batch);
    assert!(matches!(
        validate(&batch),
        Err(BatchError::BadRecordCount {
            records: i32::MIN,
            ..
        })
    ));
    // The builder's empty batch is rejected too.
    let empty = BatchBuilder::new(0).build();
    assert_eq!(
        validate(&empty),
        Err(BatchError::BadRecordCount {
            records: 0,
            last_offset_delta: -1
        })
    );
}

#[test]
fn error_unknown_compression() {
    let mut batch = sample_batch();
    for id in 5..=7u8 {
        put_i16(&mut batch, ATTRIBUTES_OFFSET, i16::from(id));
        fix_crc(&mut batch);
        assert_eq!(validate(&batch), Err(BatchError::UnknownCompression(id)));
        let h = BatchHeader::parse(&batch).expect("header parses");
        assert_eq!(h.compression(), Err(BatchError::UnknownCompression(id)));
    }
}

#[test]
fn error_trailing_bytes() {
    let mut batch = sample_batch();
    let h = validate_exact(&batch).expect("valid");
    batch.extend_from_slice(&[0, 1, 2]);
    assert_eq!(validate(&batch), Ok(h));
    assert_eq!(
        validate_exact(&batch),
        Err(BatchError::TrailingBytes { extra: 3 })
    );
}

#[test]
fn two_batches_back_to_back() {
    let first = sample_batch();
    let second = BatchBuilder::new(5).push(None, Some(b"x"), 5, &[]).build();
    let mut buf = first.clone();
    buf.extend_from_slice(&second);
    let h1 = validate(&buf).expect("first");
    let h2 = validate_exact(&buf[h1.total_len()..]).expect("second");
    assert_eq!(h1.record_count, 3);
    assert_eq!(h2.record_count, 1);
}

#[test]
fn set_base_offset_keeps_crc() {
    let mut batch = sample_batch();
    let before = validate_exact(&batch).expect("valid");
    set_base_offset(&mut batch, 1_000_000);
    let after = validate_exact(&batch).expect("still valid");
    assert_eq!(after.base_offset, 1_000_000);
    assert_eq!(after.crc, before.crc);
    assert_eq!(after.last_offset(), 1_000_002);
    assert_eq!(after.next_offset(), 1_000_003);
}

#[test]
fn set_partition_leader_epoch_keeps_crc() {
    let mut batch = sample_batch();
    let before = validate_exact(&batch).expect("valid");
    set_partition_leader_epoch(&mut batch, 42);
    let after = validate_exact(&batch).expect("still valid");
    assert_eq!(after.partition_leader_epoch, 42);
    assert_eq!(after.crc, before.crc);
}

#[test]
fn set_log_append_time_sets_type_and_crc() {
    let mut batch = sample_batch();
    let before = validate_exact(&batch).expect("valid");
    assert_eq!(before.timestamp_type(), TimestampType::CreateTime);
    set_log_append_time(&mut batch, 9_999);
    let after = validate_exact(&batch).expect("still valid");
    assert_eq!(after.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(after.max_timestamp, 9_999);
    assert_eq!(after.base_timestamp, before.base_timestamp);
    assert_eq!(after.compression(), Ok(Compression::None));
    assert_ne!(after.crc, before.crc);
}

#[test]
fn set_log_append_time_leaves_following_bytes_alone() {
    let mut buf = sample_batch();
    let len = buf.len();
    buf.extend_from_slice(&[0xaa; 7]);
    set_log_append_time(&mut buf, 5);
    assert_eq!(&buf[len..], &[0xaa; 7]);
    let h = validate(&buf).expect("valid");
    assert_eq!(h.max_timestamp, 5);
}

#[test]
fn mutators_ignore_short_or_bad_input() {
    for len in [0, 1, 12, 20, 60] {
        let mut short = vec![0x5au8; len];
        set_base_offset(&mut short, 1);
        set_partition_leader_epoch(&mut short, 1);
        set_log_append_time(&mut short, 1);
        assert!(short.iter().all(|&b| b == 0x5a));
    }
    // Declared length beyond the buffer: set_log_append_time does nothing.
    let batch = sample_batch();
    let mut truncated = batch[..batch.len() - 1].to_vec();
    let copy = truncated.clone();
    set_log_append_time(&mut truncated, 1);
    assert_eq!(truncated, copy);
}

fn arb_batch() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        (
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
            -1_000i64..1_000,
        ),
        1..8,
    )
    .prop_map(|records| {
        let mut b = BatchBuilder::new(0);
        for (k, v, ts) in &records {
            b.push(k.as_deref(), v.as_deref(), *ts, &[("hdr", b"val")]);
        }
        b.build().to_vec()
    })
}

proptest! {
    #[test]
    fn flipped_byte_in_crc_range_is_detected(
        batch in arb_batch(),
        pos in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let mut batch = batch;
        prop_assert!(validate_exact(&batch).is_ok());
        // Everything from the CRC field itself to the end is protected.
        let i = CRC_OFFSET + pos.index(batch.len() - CRC_OFFSET);
        batch[i] ^= mask;
        let err = validate_exact(&batch);
        prop_assert!(
            matches!(err, Err(BatchError::CrcMismatch { .. })),
            "flip at {} gave {:?}", i, err
        );
    }

    #[test]
    fn parse_and_validate_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = BatchHeader::parse(&bytes);
        let _ = validate(&bytes);
        let _ = validate_exact(&bytes);
        let _ = compute_crc(&bytes);
        let mut m = bytes.clone();
        set_base_offset(&mut m, 1);
        set_partition_leader_epoch(&mut m, 1);
        set_log_append_time(&mut m, 1);
    }

    #[test]
    fn validate_never_panics_on_plausible_headers(
        batch_length in any::<i32>(),
        attributes in any::<i16>(),
        last_offset_delta in any::<i32>(),
        record_count in any::<i32>(),
        body in proptest::collection::vec(any::<u8>(), 0..128),
        good_crc in any::<bool>(),
    ) {
        let mut buf = vec![0u8; BATCH_HEADER_LEN];
        buf.extend_from_slice(&body);
        put_i32(&mut buf, BATCH_LENGTH_OFFSET, batch_length);
        buf[MAGIC_OFFSET] = 2;
        put_i16(&mut buf, ATTRIBUTES_OFFSET, attributes);
        put_i32(&mut buf, LAST_OFFSET_DELTA_OFFSET, last_offset_delta);
        put_i32(&mut buf, RECORDS_COUNT_OFFSET, record_count);
        if good_crc {
            fix_crc(&mut buf);
        }
        if let Ok(h) = validate(&buf) {
            prop_assert!(h.total_len() <= buf.len());
            prop_assert!(h.record_count > 0);
            prop_assert!(h.compression().is_ok());
        }
        let _ = validate_exact(&buf);
        set_log_append_time(&mut buf, 7);
    }

    #[test]
    fn set_base_offset_and_log_append_time_keep_batches_valid(
        batch in arb_batch(),
        base in any::<i64>(),
        now in any::<i64>(),
    ) {
        let mut batch = batch;
        set_base_offset(&mut batch, base);
        set_log_append_time(&mut batch, now);
        let h = validate_exact(&batch);
        prop_assert!(h.is_ok(), "{:?}", h);
        if let Ok(h) = h {
            prop_assert_eq!(h.base_offset, base);
            prop_assert_eq!(h.max_timestamp, now);
            prop_assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        }
    }
}
