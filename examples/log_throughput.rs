//! Append throughput of one partition log, as a command-line tool.
//!
//! ```sh
//! cargo run --release --example log_throughput -- \
//!     --dir target/log-throughput --batch-size 1048576 --total 2G --sync end
//! ```
//!
//! Appends copies of one valid batch of exactly `--batch-size` bytes (built once with
//! `BatchBuilder`: a single record whose value fills it) until `--total` bytes, then, with
//! `--sync end`, one `flush()` (fdatasync). `--sync each` makes every append durable (one
//! fdatasync per append); `--sync none` leaves the data in the page cache. `--inflight N` keeps
//! N appends in flight (N tasks appending in turn), so the group commit can coalesce them.
//!
//! The log lives in `--dir` with 1 GiB segments; log files left there by an earlier run are
//! deleted first (anything else in the directory makes the tool refuse to run). The timed span
//! is from the first append to the last append (and the flush, for `--sync end`); opening and
//! closing the log are not included. `append_seconds` stops before the final flush; the
//! latencies are per append call. `--write-behind` and `--index-interval-bytes` are for
//! experiments (see docs/benchmarks.md). Prints one machine-readable line:
//!
//! ```text
//! log_throughput bytes=2147483648 seconds=2.631 mib_per_s=778.4 batch_size=1048576 sync=end inflight=1 batches=2048 append_seconds=1.911 write_behind=0 append_p50_us=612 append_p99_us=2331 append_max_us=601087
//! ```

use std::cell::{Cell, RefCell};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use ringbroker::log::checkpoint::{CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE};
use ringbroker::log::segment::{SegmentPaths, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use ringbroker::log::{AppendOptions, Log, LogConfig};
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::record_batch::BATCH_HEADER_LEN;
use ringbroker::runtime;
use ringbroker::runtime::FileIo;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SyncMode {
    /// No fdatasync: the data is left in the page cache.
    None,
    /// Every append is durable (one fdatasync per append, shared by appends in flight).
    Each,
    /// One flush() after the last append.
    End,
}

impl SyncMode {
    fn name(self) -> &'static str {
        match self {
            SyncMode::None => "none",
            SyncMode::Each => "each",
            SyncMode::End => "end",
        }
    }
}

#[derive(Debug, Clone, Parser)]
#[command(about = "Measure the append throughput of a ringbroker partition log")]
struct Args {
    /// Log directory (created if missing; old log files in it are deleted first).
    #[arg(long, default_value = "target/log-throughput")]
    dir: PathBuf,
    /// Size of each batch in bytes (suffixes K, M, G = KiB, MiB, GiB).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    batch_size: u64,
    /// Bytes to append in all (rounded up to whole batches; suffixes K, M, G).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    total: u64,
    /// When to fdatasync.
    #[arg(long, value_enum, default_value_t = SyncMode::End)]
    sync: SyncMode,
    /// Appends kept in flight at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    inflight: u64,
    /// segment.bytes of the log.
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    segment_bytes: u64,
    /// index.interval.bytes of the log (suffixes K, M, G).
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    index_interval_bytes: u64,
    /// Experiment (0 = off): every this many bytes appended, ask the kernel to start writing
    /// back the active segment's dirty pages (`sync_file_range(SYNC_FILE_RANGE_WRITE)` on a
    /// second descriptor of the file, a blocking call on the shard). Emulates a write-behind the
    /// log does not have, to see what overlapping write-back with appends would give.
    #[arg(long, default_value = "0", value_parser = parse_size)]
    write_behind: u64,
    /// How segment files are written (`ringbroker.log.io`).
    #[arg(long, value_enum, default_value_t = IoMode::Buffered)]
    io: IoMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IoMode {
    /// O_DIRECT from aligned buffers.
    Direct,
    /// Through the page cache.
    Buffered,
}

/// `123`, `16K`, `1M`, `2G` (binary multiples), optionally with a trailing `iB`/`B`.
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("not a size: {text:?} (e.g. 4096, 16K, 1M, 2G)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size too large: {text:?}"))
}

/// A valid batch of exactly `size` bytes: one record whose value fills it.
fn batch_of_exact_size(size: usize) -> Result<Vec<u8>, String> {
    let ts = runtime::now_ms();
    let room = size
        .checked_sub(BATCH_HEADER_LEN)
        .filter(|r| *r >= 16)
        .ok_or_else(|| format!("--batch-size must be at least {}", BATCH_HEADER_LEN + 16))?;
    let pattern: Vec<u8> = (0..room).map(|i| (i * 31 % 251) as u8).collect();
    for key in [None, Some(&b""[..]), Some(&b"k"[..])] {
        for len in (room.saturating_sub(24)..=room).rev() {
            let mut builder = BatchBuilder::new(ts);
            builder.push(key, Some(&pattern[..len]), ts, &[]);
            if builder.encoded_len() == size {
                return Ok(builder.build().to_vec());
            }
        }
    }
    Err(format!("cannot build a batch of exactly {size} bytes"))
}

