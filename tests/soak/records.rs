//! The numbered records of the soak. Each partition has exactly one producer, which numbers
//! its records 0, 1, 2, … with no gaps, so in a correct log the record at offset `o` carries
//! number `o`: any loss, duplicate or reordering shows as an offset/number mismatch.

use bytes::Bytes;
use ringbroker::protocol::batch_builder::{decode_records, BatchBuilder};
use ringbroker::protocol::record_batch::{BatchHeader, BATCH_LENGTH_OFFSET, LOG_OVERHEAD};

const TIMESTAMP: i64 = 1_700_000_000_000;

pub fn value(partition: i32, number: i64) -> String {
    format!("p{partition}:n{number}")
}

/// The (partition, number) a record value names, if it is one of ours.
pub fn parse(value: &[u8]) -> Option<(i32, i64)> {
    let text = std::str::from_utf8(value).ok()?;
    let (p, n) = text.strip_prefix('p')?.split_once(":n")?;
    Some((p.parse().ok()?, n.parse().ok()?))
}

/// An idempotent batch of records `first .. first + count` of `partition`; the sequence
/// number of a record is its number (Kafka counts sequences in records, from 0).
pub fn batch(producer_id: i64, epoch: i16, partition: i32, first: i64, count: i32) -> Bytes {
    let mut b = BatchBuilder::new(TIMESTAMP).producer(producer_id, epoch, first as i32);
    for i in 0..i64::from(count) {
        let v = value(partition, first + i);
        b.push(None, Some(v.as_bytes()), TIMESTAMP + first + i, &[]);
    }
    b.build()
}

/// One record read back: its offset and value (None when the value is null or the batch
/// could not be decoded).
pub struct ReadRecord {
    pub offset: i64,
    pub value: Option<Vec<u8>>,
}

/// Every record of the complete batches in a Fetch `records` field (a truncated batch at the
/// end is ignored, as Kafka clients do).
pub fn read_all(mut records: &[u8]) -> Result<Vec<ReadRecord>, String> {
    let mut out = Vec::new();
    while records.len() >= LOG_OVERHEAD {
        let length = i32::from_be_bytes(
            records[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4]
                .try_into()
                .map_err(|_| "short batch length".to_string())?,
        );
        let total = LOG_OVERHEAD + usize::try_from(length).map_err(|_| "negative length")?;
        if records.len() < total {
            break;
        }
        let header = BatchHeader::parse(&records[..total]).map_err(|e| e.to_string())?;
        let decoded = decode_records(&records[..total])
            .map_err(|e| format!("batch at {}: {e}", header.base_offset))?;
        out.extend(decoded.into_iter().map(|r| ReadRecord {
            offset: r.offset,
            value: r.value,
        }));
        records = &records[total..];
    }
    Ok(out)
}
