//! Read paths of the partition log.
//!
//! - `log_read/sequential_1MiB`: consumer-style reads of 1 MiB (`read(offset, 1 MiB, None)`,
//!   then on from the next offset) over a 256 MiB log of 16 KiB batches, page cache warm
//!   (the log was just written and read once before measuring). Throughput in bytes returned.
//! - `log_read/random_offset_1B`: `read(offset, 1, None)` at random offsets of a log of
//!   ~400k batches of 100 bytes in several 8 MiB segments: segment search, sparse index lookup,
//!   the forward scan and the file read, i.e. the latency of a fetch that lands anywhere.
//! - `log_read/tail_1MiB/{direct,buffered}`: consumer-style 1 MiB reads cycling over the last
//!   16 MiB of a 32 MiB log just written: with `ringbroker.log.io=direct` they are served by
//!   the tail cache (one copy out of the written buffers), with `buffered` by the page cache.
//! - `offset_index/lookup_250k`: `OffsetIndex::lookup` alone, in memory, on 250k entries
//!   (a 1 GiB segment at the default 4 KiB index interval), at random targets.
//!
//! As in `log_append`, each log lives on its own glommio executor thread (see `Driver`):
//! criterion's `iter_custom` asks it for `iters` reads and gets back the time it measured.
//! Data goes to `target/bench-data` (or `RINGBROKER_BENCH_DIR`) and is removed at the end.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use ringbroker::log::offset_index::OffsetIndex;
use ringbroker::log::{AppendOptions, Log, LogConfig};
use ringbroker::protocol::record_batch::BatchHeader;
use ringbroker::runtime::{self, FileIo};
use ringbroker::util::rng::SeededRng;

mod support;
use support::{batch_of_exact_size, bench_root, serve, Driver};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// Sequential read: 256 MiB of 16 KiB batches, read 1 MiB (64 batches) at a time.
const SEQ_LOG_BYTES: usize = 256 * MIB;
const SEQ_BATCH: usize = 16 * KIB;
const SEQ_CHUNK: usize = MIB;

/// Random reads: ~40 MB of 100-byte batches in 8 MiB segments (5 segments).
const SMALL_BATCH: usize = 100;
const SMALL_BATCHES: usize = 400_000;
const SMALL_SEGMENT_BYTES: u64 = 8 * MIB as u64;

const INDEX_ENTRIES: u32 = 250_000;

/// `count` copies of `batch` back to back: one produce request of several batches.
fn repeated(batch: &[u8], count: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(batch.len() * count);
    for _ in 0..count {
        out.extend_from_slice(batch);
    }
    out
}

/// Appends `total_batches` copies of `batch`, `per_request` at a time, then flushes.
async fn fill(log: &Log, batch: &[u8], total_batches: usize, per_request: usize) {
    let request = repeated(batch, per_request);
    let mut left = total_batches;
    while left > 0 {
        let n = left.min(per_request);
        let options = AppendOptions {
            durable: false,
            now_ms: runtime::now_ms(),
            leader_epoch: None,
        };
        log.append(&request[..n * batch.len()], options)
            .await
            .expect("append");
        left -= n;
    }
    log.flush().await.expect("flush");
}

/// The offset after the last batch in `records` (whole batches, as `read` returns them).
fn next_offset_after(records: &[u8]) -> i64 {
    let mut pos = 0;
    let mut next = -1;
    while pos < records.len() {
        let header = BatchHeader::parse(&records[pos..]).expect("a batch header");
        next = header.next_offset();
        pos += header.total_len();
    }
    next
}

/// Tail reads: 32 MiB of 16 KiB batches; reads cycle over the last 16 MiB.
const TAIL_LOG_BYTES: usize = 32 * MIB;
const TAIL_READ_SPAN: usize = 16 * MIB;

