//! Broker configuration: Kafka's property names, from a TOML file plus command-line flags.
//!
//! A TOML file may spell a property as a quoted key (`"log.dirs" = "/data"`) or as a dotted key
//! (`log.dirs = "/data"`, which TOML reads as nested tables): both are flattened back to the
//! Kafka name. Unknown properties are an error, so a typo does not silently fall back to a
//! default.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::group::api::GroupConfig;
use crate::health::slow_fsync::DEFAULT_SLOW_FSYNC_WARN_MS;
use crate::log::LogConfig;
use crate::protocol::record_batch::TimestampType;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("unknown property `{0}`")]
    UnknownProperty(String),
    #[error("property `{name}`: {reason}")]
    BadValue { name: String, reason: String },
}

/// Where the metrics endpoint listens unless `ringbroker.metrics.listen` says otherwise
/// (Redpanda's admin port).
pub const DEFAULT_METRICS_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    9644,
));
/// `max.connections` unless set. Kafka's default is 2147483647 (no limit); a finite default
/// bounds what a connection storm can cost (about 10 KiB of broker memory per idle
/// connection, see tests/server_limits.rs) and still exceeds the ~28,000 ephemeral ports one
/// client address can use.
pub const DEFAULT_MAX_CONNECTIONS: usize = 65_536;

/// Kafka's `log.flush.offset.checkpoint.interval.ms` default: 1 minute.
pub const DEFAULT_CHECKPOINT_INTERVAL_MS: u64 = 60_000;
/// Kafka's `replica.high.watermark.checkpoint.interval.ms` default: 5 seconds.
pub const DEFAULT_HW_CHECKPOINT_INTERVAL_MS: u64 = 5000;
/// Kafka's `connections.max.idle.ms` default: 10 minutes.
pub const DEFAULT_CONNECTIONS_MAX_IDLE_MS: i64 = 600_000;
/// `ringbroker.request.read.timeout.ms` unless set: Kafka clients give up on a request 30 s
/// after sending it (the Java client's `request.timeout.ms`), so a request still arriving
/// after that is one its sender has abandoned.
pub const DEFAULT_REQUEST_READ_TIMEOUT_MS: u64 = 30_000;
/// `ringbroker.shutdown.timeout.ms` unless set: a stop answers long polls and pending acks at
/// once and gives slow clients a few seconds, so a stop still running after this is stuck;
/// below a supervisor's usual kill timeout (systemd: 90 s), so the broker names what hung.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 15_000;

/// Kafka's `fetch.max.bytes` default, 55 MiB, and its smallest accepted value.
pub const DEFAULT_FETCH_MAX_BYTES: usize = 57_671_680;
const MIN_FETCH_MAX_BYTES: i64 = 1024;
/// `ringbroker.disk.free.warn.bytes` unless set (1 GiB): below this the data dir is about to
/// fill, and appends will fail with a full disk.
pub const DEFAULT_DISK_FREE_WARN_BYTES: u64 = 1 << 30;
/// `ringbroker.disk.free.warn.percent` unless set (Redpanda's
/// `storage_space_alert_free_threshold_percent` is 5 as well).
pub const DEFAULT_DISK_FREE_WARN_PERCENT: u64 = 5;

/// Cap of the default `ringbroker.produce.memory.max.bytes` (per shard). A shard's appends
/// drain at disk speed, and a group commit takes milliseconds: even at 1 GB/s, 10 ms of
/// appends is 10 MB, so buffering more than this adds latency, not throughput.
pub const PRODUCE_MEMORY_DEFAULT_CAP: usize = 256 << 20;
/// Floor of the default, so that small machines still pipeline a few large requests.
pub const PRODUCE_MEMORY_DEFAULT_FLOOR: usize = 16 << 20;

