//! The broker properties: every name `--set` and the config file accept, each with its type
//! and range, default, documentation, update mode (Kafka's) and how it reads and writes
//! [`BrokerConfig`]. `set`, `serve --check-config`, DescribeConfigs on a broker, the broker
//! side of (Incremental)AlterConfigs and docs/configuration.md all come from this table.

// A setter stores and succeeds in one expression, `Ok(c.field = value)`: the table stays one
// screen per few properties.
#![allow(clippy::unit_arg)]

use std::path::PathBuf;

use super::broker_config::BrokerConfig;
use super::broker_property::DefaultValue::{Derived, Fixed};
use super::broker_property::Scope::{ClusterWide, PerBroker, ReadOnly};
use super::broker_property::{
    Alias, BrokerKind, BrokerProperty, Parsed, ANY, NON_NEGATIVE, POSITIVE,
};
use super::listeners::DEFAULT_CONTROLLER_LISTENER_NAMES;
use super::value_forms::{
    bracket_ipv6, log_io_name, narrow, parse_ip_overrides, parse_log_io, parse_timestamp_type,
    timestamp_type_name,
};

const I32: (i64, i64) = (i32::MIN as i64, i32::MAX as i64);
const fn int(range: (i64, i64)) -> BrokerKind {
    BrokerKind::Int {
        min: range.0,
        max: range.1,
    }
}
const fn long(range: (i64, i64)) -> BrokerKind {
    BrokerKind::Long {
        min: range.0,
        max: range.1,
    }
}
const INT_POSITIVE: BrokerKind = int((1, i32::MAX as i64));
const INT_NON_NEGATIVE: BrokerKind = int((0, i32::MAX as i64));

/// A KRaft property: kept as given (the rules of `controller::kraft_config` span several of
/// them) under its name; `set` of an empty value unsets it.
macro_rules! kraft {
    ($name:literal, $kind:expr, $default:literal, $doc:literal) => {
        BrokerProperty {
            name: $name,
            aliases: &[],
            kind: $kind,
            default: Fixed($default),
            doc: $doc,
            scope: ReadOnly,
            runtime: false,
            set: |c, v| {
                let v = match v {
                    Parsed::Int(n) => n.to_string(),
                    other => other.text().to_string(),
                };
                match v.as_str() {
                    "" => c.cluster.remove($name),
                    _ => c.cluster.insert($name, v),
                };
                Ok(())
            },
            get: |c| c.cluster_property($name),
        }
    };
}

