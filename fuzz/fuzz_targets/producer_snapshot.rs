//! Producer-state snapshot files, as partition recovery reads them, and the producer table
//! operations recovery then runs on the decoded table.
//!
//! Input: `[flags, file...]`. A random file never carries a valid CRC32C; flag bit 0 makes the
//! target write the right one first, so mutations reach the entries. A decoded snapshot
//! re-encoded must decode to the same snapshot.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringbroker::idempotence::producer_snapshot::{decode, encode};
use ringbroker::idempotence::producer_state::{increment_sequence, ProducerBatch};
use ringbroker::model::Offset;

#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

/// Where the CRC sits and where the bytes it covers start (see producer_snapshot.rs).
const CRC_AT: usize = 6;
const CRC_END: usize = CRC_AT + 4;

fuzz_target!(|input: &[u8]| {
    let [flags, rest @ ..] = input else {
        return;
    };
    let mut file = rest.to_vec();
    if flags & 1 != 0 && file.len() >= CRC_END {
        let crc = crc32c::crc32c(&file[CRC_END..]);
        file[CRC_AT..CRC_END].copy_from_slice(&crc.to_be_bytes());
    }
    let Ok(snapshot) = decode(&file) else {
        return;
    };
    let again = decode(&encode(snapshot.offset, &snapshot.table));
    assert_eq!(again.as_ref(), Ok(&snapshot));

    // What recovery does next: replay batches on top, truncate to the log end, expire.
    let mut table = snapshot.table.clone();
    let ids: Vec<i64> = table.entries().map(|(id, _)| id).collect();
    for (i, id) in ids.iter().enumerate() {
        let Some(entry) = table.entry(*id) else {
            continue;
        };
        let last_seq = entry.batches.back().map_or(0, |b| b.last_seq);
        let first_seq = increment_sequence(last_seq, 1);
        let batch = ProducerBatch {
            producer_id: *id,
            epoch: entry.epoch,
            first_seq,
            last_seq: increment_sequence(first_seq, i as i32),
        };
        let _ = table.check(&batch, 0);
        let at = Offset(snapshot.offset.0.saturating_add(i as i64));
        table.replay(&batch, at, at, 0, 0);
    }
    table.truncate_to(snapshot.offset);
    table.expire(i64::MAX, i64::from(*flags));
    let _ = table.lowest_in_flight_offset();
});
