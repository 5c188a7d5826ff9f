//! ENOSPC under a running broker: its data directory is on a small tmpfs that producers fill.
//! Producers get KAFKA_STORAGE_ERROR, the broker stays up and keeps serving, everything
//! acknowledged before is intact, and producing works again once space is freed. Needs root
//! (to mount the tmpfs); skipped otherwise.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use ringbroker::protocol::batch_builder::{decode_records, BatchBuilder};
use ringbroker::protocol::record_batch::BatchHeader;

mod broker;
mod tmpfs;
use broker::{topic_name, Broker, Client};
use tmpfs::Tmpfs;

const TOPIC: &str = "fills-the-disk";
const RECORDS_PER_BATCH: u64 = 64;
const VALUE_BYTES: usize = 1024;
/// More than the file system can hold, so the loop always meets ENOSPC.
const MAX_BATCHES: u64 = 2_000;

/// A batch whose record values start with their sequence numbers.
fn batch(first_seq: u64) -> Bytes {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    for seq in first_seq..first_seq + RECORDS_PER_BATCH {
        let mut value = vec![0u8; VALUE_BYTES];
        value[..8].copy_from_slice(&seq.to_be_bytes());
        b.push(None, Some(&value), 1_700_000_000_000, &[]);
    }
    b.build()
}

/// Produce v9, acks=1: (error code, base offset).
fn produce(c: &mut Client, records: Bytes) -> (i16, i64) {
    c.produce_records(9, 1, TOPIC, 0, records)
}

/// Every record's sequence number, read from offset 0 with Fetch v12.
fn read_all(c: &mut Client) -> Vec<u64> {
    let mut seqs = Vec::new();
    let mut offset = 0i64;
    for _ in 0..10_000 {
        let mut p = FetchPartition::default();
        p.partition = 0;
        p.fetch_offset = offset;
        p.partition_max_bytes = 1 << 20;
        let mut t = FetchTopic::default();
        t.topic = topic_name(TOPIC);
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.replica_id = kafka_protocol::messages::BrokerId(-1);
        req.max_wait_ms = 0;
        req.max_bytes = 4 << 20;
        req.topics = vec![t];
        let resp: FetchResponse = c.call(ApiKey::Fetch, 12, &req);
        let part = &resp.responses[0].partitions[0];
        assert_eq!(part.error_code, 0, "fetch at {offset}");
        let records = part.records.clone().unwrap_or_default();
        if records.is_empty() {
            return seqs;
        }
        let mut rest: &[u8] = &records;
        while let Ok(h) = BatchHeader::parse(rest) {
            if h.total_len() > rest.len() {
                break;
            }
            for r in decode_records(&rest[..h.total_len()]).expect("stored batch decodes") {
                let v = r.value.expect("value");
                seqs.push(u64::from_be_bytes(v[..8].try_into().expect("8 bytes")));
            }
            offset = h.next_offset();
            rest = &rest[h.total_len()..];
        }
    }
    panic!("reading the partition did not end");
}

fn metadata_answers(c: &mut Client) -> bool {
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &MetadataRequest::default());
    resp.brokers.len() == 1
}

#[test]
fn full_disk_fails_produce_then_recovers() {
    let Some(fs) = Tmpfs::mount_or_skip("full_disk_fails_produce_then_recovers", "24m") else {
        return;
    };
    let filler = fs.path.join("filler");
    std::fs::write(&filler, vec![1u8; 6 << 20]).expect("write the filler file");
    let broker = Broker::start_with_data_dir(
        Some(fs.path.join("data")),
        &[
            "offsets.topic.num.partitions=1",
            "log.segment.bytes=1048576",
        ],
    );
    let mut c = broker.client();
    c.create_topic(TOPIC, 1, &[]);

    // Fill the disk: every acknowledged batch must stay readable.
    let mut acked = 0u64;
    let mut refused = None;
    for _ in 0..MAX_BATCHES {
        let (code, base) = produce(&mut c, batch(acked));
        if code != 0 {
            refused = Some(code);
            break;
        }
        assert_eq!(base as u64, acked, "offsets are contiguous");
        acked += RECORDS_PER_BATCH;
    }
    assert_eq!(
        refused,
        Some(ResponseError::KafkaStorageError.code()),
        "a full disk is KAFKA_STORAGE_ERROR (after {acked} records)"
    );
    assert!(acked > 0, "something fit before the disk was full");
    // Still up, still serving, nothing acknowledged lost, nothing half-written visible.
    assert!(metadata_answers(&mut c));
    let mut other = broker.client();
    assert!(metadata_answers(&mut other));
    assert_eq!(read_all(&mut c), (0..acked).collect::<Vec<_>>());
    // Still full: refused again, and still intact.
    assert_eq!(
        produce(&mut c, batch(acked)).0,
        ResponseError::KafkaStorageError.code()
    );

    // Space comes back: producing works again, from where it stopped.
    std::fs::remove_file(&filler).expect("remove the filler");
    for _ in 0..20 {
        let (code, base) = produce(&mut c, batch(acked));
        assert_eq!(code, 0, "produce after space was freed");
        assert_eq!(base as u64, acked);
        acked += RECORDS_PER_BATCH;
    }
    assert_eq!(read_all(&mut c), (0..acked).collect::<Vec<_>>());
    broker.stop_cleanly();
    drop(fs);
}
