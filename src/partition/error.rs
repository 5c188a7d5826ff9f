//! The error of one partition operation, as the client gets it, and the Kafka codes of the
//! log's and the produce path's errors.

use crate::idempotence::append;
use crate::log::LogError;
use crate::protocol::ResponseError;

/// A Kafka error code with a message for the operator (and ErrorMessage fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionError {
    pub code: i16,
    pub message: String,
    /// The records that made a produce fail (KIP-467, Produce v8+); empty otherwise.
    pub record_errors: Vec<crate::log::record_check::RecordError>,
}

impl PartitionError {
    pub fn new(code: i16, message: String) -> PartitionError {
        PartitionError {
            code,
            message,
            record_errors: Vec::new(),
        }
    }
}

/// Maps a log error to the Kafka error code a client expects.
pub fn log_error(e: LogError) -> PartitionError {
    let code = match &e {
        LogError::InvalidBatch { .. } | LogError::CorruptSegment { .. } => {
            ResponseError::CorruptMessage.code()
        }
        LogError::EmptyAppend => ResponseError::InvalidRecord.code(),
        LogError::BatchTooLarge { .. } => ResponseError::MessageTooLarge.code(),
        LogError::OffsetOutOfRange { .. } | LogError::ReplicaGap { .. } => {
            ResponseError::OffsetOutOfRange.code()
        }
        LogError::DiskFull { .. }
        | LogError::Io { .. }
        | LogError::SyncFailed { .. }
        | LogError::Offline { .. }
        | LogError::Unrecoverable { .. } => ResponseError::KafkaStorageError.code(),
        LogError::Closed(_) | LogError::Busy(_) => ResponseError::NotLeaderOrFollower.code(),
    };
    PartitionError::new(code, e.to_string())
}

/// Maps a produce error to the Kafka error code a client expects.
pub fn produce_error(e: append::ProduceError) -> PartitionError {
    match e {
        append::ProduceError::Log(e) => log_error(e),
        other => PartitionError {
            code: other
                .kafka_code()
                .unwrap_or(ResponseError::UnknownServerError.code()),
            message: other.to_string(),
            record_errors: match &other {
                append::ProduceError::Records(e) => e.record_errors().to_vec(),
                _ => Vec::new(),
            },
        },
    }
}