/// Every broker property, sorted by name.
pub const BROKER_PROPERTIES: &[BrokerProperty] = &[
    BrokerProperty {
        name: "advertised.listeners",
        aliases: &[],
        kind: BrokerKind::Text,
        default: Derived("the client listener of `listeners`"),
        doc: "The address given to clients in Metadata.",
        scope: PerBroker,
        runtime: false,
        set: |c, v| c.set_listener_property("advertised.listeners", v.text()),
        get: |c| {
            c.cluster_listeners("advertised.listeners")
                .unwrap_or_else(|| {
                    format!(
                        "PLAINTEXT://{}:{}",
                        bracket_ipv6(&c.advertised_host),
                        c.advertised_port
                    )
                })
        },
    },
    BrokerProperty {
        name: "auto.create.topics.enable",
        aliases: &[],
        kind: BrokerKind::Bool,
        default: Fixed("true"),
        doc: "Create unknown topics asked for in Metadata.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.auto_create_topics = v.boolean()),
        get: |c| c.auto_create_topics.to_string(),
    },
    kraft!(
        "broker.heartbeat.interval.ms",
        int(POSITIVE),
        "2000",
        "How often a broker heartbeats the active controller."
    ),
    kraft!(
        "broker.rack",
        BrokerKind::Text,
        "",
        "This broker's rack: replicas are spread over racks."
    ),
    kraft!(
        "broker.session.timeout.ms",
        int(POSITIVE),
        "9000",
        "A broker silent this long is fenced."
    ),
    kraft!(
        "cluster.id",
        BrokerKind::Text,
        "",
        "The cluster's id (meta.properties); generated when not set."
    ),
    BrokerProperty {
        name: "connections.max.idle.ms",
        aliases: &[],
        kind: long(ANY),
        default: Fixed("600000"),
        doc: "A connection with no request for this long is closed; -1 never closes one.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| {
            // Kafka takes any value and a negative one disables the check; 0 would close
            // every connection between two requests.
            match v.int() {
                0 => Err("must be positive, or -1 (never close)".to_string()),
                n => Ok(c.connections_max_idle_ms = n),
            }
        },
        get: |c| c.connections_max_idle_ms.to_string(),
    },
    BrokerProperty {
        name: "controller.listener.names",
        aliases: &[],
        kind: BrokerKind::List,
        default: Fixed(DEFAULT_CONTROLLER_LISTENER_NAMES),
        doc: "Listeners the controller quorum uses.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| c.set_listener_property("controller.listener.names", v.text()),
        get: |c| c.cluster_property("controller.listener.names"),
    },
    kraft!(
        "controller.quorum.election.timeout.ms",
        int(POSITIVE),
        "1000",
        "Shortest Raft election timeout of the metadata quorum."
    ),
    kraft!(
        "controller.quorum.voters",
        BrokerKind::List,
        "",
        "The metadata quorum: id@host:port,... (unset: single node)."
    ),
    kraft!(
        "default.replication.factor",
        int(POSITIVE),
        "1",
        "Replication factor of topics created without one."
    ),
    BrokerProperty {
        name: "fetch.max.bytes",
        aliases: &[],
        kind: int((1024, i64::MAX)),
        default: Fixed("57671680"),
        doc: "Most record bytes in one Fetch response (the first batch comes whole).",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.fetch_max_bytes = narrow(v.int())?),
        get: |c| c.fetch_max_bytes.to_string(),
    },
    BrokerProperty {
        name: "group.initial.rebalance.delay.ms",
        aliases: &[],
        kind: INT_NON_NEGATIVE,
        default: Fixed("3000"),
        doc: "How long a new group waits for more members before its first rebalance.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.group.initial_rebalance_delay_ms = narrow(v.int())?),
        get: |c| c.group.initial_rebalance_delay_ms.to_string(),
    },
    BrokerProperty {
        name: "group.max.session.timeout.ms",
        aliases: &[],
        kind: INT_NON_NEGATIVE,
        default: Fixed("1800000"),
        doc: "Largest session timeout a member may ask for.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.group.max_session_timeout_ms = narrow(v.int())?),
        get: |c| c.group.max_session_timeout_ms.to_string(),
    },
    BrokerProperty {
        name: "group.max.size",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("2147483647"),
        doc: "Most members one group may have.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.group.max_size = narrow(v.int())?),
        get: |c| c.group.max_size.to_string(),
    },
    BrokerProperty {
        name: "group.min.session.timeout.ms",
        aliases: &[],
        kind: INT_NON_NEGATIVE,
        default: Fixed("6000"),
        doc: "Smallest session timeout a member may ask for.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.group.min_session_timeout_ms = narrow(v.int())?),
        get: |c| c.group.min_session_timeout_ms.to_string(),
    },
    BrokerProperty {
        name: "listeners",
        aliases: &[],
        kind: BrokerKind::Text,
        default: Fixed("PLAINTEXT://127.0.0.1:9092"),
        doc: "The addresses listened on: clients' (every shard), and CONTROLLER's in a cluster.",
        scope: PerBroker,
        runtime: false,
        set: |c, v| c.set_listener_property("listeners", v.text()),
        get: |c| {
            c.cluster_listeners("listeners")
                .unwrap_or_else(|| format!("PLAINTEXT://{}", c.listen))
        },
    },
    BrokerProperty {
        name: "log.dirs",
        aliases: &[Alias {
            name: "log.dir",
            factor: 1,
        }],
        kind: BrokerKind::List,
        default: Fixed("./data"),
        doc: "The data directory (one per broker).",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| {
            // Kafka's list syntax: comma-separated, blanks and empty entries ignored.
            let dirs: Vec<&str> = v
                .text()
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .collect();
            match dirs.as_slice() {
                [] => Err("empty directory".to_string()),
                [one] => Ok(c.data_dir = PathBuf::from(one)),
                several => Err(format!(
                    "{} directories given ({}); ringbroker serves one data directory per \
                     broker (no JBOD yet): give one",
                    several.len(),
                    several.join(", ")
                )),
            }
        },
        get: |c| c.data_dir.display().to_string(),
    },
    BrokerProperty {
        name: "log.flush.interval.messages",
        aliases: &[],
        kind: long(POSITIVE),
        default: Fixed("9223372036854775807"),
        doc: "Topics' default flush.messages: fdatasync after this many records.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.flush_messages = narrow(v.int())?),
        // u64::MAX means "never" (Kafka's Long.MAX_VALUE), which is what `set` accepts.
        get: |c| {
            i64::try_from(c.log_defaults.flush_messages)
                .unwrap_or(i64::MAX)
                .to_string()
        },
    },
    BrokerProperty {
        name: "log.flush.interval.ms",
        aliases: &[],
        kind: long(POSITIVE),
        default: Fixed("9223372036854775807"),
        doc: "Topics' default flush.ms: fdatasync when the oldest unflushed write is this old.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.flush_ms = v.int()),
        get: |c| c.log_defaults.flush_ms.to_string(),
    },
    BrokerProperty {
        name: "log.flush.offset.checkpoint.interval.ms",
        aliases: &[],
        kind: long(POSITIVE),
        default: Fixed("60000"),
        doc: "How often each partition's recovery point and producer state are written (also at every roll).",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.checkpoint_interval_ms = narrow(v.int())?),
        get: |c| c.checkpoint_interval_ms.to_string(),
    },
    BrokerProperty {
        name: "log.index.interval.bytes",
        aliases: &[],
        kind: int((1, u32::MAX as i64)),
        default: Fixed("4096"),
        doc: "Topics' default index.interval.bytes: bytes of log between two offset index entries.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.index_interval_bytes = narrow(v.int())?),
        get: |c| c.log_defaults.index_interval_bytes.to_string(),
    },
    BrokerProperty {
        name: "log.message.timestamp.type",
        aliases: &[],
        kind: BrokerKind::Text,
        default: Fixed("CreateTime"),
        doc: "Topics' default message.timestamp.type: CreateTime keeps producer timestamps, LogAppendTime stamps batches on append.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.message_timestamp_type = parse_timestamp_type(v.text())?),
        get: |c| timestamp_type_name(c.log_defaults.message_timestamp_type).to_string(),
    },
    BrokerProperty {
        name: "log.retention.bytes",
        aliases: &[],
        kind: long(ANY),
        default: Fixed("-1"),
        doc: "Topics' default retention.bytes: oldest segments are deleted while a partition is larger; -1: no limit.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.retention_bytes = v.int()),
        get: |c| c.log_defaults.retention_bytes.to_string(),
    },
    BrokerProperty {
        name: "log.retention.ms",
        aliases: &[
            Alias {
                name: "log.retention.minutes",
                factor: 60_000,
            },
            Alias {
                name: "log.retention.hours",
                factor: 3_600_000,
            },
        ],
        kind: long(ANY),
        default: Fixed("604800000"),
        doc: "Topics' default retention.ms: segments whose newest record is older are deleted; -1 keeps them.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.retention_ms = v.int()),
        get: |c| c.log_defaults.retention_ms.to_string(),
    },
    BrokerProperty {
        name: "log.roll.ms",
        aliases: &[Alias {
            name: "log.roll.hours",
            factor: 3_600_000,
        }],
        kind: long(POSITIVE),
        default: Fixed("604800000"),
        doc: "Topics' default segment.ms: age at which the active segment is rolled.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.segment_ms = v.int()),
        get: |c| c.log_defaults.segment_ms.to_string(),
    },
    BrokerProperty {
        name: "log.segment.bytes",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("1073741824"),
        doc: "Topics' default segment.bytes: size at which the active segment is rolled.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.segment_bytes = narrow(v.int())?),
        get: |c| c.log_defaults.segment_bytes.to_string(),
    },
    BrokerProperty {
        name: "max.connections",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("65536"),
        doc: "Open connections across all shards; more are closed at once.",
        scope: ClusterWide,
        runtime: false,
        set: |c, v| Ok(c.max_connections = narrow(v.int())?),
        get: |c| c.max_connections.to_string(),
    },
    BrokerProperty {
        name: "max.connections.per.ip",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("2147483647"),
        doc: "Open connections from one address; more are closed at once.",
        scope: ClusterWide,
        runtime: false,
        set: |c, v| Ok(c.max_connections_per_ip = narrow(v.int())?),
        get: |c| c.max_connections_per_ip.to_string(),
    },
    BrokerProperty {
        name: "max.connections.per.ip.overrides",
        aliases: &[],
        kind: BrokerKind::Text,
        default: Fixed(""),
        doc: "Per-address limits (ip:count,...) that replace max.connections.per.ip.",
        scope: ClusterWide,
        runtime: false,
        set: |c, v| Ok(c.max_connections_per_ip_overrides = parse_ip_overrides(v.text())?),
        get: |c| {
            c.max_connections_per_ip_overrides
                .iter()
                .map(|(ip, n)| format!("{}:{n}", bracket_ipv6(&ip.to_string())))
                .collect::<Vec<_>>()
                .join(",")
        },
    },
    BrokerProperty {
        name: "max.incremental.fetch.session.cache.slots",
        aliases: &[],
        kind: int(NON_NEGATIVE),
        default: Fixed("1000"),
        doc: "Fetch sessions (KIP-227) kept per shard; 0 turns them off.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.fetch_session_cache_slots = narrow(v.int())?),
        get: |c| c.fetch_session_cache_slots.to_string(),
    },
    BrokerProperty {
        name: "message.max.bytes",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("1048588"),
        doc: "Largest record batch accepted; topics' default max.message.bytes.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| {
            c.message_max_bytes = narrow(v.int())?;
            c.log_defaults.max_message_bytes = c.message_max_bytes;
            Ok(())
        },
        get: |c| c.message_max_bytes.to_string(),
    },
    BrokerProperty {
        name: "min.insync.replicas",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("1"),
        doc: "Topics' default min.insync.replicas (and __consumer_offsets'): acks=all writes \
              and group commits need this many in-sync replicas.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.log_defaults.min_insync_replicas = narrow(v.int())?),
        get: |c| c.log_defaults.min_insync_replicas.to_string(),
    },
    BrokerProperty {
        name: "node.id",
        aliases: &[Alias {
            name: "broker.id",
            factor: 1,
        }],
        kind: int(I32),
        default: Fixed("0"),
        doc: "This broker's id.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.node_id = narrow(v.int())?),
        get: |c| c.node_id.to_string(),
    },
    BrokerProperty {
        name: "num.partitions",
        aliases: &[],
        kind: INT_POSITIVE,
        default: Fixed("1"),
        doc: "Partitions of auto-created topics and of CreateTopics with -1.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.num_partitions = narrow(v.int())?),
        get: |c| c.num_partitions.to_string(),
    },
    BrokerProperty {
        name: "num.shards",
        aliases: &[],
        kind: int(POSITIVE),
        default: Derived("one per CPU core"),
        doc: "Shards (executors, one per core).",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.shards = narrow(v.int())?),
        get: |c| c.shards.to_string(),
    },
    BrokerProperty {
        name: "offsets.retention.minutes",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("10080"),
        doc: "Committed offsets of an empty group expire after this long.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.group.offsets_retention_ms = v.int().saturating_mul(60_000)),
        get: |c| (c.group.offsets_retention_ms / 60_000).to_string(),
    },
    BrokerProperty {
        name: "offsets.topic.num.partitions",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("50"),
        doc: "Partitions of __consumer_offsets (fixed once the topic exists).",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.group.offsets_partitions = narrow(v.int().min(i32::MAX.into()))?),
        get: |c| c.group.offsets_partitions.to_string(),
    },
    kraft!(
        "offsets.topic.replication.factor",
        int(POSITIVE),
        "3",
        "Replication factor of __consumer_offsets (cluster mode: created once this many brokers are live)."
    ),
    kraft!(
        "process.roles",
        BrokerKind::List,
        "",
        "broker, controller, or both (default: both for a voter)."
    ),
    BrokerProperty {
        name: "producer.id.expiration.ms",
        aliases: &[],
        kind: long(POSITIVE),
        default: Fixed("86400000"),
        doc: "How long an idempotent producer may stay idle before the broker forgets its sequence numbers.",
        scope: ClusterWide,
        runtime: true,
        set: |c, v| Ok(c.producer_id_expiration_ms = v.int()),
        get: |c| c.producer_id_expiration_ms.to_string(),
    },
    BrokerProperty {
        name: "queued.max.request.bytes",
        aliases: &[],
        kind: long((-1, i64::MAX)),
        default: Fixed("67108864"),
        doc: "Request bytes in flight on one connection before the broker stops reading it; -1: no limit.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| {
            c.connection_max_inflight_bytes = match v.int() {
                -1 => usize::MAX,
                0 => return Err("must be positive or -1 (no limit), got 0".to_string()),
                n => narrow(n)?,
            };
            Ok(())
        },
        get: |c| c.queued_max_request_bytes(),
    },
    kraft!(
        "replica.fetch.max.bytes",
        int(POSITIVE),
        "1048576",
        "Bytes a follower asks for per partition in one fetch."
    ),
    kraft!(
        "replica.fetch.response.max.bytes",
        int(POSITIVE),
        "10485760",
        "Bytes a follower asks for in one fetch, all partitions together (the first batch comes even when larger)."
    ),
    kraft!(
        "replica.fetch.wait.max.ms",
        int(POSITIVE),
        "500",
        "How long a follower's fetch waits at the leader for new data."
    ),
    BrokerProperty {
        name: "replica.high.watermark.checkpoint.interval.ms",
        aliases: &[],
        kind: long(POSITIVE),
        default: Fixed("5000"),
        doc: "How often a replicated partition's high watermark is written, when it moved.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.hw_checkpoint_interval_ms = narrow(v.int())?),
        get: |c| c.hw_checkpoint_interval_ms.to_string(),
    },
    kraft!(
        "replica.lag.time.max.ms",
        long(POSITIVE),
        "30000",
        "A follower not caught up for this long leaves the ISR."
    ),
    BrokerProperty {
        name: "ringbroker.acks.all.fsync",
        aliases: &[],
        kind: BrokerKind::Bool,
        default: Fixed("false"),
        doc: "acks=all produce waits for an fdatasync.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.fsync_on_acks_all = v.boolean()),
        get: |c| c.fsync_on_acks_all.to_string(),
    },
    BrokerProperty {
        name: "ringbroker.disk.free.warn.bytes",
        aliases: &[],
        kind: long(NON_NEGATIVE),
        default: Fixed("1073741824"),
        doc: "Warn when the data dir's filesystem has less free space; 0 disables.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.disk_free_warn_bytes = narrow(v.int())?),
        get: |c| c.disk_free_warn_bytes.to_string(),
    },
    BrokerProperty {
        name: "ringbroker.disk.free.warn.percent",
        aliases: &[],
        kind: int((0, 100)),
        default: Fixed("5"),
        doc: "Warn when less than this percentage of the filesystem is free; 0 disables.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.disk_free_warn_percent = narrow(v.int())?),
        get: |c| c.disk_free_warn_percent.to_string(),
    },
    BrokerProperty {
        name: "ringbroker.log.io",
        aliases: &[],
        kind: BrokerKind::Text,
        default: Fixed("buffered"),
        doc: "How segment files are written: direct (O_DIRECT) or buffered (page cache).",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.log_defaults.io = parse_log_io(v.text())?),
        get: |c| log_io_name(c.log_defaults.io).to_string(),
    },
    BrokerProperty {
        name: "ringbroker.log.slow.fsync.warn.ms",
        aliases: &[],
        kind: long(NON_NEGATIVE),
        default: Fixed("500"),
        doc: "An fdatasync slower than this is logged (rate-limited); 0 disables.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.slow_fsync_warn_ms = narrow(v.int())?),
        get: |c| c.slow_fsync_warn_ms.to_string(),
    },
    BrokerProperty {
        name: "ringbroker.log.tail.cache.bytes",
        aliases: &[],
        kind: long(NON_NEGATIVE),
        default: Fixed("67108864"),
        doc: "Per shard: memory for the last written log bytes, served to fetches without a disk read; 0 turns it off.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.tail_cache_bytes = narrow(v.int())?),
        get: |c| c.tail_cache_bytes.to_string(),
    },
    BrokerProperty {
        name: "ringbroker.log.write.behind.bytes",
        aliases: &[],
        kind: long(NON_NEGATIVE),
        default: Fixed("8388608"),
        doc: "Buffered segments: ask the kernel to start writing back every this many bytes written (sync_file_range, no wait; durability unchanged); 0 never asks.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.log_defaults.write_behind_bytes = narrow(v.int())?),
        get: |c| c.log_defaults.write_behind_bytes.to_string(),
    },
    BrokerProperty {
        name: "ringbroker.metrics.listen",
        aliases: &[],
        kind: BrokerKind::Text,
        default: Fixed("127.0.0.1:9644"),
        doc: "Where shard 0 serves GET /metrics; none disables it.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| {
            c.metrics_listen = match v.text() {
                "" | "none" => None,
                addr => Some(super::listeners::parse_listener(addr)?),
            };
            Ok(())
        },
        get: |c| {
            c.metrics_listen
                .map_or_else(|| "none".to_string(), |a| a.to_string())
        },
    },
    BrokerProperty {
        name: "ringbroker.pin.shards",
        aliases: &[],
        kind: BrokerKind::Bool,
        default: Fixed("false"),
        doc: "Pin shard i to CPU i.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.pin_shards = v.boolean()),
        get: |c| c.pin_shards.to_string(),
    },
    BrokerProperty {
        name: "ringbroker.produce.memory.max.bytes",
        aliases: &[],
        kind: long(POSITIVE),
        default: Derived("a quarter of the RAM over the shards, between 16 and 256 MiB"),
        doc: "Produce request bytes one shard holds; more waits in the sockets (backpressure).",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.produce_memory_max_bytes = Some(narrow(v.int())?)),
        get: |c| c.produce_memory_limit().to_string(),
    },
    BrokerProperty {
        name: "ringbroker.request.read.timeout.ms",
        aliases: &[],
        kind: long(POSITIVE),
        default: Fixed("30000"),
        doc: "Time for the rest of a request to arrive once its first bytes did (at most connections.max.idle.ms).",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.request_read_timeout_ms = narrow(v.int())?),
        get: |c| c.request_read_timeout_ms.to_string(),
    },
    BrokerProperty {
        name: "ringbroker.shutdown.timeout.ms",
        aliases: &[],
        kind: long(POSITIVE),
        default: Fixed("15000"),
        doc: "From SIGTERM or a failure, the broker ends within this; past it, it exits non-zero at once.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.shutdown_timeout_ms = narrow(v.int())?),
        get: |c| c.shutdown_timeout_ms.to_string(),
    },
    BrokerProperty {
        name: "socket.request.max.bytes",
        aliases: &[],
        kind: int(POSITIVE),
        default: Fixed("104857600"),
        doc: "Largest request frame accepted.",
        scope: ReadOnly,
        runtime: false,
        set: |c, v| Ok(c.socket_request_max_bytes = narrow(v.int())?),
        get: |c| c.socket_request_max_bytes.to_string(),
    },
];

/// The property named `name` (its name or an alias).
pub fn broker_property(name: &str) -> Option<&'static BrokerProperty> {
    BROKER_PROPERTIES.iter().find(|p| p.is_named(name))
}

impl BrokerConfig {
    /// A KRaft property's value as given, or its default (as listed by `--check-config`).
    pub fn cluster_property(&self, name: &str) -> String {
        if let Some(v) = self.cluster.get(name) {
            return v.clone();
        }
        match broker_property(name).map(|p| p.default) {
            Some(Fixed(v)) => v.to_string(),
            _ => String::new(),
        }
    }
}
