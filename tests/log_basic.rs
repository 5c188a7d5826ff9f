//! End-to-end behaviour of the partition log on a real file system.

use ringbroker::log::{AppendOptions, Log, LogConfig, LogError};
use ringbroker::model::Offset;
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
        leader_epoch: None,
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
        assert_eq!((a.base_offset, a.last_offset), (Offset(0), Offset(2)));
        assert_eq!((b.base_offset, b.last_offset), (Offset(3), Offset(4)));
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
        assert!(recs
            .iter()
            .any(|r| r.offset == 777
                && r.value.as_deref() == Some(format!("value-{}", 777).as_bytes())));
        let next = log.append(&batch(1000, 1, 0), opts(0)).await.unwrap();
        assert_eq!(next.base_offset, Offset(1000));
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

#[test]
fn concurrent_durable_appends_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let log = Log::open(dir.path(), LogConfig::default()).await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..64 {
            let log = log.clone();
            tasks.push(ringbroker::runtime::spawn(async move {
                log.append(
                    &batch(i, 4, 1000),
                    AppendOptions {
                        durable: true,
                        now_ms: 0,
                        leader_epoch: None,
                    },
                )
                .await
                .unwrap()
            }));
        }
        let mut bases = Vec::new();
        for t in tasks {
            bases.push(t.await.base_offset.0);
        }
        bases.sort();
        assert_eq!(bases, (0..64).map(|i| i * 4).collect::<Vec<_>>());
        let stats = log.stats();
        assert_eq!(stats.appends, 64);
        assert!(
            stats.fsyncs < 64 && stats.flights < 64,
            "group commit should coalesce: {stats:?}"
        );
        let o = log.offsets();
        assert_eq!(
            o.recovery_point, 256,
            "durable appends advance the recovery point"
        );
    })
    .unwrap();
}

#[test]
fn flush_policy_by_messages_and_explicit_flush() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 10,
        ..LogConfig::default()
    };
    block_on(async {
        let log = Log::open(dir.path(), config).await.unwrap();
        log.append(&batch(0, 5, 0), opts(0)).await.unwrap();
        assert_eq!(
            log.offsets().recovery_point,
            0,
            "5 < flush.messages: no fsync"
        );
        log.append(&batch(5, 5, 0), opts(0)).await.unwrap();
        assert_eq!(log.offsets().recovery_point, 10, "flush.messages reached");
        log.append(&batch(10, 1, 0), opts(0)).await.unwrap();
        assert_eq!(log.offsets().recovery_point, 10);
        log.flush().await.unwrap();
        assert_eq!(log.offsets().recovery_point, 11);
        let fsyncs = log.stats().fsyncs;
        log.flush().await.unwrap();
        assert_eq!(log.stats().fsyncs, fsyncs, "nothing new: no fsync");
    })
    .unwrap();
}

#[test]
fn flush_ms_is_due_by_the_given_clock() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_ms: 1000,
        ..LogConfig::default()
    };
    block_on(async {
        let log = Log::open(dir.path(), config).await.unwrap();
        log.append(&batch(0, 2, 0), opts(10_000)).await.unwrap();
        assert!(!log.flush_if_due(10_500).await.unwrap());
        assert_eq!(log.offsets().recovery_point, 0);
        assert!(log.flush_if_due(11_000).await.unwrap());
        assert_eq!(log.offsets().recovery_point, 2);
    })
    .unwrap();
}

