//! The broker's one startup line: version, the settings that matter most when reading a log
//! later, and what recovery found across every shard. One event with structured fields, so
//! that `--log-format json` gives each its own key.

use std::sync::Mutex;
use std::time::Instant;

use crate::config::BrokerConfig;
use crate::partition::recovery_summary::RecoverySummary;

/// The settings of the startup line, taken before the shards start.
pub(super) struct StartupInfo {
    started: Instant,
    node_id: i32,
    listeners: String,
    advertised: String,
    data_dir: String,
    shards: usize,
    pinned: bool,
    metrics: String,
    acks_all_fsync: bool,
    log_io: crate::runtime::FileIo,
    flush_messages: i64,
    flush_ms: i64,
    retention_ms: i64,
    retention_bytes: i64,
    segment_bytes: u64,
    slow_fsync_warn_ms: u64,
    /// Shards add their recovery here as they finish loading.
    recovery: Mutex<RecoverySummary>,
}

impl StartupInfo {
    pub(super) fn new(config: &BrokerConfig, started: Instant) -> Self {
        let log = &config.log_defaults;
        StartupInfo {
            started,
            node_id: config.node_id,
            listeners: config.listen.to_string(),
            advertised: format!("{}:{}", config.advertised_host, config.advertised_port),
            data_dir: config.data_dir.display().to_string(),
            shards: config.shards,
            pinned: config.pin_shards,
            metrics: config
                .metrics_listen
                .map_or_else(|| "none".to_string(), |a| a.to_string()),
            acks_all_fsync: config.fsync_on_acks_all,
            log_io: log.io,
            flush_messages: i64::try_from(log.flush_messages).unwrap_or(i64::MAX),
            flush_ms: log.flush_ms,
            retention_ms: log.retention_ms,
            retention_bytes: log.retention_bytes,
            segment_bytes: log.segment_bytes,
            slow_fsync_warn_ms: config.slow_fsync_warn_ms,
            recovery: Mutex::new(RecoverySummary::default()),
        }
    }

    /// Adds one shard's recovery (startup only: the lock is never on a request path).
    pub(super) fn add_shard(&self, shard: &RecoverySummary) {
        match self.recovery.lock() {
            Ok(mut r) => r.merge(shard),
            Err(poisoned) => poisoned.into_inner().merge(shard),
        }
    }

    /// Logs the startup line; called once, when the last shard is ready.
    pub(super) fn log(&self) {
        let r = match self.recovery.lock() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            node_id = self.node_id,
            listeners = %self.listeners,
            advertised = %self.advertised,
            data_dir = %self.data_dir,
            shards = self.shards,
            pinned = self.pinned,
            metrics = %self.metrics,
            acks_all_fsync = self.acks_all_fsync,
            log_io = ?self.log_io,
            flush_messages = self.flush_messages,
            flush_ms = self.flush_ms,
            retention_ms = self.retention_ms,
            retention_bytes = self.retention_bytes,
            segment_bytes = self.segment_bytes,
            slow_fsync_warn_ms = self.slow_fsync_warn_ms,
            partitions = r.partitions,
            offline_partitions = r.offline_partitions,
            segments = r.segments,
            log_bytes = r.bytes,
            unclean_logs = r.unclean_logs,
            scanned_segments = r.scanned_segments,
            scanned_bytes = r.scanned_bytes,
            rebuilt_indexes = r.rebuilt_indexes,
            truncated_logs = r.truncated_logs,
            truncated_bytes = r.truncated_bytes,
            removed_segments = r.removed_segments,
            producer_snapshots = r.producer_snapshots,
            producer_batches_replayed = r.producer_batches_replayed,
            recovery_ms = r.took.as_millis() as u64,
            startup_ms = self.started.elapsed().as_millis() as u64,
            "ringbroker started"
        );
    }
}
