//! Recovery from damaged files: a flipped byte in an old segment, truncated or missing index
//! files, zero padding and torn batches at the tail, a garbage checkpoint.
//!
//! Every test writes a log of several segments whose record values carry their own offset
//! (see `common::encode_value`), damages the files with plain std I/O while the log is closed,
//! reopens it and checks what recovery reported, what it kept and that every kept offset reads
//! back as written.

mod common;

use std::path::Path;

use common::{data_len, file_batches, opts, release, seq_batch_ts, verify_log};
use ringbroker::log::checkpoint::{Checkpoint, CHECKPOINT_FILE, CLEAN_SHUTDOWN_FILE};
use ringbroker::log::segment::SegmentPaths;
use ringbroker::log::{Log, LogConfig};
use ringbroker::protocol::batch_builder::decode_records;
use ringbroker::protocol::record_batch::{self, BatchError, BATCH_HEADER_LEN};
use ringbroker::runtime::block_on;

const RECORDS_PER_BATCH: u64 = 5;
const BATCHES: u64 = 150;
const VALUE_LEN: usize = 100;
const T0: i64 = 1_600_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

/// Timestamps rise with the offset (10 ms apart).
fn ts_of(seq: u64) -> i64 {
    T0 + seq as i64 * 10
}

/// Writes `BATCHES` batches of `RECORDS_PER_BATCH` records (offset = sequence number) and
/// closes the log cleanly, or, with `close == false`, flushes and drops it without closing (an
/// unclean stop). Returns the log end offset.
fn write_log(dir: &Path, timestamp_of: fn(u64) -> i64, close: bool) -> i64 {
    block_on(async {
        let log = Log::open(dir, config()).await.expect("open");
        for b in 0..BATCHES {
            let first = b * RECORDS_PER_BATCH;
            let batch = seq_batch_ts(first, RECORDS_PER_BATCH as usize, VALUE_LEN, timestamp_of);
            let info = log.append(&batch, opts(false)).await.expect("append");
            assert_eq!(info.base_offset.0, first as i64);
        }
        let leo = log.offsets().log_end_offset;
        if close {
            log.close().await.expect("close");
        } else {
            log.flush().await.expect("flush");
        }
        release(log).await;
        leo
    })
    .expect("executor")
}

/// Base offsets of the segments on disk, ascending.
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