#[test]
fn segments_roll_by_size_and_age_and_retention_deletes_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 1024,
        segment_ms: 60_000,
        retention_ms: 3_600_000,
        ..LogConfig::default()
    };
    block_on(async {
        let log = Log::open(dir.path(), config).await.unwrap();
        let one = batch(0, 1, 0).len();
        // Size: batches of `one` bytes, segments of 1024 bytes.
        let per_segment = 1024 / one;
        for i in 0..per_segment {
            log.append(&batch(i, 1, 1_000), opts(1_000)).await.unwrap();
        }
        assert_eq!(log.offsets().segments, 1);
        log.append(&batch(0, 1, 1_000), opts(1_000)).await.unwrap();
        assert_eq!(log.offsets().segments, 2, "size roll");
        // Age: the active segment got its first batch at t=1000.
        log.append(&batch(0, 1, 50_000), opts(50_000))
            .await
            .unwrap();
        assert_eq!(log.offsets().segments, 2);
        log.append(&batch(0, 1, 70_000), opts(70_000))
            .await
            .unwrap();
        assert_eq!(log.offsets().segments, 3, "age roll");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"00000000000000000000.log".to_string()));
        assert!(names.contains(&format!("{:020}.index", per_segment)));
        assert!(names.contains(&format!("{:020}.timeindex", per_segment)));

        // Retention by time: the first segment's newest record is at t=1000.
        let none = log.apply_retention(1_000 + 3_600_000).await.unwrap();
        assert!(none.deleted_segments.is_empty());
        let out = log.apply_retention(1_001 + 3_600_000).await.unwrap();
        assert_eq!(out.deleted_segments, vec![0]);
        assert_eq!(out.log_start_offset, Offset(per_segment as i64));
        assert!(!dir.path().join("00000000000000000000.log").exists());
        assert!(matches!(
            log.read(0, 100, None).await,
            Err(LogError::OffsetOutOfRange { .. })
        ));
        // The active segment is never deleted, however old.
        let out = log.apply_retention(i64::MAX / 2).await.unwrap();
        assert_eq!(log.offsets().segments, 1, "{out:?}");
        let leo = log.offsets().log_end_offset;
        assert_eq!(log.offsets().log_start_offset, leo - 1);
    })
    .unwrap();
}

#[test]
fn read_respects_max_bytes_and_upper_bound() {
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let log = Log::open(dir.path(), LogConfig::default()).await.unwrap();
        for i in 0..10 {
            log.append(&batch(i * 10, 10, 0), opts(0)).await.unwrap();
        }
        let all = log.read(0, 1 << 20, None).await.unwrap();
        let sizes: Vec<usize> = headers(&all.records)
            .iter()
            .map(|h| h.total_len())
            .collect();
        assert_eq!(sizes.len(), 10);
        // The first batch comes whole even when larger than max_bytes.
        assert_eq!(log.read(0, 1, None).await.unwrap().records.len(), sizes[0]);
        let three: usize = sizes[..3].iter().sum();
        assert_eq!(
            log.read(0, three + 5, None).await.unwrap().records.len(),
            three
        );
        assert_eq!(
            log.read(0, three - 1, None).await.unwrap().records.len(),
            three - sizes[2]
        );
        // Nothing at or after the bound.
        let bounded = log.read(0, 1 << 20, Some(35)).await.unwrap();
        assert_eq!(headers(&bounded.records).len(), 4);
        assert!(log
            .read(40, 1 << 20, Some(40))
            .await
            .unwrap()
            .records
            .is_empty());
    })
    .unwrap();
}

#[test]
fn timestamps_lookup_and_max() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 200,
        ..LogConfig::default()
    };
    block_on(async {
        let log = Log::open(dir.path(), config).await.unwrap();
        for i in 0..50 {
            // Records at offsets 2i, 2i+1 with timestamps 10_000 + 100 i (+1).
            log.append(&batch(i * 2, 2, 10_000 + 100 * i as i64), opts(0))
                .await
                .unwrap();
        }
        assert!(log.offsets().segments > 2);
        assert_eq!(
            log.offset_for_timestamp(0).await.unwrap(),
            Some((0, 10_000))
        );
        assert_eq!(
            log.offset_for_timestamp(10_001).await.unwrap(),
            Some((1, 10_001))
        );
        assert_eq!(
            log.offset_for_timestamp(12_050).await.unwrap(),
            Some((42, 12_100))
        );
        assert_eq!(log.offset_for_timestamp(20_000).await.unwrap(), None);
        assert_eq!(log.max_timestamp(), Some((99, 14_901)));
    })
    .unwrap();
}
