//! Why the controller refused a request; each maps to the Kafka error code a client expects.

use crate::protocol::ResponseError;

use super::ids::{BrokerEpoch, BrokerId};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    #[error("topic '{0}' already exists")]
    TopicExists(String),
    #[error("topic '{0}' does not exist")]
    UnknownTopic(String),
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopic { name: String, reason: String },
    #[error("invalid partition count {0}")]
    InvalidPartitions(i64),
    #[error("replication factor {requested} is larger than the {live} live brokers")]
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
        }
    }

    pub fn code(&self) -> i16 {
        self.response_error().code()
    }
}
