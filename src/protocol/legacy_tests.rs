//! Tests of legacy message sets: parsing, conversion to v2 batches and back (every codec), and the limits on hostile input.

use super::*;
use crate::protocol::batch_builder::decode_records;
use std::io::Write;

use crate::protocol::codecs::{
    lz4_header_checksum, snappy_decompress, xxh32, LZ4_FLG_CONTENT_SIZE, LZ4_FRAME_MAGIC,
    XERIAL_MAGIC,
};
use crate::protocol::record_batch::{validate_exact, Compression, TimestampType};
use proptest::prelude::*;

type Rec = (Option<Vec<u8>>, Option<Vec<u8>>, i64);

const NOW: i64 = 1_700_000_000_000;
const MAX: usize = 16 << 20;

fn put_nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}

/// One message (crc..value) with a correct CRC32.
fn message(
    magic: i8,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Vec<u8> {
    let mut body = vec![magic as u8, attributes as u8];
    if magic == 1 {
        body.extend_from_slice(&timestamp.to_be_bytes());
    }
    put_nullable(&mut body, key);
    put_nullable(&mut body, value);
    let mut out = crc32fast::hash(&body).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

fn entry(out: &mut Vec<u8>, offset: i64, msg: &[u8]) {
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(msg.len() as i32).to_be_bytes());
    out.extend_from_slice(msg);
}

/// An uncompressed set of `recs` with offsets 0..n-1.
fn plain_set(magic: i8, recs: &[Rec]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (k, v, ts)) in recs.iter().enumerate() {
        let m = message(magic, 0, *ts, k.as_deref(), v.as_deref());
        entry(&mut out, i as i64, &m);
    }
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn snappy_raw(data: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(data).unwrap()
}

/// xerial framing, built by hand with small blocks so that several blocks are exercised.
fn snappy_xerial(data: &[u8], block: usize) -> Vec<u8> {
    let mut out = XERIAL_MAGIC.to_vec();
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    for chunk in data.chunks(block) {
        let c = snappy_raw(chunk);
        out.extend_from_slice(&(c.len() as i32).to_be_bytes());
        out.extend_from_slice(&c);
    }
    out
}

fn lz4_frame(data: &[u8]) -> Vec<u8> {
    let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// An LZ4 frame with the header checksum Kafka 0.8/0.9 and librdkafka (magic 0) write: XXH32
/// over the frame magic and the descriptor instead of the descriptor alone.
fn lz4_frame_broken_hc(data: &[u8]) -> Vec<u8> {
    let mut frame = lz4_frame(data);
    let flg = frame[4];
    let mut hc_pos = 6;
    if flg & LZ4_FLG_CONTENT_SIZE != 0 {
        hc_pos += 8;
    }
    assert_eq!(frame[hc_pos], lz4_header_checksum(&frame[4..hc_pos]));
    let broken = (xxh32(&frame[..hc_pos], 0) >> 8) as u8;
    assert_ne!(broken, frame[hc_pos], "test needs a checksum that differs");
    frame[hc_pos] = broken;
    frame
}

#[derive(Clone, Copy, Debug)]
enum Framing {
    Gzip,
    SnappyRaw,
    SnappyXerial,
    Lz4,
}

impl Framing {
    fn codec(self) -> u8 {
        match self {
            Framing::Gzip => CODEC_GZIP,
            Framing::SnappyRaw | Framing::SnappyXerial => CODEC_SNAPPY,
            Framing::Lz4 => CODEC_LZ4,
        }
    }

    /// Compresses an inner set the way a client of message format `magic` would.
    fn compress(self, magic: i8, data: &[u8]) -> Vec<u8> {
        match self {
            Framing::Gzip => gzip(data),
            Framing::SnappyRaw => snappy_raw(data),
            Framing::SnappyXerial => snappy_xerial(data, 40),
            Framing::Lz4 if magic == 0 => lz4_frame_broken_hc(data),
            Framing::Lz4 => lz4_frame(data),
        }
    }
}

const FRAMINGS: [Framing; 4] = [
    Framing::Gzip,
    Framing::SnappyRaw,
    Framing::SnappyXerial,
    Framing::Lz4,
];

/// A set holding one compressed wrapper around `recs` (inner offsets 0..n-1, wrapper offset
/// n-1, as librdkafka and the Java client write them).
fn wrapped_set(
    magic: i8,
    framing: Framing,
    wrapper_ts: i64,
    log_append: bool,
    recs: &[Rec],
) -> Vec<u8> {
    let inner = plain_set(magic, recs);
    let compressed = framing.compress(magic, &inner);
    let mut attrs = framing.codec() as i8;
    if log_append {
        attrs |= TIMESTAMP_TYPE_MASK;
    }
    let wrapper = message(magic, attrs, wrapper_ts, None, Some(&compressed));
    let mut out = Vec::new();
    entry(&mut out, recs.len() as i64 - 1, &wrapper);
    out
}

fn sample() -> Vec<Rec> {
    vec![
        (Some(b"k0".to_vec()), Some(b"v0".to_vec()), 1_000),
        (None, Some(b"value one".to_vec()), 1_001),
        (Some(b"k2".to_vec()), None, 990),
        (None, None, 1_005),
        (Some(Vec::new()), Some(vec![7u8; 300]), 1_002),
    ]
}

/// Decodes a converted batch (decompressing its records if needed) into
/// (key, value, timestamp), checking the header on the way.
fn decode_converted(conv: &ConvertedSet) -> Vec<Rec> {
    let h = validate_exact(&conv.batch).expect("converted batch is valid");
    assert_eq!(h.record_count as usize, conv.record_count);
    assert_eq!(h.base_offset, 0);
    assert_eq!(h.partition_leader_epoch, -1);
    assert_eq!(
        (h.producer_id, h.producer_epoch, h.base_sequence),
        (-1, -1, -1)
    );
    assert_eq!(h.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(h.compression().unwrap().id(), conv.codec);
    assert!(!h.is_transactional() && !h.is_control());

    let plain = if conv.codec == CODEC_NONE {
        conv.batch.clone()
    } else {
        let records = decompress_records(conv.codec, &conv.batch[BATCH_HEADER_LEN..], MAX)
            .expect("records decompress");
        let mut plain = conv.batch[..BATCH_HEADER_LEN].to_vec();
        plain.extend_from_slice(&records);
        let len = (plain.len() - LOG_OVERHEAD) as i32;
        plain[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&len.to_be_bytes());
        plain[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&[0, 0]);
        let crc = compute_crc(&plain);
        plain[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        plain
    };
    let decoded = decode_records(&plain).expect("records decode");
    decoded
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            assert_eq!(r.offset, i as i64);
            assert!(r.headers.is_empty());
            (r.key, r.value, r.timestamp)
        })
        .collect()
}

fn parsed(data: &[u8]) -> Vec<Rec> {
    let (recs, _) = parse_message_set(data, MAX, NOW).expect("parses");
    recs.into_iter()
        .map(|r| {
            (
                r.key.map(|b| b.to_vec()),
                r.value.map(|b| b.to_vec()),
                r.timestamp,
            )
        })
        .collect()
}

fn with_ts(recs: &[Rec], ts: i64) -> Vec<Rec> {
    recs.iter()
        .map(|(k, v, _)| (k.clone(), v.clone(), ts))
        .collect()
}

#[test]
fn xxh32_matches_reference_values() {
    // Reference values of XXH32 with seed 0.
    assert_eq!(xxh32(b"", 0), 0x02CC_5D05);
    assert_eq!(xxh32(b"a", 0), 0x550D_7456);
    assert_eq!(xxh32(b"abc", 0), 0x32D1_53FF);
    // Long input (stripe path) cross-checked against lz4_flex's content checksum, which is
    // XXH32 of the whole content, stored little endian before the end of the frame.
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
    for len in [0usize, 3, 15, 16, 17, 31, 32, 33, 999] {
        let info = lz4_flex::frame::FrameInfo::new().content_checksum(true);
        let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        enc.write_all(&data[..len]).unwrap();
        let frame = enc.finish().unwrap();
        let tail = &frame[frame.len() - 4..];
        let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        assert_eq!(xxh32(&data[..len], 0), stored, "len {len}");
    }
}

#[test]
fn uncompressed_v0_and_v1_convert() {
    let recs = sample();
    // v0 has no timestamps: every record gets now_ms.
    let conv = convert_message_set(&plain_set(0, &recs), MAX, NOW).unwrap();
    assert_eq!((conv.codec, conv.record_count), (0, recs.len()));
    assert_eq!(decode_converted(&conv), with_ts(&recs, NOW));
    assert_eq!(parsed(&plain_set(0, &recs)), with_ts(&recs, NOW));

    let conv = convert_message_set(&plain_set(1, &recs), MAX, NOW).unwrap();
    assert_eq!((conv.codec, conv.record_count), (0, recs.len()));
    let h = validate_exact(&conv.batch).unwrap();
    assert_eq!((h.base_timestamp, h.max_timestamp), (1_000, 1_005));
    assert_eq!(decode_converted(&conv), recs);
    assert_eq!(parsed(&plain_set(1, &recs)), recs);
}

#[test]
fn compressed_sets_convert_with_the_same_codec() {
    let recs = sample();
    for magic in [0i8, 1] {
        for framing in FRAMINGS {
            let set = wrapped_set(magic, framing, 5_000, false, &recs);
            let expected = if magic == 0 {
                with_ts(&recs, NOW)
            } else {
                recs.clone()
            };
            let (p, codec) = parse_message_set(&set, MAX, NOW).unwrap();
            assert_eq!(codec, framing.codec(), "{magic} {framing:?}");
            assert_eq!(p.len(), recs.len());
            assert_eq!(parsed(&set), expected, "{magic} {framing:?}");

            let conv = convert_message_set(&set, MAX, NOW).unwrap();
            assert_eq!(conv.codec, framing.codec());
            assert_eq!(conv.record_count, recs.len());
            assert_eq!(decode_converted(&conv), expected, "{magic} {framing:?}");
        }
    }
}

#[test]
fn log_append_time_wrapper_timestamp_applies() {
    let recs = sample();
    for framing in FRAMINGS {
        let set = wrapped_set(1, framing, 77_000, true, &recs);
        assert_eq!(parsed(&set), with_ts(&recs, 77_000));
        let conv = convert_message_set(&set, MAX, NOW).unwrap();
        assert_eq!(decode_converted(&conv), with_ts(&recs, 77_000));
    }
}

#[test]
fn output_framing_is_what_java_clients_read() {
    let set = wrapped_set(1, Framing::Lz4, 0, false, &sample());
    let conv = convert_message_set(&set, MAX, NOW).unwrap();
    let records = &conv.batch[BATCH_HEADER_LEN..];
    assert_eq!(&records[..4], &LZ4_FRAME_MAGIC.to_le_bytes());
    // FLG: version 01, independent blocks, no checksums, no content size; BD: 64 KiB blocks.
    assert_eq!((records[4], records[5]), (0x60, 0x40));
    assert_eq!(records[6], lz4_header_checksum(&records[4..6]));

    let set = wrapped_set(1, Framing::SnappyRaw, 0, false, &sample());
    let conv = convert_message_set(&set, MAX, NOW).unwrap();
    let records = &conv.batch[BATCH_HEADER_LEN..];
    assert_eq!(&records[..8], &XERIAL_MAGIC);
    assert_eq!(&records[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);

    let set = wrapped_set(1, Framing::Gzip, 0, false, &sample());
    let conv = convert_message_set(&set, MAX, NOW).unwrap();
    assert_eq!(
        &conv.batch[BATCH_HEADER_LEN..BATCH_HEADER_LEN + 2],
        &[0x1f, 0x8b]
    );
}

#[test]
fn large_snappy_output_uses_several_xerial_blocks() {
    let recs: Vec<Rec> = (0..40)
        .map(|i| (None, Some(vec![i as u8; 2_000]), i64::from(i)))
        .collect();
    let set = wrapped_set(1, Framing::SnappyXerial, 0, false, &recs);
    let conv = convert_message_set(&set, MAX, NOW).unwrap();
    assert_eq!(decode_converted(&conv), recs);
    let records = &conv.batch[BATCH_HEADER_LEN..];
    let first = i32::from_be_bytes(records[16..20].try_into().unwrap()) as usize;
    assert!(20 + first < records.len(), "more than one block");
}

#[test]
fn lz4_v0_accepts_broken_and_correct_header_checksums_v1_requires_correct() {
    let recs = sample();
    let inner = plain_set(0, &recs);
    for frame in [lz4_frame_broken_hc(&inner), lz4_frame(&inner)] {
        let mut set = Vec::new();
        entry(&mut set, 4, &message(0, 3, 0, None, Some(&frame)));
        assert_eq!(parsed(&set), with_ts(&recs, NOW));
    }

    let inner = plain_set(1, &recs);
    let mut set = Vec::new();
    let frame = lz4_frame_broken_hc(&inner);
    entry(&mut set, 4, &message(1, 3, 0, None, Some(&frame)));
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::Decompress(_))
    ));
}

