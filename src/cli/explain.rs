//! Errors of the CLI commands, shown to a person: Kafka error codes by name with a one-line
//! explanation, and an unreachable broker said plainly.

use std::process::ExitCode;

use kafka_protocol::ResponseError;

use crate::client::{ClientError, KafkaCode};

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(
        "cannot reach a broker at {bootstrap} ({source}); is it running, and is --bootstrap right?"
    )]
    Unreachable {
        bootstrap: String,
        #[source]
        source: ClientError,
    },
    #[error("{}", describe_client_error(.0))]
    Client(#[from] ClientError),
    #[error("{0}")]
    Usage(String),
    /// The command cannot do what was asked, and the message says why and what to do.
    #[error("{0}")]
    Refused(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl CliError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> CliError {
        CliError::Io {
            context: context.into(),
            source,
        }
    }

    /// 2 for a broker that cannot be reached or a bad command line, 1 for anything else.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Unreachable { .. } | CliError::Usage(_) => ExitCode::from(2),
            CliError::Client(_) | CliError::Refused(_) | CliError::Io { .. } => ExitCode::from(1),
        }
    }
}

/// The client's message, followed by what a Kafka error code means.
fn describe_client_error(e: &ClientError) -> String {
    match e {
        ClientError::Kafka { code, .. } => format!("{e}\n  {}", explain(*code)),
        _ => e.to_string(),
    }
}

/// One line on what a Kafka error code means for the person at the terminal.
pub fn explain(code: KafkaCode) -> &'static str {
    use ResponseError as E;
    let Some(error) = ResponseError::try_from_code(code.0) else {
        return "an error code this tool does not know";
    };
    match error {
        E::UnknownTopicOrPartition => "the topic or partition does not exist on this broker",
        E::TopicAlreadyExists => "a topic with this name exists already",
        E::InvalidTopicException => {
            "the topic name is not valid, or the topic is internal and cannot be changed this way"
        }
        E::InvalidPartitions => "the partition count is not valid (it can only grow)",
        E::InvalidReplicationFactor => "the replication factor is not valid for this cluster",
        E::InvalidConfig => "a config name or value was refused by the broker",
        E::PolicyViolation => "the broker's policy refused the request",
        E::NotLeaderOrFollower => "the broker does not lead this partition; retry after metadata",
        E::LeaderNotAvailable => "the partition has no leader right now; retry shortly",
        E::RequestTimedOut => "the broker did not finish the request in time",
        E::MessageTooLarge => "a record batch is larger than the topic's max.message.bytes",
        E::RecordListTooLarge => "the request is larger than the broker accepts",
        E::CorruptMessage => "a record batch failed its CRC or could not be parsed",
        E::OffsetOutOfRange => "the offset is before the log start or after the log end",
        E::KafkaStorageError => "the broker could not read or write its disk (full or failing)",
        E::NotEnoughReplicas | E::NotEnoughReplicasAfterAppend => {
            "fewer in-sync replicas than min.insync.replicas"
        }
        E::CoordinatorNotAvailable | E::CoordinatorLoadInProgress | E::NotCoordinator => {
            "the group coordinator is starting or moving; retry shortly"
        }
        E::GroupIdNotFound => "no group with this id exists",
        E::NonEmptyGroup => "the group still has active members; stop its consumers first",
        E::GroupSubscribedToTopic => "the group's members consume this topic right now",
        E::IllegalGeneration | E::UnknownMemberId | E::RebalanceInProgress => {
            "the group rebalanced; the member has to rejoin"
        }
        E::InvalidGroupId => "the group id is not valid (empty?)",
        E::UnsupportedVersion => "the broker does not support this request version",
        E::InvalidRequest => "the broker found the request malformed",
        E::UnsupportedCompressionType => "the broker or topic refuses this compression codec",
        E::OutOfOrderSequenceNumber | E::DuplicateSequenceNumber => {
            "the idempotent producer's sequence numbers do not line up"
        }
        E::InvalidProducerEpoch | E::ProducerFenced => "a newer producer with this id exists",
        E::TopicAuthorizationFailed
        | E::GroupAuthorizationFailed
        | E::ClusterAuthorizationFailed => "not authorized",
        E::InvalidTimestamp => "a record timestamp is outside what the topic accepts",
        E::UnknownServerError => "the broker failed unexpectedly; its log says why",
        _ => "see the Kafka protocol documentation for this error code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_errors_carry_their_name_and_an_explanation() {
        let e = CliError::Client(ClientError::Kafka {
            api: "CreateTopics",
            code: KafkaCode(ResponseError::TopicAlreadyExists.code()),
            message: None,
        });
        let text = e.to_string();
        assert!(text.contains("TOPIC_ALREADY_EXISTS"), "{text}");
        assert!(text.contains("exists already"), "{text}");
    }

    #[test]
    fn unknown_codes_are_not_a_panic() {
        assert!(!explain(KafkaCode(-12345)).is_empty());
    }
}
