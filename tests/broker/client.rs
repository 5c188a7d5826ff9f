//! A blocking Kafka client for integration tests: one raw request at a time, built and
//! decoded with the kafka-protocol crate; every wait bounded by [`WAIT`].

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsResponse;
use kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicResult, CreateTopicsResponse,
};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsResponse;
use kafka_protocol::messages::delete_topics_request::{DeleteTopicState, DeleteTopicsRequest};
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{
    ApiKey, BrokerId, GroupId, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use ringbroker::protocol::batch_builder::BatchBuilder;
use uuid::Uuid;

use super::WAIT;

/// A blocking Kafka client: one request at a time.
pub struct Client {
    stream: TcpStream,
    next_correlation: i32,
    client_id: &'static str,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, WAIT).expect("connect to the broker");
        stream.set_read_timeout(Some(WAIT)).expect("read timeout");
        stream.set_write_timeout(Some(WAIT)).expect("write timeout");
        stream.set_nodelay(true).expect("nodelay");
        Client {
            stream,
            next_correlation: 1,
            client_id: "ringbroker-test",
        }
    }

    /// The shard of a broker with `shards` shards that serves this connection (steered by
    /// its source port).
    pub fn shard(&self, shards: usize) -> usize {
        let port = self.stream.local_addr().expect("local address").port();
        ringbroker::runtime::port_steering::shard_for_port(port, shards)
    }

    pub fn with_client_id(mut self, id: &'static str) -> Client {
        self.client_id = id;
        self
    }

    /// Sends one request and decodes its response (panics with context on any failure).
    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Resp {
        let correlation = self.send(key, version, request);
        self.receive(key, version, correlation)
    }

    /// Produce (v3 or later) of one record batch to one partition, 5 s timeout: the
    /// partition's (error code, base offset).
    pub fn produce_records(
        &mut self,
        version: i16,
        acks: i16,
        topic: &str,
        partition: i32,
        records: Bytes,
    ) -> (i16, i64) {
        let resp = self.produce_response(version, acks, topic, partition, records);
        let p = &resp.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }

    /// Produce of `records` to one partition: the whole response.
    pub fn produce_response(
        &mut self,
        version: i16,
        acks: i16,
        topic: &str,
        partition: i32,
        records: Bytes,
    ) -> ProduceResponse {
        let mut p = PartitionProduceData::default();
        p.index = partition;
        p.records = Some(records);
        let mut t = TopicProduceData::default();
        t.name = topic_name(topic);
        t.partition_data = vec![p];
        let mut req = ProduceRequest::default();
        req.acks = acks;
        req.timeout_ms = 5000;
        req.topic_data = vec![t];
        self.call(ApiKey::Produce, version, &req)
    }

    /// CreateTopics v7 for one topic; panics unless it was created.
    pub fn create_topic(&mut self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let result = self.try_create_topic(name, partitions, configs, false);
        assert_eq!(
            result.error_code, 0,
            "create {name}: {:?}",
            result.error_message
        );
    }

    /// CreateTopics v7 for one topic, replication factor 1: its result.
    pub fn try_create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
        validate_only: bool,
    ) -> CreatableTopicResult {
        self.try_create_replicated_topic(name, partitions, 1, configs, validate_only)
    }

    /// CreateTopics v7 for one topic with `replication_factor` replicas: its result.
    pub fn try_create_replicated_topic(
        &mut self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &[(&str, &str)],
        validate_only: bool,
    ) -> CreatableTopicResult {
        let mut topic = CreatableTopic::default();
        topic.name = topic_name(name);
        topic.num_partitions = partitions;
        topic.replication_factor = replication_factor;
        topic.configs = configs
            .iter()
            .map(|(n, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = s(n);
                c.value = Some(s(v));
                c
            })
            .collect();
        let mut req = CreateTopicsRequest::default();
        req.topics = vec![topic];
        req.timeout_ms = 5000;
        req.validate_only = validate_only;
        let resp: CreateTopicsResponse = self.call(ApiKey::CreateTopics, 7, &req);
        resp.topics.into_iter().next().expect("one result")
    }

    /// Metadata v12 for one topic: (error code, partition count, topic id).
    pub fn topic_metadata(&mut self, name: &str) -> (i16, usize, Uuid) {
        let mut t = MetadataRequestTopic::default();
        t.name = Some(topic_name(name));
        let mut req = MetadataRequest::default();
        req.topics = Some(vec![t]);
        req.allow_auto_topic_creation = false;
        let resp: MetadataResponse = self.call(ApiKey::Metadata, 12, &req);
        let t = &resp.topics[0];
        (t.error_code, t.partitions.len(), t.topic_id)
    }

    /// Metadata v`version` for `names` (`None`: every topic), auto-creating or not:
    /// (name, error code, partitions) of each topic answered.
    pub fn listing(
        &mut self,
        version: i16,
        names: Option<&[&str]>,
        auto_create: bool,
    ) -> Vec<(String, i16, usize)> {
        let mut req = MetadataRequest::default();
        req.topics = names.map(|names| {
            names
                .iter()
                .map(|n| {
                    let mut t = MetadataRequestTopic::default();
                    t.name = Some(topic_name(n));
                    t
                })
                .collect()
        });
        req.allow_auto_topic_creation = auto_create;
        let resp: MetadataResponse = self.call(ApiKey::Metadata, version, &req);
        resp.topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map_or(String::new(), |n| n.0.to_string());
                (name, t.error_code, t.partitions.len())
            })
            .collect()
    }

    /// Produce v7, acks=all: one batch of `count` records; returns (error code, base offset).
    pub fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        count: usize,
        value_len: usize,
    ) -> (i16, i64) {
        let mut b = BatchBuilder::new(1_700_000_000_000);
        let value = vec![b'v'; value_len];
        for i in 0..count {
            b.push(None, Some(&value), 1_700_000_000_000 + i as i64, &[]);
        }
        self.produce_records(7, -1, topic, partition, b.build())
    }

    /// DeleteRecords v2 on one partition: (error code, low watermark).
    pub fn delete_records(&mut self, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
        self.delete_records_within(topic, partition, offset, 5000)
    }

    /// [`Client::delete_records`] with the request's `timeout_ms`.
    pub fn delete_records_within(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        timeout_ms: i32,
    ) -> (i16, i64) {
        let mut p = DeleteRecordsPartition::default();
        p.partition_index = partition;
        p.offset = offset;
        let mut t = DeleteRecordsTopic::default();
        t.name = topic_name(topic);
        t.partitions = vec![p];
        let mut req = DeleteRecordsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = timeout_ms;
        let resp: DeleteRecordsResponse = self.call(ApiKey::DeleteRecords, 2, &req);
        let r = &resp.topics[0].partitions[0];
        assert_eq!(r.partition_index, partition);
        (r.error_code, r.low_watermark)
    }

    /// ListOffsets v7: (error code, offset).
    pub fn list_offset(&mut self, topic: &str, partition: i32, timestamp: i64) -> (i16, i64) {
        let (error, offset, _) = self.list_offset_at(7, topic, partition, timestamp);
        (error, offset)
    }

    /// ListOffsets v1 or later: (error code, offset, leader epoch).
    pub fn list_offset_at(
        &mut self,
        version: i16,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> (i16, i64, i32) {
        self.list_offset_as(version, -1, -1, topic, partition, timestamp)
    }

    /// ListOffsets as `replica_id` (-1 a consumer, -2 debugging, a broker id a follower) at
    /// `current_leader_epoch` (v4+; -1 unchecked): (error code, offset, leader epoch).
    pub fn list_offset_as(
        &mut self,
        version: i16,
        replica_id: i32,
        current_leader_epoch: i32,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> (i16, i64, i32) {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = partition;
        p.timestamp = timestamp;
        p.current_leader_epoch = current_leader_epoch;
        let mut t = ListOffsetsTopic::default();
        t.name = topic_name(topic);
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = BrokerId(replica_id);
        req.topics = vec![t];
        let resp: ListOffsetsResponse = self.call(ApiKey::ListOffsets, version, &req);
        let r = &resp.topics[0].partitions[0];
        (r.error_code, r.offset, r.leader_epoch)
    }

    /// Fetch v11: (error code, log start offset, high watermark, bytes of records).
    pub fn fetch(&mut self, topic: &str, partition: i32, offset: i64) -> (i16, i64, i64, usize) {
        self.fetch_v(topic, partition, offset, 11)
    }

    /// As [`Client::fetch`], at Fetch `version` (4..=12: names, no topic ids).
    pub fn fetch_v(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        version: i16,
    ) -> (i16, i64, i64, usize) {
        let mut p = FetchPartition::default();
        p.partition = partition;
        p.fetch_offset = offset;
        p.partition_max_bytes = 1 << 20;
        let mut t = FetchTopic::default();
        t.topic = topic_name(topic);
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.max_wait_ms = 100;
        req.min_bytes = 1;
        req.max_bytes = 1 << 20;
        req.topics = vec![t];
        let resp: FetchResponse = self.call(ApiKey::Fetch, version, &req);
        let r = &resp.responses[0].partitions[0];
        (
            r.error_code,
            r.log_start_offset,
            r.high_watermark,
            r.records.as_ref().map_or(0, |r| r.len()),
        )
    }

    /// DeleteTopics v6 by name or id: (error code, name in the answer).
    pub fn delete_topic(&mut self, name: Option<&str>, id: Uuid) -> (i16, Option<String>) {
        let mut t = DeleteTopicState::default();
        t.name = name.map(topic_name);
        t.topic_id = id;
        let mut req = DeleteTopicsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 5000;
        let resp: DeleteTopicsResponse = self.call(ApiKey::DeleteTopics, 6, &req);
        let r = &resp.responses[0];
        (r.error_code, r.name.as_ref().map(|n| n.0.to_string()))
    }

    /// CreatePartitions v3 for one topic: (error code, error message).
    pub fn create_partitions(
        &mut self,
        topic: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> (i16, Option<String>) {
        let mut t = CreatePartitionsTopic::default();
        t.name = topic_name(topic);
        t.count = count;
        t.assignments = assignments.map(|a| {
            a.into_iter()
                .map(|ids| {
                    let mut x = CreatePartitionsAssignment::default();
                    x.broker_ids = ids.into_iter().map(BrokerId).collect();
                    x
                })
                .collect()
        });
        let mut req = CreatePartitionsRequest::default();
        req.topics = vec![t];
        req.timeout_ms = 5000;
        req.validate_only = validate_only;
        let resp: CreatePartitionsResponse = self.call(ApiKey::CreatePartitions, 3, &req);
        let r = &resp.results[0];
        assert_eq!(r.name.0.as_str(), topic);
        (
            r.error_code,
            r.error_message.as_ref().map(|m| m.to_string()),
        )
    }

    /// Writes `bytes` as they are (a partial frame, say).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send raw bytes");
    }

    /// Waits, at most [`WAIT`], for the broker to close this connection: false if it is still
    /// open then. Bytes from the broker meanwhile fail the test.
    pub fn closed_by_broker(&mut self) -> bool {
        let mut buf = [0u8; 64];
        match self.stream.read(&mut buf) {
            Ok(0) => true,
            Ok(n) => panic!("{n} unexpected bytes from the broker"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                false
            }
            Err(e) => panic!("reading from the broker: {e}"),
        }
    }

    /// Sends a hand-encoded body of a non-flexible version (request header v1) and returns
    /// the response body after the correlation id (response header v0).
    pub fn call_raw(&mut self, key: ApiKey, version: i16, body: &[u8]) -> Bytes {
        let correlation = self.next_correlation;
        self.next_correlation += 1;
        let mut frame = BytesMut::new();
        frame.put_i16(key as i16);
        frame.put_i16(version);
        frame.put_i32(correlation);
        frame.put_i16(self.client_id.len() as i16);
        frame.put_slice(self.client_id.as_bytes());
        frame.put_slice(body);
        let mut out = (frame.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&frame);
        self.stream.write_all(&out).expect("send the request");
        let mut buf = self.read_frame(key, version);
        assert_eq!(buf.get_i32(), correlation, "{key:?} v{version}");
        buf
    }

    /// Reads one response frame (without its size prefix).
    fn read_frame(&mut self, key: ApiKey, version: i16) -> Bytes {
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .unwrap_or_else(|e| panic!("no response to {key:?} v{version}: {e}"));
        let size = i32::from_be_bytes(size);
        assert!(
            (0..64 << 20).contains(&size),
            "implausible response size {size}"
        );
        let mut buf = vec![0u8; size as usize];
        self.stream
            .read_exact(&mut buf)
            .expect("read the response body");
        Bytes::from(buf)
    }

    /// Sends a request without waiting; returns its correlation id.
    pub fn send<Req: Encodable>(&mut self, key: ApiKey, version: i16, request: &Req) -> i32 {
        let correlation = self.next_correlation;
        self.next_correlation += 1;
        let mut header = RequestHeader::default();
        header.request_api_key = key as i16;
        header.request_api_version = version;
        header.correlation_id = correlation;
        header.client_id = Some(StrBytes::from_static_str(self.client_id));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, key.request_header_version(version))
            .expect("encode the request header");
        request
            .encode(&mut body, version)
            .unwrap_or_else(|e| panic!("encode {key:?} v{version}: {e}"));
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).expect("send the request");
        correlation
    }

    /// Reads the response to a request sent with [`Client::send`].
    pub fn receive<Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        correlation: i32,
    ) -> Resp {
        let mut buf = self.read_frame(key, version);
        let header = ResponseHeader::decode(&mut buf, key.response_header_version(version))
            .expect("decode the response header");
        assert_eq!(header.correlation_id, correlation, "{key:?} v{version}");
        let response = Resp::decode(&mut buf, version)
            .unwrap_or_else(|e| panic!("decode the {key:?} v{version} response: {e}"));
        assert!(
            buf.is_empty(),
            "{} bytes left after the {key:?} v{version} response",
            buf.len()
        );
        response
    }
}

