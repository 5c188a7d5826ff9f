//! Idempotent producers against the real broker binary, over raw Kafka requests:
//! InitProducerId hands out distinct ids (never reused, across a clean restart and a kill -9),
//! a resent batch is answered with its original offset and stored once, gaps and stale epochs
//! are refused, and deduplication survives both kinds of restart. Every wait is bounded.

use bytes::Bytes;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::record_batch::{
    compute_crc, ATTRIBUTES_OFFSET, CRC_OFFSET, TRANSACTIONAL_FLAG_MASK,
};

mod broker;
use broker::{Broker, Client};

const NONE: i16 = 0;
const INVALID_REQUEST: i16 = 42;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const INVALID_RECORD: i16 = 87;

const TOPIC: &str = "idem";
/// The shared client plus the requests this file sends.
struct IdemClient(Client);

impl std::ops::Deref for IdemClient {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0
    }
}

impl std::ops::DerefMut for IdemClient {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

impl IdemClient {
    /// InitProducerId: (error code, producer id, epoch).
    fn init_producer_id(
        &mut self,
        version: i16,
        transactional_id: Option<&str>,
        current: Option<(i64, i16)>,
    ) -> (i16, i64, i16) {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id =
            transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string())));
        req.transaction_timeout_ms = 60_000;
        let (pid, epoch) = current.unwrap_or((-1, -1));
        req.producer_id = ProducerId(pid);
        req.producer_epoch = epoch;
        let resp: InitProducerIdResponse = self.call(ApiKey::InitProducerId, version, &req);
        (resp.error_code, resp.producer_id.0, resp.producer_epoch)
    }

    /// Produce v9, acks=all, `records` to partition 0: (error code, base offset).
    fn produce(&mut self, records: Bytes) -> (i16, i64) {
        self.produce_records(9, -1, TOPIC, 0, records)
    }

    /// ListOffsets v7 latest of partition 0: the log end offset.
    fn log_end(&mut self) -> i64 {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = 0;
        p.timestamp = -1;
        let mut t = ListOffsetsTopic::default();
        t.name = TopicName(StrBytes::from_static_str(TOPIC));
        t.partitions = vec![p];
        let mut req = ListOffsetsRequest::default();
        req.replica_id = kafka_protocol::messages::BrokerId(-1);
        req.topics = vec![t];
        let resp: ListOffsetsResponse = self.call(ApiKey::ListOffsets, 7, &req);
        let p = &resp.topics[0].partitions[0];
        assert_eq!(p.error_code, NONE);
        p.offset
    }
}

/// An idempotent batch of `count` records.
fn batch(producer_id: i64, epoch: i16, base_sequence: i32, count: usize) -> Bytes {
    let mut b = BatchBuilder::new(1_700_000_000_000).producer(producer_id, epoch, base_sequence);
    for i in 0..count {
        let v = format!(
            "pid {producer_id} epoch {epoch} seq {}",
            base_sequence + i as i32
        );
        b.push(None, Some(v.as_bytes()), 1_700_000_000_000 + i as i64, &[]);
    }
    b.build()
}

/// The same batch flagged transactional (CRC recomputed).
fn transactional(batch: &Bytes) -> Bytes {
    let mut bytes = batch.to_vec();
    bytes[ATTRIBUTES_OFFSET + 1] |= TRANSACTIONAL_FLAG_MASK as u8;
    let crc = compute_crc(&bytes);
    bytes[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(bytes)
}

/// Ids from several connections (they land on either shard) and every version.
fn new_ids(broker: &Broker, count: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..count {
        let mut c = IdemClient(broker.client());
        let version = (i % 5) as i16;
        let (code, id, epoch) = c.init_producer_id(version, None, None);
        assert_eq!((code, epoch), (NONE, 0), "InitProducerId v{version}");
        assert!(id >= 0);
        ids.push(id);
    }
    ids
}

#[test]
fn idempotent_produce_survives_clean_and_killed_restarts() {
    let mut broker = Broker::start(&[]);
    IdemClient(broker.client()).create_topic(TOPIC, 2, &[]);

    let mut handed_out = new_ids(&broker, 12);
    let mut sorted = handed_out.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), handed_out.len(), "ids repeat: {handed_out:?}");

    let mut c = IdemClient(broker.client());
    // KIP-360: an idempotent producer that sends its current id and epoch gets a fresh id.
    let pid = handed_out[0];
    let (code, fresh, epoch) = c.init_producer_id(4, None, Some((pid, 0)));
    assert_eq!((code, epoch), (NONE, 0));
    assert!(!handed_out.contains(&fresh));
    handed_out.push(fresh);
    // Transactions are not supported.
    let (code, id, _) = c.init_producer_id(4, Some("txn-1"), None);
    assert_eq!((code, id), (INVALID_REQUEST, -1));

    // Dedup of a resent batch.
    assert_eq!(c.produce(batch(pid, 0, 0, 3)), (NONE, 0));
    assert_eq!(c.produce(batch(pid, 0, 0, 3)), (NONE, 0));
    assert_eq!(c.log_end(), 3, "the duplicate was not written");
    assert_eq!(c.produce(batch(pid, 0, 3, 2)), (NONE, 3));
    // A gap, a stale epoch, and what an idempotent produce may not carry.
    assert_eq!(
        c.produce(batch(pid, 0, 10, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(c.produce(batch(pid, 1, 0, 2)), (NONE, 5));
    assert_eq!(c.produce(batch(pid, 0, 5, 1)).0, INVALID_PRODUCER_EPOCH);
    let mut two = batch(pid, 1, 2, 1).to_vec();
    two.extend_from_slice(&batch(pid, 1, 3, 1));
    assert_eq!(c.produce(Bytes::from(two)).0, INVALID_RECORD);
    assert_eq!(
        c.produce(transactional(&batch(pid, 1, 2, 1))).0,
        INVALID_TXN_STATE
    );
    assert_eq!(c.log_end(), 7);
    drop(c);

    // Clean restart: the last batch is still a duplicate at its original offset.
    broker.restart();
    let mut c = IdemClient(broker.client());
    assert_eq!(c.produce(batch(pid, 1, 0, 2)), (NONE, 5));
    assert_eq!(c.produce(batch(pid, 0, 5, 1)).0, INVALID_PRODUCER_EPOCH);
    assert_eq!(c.log_end(), 7);
    let after_clean = new_ids(&broker, 6);
    let max_before = handed_out.iter().copied().max().unwrap_or(-1);
    assert!(
        after_clean.iter().all(|id| *id > max_before),
        "ids after a restart {after_clean:?} must exceed {max_before}"
    );
    handed_out.extend(after_clean);

    // kill -9 right after an acknowledged batch: still deduplicated after recovery.
    assert_eq!(c.produce(batch(pid, 1, 2, 4)), (NONE, 7));
    drop(c);
    broker.kill9_and_restart();
    let mut c = IdemClient(broker.client());
    assert_eq!(c.produce(batch(pid, 1, 2, 4)), (NONE, 7));
    assert_eq!(c.log_end(), 11);
    assert_eq!(
        c.produce(batch(pid, 1, 7, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(c.produce(batch(pid, 1, 6, 1)), (NONE, 11));
    let after_kill = new_ids(&broker, 6);
    let max_before = handed_out.iter().copied().max().unwrap_or(-1);
    assert!(
        after_kill.iter().all(|id| *id > max_before),
        "ids after kill -9 {after_kill:?} must exceed {max_before}"
    );
}
