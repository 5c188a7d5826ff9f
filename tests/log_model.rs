//! Model test: random appends, reads, rolls, retention, truncations and restarts against a
//! plain in-memory model of the log (a list of batches and a log start offset).

use proptest::prelude::*;
use ringbroker::log::{AppendOptions, Log, LogConfig, LogError};
use ringbroker::protocol::batch_builder::{decode_records, BatchBuilder};
use ringbroker::runtime::block_on;

#[derive(Debug, Clone)]
enum Op {
    /// Append a batch of this many records, each value this many bytes.
    Append { records: usize, value_len: usize },
    /// Read at (log start + this fraction of the readable range), with a max_bytes.
    Read { at_permille: u16, max_bytes: usize },
    /// Truncate at (log start + fraction of the range).
    Truncate { at_permille: u16 },
    /// DeleteRecords at (log start + fraction of the range).
    DeleteRecords { at_permille: u16 },
    /// Retention by size with this many bytes kept.
    RetainBytes { bytes: i64 },
    /// Timestamp lookup for the timestamp of the record at this fraction.
    ByTimestamp { at_permille: u16 },
    /// Close and reopen (clean), or drop and reopen (unclean).
    Reopen { clean: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..8, 1usize..700).prop_map(|(records, value_len)| Op::Append { records, value_len }),
        3 => (0u16..1100, 1usize..5000).prop_map(|(at_permille, max_bytes)| Op::Read { at_permille, max_bytes }),
        1 => (0u16..1001).prop_map(|at_permille| Op::Truncate { at_permille }),
        1 => (0u16..1001).prop_map(|at_permille| Op::DeleteRecords { at_permille }),
        1 => (0i64..20_000).prop_map(|bytes| Op::RetainBytes { bytes }),
        1 => (0u16..1001).prop_map(|at_permille| Op::ByTimestamp { at_permille }),
        1 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

/// The model: batches as (base offset, record values), and the log start offset.
#[derive(Default)]
struct Model {
    batches: Vec<(i64, Vec<Vec<u8>>)>,
    log_start: i64,
    next_value: u64,
}

impl Model {
    fn leo(&self) -> i64 {
        self.batches
            .last()
            .map(|(b, v)| b + v.len() as i64)
            .unwrap_or(self.log_start)
    }
    fn value_at(&self, offset: i64) -> Option<&Vec<u8>> {
        self.batches.iter().find_map(|(b, v)| {
            (offset >= *b && offset < b + v.len() as i64).then(|| &v[(offset - b) as usize])
        })
    }
    fn at(&self, permille: u16) -> i64 {
        let span = self.leo() - self.log_start;
        self.log_start + span * i64::from(permille) / 1000
    }
}

/// Record timestamps are 1000 + offset, so timestamp lookups have a known answer.
fn timestamp_for(offset: i64) -> i64 {
    1000 + offset
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 300,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

async fn run_ops(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), config()).await.expect("open");
    let mut model = Model::default();
    for op in ops {
        match op {
            Op::Append { records, value_len } => {
                let base = model.leo();
                let mut b = BatchBuilder::new(timestamp_for(base));
                let mut values = Vec::new();
                for i in 0..records {
                    let mut v = format!("{:08}", model.next_value).into_bytes();
                    model.next_value += 1;
                    v.resize(value_len.max(8), b'x');
                    b.push(None, Some(&v), timestamp_for(base + i as i64), &[]);
                    values.push(v);
                }
                let info = log
                    .append(
                        &b.build(),
                        AppendOptions {
                            durable: false,
                            now_ms: 0,
                            leader_epoch: None,
                        },
                    )
                    .await
                    .expect("append");
                prop_assert_eq!(info.base_offset.0, base);
                model.batches.push((base, values));
            }
            Op::Read {
                at_permille,
                max_bytes,
            } => {
                let offset = if at_permille > 1000 {
                    model.leo() + 1
                } else {
                    model.at(at_permille)
                };
                match log.read(offset, max_bytes, None).await {
                    Ok(r) => {
                        prop_assert!(offset <= model.leo());
                        let mut rest = &r.records[..];
                        let mut saw_target = offset == model.leo();
                        let mut first = true;
                        while !rest.is_empty() {
                            let h = ringbroker::protocol::record_batch::validate(rest)
                                .map_err(|e| TestCaseError::fail(format!("bad batch: {e}")))?;
                            let recs = decode_records(&rest[..h.total_len()])
                                .map_err(|e| TestCaseError::fail(format!("{e}")))?;
                            for rec in recs {
                                prop_assert_eq!(
                                    Some(rec.value.as_ref().expect("value")),
                                    model.value_at(rec.offset)
                                );
                                saw_target |= rec.offset == offset;
                            }
                            if !first {
                                prop_assert!(r.records.len() <= max_bytes);
                            }
                            first = false;
                            rest = &rest[h.total_len()..];
                        }
                        prop_assert!(saw_target, "read at {} did not return it", offset);
                    }
                    Err(LogError::OffsetOutOfRange { .. }) => {
                        prop_assert!(offset > model.leo() || offset < model.log_start);
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("read: {e}"))),
                }
            }
            Op::Truncate { at_permille } => {
                let target = model.at(at_permille);
                let leo = log.truncate_to(target).await.expect("truncate");
                // Batches reaching `target` go whole.
                model
                    .batches
                    .retain(|(b, v)| b + v.len() as i64 - 1 < target);
                if model.batches.is_empty() {
                    // Nothing left: the log restarts at or before the truncation point.
                    prop_assert!(leo <= target);
                    model.log_start = leo;
                } else {
                    prop_assert_eq!(leo, model.leo());
                }
            }
            Op::DeleteRecords { at_permille } => {
                let target = model.at(at_permille);
                let start = log
                    .delete_records_before(target)
                    .await
                    .expect("delete records");
                prop_assert!(start >= target);
                model.log_start = start;
                prop_assert_eq!(log.offsets().log_start_offset, start);
            }
            Op::RetainBytes { bytes } => {
                let mut c = log.config();
                c.retention_bytes = bytes;
                log.set_config(c);
                let out = log.apply_retention(0).await.expect("retention");
                prop_assert!(out.log_start_offset.0 >= model.log_start);
                prop_assert!(out.log_start_offset.0 <= model.leo());
                model.log_start = out.log_start_offset.0;
                let mut c = log.config();
                c.retention_bytes = -1;
                log.set_config(c);
            }
            Op::ByTimestamp { at_permille } => {
                let offset = model.at(at_permille);
                let found = log
                    .offset_for_timestamp(timestamp_for(offset))
                    .await
                    .expect("by timestamp");
                if offset < model.leo() {
                    prop_assert_eq!(found, Some((offset, timestamp_for(offset))));
                } else {
                    prop_assert_eq!(found, None);
                }
            }
            Op::Reopen { clean } => {
                if clean {
                    log.close().await.expect("close");
                }
                drop(log);
                log = Log::open(dir.path(), config()).await.expect("reopen");
                let o = log.offsets();
                prop_assert_eq!(o.log_end_offset, model.leo());
                prop_assert_eq!(o.log_start_offset, model.log_start);
            }
        }
        let o = log.offsets();
        prop_assert_eq!(o.log_end_offset, model.leo());
        prop_assert!(o.log_start_offset <= o.log_end_offset);
        model.log_start = o.log_start_offset;
    }
    // Everything the model holds reads back, in order.
    let mut offset = model.log_start;
    while offset < model.leo() {
        let r = log.read(offset, 1 << 16, None).await.expect("final read");
        let recs = decode_records(&r.records).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let mut rest = &r.records[..];
        let mut last = offset;
        while !rest.is_empty() {
            let h = ringbroker::protocol::record_batch::validate(rest).expect("valid");
            for rec in decode_records(&rest[..h.total_len()]).expect("decode") {
                prop_assert_eq!(
                    Some(rec.value.as_ref().expect("value")),
                    model.value_at(rec.offset)
                );
            }
            last = h.next_offset();
            rest = &rest[h.total_len()..];
        }
        prop_assert!(!recs.is_empty());
        prop_assert!(last > offset);
        offset = last;
    }
    log.close().await.expect("close");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn log_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        block_on(run_ops(ops)).expect("executor")?;
    }
}
