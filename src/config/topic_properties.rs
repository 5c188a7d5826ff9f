//! The topic properties: Kafka 3.9's whole set (its `LogConfig`), each with its type and
//! range, default, broker synonym, documentation and what it does here. CreateTopics,
//! AlterConfigs and IncrementalAlterConfigs validate against this table, DescribeConfigs lists
//! it, and a topic's [`LogConfig`] is built from it: one table, not three lists.

use std::collections::BTreeMap;

use crate::log::config::{CleanupPolicy, TopicCompression};
use crate::log::LogConfig;
use crate::protocol::record_batch::{Compression, TimestampType};

use super::property_kind::list_items;
pub use super::property_kind::{
    Kind, Parsed, TYPE_BOOLEAN, TYPE_DOUBLE, TYPE_INT, TYPE_LIST, TYPE_LONG, TYPE_STRING,
};

/// Why a topic config is refused (INVALID_CONFIG on the wire, with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicConfigError {
    #[error("Unknown topic config name: {0}")]
    Unknown(String),
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        name: String,
        value: String,
        reason: String,
    },
}

/// What a property does on this broker (docs/configuration.md's effect column comes from this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Changes what the broker does.
    Applied,
    /// Validated and stored, not used yet; the text says by what, later.
    Stored(&'static str),
    /// Accepted and listed, without effect; the text says why.
    NoEffect(&'static str),
}

/// One topic property.
pub struct TopicProperty {
    pub name: &'static str,
    /// The broker property that sets its default (Kafka's synonym), if Kafka has one.
    pub broker_name: Option<&'static str>,
    pub kind: Kind,
    /// Kafka 3.9's default, as DescribeConfigs shows it.
    pub default: &'static str,
    pub doc: &'static str,
    pub effect: Effect,
    /// Stores a valid value in the log config (`None`: the value lives in the topic's
    /// metadata only).
    pub apply: Option<fn(&mut LogConfig, &Parsed)>,
    /// The value a log config holds, in Kafka's form (`None` as for `apply`).
    pub current: Option<fn(&LogConfig) -> String>,
}

impl TopicProperty {
    /// The value for a topic whose log config is `c` and whose overrides are `overrides`.
    pub fn value(&self, c: &LogConfig, overrides: &BTreeMap<String, String>) -> String {
        match (self.current, overrides.get(self.name)) {
            // A list override reads back in the order it was given, as Kafka keeps it
            // (`current` renders the parsed config, in its own order: "compact,delete").
            (Some(_), Some(v)) if self.kind.config_type() == TYPE_LIST => {
                self.kind.parse(v).map_or_else(|_| v.clone(), render)
            }
            (Some(current), _) => current(c),
            (None, Some(v)) => self.kind.parse(v).map_or_else(|_| v.clone(), render),
            (None, None) => self.default.to_string(),
        }
    }
}

fn render(p: Parsed) -> String {
    match p {
        Parsed::Int(n) => n.to_string(),
        Parsed::Double(x) => x.to_string(),
        Parsed::Bool(b) => b.to_string(),
        Parsed::Text(s) => s,
    }
}

const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: i64 = i32::MAX as i64;
const NO_CLEANER: &str = "no log cleaner yet (compaction comes later)";
const NO_TIERED: &str = "no tiered storage";
const NO_REPLICATION: &str =
    "replication throttles are not implemented: the list is kept, replication runs unthrottled";

fn long_or_max(n: i64) -> String {
    n.to_string()
}

/// Every topic property, sorted by name.
pub const TOPIC_PROPERTIES: &[TopicProperty] = &[
    TopicProperty {
        name: "cleanup.policy",
        broker_name: Some("log.cleanup.policy"),
        kind: Kind::ListOf(&["compact", "delete"]),
        default: "delete",
        doc: "delete: retention drops old segments; compact: every record needs a key (the cleaner comes later). Both, or neither.",
        effect: Effect::Applied,
        apply: Some(|c, v| {
            let items: Vec<&str> = list_items(v.text());
            c.cleanup_policy = CleanupPolicy {
                delete: items.contains(&"delete"),
                compact: items.contains(&"compact"),
            };
        }),
        current: Some(|c| {
            let p = c.cleanup_policy;
            let mut items = Vec::new();
            if p.compact {
                items.push("compact");
            }
            if p.delete {
                items.push("delete");
            }
            items.join(",")
        }),
    },
    TopicProperty {
        name: "compression.gzip.level",
        broker_name: Some("compression.gzip.level"),
        kind: Kind::GzipLevel,
        default: "-1",
        doc: "gzip level when the broker recompresses.",
        effect: Effect::NoEffect("recompression uses each codec's default level"),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "compression.lz4.level",
        broker_name: Some("compression.lz4.level"),
        kind: Kind::Int { min: 1, max: 17 },
        default: "9",
        doc: "lz4 level when the broker recompresses.",
        effect: Effect::NoEffect("recompression uses each codec's default level"),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "compression.type",
        broker_name: Some("compression.type"),
        kind: Kind::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]),
        default: "producer",
        doc: "The codec batches are stored with; producer keeps the producer's, others recompress on append.",
        effect: Effect::Applied,
        apply: Some(|c, v| {
            c.compression = match v.text() {
                "uncompressed" => TopicCompression::Codec(Compression::None),
                "gzip" => TopicCompression::Codec(Compression::Gzip),
                "snappy" => TopicCompression::Codec(Compression::Snappy),
                "lz4" => TopicCompression::Codec(Compression::Lz4),
                "zstd" => TopicCompression::Codec(Compression::Zstd),
                _ => TopicCompression::Producer,
            }
        }),
        current: Some(|c| {
            match c.compression {
                TopicCompression::Producer => "producer",
                TopicCompression::Codec(Compression::None) => "uncompressed",
                TopicCompression::Codec(Compression::Gzip) => "gzip",
                TopicCompression::Codec(Compression::Snappy) => "snappy",
                TopicCompression::Codec(Compression::Lz4) => "lz4",
                TopicCompression::Codec(Compression::Zstd) => "zstd",
            }
            .to_string()
        }),
    },
    TopicProperty {
        name: "compression.zstd.level",
        broker_name: Some("compression.zstd.level"),
        kind: Kind::Int {
            min: -131_072,
            max: 22,
        },
        default: "3",
        doc: "zstd level when the broker recompresses.",
        effect: Effect::NoEffect("recompression uses each codec's default level"),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "delete.retention.ms",
        broker_name: Some("log.cleaner.delete.retention.ms"),
        kind: Kind::Long { min: 0 },
        default: "86400000",
        doc: "How long tombstones of a compacted topic are kept.",
        effect: Effect::NoEffect(NO_CLEANER),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "file.delete.delay.ms",
        broker_name: Some("log.segment.delete.delay.ms"),
        kind: Kind::Long { min: 0 },
        default: "60000",
        doc: "How long a deleted segment's files are kept before removal.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.file_delete_delay_ms = v.int()),
        current: Some(|c| c.file_delete_delay_ms.to_string()),
    },
    TopicProperty {
        name: "flush.messages",
        broker_name: Some("log.flush.interval.messages"),
        kind: Kind::Long { min: 1 },
        default: LONG_MAX,
        doc: "fdatasync after this many records.",
        effect: Effect::Applied,
        apply: Some(|c, v| {
            c.flush_messages = if v.int() == i64::MAX {
                u64::MAX
            } else {
                v.int() as u64
            }
        }),
        current: Some(|c| {
            i64::try_from(c.flush_messages)
                .unwrap_or(i64::MAX)
                .to_string()
        }),
    },
    TopicProperty {
        name: "flush.ms",
        broker_name: Some("log.flush.interval.ms"),
        kind: Kind::Long { min: 0 },
        default: LONG_MAX,
        doc: "fdatasync when the oldest unflushed write is this old.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.flush_ms = v.int()),
        current: Some(|c| long_or_max(c.flush_ms)),
    },
    TopicProperty {
        name: "follower.replication.throttled.replicas",
        broker_name: None,
        kind: Kind::ThrottledReplicas,
        default: "",
        doc: "Replicas whose follower replication is throttled.",
        effect: Effect::NoEffect(NO_REPLICATION),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "index.interval.bytes",
        broker_name: Some("log.index.interval.bytes"),
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        default: "4096",
        doc: "Bytes of log between two entries of the sparse offset index.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.index_interval_bytes = v.int() as u32),
        current: Some(|c| c.index_interval_bytes.to_string()),
    },
    TopicProperty {
        name: "leader.replication.throttled.replicas",
        broker_name: None,
        kind: Kind::ThrottledReplicas,
        default: "",
        doc: "Replicas whose leader-side replication is throttled.",
        effect: Effect::NoEffect(NO_REPLICATION),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "local.retention.bytes",
        broker_name: Some("log.local.retention.bytes"),
        kind: Kind::Long { min: -2 },
        default: "-2",
        doc: "Local retention by size with tiered storage (-2: retention.bytes).",
        effect: Effect::NoEffect(NO_TIERED),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "local.retention.ms",
        broker_name: Some("log.local.retention.ms"),
        kind: Kind::Long { min: -2 },
        default: "-2",
        doc: "Local retention by time with tiered storage (-2: retention.ms).",
        effect: Effect::NoEffect(NO_TIERED),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "max.compaction.lag.ms",
        broker_name: Some("log.cleaner.max.compaction.lag.ms"),
        kind: Kind::Long { min: 1 },
        default: LONG_MAX,
        doc: "Longest a record stays uncompacted.",
        effect: Effect::NoEffect(NO_CLEANER),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "max.message.bytes",
        broker_name: Some("message.max.bytes"),
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
        },
        default: "1048588",
        doc: "Largest record batch stored (after the broker's recompression, if any).",
        effect: Effect::Applied,
        apply: Some(|c, v| c.max_message_bytes = v.int() as usize),
        current: Some(|c| c.max_message_bytes.to_string()),
    },
    TopicProperty {
        name: "message.downconversion.enable",
        broker_name: Some("log.message.downconversion.enable"),
        kind: Kind::Bool,
        default: "true",
        doc: "Whether Fetch v0/v1 fetchers get batches converted to the legacy message format.",
        effect: Effect::Stored("for Fetch v0/v1 down-conversion"),
        apply: Some(|c, v| c.message_downconversion_enable = v.boolean()),
        current: Some(|c| c.message_downconversion_enable.to_string()),
    },
    TopicProperty {
        name: "message.format.version",
        broker_name: Some("log.message.format.version"),
        kind: Kind::Version,
        default: "3.0-IV1",
        doc: "Deprecated: batches are always stored in format v2.",
        effect: Effect::NoEffect(
            "deprecated; Kafka 3.x ignores it too and always writes record batch v2",
        ),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "message.timestamp.after.max.ms",
        broker_name: Some("log.message.timestamp.after.max.ms"),
        kind: Kind::Long { min: 0 },
        default: LONG_MAX,
        doc: "A CreateTime record more than this ahead of the broker's clock is INVALID_TIMESTAMP.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.message_timestamp_after_max_ms = v.int()),
        current: Some(|c| long_or_max(c.message_timestamp_after_max_ms)),
    },
    TopicProperty {
        name: "message.timestamp.before.max.ms",
        broker_name: Some("log.message.timestamp.before.max.ms"),
        kind: Kind::Long { min: 0 },
        default: LONG_MAX,
        doc: "A CreateTime record more than this behind the broker's clock is INVALID_TIMESTAMP.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.message_timestamp_before_max_ms = v.int()),
        current: Some(|c| long_or_max(c.message_timestamp_before_max_ms)),
    },
    TopicProperty {
        name: "message.timestamp.difference.max.ms",
        broker_name: Some("log.message.timestamp.difference.max.ms"),
        kind: Kind::Long { min: 0 },
        default: LONG_MAX,
        doc: "Deprecated: both timestamp bounds where before/after.max.ms are left unset.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.message_timestamp_difference_max_ms = v.int()),
        current: Some(|c| long_or_max(c.message_timestamp_difference_max_ms)),
    },
    TopicProperty {
        name: "message.timestamp.type",
        broker_name: Some("log.message.timestamp.type"),
        kind: Kind::OneOf(&["CreateTime", "LogAppendTime"]),
        default: "CreateTime",
        doc: "CreateTime keeps producer timestamps; LogAppendTime stamps batches on append.",
        effect: Effect::Applied,
        apply: Some(|c, v| {
            c.message_timestamp_type = if v.text() == "LogAppendTime" {
                TimestampType::LogAppendTime
            } else {
                TimestampType::CreateTime
            }
        }),
        current: Some(|c| match c.message_timestamp_type {
            TimestampType::CreateTime => "CreateTime".to_string(),
            TimestampType::LogAppendTime => "LogAppendTime".to_string(),
        }),
    },
    TopicProperty {
        name: "min.cleanable.dirty.ratio",
        broker_name: Some("log.cleaner.min.cleanable.ratio"),
        kind: Kind::Double { min: 0.0, max: 1.0 },
        default: "0.5",
        doc: "Dirty share of a log that makes the cleaner compact it.",
        effect: Effect::NoEffect(NO_CLEANER),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "min.compaction.lag.ms",
        broker_name: Some("log.cleaner.min.compaction.lag.ms"),
        kind: Kind::Long { min: 0 },
        default: "0",
        doc: "Shortest time a record stays uncompacted.",
        effect: Effect::NoEffect(NO_CLEANER),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "min.insync.replicas",
        broker_name: Some("min.insync.replicas"),
        kind: Kind::Int {
            min: 1,
            max: INT_MAX,
        },
        default: "1",
        doc: "In-sync replicas an acks=all produce needs.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.min_insync_replicas = v.int() as i32),
        current: Some(|c| c.min_insync_replicas.to_string()),
    },
    TopicProperty {
        name: "preallocate",
        broker_name: Some("log.preallocate"),
        kind: Kind::Bool,
        default: "false",
        doc: "Whether a new segment's file is preallocated.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.preallocate = v.boolean()),
        current: Some(|c| c.preallocate.to_string()),
    },
    TopicProperty {
        name: "remote.log.copy.disable",
        broker_name: None,
        kind: Kind::Bool,
        default: "false",
        doc: "Stop copying segments to tiered storage.",
        effect: Effect::NoEffect(NO_TIERED),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "remote.log.delete.on.disable",
        broker_name: None,
        kind: Kind::Bool,
        default: "false",
        doc: "Delete tiered data when tiered storage is disabled for the topic.",
        effect: Effect::NoEffect(NO_TIERED),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "remote.storage.enable",
        broker_name: None,
        kind: Kind::FalseOnly(
            "You have to enable remote storage on the broker (remote.log.storage.system.enable) to set remote.storage.enable on the topic; ringbroker has no tiered storage",
        ),
        default: "false",
        doc: "Tiered storage for the topic (not available: only false is accepted).",
        effect: Effect::NoEffect(NO_TIERED),
        apply: None,
        current: None,
    },
    TopicProperty {
        name: "retention.bytes",
        broker_name: Some("log.retention.bytes"),
        kind: Kind::Long { min: i64::MIN },
        default: "-1",
        doc: "Oldest segments are deleted while a partition is larger than this; -1: no limit.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.retention_bytes = v.int()),
        current: Some(|c| c.retention_bytes.to_string()),
    },
    TopicProperty {
        name: "retention.ms",
        broker_name: Some("log.retention.ms"),
        kind: Kind::Long { min: -1 },
        default: "604800000",
        doc: "Segments whose newest record is older than this are deleted; -1 keeps them forever.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.retention_ms = v.int()),
        current: Some(|c| c.retention_ms.to_string()),
    },
    TopicProperty {
        name: "segment.bytes",
        broker_name: Some("log.segment.bytes"),
        kind: Kind::Int {
            min: 14,
            max: INT_MAX,
        },
        default: "1073741824",
        doc: "Size at which the active segment is rolled.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.segment_bytes = v.int() as u64),
        current: Some(|c| c.segment_bytes.to_string()),
    },
    TopicProperty {
        name: "segment.index.bytes",
        broker_name: Some("log.index.size.max.bytes"),
        kind: Kind::Int {
            min: 4,
            max: INT_MAX,
        },
        default: "10485760",
        doc: "Largest offset or time index of a segment; a full index rolls the segment.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.segment_index_bytes = v.int() as u32),
        current: Some(|c| c.segment_index_bytes.to_string()),
    },
    TopicProperty {
        name: "segment.jitter.ms",
        broker_name: Some("log.roll.jitter.ms"),
        kind: Kind::Long { min: 0 },
        default: "0",
        doc: "Up to this much is taken off segment.ms, differently per segment.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.segment_jitter_ms = v.int()),
        current: Some(|c| c.segment_jitter_ms.to_string()),
    },
    TopicProperty {
        name: "segment.ms",
        broker_name: Some("log.roll.ms"),
        kind: Kind::Long { min: 1 },
        default: "604800000",
        doc: "Age at which the active segment is rolled.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.segment_ms = v.int()),
        current: Some(|c| c.segment_ms.to_string()),
    },
    TopicProperty {
        name: "unclean.leader.election.enable",
        broker_name: Some("unclean.leader.election.enable"),
        kind: Kind::Bool,
        default: "false",
        doc: "Whether a replica outside the ISR may become leader.",
        effect: Effect::Applied,
        apply: Some(|c, v| c.unclean_leader_election_enable = v.boolean()),
        current: Some(|c| c.unclean_leader_election_enable.to_string()),
    },
];