/// A Fetch request (by topic name) for `partitions` as (partition, fetch offset), each with
/// `partition_max_bytes`, within `max_bytes`; no long poll (callers set max_wait_ms/min_bytes).
pub fn fetch_request(
    topic: &str,
    partitions: &[(i32, i64)],
    partition_max_bytes: i32,
    max_bytes: i32,
) -> FetchRequest {
    let mut t = FetchTopic::default();
    t.topic = topic_name(topic);
    t.partitions = partitions
        .iter()
        .map(|(p, offset)| {
            let mut fp = FetchPartition::default();
            fp.partition = *p;
            fp.fetch_offset = *offset;
            fp.partition_max_bytes = partition_max_bytes;
            fp
        })
        .collect();
    let mut req = FetchRequest::default();
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = max_bytes;
    req.topics = vec![t];
    req
}

/// Retries a group call while the coordinator is still loading or not yet available (bounded
/// by [`WAIT`]); any other error code fails the test.
pub fn until_coordinator_ready<T>(mut attempt: impl FnMut() -> Result<T, i16>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        match attempt() {
            Ok(v) => return v,
            Err(code)
                if (code == ResponseError::CoordinatorLoadInProgress.code()
                    || code == ResponseError::CoordinatorNotAvailable.code())
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(code) => panic!("group call failed with error {code}"),
        }
    }
}

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub fn topic_name(v: &str) -> TopicName {
    TopicName(s(v))
}

/// A JoinGroup of a consumer with one (range) protocol, 10 s session and rebalance timeouts.
pub fn join_group_request(group: &str, member_id: &str) -> JoinGroupRequest {
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = StrBytes::from_static_str("range");
    protocol.metadata = bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0]);
    let mut req = JoinGroupRequest::default();
    req.group_id = GroupId(s(group));
    req.session_timeout_ms = 10_000;
    req.rebalance_timeout_ms = 10_000;
    req.member_id = s(member_id);
    req.protocol_type = StrBytes::from_static_str("consumer");
    req.protocols = vec![protocol];
    req
}
