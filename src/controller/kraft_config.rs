//! The KRaft properties (Kafka's names, so operators recognise them), parsed and validated as
//! pure functions. `BrokerConfig` keeps them as given (`cluster_properties`) and `serve`
//! checks them here, together; without `controller.quorum.voters`
//! [`KraftConfig::from_properties`] returns `None`, which is the single-node broker exactly
//! as before.

use std::collections::BTreeMap;

use crate::metadata::meta_properties::is_valid_cluster_id;
use crate::model::NodeId;

/// `host:port` of a listener or voter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub host: String,
    pub port: u16,
}

/// One entry of `listeners` / `advertised.listeners`: `NAME://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub address: HostPort,
}

/// One entry of `controller.quorum.voters`: `id@host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumVoter {
    pub id: NodeId,
    pub address: HostPort,
}

/// `process.roles`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRoles {
    pub broker: bool,
    pub controller: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KraftConfig {
    pub node_id: NodeId,
    pub roles: ProcessRoles,
    pub voters: Vec<QuorumVoter>,
    pub controller_listener_names: Vec<String>,
    pub listeners: Vec<Listener>,
    /// Defaults to `listeners` without the controller listeners (Kafka's rule).
    pub advertised_listeners: Vec<Listener>,
    pub cluster_id: Option<String>,
    pub rack: Option<String>,
    pub heartbeat_interval_ms: u64,
    pub session_timeout_ms: u64,
    pub election_timeout_ms: u64,
    pub default_replication_factor: i32,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms`: a follower's long poll.
    pub replica_fetch_wait_max_ms: u64,
    /// `replica.fetch.max.bytes`: per partition of a follower's fetch.
    pub replica_fetch_max_bytes: u64,
    /// `replica.fetch.response.max.bytes`: a follower's whole fetch, so what one shard has
    /// in flight from its leaders is at most this times the brokers it follows.
    pub replica_fetch_response_max_bytes: u64,
    /// `offsets.topic.replication.factor` (created once that many brokers are live).
    pub offsets_topic_replication_factor: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KraftConfigError {
    #[error("property `{name}`: {reason}")]
    BadValue { name: &'static str, reason: String },
    #[error("`{0}` is required with controller.quorum.voters")]
    Missing(&'static str),
    #[error("{0}")]
    Inconsistent(String),
}

pub const DEFAULT_HEARTBEAT_INTERVAL_MS: u64 = 2_000;
pub const DEFAULT_SESSION_TIMEOUT_MS: u64 = 9_000;
pub const DEFAULT_ELECTION_TIMEOUT_MS: u64 = 1_000;
pub const DEFAULT_CONTROLLER_LISTENER: &str = "CONTROLLER";

fn bad(name: &'static str, reason: impl Into<String>) -> KraftConfigError {
    KraftConfigError::BadValue {
        name,
        reason: reason.into(),
    }
}

/// Kafka's list syntax: comma-separated, blanks around entries and empty entries ignored.
fn items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// `host:port`, `[v6]:port`; an empty host means every interface.
pub fn parse_host_port(text: &str) -> Result<HostPort, String> {
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("expected host:port, got {text:?}"))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("bad port in {text:?}"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.contains(['/', ' ', '@']) {
        return Err(format!("bad host in {text:?}"));
    }
    Ok(HostPort {
        host: host.to_string(),
        port,
    })
}

/// `controller.quorum.voters`: `1@host:9093,2@host:9094`.
pub fn parse_voters(value: &str) -> Result<Vec<QuorumVoter>, KraftConfigError> {
    let name = "controller.quorum.voters";
    let mut voters: Vec<QuorumVoter> = Vec::new();
    for item in items(value) {
        let (id, address) = item
            .split_once('@')
            .ok_or_else(|| bad(name, format!("expected id@host:port, got {item:?}")))?;
        let id = id
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|id| *id >= 0)
            .ok_or_else(|| bad(name, format!("bad node id in {item:?}")))?;
        let address = parse_host_port(address.trim()).map_err(|e| bad(name, e))?;
        if voters.iter().any(|v| v.id.0 == id) {
            return Err(bad(name, format!("node {id} is listed twice")));
        }
        voters.push(QuorumVoter {
            id: NodeId::from(id),
            address,
        });
    }
    if voters.is_empty() {
        return Err(bad(name, "no voters"));
    }
    Ok(voters)
}

/// `listeners` / `advertised.listeners`: `PLAINTEXT://host:9092,CONTROLLER://host:9093`.
pub fn parse_listeners(name: &'static str, value: &str) -> Result<Vec<Listener>, KraftConfigError> {
    let mut out: Vec<Listener> = Vec::new();
    for item in items(value) {
        let (listener, address) = item
            .split_once("://")
            .ok_or_else(|| bad(name, format!("expected NAME://host:port, got {item:?}")))?;
        let listener = listener.trim().to_ascii_uppercase();
        if listener.is_empty()
            || !listener
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(bad(name, format!("bad listener name in {item:?}")));
        }
        if out.iter().any(|l| l.name == listener) {
            return Err(bad(name, format!("listener {listener} is listed twice")));
        }
        out.push(Listener {
            name: listener,
            address: parse_host_port(address.trim()).map_err(|e| bad(name, e))?,
        });
    }
    if out.is_empty() {
        return Err(bad(name, "no listeners"));
    }
    Ok(out)
}