/// The property named `name`.
pub fn topic_property(name: &str) -> Option<&'static TopicProperty> {
    TOPIC_PROPERTIES.iter().find(|p| p.name == name)
}

/// Checks one name and value.
pub fn parse_topic_property(
    name: &str,
    value: &str,
) -> Result<(&'static TopicProperty, Parsed), TopicConfigError> {
    let prop = topic_property(name).ok_or_else(|| TopicConfigError::Unknown(name.to_string()))?;
    let parsed = prop
        .kind
        .parse(value)
        .map_err(|reason| TopicConfigError::Invalid {
            name: name.to_string(),
            value: value.to_string(),
            reason,
        })?;
    Ok((prop, parsed))
}

/// Topic-level settings (CreateTopics configs, AlterConfigs) applied over the broker defaults;
/// an unknown name or invalid value refuses the whole set.
pub fn topic_log_config(
    defaults: &LogConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<LogConfig, TopicConfigError> {
    let mut c = defaults.clone();
    for (name, value) in overrides {
        let (prop, parsed) = parse_topic_property(name, value)?;
        if let Some(apply) = prop.apply {
            apply(&mut c, &parsed);
        }
    }
    Ok(c)
}

/// The value of a property in a log config with no overrides (the broker's default for it).
pub fn topic_property_value(c: &LogConfig, name: &str) -> Option<String> {
    topic_property(name).map(|p| p.value(c, &BTreeMap::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_defaults_are_valid_and_match_the_log_config() {
        let names: Vec<&str> = TOPIC_PROPERTIES.iter().map(|p| p.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(names, sorted);
        let builtin = LogConfig::default();
        for p in TOPIC_PROPERTIES {
            let parsed = p.kind.parse(p.default);
            assert!(
                parsed.is_ok(),
                "{}: default {:?} invalid",
                p.name,
                p.default
            );
            assert_eq!(p.value(&builtin, &BTreeMap::new()), p.default, "{}", p.name);
            assert_eq!(p.apply.is_some(), p.current.is_some(), "{}", p.name);
            // Setting the default explicitly changes nothing.
            let one = BTreeMap::from([(p.name.to_string(), p.default.to_string())]);
            assert_eq!(topic_log_config(&builtin, &one).as_ref(), Ok(&builtin));
        }
    }

    #[test]
    fn kafka_types_and_ranges() {
        let bad = |n: &str, v: &str| {
            topic_log_config(
                &LogConfig::default(),
                &BTreeMap::from([(n.into(), v.into())]),
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            bad("segment.bytes", "13"),
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14"
        );
        assert!(bad("segment.bytes", "3000000000").contains("Not a number of type INT"));
        assert!(bad("min.cleanable.dirty.ratio", "1.5").contains("between 0 and 1"));
        assert!(bad("preallocate", "yes").contains("either true or false"));
        assert!(bad("cleanup.policy", "compact,bogus").contains("bogus"));
        assert!(bad("compression.type", "brotli").contains("String must be one of"));
        assert!(bad("remote.storage.enable", "true").contains("remote.log.storage.system.enable"));
        assert!(bad("message.format.version", "latest").contains("not a valid version"));
        assert!(bad("leader.replication.throttled.replicas", "0:x").contains("[partitionId]"));
        assert!(bad("compression.gzip.level", "0").contains("between 1 and 9"));
        assert_eq!(bad("nope", "1"), "Unknown topic config name: nope");
        let ok = |n: &str, v: &str| {
            topic_log_config(
                &LogConfig::default(),
                &BTreeMap::from([(n.into(), v.into())]),
            )
            .expect(n)
        };
        assert!(
            ok("cleanup.policy", "delete,compact")
                .cleanup_policy
                .compact
        );
        assert!(!ok("cleanup.policy", "compact").cleanup_policy.delete);
        ok("message.format.version", "0.10.2");
        ok("message.format.version", "2.8-IV1");
        ok("follower.replication.throttled.replicas", "*");
        ok("leader.replication.throttled.replicas", "0:1, 1:2");
        let c = ok("message.timestamp.difference.max.ms", "1000");
        assert_eq!(c.timestamp_bounds(), (1000, 1000));
    }
}