/// Everything the broker process is configured with.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// `node.id`
    pub node_id: i32,
    /// `listeners`: the address every shard listens on (one listener per shard, SO_REUSEPORT).
    pub listen: SocketAddr,
    /// `advertised.listeners`: host and port given to clients in Metadata.
    pub advertised_host: String,
    pub advertised_port: u16,
    /// Whether `advertised.listeners` was given; if not, it follows `listeners` (Kafka's
    /// default), whatever order the two are set in.
    advertised_explicit: bool,
    /// `log.dirs` (the first directory; one data directory per broker for now).
    pub data_dir: PathBuf,
    /// `num.shards` (ringbroker): executors, one per core by default.
    pub shards: usize,
    /// `ringbroker.pin.shards`: pin shard i to CPU i.
    pub pin_shards: bool,
    /// `num.partitions`: partitions of auto-created topics and CreateTopics with -1.
    pub num_partitions: i32,
    /// `auto.create.topics.enable`
    pub auto_create_topics: bool,
    /// `message.max.bytes`: largest record batch accepted (topic `max.message.bytes` default).
    pub message_max_bytes: usize,
    /// `fetch.max.bytes`: the most record bytes in one Fetch response (Kafka: 55 MiB); a
    /// request's own `max_bytes` is capped by it. The first batch still comes whole (KIP-74).
    pub fetch_max_bytes: usize,
    /// `max.incremental.fetch.session.cache.slots`: fetch sessions (KIP-227) kept per shard
    /// (Kafka: per broker, 1000); 0 turns sessions off.
    pub fetch_session_cache_slots: usize,
    /// `socket.request.max.bytes`: largest request frame; checked before allocating.
    pub socket_request_max_bytes: usize,
    /// `queued.max.request.bytes` per connection: requests in flight on one connection before
    /// the broker stops reading its socket (backpressure).
    pub connection_max_inflight_bytes: usize,
    /// `ringbroker.acks.all.fsync`: acks=all produce waits for an fdatasync (group-committed).
    pub fsync_on_acks_all: bool,
    /// `ringbroker.log.tail.cache.bytes`: per shard, memory for the last written bytes of its
    /// logs (direct I/O), read by fetches near the end without a disk read; 0 turns it off.
    pub tail_cache_bytes: usize,
    /// `log.flush.offset.checkpoint.interval.ms`: how often every partition's recovery point
    /// and producer state are written (a roll writes them too).
    pub checkpoint_interval_ms: u64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often a replicated partition's
    /// HW is written when it moved, so a restarted broker serves consumers up to it at once.
    pub hw_checkpoint_interval_ms: u64,
    /// `connections.max.idle.ms`: a connection with no request being read and none in flight
    /// for this long is closed; negative (Kafka: -1) never closes one.
    pub connections_max_idle_ms: i64,
    /// `ringbroker.request.read.timeout.ms`: once the first bytes of a request arrived, the
    /// rest must arrive within this (or within `connections.max.idle.ms` if that is shorter).
    pub request_read_timeout_ms: u64,
    /// `ringbroker.shutdown.timeout.ms`: from SIGTERM (or a failure), the process ends within
    /// this; past it, it exits non-zero at once, naming what was still open.
    pub shutdown_timeout_ms: u64,
    /// `max.connections`: open connections across all shards; more are closed at once.
    pub max_connections: usize,
    /// `max.connections.per.ip`: open connections from one address (Kafka's default,
    /// 2147483647, means no limit).
    pub max_connections_per_ip: u64,
    /// `max.connections.per.ip.overrides`: per-address limits that replace the one above
    /// (`127.0.0.1:200,10.0.0.5:5`; IP addresses only, 0 refuses the address).
    pub max_connections_per_ip_overrides: BTreeMap<IpAddr, u32>,
    /// `ringbroker.produce.memory.max.bytes`: bytes of Produce requests one shard holds
    /// before its connections stop reading Produce requests; `None` until resolved from the
    /// machine's memory (see [`BrokerConfig::produce_memory_limit`]).
    pub produce_memory_max_bytes: Option<usize>,
    /// Topic defaults from the `log.*` broker properties.
    pub log_defaults: LogConfig,
    /// Consumer-group coordinator settings (`offsets.*`, `group.*`).
    pub group: GroupConfig,
    /// `producer.id.expiration.ms`: an idempotent producer idle this long is forgotten.
    pub producer_id_expiration_ms: i64,
    /// `ringbroker.metrics.listen`: where shard 0 serves `GET /metrics`; `None` disables it.
    pub metrics_listen: Option<SocketAddr>,
    /// `ringbroker.log.slow.fsync.warn.ms`: fdatasyncs slower than this are logged; 0 = never.
    pub slow_fsync_warn_ms: u64,
    /// `ringbroker.disk.free.warn.bytes`: warn when the data dir's filesystem has less free
    /// space than this; 0 disables this threshold.
    pub disk_free_warn_bytes: u64,
    /// `ringbroker.disk.free.warn.percent`: warn when less than this percentage of the
    /// filesystem is free; 0 disables this threshold. Either threshold crossed warns.
    pub disk_free_warn_percent: u64,
    /// The KRaft properties as given (`controller.quorum.voters`, `process.roles`, ...; also
    /// `listeners` and `advertised.listeners` in full): parsed together by
    /// `controller::kraft_config` when the broker starts, because their rules span several
    /// properties. Without `controller.quorum.voters` they change nothing (single node).
    cluster: BTreeMap<&'static str, String>,
    /// Canonical names of the properties set explicitly (file, `--set`, flags), for
    /// `serve --check-config`.
    explicit: BTreeSet<&'static str>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let listen: SocketAddr = ([127, 0, 0, 1], 9092).into();
        BrokerConfig {
            node_id: 0,
            listen,
            advertised_host: "127.0.0.1".to_string(),
            advertised_port: 9092,
            advertised_explicit: false,
            data_dir: PathBuf::from("./data"),
            shards: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            pin_shards: false,
            num_partitions: 1,
            auto_create_topics: true,
            message_max_bytes: 1_048_588,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            fetch_session_cache_slots: 1000,
            socket_request_max_bytes: 104_857_600,
            connection_max_inflight_bytes: 64 << 20,
            fsync_on_acks_all: false,
            tail_cache_bytes: crate::log::tail_cache::DEFAULT_SHARD_BUDGET,
            checkpoint_interval_ms: DEFAULT_CHECKPOINT_INTERVAL_MS,
            hw_checkpoint_interval_ms: DEFAULT_HW_CHECKPOINT_INTERVAL_MS,
            connections_max_idle_ms: DEFAULT_CONNECTIONS_MAX_IDLE_MS,
            request_read_timeout_ms: DEFAULT_REQUEST_READ_TIMEOUT_MS,
            shutdown_timeout_ms: DEFAULT_SHUTDOWN_TIMEOUT_MS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: i32::MAX as u64,
            max_connections_per_ip_overrides: BTreeMap::new(),
            produce_memory_max_bytes: None,
            log_defaults: LogConfig::default(),
            group: GroupConfig::default(),
            producer_id_expiration_ms:
                crate::idempotence::producer_state::DEFAULT_PRODUCER_ID_EXPIRATION_MS,
            metrics_listen: Some(DEFAULT_METRICS_LISTEN),
            slow_fsync_warn_ms: DEFAULT_SLOW_FSYNC_WARN_MS,
            disk_free_warn_bytes: DEFAULT_DISK_FREE_WARN_BYTES,
            disk_free_warn_percent: DEFAULT_DISK_FREE_WARN_PERCENT,
            cluster: BTreeMap::new(),
            explicit: BTreeSet::new(),
        }
    }
}

