//! Legacy message sets (magic 0/1) and Produce v0–v2: parsing, CRC checks, decompression of
//! wrappers, conversion to one RecordBatch v2, and the codecs themselves.
//!
//! Input: `[mode, arg, data...]`, mode (low 2 bits of the first byte):
//! - 0: `data` is a message set, converted as produce does;
//! - 1: `data` is a Produce v0–v2 body (version `arg % 3`), each partition's set converted;
//! - 2: `data` is an uncompressed message set whose CRCs the target fixes, then compresses with
//!   codec `arg & 3` into a wrapper message (magic `arg >> 4 & 1`) with a valid CRC, so the
//!   decompression and inner-message paths get inputs that pass the CRC checks;
//! - 3: codec round trip: `compress_records(codec, data)` must decompress to `data`, and
//!   `decompress_records` on raw `data` must not panic.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use ringbroker::protocol::codecs::{compress_records, decompress_records};
use ringbroker::protocol::legacy::{convert_message_set, parse_message_set, MESSAGE_LOG_OVERHEAD};
use ringbroker::protocol::legacy_produce::decode_produce_v0_2;
use ringbroker::protocol::record_batch::validate_exact;

#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

/// Decompression budget per set; small so that bombs are cut off quickly.
const MAX_DECOMPRESSED: usize = 1 << 20;
const NOW_MS: i64 = 1_700_000_000_000;

/// Converts one set and checks what the conversion promises.
fn convert(set: &[u8]) {
    let parsed = parse_message_set(set, MAX_DECOMPRESSED, NOW_MS);
    let converted = convert_message_set(set, MAX_DECOMPRESSED, NOW_MS);
    if let Ok(c) = &converted {
        if let Err(e) = validate_exact(&c.batch) {
            panic!("converted batch does not validate: {e}");
        }
        match &parsed {
            Ok((records, _)) => assert_eq!(records.len(), c.record_count),
            Err(e) => panic!("convert succeeded where parse failed: {e}"),
        }
    }
}

/// Rewrites the CRC32 of every complete top-level message.
fn fix_crcs(set: &mut [u8]) {
    let mut pos = 0;
    while set.len() - pos >= MESSAGE_LOG_OVERHEAD {
        let size_at = pos + 8;
        let size = i32::from_be_bytes([
            set[size_at],
            set[size_at + 1],
            set[size_at + 2],
            set[size_at + 3],
        ]);
        let start = pos + MESSAGE_LOG_OVERHEAD;
        let Ok(size) = usize::try_from(size) else {
            return;
        };
        if size < 4 || set.len() - start < size {
            return;
        }
        let crc = crc32fast::hash(&set[start + 4..start + size]);
        set[start..start + 4].copy_from_slice(&crc.to_be_bytes());
        pos = start + size;
    }
}

/// One wrapper message (offset 0) around `inner`, compressed with `codec`, CRC included.
fn wrap(inner: &[u8], codec: u8, magic: u8) -> Option<Vec<u8>> {
    let compressed = compress_records(codec, inner).ok()?;
    let mut message = vec![0, 0, 0, 0, magic, codec];
    if magic == 1 {
        message.extend_from_slice(&NOW_MS.to_be_bytes());
    }
    message.extend_from_slice(&(-1i32).to_be_bytes());
    message.extend_from_slice(&i32::try_from(compressed.len()).ok()?.to_be_bytes());
    message.extend_from_slice(&compressed);
    let mut set = Vec::with_capacity(MESSAGE_LOG_OVERHEAD + message.len());
    set.extend_from_slice(&0i64.to_be_bytes());
    set.extend_from_slice(&i32::try_from(message.len()).ok()?.to_be_bytes());
    set.extend_from_slice(&message);
    fix_crcs(&mut set);
    Some(set)
}

fuzz_target!(|input: &[u8]| {
    let [mode, arg, data @ ..] = input else {
        return;
    };
    match mode & 3 {
        0 => convert(data),
        1 => {
            let mut body = Bytes::copy_from_slice(data);
            if let Ok(request) = decode_produce_v0_2(&mut body, i16::from(arg % 3)) {
                for topic in &request.topics {
                    for partition in &topic.partitions {
                        if let Some(records) = &partition.records {
                            convert(records);
                        }
                    }
                }
            }
        }
        2 => {
            let mut set = data.to_vec();
            fix_crcs(&mut set);
            match arg & 3 {
                0 => convert(&set),
                codec => {
                    if let Some(wrapped) = wrap(&set, codec, (arg >> 4) & 1) {
                        convert(&wrapped);
                    }
                }
            }
        }
        _ => {
            let codec = arg % 5;
            let compressed = match compress_records(codec, data) {
                Ok(c) => c,
                Err(e) => panic!("compress_records({codec}) failed: {e}"),
            };
            match decompress_records(codec, &compressed, data.len()) {
                Ok(plain) => assert!(plain == data, "codec {codec} round trip differs"),
                Err(e) => panic!("codec {codec} round trip failed: {e}"),
            }
            let _ = decompress_records(arg >> 5, data, MAX_DECOMPRESSED);
        }
    }
});
