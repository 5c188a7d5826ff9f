//! Throughput of `record_batch::validate` (header parse + CRC32C over the whole batch) on
//! uncompressed RecordBatch v2 batches of 16 KiB and 1 MiB.

use std::hint::black_box;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::record_batch::validate;

/// A valid batch of about `target` bytes (never more), made of 1 KiB-ish records with varied
/// content.
fn batch_of(target: usize) -> Bytes {
    const VALUE_LEN: usize = 1000;
    let value: Vec<u8> = (0..VALUE_LEN).map(|i| (i * 31 % 251) as u8).collect();
    let base_ts = 1_700_000_000_000i64;
    let mut builder = BatchBuilder::new(base_ts).producer(1, 0, 0);
    let mut i: i64 = 0;
    // Each record adds a little over VALUE_LEN bytes; stop before crossing the target.
    while builder.encoded_len() + VALUE_LEN + 32 <= target {
        let key = i.to_be_bytes();
        builder.push(Some(&key), Some(&value), base_ts + i, &[]);
        i += 1;
    }
    builder.build()
}

fn bench_validate(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch_validate");
    for (name, size) in [("16KiB", 16 * 1024), ("1MiB", 1024 * 1024)] {
        let batch = batch_of(size);
        assert!(validate(&batch).is_ok(), "benchmark batch must be valid");
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &batch, |b, batch| {
            b.iter(|| validate(black_box(batch)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_validate);
criterion_main!(benches);
