//! Errors of the client, with Kafka error codes kept as codes and shown by their Kafka names.

use std::fmt;
use std::time::Duration;

use kafka_protocol::ResponseError;

/// A Kafka error code from a response, shown by its Kafka name (`NOT_LEADER_OR_FOLLOWER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KafkaCode(pub i16);

impl KafkaCode {
    /// `None` for code 0 (no error).
    pub fn from_code(code: i16) -> Option<KafkaCode> {
        (code != 0).then_some(KafkaCode(code))
    }

    /// Kafka's name for the code, e.g. `UNKNOWN_TOPIC_OR_PARTITION`, or `UNKNOWN_CODE_<n>`.
    pub fn name(self) -> String {
        match ResponseError::try_from_code(self.0) {
            Some(ResponseError::Unknown(_)) | None => format!("UNKNOWN_CODE_{}", self.0),
            Some(e) => upper_snake(&format!("{e}")),
        }
    }

    /// Whether Kafka says a retry may succeed (leader moves, timeouts, ...).
    pub fn is_retriable(self) -> bool {
        ResponseError::try_from_code(self.0).is_some_and(|e| e.is_retriable())
    }

    /// Errors after which the cached metadata is probably stale.
    pub fn invalidates_metadata(self) -> bool {
        matches!(
            ResponseError::try_from_code(self.0),
            Some(
                ResponseError::UnknownTopicOrPartition
                    | ResponseError::LeaderNotAvailable
                    | ResponseError::NotLeaderOrFollower
                    | ResponseError::FencedLeaderEpoch
                    | ResponseError::UnknownLeaderEpoch
            )
        )
    }
}

impl fmt::Display for KafkaCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// `NotLeaderOrFollower` → `NOT_LEADER_OR_FOLLOWER` (the crate names variants in CamelCase).
fn upper_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Everything the client can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },
    #[error("connection to {addr} is closed{}", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    Disconnected {
        addr: String,
        reason: Option<String>,
    },
    #[error("cannot encode or decode {what}: {reason}")]
    Codec { what: String, reason: String },
    #[error("the broker supports no version of {api} that this client speaks ({ours})")]
    UnsupportedApi { api: String, ours: String },
    #[error("{api} failed: {code}{}", message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka {
        api: &'static str,
        code: KafkaCode,
        message: Option<String>,
    },
    #[error("topic {topic} has no partition {partition}")]
    NoSuchPartition { topic: String, partition: i32 },
    #[error("no leader known for {topic}-{partition}")]
    NoLeader { topic: String, partition: i32 },
    #[error("none of the bootstrap servers answered: {0}")]
    Bootstrap(String),
    #[error("compression: {0}")]
    Compression(String),
    #[error("bad record batch: {0}")]
    Batch(String),
    #[error("the producer is closed")]
    Closed,
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl ClientError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> ClientError {
        ClientError::Io {
            context: context.into(),
            source,
        }
    }

    pub fn codec(what: impl Into<String>, reason: impl fmt::Display) -> ClientError {
        ClientError::Codec {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// A copy (the I/O error keeps its kind and message), for errors shared by many requests.
    pub fn duplicate(&self) -> ClientError {
        match self {
            ClientError::Io { context, source } => ClientError::Io {
                context: context.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            ClientError::Timeout { what, after } => ClientError::Timeout {
                what: what.clone(),
                after: *after,
            },
            ClientError::Disconnected { addr, reason } => ClientError::Disconnected {
                addr: addr.clone(),
                reason: reason.clone(),
            },
            ClientError::Codec { what, reason } => ClientError::Codec {
                what: what.clone(),
                reason: reason.clone(),
            },
            ClientError::UnsupportedApi { api, ours } => ClientError::UnsupportedApi {
                api: api.clone(),
                ours: ours.clone(),
            },
            ClientError::Kafka { api, code, message } => ClientError::Kafka {
                api,
                code: *code,
                message: message.clone(),
            },
            ClientError::NoSuchPartition { topic, partition } => ClientError::NoSuchPartition {
                topic: topic.clone(),
                partition: *partition,
            },
            ClientError::NoLeader { topic, partition } => ClientError::NoLeader {
                topic: topic.clone(),
                partition: *partition,
            },
            ClientError::Bootstrap(s) => ClientError::Bootstrap(s.clone()),
            ClientError::Compression(s) => ClientError::Compression(s.clone()),
            ClientError::Batch(s) => ClientError::Batch(s.clone()),
            ClientError::Closed => ClientError::Closed,
            ClientError::Config(s) => ClientError::Config(s.clone()),
        }
    }

    /// The name under which this error is counted in reports: the Kafka name for broker
    /// errors, a short kind otherwise.
    pub fn kind_name(&self) -> String {
        match self {
            ClientError::Kafka { code, .. } => code.name(),
            ClientError::Io { .. } => "IO_ERROR".into(),
            ClientError::Timeout { .. } => "CLIENT_TIMEOUT".into(),
            ClientError::Disconnected { .. } => "DISCONNECTED".into(),
            ClientError::Codec { .. } => "CODEC_ERROR".into(),
            ClientError::UnsupportedApi { .. } => "UNSUPPORTED_API".into(),
            ClientError::NoSuchPartition { .. } => "NO_SUCH_PARTITION".into(),
            ClientError::NoLeader { .. } => "NO_LEADER".into(),
            ClientError::Bootstrap(_) => "BOOTSTRAP_FAILED".into(),
            ClientError::Compression(_) => "COMPRESSION_ERROR".into(),
            ClientError::Batch(_) => "BAD_BATCH".into(),
            ClientError::Closed => "CLOSED".into(),
            ClientError::Config(_) => "CONFIG_ERROR".into(),
        }
    }

    /// Whether sending the same request again may succeed.
    pub fn is_retriable(&self) -> bool {
        match self {
            ClientError::Kafka { code, .. } => code.is_retriable(),
            ClientError::Disconnected { .. } | ClientError::Timeout { .. } => true,
            ClientError::NoLeader { .. } => true,
            _ => false,
        }
    }
}

pub type ClientResult<T> = Result<T, ClientError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_named_as_kafka_names_them() {
        assert_eq!(KafkaCode(6).name(), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(KafkaCode(3).name(), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(KafkaCode(-1).name(), "UNKNOWN_SERVER_ERROR");
        assert_eq!(KafkaCode(9999).name(), "UNKNOWN_CODE_9999");
        assert!(KafkaCode(6).is_retriable());
        assert!(!KafkaCode(10).is_retriable());
        assert_eq!(KafkaCode::from_code(0), None);
    }
}
