//! Producer-state snapshots: the producer table of a partition as of a log offset, so that
//! recovery reads the log only from there instead of from its start.
//!
//! Files are `{offset:020}.snapshot` in the partition directory (Kafka's name), written
//! atomically (temporary file, fdatasync, rename, directory sync). The two newest are kept.
//! Binary, big endian, versioned, with a CRC32C over everything after the CRC field:
//!
//! | field          | type          |
//! |----------------|---------------|
//! | magic `RBPS`   | 4 bytes       |
//! | version (1)    | u16           |
//! | crc32c         | u32           |
//! | offset         | i64           |
//! | producer count | u32           |
//! | per producer: id i64, epoch i16, last activity i64, batch count u8 (≤ 5), then per batch first seq i32, last seq i32, first offset i64, last offset i64, max timestamp i64 |

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};

use crate::idempotence::producer_state::{
    BatchMetadata, ProducerEntry, ProducerStateTable, RETAINED_BATCHES,
};
use crate::model::Offset;
use crate::runtime::{self, File};

const MAGIC: &[u8; 4] = b"RBPS";
const VERSION: u16 = 1;
const CRC_AT: usize = 6;
const HEADER_LEN: usize = 22;
const ENTRY_HEADER_LEN: usize = 19;
const BATCH_LEN: usize = 32;
const SUFFIX: &str = ".snapshot";
/// Snapshots kept per partition.
pub const SNAPSHOTS_KEPT: usize = 2;

/// A decoded snapshot: the table as of `offset` (batches at or past it are replayed from the
/// log on top).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerSnapshot {
    pub offset: Offset,
    pub table: ProducerStateTable,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot is {len} bytes, shorter than its {HEADER_LEN}-byte header")]
    TooShort { len: usize },
    #[error("not a producer snapshot (bad magic)")]
    BadMagic,
    #[error("unsupported producer snapshot version {0}")]
    UnsupportedVersion(u16),
    #[error("snapshot CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("snapshot truncated at byte {at}")]
    Truncated { at: usize },
    #[error("snapshot has {extra} bytes after its last producer")]
    TrailingBytes { extra: usize },
    #[error("snapshot field out of range: {0}")]
    BadValue(&'static str),
}

/// Encodes the in-flight-free part of `table` as of `offset`.
pub fn encode(offset: Offset, table: &ProducerStateTable) -> Vec<u8> {
    let table = table.written_only();
    let mut out = Vec::with_capacity(HEADER_LEN + table.len() * (ENTRY_HEADER_LEN + BATCH_LEN));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&offset.0.to_be_bytes());
    let mut entries: Vec<(i64, &ProducerEntry)> = table.entries().collect();
    entries.sort_by_key(|(id, _)| *id);
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (id, e) in entries {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.last_activity_ms.to_be_bytes());
        // written_only never yields more than RETAINED_BATCHES.
        out.push(e.batches.len().min(RETAINED_BATCHES) as u8);
        for b in e.batches.iter().take(RETAINED_BATCHES) {
            out.extend_from_slice(&b.first_seq.to_be_bytes());
            out.extend_from_slice(&b.last_seq.to_be_bytes());
            out.extend_from_slice(&b.first_offset.0.to_be_bytes());
            out.extend_from_slice(&b.last_offset.0.to_be_bytes());
            out.extend_from_slice(&b.max_timestamp.to_be_bytes());
        }
    }
    let crc = crc32c::crc32c(&out[CRC_AT + 4..]);
    out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes a snapshot, checking everything; never panics, never allocates by a stored count.
