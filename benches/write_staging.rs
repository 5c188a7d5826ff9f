//! Staging a batch for a segment write (`ringbroker::runtime::WriteBuffer`), the one copy a
//! produced batch gets in the broker:
//! - `write_staging/{direct_pooled,buffered_vec}/{16KiB,1MiB}`: a buffer for one write is
//!   taken, the batch bytes copied in behind a 1 KiB head (the partial block a direct write
//!   repeats), and the buffer dropped. Direct buffers are 4 KiB-aligned and come from the
//!   shard's pool (`src/runtime/buffer_pool.rs`), so after the first iteration no allocation
//!   happens; buffered ones are a fresh `Vec` each time (what the buffered write path does).
//!   Throughput in batch bytes.
//!
//! The tail cache's hit path (reads served from written direct buffers) is measured end to
//! end in `log_read/tail_1MiB/direct`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ringbroker::runtime::{FileIo, WriteBuffer};

const KIB: usize = 1024;

fn staging(c: &mut Criterion) {
    let mut group = c.benchmark_group("write_staging");
    let head = vec![7u8; KIB];
    for (label, size) in [("16KiB", 16 * KIB), ("1MiB", 1024 * KIB)] {
        let batch = vec![42u8; size];
        group.throughput(Throughput::Bytes(size as u64));
        for (name, io) in [
            ("direct_pooled", FileIo::Direct),
            ("buffered_vec", FileIo::Buffered),
        ] {
            group.bench_function(format!("{name}/{label}"), |b| {
                b.iter(|| {
                    let mut buf = WriteBuffer::new(io, &head, size);
                    buf.extend(black_box(&batch));
                    black_box(buf.len());
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, staging);
criterion_main!(benches);
