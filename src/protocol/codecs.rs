//! The compression codecs of Kafka's record batches and legacy message sets, with the framings
//! clients write: gzip members, xerial-framed or raw snappy, LZ4 frames (with the KAFKA-3160
//! header-checksum fixup for magic 0), zstd. Every decompression is capped.

use std::io::{Read, Write};

use super::legacy_error::LegacyError;
use super::legacy_reader::Reader;
use super::record_batch::MAX_BATCH_LEN;

/// Codec id: no compression.
pub const CODEC_NONE: u8 = 0;
/// Codec id: gzip.
pub const CODEC_GZIP: u8 = 1;
/// Codec id: snappy.
pub const CODEC_SNAPPY: u8 = 2;
/// Codec id: lz4.
pub const CODEC_LZ4: u8 = 3;
/// Codec id: zstd (RecordBatch v2 only; never valid in a legacy message).
pub const CODEC_ZSTD: u8 = 4;

/// The 8-byte magic that starts a xerial-framed snappy stream (Java client's snappy framing).
pub(super) const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// xerial header: magic (8) + version i32 + compatible version i32.
const XERIAL_HEADER_LEN: usize = 16;
/// Version and minimum compatible version written in the xerial header (what snappy-java writes).
const XERIAL_VERSION: i32 = 1;
/// Uncompressed size of each xerial block we write (snappy-java's default block size).
const XERIAL_BLOCK: usize = 32 * 1024;
/// A snappy element expands at most 64 bytes out of 2-3 bytes in; a declared length beyond this
/// factor of the input cannot be genuine, so it is rejected before allocating.
const SNAPPY_MAX_RATIO: usize = 64;

/// LZ4 frame magic number (little endian on the wire).
pub(super) const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;
/// FLG bit 3: the frame descriptor carries an 8-byte content size.
pub(super) const LZ4_FLG_CONTENT_SIZE: u8 = 0x08;
/// FLG bit 0: the frame descriptor carries a 4-byte dictionary id.
const LZ4_FLG_DICT_ID: u8 = 0x01;

/// Decompresses the records section of a compressed batch (or the value of a legacy wrapper)
/// for `codec` 1-4, producing at most `max` bytes ([`LegacyError::TooLarge`] beyond that).
///
/// gzip: one or more gzip members; snappy: xerial-framed or one raw block; lz4: an LZ4 frame with
/// a correct header checksum; zstd: a zstd stream. Codec 0 returns the input as is (still capped).
pub fn decompress_records(codec: u8, data: &[u8], max: usize) -> Result<Vec<u8>, LegacyError> {
    match codec {
        CODEC_NONE => {
            if data.len() > max {
                return Err(LegacyError::TooLarge { limit: max });
            }
            Ok(data.to_vec())
        }
        CODEC_GZIP => read_capped(flate2::read::MultiGzDecoder::new(data), max),
        CODEC_SNAPPY => snappy_decompress(data, max),
        CODEC_LZ4 => lz4_decompress(data, false, max),
        CODEC_ZSTD => {
            let decoder = zstd::stream::read::Decoder::new(data)
                .map_err(|e| LegacyError::Decompress(e.to_string()))?;
            read_capped(decoder, max)
        }
        other => Err(LegacyError::UnsupportedCodec(other)),
    }
}

/// Compresses `data` with `codec` (1-4) in the framing used for RecordBatch v2 records: see
/// [`convert_message_set`]. Codec 0 returns the input as is.
pub fn compress_records(codec: u8, data: &[u8]) -> Result<Vec<u8>, LegacyError> {
    let err = |e: std::io::Error| LegacyError::Compress(e.to_string());
    match codec {
        CODEC_NONE => Ok(data.to_vec()),
        CODEC_GZIP => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(data).map_err(err)?;
            enc.finish().map_err(err)
        }
        CODEC_SNAPPY => snappy_xerial_compress(data),
        CODEC_LZ4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_checksums(false)
                .content_checksum(false);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            enc.write_all(data).map_err(err)?;
            enc.finish()
                .map_err(|e| LegacyError::Compress(e.to_string()))
        }
        CODEC_ZSTD => zstd::stream::encode_all(data, 0).map_err(err),
        other => Err(LegacyError::UnsupportedCodec(other)),
    }
}

/// Reads `r` to the end, failing with [`LegacyError::TooLarge`] past `limit` bytes. Never holds
/// more than `limit + 1` bytes of output.
pub(super) fn read_capped<R: Read>(r: R, limit: usize) -> Result<Vec<u8>, LegacyError> {
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::new();
    r.take(cap)
        .read_to_end(&mut out)
        .map_err(|e| LegacyError::Decompress(e.to_string()))?;
    if out.len() > limit {
        return Err(LegacyError::TooLarge { limit });
    }
    Ok(out)
}

/// Snappy: xerial-framed if the data starts with the xerial header, else one raw block.
pub(super) fn snappy_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, LegacyError> {
    let mut out = Vec::new();
    if data.len() >= XERIAL_HEADER_LEN && data[..XERIAL_MAGIC.len()] == XERIAL_MAGIC {
        // Version and compatible version (bytes 8..16) are not checked, as librdkafka does not.
        let mut r = Reader::new(data);
        r.pos = XERIAL_HEADER_LEN;
        while r.remaining() > 0 {
            let err = |_| LegacyError::Decompress("truncated xerial snappy block".to_owned());
            let len = r.i32().map_err(err)?;
            let len = usize::try_from(len).map_err(|_| {
                LegacyError::Decompress("negative xerial snappy block length".to_owned())
            })?;
            let block = r.take(len).map_err(err)?;
            snappy_raw_into(block, &mut out, limit)?;
        }
    } else {
        snappy_raw_into(data, &mut out, limit)?;
    }
    Ok(out)
}

