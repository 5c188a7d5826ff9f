//! The numbers of cluster metadata, as newtypes so that a broker epoch cannot be passed where
//! a leader epoch is expected. None existed in the crate before the controller (the single-node
//! broker uses one constant leader epoch), so they are defined here.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A newtype over an integer: ordered, hashable, serialized as the bare number.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize,
            Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);
    };
}

id_type!(
    /// A broker's `node.id` (Kafka's broker id; voters use the same id space).
    BrokerId(i32)
);

/// Kafka's name in KRaft: the id of a process, broker or controller.
pub type NodeId = BrokerId;

id_type!(
    /// The position of a record in the committed metadata log, counted in records from 1
    /// (a Raft entry carries a batch of them: `quorum/mod.rs`).
    MetadataOffset(u64)
);

id_type!(
    /// Identifies one registration of a broker: the offset of its RegisterBroker record, so
    /// a broker that restarts gets a larger epoch and messages of its earlier life are stale.
    BrokerEpoch(u64)
);

id_type!(
    /// Bumped when a partition's leader changes; stamped into batches, checked by fetchers.
    LeaderEpoch(i32)
);

id_type!(
    /// Bumped by every change of a partition (leader or ISR): the version a compare-and-set
    /// on the partition (AlterPartition, a controller decision) names.
    PartitionEpoch(i32)
);

id_type!(
    /// A record's position in a partition's log (Kafka's offset). Offsets of different
    /// meanings (a log end, a high watermark, a fetch position) are all of this type; a
    /// leader epoch or a time can no longer be passed in their place.
    Offset(i64)
);

impl Offset {
    /// The offset after this one.
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<i32> for BrokerId {
    fn from(id: i32) -> Self {
        BrokerId(id)
    }
}

impl From<MetadataOffset> for BrokerEpoch {
    fn from(offset: MetadataOffset) -> Self {
        BrokerEpoch(offset.0)
    }
}

impl LeaderEpoch {
    /// The next epoch; saturates rather than wrapping to a smaller one (clients drop metadata
    /// whose epoch went back).
    pub fn next(self) -> LeaderEpoch {
        LeaderEpoch(self.0.saturating_add(1))
    }
}

impl PartitionEpoch {
    pub fn next(self) -> PartitionEpoch {
        PartitionEpoch(self.0.saturating_add(1))
    }
}

impl fmt::Display for BrokerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for MetadataOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
