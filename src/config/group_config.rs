//! The group coordinator's settings, from the broker properties of the same Kafka names.

/// Coordinator settings (Kafka's broker property names).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `offsets.topic.num.partitions`
    pub offsets_partitions: i32,
    /// `group.min.session.timeout.ms`
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long a new (empty) group waits for more members.
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`
    pub max_size: usize,
    /// `offsets.retention.minutes` in ms: offsets of an empty group expire after this.
    pub offsets_retention_ms: i64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            offsets_partitions: 50,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: i32::MAX as usize,
            offsets_retention_ms: 7 * 24 * 3600 * 1000,
        }
    }
}