/// A log of `log_bytes` of 16 KiB batches written as `io` says, read 1 MiB at a time over its
/// last `read_span` bytes, cycling; one untimed pass first (the page cache warm).
fn chunk_reader_driver(io: FileIo, log_bytes: usize, read_span: usize) -> Driver {
    let root = bench_root();
    Driver::start("chunks", move |requests, replies| async move {
        let dir = tempfile::tempdir_in(&root).expect("creating the log directory");
        let config = LogConfig {
            io,
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), config)
            .await
            .expect("opening the log");
        let batch = batch_of_exact_size(SEQ_BATCH);
        fill(&log, &batch, log_bytes / SEQ_BATCH, SEQ_CHUNK / SEQ_BATCH).await;
        let end = log.offsets().log_end_offset;
        let first = end - (read_span / SEQ_BATCH) as i64;
        let next = std::rc::Rc::new(std::cell::Cell::new(first));
        let run = |iters: u64| {
            let log = log.clone();
            let next = next.clone();
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let result = log.read(next.get(), SEQ_CHUNK, None).await.expect("read");
                    assert_eq!(result.records.len(), SEQ_CHUNK, "a whole 1 MiB chunk");
                    let after = next_offset_after(&result.records);
                    next.set(if after >= end { first } else { after });
                    black_box(result);
                }
                start.elapsed()
            }
        };
        run((read_span / SEQ_CHUNK) as u64).await;
        serve(requests, replies, run, || async {}).await;
        if io == FileIo::Direct {
            let stats = log.tail_cache_stats();
            assert!(stats.hits > 0 && stats.misses == 0, "tail cache: {stats:?}");
        }
        log.close().await.expect("closing the log");
        drop(log);
        dir.close().expect("removing the log directory");
    })
}

fn random_driver() -> Driver {
    let root = bench_root();
    Driver::start("random", move |requests, replies| async move {
        let dir = tempfile::tempdir_in(&root).expect("creating the log directory");
        let config = LogConfig {
            segment_bytes: SMALL_SEGMENT_BYTES,
            ..LogConfig::default()
        };
        let log = Log::open(dir.path(), config)
            .await
            .expect("opening the log");
        let batch = batch_of_exact_size(SMALL_BATCH);
        fill(&log, &batch, SMALL_BATCHES, 1000).await;
        let end = log.offsets().log_end_offset;
        assert!(log.offsets().segments >= 4, "several segments");
        let mut rng = SeededRng::new(0x9E37_79B9_7F4A_7C15);
        let targets: Vec<i64> = (0..4096)
            .map(|_| (rng.next_u64() % end as u64) as i64)
            .collect();
        let cursor = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let run = |iters: u64| {
            let log = log.clone();
            let targets = targets.clone();
            let cursor = cursor.clone();
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let i = cursor.get();
                    cursor.set((i + 1) % targets.len());
                    let result = log.read(targets[i], 1, None).await.expect("read");
                    assert_eq!(result.records.len(), SMALL_BATCH, "one batch");
                    black_box(result);
                }
                start.elapsed()
            }
        };
        // Warm the page cache with every target once.
        run(targets.len() as u64).await;
        serve(requests, replies, run, || async {}).await;
        log.close().await.expect("closing the log");
        drop(log);
        dir.close().expect("removing the log directory");
    })
}

fn bench_log_read(c: &mut Criterion) {
    let mut group = c.benchmark_group("log_read");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));

    let driver = chunk_reader_driver(FileIo::Buffered, SEQ_LOG_BYTES, SEQ_LOG_BYTES);
    group.throughput(Throughput::Bytes(SEQ_CHUNK as u64));
    group.bench_function("sequential_1MiB", |b| {
        b.iter_custom(|iters| driver.measure(iters))
    });
    drop(driver);

    group.throughput(Throughput::Bytes(SEQ_CHUNK as u64));
    for (name, io) in [("direct", FileIo::Direct), ("buffered", FileIo::Buffered)] {
        let driver = chunk_reader_driver(io, TAIL_LOG_BYTES, TAIL_READ_SPAN);
        group.bench_function(format!("tail_1MiB/{name}"), |b| {
            b.iter_custom(|iters| driver.measure(iters))
        });
        drop(driver);
    }

    let driver = random_driver();
    group.throughput(Throughput::Elements(1));
    group.bench_function("random_offset_1B", |b| {
        b.iter_custom(|iters| driver.measure(iters))
    });
    drop(driver);

    group.finish();
}

fn bench_index_lookup(c: &mut Criterion) {
    let mut index = OffsetIndex::new();
    // One entry per ~4 KiB of log, ~10 records apart.
    for i in 0..INDEX_ENTRIES {
        assert!(index.append(i * 10 + 9, (i + 1) * 4096));
    }
    let mut rng = SeededRng::new(0x2545_F491_4F6C_DD1D);
    let max = u64::from(INDEX_ENTRIES * 10 + 10);
    let targets: Vec<u32> = (0..4096).map(|_| (rng.next_u64() % max) as u32).collect();

    let mut group = c.benchmark_group("offset_index");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Elements(1));
    group.bench_function("lookup_250k", |b| {
        let mut i = 0usize;
        b.iter(|| {
            i = (i + 1) & (targets.len() - 1);
            black_box(index.lookup(black_box(targets[i])))
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    // Plotting takes seconds per benchmark; the numbers are what matter here.
    config = Criterion::default().without_plots();
    targets = bench_log_read, bench_index_lookup
}
criterion_main!(benches);
