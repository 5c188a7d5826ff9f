//! Framing and request headers: the bytes a client writes on a connection.
//!
//! Input: a connection's byte stream. Frames are read with `read_frame` under a small
//! `socket.request.max.bytes` (so oversized prefixes are exercised, not allocated) and each one
//! goes through `RequestFrame::parse`, as the connection loop does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringbroker::protocol::frame::read_frame;
use ringbroker::protocol::header::RequestFrame;

/// Same allocator as the broker binary (huge wire-sized allocations become lazy mappings).
#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

/// Small enough that a random 4-byte prefix usually exceeds it.
const LIMIT: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let mut stream = futures_lite::io::Cursor::new(data);
    // Every frame consumes at least 5 bytes, so this loop ends.
    while let Ok(Some(frame)) = futures_lite::future::block_on(read_frame(&mut stream, LIMIT)) {
        if let Ok(request) = RequestFrame::parse(frame) {
            // The body is a suffix of the frame; the header fields are what they say.
            assert!(request.body.len() + 8 <= data.len());
        }
    }
});