#[test]
fn lz4_v0_fixup_handles_content_size_in_the_header() {
    let recs = sample();
    let inner = plain_set(0, &recs);
    let info = lz4_flex::frame::FrameInfo::new().content_size(Some(inner.len() as u64));
    let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
    enc.write_all(&inner).unwrap();
    let mut frame = enc.finish().unwrap();
    assert_ne!(frame[4] & LZ4_FLG_CONTENT_SIZE, 0);
    frame[14] = (xxh32(&frame[..14], 0) >> 8) as u8;
    let mut set = Vec::new();
    entry(&mut set, 4, &message(0, 3, 0, None, Some(&frame)));
    assert_eq!(parsed(&set), with_ts(&recs, NOW));
}

#[test]
fn several_messages_and_wrappers_in_one_set() {
    let recs = sample();
    let mut set = plain_set(1, &recs[..2]);
    set.extend(wrapped_set(1, Framing::Gzip, 0, false, &recs[2..4]));
    set.extend(wrapped_set(1, Framing::Lz4, 0, false, &recs[4..]));
    let (p, codec) = parse_message_set(&set, MAX, NOW).unwrap();
    assert_eq!(codec, CODEC_LZ4);
    assert_eq!(p.len(), recs.len());
    let conv = convert_message_set(&set, MAX, NOW).unwrap();
    assert_eq!(conv.codec, CODEC_LZ4);
    assert_eq!(decode_converted(&conv), recs);
}