pub fn parse_process_roles(value: &str) -> Result<ProcessRoles, KraftConfigError> {
    let mut roles = ProcessRoles {
        broker: false,
        controller: false,
    };
    for item in items(value) {
        match item {
            "broker" => roles.broker = true,
            "controller" => roles.controller = true,
            other => {
                return Err(bad(
                    "process.roles",
                    format!("unknown role {other:?} (broker, controller)"),
                ))
            }
        }
    }
    if !roles.broker && !roles.controller {
        return Err(bad("process.roles", "no role"));
    }
    Ok(roles)
}

fn positive_u64(
    name: &'static str,
    value: Option<&String>,
    default: u64,
) -> Result<u64, KraftConfigError> {
    match value {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad(name, format!("expected a positive number, got {v:?}"))),
    }
}

impl KraftConfig {
    /// The cluster configuration in `props` (property name → value), or `None` when
    /// `controller.quorum.voters` is not set (single-node mode).
    pub fn from_properties(
        props: &BTreeMap<String, String>,
    ) -> Result<Option<KraftConfig>, KraftConfigError> {
        let Some(voters) = props.get("controller.quorum.voters") else {
            return Ok(None);
        };
        let voters = parse_voters(voters)?;
        let node = props
            .get("node.id")
            .or_else(|| props.get("broker.id"))
            .ok_or(KraftConfigError::Missing("node.id"))?;
        let node_id = node
            .trim()
            .parse::<i32>()
            .ok()
            .filter(|n| *n >= 0)
            .map(NodeId::from)
            .ok_or_else(|| bad("node.id", format!("expected a node id ≥ 0, got {node:?}")))?;
        let is_voter = voters.iter().any(|v| v.id == node_id);
        let roles = match props.get("process.roles") {
            Some(v) => parse_process_roles(v)?,
            None => ProcessRoles {
                broker: true,
                controller: is_voter,
            },
        };
        let controller_listener_names: Vec<String> = match props.get("controller.listener.names") {
            Some(v) => items(v).map(str::to_ascii_uppercase).collect(),
            None => vec![DEFAULT_CONTROLLER_LISTENER.to_string()],
        };
        if controller_listener_names.is_empty() {
            return Err(bad("controller.listener.names", "no listener name"));
        }
        let listeners = parse_listeners(
            "listeners",
            props
                .get("listeners")
                .ok_or(KraftConfigError::Missing("listeners"))?,
        )?;
        let is_controller_listener = |l: &Listener| controller_listener_names.contains(&l.name);
        let advertised_listeners = match props.get("advertised.listeners") {
            Some(v) => parse_listeners("advertised.listeners", v)?,
            None => listeners
                .iter()
                .filter(|l| !is_controller_listener(l))
                .cloned()
                .collect(),
        };
        let cluster_id = props.get("cluster.id").map(|s| s.trim().to_string());
        if let Some(id) = &cluster_id {
            if !is_valid_cluster_id(id) {
                return Err(bad(
                    "cluster.id",
                    format!("{id:?}: expected 1-64 characters of A-Z a-z 0-9 _ -"),
                ));
            }
        }
        let rack = props
            .get("broker.rack")
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty());
        let default_replication_factor = match props.get("default.replication.factor") {
            None => 1,
            Some(v) => v
                .trim()
                .parse::<i32>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    bad(
                        "default.replication.factor",
                        format!("expected ≥ 1, got {v:?}"),
                    )
                })?,
        };
        let config = KraftConfig {
            node_id,
            roles,
            voters,
            controller_listener_names,
            listeners,
            advertised_listeners,
            cluster_id,
            rack,
            heartbeat_interval_ms: positive_u64(
                "broker.heartbeat.interval.ms",
                props.get("broker.heartbeat.interval.ms"),
                DEFAULT_HEARTBEAT_INTERVAL_MS,
            )?,
            session_timeout_ms: positive_u64(
                "broker.session.timeout.ms",
                props.get("broker.session.timeout.ms"),
                DEFAULT_SESSION_TIMEOUT_MS,
            )?,
            election_timeout_ms: positive_u64(
                "controller.quorum.election.timeout.ms",
                props.get("controller.quorum.election.timeout.ms"),
                DEFAULT_ELECTION_TIMEOUT_MS,
            )?,
            default_replication_factor,
            replica_lag_time_max_ms: positive_u64(
                "replica.lag.time.max.ms",
                props.get("replica.lag.time.max.ms"),
                30_000,
            )?,
            replica_fetch_wait_max_ms: positive_u64(
                "replica.fetch.wait.max.ms",
                props.get("replica.fetch.wait.max.ms"),
                500,
            )?,
            replica_fetch_max_bytes: positive_u64(
                "replica.fetch.max.bytes",
                props.get("replica.fetch.max.bytes"),
                1 << 20,
            )?,
            replica_fetch_response_max_bytes: positive_u64(
                "replica.fetch.response.max.bytes",
                props.get("replica.fetch.response.max.bytes"),
                10 << 20,
            )?,
            offsets_topic_replication_factor: positive_u64(
                "offsets.topic.replication.factor",
                props.get("offsets.topic.replication.factor"),
                3,
            )?
            .min(i32::MAX as u64) as i32,
        };
        config.check()?;
        Ok(Some(config))
    }

    /// The rules between properties (Kafka's KafkaConfig checks for KRaft mode).
    fn check(&self) -> Result<(), KraftConfigError> {
        let inconsistent = |s: String| Err(KraftConfigError::Inconsistent(s));
        let is_voter = self.voters.iter().any(|v| v.id == self.node_id);
        let is_controller_listener =
            |l: &Listener| self.controller_listener_names.contains(&l.name);
        if self.roles.controller && !is_voter {
            return inconsistent(format!(
                "process.roles includes controller, but node {} is not in controller.quorum.voters",
                self.node_id
            ));
        }
        if !self.roles.controller && is_voter {
            return inconsistent(format!(
                "node {} is in controller.quorum.voters, so process.roles must include controller",
                self.node_id
            ));
        }
        if self.roles.controller && !self.listeners.iter().any(is_controller_listener) {
            return inconsistent(format!(
                "a controller needs a listener named in controller.listener.names ({})",
                self.controller_listener_names.join(",")
            ));
        }
        if !self.roles.controller && self.listeners.iter().any(is_controller_listener) {
            return inconsistent(
                "a broker-only node must not listen on a controller listener".to_string(),
            );
        }
        if self.roles.broker {
            if !self.listeners.iter().any(|l| !is_controller_listener(l)) {
                return inconsistent("a broker needs a listener for clients".to_string());
            }
            if self.advertised_listeners.iter().any(is_controller_listener) {
                return inconsistent(
                    "advertised.listeners must not include a controller listener".to_string(),
                );
            }
        }
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return inconsistent(format!(
                "broker.heartbeat.interval.ms ({}) must be less than broker.session.timeout.ms ({})",
                self.heartbeat_interval_ms, self.session_timeout_ms
            ));
        }
        Ok(())
    }

    /// This node's entry among the voters, if it is one.
    pub fn own_voter(&self) -> Option<&QuorumVoter> {
        self.voters.iter().find(|v| v.id == self.node_id)
    }
}

#[cfg(test)]
#[path = "kraft_config_tests.rs"]
mod tests;
