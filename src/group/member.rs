//! One member of a classic consumer group, as the coordinator tracks it.

use bytes::Bytes;

use super::api::Token;

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    /// A JoinGroup waiting for the join phase to end.
    pub awaiting_join: Option<Token>,
    /// A SyncGroup waiting for the leader's assignment to be stored.
    pub awaiting_sync: Option<Token>,
    /// Joined during the current rebalance and never completed one: it cannot heartbeat yet, so
    /// it is bounded by `new_member_deadline_ms` instead of its session.
    pub is_new: bool,
    pub new_member_deadline_ms: i64,
    /// Removed when this passes without a heartbeat (or join, sync, commit).
    pub session_deadline_ms: i64,
}

impl Member {
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    /// Same protocols with the same metadata, in the same order (Kafka's `matches`).
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    pub fn refresh_session(&mut self, now_ms: i64) {
        self.session_deadline_ms = now_ms + i64::from(self.session_timeout_ms);
    }
}
