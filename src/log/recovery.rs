//! Loading a partition log from disk, and repairing it after an unclean stop.
//!
//! After a clean shutdown (the marker is present) segments are trusted: their indexes are
//! loaded and only the short tail after the last index entry of each segment is read to find
//! the segment's end. After a crash, segments wholly below the checkpointed recovery point are
//! trusted the same way; the segment holding the recovery point and every later one are
//! scanned batch by batch with their CRCs, their indexes are rebuilt, and the log is cut at the
//! first invalid or torn batch (DMA writers and crashes leave zeros and half batches at the
//! tail). Everything after a cut is removed, and the cut is logged.

use std::path::Path;
use std::rc::Rc;

use super::checkpoint::{self, Checkpoint};
use super::config::LogConfig;
use super::error::LogError;
use super::offset_index::{OffsetIndex, OFFSET_INDEX_ENTRY_LEN};
use super::scan::{scan_file, ScanEnd};
use super::segment::{parse_log_file_name, Segment, SegmentFiles, SegmentPaths};
use super::time_index::{TimeIndex, TIME_INDEX_ENTRY_LEN};
use crate::model::Offset;
use crate::runtime::{self, write_buffer, FileIo};

/// What loading found and did. Logged at startup and kept by the log for inspection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The clean-shutdown marker was present.
    pub clean_shutdown: bool,
    pub segments: usize,
    /// Segments read batch by batch (CRC-checked) rather than trusted.
    pub scanned_segments: usize,
    /// Bytes read by all scans, tails included.
    pub scanned_bytes: u64,
    /// Segments whose index files were missing or corrupt and were rebuilt.
    pub rebuilt_indexes: Vec<i64>,
    /// Where the log was cut, if it was: (segment base offset, byte position, reason).
    pub truncated_at: Option<(i64, u64, String)>,
    /// Bytes removed by the cut (the rest of that segment and all later segments).
    pub truncated_bytes: u64,
    /// Later segments removed because of the cut.
    pub removed_segments: Vec<i64>,
    /// Zeros after the last batch of a direct-I/O segment, up to the block boundary the last
    /// write was padded to: cut without a warning (not data, nothing lost).
    pub padding_bytes: u64,
}

pub(super) struct Loaded {
    pub segments: Vec<Segment>,
    pub checkpoint: Option<Checkpoint>,
    pub report: RecoveryReport,
}