/// Creates `dir` or empties it of log files; refuses if it holds anything else.
fn prepare_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("listing {}: {e}", dir.display()))?;
    let mut doomed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("listing {}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_log_file = [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, ".tmp"]
            .iter()
            .any(|s| name.ends_with(s))
            || name == CHECKPOINT_FILE
            || name == CLEAN_SHUTDOWN_FILE
            || name.starts_with(CHECKPOINT_FILE);
        if !is_log_file || !entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
            return Err(format!(
                "{} holds {name:?}, which is not a log file; use an empty or log-only directory",
                dir.display()
            ));
        }
        doomed.push(entry.path());
    }
    for path in doomed {
        std::fs::remove_file(&path).map_err(|e| format!("removing {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Starts write-back of the active segment's dirty pages every `every` bytes (see
/// `Args::write_behind`).
struct WriteBehind {
    every: u64,
    since: u64,
    file: Option<(i64, std::fs::File)>,
}

impl WriteBehind {
    fn appended(&mut self, log: &Log, bytes: u64) -> Result<(), String> {
        if self.every == 0 {
            return Ok(());
        }
        self.since += bytes;
        if self.since < self.every {
            return Ok(());
        }
        self.since = 0;
        let base = log.segment_bases().last().copied().unwrap_or(0);
        if self.file.as_ref().map(|(b, _)| *b) != Some(base) {
            let path = SegmentPaths::new(log.dir(), base).log;
            let file = std::fs::File::open(&path)
                .map_err(|e| format!("opening {}: {e}", path.display()))?;
            self.file = Some((base, file));
        }
        if let Some((_, file)) = &self.file {
            // SAFETY: a plain syscall on a descriptor we own; offset 0, length 0 = whole file.
            let rc = unsafe {
                libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE)
            };
            if rc != 0 {
                return Err(format!(
                    "sync_file_range: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
        Ok(())
    }
}

struct Outcome {
    bytes: u64,
    batches: u64,
    /// First append to the end (after the final flush for `--sync end`).
    seconds: f64,
    /// First append to the last append's completion (before the final flush).
    append_seconds: f64,
    /// Append latency (call to return), µs: median, 99th percentile, maximum.
    latency_us: [u64; 3],
}

async fn run(args: &Args, batch: Rc<Vec<u8>>, batches: u64) -> Result<Outcome, String> {
    let config = LogConfig {
        segment_bytes: args.segment_bytes,
        index_interval_bytes: u32::try_from(args.index_interval_bytes)
            .map_err(|_| "--index-interval-bytes must fit in 32 bits".to_string())?,
        max_message_bytes: LogConfig::default().max_message_bytes.max(batch.len()),
        io: match args.io {
            IoMode::Direct => FileIo::Direct,
            IoMode::Buffered => FileIo::Buffered,
        },
        ..LogConfig::default()
    };
    let log = Log::open(&args.dir, config)
        .await
        .map_err(|e| format!("opening the log: {e}"))?;
    let durable = args.sync == SyncMode::Each;
    let issued = Rc::new(Cell::new(0u64));
    let latencies = Rc::new(RefCell::new(
        hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
            .map_err(|e| format!("histogram: {e}"))?,
    ));
    let write_behind = Rc::new(RefCell::new(WriteBehind {
        every: args.write_behind,
        since: 0,
        file: None,
    }));

    let start = Instant::now();
    let workers: Vec<_> = (0..args.inflight)
        .map(|_| {
            let (log, batch, issued) = (log.clone(), Rc::clone(&batch), Rc::clone(&issued));
            let write_behind = Rc::clone(&write_behind);
            let latencies = Rc::clone(&latencies);
            runtime::spawn(async move {
                while issued.get() < batches {
                    issued.set(issued.get() + 1);
                    let options = AppendOptions::new(durable, runtime::now_ms());
                    let issued_at = Instant::now();
                    log.append(&batch, options)
                        .await
                        .map_err(|e| format!("append: {e}"))?;
                    latencies
                        .borrow_mut()
                        .saturating_record(issued_at.elapsed().as_micros() as u64);
                    write_behind
                        .borrow_mut()
                        .appended(&log, batch.len() as u64)?;
                }
                Ok::<(), String>(())
            })
        })
        .collect();
    for worker in workers {
        worker.await?;
    }
    let append_seconds = start.elapsed().as_secs_f64();
    if args.sync == SyncMode::End {
        log.flush().await.map_err(|e| format!("flush: {e}"))?;
    }
    let seconds = start.elapsed().as_secs_f64();

    log.close()
        .await
        .map_err(|e| format!("closing the log: {e}"))?;
    let latencies = latencies.borrow();
    Ok(Outcome {
        latency_us: [0.5, 0.99, 1.0].map(|q| latencies.value_at_quantile(q)),
        bytes: batches * batch.len() as u64,
        batches,
        seconds,
        append_seconds,
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = (|| {
        let size = usize::try_from(args.batch_size).map_err(|_| "batch size too large")?;
        if args.total == 0 {
            return Err("--total must be positive".to_string());
        }
        let batch = Rc::new(batch_of_exact_size(size)?);
        let batches = args.total.div_ceil(args.batch_size);
        prepare_dir(&args.dir)?;
        // Absolute: glommio's Directory::open (used to sync the log directory) fails with
        // EBADF on a relative path.
        let dir = std::path::absolute(&args.dir)
            .map_err(|e| format!("resolving {}: {e}", args.dir.display()))?;
        let args = Args {
            dir,
            ..args.clone()
        };
        runtime::block_on(run(&args, batch, batches)).map_err(|e| e.to_string())?
    })();
    match result {
        Ok(o) => {
            println!(
                "log_throughput bytes={} seconds={:.3} mib_per_s={:.1} batch_size={} sync={} inflight={} batches={} append_seconds={:.3} write_behind={} io={:?} append_p50_us={} append_p99_us={} append_max_us={}",
                o.bytes,
                o.seconds,
                o.bytes as f64 / (1024.0 * 1024.0) / o.seconds,
                args.batch_size,
                args.sync.name(),
                args.inflight,
                o.batches,
                o.append_seconds,
                args.write_behind,
                args.io,
                o.latency_us[0],
                o.latency_us[1],
                o.latency_us[2],
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("log_throughput: {e}");
            ExitCode::FAILURE
        }
    }
}