fn paths(dir: &Path, base: i64) -> SegmentPaths {
    SegmentPaths::new(dir, base)
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn set_len(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open for truncation")
        .set_len(len)
        .expect("set_len");
}

fn remove_marker_and_checkpoint(dir: &Path, checkpoint_too: bool) {
    let _ = std::fs::remove_file(dir.join(CLEAN_SHUTDOWN_FILE));
    if checkpoint_too {
        std::fs::remove_file(dir.join(CHECKPOINT_FILE)).expect("removing the checkpoint");
    }
}

/// Reads every offset in `from..to` on its own and checks that the batch returned holds it
/// with the right value.
async fn check_every_offset(log: &Log, from: i64, to: i64) {
    for offset in from..to {
        let r = log
            .read(offset, 1, None)
            .await
            .unwrap_or_else(|e| panic!("read {offset}: {e}"));
        let recs = decode_records(&r.records).unwrap_or_else(|e| panic!("offset {offset}: {e}"));
        let rec = recs
            .iter()
            .find(|r| r.offset == offset)
            .unwrap_or_else(|| panic!("the batch read for offset {offset} does not hold it"));
        let seq = common::decode_value(rec.value.as_deref().expect("value")).expect("seq");
        assert_eq!(seq as i64, offset);
    }
}

/// Every offset reads back, and the whole log is a valid contiguous prefix ending at `leo`.
async fn check_log(log: &Log, leo: i64) {
    assert_eq!(log.offsets().log_end_offset, leo);
    check_every_offset(log, log.offsets().log_start_offset, leo).await;
    let v = verify_log(log, 0).await.expect("the log is a valid prefix");
    assert_eq!(v.records as i64, leo - log.offsets().log_start_offset);
}

/// The first offset whose timestamp is ≥ `t`, and that timestamp, in a log of `leo` records
/// timestamped by `timestamp_of` (the Kafka ListOffsets answer).
fn expected_for_timestamp(leo: i64, timestamp_of: fn(u64) -> i64, t: i64) -> Option<(i64, i64)> {
    (0..leo as u64)
        .find(|s| timestamp_of(*s) >= t)
        .map(|s| (s as i64, timestamp_of(s)))
}

async fn check_timestamps(log: &Log, leo: i64, timestamp_of: fn(u64) -> i64) {
    let mut probes: Vec<i64> = vec![i64::MIN + 1, 0, T0 - 1, T0, T0 + 1];
    for s in (0..leo as u64).step_by(37) {
        probes.extend([timestamp_of(s) - 1, timestamp_of(s), timestamp_of(s) + 1]);
    }
    let last = timestamp_of(leo as u64 - 1);
    probes.extend([last - 1, last, last + 1, i64::MAX]);
    let max_ts = (0..leo as u64).map(timestamp_of).max().expect("records");
    probes.extend([max_ts - 1, max_ts, max_ts + 1]);
    for t in probes {
        let got = log
            .offset_for_timestamp(t)
            .await
            .unwrap_or_else(|e| panic!("offset_for_timestamp({t}): {e}"));
        assert_eq!(
            got,
            expected_for_timestamp(leo, timestamp_of, t),
            "offset_for_timestamp({t})"
        );
    }
    // ListOffsets MAX_TIMESTAMP: the largest timestamp and the last offset of its batch.
    let (max_offset, got_max) = log.max_timestamp().expect("a max timestamp");
    assert_eq!(got_max, max_ts, "max_timestamp");
    let first_with_max = (0..leo as u64)
        .find(|s| timestamp_of(*s) == max_ts)
        .unwrap() as i64;
    let batch_last = (first_with_max / RECORDS_PER_BATCH as i64 + 1) * RECORDS_PER_BATCH as i64 - 1;
    assert_eq!(max_offset, batch_last, "offset of the max timestamp");
}

// ---------------------------------------------------------------------------------------------
// (a) A flipped byte in the middle of an old segment.

#[test]
fn flipped_byte_in_old_segment_is_cut_only_by_a_full_scan() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("topic-0");
    let leo = write_log(&dir, ts_of, true);
    let bases = segment_bases(&dir);
    assert!(bases.len() >= 5, "want several segments, got {bases:?}");

    // Damage a batch in the middle of the third segment, inside its records (covered by the
    // CRC), before the segment's last index entry (so a clean load does not read it).
    let victim = bases[2];
    let p = paths(&dir, victim);
    let batches = file_batches(&p.log);
    let index = std::fs::read(&p.index).expect("index");
    assert!(index.len() >= 8, "the segment has index entries");
    let last_indexed = u32::from_be_bytes(index[index.len() - 4..].try_into().unwrap()) as u64;
    let (pos, header) = batches[batches.len() / 2];
    assert!(pos + (header.total_len() as u64) <= last_indexed);
    let flip_at =
        pos + BATCH_HEADER_LEN as u64 + (header.total_len() - BATCH_HEADER_LEN) as u64 / 2;
    let mut data = std::fs::read(&p.log).expect("log");
    data[flip_at as usize] ^= 0x5a;
    std::fs::write(&p.log, &data).expect("write back");
    let victim_len = data.len() as u64;
    let later_bytes: u64 = bases[3..]
        .iter()
        .map(|b| file_len(&paths(&dir, *b).log))
        .sum();

    block_on(async {
        // 1. After a clean shutdown nothing is scanned: the damage goes unnoticed by the
        //    broker. Consumers see it, since they check the CRC of every batch they fetch.
        let log = Log::open(&dir, config()).await.expect("open");
        let report = log.recovery_report().clone();
        assert!(report.clean_shutdown);
        assert_eq!(report.scanned_segments, 0, "{report:?}");
        assert!(report.truncated_at.is_none(), "{report:?}");
        assert_eq!(log.offsets().log_end_offset, leo);
        check_every_offset(&log, 0, header.base_offset).await;
        let r = log.read(header.base_offset, 1, None).await.expect("read");
        assert!(matches!(
            record_batch::validate(&r.records),
            Err(BatchError::CrcMismatch { .. })
        ));
        // The other segments are still readable.
        for offset in header.next_offset()..leo {
            let r = log.read(offset, 1, None).await.expect("read");
            record_batch::validate(&r.records).expect("undamaged batch");
        }
        assert!(
            verify_log(&log, 0).await.is_err(),
            "the walk sees the damage"
        );
        log.close().await.expect("close");
        release(log).await;
    })
    .expect("executor");

    // 2. Without the marker and the checkpoint every segment is scanned with its CRCs: the log
    //    is cut at the damaged batch and the later segments go.
    remove_marker_and_checkpoint(&dir, true);
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        let report = log.recovery_report().clone();
        println!("{report:?}");
        assert!(!report.clean_shutdown);
        let (cut_base, cut_pos, reason) = report.truncated_at.clone().expect("a cut");
        assert_eq!((cut_base, cut_pos), (victim, pos));
        assert!(reason.contains("CRC"), "reason: {reason}");
        assert_eq!(report.removed_segments, bases[3..].to_vec());
        assert_eq!(report.truncated_bytes, victim_len - pos + later_bytes);
        assert_eq!(
            report.scanned_segments, 3,
            "up to and including the damaged one"
        );
        let o = log.offsets();
        assert_eq!(o.log_end_offset, header.base_offset);
        assert_eq!(o.segments, 3);
        assert_eq!(log.segment_bases(), bases[..3].to_vec());
        check_log(&log, header.base_offset).await;
        // Appends carry on at the cut.
        let next = header.base_offset as u64;
        let info = log
            .append(&seq_batch_ts(next, 3, VALUE_LEN, ts_of), opts(true))
            .await
            .expect("append");
        assert_eq!(info.base_offset.0, header.base_offset);
        check_log(&log, header.base_offset + 3).await;
        log.close().await.expect("close");
        release(log).await;
    })
    .expect("executor");
    for b in &bases[3..] {
        let p = paths(&dir, *b);
        assert!(!p.log.exists() && !p.index.exists() && !p.time_index.exists());
    }
    // The damaged segment is the active one now: cut at the damaged batch, then appended to.
    let appended = seq_batch_ts(header.base_offset as u64, 3, VALUE_LEN, ts_of).len() as u64;
    assert_eq!(file_len(&paths(&dir, victim).log), pos + appended);
}

