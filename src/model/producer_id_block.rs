//! Producer ids are handed out in blocks: by shard 0's counter on a single node, by the
//! controller's metadata log in a cluster. Both sides name the same block shape.

/// Ids per block (one round trip to shard 0 and one fsync per block on a single node; one
/// metadata record in a cluster).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// A range of producer ids, `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub start: i64,
    pub end: i64,
}