#[test]
fn null_and_empty_keys_and_values() {
    let recs = vec![
        (None, None, 1),
        (Some(Vec::new()), Some(Vec::new()), 2),
        (None, Some(Vec::new()), 3),
        (Some(Vec::new()), None, 4),
    ];
    let (p, _) = parse_message_set(&plain_set(1, &recs), MAX, NOW).unwrap();
    assert_eq!(p[0].key, None);
    assert_eq!(p[1].key, Some(Bytes::new()));
    assert_eq!(
        decode_converted(&convert_message_set(&plain_set(1, &recs), MAX, NOW).unwrap()),
        recs
    );
    let set = wrapped_set(1, Framing::SnappyXerial, 0, false, &recs);
    assert_eq!(
        decode_converted(&convert_message_set(&set, MAX, NOW).unwrap()),
        recs
    );
}

#[test]
fn bad_crc_is_rejected_outer_and_inner() {
    let mut set = plain_set(1, &sample());
    set[30] ^= 0x01; // inside the first message's body
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::BadCrc { at: 0, .. })
    ));
    assert!(matches!(
        convert_message_set(&set, MAX, NOW),
        Err(LegacyError::BadCrc { .. })
    ));

    // Inner message corrupted before compression; the wrapper CRC is fine.
    let mut inner = plain_set(1, &sample());
    inner[12 + 10] ^= 0xff; // timestamp byte of the first inner message
    let mut set = Vec::new();
    entry(&mut set, 4, &message(1, 1, 0, None, Some(&gzip(&inner))));
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::BadCrc { at: 0, .. })
    ));
}

