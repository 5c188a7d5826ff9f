//! RecordBatch v2: header parsing, validation (CRC, counts, codec), the in-place rewrites the
//! broker does on produce, and record decoding with and without decompression.
//!
//! Input: `[flags, batch...]`. A random batch almost never carries a valid CRC32C, which would
//! stop everything at `validate`; flag bit 0 makes the target set `batchLength` to the input
//! size and bit 1 recomputes the CRC first, so mutations reach the records. Bit 2 first
//! compresses the bytes after the header with the codec the attributes name, so the records
//! inside compressed batches are reached too (random bytes rarely decompress).
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringbroker::protocol::batch_builder::decode_records;
use ringbroker::protocol::codecs::compress_records;
use ringbroker::protocol::decompressed_records::decode_records_decompressed;
use ringbroker::protocol::record_batch::{
    compute_crc, set_base_offset, set_log_append_time, set_partition_leader_epoch, validate,
    validate_exact, BatchHeader, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, BATCH_LENGTH_OFFSET,
    CRC_OFFSET, LOG_OVERHEAD,
};

#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

/// Decompression budget: small, so a compression bomb is cut off quickly (the broker uses
/// larger budgets; the code path is the same).
const MAX_DECOMPRESSED: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let [flags, rest @ ..] = data else {
        return;
    };
    let mut batch = rest.to_vec();
    if batch.len() >= BATCH_HEADER_LEN {
        if flags & 4 != 0 {
            // The low byte of the attributes holds the codec bits.
            let codec = batch[ATTRIBUTES_OFFSET + 1] & 0x07;
            if let Ok(compressed) = compress_records(codec, &batch[BATCH_HEADER_LEN..]) {
                batch.truncate(BATCH_HEADER_LEN);
                batch.extend_from_slice(&compressed);
            }
        }
        if flags & 1 != 0 {
            let length = i32::try_from(batch.len() - LOG_OVERHEAD).unwrap_or(i32::MAX);
            batch[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
                .copy_from_slice(&length.to_be_bytes());
        }
        if flags & 2 != 0 {
            if let Ok(header) = BatchHeader::parse(&batch) {
                let end = header.total_len().min(batch.len());
                let crc = compute_crc(&batch[..end]);
                batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            }
        }
    }

    let _ = BatchHeader::parse(&batch);
    let _ = validate_exact(&batch);
    if let Ok(header) = validate(&batch) {
        let _ = header.compression();
        let _ = decode_records(&batch);
        let _ = decode_records_decompressed(&batch, MAX_DECOMPRESSED);
        // What produce does to an accepted batch; the result must still validate.
        let mut stored = batch[..header.total_len()].to_vec();
        set_base_offset(&mut stored, 1 << 40);
        set_partition_leader_epoch(&mut stored, 7);
        set_log_append_time(&mut stored, 1_700_000_000_000);
        if let Err(e) = validate_exact(&stored) {
            panic!("rewritten batch no longer validates: {e}");
        }
    }
});
