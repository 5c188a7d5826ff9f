//! Why the controller refused a request; each maps to the Kafka error code a client expects.

use crate::protocol::ResponseError;

use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, PartitionEpoch};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    // Kafka's messages, as its controller words them (ReplicationControlManager).
    #[error("Topic '{0}' already exists.")]
    TopicExists(String),
    #[error("topic '{0}' does not exist")]
    UnknownTopic(String),
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopic { name: String, reason: String },
    #[error("invalid partition count {0}")]
    InvalidPartitions(i64),
    #[error(
        "Unable to replicate the partition {requested} time(s): The target replication factor \
         of {requested} cannot be reached because only {live} broker(s) are registered."
    )]
    InvalidReplicationFactor { requested: i32, live: usize },
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("broker {0} is not registered")]
    BrokerNotRegistered(BrokerId),
    #[error("broker {broker_id}: epoch {given:?} is not the current one ({current:?})")]
    StaleBrokerEpoch {
        broker_id: BrokerId,
        given: BrokerEpoch,
        current: BrokerEpoch,
    },
    #[error("broker {0} is already registered by another live process")]
    DuplicateBrokerRegistration(BrokerId),
    #[error("producer ids are exhausted")]
    ProducerIdsExhausted,
    #[error("topic id {0} does not exist")]
    UnknownTopicId(uuid::Uuid),
    #[error("partition {0} does not exist")]
    UnknownPartition(u32),
    #[error("broker {0} does not lead the partition")]
    NotLeader(BrokerId),
    #[error("leader epoch {given:?} is not the partition's ({current:?})")]
    FencedLeaderEpoch {
        given: LeaderEpoch,
        current: LeaderEpoch,
    },
    #[error("partition epoch {given:?} is not the partition's ({current:?})")]
    InvalidUpdateVersion {
        given: PartitionEpoch,
        current: PartitionEpoch,
    },
    #[error("the new ISR names broker {0}, which is not an unfenced replica")]
    IneligibleReplica(BrokerId),
    #[error("{0}")]
    InvalidRequest(String),
}

impl ControllerError {
    /// The Kafka error this is reported as.
    pub fn response_error(&self) -> ResponseError {
        match self {
            ControllerError::TopicExists(_) => ResponseError::TopicAlreadyExists,
            ControllerError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
            ControllerError::InvalidTopic { .. } => ResponseError::InvalidTopicException,
            ControllerError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
            ControllerError::InvalidReplicationFactor { .. } => {
                ResponseError::InvalidReplicationFactor
            }
            ControllerError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
            ControllerError::InvalidConfig(_) => ResponseError::InvalidConfig,
            ControllerError::BrokerNotRegistered(_) => ResponseError::BrokerIdNotRegistered,
            ControllerError::StaleBrokerEpoch { .. } => ResponseError::StaleBrokerEpoch,
            ControllerError::DuplicateBrokerRegistration(_) => {
                ResponseError::DuplicateBrokerRegistration
            }
            // Kafka has no code for it either (its allocator throws an unknown server error).
            ControllerError::ProducerIdsExhausted => ResponseError::UnknownServerError,
            ControllerError::UnknownTopicId(_) => ResponseError::UnknownTopicId,
            ControllerError::UnknownPartition(_) => ResponseError::UnknownTopicOrPartition,
            ControllerError::NotLeader(_) => ResponseError::NotLeaderOrFollower,
            ControllerError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
            ControllerError::InvalidUpdateVersion { .. } => ResponseError::InvalidUpdateVersion,
            ControllerError::IneligibleReplica(_) => ResponseError::IneligibleReplica,
            ControllerError::InvalidRequest(_) => ResponseError::InvalidRequest,
        }
    }

    pub fn code(&self) -> i16 {
        self.response_error().code()
    }
}