#[test]
fn truncated_input_is_rejected() {
    let set = plain_set(1, &sample());
    let mut boundaries = Vec::new();
    let mut pos = 0;
    while pos < set.len() {
        let size = i32::from_be_bytes(set[pos + 8..pos + 12].try_into().unwrap());
        pos += MESSAGE_LOG_OVERHEAD + size as usize;
        boundaries.push(pos);
    }
    for cut in 1..set.len() {
        let r = parse_message_set(&set[..cut], MAX, NOW);
        if boundaries.contains(&cut) {
            assert!(r.is_ok(), "cut {cut}: {r:?}");
        } else {
            assert!(
                matches!(r, Err(LegacyError::Truncated { .. })),
                "cut {cut}: {r:?}"
            );
        }
    }
    assert_eq!(parse_message_set(&[], MAX, NOW), Err(LegacyError::Empty));
    assert_eq!(
        convert_message_set(&[], MAX, NOW).map(|c| c.record_count),
        Err(LegacyError::Empty)
    );

    // Truncated compressed payload (wrapper CRC recomputed over the cut value).
    let inner = plain_set(1, &sample());
    for framing in FRAMINGS {
        let compressed = framing.compress(1, &inner);
        // (lz4_flex accepts a frame whose end mark is cut off, so cut into the data.)
        let cut = &compressed[..compressed.len() / 2];
        let mut set = Vec::new();
        entry(
            &mut set,
            4,
            &message(1, framing.codec() as i8, 0, None, Some(cut)),
        );
        assert!(parse_message_set(&set, MAX, NOW).is_err(), "{framing:?}");
    }
}