/// Loads (and if needed repairs) the log in `dir`, creating the directory if it is missing.
pub(super) async fn load(dir: &Path, config: &LogConfig, now_ms: i64) -> Result<Loaded, LogError> {
    let io = |during: &'static str| move |e: std::io::Error| LogError::from_io(dir, during, e);
    std::fs::create_dir_all(dir).map_err(io("creating the log directory"))?;
    let checkpoint = checkpoint::read_checkpoint(dir)
        .await
        .map_err(io("reading the checkpoint"))?;
    let clean = checkpoint::clean_shutdown_path(dir).exists();
    let bases = list_segments(dir).map_err(io("listing segments"))?;

    let recovery_point = match (clean, checkpoint) {
        (true, _) => Offset(i64::MAX),
        (false, Some(c)) => Offset(c.recovery_point),
        (false, None) => Offset(0),
    };
    let mut report = RecoveryReport {
        clean_shutdown: clean,
        ..RecoveryReport::default()
    };
    let mut segments: Vec<Segment> = Vec::with_capacity(bases.len());
    for (i, &base) in bases.iter().enumerate() {
        let paths = SegmentPaths::new(dir, base);
        let files = Rc::new(
            SegmentFiles::open(&paths, config.io)
                .await
                .map_err(io("opening a segment"))?,
        );
        let mut segment = Segment::new(
            Offset(base),
            file_mtime_ms(&paths.log).unwrap_or(now_ms),
            config.io,
        );
        let expected_base = segments.last().map(|s| s.next_offset);
        let trusted = bases
            .get(i + 1)
            .is_some_and(|&next| Offset(next) <= recovery_point)
            || clean;
        let cut = if trusted {
            load_trusted(dir, &mut segment, &files, config, &mut report).await?
        } else {
            None
        };
        let cut = match cut {
            Some(c) => Some(c),
            None if trusted => None,
            None => scan_and_rebuild(dir, &mut segment, &files, config, &mut report).await?,
        };
        if let Some(prev_end) = expected_base {
            if Offset(base) < prev_end {
                return Err(LogError::Unrecoverable {
                    path: paths.log.clone(),
                    reason: format!(
                        "segment starts at offset {base}, before the previous segment ends ({prev_end})"
                    ),
                });
            }
        }
        segment.files = Some(Rc::clone(&files));
        segment.sealed = true;
        segment.seal_synced = true;
        segment.mark_all_written();
        segments.push(segment);
        if let Some((position, reason)) = cut {
            let file_len = files.log.size().await.map_err(io("sizing a segment"))?;
            report.truncated_bytes += file_len.saturating_sub(position);
            files
                .log
                .truncate(position)
                .await
                .map_err(io("truncating a corrupt segment"))?;
            files.log.fdatasync().await.map_err(io("syncing"))?;
            report.truncated_at = Some((base, position, reason));
            for &later in &bases[i + 1..] {
                let later_paths = SegmentPaths::new(dir, later);
                report.truncated_bytes += std::fs::metadata(&later_paths.log)
                    .map(|m| m.len())
                    .unwrap_or(0);
                later_paths
                    .remove_files()
                    .await
                    .map_err(io("removing segments after a cut"))?;
                report.removed_segments.push(later);
            }
            break;
        }
    }
    if let Some(last) = segments.last_mut() {
        last.sealed = false;
        last.seal_synced = false;
        if !last.is_empty() {
            last.rolling_base_ms = Some(now_ms);
        }
    }
    report.segments = segments.len();
    if let Some((base, position, reason)) = &report.truncated_at {
        tracing::warn!(
            dir = %dir.display(),
            segment = base,
            position,
            reason = %reason,
            truncated_bytes = report.truncated_bytes,
            removed_segments = ?report.removed_segments,
            "log truncated during recovery"
        );
    }
    if !clean {
        // A crash can leave a segment whose data recovery just synced but whose directory
        // entry never was (the flight that created it died before its directory sync): the
        // recovery point about to cover it would then point past a file a power loss removes.
        runtime::sync_dir(dir)
            .await
            .map_err(io("syncing the log directory"))?;
    }
    checkpoint::clear_clean_shutdown(dir)
        .await
        .map_err(io("removing the clean-shutdown marker"))?;
    Ok(Loaded {
        segments,
        checkpoint,
        report,
    })
}

/// Base offsets of the `.log` files in `dir`, ascending. Index files whose log is gone are
/// deleted; so are leftover temporary files.
fn list_segments(dir: &Path) -> std::io::Result<Vec<i64>> {
    let mut bases = Vec::new();
    let mut others = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(base) = parse_log_file_name(&name) {
            bases.push(base);
        } else {
            others.push(name);
        }
    }
    bases.sort_unstable();
    for name in others {
        let orphan_index = [".index", ".timeindex"].iter().any(|suffix| {
            name.strip_suffix(suffix)
                .and_then(|stem| parse_log_file_name(&format!("{stem}.log")))
                .is_some_and(|base| bases.binary_search(&base).is_err())
        });
        // Segments whose delayed deletion a stop cut short go now (Kafka does the same).
        let delayed_delete = name.ends_with(super::segment_delete::DELETED_SUFFIX);
        if orphan_index || delayed_delete || name.ends_with(".tmp") {
            std::fs::remove_file(dir.join(&name))?;
        }
    }
    Ok(bases)
}

fn file_mtime_ms(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let d = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_millis() as i64)
}

/// Where to cut a segment and why.
type Cut = Option<(u64, String)>;

