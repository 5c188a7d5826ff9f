//! End-to-end behaviour of the partition log on a real file system.

use ringbroker::log::{AppendOptions, Log, LogConfig, LogError};
use ringbroker::protocol::batch_builder::{decode_records, BatchBuilder};
use ringbroker::protocol::record_batch::{BatchHeader, TimestampType};
use ringbroker::runtime::block_on;

fn batch(first_value: usize, records: usize, timestamp: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(timestamp);
    for i in 0..records {
        let v = format!("value-{}", first_value + i);
        b.push(None, Some(v.as_bytes()), timestamp + i as i64, &[]);
    }
    b.build().to_vec()
}

fn opts(now: i64) -> AppendOptions {
    AppendOptions {
        durable: false,
        now_ms: now,
    }
}

/// Splits a read result into batch headers.
fn headers(mut bytes: &[u8]) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let h = BatchHeader::parse(bytes).expect("batch header");
        bytes = &bytes[h.total_len()..];
        out.push(h);
    }
    out
}

#[test]
fn append_assigns_offsets_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let log = Log::open(dir.path(), LogConfig::default()).await.unwrap();
        let a = log.append(&batch(0, 3, 1000), opts(5)).await.unwrap();
        let b = log.append(&batch(3, 2, 2000), opts(6)).await.unwrap();
        assert_eq!((a.base_offset, a.last_offset), (0, 2));
        assert_eq!((b.base_offset, b.last_offset), (3, 4));
        assert_eq!(log.offsets().log_end_offset, 5);

        let all = log.read(0, 1 << 20, None).await.unwrap();
        let hs = headers(&all.records);
        assert_eq!(hs.len(), 2);
        assert_eq!(hs[1].base_offset, 3);
        let recs = decode_records(&all.records[..hs[0].total_len()]).unwrap();
        assert_eq!(recs[2].offset, 2);
        assert_eq!(recs[2].value.as_deref(), Some(&b"value-2"[..]));

        // Reading from an offset inside a batch returns that whole batch.
        let mid = log.read(4, 1, None).await.unwrap();
        assert_eq!(headers(&mid.records)[0].base_offset, 3);
        // At the end: empty. Past the end: out of range.
        assert!(log.read(5, 100, None).await.unwrap().records.is_empty());
        assert!(matches!(
            log.read(6, 100, None).await,
            Err(LogError::OffsetOutOfRange { .. })
        ));
        log.close().await.unwrap();
    })
    .unwrap();
}

#[test]
fn bad_crc_is_rejected_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let log = Log::open(dir.path(), LogConfig::default()).await.unwrap();
        let mut bad = batch(0, 3, 1000);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let mut two = batch(0, 1, 1000);
        two.extend_from_slice(&bad);
        assert!(matches!(
            log.append(&two, opts(0)).await,
            Err(LogError::InvalidBatch { .. })
        ));
        assert_eq!(log.offsets().log_end_offset, 0);
        assert!(matches!(
            log.append(&[], opts(0)).await,
            Err(LogError::EmptyAppend)
        ));
    })
    .unwrap();
}

#[test]
fn data_survives_clean_restart_without_scanning() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    };
    block_on(async {
        let log = Log::open(dir.path(), config.clone()).await.unwrap();
        for i in 0..200 {
            log.append(&batch(i * 5, 5, 1000 + i as i64), opts(0))
                .await
                .unwrap();
        }
        assert!(log.offsets().segments > 5);
        log.close().await.unwrap();
        assert!(matches!(
            log.append(&batch(0, 1, 0), opts(0)).await,
            Err(LogError::Closed(_))
        ));

        let log = Log::open(dir.path(), config.clone()).await.unwrap();
        let report = log.recovery_report().clone();
        assert!(report.clean_shutdown);
        assert_eq!(report.scanned_segments, 0);
        assert!(report.scanned_bytes < 4096 * report.segments as u64 / 2);
        assert_eq!(log.offsets().log_end_offset, 1000);
        let r = log.read(777, 10, None).await.unwrap();
        let recs = decode_records(&r.records).unwrap();
        assert!(recs.iter().any(|r| r.offset == 777
            && r.value.as_deref() == Some(format!("value-{}", 777).as_bytes())));
        let next = log.append(&batch(1000, 1, 0), opts(0)).await.unwrap();
        assert_eq!(next.base_offset, 1000);
    })
    .unwrap();
}

#[test]
fn log_append_time_stamps_batches() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    block_on(async {
        let log = Log::open(dir.path(), config).await.unwrap();
        let info = log.append(&batch(0, 2, 10), opts(123_456)).await.unwrap();
        assert_eq!(info.log_append_time_ms, 123_456);
        let r = log.read(0, 1000, None).await.unwrap();
        let h = ringbroker::protocol::record_batch::validate(&r.records).unwrap();
        assert_eq!(h.max_timestamp, 123_456);
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
    })
    .unwrap();
}