// ---------------------------------------------------------------------------------------------
// (b) Truncated offset index files.

#[derive(Debug, Clone, Copy)]
enum IndexCut {
    /// Cut inside an entry: the file length is not a multiple of 8.
    PartialEntry,
    /// The last two entries gone: still a valid (shorter) index.
    WholeEntries,
    /// Nothing left.
    Empty,
}

#[test]
fn truncated_index_is_rebuilt_or_still_valid() {
    for cut in [
        IndexCut::PartialEntry,
        IndexCut::WholeEntries,
        IndexCut::Empty,
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("topic-0");
        let leo = write_log(&dir, ts_of, true);
        let bases = segment_bases(&dir);
        // An old segment and the active one.
        let damaged = [bases[1], bases[bases.len() - 1]];
        let mut originals = Vec::new();
        for base in damaged {
            let p = paths(&dir, base);
            let len = file_len(&p.index);
            assert!(
                len >= 24,
                "{cut:?}: segment {base} has only {len} bytes of index"
            );
            originals.push(std::fs::read(&p.index).expect("index"));
            set_len(
                &p.index,
                match cut {
                    IndexCut::PartialEntry => len - 3,
                    IndexCut::WholeEntries => len - 16,
                    IndexCut::Empty => 0,
                },
            );
        }
        block_on(async {
            let log = Log::open(&dir, config()).await.expect("open");
            let report = log.recovery_report().clone();
            println!("{cut:?}: {report:?}");
            assert!(report.clean_shutdown);
            assert!(report.truncated_at.is_none(), "{cut:?}: {report:?}");
            for (base, original) in damaged.iter().zip(&originals) {
                let now = std::fs::read(paths(&dir, *base).index).expect("index");
                match cut {
                    IndexCut::PartialEntry | IndexCut::Empty => {
                        // Unusable: rebuilt from the log, to exactly what was there.
                        assert!(report.rebuilt_indexes.contains(base), "{cut:?}: {report:?}");
                        assert_eq!(&now, original, "{cut:?}: segment {base}: rebuilt index");
                    }
                    IndexCut::WholeEntries => {
                        // A shorter index is still a valid one: kept (or rebuilt).
                        assert!(
                            now == original[..now.len()] && now.len() % 8 == 0,
                            "{cut:?}: segment {base}: index neither kept nor rebuilt"
                        );
                    }
                }
            }
            check_log(&log, leo).await;
            check_timestamps(&log, leo, ts_of).await;
            // Appends go on; the index grows from what it holds.
            let info = log
                .append(&seq_batch_ts(leo as u64, 5, VALUE_LEN, ts_of), opts(true))
                .await
                .expect("append");
            assert_eq!(info.base_offset.0, leo);
            check_log(&log, leo + 5).await;
            log.close().await.expect("close");
            release(log).await;

            let log = Log::open(&dir, config()).await.expect("reopen");
            let report = log.recovery_report().clone();
            assert!(
                report.clean_shutdown && report.scanned_segments == 0,
                "{cut:?}: {report:?}"
            );
            check_log(&log, leo + 5).await;
            log.close().await.expect("close");
            release(log).await;
        })
        .expect("executor");
    }
}

