//! `__consumer_offsets` records as the group coordinator loads them: the key, the
//! OffsetCommitValue and the GroupMetadataValue (every version up to the flexible v4; the
//! partition may have been written by Kafka). Every input is tried with all three decoders.
//! A decoded value re-encoded by the broker must decode to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringbroker::group::records::{decode_key, GroupMetadataValue, OffsetCommitValue};

#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

fuzz_target!(|data: &[u8]| {
    let _ = decode_key(data);
    if let Ok(value) = OffsetCommitValue::decode(data) {
        assert_eq!(
            OffsetCommitValue::decode(&value.encode()).as_ref(),
            Ok(&value)
        );
    }
    if let Ok(value) = GroupMetadataValue::decode(data) {
        assert_eq!(
            GroupMetadataValue::decode(&value.encode()).as_ref(),
            Ok(&value)
        );
    }
});
