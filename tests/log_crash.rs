//! Crash test: a child process appends durably to a log and is killed with SIGKILL at a random
//! moment; the parent then recovers the log and checks that it is a valid prefix holding every
//! acknowledged record at its acknowledged offset. Repeated on the same directory, so the log
//! grows across crashes (and across segment rolls, with small segments in some cycles).
//!
//! The child is this test binary run again (`child_writer`, an ignored test that does nothing
//! unless `RINGBROKER_CRASH_CHILD_DIR` is set). It prints one line per acknowledged append:
//! `ACK <first offset> <last offset> <first seq> <last seq>`. Record values encode a global
//! sequence number equal to the record's offset (numbering continues across restarts from the
//! last record in the log), so the parent can check every record it reads back.
//!
//! Knobs: `RINGBROKER_CRASH_SEED` (u64) picks the kill delays, batch sizes and segment sizes
//! (the kill timing itself is not reproducible); `RINGBROKER_CRASH_CYCLES` changes the number
//! of cycles (default 25); `RINGBROKER_CRASH_KEEP_DIR` keeps the data directory for a look
//! with `ringbroker log dump`. The run stops early after a time budget (60 s).

mod common;

use std::cell::Cell;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{
    last_seq, open_fds_under, opts, release, seq_batch, verify_log, XorShift, VALUE_PREFIX_LEN,
};
use ringbroker::log::{Log, LogConfig};
use ringbroker::runtime::{block_on, now_ms, spawn};

const CHILD_DIR_ENV: &str = "RINGBROKER_CRASH_CHILD_DIR";
const CHILD_SEGMENT_ENV: &str = "RINGBROKER_CRASH_CHILD_SEGMENT_BYTES";
const CHILD_SEED_ENV: &str = "RINGBROKER_CRASH_CHILD_SEED";

/// Concurrent appender tasks in the child (so that group commit batches them).
const APPENDERS: u64 = 4;
/// The child stops on its own (and closes the log) after this long or this many appends per
/// task, in case nobody kills it.
const CHILD_MAX_RUN: Duration = Duration::from_secs(20);
const CHILD_MAX_APPENDS_PER_TASK: u64 = 200_000;
/// Largest batch the child builds.
const MAX_BATCH_BYTES: usize = 64 * 1024;
const SMALL_SEGMENT_BYTES: u64 = 64 * 1024;

const DEFAULT_CYCLES: u32 = 25;
const TIME_BUDGET: Duration = Duration::from_secs(60);
/// How long the parent waits for the child to open its log.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the parent waits for the child's output to end once it is dead.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        ..LogConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The child.

#[test]
#[ignore = "the child process of crash_recovery_keeps_acknowledged_records; does nothing alone"]
fn child_writer() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let segment_bytes = env_u64(CHILD_SEGMENT_ENV).unwrap_or(LogConfig::default().segment_bytes);
    let seed = env_u64(CHILD_SEED_ENV).unwrap_or(1);
    block_on(child_main(dir, segment_bytes, seed)).expect("starting the executor");
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A leading newline keeps the line apart from the test harness's "test x ... " prefix.
    writeln!(out, "\n{line}").expect("writing to stdout");
    out.flush().expect("flushing stdout");
}

async fn child_main(dir: PathBuf, segment_bytes: u64, seed: u64) {
    let log = Log::open(&dir, config(segment_bytes))
        .await
        .expect("child: opening the log");
    let leo = log.offsets().log_end_offset;
    // Continue the numbering from the last record in the log.
    let next_seq = last_seq(&log).await.map_or(0, |s| s + 1);
    assert_eq!(
        next_seq as i64, leo,
        "child: sequence numbers follow offsets"
    );
    say(&format!("READY {leo} {next_seq}"));

    let counter = Rc::new(Cell::new(next_seq));
    let deadline = Instant::now() + CHILD_MAX_RUN;
    let tasks: Vec<_> = (0..APPENDERS)
        .map(|t| {
            spawn(appender(
                log.clone(),
                Rc::clone(&counter),
                seed.wrapping_mul(31).wrapping_add(t),
                deadline,
            ))
        })
        .collect();
    for t in tasks {
        t.await;
    }
    log.close().await.expect("child: closing the log");
    say("DONE");
}