// ---------------------------------------------------------------------------------------------
// (c) Missing index files.

#[test]
fn missing_index_files_are_rebuilt() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("topic-0");
    let leo = write_log(&dir, ts_of, true);
    let bases = segment_bases(&dir);
    let damaged = [bases[1], bases[3], bases[bases.len() - 1]];
    let mut originals = Vec::new();
    for base in damaged {
        let p = paths(&dir, base);
        originals.push(std::fs::read(&p.index).expect("index"));
        assert!(!originals.last().unwrap().is_empty());
        std::fs::remove_file(&p.index).expect("rm index");
        std::fs::remove_file(&p.time_index).expect("rm time index");
    }
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        let report = log.recovery_report().clone();
        println!("{report:?}");
        assert!(report.clean_shutdown);
        assert!(report.truncated_at.is_none(), "{report:?}");
        for (base, original) in damaged.iter().zip(&originals) {
            assert!(report.rebuilt_indexes.contains(base), "{report:?}");
            let p = paths(&dir, *base);
            assert_eq!(&std::fs::read(&p.index).expect("index"), original);
            assert!(
                file_len(&p.time_index) >= 12,
                "segment {base}: time index rebuilt"
            );
        }
        assert_eq!(report.rebuilt_indexes.len(), damaged.len(), "{report:?}");
        check_log(&log, leo).await;
        check_timestamps(&log, leo, ts_of).await;
        log.close().await.expect("close");
        release(log).await;
        let log = Log::open(&dir, config()).await.expect("reopen");
        assert_eq!(log.recovery_report().scanned_segments, 0);
        check_timestamps(&log, leo, ts_of).await;
        release(log).await;
    })
    .expect("executor");
}

/// Timestamps rise with the offset, except for one batch early in the second segment whose
/// records are far in the future (a producer with a skewed clock).
fn ts_spiky(seq: u64) -> i64 {
    if (SPIKE..SPIKE + RECORDS_PER_BATCH).contains(&seq) {
        T0 + 1_000_000_000
    } else {
        ts_of(seq)
    }
}
const SPIKE: u64 = 30 * RECORDS_PER_BATCH;

#[test]
fn missing_time_index_alone_is_rebuilt() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("topic-0");
    let leo = write_log(&dir, ts_spiky, true);
    let bases = segment_bases(&dir);
    // The spike sits in an old segment, before its last index entry.
    let seg = *bases.iter().rev().find(|b| **b <= SPIKE as i64).unwrap();
    assert_ne!(
        seg,
        *bases.last().unwrap(),
        "the spike is in an old segment"
    );
    let p = paths(&dir, seg);
    let index = std::fs::read(&p.index).expect("index");
    let last_rel = u32::from_be_bytes(index[index.len() - 8..index.len() - 4].try_into().unwrap());
    assert!(seg + i64::from(last_rel) > SPIKE as i64 + RECORDS_PER_BATCH as i64);
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        check_timestamps(&log, leo, ts_spiky).await;
        log.close().await.expect("close");
        release(log).await;
    })
    .expect("executor");

    std::fs::remove_file(&p.time_index).expect("rm time index");
    block_on(async {
        let log = Log::open(&dir, config()).await.expect("open");
        let report = log.recovery_report().clone();
        println!("{report:?}");
        check_log(&log, leo).await;
        check_timestamps(&log, leo, ts_spiky).await;
        assert!(report.rebuilt_indexes.contains(&seg), "{report:?}");
        assert!(file_len(&p.time_index) >= 12);
        log.close().await.expect("close");
        release(log).await;
    })
    .expect("executor");
}

