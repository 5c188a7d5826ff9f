//! Idempotent producers: the per-partition table of producer ids, epochs and sequences
//! ([`producer_state`], pure), its snapshot file ([`producer_snapshot`]), and the append path
//! that applies Kafka's rules to a produce ([`append`]: duplicates answered with their original
//! offsets, gaps and stale epochs refused, the table rebuilt at open from a snapshot plus a
//! log replay), and the producer-id allocator with its durable counter ([`producer_ids`]).

pub mod append;
pub mod producer_ids;
pub mod producer_snapshot;
pub mod producer_state;