async fn appender(log: Log, counter: Rc<Cell<u64>>, seed: u64, deadline: Instant) {
    let mut rng = XorShift::new(seed);
    for _ in 0..CHILD_MAX_APPENDS_PER_TASK {
        if Instant::now() >= deadline {
            break;
        }
        let n = rng.range(1, 21) as usize;
        // Mostly small batches, some of a few KiB, a few up to 64 KiB.
        let budget = match rng.range(0, 10) {
            0 => MAX_BATCH_BYTES,
            1 | 2 => 8 * 1024,
            _ => 1024,
        };
        // Per record: the value plus at most ~16 bytes of record framing; 61 for the header.
        let per_record = (budget - 61) / n - 16;
        let lens: Vec<usize> = (0..n)
            .map(|_| rng.range(VALUE_PREFIX_LEN as u64, per_record as u64 + 1) as usize)
            .collect();
        // Number and stage in one go: `append` assigns offsets before its first await, and
        // nothing else runs on this thread in between, so sequence numbers follow offsets.
        let first = counter.get();
        counter.set(first + n as u64);
        let batch = seq_batch(first, &lens, now_ms());
        assert!(batch.len() <= MAX_BATCH_BYTES);
        let info = log
            .append(&batch, opts(true))
            .await
            .expect("child: durable append");
        assert_eq!(
            (info.base_offset.0, info.last_offset.0),
            (first as i64, (first + n as u64 - 1) as i64),
            "child: offsets assigned in staging order"
        );
        say(&format!(
            "ACK {} {} {} {}",
            info.base_offset,
            info.last_offset,
            first,
            first + n as u64 - 1
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// The parent.

/// Kills and reaps the child if the test fails half way.
struct ChildGuard(Option<Child>);

impl ChildGuard {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("child still owned")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Ack {
    first_offset: i64,
    last_offset: i64,
    first_seq: u64,
    last_seq: u64,
}

enum Line {
    Ready { leo: i64 },
    Ack(Ack),
    Done,
}

fn parse_line(line: &str) -> Option<Line> {
    let at = ["READY ", "ACK ", "DONE"]
        .iter()
        .filter_map(|k| line.find(k))
        .min()?;
    let mut words = line[at..].split_whitespace();
    let kind = words.next()?;
    let mut num = || words.next().and_then(|w| w.parse::<i64>().ok());
    match kind {
        "READY" => Some(Line::Ready { leo: num()? }),
        "ACK" => {
            let (a, b, c, d) = (num()?, num()?, num()?, num()?);
            Some(Line::Ack(Ack {
                first_offset: a,
                last_offset: b,
                first_seq: c as u64,
                last_seq: d as u64,
            }))
        }
        "DONE" => Some(Line::Done),
        _ => None,
    }
}

/// What one child run produced.
struct ChildRun {
    acks: Vec<Ack>,
    ready_leo: Option<i64>,
    done: bool,
    killed: bool,
}

/// Runs the child on `dir` and kills it `delay` after it reports READY (or after it starts,
/// when `from_spawn`). Only whole lines count: a line cut by the kill is ignored.
fn run_child(
    dir: &Path,
    segment_bytes: u64,
    seed: u64,
    delay: Duration,
    from_spawn: bool,
) -> ChildRun {
    let exe = std::env::current_exe().expect("current_exe");
    let child = Command::new(exe)
        .args([
            "--exact",
            "child_writer",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_SEGMENT_ENV, segment_bytes.to_string())
        .env(CHILD_SEED_ENV, seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning the child");
    let spawned = Instant::now();
    let mut guard = ChildGuard(Some(child));
    let stdout = guard.child().stdout.take().expect("child stdout");
    // A thread drains the pipe as the child writes (so it never blocks on a full pipe) and
    // passes whole lines on; it ends at EOF, i.e. once the child is dead.
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) if buf.last() == Some(&b'\n') => {
                    if tx.send(String::from_utf8_lossy(&buf).into_owned()).is_err() {
                        break;
                    }
                }
                Ok(_) => break, // a partial last line: the child died while writing it
            }
        }
    });

    let mut run = ChildRun {
        acks: Vec::new(),
        ready_leo: None,
        done: false,
        killed: false,
    };
    let take = |line: String, run: &mut ChildRun| match parse_line(&line) {
        Some(Line::Ready { leo }) => run.ready_leo = Some(leo),
        Some(Line::Ack(a)) => run.acks.push(a),
        Some(Line::Done) => run.done = true,
        None => {}
    };
    let kill_at = if from_spawn {
        spawned + delay
    } else {
        // Wait for READY (bounded), then the delay.
        let waited = Instant::now();
        while run.ready_leo.is_none() {
            let left = READY_TIMEOUT.saturating_sub(waited.elapsed());
            match rx.recv_timeout(left) {
                Ok(line) => take(line, &mut run),
                Err(_) => {
                    let status = guard.child().try_wait().ok().flatten();
                    let diagnosis = diagnose(guard.child().id());
                    panic!(
                        "the child did not report READY within {READY_TIMEOUT:?} \
                         (exit status {status:?}); its threads:\n{diagnosis}"
                    );
                }
            }
        }
        Instant::now() + delay
    };
    // Collect lines until it is time to kill.
    loop {
        let left = kill_at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left) {
            Ok(line) => take(line, &mut run),
            Err(mpsc::RecvTimeoutError::Timeout) => break,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let mut child = guard.0.take().expect("child");
    match child.try_wait().expect("try_wait") {
        Some(status) => {
            // It exited on its own: only acceptable after a clean finish.
            assert!(status.success(), "the child failed: {status}");
        }
        None => {
            child.kill().expect("killing the child");
            run.killed = true;
            let status = child.wait().expect("reaping the child");
            assert!(
                !status.success() || run.done,
                "the killed child reported success: {status}"
            );
        }
    }
    // The child is dead: read what it wrote before dying (bounded by a timeout).
    let drain_start = Instant::now();
    loop {
        let left = DRAIN_TIMEOUT.saturating_sub(drain_start.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => take(line, &mut run),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("the child's output did not end"),
        }
    }
    let _ = reader.join();
    run
}

/// What a stuck child is doing: the state and kernel wait channel of each of its threads, and,
/// if gdb is installed, their stacks (bounded by gdb's own batch mode and a timeout).
fn diagnose(pid: u32) -> String {
    let mut out = String::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let p = t.path();
            let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
            out += &format!(
                "  task {:?}: {} wchan {} stat {}\n{}",
                t.file_name(),
                read("comm").trim(),
                read("wchan").trim(),
                read("stat").split_whitespace().nth(2).unwrap_or("?"),
                read("stack")
            );
        }
    }
    let gdb = Command::new("timeout")
        .args([
            "20",
            "gdb",
            "-p",
            &pid.to_string(),
            "-batch",
            "-ex",
            "thread apply all bt 30",
        ])
        .output();
    if let Ok(g) = gdb {
        out += &String::from_utf8_lossy(&g.stdout);
    }
    out
}

#[derive(Default)]
struct Totals {
    cycles: u32,
    killed: u32,
    killed_before_ready: u32,
    verifications: u32,
    acked_appends: u64,
    acked_records: u64,
    truncations: u32,
    truncated_bytes: u64,
    recovered_bytes: u64,
    scanned_bytes: u64,
    max_segments: usize,
}

#[test]
fn crash_recovery_keeps_acknowledged_records() {
    let seed = env_u64("RINGBROKER_CRASH_SEED").unwrap_or(0x00C0_FFEE_2024);
    let cycles = env_u64("RINGBROKER_CRASH_CYCLES").map_or(DEFAULT_CYCLES, |c| c as u32);
    println!("crash test: seed {seed}, up to {cycles} cycles or {TIME_BUDGET:?}");
    let mut tmp = tempfile::tempdir().expect("tempdir");
    if std::env::var_os("RINGBROKER_CRASH_KEEP_DIR").is_some() {
        tmp.disable_cleanup(true);
        println!("keeping {}", tmp.path().display());
    }
    let dir = tmp.path().join("crash-0");
    let mut rng = XorShift::new(seed);
    let started = Instant::now();
    let mut totals = Totals::default();
    // Acks not yet checked against a recovered log.
    let mut unchecked: Vec<Ack> = Vec::new();
    // The log end and the batches (base offset, CRC) found by the previous verification: a
    // later recovery must keep all of them, unchanged.
    let mut verified_end = 0i64;
    let mut verified_crcs: Vec<(i64, u32)> = Vec::new();

    for cycle in 0..cycles {
        if started.elapsed() >= TIME_BUDGET {
            println!("time budget used up after {cycle} cycles");
            break;
        }
        let segment_bytes = if cycle % 3 != 0 {
            SMALL_SEGMENT_BYTES
        } else {
            LogConfig::default().segment_bytes
        };
        let delay = Duration::from_millis(rng.range(20, 301));
        // Every fifth cycle the delay runs from the spawn, so that the kill may land while the
        // child is still starting (recovering) rather than appending.
        let from_spawn = cycle % 5 == 4;
        let child_seed = rng.next_u64();
        let run = run_child(&dir, segment_bytes, child_seed, delay, from_spawn);
        totals.cycles += 1;
        totals.killed += u32::from(run.killed);
        totals.killed_before_ready += u32::from(run.ready_leo.is_none());
        totals.acked_appends += run.acks.len() as u64;
        totals.acked_records += run
            .acks
            .iter()
            .map(|a| (a.last_offset - a.first_offset + 1) as u64)
            .sum::<u64>();
        if let Some(leo) = run.ready_leo {
            // The child's own recovery must not have lost anything verified before.
            assert!(
                leo >= verified_end,
                "cycle {cycle}: the child opened the log at {leo}, below the verified end {verified_end}"
            );
        }
        for a in &run.acks {
            assert_eq!(a.first_offset as u64, a.first_seq, "cycle {cycle}: {a:?}");
            assert_eq!(a.last_offset as u64, a.last_seq, "cycle {cycle}: {a:?}");
        }
        unchecked.extend(run.acks.iter().copied());

        // Every fourth cycle the next child recovers from this crash by itself (and the one
        // after it is verified on top of two crashes).
        let verify = cycle % 4 != 3 || cycle + 1 == cycles;
        let mut line = format!(
            "cycle {cycle:2}: segment.bytes {segment_bytes:>10}, kill after {:>3} ms{}, {:4} acks{}{}",
            delay.as_millis(),
            if from_spawn { " from spawn" } else { " from READY" },
            run.acks.len(),
            if run.ready_leo.is_none() { ", killed before READY" } else { "" },
            if run.killed { "" } else { ", exited on its own" },
        );
        if verify {
            // Reopen in-process (this is the crash recovery) and check the whole log.
            let close = cycle % 2 == 0;
            let (report, verified, offsets) = block_on(async {
                let log = Log::open(&dir, config(segment_bytes))
                    .await
                    .expect("recovering the log");
                let report = log.recovery_report().clone();
                // Decode records only where they are new: older batches are checked by CRC
                // and compared with what the last verification saw.
                let verified = verify_log(&log, verified_end)
                    .await
                    .unwrap_or_else(|e| panic!("cycle {cycle}: the recovered log is invalid: {e}"));
                let offsets = log.offsets();
                if close {
                    log.close().await.expect("closing the log");
                }
                // Otherwise the log is dropped unclosed: the next child recovers from it.
                release(log).await;
                (report, verified, offsets)
            })
            .expect("executor");
            let leo = offsets.log_end_offset;
            assert_eq!(offsets.log_start_offset, 0, "cycle {cycle}");
            assert!(
                leo >= verified_end,
                "cycle {cycle}: recovery lost verified data: end {leo} < {verified_end}"
            );
            assert!(
                verified.crcs.len() >= verified_crcs.len()
                    && verified.crcs[..verified_crcs.len()] == verified_crcs[..],
                "cycle {cycle}: batches verified before changed or vanished"
            );
            for a in &unchecked {
                // Offsets are contiguous and every record's sequence number equals its offset
                // (checked by verify_log), so an ack is honoured iff its offsets are in the log.
                assert!(
                    a.last_offset < leo,
                    "cycle {cycle}: acknowledged {a:?} lost: the log ends at {leo}; report {report:?}"
                );
            }
            unchecked.clear();
            if report.truncated_at.is_some() {
                totals.truncations += 1;
                totals.truncated_bytes += report.truncated_bytes;
            }
            totals.verifications += 1;
            totals.recovered_bytes = verified.bytes;
            totals.scanned_bytes += report.scanned_bytes;
            totals.max_segments = totals.max_segments.max(offsets.segments);
            line += &format!(
                "; recovered: end {leo}, {} segments, {} bytes, clean {}, scanned {} segments / {} bytes{}",
                offsets.segments,
                verified.bytes,
                report.clean_shutdown,
                report.scanned_segments,
                report.scanned_bytes,
                match &report.truncated_at {
                    Some((base, pos, why)) => format!(
                        ", CUT segment {base} at {pos} ({why}), {} bytes, removed {:?}",
                        report.truncated_bytes, report.removed_segments
                    ),
                    None => String::new(),
                }
            );
            verified_end = leo;
            verified_crcs = verified.crcs;
        } else {
            line += "; not verified (the next child recovers it)";
        }
        println!("{line}");
    }

    // Finally: a clean close and reopen must give the same log, without scanning.
    let final_end = block_on(async {
        let log = Log::open(&dir, config(LogConfig::default().segment_bytes))
            .await
            .expect("reopening");
        log.close().await.expect("closing");
        release(log).await;
        let log = Log::open(&dir, config(LogConfig::default().segment_bytes))
            .await
            .expect("reopening after a clean close");
        let report = log.recovery_report().clone();
        assert!(report.clean_shutdown);
        assert_eq!(report.scanned_segments, 0, "{report:?}");
        assert!(report.truncated_at.is_none(), "{report:?}");
        // Records past the last verification (if the budget ended on an unverified cycle)
        // are decoded; the rest is compared by CRC.
        let v = verify_log(&log, verified_end)
            .await
            .unwrap_or_else(|e| panic!("after a clean restart: {e}"));
        assert!(
            v.crcs.len() >= verified_crcs.len()
                && v.crcs[..verified_crcs.len()] == verified_crcs[..],
            "batches verified before changed or vanished"
        );
        log.close().await.expect("closing");
        let end = log.offsets().log_end_offset;
        release(log).await;
        end
    })
    .expect("executor");
    assert!(final_end >= verified_end);
    for a in &unchecked {
        assert!(
            a.last_offset < final_end,
            "acknowledged {a:?} lost: the log ends at {final_end}"
        );
    }
    assert!(totals.acked_records > 0, "no append was ever acknowledged");

    println!(
        "crash test summary: {} cycles ({} killed, {} before READY), {} verifications, \
         {} acked appends / {} acked records, final log {} records / {} bytes in up to {} segments, \
         {} recoveries cut the log ({} bytes), {} bytes scanned by recoveries, \
         {} descriptors left open in the directory, {:.1} s",
        totals.cycles,
        totals.killed,
        totals.killed_before_ready,
        totals.verifications,
        totals.acked_appends,
        totals.acked_records,
        final_end,
        totals.recovered_bytes,
        totals.max_segments,
        totals.truncations,
        totals.truncated_bytes,
        totals.scanned_bytes,
        open_fds_under(&dir),
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// Recovery scans big segments in chunks; batches that straddle a chunk boundary must be read
// whole (a deterministic companion to the random crashes above).

/// The chunk size recovery reads segments in (`scan::SCAN_CHUNK`).
const SCAN_CHUNK: u64 = 1 << 20;

/// Appends batches so that one starts exactly `before` bytes ahead of the first chunk
/// boundary, and a few more after it. Returns the log end offset.
async fn fill_up_to_boundary(log: &Log, before: u64) -> i64 {
    let mut position = 0u64;
    let target = SCAN_CHUNK - before;
    // Bounded: ~1 KiB batches up to 1 MiB.
    for _ in 0..2048 {
        let left = target - position;
        if left == 0 {
            break;
        }
        let next = log.offsets().log_end_offset as u64;
        // One batch of exactly the length that lands on the target, once that is in reach
        // (a one-record batch is value length + 70 bytes for values of 64..8000 bytes).
        let lens = if (200..=2200).contains(&left) {
            vec![left as usize - 70]
        } else {
            vec![900usize]
        };
        let batch = seq_batch(next, &lens, 1_000 + next as i64);
        assert!(batch.len() as u64 <= left, "overshot the boundary");
        log.append(&batch, opts(false)).await.expect("append");
        position += batch.len() as u64;
    }
    assert_eq!(position, target, "could not land on the boundary");
    for _ in 0..5 {
        let next = log.offsets().log_end_offset as u64;
        log.append(&seq_batch(next, &[300, 300], 1), opts(false))
            .await
            .expect("append");
    }
    log.flush().await.expect("flush");
    log.offsets().log_end_offset
}

#[test]
fn recovery_reads_batches_across_scan_chunk_boundaries() {
    // The batch header starts that many bytes before the boundary: inside the base offset
    // (its high bytes are zeros), inside the length, inside the rest of the header, on it.
    for before in [1u64, 3, 5, 8, 11, 12, 30, 60, 61, 0] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("boundary-0");
        block_on(async {
            let log = Log::open(&dir, LogConfig::default()).await.expect("open");
            let end = fill_up_to_boundary(&log, before).await;
            // Truncation rebuilds the segment with the same chunked scan: it must keep every
            // batch below the cut (the last batch holds the last two offsets).
            let new_end = log.truncate_to(end - 2).await.expect("truncate");
            assert_eq!(new_end, end - 2, "{before} bytes before the boundary");
            let v = verify_log(&log, 0)
                .await
                .unwrap_or_else(|e| panic!("{before} bytes before the boundary: {e}"));
            assert_eq!(
                v.records as i64,
                end - 2,
                "{before} bytes before the boundary"
            );
            log.append(&seq_batch(end as u64 - 2, &[300, 300], 1), opts(true))
                .await
                .expect("append");
            // An unclean stop: the only segment is scanned, in chunks.
            release(log).await;
            let log = Log::open(&dir, LogConfig::default()).await.expect("reopen");
            let report = log.recovery_report().clone();
            assert_eq!(report.scanned_segments, 1, "{report:?}");
            assert!(
                report.truncated_at.is_none(),
                "batch {before} bytes before a scan chunk boundary: {report:?}"
            );
            assert_eq!(log.offsets().log_end_offset, end);
            verify_log(&log, 0)
                .await
                .unwrap_or_else(|e| panic!("{before} bytes before the boundary: {e}"));
            release(log).await;
        })
        .expect("executor");
    }
}
