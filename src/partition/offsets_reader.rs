//! Who reads a partition's offsets, and so which offsets they may see.

/// Who asks ListOffsets (Kafka's replica id): a consumer (-1) reads offsets below the HW, a
/// follower broker (its id) up to the log end, both from the leader only; a debugging
/// client (-2) may ask any replica, up to its log end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetsReader {
    /// `current_leader_epoch` -1 is not checked (Kafka's rule).
    Consumer {
        current_leader_epoch: i32,
    },
    Replica {
        current_leader_epoch: i32,
    },
    Debugging,
}

impl OffsetsReader {
    /// Kafka's debugging replica id (`ListOffsetsRequest.DEBUGGING_REPLICA_ID`).
    pub const DEBUGGING_REPLICA_ID: i32 = -2;

    pub fn from_request(replica_id: i32, current_leader_epoch: i32) -> OffsetsReader {
        match replica_id {
            Self::DEBUGGING_REPLICA_ID => OffsetsReader::Debugging,
            id if id >= 0 => OffsetsReader::Replica {
                current_leader_epoch,
            },
            _ => OffsetsReader::Consumer {
                current_leader_epoch,
            },
        }
    }
}
