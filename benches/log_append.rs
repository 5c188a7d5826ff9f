//! Append throughput of the partition log, on the real disk.
//!
//! Cases (group `log_append`, throughput in bytes of batches appended):
//! - `16KiB/no_fsync`, `1MiB/no_fsync`: one append at a time, `durable: false` (page cache; the
//!   only fdatasyncs are the ones that seal a segment when it rolls);
//! - `16KiB/fdatasync`, `1MiB/fdatasync`: one append at a time, `durable: true` (one write and
//!   one fdatasync per append);
//! - `group_commit_32x16KiB/fdatasync`: 32 concurrent durable 16 KiB appends per iteration, to
//!   show the group commit coalescing them into one write and one fdatasync.
//!
//! glommio futures can only be driven by a glommio executor, and criterion's async support
//! does not know glommio. So each benchmark gets one executor (`ringbroker::runtime::block_on`)
//! on its own thread, which owns the log; criterion's `iter_custom` sends it the iteration
//! count and gets back the time the executor measured (`std::time::Instant`) around exactly
//! those appends. Retention runs between samples, outside the measured time.
//!
//! Data goes to `target/bench-data` (override with `RINGBROKER_BENCH_DIR`), not `/tmp`, which
//! may be a tmpfs. Segments are 256 MiB and `retention.bytes` is 256 MiB, so a benchmark keeps
//! at most about 512 MiB on disk; its directory is removed when it ends.

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use ringbroker::log::{AppendOptions, Log, LogConfig};
use ringbroker::runtime;

mod support;
use support::{batch_of_exact_size, bench_root, serve, Driver};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
const SEGMENT_BYTES: u64 = 256 * MIB as u64;
const RETENTION_BYTES: i64 = 256 * MIB as i64;
const GROUP_COMMIT_APPENDS: usize = 32;

fn bench_config() -> LogConfig {
    LogConfig {
        segment_bytes: SEGMENT_BYTES,
        retention_bytes: RETENTION_BYTES,
        ..LogConfig::default()
    }
}

/// How each iteration appends.
#[derive(Clone, Copy)]
enum Mode {
    /// One append of the batch, awaited.
    Sequential { durable: bool },
    /// `n` appends of the batch spawned as tasks at once, all awaited.
    Concurrent { n: usize, durable: bool },
}

/// Starts a log in a fresh directory under the bench root and serves append iterations.
fn append_driver(name: &str, batch: Bytes, mode: Mode) -> Driver {
    let root = bench_root();
    Driver::start(name, move |requests, replies| async move {
        let dir = tempfile::tempdir_in(&root).expect("creating the log directory");
        let log = Log::open(dir.path(), bench_config())
            .await
            .expect("opening the log");
        let run = |iters: u64| {
            let log = log.clone();
            let batch = batch.clone();
            async move {
                let start = Instant::now();
                for _ in 0..iters {
                    match mode {
                        Mode::Sequential { durable } => {
                            let options = AppendOptions {
                                durable,
                                now_ms: runtime::now_ms(),
                                leader_epoch: None,
                            };
                            log.append(&batch, options).await.expect("append");
                        }
                        Mode::Concurrent { n, durable } => {
                            let tasks: Vec<_> = (0..n)
                                .map(|_| {
                                    let log = log.clone();
                                    let batch = batch.clone();
                                    runtime::spawn(async move {
                                        let options = AppendOptions {
                                            durable,
                                            now_ms: runtime::now_ms(),
                                            leader_epoch: None,
                                        };
                                        log.append(&batch, options).await.expect("append");
                                    })
                                })
                                .collect();
                            for task in tasks {
                                task.await;
                            }
                        }
                    }
                }
                start.elapsed()
            }
        };
        let between = || {
            let log = log.clone();
            async move {
                log.apply_retention(runtime::now_ms())
                    .await
                    .expect("retention");
            }
        };
        serve(requests, replies, run, between).await;
        log.close().await.expect("closing the log");
        drop(log);
        dir.close().expect("removing the log directory");
    })
}

fn bench_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("log_append");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));

    for (size_name, size) in [("16KiB", 16 * KIB), ("1MiB", MIB)] {
        let batch = batch_of_exact_size(size);
        for (sync_name, durable) in [("no_fsync", false), ("fdatasync", true)] {
            let id = format!("{size_name}/{sync_name}");
            let driver = append_driver(&id, batch.clone(), Mode::Sequential { durable });
            group.throughput(Throughput::Bytes(size as u64));
            group.bench_function(id.as_str(), |b| {
                b.iter_custom(|iters| driver.measure(iters))
            });
        }
    }

    let batch = batch_of_exact_size(16 * KIB);
    let id = format!("group_commit_{GROUP_COMMIT_APPENDS}x16KiB/fdatasync");
    let driver = append_driver(
        &id,
        batch,
        Mode::Concurrent {
            n: GROUP_COMMIT_APPENDS,
            durable: true,
        },
    );
    group.throughput(Throughput::Bytes((GROUP_COMMIT_APPENDS * 16 * KIB) as u64));
    group.bench_function(id.as_str(), |b| {
        b.iter_custom(|iters| driver.measure(iters))
    });
    drop(driver);

    group.finish();
}

criterion_group! {
    name = benches;
    // Plotting takes seconds per benchmark; the numbers are what matter here.
    config = Criterion::default().without_plots();
    targets = bench_append
}
criterion_main!(benches);
