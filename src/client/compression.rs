//! Compressing a built RecordBatch v2 for the wire, with the codecs (and Kafka framings) of
//! [`crate::protocol::legacy`]: gzip, xerial-framed snappy (as the Java client writes it), LZ4
//! frames, zstd.

use bytes::Bytes;

use crate::log::record_check::with_records_section;
use crate::protocol::codecs::compress_records;
pub use crate::protocol::record_batch::Compression;
use crate::protocol::record_batch::BATCH_HEADER_LEN;

use super::error::{ClientError, ClientResult};

/// Parses a codec name as Kafka's `compression.type` spells it.
pub fn parse_compression(name: &str) -> Result<Compression, String> {
    match name.to_ascii_lowercase().as_str() {
        "none" => Ok(Compression::None),
        "gzip" => Ok(Compression::Gzip),
        "snappy" => Ok(Compression::Snappy),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        other => Err(format!(
            "unknown compression {other:?} (none, gzip, snappy, lz4, zstd)"
        )),
    }
}

/// Kafka's name of a codec.
pub fn compression_name(c: Compression) -> &'static str {
    match c {
        Compression::None => "none",
        Compression::Gzip => "gzip",
        Compression::Snappy => "snappy",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
    }
}

/// The same batch with its records section compressed: codec bits, length and CRC rewritten.
/// `plain` is an uncompressed batch (as [`crate::protocol::batch_builder::BatchBuilder`] builds).
pub fn compress_batch(plain: Bytes, codec: Compression) -> ClientResult<Bytes> {
    if codec == Compression::None {
        return Ok(plain);
    }
    if plain.len() < BATCH_HEADER_LEN {
        return Err(ClientError::Batch(format!(
            "{} bytes is no batch",
            plain.len()
        )));
    }
    let records = compress_records(codec.id(), &plain[BATCH_HEADER_LEN..])
        .map_err(|e| ClientError::Compression(e.to_string()))?;
    let batch = with_records_section(&plain, &records, codec)
        .ok_or_else(|| ClientError::Batch("compressed batch too large".into()))?;
    Ok(Bytes::from(batch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch_builder::{decode_records, BatchBuilder};
    use crate::protocol::decompressed_records::decode_records_decompressed;
    use crate::protocol::record_batch::validate_exact;

    #[test]
    fn every_codec_round_trips_and_marks_the_batch() {
        let mut b = BatchBuilder::new(1_000);
        for i in 0..100 {
            let value = format!("value number {i} with some repetition repetition");
            b.push(
                Some(b"k"),
                Some(value.as_bytes()),
                1_000 + i,
                &[("h", b"x")],
            );
        }
        let plain = b.build();
        let expected = decode_records(&plain).unwrap();
        for name in ["none", "gzip", "snappy", "lz4", "zstd"] {
            let codec = parse_compression(name).unwrap();
            assert_eq!(compression_name(codec), name);
            let batch = compress_batch(plain.clone(), codec).unwrap();
            let header = validate_exact(&batch).unwrap();
            assert_eq!(header.compression().unwrap(), codec);
            assert_eq!(header.record_count, 100);
            if codec != Compression::None {
                assert!(batch.len() < plain.len(), "{name} compresses");
            }
            assert_eq!(
                decode_records_decompressed(&batch, 1 << 20).unwrap(),
                expected
            );
        }
        assert!(parse_compression("brotli").is_err());
    }
}