pub fn decode(bytes: &[u8]) -> Result<ProducerSnapshot, SnapshotError> {
    if bytes.len() < HEADER_LEN {
        return Err(SnapshotError::TooShort { len: bytes.len() });
    }
    if &bytes[..4] != MAGIC {
        return Err(SnapshotError::BadMagic);
    }
    let mut r = Reader { bytes, at: 4 };
    let version = r.u16()?;
    if version != VERSION {
        return Err(SnapshotError::UnsupportedVersion(version));
    }
    let stored = r.u32()?;
    let computed = crc32c::crc32c(&bytes[CRC_AT + 4..]);
    if stored != computed {
        return Err(SnapshotError::CrcMismatch { stored, computed });
    }
    let offset = Offset(r.i64()?);
    if offset < Offset(0) {
        return Err(SnapshotError::BadValue("negative offset"));
    }
    let count = r.u32()?;
    let mut table = ProducerStateTable::new();
    for _ in 0..count {
        let id = r.i64()?;
        let epoch = r.i16()?;
        let last_activity_ms = r.i64()?;
        let n = r.u8()? as usize;
        if id < 0 || epoch < 0 {
            return Err(SnapshotError::BadValue("negative producer id or epoch"));
        }
        if n == 0 || n > RETAINED_BATCHES {
            return Err(SnapshotError::BadValue("batch count"));
        }
        let mut batches = VecDeque::with_capacity(n);
        for _ in 0..n {
            let b = BatchMetadata {
                first_seq: r.i32()?,
                last_seq: r.i32()?,
                first_offset: Offset(r.i64()?),
                last_offset: Offset(r.i64()?),
                max_timestamp: r.i64()?,
                in_flight: None,
            };
            if b.first_seq < 0 || b.last_seq < 0 || b.first_offset < Offset(0) {
                return Err(SnapshotError::BadValue("negative sequence or offset"));
            }
            if b.last_offset < b.first_offset {
                return Err(SnapshotError::BadValue("last offset before first offset"));
            }
            if batches
                .back()
                .is_some_and(|prev: &BatchMetadata| prev.last_offset >= b.first_offset)
            {
                return Err(SnapshotError::BadValue("batches out of offset order"));
            }
            batches.push_back(b);
        }
        if table.entry(id).is_some() {
            return Err(SnapshotError::BadValue("producer listed twice"));
        }
        table.restore(
            id,
            ProducerEntry {
                epoch,
                batches,
                last_activity_ms,
            },
        );
    }
    if r.at != bytes.len() {
        return Err(SnapshotError::TrailingBytes {
            extra: bytes.len() - r.at,
        });
    }
    Ok(ProducerSnapshot { offset, table })
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let slice = self
            .bytes
            .get(self.at..self.at + N)
            .ok_or(SnapshotError::Truncated { at: self.at })?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        self.at += N;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.take::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, SnapshotError> {
        Ok(u16::from_be_bytes(self.take()?))
    }
    fn i16(&mut self) -> Result<i16, SnapshotError> {
        Ok(i16::from_be_bytes(self.take()?))
    }
    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Result<i32, SnapshotError> {
        Ok(i32::from_be_bytes(self.take()?))
    }
    fn i64(&mut self) -> Result<i64, SnapshotError> {
        Ok(i64::from_be_bytes(self.take()?))
    }
}

/// `{offset:020}.snapshot` in `dir`.
pub fn snapshot_path(dir: &Path, offset: Offset) -> PathBuf {
    dir.join(format!("{:020}{SUFFIX}", offset.0))
}

/// The offsets of the snapshot files in `dir`, oldest first.
pub fn list_snapshots(dir: &Path) -> io::Result<Vec<Offset>> {
    let mut offsets = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(SUFFIX)) else {
            continue;
        };
        if stem.len() == 20 && stem.bytes().all(|c| c.is_ascii_digit()) {
            if let Ok(offset) = stem.parse::<i64>() {
                offsets.push(Offset(offset));
            }
        }
    }
    offsets.sort_unstable();
    Ok(offsets)
}

/// Writes a snapshot of `table` as of `offset` durably, then deletes all but the
/// [`SNAPSHOTS_KEPT`] newest.
pub async fn write_snapshot(
    dir: &Path,
    offset: Offset,
    table: &ProducerStateTable,
) -> io::Result<()> {
    let bytes = encode(offset, table);
    let path = snapshot_path(dir, offset);
    let tmp = dir.join(format!("{:020}{SUFFIX}.tmp", offset.0));
    let file = File::open_or_create(&tmp).await?;
    file.truncate(0).await?;
    file.write_all_at(bytes, 0).await?;
    file.fdatasync().await?;
    file.close().await?;
    runtime::rename(&tmp, &path).await?;
    runtime::sync_dir(dir).await?;
    let offsets = list_snapshots(dir)?;
    let excess = offsets.len().saturating_sub(SNAPSHOTS_KEPT);
    for old in &offsets[..excess] {
        runtime::remove_file(&snapshot_path(dir, *old)).await?;
    }
    Ok(())
}