/// Loads a trusted segment from its index files plus a scan of the tail after the last index
/// entry. Falls back to a full scan (returning its cut) when the indexes are unusable or the
/// tail is not clean.
async fn load_trusted(
    dir: &Path,
    segment: &mut Segment,
    files: &SegmentFiles,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Cut, LogError> {
    let io = |e| LogError::from_io(dir, "loading an index", e);
    let log_len = files.log.size().await.map_err(io)?;
    let index_len = files.index.size().await.map_err(io)? as usize;
    let time_len = files.time_index.size().await.map_err(io)? as usize;
    let index_bytes = files.index.read_at(0, index_len).await.map_err(io)?;
    let time_bytes = files.time_index.read_at(0, time_len).await.map_err(io)?;
    let indexes = OffsetIndex::decode(&index_bytes, log_len.max(1))
        .ok()
        .zip(TimeIndex::decode(&time_bytes, u32::MAX).ok());
    let Some((offset_index, time_index)) = indexes else {
        report.rebuilt_indexes.push(segment.base_offset.0);
        return scan_and_rebuild(dir, segment, files, config, report).await;
    };

    let start = offset_index
        .last()
        .map(|e| u64::from(e.position))
        .unwrap_or(0);
    let mut tail = Segment::new(segment.base_offset, segment.last_modified_ms, segment.io);
    let mut expected = None;
    // (last offset, max timestamp) of the batch at the last index entry (or the first batch).
    let mut first_batch = None;
    let scan = scan_file(&files.log, start, log_len, true, |pos, header| {
        if expected.is_some_and(|e: i64| header.base_offset < e) {
            return false;
        }
        expected = Some(header.next_offset());
        first_batch.get_or_insert((header.last_offset(), header.max_timestamp));
        // With the real interval: when the index is empty the tail is the whole segment, and
        // this rebuilds the index it should have.
        tail.record_batch(pos, header, config.index_interval_bytes);
        true
    })
    .await
    .map_err(io)?;
    report.scanned_bytes += log_len - start;
    let tail_ok = scan.end == ScanEnd::Clean && scan.valid_end == log_len;
    // The last index entry names the last offset of the batch at its position.
    let index_consistent = match offset_index.last() {
        Some(e) => {
            first_batch.map(|(last, _)| Offset(last)) == Some(segment.absolute(e.relative_offset))
        }
        // An empty index is right only when a rebuild would add no entry either (a segment
        // of a few large batches has none), not when the file is missing or was cut to zero.
        None => tail.offset_index.is_empty(),
    };
    // Each offset index entry comes with a time index entry holding the segment's largest
    // timestamp so far (Segment::record_batch), so the time index covers the batch at the
    // last offset index entry. A missing or cut time index does not, and would leave the
    // segment's largest timestamp (timestamp lookups, retention) to the tail alone.
    let time_covers_index = match (offset_index.last(), first_batch) {
        (Some(_), Some((_, batch_max))) => {
            time_index.last().map_or(-1, |e| e.timestamp) >= batch_max
        }
        _ => true,
    };
    let time_consistent = time_covers_index
        && time_index
            .last()
            .map(|e| segment.absolute(e.relative_offset) < tail.next_offset.max(Offset(1)))
            .unwrap_or(true);
    if !(tail_ok && index_consistent && time_consistent) {
        report.rebuilt_indexes.push(segment.base_offset.0);
        return scan_and_rebuild(dir, segment, files, config, report).await;
    }
    segment.size = log_len;
    segment.next_offset = if tail.size > 0 {
        tail.next_offset
    } else {
        segment.base_offset
    };
    let from_time_index = time_index.last();
    segment.offset_index = offset_index;
    segment.time_index = time_index;
    segment.bytes_since_index_entry = log_len - start;
    if let Some(e) = from_time_index {
        segment.max_timestamp = e.timestamp;
        segment.offset_of_max_timestamp = segment.absolute(e.relative_offset).0;
    }
    if tail.max_timestamp > segment.max_timestamp {
        segment.max_timestamp = tail.max_timestamp;
        segment.offset_of_max_timestamp = tail.offset_of_max_timestamp;
    }
    Ok(None)
}

/// Reads a whole segment, checking every batch's CRC and offsets, rebuilds its indexes and
/// rewrites the index files. Returns where the valid data ends if it ends before the file.
async fn scan_and_rebuild(
    dir: &Path,
    segment: &mut Segment,
    files: &SegmentFiles,
    config: &LogConfig,
    report: &mut RecoveryReport,
) -> Result<Cut, LogError> {
    let io = |e| LogError::from_io(dir, "scanning a segment", e);
    let log_len = files.log.size().await.map_err(io)?;
    let base = segment.base_offset;
    let mut rebuilt = Segment::new(base, segment.last_modified_ms, segment.io);
    let mut expected = base.0;
    let scan = scan_file(&files.log, 0, log_len, true, |pos, header| {
        if header.base_offset < expected {
            return false;
        }
        expected = header.next_offset();
        rebuilt.record_batch(pos, header, config.index_interval_bytes);
        true
    })
    .await
    .map_err(io)?;
    report.scanned_segments += 1;
    report.scanned_bytes += log_len;

    rebuilt.size = scan.valid_end;
    rebuilt.files = None;
    *segment = rebuilt;
    write_index_files(segment, files).await.map_err(io)?;
    if segment.io == FileIo::Direct && is_padding(files, scan.valid_end, log_len).await {
        files.log.truncate(scan.valid_end).await.map_err(io)?;
        files.log.fdatasync().await.map_err(io)?;
        report.padding_bytes += log_len - scan.valid_end;
        return Ok(None);
    }
    files.log.fdatasync().await.map_err(io)?;
    Ok(match scan.end {
        ScanEnd::Clean if scan.valid_end == log_len => None,
        ScanEnd::Clean => Some((scan.valid_end, "unreadable bytes at the end".to_string())),
        ScanEnd::Torn { position } => Some((position, "torn batch at the end".to_string())),
        ScanEnd::Invalid { position, error } => Some((position, format!("invalid batch: {error}"))),
        ScanEnd::OutOfOrder { position } => {
            Some((position, "batch offsets go backwards".to_string()))
        }
    })
}

/// Whether `[from, len)` of a segment file is the zero padding of a direct write: zeros only,
/// less than one block, ending on a block boundary.
async fn is_padding(files: &SegmentFiles, from: u64, len: u64) -> bool {
    if from >= len || len % write_buffer::DIRECT_ALIGNMENT != 0 {
        return false;
    }
    if len - from >= write_buffer::DIRECT_ALIGNMENT {
        return false;
    }
    match files.log.read_at(from, (len - from) as usize).await {
        Ok(bytes) => bytes.len() as u64 == len - from && bytes.iter().all(|b| *b == 0),
        Err(_) => false,
    }
}

/// Rewrites both index files from the in-memory indexes and syncs them.
pub(super) async fn write_index_files(
    segment: &mut Segment,
    files: &SegmentFiles,
) -> std::io::Result<()> {
    let index = segment.offset_index.encode_all();
    let time = segment.time_index.encode_all();
    files.index.truncate(0).await?;
    files.time_index.truncate(0).await?;
    files.index.write_all_at(index, 0).await?;
    files.time_index.write_all_at(time, 0).await?;
    files.index.fdatasync().await?;
    files.time_index.fdatasync().await?;
    segment
        .offset_index
        .mark_persisted(segment.offset_index.len());
    segment.time_index.mark_persisted(segment.time_index.len());
    debug_assert_eq!(
        files.index.size().await.unwrap_or(0) as usize,
        segment.offset_index.len() * OFFSET_INDEX_ENTRY_LEN
    );
    debug_assert_eq!(
        files.time_index.size().await.unwrap_or(0) as usize,
        segment.time_index.len() * TIME_INDEX_ENTRY_LEN
    );
    Ok(())
}

/// Removes every segment when all of them end at or below the checkpointed log start
/// (`log_start`): a log restarted at the leader's log start
/// (`Log::truncate_fully_and_start_at`) that crashed before its old segments were gone, or
/// (as Kafka) a log whose unsynced tail a power loss took below a durable log start. Returns
/// whether it removed them; the caller starts an empty segment at `log_start`.
pub(super) async fn remove_segments_below_start(
    dir: &Path,
    segments: &mut Vec<Segment>,
    log_start: Offset,
) -> Result<bool, LogError> {
    let end = segments.last().map_or(log_start, |s| s.next_offset);
    if end >= log_start {
        return Ok(false);
    }
    tracing::warn!(dir = %dir.display(), log_start = log_start.0, log_end = end.0, "every segment ends below the log start: removing them, the log starts over empty at its log start");
    for s in segments.drain(..).rev() {
        SegmentPaths::new(dir, s.base_offset.0)
            .remove_files()
            .await
            .map_err(|e| LogError::from_io(dir, "removing segments below the log start", e))?;
    }
    runtime::sync_dir(dir)
        .await
        .map_err(|e| LogError::from_sync(dir, "syncing the log directory", e))?;
    Ok(true)
}