// ---------------------------------------------------------------------------------------------
// (d) Zero padding after the last batch, (e) a torn last batch.

#[test]
fn trailing_zeros_are_cut_after_an_unclean_stop() {
    // (clean close then marker removed, zeros) and (no close at all, zeros)
    for (closed, zeros) in [(true, 4096u64), (false, 17), (false, 100_000)] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("topic-0");
        let leo = write_log(&dir, ts_of, closed);
        remove_marker_and_checkpoint(&dir, false);
        let bases = segment_bases(&dir);
        let active = *bases.last().unwrap();
        let p = paths(&dir, active);
        let len = data_len(&p.log);
        set_len(&p.log, len + zeros);
        block_on(async {
            let log = Log::open(&dir, config()).await.expect("open");
            let report = log.recovery_report().clone();
            println!("closed {closed}, {zeros} zeros: {report:?}");
            assert!(!report.clean_shutdown);
            let (base, pos, reason) = report.truncated_at.clone().expect("a cut");
            assert_eq!(
                (base, pos),
                (active, len),
                "cut exactly after the last batch"
            );
            assert!(reason.contains("invalid"), "{reason}");
            assert_eq!(report.truncated_bytes, zeros);
            assert!(report.removed_segments.is_empty());
            if closed {
                // The checkpoint covers every older segment: only the active one is scanned.
                assert_eq!(report.scanned_segments, 1, "{report:?}");
            }
            assert_eq!(file_len(&p.log), len);
            check_log(&log, leo).await;
            let info = log
                .append(&seq_batch_ts(leo as u64, 5, VALUE_LEN, ts_of), opts(true))
                .await
                .expect("append");
            assert_eq!(info.base_offset.0, leo);
            check_log(&log, leo + 5).await;
            log.close().await.expect("close");
            release(log).await;
        })
        .expect("executor");
    }
}

#[test]
fn torn_last_batch_is_cut() {
    // Where in the last batch the file ends: inside the records, inside the header, one byte
    // short.
    for (name, keep) in [
        ("mid-records", None),
        ("mid-header", Some(30usize)),
        ("one byte short", Some(usize::MAX)),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("topic-0");
        let leo = write_log(&dir, ts_of, false);
        let bases = segment_bases(&dir);
        let active = *bases.last().unwrap();
        let p = paths(&dir, active);
        let len = data_len(&p.log);
        let (pos, last) = *file_batches(&p.log).last().unwrap();
        assert_eq!(pos + last.total_len() as u64, len);
        assert_eq!(last.next_offset(), leo);
        let keep = match keep {
            None => last.total_len() / 2,
            Some(usize::MAX) => last.total_len() - 1,
            Some(k) => k,
        } as u64;
        set_len(&p.log, pos + keep);
        block_on(async {
            let log = Log::open(&dir, config()).await.expect("open");
            let report = log.recovery_report().clone();
            println!("{name}: {report:?}");
            let (base, cut, reason) = report.truncated_at.clone().expect("a cut");
            assert_eq!((base, cut), (active, pos), "{name}: cut at the torn batch");
            assert!(reason.contains("torn"), "{name}: {reason}");
            assert_eq!(report.truncated_bytes, keep);
            assert_eq!(file_len(&p.log), pos);
            // Everything before the torn batch is intact; its offsets are reused.
            check_log(&log, last.base_offset).await;
            let info = log
                .append(
                    &seq_batch_ts(last.base_offset as u64, 5, VALUE_LEN, ts_of),
                    opts(true),
                )
                .await
                .expect("append");
            assert_eq!(info.base_offset.0, last.base_offset);
            check_log(&log, last.base_offset + 5).await;
            log.close().await.expect("close");
            release(log).await;
        })
        .expect("executor");
    }
}

// ---------------------------------------------------------------------------------------------
// (f) A garbage checkpoint file.