#[test]
fn malformed_messages_are_rejected() {
    // Size below the minimum.
    let mut set = Vec::new();
    entry(&mut set, 0, &[0u8; 10]);
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::Malformed { at: 8, .. })
    ));
    // Negative size.
    let mut set = 0i64.to_be_bytes().to_vec();
    set.extend_from_slice(&(-5i32).to_be_bytes());
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::Malformed { .. })
    ));
    // Key length beyond the message, with a correct CRC.
    let mut body = vec![0u8, 0];
    body.extend_from_slice(&100i32.to_be_bytes());
    body.extend_from_slice(&(-1i32).to_be_bytes());
    let mut msg = crc32fast::hash(&body).to_be_bytes().to_vec();
    msg.extend_from_slice(&body);
    let mut set = Vec::new();
    entry(&mut set, 0, &msg);
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::Malformed { .. })
    ));
    // Huge key length must not allocate.
    let mut body = vec![0u8, 0];
    body.extend_from_slice(&i32::MAX.to_be_bytes());
    body.extend_from_slice(&(-1i32).to_be_bytes());
    let mut msg = crc32fast::hash(&body).to_be_bytes().to_vec();
    msg.extend_from_slice(&body);
    let mut set = Vec::new();
    entry(&mut set, 0, &msg);
    assert!(parse_message_set(&set, MAX, NOW).is_err());
    // Bytes after the value.
    let mut body = vec![0u8, 0];
    body.extend_from_slice(&(-1i32).to_be_bytes());
    body.extend_from_slice(&(-1i32).to_be_bytes());
    body.push(9);
    let mut msg = crc32fast::hash(&body).to_be_bytes().to_vec();
    msg.extend_from_slice(&body);
    let mut set = Vec::new();
    entry(&mut set, 0, &msg);
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::Malformed {
            reason: "bytes after the message value",
            ..
        })
    ));
    // Magic 2 (a RecordBatch) and unknown codecs.
    let batch = BatchBuilder::new(0).push(None, None, 0, &[]).build();
    assert_eq!(
        parse_message_set(&batch, MAX, NOW),
        Err(LegacyError::UnsupportedMagic(2))
    );
    for codec in 4..8i8 {
        let mut set = Vec::new();
        entry(&mut set, 0, &message(1, codec, 0, None, Some(b"x")));
        assert_eq!(
            parse_message_set(&set, MAX, NOW),
            Err(LegacyError::UnsupportedCodec(codec as u8))
        );
    }
    // Wrapper with a null value, and with an empty inner set.
    let mut set = Vec::new();
    entry(&mut set, 0, &message(1, 1, 0, None, None));
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::Malformed { .. })
    ));
    let mut set = Vec::new();
    entry(&mut set, 0, &message(1, 1, 0, None, Some(&gzip(&[]))));
    assert!(matches!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::Malformed { .. })
    ));
    // Garbage that is not compressed at all.
    for codec in 1..4i8 {
        let mut set = Vec::new();
        entry(
            &mut set,
            0,
            &message(1, codec, 0, None, Some(b"not compressed")),
        );
        assert!(matches!(
            parse_message_set(&set, MAX, NOW),
            Err(LegacyError::Decompress(_))
        ));
    }
}

