//! A small Kafka client for simulated clusters: the requests a test's producers, committers
//! and checks send (Metadata, CreateTopics, InitProducerId, Produce, Fetch, FindCoordinator,
//! OffsetCommit, OffsetFetch), over the runtime's connections, so that it runs on the
//! simulated network like the brokers' own replica fetchers.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, BrokerId as WireBrokerId, GroupId, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::replication::replica_client::{ReplicaClient, ReplicaClientError};

const TIMEOUT: Duration = Duration::from_secs(10);

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One connection to one broker.
pub struct SimClient {
    inner: ReplicaClient,
}

/// What a produce got: the partition's error code and, without one, the batch's offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Produced {
    pub error_code: i16,
    pub base_offset: i64,
}

/// What a fetch got.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub error_code: i16,
    pub high_watermark: i64,
    pub records: Bytes,
}

impl SimClient {
    pub async fn connect(addr: SocketAddr) -> Result<SimClient, ReplicaClientError> {
        Ok(SimClient {
            inner: ReplicaClient::connect(addr, "sim-client", (0, 1), Duration::from_secs(2))
                .await?,
        })
    }

    /// Metadata of `topic` (every broker listed), without creating it.
    pub async fn metadata(&mut self, topic: &str) -> Result<MetadataResponse, ReplicaClientError> {
        let mut t = MetadataRequestTopic::default();
        t.name = Some(name(topic));
        let mut req = MetadataRequest::default();
        req.topics = Some(vec![t]);
        req.allow_auto_topic_creation = false;
        self.inner.call(ApiKey::Metadata, 12, &req, TIMEOUT).await
    }

    /// The leader of `topic`'s `partition` as this broker knows it.
    pub async fn leader(&mut self, topic: &str, partition: i32) -> Option<i32> {
        let m = self.metadata(topic).await.ok()?;
        let t = m.topics.first()?;
        let p = t
            .partitions
            .iter()
            .find(|p| p.partition_index == partition)?;
        (p.error_code == 0 && p.leader_id.0 >= 0).then_some(p.leader_id.0)
    }

    pub async fn create_topic(
        &mut self,
        topic: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(&str, &str)],
    ) -> Result<i16, ReplicaClientError> {
        let mut t = CreatableTopic::default();
        t.name = name(topic);
        t.num_partitions = partitions;
        t.replication_factor = replication_factor;
        t.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = StrBytes::from_string(k.to_string());
                c.value = Some(StrBytes::from_string(v.to_string()));
                c
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 10_000;
        let resp: CreateTopicsResponse = self
            .inner
            .call(ApiKey::CreateTopics, 7, &req, TIMEOUT)
            .await?;
        Ok(resp.topics.first().map_or(-1, |t| t.error_code))
    }

    /// An idempotent producer's id and epoch (error code, id, epoch).
    pub async fn init_producer_id(&mut self) -> Result<(i16, i64, i16), ReplicaClientError> {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = None;
        req.transaction_timeout_ms = 60_000;
        req.producer_id = ProducerId(-1);
        req.producer_epoch = -1;
        let resp: InitProducerIdResponse = self
            .inner
            .call(ApiKey::InitProducerId, 4, &req, TIMEOUT)
            .await?;
        Ok((resp.error_code, resp.producer_id.0, resp.producer_epoch))
    }

    /// Produces one batch with `acks`.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        batch: Bytes,
        acks: i16,
    ) -> Result<Produced, ReplicaClientError> {
        let mut p = PartitionProduceData::default();
        p.index = partition;
        p.records = Some(batch);
        let mut t = TopicProduceData::default();
        t.name = name(topic);
        t.partition_data = vec![p];
        let mut req = ProduceRequest::default();
        req.acks = acks;
        req.timeout_ms = 5_000;
        req.topic_data = vec![t];
        let resp: ProduceResponse = self.inner.call(ApiKey::Produce, 9, &req, TIMEOUT).await?;
        let p = resp
            .responses
            .first()
            .and_then(|t| t.partition_responses.first());
        Ok(p.map_or(
            Produced {
                error_code: -1,
                base_offset: -1,
            },
            |p| Produced {
                error_code: p.error_code,
                base_offset: p.base_offset,
            },
        ))
    }

    /// A consumer's fetch (replica id -1: up to the high watermark).
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Fetched, ReplicaClientError> {
        let mut p = FetchPartition::default();
        p.partition = partition;
        p.fetch_offset = offset;
        p.partition_max_bytes = 1 << 20;
        let mut t = FetchTopic::default();
        t.topic = name(topic);
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.replica_id = WireBrokerId(-1);
        req.max_wait_ms = 0;
        req.min_bytes = 0;
        req.max_bytes = 1 << 20;
        req.topics = vec![t];
        let resp: FetchResponse = self.inner.call(ApiKey::Fetch, 12, &req, TIMEOUT).await?;
        let p = resp.responses.first().and_then(|t| t.partitions.first());
        Ok(p.map_or(
            Fetched {
                error_code: -1,
                high_watermark: -1,
                records: Bytes::new(),
            },
            |p| Fetched {
                error_code: p.error_code,
                high_watermark: p.high_watermark,
                records: p.records.clone().unwrap_or_default(),
            },
        ))
    }

    /// The coordinator of `group` as this broker knows it: (error code, node id).
    pub async fn find_coordinator(
        &mut self,
        group: &str,
    ) -> Result<(i16, i32), ReplicaClientError> {
        let mut req = FindCoordinatorRequest::default();
        req.key = StrBytes::from_string(group.to_string());
        req.key_type = 0;
        let resp: FindCoordinatorResponse = self
            .inner
            .call(ApiKey::FindCoordinator, 3, &req, TIMEOUT)
            .await?;
        Ok((resp.error_code, resp.node_id.0))
    }

    /// A simple (memberless, generation -1) commit of `offset` for `group`: the partition's
    /// error code.
    pub async fn commit_offset(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<i16, ReplicaClientError> {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = partition;
        p.committed_offset = offset;
        let mut t = OffsetCommitRequestTopic::default();
        t.name = name(topic);
        t.partitions = vec![p];
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.generation_id_or_member_epoch = -1;
        req.topics = vec![t];
        let resp: OffsetCommitResponse = self
            .inner
            .call(ApiKey::OffsetCommit, 8, &req, TIMEOUT)
            .await?;
        Ok(resp
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.error_code))
    }

    /// `group`'s committed offset of `topic`'s `partition`: (error code, offset; -1 for none).
    pub async fn fetch_offset(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> Result<(i16, i64), ReplicaClientError> {
        let mut t = OffsetFetchRequestTopic::default();
        t.name = name(topic);
        t.partition_indexes = vec![partition];
        let mut req = OffsetFetchRequest::default();
        req.group_id = GroupId(StrBytes::from_string(group.to_string()));
        req.topics = Some(vec![t]);
        let resp: OffsetFetchResponse = self
            .inner
            .call(ApiKey::OffsetFetch, 7, &req, TIMEOUT)
            .await?;
        if resp.error_code != 0 {
            return Ok((resp.error_code, -1));
        }
        Ok(resp
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or((-1, -1), |p| (p.error_code, p.committed_offset)))
    }
}
