//! Records of a compressed batch: decompressed (bounded), then decoded as the same batch
//! uncompressed would be. For tools and the broker's one look inside a batch.

use super::batch_builder::{decode_validated, DecodeError, DecodedRecord};
use super::record_batch::{
    validate, BatchHeader, Compression, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, BATCH_LENGTH_OFFSET,
    COMPRESSION_CODEC_MASK,
};

/// Decodes the records of any v2 batch, decompressing a compressed one first (at most
/// `max_decompressed` bytes). For tools and for the one broker path that must look inside a
/// batch (ListOffsets by timestamp); never for produce or fetch.
pub fn decode_records_decompressed(
    batch: &[u8],
    max_decompressed: usize,
) -> Result<Vec<DecodedRecord>, DecodeError> {
    let header = validate(batch)?;
    let codec = header.compression()?;
    if codec == Compression::None {
        return decode_validated(batch, &header);
    }
    let end = header.total_len();
    let records = super::codecs::decompress_records(
        (header.attributes & COMPRESSION_CODEC_MASK) as u8,
        &batch[BATCH_HEADER_LEN..end],
        max_decompressed,
    )
    .map_err(|_| DecodeError::Malformed {
        at: BATCH_HEADER_LEN,
        reason: "records do not decompress",
    })?;
    // The same batch, uncompressed: header with the codec bits cleared, new length and CRC.
    let mut plain = Vec::with_capacity(BATCH_HEADER_LEN + records.len());
    plain.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
    plain.extend_from_slice(&records);
    let attributes = header.attributes & !COMPRESSION_CODEC_MASK;
    plain[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let length = i32::try_from(plain.len() - super::record_batch::LOG_OVERHEAD).map_err(|_| {
        DecodeError::Malformed {
            at: BATCH_HEADER_LEN,
            reason: "decompressed batch too large",
        }
    })?;
    plain[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    // The compressed batch's CRC was checked; the CRC field of `plain` is not looked at.
    let plain_header = BatchHeader::parse(&plain)?;
    decode_validated(&plain, &plain_header)
}

#[cfg(test)]
mod decompressed_tests {
    use super::*;
    use crate::protocol::batch_builder::BatchBuilder;

    #[test]
    fn compressed_batches_decode_after_decompression() {
        let mut b = BatchBuilder::new(100);
        for i in 0..20 {
            b.push(None, Some(format!("value-{i}").as_bytes()), 100 + i, &[]);
        }
        let plain = b.build();
        for codec in [1u8, 2, 3, 4] {
            let records = &plain[super::super::record_batch::BATCH_HEADER_LEN..];
            let compressed =
                super::super::codecs::compress_records(codec, records).expect("compress");
            let mut batch = plain[..super::super::record_batch::BATCH_HEADER_LEN].to_vec();
            batch.extend_from_slice(&compressed);
            let attrs = i16::from(codec);
            batch[21..23].copy_from_slice(&attrs.to_be_bytes());
            let len = (batch.len() - 12) as i32;
            batch[8..12].copy_from_slice(&len.to_be_bytes());
            let crc = super::super::record_batch::compute_crc(&batch);
            batch[17..21].copy_from_slice(&crc.to_be_bytes());
            let decoded = decode_records_decompressed(&batch, 1 << 20).expect("decode");
            assert_eq!(decoded.len(), 20, "codec {codec}");
            assert_eq!(decoded[7].timestamp, 107);
            assert_eq!(decoded[7].value.as_deref(), Some(&b"value-7"[..]));
            assert!(decode_records_decompressed(&batch, 10).is_err(), "bounded");
        }
    }
}
