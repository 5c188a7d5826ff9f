//! A client's handle on a Kafka cluster: bootstrap, negotiated versions, cached metadata, one
//! connection per broker, and the small admin calls (create topic, list offsets, producer id).

use crate::util::hash::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::connection::Connection;
use super::error::{ClientError, ClientResult, KafkaCode};
use super::metadata::Metadata;
use super::versions::ApiVersionTable;

/// ListOffsets timestamp for the log end offset.
pub const LATEST: i64 = -1;
/// ListOffsets timestamp for the log start offset.
pub const EARLIEST: i64 = -2;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// "host:port" of brokers to ask for metadata first.
    pub bootstrap: Vec<String>,
    pub client_id: String,
    /// Bound on every request (connect, each response).
    pub request_timeout: Duration,
    /// Requests in flight per connection.
    pub max_in_flight: usize,
}

impl ClientConfig {
    /// `bootstrap` is a comma-separated list of host:port.
    pub fn new(bootstrap: &str) -> ClientConfig {
        ClientConfig {
            bootstrap: bootstrap
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            client_id: "ringbroker-client".into(),
            request_timeout: Duration::from_secs(30),
            max_in_flight: 5,
        }
    }
}

/// Shared by a producer's or consumer's threads.
pub struct Cluster {
    config: ClientConfig,
    versions: ApiVersionTable,
    metadata: RwLock<Arc<Metadata>>,
    /// Bumped every time the cached metadata changes (callers cache what they derived from it).
    metadata_generation: AtomicU64,
    connections: Mutex<HashMap<i32, Arc<Connection>>>,
    /// The bootstrap connection, used for requests that any broker answers.
    any: Mutex<Arc<Connection>>,
}

impl Cluster {
    /// Connects to the first bootstrap server that answers ApiVersions.
    pub fn connect(config: ClientConfig) -> ClientResult<Cluster> {
        if config.bootstrap.is_empty() {
            return Err(ClientError::Config("no bootstrap server".into()));
        }
        let mut failures = Vec::new();
        for addr in &config.bootstrap {
            match Self::open(&config, addr) {
                Ok((conn, versions)) => {
                    let cluster = Cluster {
                        config: config.clone(),
                        versions,
                        metadata: RwLock::new(Arc::new(Metadata::default())),
                        metadata_generation: AtomicU64::new(0),
                        connections: Mutex::new(HashMap::default()),
                        any: Mutex::new(Arc::new(conn)),
                    };
                    cluster.refresh_metadata(&[])?;
                    return Ok(cluster);
                }
                Err(e) => failures.push(format!("{addr}: {e}")),
            }
        }
        Err(ClientError::Bootstrap(failures.join("; ")))
    }