impl BrokerConfig {
    /// Reads a TOML file of Kafka properties on top of the defaults.
    pub fn from_file(path: &Path) -> Result<BrokerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = BrokerConfig::default();
        config.apply_toml(&text).map_err(|e| match e {
            ConfigError::Toml { message, .. } => ConfigError::Toml {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        })?;
        Ok(config)
    }

    /// Applies the properties of a TOML document.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Toml {
                path: PathBuf::new(),
                message: e.to_string(),
            })?;
        let mut flat = BTreeMap::new();
        flatten("", &toml::Value::Table(table), &mut flat);
        for (name, value) in flat {
            self.set(&name, &value)?;
        }
        Ok(())
    }

    /// True unless `advertised.listeners` was set: clients are told the listen address.
    pub fn advertised_follows_listeners(&self) -> bool {
        !self.advertised_explicit
    }

    /// The per-shard produce memory limit: `ringbroker.produce.memory.max.bytes` if set, else
    /// a quarter of the machine's RAM shared by the shards, between 16 and 256 MiB. A quarter
    /// leaves the rest to the page cache (recent reads), fetch responses and everything else.
    pub fn produce_memory_limit(&self) -> usize {
        self.produce_memory_max_bytes
            .unwrap_or_else(|| default_produce_memory(total_memory_bytes(), self.shards))
    }

    /// How long a connection may go without a request (`connections.max.idle.ms`); `None`:
    /// forever.
    pub fn connection_idle_timeout(&self) -> Option<Duration> {
        u64::try_from(self.connections_max_idle_ms)
            .ok()
            .map(Duration::from_millis)
    }

    /// How long the rest of a request may take to arrive once its first bytes did: the read
    /// timeout, and never more than the idle timeout (a stalled request is an idle
    /// connection to Kafka, which closes a socket with no activity for that long).
    pub fn request_read_timeout(&self) -> Duration {
        let read = Duration::from_millis(self.request_read_timeout_ms);
        self.connection_idle_timeout()
            .map_or(read, |idle| read.min(idle))
    }

    /// `queued.max.request.bytes` as Kafka writes it: -1 for no limit.
    pub fn queued_max_request_bytes(&self) -> String {
        if self.connection_max_inflight_bytes == usize::MAX {
            "-1".to_string()
        } else {
            self.connection_max_inflight_bytes.to_string()
        }
    }

    /// Sets the data directory (`--data-dir`: a path, which need not be UTF-8 as a property
    /// value would).
    pub fn set_data_dir(&mut self, dir: PathBuf) {
        self.data_dir = dir;
        self.explicit.insert("log.dirs");
    }

    /// The KRaft properties (Kafka's names) as `controller::kraft_config` reads them: what was
    /// set, plus `node.id`. Empty of `controller.quorum.voters` in single-node mode.
    pub fn cluster_properties(&self) -> BTreeMap<String, String> {
        let mut props: BTreeMap<String, String> = self
            .cluster
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        props.insert("node.id".to_string(), self.node_id.to_string());
        props
    }

    /// A KRaft property's value as given, or its default (as listed by `--check-config`).
    pub fn cluster_property(&self, name: &str) -> String {
        if let Some(v) = self.cluster.get(name) {
            return v.clone();
        }
        CLUSTER_PROPERTY_DEFAULTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
            .unwrap_or_default()
    }

    /// `listeners` or `advertised.listeners` in full as given (several listeners), if set.
    pub fn cluster_listeners(&self, name: &str) -> Option<String> {
        self.cluster.get(name).cloned()
    }

    /// Whether `controller.quorum.voters` is set: the broker is part of a cluster.
    pub fn is_cluster_mode(&self) -> bool {
        self.cluster.contains_key("controller.quorum.voters")
    }

    fn controller_listener_names(&self) -> Vec<String> {
        self.cluster_property("controller.listener.names")
            .split(',')
            .map(|n| n.trim().to_ascii_uppercase())
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// Sets the client listener (`serve --listen`): the controller listeners named in
    /// `listeners` stay, every other entry gives way to `addr`.
    pub fn set_client_listener(&mut self, addr: &str) -> Result<(), ConfigError> {
        let names = self.controller_listener_names();
        let current = self.cluster.get("listeners").cloned().unwrap_or_default();
        let (controllers, others): (Vec<&str>, Vec<&str>) = current
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .partition(|e| listener_name(e).is_some_and(|n| names.contains(&n)));
        if controllers.is_empty() {
            return self.set("listeners", addr);
        }
        // Next to named listeners the client one needs its name too (KRaft's syntax): the
        // name of the entry it replaces, else PLAINTEXT.
        let addr = addr.trim();
        let client = if addr.contains("://") {
            addr.to_string()
        } else {
            let name = others
                .iter()
                .find_map(|e| e.split_once("://").map(|(n, _)| n.trim()))
                .unwrap_or("PLAINTEXT");
            format!("{name}://{addr}")
        };
        let value = std::iter::once(client.as_str())
            .chain(controllers)
            .collect::<Vec<_>>()
            .join(",");
        self.set("listeners", &value)
    }

    /// The first entry of a listener list that is not a controller listener: the one
    /// clients use (`listeners=PLAINTEXT://...,CONTROLLER://...`).
    fn client_listener<'a>(&self, value: &'a str) -> &'a str {
        let names = self.controller_listener_names();
        let entries = || value.split(',').map(str::trim).filter(|e| !e.is_empty());
        entries()
            .find(|e| listener_name(e).is_none_or(|n| !names.contains(&n)))
            .or_else(|| entries().next())
            .unwrap_or(value)
    }

    fn set_listeners(&mut self) -> Result<(), String> {
        if let Some(value) = self.cluster.get("listeners").cloned() {
            self.listen = parse_listener(self.client_listener(&value))?;
            if !self.advertised_explicit {
                self.advertised_host = self.listen.ip().to_string();
                self.advertised_port = self.listen.port();
            }
        }
        if let Some(value) = self.cluster.get("advertised.listeners").cloned() {
            let (host, port) = parse_host_port(self.client_listener(&value))?;
            self.advertised_host = host;
            self.advertised_port = port;
            self.advertised_explicit = true;
        }
        Ok(())
    }

    /// Whether the property (by canonical name) was set rather than left at its default.
    pub fn is_explicit(&self, canonical_name: &str) -> bool {
        self.explicit.contains(canonical_name)
    }

    /// Sets one property from its string form (as in server.properties).
    ///
    /// Only names of [`crate::config_listing::BROKER_PROPERTIES`] (or their aliases) are
    /// accepted, so that every settable property is listed by `serve --check-config`.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let canonical = crate::config_listing::canonical_name(name)
            .ok_or_else(|| ConfigError::UnknownProperty(name.to_string()))?;
        self.set_known(name, value)?;
        self.explicit.insert(canonical);
        Ok(())
    }

    fn set_known(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let bad = |reason: String| ConfigError::BadValue {
            name: name.to_string(),
            reason,
        };
        let int = |v: &str| -> Result<i64, ConfigError> {
            v.trim()
                .parse::<i64>()
                .map_err(|_| bad(format!("expected an integer, got {v:?}")))
        };
        let positive = |v: &str| -> Result<i64, ConfigError> {
            let n = int(v)?;
            if n <= 0 {
                return Err(bad(format!("must be positive, got {n}")));
            }
            Ok(n)
        };
        let boolean = |v: &str| -> Result<bool, ConfigError> {
            match v.trim() {
                "true" => Ok(true),
                "false" => Ok(false),
                other => Err(bad(format!("expected true or false, got {other:?}"))),
            }
        };
        let non_negative = |v: &str| -> Result<u64, ConfigError> {
            let n = int(v)?;
            u64::try_from(n).map_err(|_| bad(format!("must not be negative, got {n}")))
        };
        match name {
            "node.id" | "broker.id" => self.node_id = narrow(int(value)?).map_err(bad)?,
            "listeners" | "advertised.listeners" => {
                let previous = self.cluster.insert(cluster_key(name), value.trim().to_string());
                if let Err(e) = self.set_listeners() {
                    match previous {
                        Some(p) => self.cluster.insert(cluster_key(name), p),
                        None => self.cluster.remove(name),
                    };
                    return Err(bad(e));
                }
            }
            "controller.listener.names" => {
                self.cluster.insert(cluster_key(name), value.trim().to_string());
                self.set_listeners().map_err(bad)?;
            }
            "broker.heartbeat.interval.ms"
            | "broker.session.timeout.ms"
            | "controller.quorum.election.timeout.ms"
            | "default.replication.factor"
            | "offsets.topic.replication.factor"
            | "replica.fetch.max.bytes"
            | "replica.fetch.response.max.bytes"
            | "replica.fetch.wait.max.ms"
            | "replica.lag.time.max.ms" => {
                positive(value)?;
                self.cluster.insert(cluster_key(name), value.trim().to_string());
            }
            "process.roles" | "controller.quorum.voters" | "cluster.id" | "broker.rack" => {
                // Empty is "not set" (the value `--check-config` lists for an unset one).
                match value.trim() {
                    "" => self.cluster.remove(name),
                    v => self.cluster.insert(cluster_key(name), v.to_string()),
                };
            }
            "log.dirs" | "log.dir" => {
                // Kafka's list syntax: comma-separated, blanks and empty entries ignored.
                let dirs: Vec<&str> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .collect();
                match dirs.as_slice() {
                    [] => return Err(bad("empty directory".to_string())),
                    [one] => self.data_dir = PathBuf::from(one),
                    several => {
                        return Err(bad(format!(
                            "{} directories given ({}); ringbroker serves one data directory \
                             per broker (no JBOD yet): give one",
                            several.len(),
                            several.join(", ")
                        )))
                    }
                }
            }
            "num.shards" => self.shards = positive(value)? as usize,
            "ringbroker.pin.shards" => self.pin_shards = boolean(value)?,
            "num.partitions" => self.num_partitions = narrow(positive(value)?).map_err(bad)?,
            "auto.create.topics.enable" => self.auto_create_topics = boolean(value)?,
            "message.max.bytes" => {
                self.message_max_bytes = positive(value)? as usize;
                self.log_defaults.max_message_bytes = self.message_max_bytes;
            }
            "fetch.max.bytes" => {
                let n = int(value)?;
                if n < MIN_FETCH_MAX_BYTES {
                    return Err(bad(format!(
                        "must be at least {MIN_FETCH_MAX_BYTES} (as in Kafka), got {n}"
                    )));
                }
                self.fetch_max_bytes = usize::try_from(n).map_err(|e| bad(e.to_string()))?;
            }
            "max.incremental.fetch.session.cache.slots" => {
                self.fetch_session_cache_slots =
                    usize::try_from(int(value)?).map_err(|e| bad(e.to_string()))?;
            }
            "socket.request.max.bytes" => self.socket_request_max_bytes = positive(value)? as usize,
            "queued.max.request.bytes" => {
                self.connection_max_inflight_bytes = match int(value)? {
                    -1 => usize::MAX,
                    n if n > 0 => usize::try_from(n).map_err(|e| bad(e.to_string()))?,
                    n => return Err(bad(format!("must be positive or -1 (no limit), got {n}"))),
                }
            }
            "ringbroker.acks.all.fsync" => self.fsync_on_acks_all = boolean(value)?,
            "ringbroker.log.tail.cache.bytes" => {
                self.tail_cache_bytes =
                    usize::try_from(int(value)?).map_err(|e| bad(e.to_string()))?
            }
            "ringbroker.log.io" => {
                self.log_defaults.io = match value {
                    "direct" => crate::runtime::FileIo::Direct,
                    "buffered" => crate::runtime::FileIo::Buffered,
                    other => {
                        return Err(bad(format!(
                            "must be `direct` (O_DIRECT segment writes) or `buffered` (page cache), got `{other}`"
                        )))
                    }
                }
            }
            "log.flush.offset.checkpoint.interval.ms" => {
                self.checkpoint_interval_ms = positive(value)? as u64
            }
            "replica.high.watermark.checkpoint.interval.ms" => {
                self.hw_checkpoint_interval_ms = positive(value)? as u64
            }
            "connections.max.idle.ms" => {
                // Kafka takes any value and a negative one disables the check; 0 would close
                // every connection between two requests.
                self.connections_max_idle_ms = match int(value)? {
                    0 => return Err(bad("must be positive, or -1 (never close)".to_string())),
                    n => n,
                }
            }
            "ringbroker.request.read.timeout.ms" => {
                self.request_read_timeout_ms = positive(value)? as u64
            }
            "ringbroker.shutdown.timeout.ms" => {
                self.shutdown_timeout_ms = positive(value)? as u64
            }
            "ringbroker.metrics.listen" => {
                self.metrics_listen = match value.trim() {
                    "" | "none" => None,
                    v => Some(parse_listener(v).map_err(bad)?),
                };
            }
            "max.connections" => self.max_connections = positive(value)? as usize,
            "max.connections.per.ip" => self.max_connections_per_ip = positive(value)? as u64,
            "max.connections.per.ip.overrides" => {
                self.max_connections_per_ip_overrides = parse_ip_overrides(value).map_err(bad)?
            }
            "ringbroker.produce.memory.max.bytes" => {
                self.produce_memory_max_bytes = Some(positive(value)? as usize)
            }
            "log.segment.bytes" => self.log_defaults.segment_bytes = positive(value)? as u64,
            "log.roll.ms" => self.log_defaults.segment_ms = positive(value)?,
            "log.roll.hours" => {
                self.log_defaults.segment_ms = scale(positive(value)?, 3_600_000).map_err(bad)?
            }
            "log.retention.ms" => self.log_defaults.retention_ms = int(value)?,
            "log.retention.minutes" => {
                self.log_defaults.retention_ms = scale(int(value)?, 60_000).map_err(bad)?
            }
            "log.retention.hours" => {
                self.log_defaults.retention_ms = scale(int(value)?, 3_600_000).map_err(bad)?
            }
            "log.retention.bytes" => self.log_defaults.retention_bytes = int(value)?,
            "log.index.interval.bytes" => {
                self.log_defaults.index_interval_bytes = narrow(positive(value)?).map_err(bad)?
            }
            "log.flush.interval.messages" => {
                self.log_defaults.flush_messages = positive(value)? as u64
            }
            "log.flush.interval.ms" => self.log_defaults.flush_ms = positive(value)?,
            "log.message.timestamp.type" => {
                self.log_defaults.message_timestamp_type =
                    parse_timestamp_type(value).map_err(bad)?
            }
            "offsets.topic.num.partitions" => {
                self.group.offsets_partitions = positive(value)?.min(i64::from(i32::MAX)) as i32
            }
            "group.min.session.timeout.ms" => {
                self.group.min_session_timeout_ms = non_negative_i32(int(value)?).map_err(bad)?
            }
            "group.max.session.timeout.ms" => {
                self.group.max_session_timeout_ms = non_negative_i32(int(value)?).map_err(bad)?
            }
            "group.initial.rebalance.delay.ms" => {
                self.group.initial_rebalance_delay_ms =
                    non_negative_i32(int(value)?).map_err(bad)?
            }
            "group.max.size" => self.group.max_size = positive(value)? as usize,
            "offsets.retention.minutes" => {
                self.group.offsets_retention_ms = positive(value)?.saturating_mul(60_000)
            }
            "producer.id.expiration.ms" => self.producer_id_expiration_ms = positive(value)?,
            "ringbroker.log.slow.fsync.warn.ms" => self.slow_fsync_warn_ms = non_negative(value)?,
            "ringbroker.disk.free.warn.bytes" => self.disk_free_warn_bytes = non_negative(value)?,
            "ringbroker.disk.free.warn.percent" => {
                let n = non_negative(value)?;
                if n > 100 {
                    return Err(bad(format!("must be between 0 and 100, got {n}")));
                }
                self.disk_free_warn_percent = n;
            }
            // A name of the table with no arm here: caught by config_listing's tests.
            _ => return Err(ConfigError::UnknownProperty(name.to_string())),
        }
        Ok(())
    }
}

