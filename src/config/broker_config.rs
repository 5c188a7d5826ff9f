//! The broker's configuration as the broker uses it: typed fields with their defaults. The
//! properties that set them, by Kafka name, are the table in `broker_properties`; reading a
//! file or `--set` goes through it (`load`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::group_config::GroupConfig;
use crate::health::slow_fsync::DEFAULT_SLOW_FSYNC_WARN_MS;
use crate::log::LogConfig;

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

/// Kafka's `fetch.max.bytes` default, 55 MiB.
pub const DEFAULT_FETCH_MAX_BYTES: usize = 57_671_680;
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
    pub(super) advertised_explicit: bool,
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
    pub(super) cluster: BTreeMap<&'static str, String>,
    /// Canonical names of the properties set explicitly (file, `--set`, flags), for
    /// `serve --check-config`.
    pub(super) explicit: BTreeSet<&'static str>,
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

    /// `listeners` or `advertised.listeners` in full as given (several listeners), if set.
    pub fn cluster_listeners(&self, name: &str) -> Option<String> {
        self.cluster.get(name).cloned()
    }

    /// Whether `controller.quorum.voters` is set: the broker is part of a cluster.
    pub fn is_cluster_mode(&self) -> bool {
        self.cluster.contains_key("controller.quorum.voters")
    }

    /// Whether the property (by canonical name) was set rather than left at its default.
    pub fn is_explicit(&self, canonical_name: &str) -> bool {
        self.explicit.contains(canonical_name)
    }
}

/// A quarter of `total` RAM over `shards`, within [16 MiB, 256 MiB].
pub(super) fn default_produce_memory(total: Option<u64>, shards: usize) -> usize {
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