/// Loads the newest readable snapshot whose offset is at most `log_end`. Snapshots past the
/// log end (the log lost its tail in a crash) are deleted; unreadable ones are skipped with a
/// warning (recovery then replays more of the log, which is always correct).
pub async fn load_newest(dir: &Path, log_end: Offset) -> io::Result<Option<ProducerSnapshot>> {
    let offsets = list_snapshots(dir)?;
    for offset in offsets.iter().rev() {
        let path = snapshot_path(dir, *offset);
        if *offset > log_end {
            tracing::info!(path = %path.display(), log_end = log_end.0, "deleting a producer snapshot past the log end");
            runtime::remove_file(&path).await?;
            continue;
        }
        let file = File::open_existing(&path).await?;
        let size = file.size().await?;
        let read = file.read_at(0, size as usize).await;
        file.close().await?;
        match read.map(|bytes| decode(&bytes)) {
            Ok(Ok(s)) if s.offset == *offset => return Ok(Some(s)),
            Ok(Ok(s)) => {
                tracing::warn!(path = %path.display(), inner = s.offset.0, "ignoring a producer snapshot whose name and content disagree")
            }
            Ok(Err(e)) => {
                tracing::warn!(path = %path.display(), error = %e, "ignoring a corrupt producer snapshot")
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "ignoring an unreadable producer snapshot")
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotence::producer_state::ProducerBatch;
    use proptest::prelude::*;

    fn sample() -> ProducerStateTable {
        let mut t = ProducerStateTable::new();
        for pid in 0..4i64 {
            for i in 0..(pid as i32 + 3) {
                let b = ProducerBatch {
                    producer_id: pid * 1000,
                    epoch: pid as i16,
                    first_seq: i * 2,
                    last_seq: i * 2 + 1,
                };
                let first = pid * 100 + i64::from(i) * 2;
                t.replay(
                    &b,
                    Offset(first),
                    Offset(first + 1),
                    42 + first,
                    7_000 + pid,
                );
            }
        }
        // An in-flight batch is left out of the snapshot.
        let b = ProducerBatch {
            producer_id: 9,
            epoch: 0,
            first_seq: 0,
            last_seq: 0,
        };
        t.record_staged(&b, Offset(999), Offset(999), 0, 1, 0);
        t
    }

    #[test]
    fn round_trip_keeps_written_batches_only() {
        let t = sample();
        let s = decode(&encode(Offset(500), &t)).expect("decode");
        assert_eq!(s.offset, Offset(500));
        assert_eq!(s.table, t.written_only());
        assert!(s.table.entry(9).is_none());
        assert_eq!(
            s.table.entry(3000).map(|e| e.batches.len()),
            Some(RETAINED_BATCHES)
        );
    }

    /// Pins the bytes (and the file name) against the table in the module doc, so that
    /// snapshots written by earlier builds keep loading whatever the in-memory types become.
    #[test]
    fn layout_is_the_documented_one() {
        let mut t = ProducerStateTable::new();
        let b = ProducerBatch {
            producer_id: 5,
            epoch: 2,
            first_seq: 3,
            last_seq: 4,
        };
        t.replay(&b, Offset(10), Offset(11), 77, 1_234);
        let bytes = encode(Offset(12), &t);
        let mut want = b"RBPS".to_vec();
        want.extend_from_slice(&1u16.to_be_bytes());
        want.extend_from_slice(&[0; 4]);
        want.extend_from_slice(&12i64.to_be_bytes());
        want.extend_from_slice(&1u32.to_be_bytes());
        want.extend_from_slice(&5i64.to_be_bytes());
        want.extend_from_slice(&2i16.to_be_bytes());
        want.extend_from_slice(&1_234i64.to_be_bytes());
        want.push(1);
        want.extend_from_slice(&3i32.to_be_bytes());
        want.extend_from_slice(&4i32.to_be_bytes());
        want.extend_from_slice(&10i64.to_be_bytes());
        want.extend_from_slice(&11i64.to_be_bytes());
        want.extend_from_slice(&77i64.to_be_bytes());
        let crc = crc32c::crc32c(&want[CRC_AT + 4..]);
        want[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(bytes, want);
        assert_eq!(
            snapshot_path(Path::new("d"), Offset(42)),
            Path::new("d/00000000000000000042.snapshot")
        );
    }

    #[test]
    fn corruption_is_rejected() {
        let bytes = encode(Offset(500), &sample());
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(decode(&bad).is_err(), "flipped byte {at} went unnoticed");
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "truncated to {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn arbitrary_bodies_with_a_valid_crc_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut bytes = MAGIC.to_vec();
            bytes.extend_from_slice(&VERSION.to_be_bytes());
            bytes.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
            bytes.extend_from_slice(&body);
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn files_keep_the_two_newest_and_skip_bad_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        crate::runtime::block_on(async {
            let t = sample();
            for offset in [10, 20, 30].map(Offset) {
                write_snapshot(dir.path(), offset, &t).await.expect("write");
            }
            assert_eq!(
                list_snapshots(dir.path()).expect("list"),
                vec![Offset(20), Offset(30)]
            );
            std::fs::write(snapshot_path(dir.path(), Offset(30)), b"garbage").expect("corrupt");
            let s = load_newest(dir.path(), Offset(1000)).await.expect("load");
            assert_eq!(s.map(|s| s.offset), Some(Offset(20)));
            // Past the log end: deleted.
            let s = load_newest(dir.path(), Offset(15)).await.expect("load");
            assert!(s.is_none());
            assert!(list_snapshots(dir.path()).expect("list").is_empty());
        })
        .expect("executor");
    }
}
