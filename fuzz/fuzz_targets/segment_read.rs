//! The fetch read path over one segment: `log::segment_read::scan_chunk` driven the way the
//! async reader drives it, over an in-memory "file" of arbitrary bytes (a segment damaged on
//! disk). Properties: every step ends the read or makes progress (a later position, or a
//! chunk larger than the last, which holds the whole next batch), so a read always ends
//! within a bounded number of steps; an answer lies inside the file and is whole batches.
//!
//! Input: `[offset, max_bytes_log2, flags, start, file...]`: the fetch offset (0..=255), the
//! byte limit 2^(max_bytes_log2 % 21), flag bit 0 = whole_first, and the start position
//! (an index entry) as a fraction start/256 of the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringbroker::log::segment_read::{chunk_len, scan_chunk, ChunkStep, SegmentRead};
use ringbroker::protocol::record_batch::BatchHeader;

#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

fuzz_target!(|data: &[u8]| {
    let [offset, max_log2, flags, start, file @ ..] = data else {
        return;
    };
    let read = SegmentRead {
        offset: i64::from(*offset),
        bound: i64::MAX,
        max_bytes: 1usize << (max_log2 % 21),
        whole_first: flags & 1 != 0,
        // Small, so that chunks end inside the file and re-reads happen.
        index_interval: 0,
    };
    let size = file.len() as u64;
    let mut pos = (file.len() * usize::from(*start) / 256) as u64;
    let mut at_least = 0usize;
    // Each step moves the position forward or asks for more than the chunk it scanned.
    for _ in 0..=2 * file.len() + 2 {
        if pos >= size {
            return;
        }
        let want = chunk_len(&read, pos, size, at_least);
        let chunk = &file[pos as usize..pos as usize + want];
        match scan_chunk(chunk, pos, size, &read) {
            ChunkStep::Found(range) => {
                assert!(range.end <= chunk.len(), "answer outside the chunk");
                let mut rest = &chunk[range];
                while !rest.is_empty() {
                    let h = BatchHeader::parse(rest).expect("the answer is whole batches");
                    assert!(h.total_len() <= rest.len(), "a partial batch in the answer");
                    rest = &rest[h.total_len()..];
                }
                return;
            }
            ChunkStep::Nothing | ChunkStep::Corrupt { .. } => return,
            ChunkStep::ReadAt {
                pos: p,
                at_least: n,
            } => {
                assert!(p <= size, "a position past the end");
                // The same position again only for a larger chunk that the file can fill
                // (a batch longer than the rest of the file must be Corrupt, not a retry).
                let larger = n > want && p.saturating_add(n as u64) <= size;
                assert!(
                    p > pos || larger,
                    "no progress: at {pos} with {want} bytes, asked for {p} with {n}"
                );
                pos = p;
                at_least = n;
            }
        }
    }
    panic!("the read did not end within {} steps", 2 * file.len() + 2);
});