    fn open(config: &ClientConfig, addr: &str) -> ClientResult<(Connection, ApiVersionTable)> {
        let conn = Connection::connect(
            addr,
            &config.client_id,
            config.request_timeout,
            config.max_in_flight,
        )?;
        let mut req = ApiVersionsRequest::default();
        req.client_software_name = StrBytes::from_static_str("ringbroker-client");
        req.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let resp: ApiVersionsResponse = conn.call(ApiKey::ApiVersions, 3, &req)?;
        if let Some(code) = KafkaCode::from_code(resp.error_code) {
            return Err(ClientError::Kafka {
                api: "ApiVersions",
                code,
                message: None,
            });
        }
        Ok((conn, ApiVersionTable::negotiate(&resp)))
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    pub fn version(&self, key: ApiKey) -> ClientResult<i16> {
        self.versions.version(key)
    }

    pub fn metadata(&self) -> Arc<Metadata> {
        self.metadata
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A live connection to any broker (the bootstrap one, reopened if it closed).
    pub fn any_connection(&self) -> ClientResult<Arc<Connection>> {
        let mut any = self.any.lock().unwrap_or_else(|p| p.into_inner());
        if any.is_closed() {
            let mut last = None;
            let mut addrs: Vec<String> = self.metadata().brokers.values().cloned().collect();
            addrs.extend(self.config.bootstrap.iter().cloned());
            for addr in addrs {
                match Connection::connect(
                    &addr,
                    &self.config.client_id,
                    self.config.request_timeout,
                    self.config.max_in_flight,
                ) {
                    Ok(c) => {
                        *any = Arc::new(c);
                        return Ok(any.clone());
                    }
                    Err(e) => last = Some(e),
                }
            }
            return Err(last.unwrap_or(ClientError::Bootstrap("no broker known".into())));
        }
        Ok(any.clone())
    }

    /// The connection to broker `node` (opened, or reopened after a failure, on demand).
    pub fn connection(&self, node: i32) -> ClientResult<Arc<Connection>> {
        let mut conns = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = conns.get(&node) {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let addr =
            self.metadata().brokers.get(&node).cloned().ok_or_else(|| {
                ClientError::Bootstrap(format!("broker {node} is not in metadata"))
            })?;
        let conn = Arc::new(Connection::connect(
            &addr,
            &self.config.client_id,
            self.config.request_timeout,
            self.config.max_in_flight,
        )?);
        conns.insert(node, conn.clone());
        Ok(conn)
    }

    /// Asks for metadata of `topics` (all topics if empty) and merges it into the cache.
    pub fn refresh_metadata(&self, topics: &[&str]) -> ClientResult<Arc<Metadata>> {
        let mut req = MetadataRequest::default();
        req.topics = if topics.is_empty() {
            None
        } else {
            Some(
                topics
                    .iter()
                    .map(|t| {
                        let mut rt = MetadataRequestTopic::default();
                        rt.name = Some(topic_name(t));
                        rt
                    })
                    .collect(),
            )
        };
        req.allow_auto_topic_creation = false;
        let version = self.version(ApiKey::Metadata)?;
        let resp: MetadataResponse =
            self.any_connection()?
                .call(ApiKey::Metadata, version, &req)?;
        let fresh = Metadata::from_response(&resp);
        let mut guard = self.metadata.write().unwrap_or_else(|p| p.into_inner());
        let mut merged = (**guard).clone();
        merged.merge(fresh);
        *guard = Arc::new(merged);
        self.metadata_generation.fetch_add(1, Ordering::Release);
        Ok(guard.clone())
    }

    /// Changes whenever the cached metadata does: something derived from [`Cluster::metadata`]
    /// is current while this stays the same.
    pub fn metadata_generation(&self) -> u64 {
        self.metadata_generation.load(Ordering::Acquire)
    }

    /// Refreshes the topic's metadata until each partition has a leader (bounded by the
    /// request timeout). Returns the partition count.
    pub fn wait_for_leaders(&self, topic: &str) -> ClientResult<usize> {
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            let md = self.refresh_metadata(&[topic])?;
            if md.is_ready(topic) {
                return Ok(md.partition_count(topic).unwrap_or(0));
            }
            if Instant::now() >= deadline {
                return Err(ClientError::Timeout {
                    what: format!("leaders of every partition of {topic}"),
                    after: self.config.request_timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// ListOffsets for each of `partitions` at `timestamp` ([`EARLIEST`], [`LATEST`] or a
    /// time in ms), asking each partition's leader. Same order as `partitions`.
    pub fn list_offsets(
        &self,
        topic: &str,
        partitions: &[i32],
        timestamp: i64,
    ) -> ClientResult<Vec<i64>> {
        let md = self.metadata();
        let version = self.version(ApiKey::ListOffsets)?;
        let mut by_leader: HashMap<i32, Vec<i32>> = HashMap::default();
        for &p in partitions {
            let leader = md.leader(topic, p).ok_or_else(|| ClientError::NoLeader {
                topic: topic.to_string(),
                partition: p,
            })?;
            by_leader.entry(leader).or_default().push(p);
        }
        let mut offsets: HashMap<i32, i64> = HashMap::default();
        for (leader, parts) in by_leader {
            let mut t = ListOffsetsTopic::default();
            t.name = topic_name(topic);
            t.partitions = parts
                .iter()
                .map(|&p| {
                    let mut lp = ListOffsetsPartition::default();
                    lp.partition_index = p;
                    lp.timestamp = timestamp;
                    lp.current_leader_epoch = -1;
                    lp
                })
                .collect();
            let mut req = ListOffsetsRequest::default();
            req.replica_id = BrokerId(-1);
            req.topics = vec![t];
            let resp: ListOffsetsResponse =
                self.connection(leader)?
                    .call(ApiKey::ListOffsets, version, &req)?;
            for t in &resp.topics {
                for p in &t.partitions {
                    if let Some(code) = KafkaCode::from_code(p.error_code) {
                        return Err(ClientError::Kafka {
                            api: "ListOffsets",
                            code,
                            message: Some(format!("{topic}-{}", p.partition_index)),
                        });
                    }
                    offsets.insert(p.partition_index, p.offset);
                }
            }
        }
        partitions
            .iter()
            .map(|p| {
                offsets
                    .get(p)
                    .copied()
                    .ok_or_else(|| ClientError::codec("ListOffsets response", "partition missing"))
            })
            .collect()
    }

    /// A new idempotent producer id and epoch (no transactions).
    pub fn init_producer_id(&self) -> ClientResult<(i64, i16)> {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = None;
        req.transaction_timeout_ms = -1;
        req.producer_id = ProducerId(-1);
        req.producer_epoch = -1;
        let version = self.version(ApiKey::InitProducerId)?;
        let resp: InitProducerIdResponse =
            self.any_connection()?
                .call(ApiKey::InitProducerId, version, &req)?;
        if let Some(code) = KafkaCode::from_code(resp.error_code) {
            return Err(ClientError::Kafka {
                api: "InitProducerId",
                code,
                message: None,
            });
        }
        Ok((resp.producer_id.0, resp.producer_epoch))
    }
}

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}