/// Appends the decompression of one raw snappy block to `out`, keeping `out` within `limit`.
fn snappy_raw_into(block: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), LegacyError> {
    let err = |e: snap::Error| LegacyError::Decompress(format!("snappy: {e}"));
    if block.is_empty() {
        return Err(LegacyError::Decompress("empty snappy block".to_owned()));
    }
    let len = snap::raw::decompress_len(block).map_err(err)?;
    if len > block.len().saturating_mul(SNAPPY_MAX_RATIO) {
        return Err(LegacyError::Decompress(
            "snappy block declares an impossible decompressed length".to_owned(),
        ));
    }
    let start = out.len();
    let end = start
        .checked_add(len)
        .filter(|&end| end <= limit)
        .ok_or(LegacyError::TooLarge { limit })?;
    out.resize(end, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(err)?;
    out.truncate(start + written);
    Ok(())
}

/// xerial framing around raw snappy blocks of [`XERIAL_BLOCK`] uncompressed bytes.
fn snappy_xerial_compress(data: &[u8]) -> Result<Vec<u8>, LegacyError> {
    let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + snap::raw::max_compress_len(data.len()));
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    let mut enc = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK) {
        let block = enc
            .compress_vec(chunk)
            .map_err(|e| LegacyError::Compress(format!("snappy: {e}")))?;
        // A block of at most 32 KiB compresses to well under i32::MAX bytes.
        let len = i32::try_from(block.len()).map_err(|_| LegacyError::TooLarge {
            limit: MAX_BATCH_LEN,
        })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&block);
    }
    Ok(out)
}

/// Decodes one LZ4 frame (magic `0x184D2204`; legacy and skippable frames are rejected, as Kafka
/// does). With `fix_header_checksum`, the frame header checksum byte is replaced by the correct
/// one first: see the module documentation (KAFKA-3160).
pub(super) fn lz4_decompress(
    data: &[u8],
    fix_header_checksum: bool,
    limit: usize,
) -> Result<Vec<u8>, LegacyError> {
    let magic = data
        .get(..4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    if magic != Some(LZ4_FRAME_MAGIC) {
        return Err(LegacyError::Decompress("not an LZ4 frame".to_owned()));
    }
    if !fix_header_checksum {
        return read_capped(lz4_flex::frame::FrameDecoder::new(data), limit);
    }
    // magic (4) FLG (1) BD (1) [content size (8)] [dictionary id (4)] HC (1)
    let flg = *data
        .get(4)
        .ok_or_else(|| LegacyError::Decompress("truncated LZ4 frame header".to_owned()))?;
    let mut hc_pos = 6;
    if flg & LZ4_FLG_CONTENT_SIZE != 0 {
        hc_pos += 8;
    }
    if flg & LZ4_FLG_DICT_ID != 0 {
        hc_pos += 4;
    }
    let Some(header) = data.get(..=hc_pos) else {
        return Err(LegacyError::Decompress(
            "truncated LZ4 frame header".to_owned(),
        ));
    };
    let mut fixed = [0u8; 19];
    fixed[..header.len()].copy_from_slice(header);
    fixed[hc_pos] = lz4_header_checksum(&header[4..hc_pos]);
    let stream = (&fixed[..=hc_pos]).chain(&data[hc_pos + 1..]);
    read_capped(lz4_flex::frame::FrameDecoder::new(stream), limit)
}

/// The LZ4 frame header checksum of a frame descriptor (FLG up to, excluding, HC): the second
/// byte of its XXH32 with seed 0.
pub(super) fn lz4_header_checksum(descriptor: &[u8]) -> u8 {
    (xxh32(descriptor, 0) >> 8) as u8
}

/// XXH32, written from the xxHash specification (only used on a few header bytes).
pub(super) fn xxh32(input: &[u8], seed: u32) -> u32 {
    const P1: u32 = 0x9E37_79B1;
    const P2: u32 = 0x85EB_CA77;
    const P3: u32 = 0xC2B2_AE3D;
    const P4: u32 = 0x27D4_EB2F;
    const P5: u32 = 0x1656_67B1;
    fn lane(b: &[u8]) -> u32 {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    fn round(acc: u32, lane: u32) -> u32 {
        acc.wrapping_add(lane.wrapping_mul(P2))
            .rotate_left(13)
            .wrapping_mul(P1)
    }

    let mut stripes = input.chunks_exact(16);
    let mut acc = if input.len() >= 16 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        for stripe in &mut stripes {
            for (i, v) in v.iter_mut().enumerate() {
                *v = round(*v, lane(&stripe[4 * i..]));
            }
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    // The specification adds the input length modulo 2^32.
    acc = acc.wrapping_add(input.len() as u32);

    let rest = if input.len() >= 16 {
        stripes.remainder()
    } else {
        input
    };
    let mut words = rest.chunks_exact(4);
    for w in &mut words {
        acc = acc
            .wrapping_add(lane(w).wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
    }
    for &b in words.remainder() {
        acc = acc
            .wrapping_add(u32::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }

    acc ^= acc >> 15;
    acc = acc.wrapping_mul(P2);
    acc ^= acc >> 13;
    acc = acc.wrapping_mul(P3);
    acc ^= acc >> 16;
    acc
}