/// Defaults of the KRaft properties, as Kafka lists them (empty: not set).
pub const CLUSTER_PROPERTY_DEFAULTS: &[(&str, &str)] = &[
    ("broker.heartbeat.interval.ms", "2000"),
    ("broker.rack", ""),
    ("broker.session.timeout.ms", "9000"),
    ("cluster.id", ""),
    ("controller.listener.names", "CONTROLLER"),
    ("controller.quorum.election.timeout.ms", "1000"),
    ("controller.quorum.voters", ""),
    ("default.replication.factor", "1"),
    ("offsets.topic.replication.factor", "3"),
    ("process.roles", ""),
    ("replica.fetch.max.bytes", "1048576"),
    ("replica.fetch.response.max.bytes", "10485760"),
    ("replica.fetch.wait.max.ms", "500"),
    ("replica.lag.time.max.ms", "30000"),
];

/// The `'static` name under which a KRaft property is kept.
fn cluster_key(name: &str) -> &'static str {
    CLUSTER_PROPERTY_DEFAULTS
        .iter()
        .map(|(n, _)| *n)
        .chain(["listeners", "advertised.listeners"])
        .find(|n| *n == name)
        .unwrap_or("listeners")
}

/// A quarter of `total` RAM over `shards`, within [16 MiB, 256 MiB].
fn default_produce_memory(total: Option<u64>, shards: usize) -> usize {
    let Some(total) = total else {
        return PRODUCE_MEMORY_DEFAULT_CAP;
    };
    let share = total / 4 / shards.max(1) as u64;
    usize::try_from(share)
        .unwrap_or(usize::MAX)
        .clamp(PRODUCE_MEMORY_DEFAULT_FLOOR, PRODUCE_MEMORY_DEFAULT_CAP)
}