#[test]
fn garbage_checkpoint_means_a_full_scan() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("topic-0");
    let leo = write_log(&dir, ts_of, true);
    let segments = segment_bases(&dir).len();
    let garbage: [(&str, &[u8], bool); 5] = [
        ("binary", b"\x00\xff\x13\x37 not a checkpoint \xfe", false),
        ("empty", b"", false),
        (
            "bad number",
            b"ringbroker-log-checkpoint 0\nrecovery-point banana\nlog-start-offset 0\n",
            false,
        ),
        (
            "cut short",
            b"ringbroker-log-checkpoint 0\nrecovery-po",
            false,
        ),
        // Well-formed but claiming more than the log holds: older segments are trusted (and
        // checked against their indexes), the active one is scanned.
        (
            "past the end",
            b"ringbroker-log-checkpoint 0\nrecovery-point 999999999\nlog-start-offset 0\n",
            true,
        ),
    ];
    for (name, bytes, parses) in garbage {
        std::fs::write(dir.join(CHECKPOINT_FILE), bytes).expect("write checkpoint");
        remove_marker_and_checkpoint(&dir, false);
        block_on(async {
            let log = Log::open(&dir, config()).await.expect("open");
            let report = log.recovery_report().clone();
            println!("{name}: {report:?}");
            assert!(!report.clean_shutdown);
            assert!(report.truncated_at.is_none(), "{name}: {report:?}");
            let expected_scans = if parses { 1 } else { segments };
            assert_eq!(
                report.scanned_segments, expected_scans,
                "{name}: {report:?}"
            );
            check_log(&log, leo).await;
            // Open replaced it with a good one.
            let text = std::fs::read_to_string(dir.join(CHECKPOINT_FILE)).expect("checkpoint");
            let cp = Checkpoint::decode(&text).expect("a valid checkpoint");
            assert_eq!(
                cp,
                Checkpoint {
                    recovery_point: leo,
                    log_start_offset: 0,
                    truncate_to: None,
                    high_watermark: None,
                }
            );
            log.close().await.expect("close");
            release(log).await;
        })
        .expect("executor");
    }
}

/// Writes a cleanly closed log in `dir` and damages, with `damage(segment bytes, position)`,
/// a batch in the middle of its third segment (before the segment's last index entry, so a
/// clean load does not read it). Returns the damaged batch's base offset.
fn damage_a_middle_batch(dir: &Path, damage: impl FnOnce(&mut Vec<u8>, usize)) -> i64 {
    write_log(dir, ts_of, true);
    let bases = segment_bases(dir);
    assert!(bases.len() >= 5, "want several segments, got {bases:?}");
    let p = paths(dir, bases[2]);
    let batches = file_batches(&p.log);
    let (pos, header) = batches[batches.len() / 2];
    let mut data = std::fs::read(&p.log).expect("log");
    damage(&mut data, pos as usize);
    std::fs::write(&p.log, &data).expect("write back");
    header.base_offset
}

/// Opens the cleanly closed log in `dir` (nothing is scanned) and reads `offset` on a thread
/// of its own: a read that never returns fails the test (after a bound) instead of hanging it.
/// The records' length or the error.
fn read_in_thread(dir: &Path, offset: i64) -> Result<usize, ringbroker::log::LogError> {
    let dir = dir.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let result = block_on(async {
            let log = Log::open(&dir, config()).await.expect("open");
            assert_eq!(log.recovery_report().scanned_segments, 0);
            let r = log
                .read(offset, 1 << 20, None)
                .await
                .map(|r| r.records.len());
            log.close().await.expect("close");
            release(log).await;
            r
        })
        .expect("executor");
        let _ = tx.send(result);
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("reading offset {offset} did not return (a livelock)"))
}

fn assert_corrupt(result: Result<usize, ringbroker::log::LogError>) {
    assert!(
        matches!(
            result,
            Err(ringbroker::log::LogError::CorruptSegment { .. })
        ),
        "{result:?}"
    );
}

#[test]
fn a_batch_whose_length_passes_the_end_of_the_file_is_an_error_not_a_livelock() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("topic-0");
    let offset = damage_a_middle_batch(&dir, |data, pos| {
        // batchLength (bytes 8..12) now claims 100 bytes more than the file holds.
        let claimed = (data.len() - pos - 12 + 100) as i32;
        data[pos + 8..pos + 12].copy_from_slice(&claimed.to_be_bytes());
    });
    assert_corrupt(read_in_thread(&dir, offset));
    // The batches before it still read.
    assert!(read_in_thread(&dir, offset - 1).is_ok_and(|n| n > 0));
}

#[test]
fn a_batch_with_a_bad_header_at_the_fetch_offset_is_an_error_not_empty_records() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("topic-0");
    // The magic byte (byte 16) is no longer 2.
    let offset = damage_a_middle_batch(&dir, |data, pos| data[pos + 16] = 9);
    assert_corrupt(read_in_thread(&dir, offset));
}