#[test]
fn nested_wrappers_and_magic_mismatch_are_rejected() {
    let inner_wrapper = wrapped_set(1, Framing::Gzip, 0, false, &sample());
    let mut set = Vec::new();
    entry(
        &mut set,
        0,
        &message(1, 1, 0, None, Some(&gzip(&inner_wrapper))),
    );
    assert_eq!(parse_message_set(&set, MAX, NOW), Err(LegacyError::Nested));
    assert_eq!(
        convert_message_set(&set, MAX, NOW).map(|c| c.record_count),
        Err(LegacyError::Nested)
    );

    let inner_v0 = plain_set(0, &sample());
    let mut set = Vec::new();
    entry(&mut set, 0, &message(1, 1, 0, None, Some(&gzip(&inner_v0))));
    assert_eq!(
        parse_message_set(&set, MAX, NOW),
        Err(LegacyError::MagicMismatch {
            wrapper: 1,
            inner: 0
        })
    );
}

#[test]
fn decompression_is_capped() {
    // 8 MiB of one value: compresses to a few KiB in every codec.
    let recs = vec![(None, Some(vec![0u8; 8 << 20]), 1)];
    let inner_len = plain_set(1, &recs).len();
    for framing in FRAMINGS {
        let set = wrapped_set(1, framing, 0, false, &recs);
        assert!(set.len() < inner_len / 3, "{framing:?} {}", set.len());
        assert_eq!(
            parse_message_set(&set, 1 << 20, NOW),
            Err(LegacyError::TooLarge { limit: 1 << 20 }),
            "{framing:?}"
        );
        assert_eq!(
            convert_message_set(&set, inner_len - 1, NOW).map(|c| c.record_count),
            Err(LegacyError::TooLarge {
                limit: inner_len - 1
            }),
            "{framing:?}"
        );
        assert_eq!(parse_message_set(&set, inner_len, NOW).unwrap().0.len(), 1);
    }
    // The budget is shared by all wrappers of a set.
    let small = sample();
    let one = plain_set(1, &small).len();
    let mut set = wrapped_set(1, Framing::Gzip, 0, false, &small);
    set.extend(wrapped_set(1, Framing::SnappyRaw, 0, false, &small));
    assert!(parse_message_set(&set, 2 * one, NOW).is_ok());
    assert_eq!(
        parse_message_set(&set, 2 * one - 1, NOW),
        Err(LegacyError::TooLarge { limit: 2 * one - 1 })
    );
}