/// Physical memory of the machine (sysinfo(2)); `None` if it cannot be read.
fn total_memory_bytes() -> Option<u64> {
    // SAFETY: sysinfo fills a struct we own; it is zeroed plain data.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointer is valid for the call.
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return None;
    }
    (info.totalram as u64).checked_mul(u64::from(info.mem_unit.max(1)))
}

/// Kafka's `max.connections.per.ip.overrides`: `host:count` pairs separated by commas. Only
/// IP addresses are accepted (Kafka also resolves host names; a name here is an error rather
/// than a lookup at startup). IPv6 addresses may be bracketed: `[::1]:10` or `::1:10`.
fn parse_ip_overrides(v: &str) -> Result<BTreeMap<IpAddr, u32>, String> {
    let mut out = BTreeMap::new();
    for pair in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (host, count) = pair
            .rsplit_once(':')
            .ok_or_else(|| format!("expected IP:count, got {pair:?}"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ip: IpAddr = host
            .parse()
            .map_err(|_| format!("{host:?} is not an IP address (host names are not supported)"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| format!("bad connection count in {pair:?}"))?;
        out.insert(ip.to_canonical(), count);
    }
    Ok(out)
}

/// `n` in a narrower integer type; a cast would wrap a large value into a wrong (even
/// negative) one.
fn narrow<T: TryFrom<i64>>(n: i64) -> Result<T, String> {
    T::try_from(n).map_err(|_| format!("out of range: {n}"))
}

/// `n` units of `factor` ms (hours, minutes to ms) without overflow.
fn scale(n: i64, factor: i64) -> Result<i64, String> {
    n.checked_mul(factor)
        .ok_or_else(|| format!("{n} is too large"))
}

fn non_negative_i32(n: i64) -> Result<i32, String> {
    i32::try_from(n)
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| format!("must be between 0 and {}, got {n}", i32::MAX))
}

fn parse_timestamp_type(v: &str) -> Result<TimestampType, String> {
    match v.trim() {
        "CreateTime" => Ok(TimestampType::CreateTime),
        "LogAppendTime" => Ok(TimestampType::LogAppendTime),
        other => Err(format!(
            "expected CreateTime or LogAppendTime, got {other:?}"
        )),
    }
}

/// `PLAINTEXT://host:port` or `host:port` (the first listener when several are given).
/// The name of a `NAME://host:port` listener entry, upper-cased (`None` for a bare address).
fn listener_name(entry: &str) -> Option<String> {
    entry
        .split_once("://")
        .map(|(name, _)| name.trim().to_ascii_uppercase())
}

fn parse_listener(v: &str) -> Result<SocketAddr, String> {
    let (host, port) = parse_host_port(v)?;
    let host = if host.is_empty() {
        "0.0.0.0".to_string()
    } else {
        host
    };
    (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port} resolves to no address"))
}

fn parse_host_port(v: &str) -> Result<(String, u16), String> {
    let first = v.split(',').next().unwrap_or("").trim();
    let without_scheme = first.split_once("://").map_or(first, |(_, rest)| rest);
    let (host, port) = without_scheme
        .rsplit_once(':')
        .ok_or_else(|| format!("expected host:port, got {v:?}"))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("bad port in {v:?}"))?;
    Ok((host.trim_matches(['[', ']']).to_string(), port))
}

fn flatten(prefix: &str, value: &toml::Value, out: &mut BTreeMap<String, String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&name, v, out);
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

mod property_kind;
pub mod topic_properties;
pub use topic_properties::{topic_log_config, topic_property_value, TOPIC_PROPERTIES};

#[cfg(test)]
mod tests;