#[test]
fn snappy_impossible_length_is_rejected_without_allocating() {
    // Raw snappy header declaring 2^31 bytes, then nothing.
    let block = [0x80, 0x80, 0x80, 0x80, 0x08];
    assert!(matches!(
        snappy_decompress(&block, usize::MAX),
        Err(LegacyError::Decompress(_))
    ));
    let mut xerial = XERIAL_MAGIC.to_vec();
    xerial.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    xerial.extend_from_slice(&(block.len() as i32).to_be_bytes());
    xerial.extend_from_slice(&block);
    assert!(snappy_decompress(&xerial, usize::MAX).is_err());
    // Truncated xerial block length and negative length.
    let mut x = XERIAL_MAGIC.to_vec();
    x.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0]);
    assert!(snappy_decompress(&x, MAX).is_err());
    let mut x = XERIAL_MAGIC.to_vec();
    x.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]);
    assert!(snappy_decompress(&x, MAX).is_err());
}

#[test]
fn decompress_and_compress_records_round_trip_all_codecs() {
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 13) as u8).collect();
    for codec in 0..=4u8 {
        let c = compress_records(codec, &data).unwrap();
        assert_eq!(decompress_records(codec, &c, data.len()).unwrap(), data);
        assert_eq!(
            decompress_records(codec, &c, data.len() - 1),
            Err(LegacyError::TooLarge {
                limit: data.len() - 1
            })
        );
        assert_eq!(Compression::from_id(codec).unwrap().id(), codec);
    }
    assert_eq!(
        decompress_records(5, &data, MAX),
        Err(LegacyError::UnsupportedCodec(5))
    );
}

fn arb_recs() -> impl Strategy<Value = Vec<Rec>> {
    proptest::collection::vec(
        (
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100)),
            any::<i64>(),
        ),
        1..12,
    )
}

proptest! {
    #[test]
    fn parse_never_panics_on_arbitrary_bytes(
        data in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let _ = parse_message_set(&data, 1 << 16, NOW);
        let _ = convert_message_set(&data, 1 << 16, NOW);
    }

    #[test]
    fn parse_never_panics_on_arbitrary_wrapper_payloads(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        codec in 1i8..4,
        magic in 0i8..2,
        prefix in 0usize..4,
    ) {
        // Prefix the payload with a plausible frame start so the decoders get further.
        let mut value = match prefix {
            0 => Vec::new(),
            1 => XERIAL_MAGIC.to_vec(),
            2 => LZ4_FRAME_MAGIC.to_le_bytes().to_vec(),
            _ => vec![0x1f, 0x8b, 8, 0],
        };
        value.extend_from_slice(&payload);
        let mut set = Vec::new();
        entry(&mut set, 0, &message(magic, codec, 0, None, Some(&value)));
        let _ = parse_message_set(&set, 1 << 16, NOW);
    }

    #[test]
    fn parse_never_panics_on_corrupted_valid_sets(
        recs in arb_recs(),
        idx in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        framing in 0usize..4,
    ) {
        let inner = plain_set(1, &recs);
        let mut value = FRAMINGS[framing].compress(1, &inner);
        let i = idx.index(value.len());
        value[i] = byte;
        let mut set = Vec::new();
        entry(&mut set, 0, &message(1, FRAMINGS[framing].codec() as i8, 0, None, Some(&value)));
        let _ = parse_message_set(&set, 1 << 16, NOW);
    }

    #[test]
    fn arbitrary_records_round_trip(
        recs in arb_recs(),
        magic in 0i8..2,
        framing in proptest::option::of(0usize..4),
    ) {
        let set = match framing {
            None => plain_set(magic, &recs),
            Some(f) => wrapped_set(magic, FRAMINGS[f], 0, false, &recs),
        };
        let expected = if magic == 0 { with_ts(&recs, NOW) } else { recs.clone() };
        prop_assert_eq!(parsed(&set), expected.clone());
        let conv = convert_message_set(&set, MAX, NOW);
        prop_assert!(conv.is_ok(), "{:?}", conv);
        if let Ok(conv) = conv {
            prop_assert_eq!(conv.codec, framing.map_or(0, |f| FRAMINGS[f].codec()));
            prop_assert_eq!(decode_converted(&conv), expected);
        }
    }
}
