//! The sparse offset index of one segment (`<base offset>.index`).
//!
//! Format, as Kafka's: 8-byte entries, big endian, (relative offset u32, file position u32).
//! One entry is added after every `index.interval.bytes` of log; the offset is the last offset
//! of the batch that starts at the position (Kafka's convention). Entries are strictly
//! increasing in both fields. The index lives in memory (a few MiB per GiB of log) and is
//! appended to its file as the log is written; it is never memory-mapped, so a page fault can
//! not stall the shard.

pub const OFFSET_INDEX_ENTRY_LEN: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetIndexEntry {
    /// Offset relative to the segment's base offset.
    pub relative_offset: u32,
    /// Byte position of a batch in the segment's `.log` file.
    pub position: u32,
}

/// Why an index file was rejected (it is then rebuilt from the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexCorruption {
    #[error("file length {len} is not a multiple of the entry size {entry}")]
    PartialEntry { len: usize, entry: usize },
    #[error("entry {index} is not after the previous one")]
    NotIncreasing { index: usize },
    #[error("entry {index} points at position {position}, past the log's end {log_len}")]
    PastLogEnd {
        index: usize,
        position: u64,
        log_len: u64,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<OffsetIndexEntry>,
    /// How many entries are already in the file (the rest are appended on the next write).
    persisted: usize,
}

impl OffsetIndex {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> &[OffsetIndexEntry] {
        &self.entries
    }

    pub fn last(&self) -> Option<OffsetIndexEntry> {
        self.entries.last().copied()
    }

    /// Appends an entry if it keeps both fields strictly increasing; returns whether it did.
    pub fn append(&mut self, relative_offset: u32, position: u32) -> bool {
        if let Some(last) = self.entries.last() {
            if relative_offset <= last.relative_offset || position <= last.position {
                return false;
            }
        }
        self.entries.push(OffsetIndexEntry {
            relative_offset,
            position,
        });
        true
    }

    /// The entry with the largest offset ≤ `relative_offset`: where a forward scan for that
    /// offset can start. `None` means "scan from position 0".
    pub fn lookup(&self, relative_offset: u32) -> Option<OffsetIndexEntry> {
        let n = self
            .entries
            .partition_point(|e| e.relative_offset <= relative_offset);
        n.checked_sub(1).map(|i| self.entries[i])
    }

    /// Drops entries pointing at or past `position` (the log was truncated there).
    pub fn truncate_to_position(&mut self, position: u64) {
        let keep = self
            .entries
            .partition_point(|e| u64::from(e.position) < position);
        self.entries.truncate(keep);
        self.persisted = self.persisted.min(keep);
    }

    /// Entries that are not yet in the file, encoded, and the file position to write them at.
    /// Call [`OffsetIndex::mark_persisted`] once they are written.
    pub fn unpersisted(&self) -> Option<(u64, Vec<u8>)> {
        if self.persisted >= self.entries.len() {
            return None;
        }
        let pos = (self.persisted * OFFSET_INDEX_ENTRY_LEN) as u64;
        Some((pos, encode(&self.entries[self.persisted..])))
    }

    /// Keeps only the first `len` entries.
    pub fn truncate_entries(&mut self, len: usize) {
        self.entries.truncate(len);
        self.persisted = self.persisted.min(len);
    }

    /// How many entries the file holds.
    pub fn persisted(&self) -> usize {
        self.persisted
    }

    pub fn mark_persisted(&mut self, count: usize) {
        self.persisted = count.min(self.entries.len());
    }

    /// Forgets what the file holds (it is about to be rewritten whole).
    pub fn mark_unpersisted(&mut self) {
        self.persisted = 0;
    }

    /// The whole index as file bytes.
    pub fn encode_all(&self) -> Vec<u8> {
        encode(&self.entries)
    }

    /// Parses an index file and checks it against the log it indexes.
    pub fn decode(bytes: &[u8], log_len: u64) -> Result<OffsetIndex, IndexCorruption> {
        if bytes.len() % OFFSET_INDEX_ENTRY_LEN != 0 {
            return Err(IndexCorruption::PartialEntry {
                len: bytes.len(),
                entry: OFFSET_INDEX_ENTRY_LEN,
            });
        }
        let mut index = OffsetIndex::new();
        for (i, chunk) in bytes.chunks_exact(OFFSET_INDEX_ENTRY_LEN).enumerate() {
            let relative_offset = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let position = u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
            if u64::from(position) >= log_len {
                return Err(IndexCorruption::PastLogEnd {
                    index: i,
                    position: u64::from(position),
                    log_len,
                });
            }
            if !index.append(relative_offset, position) {
                return Err(IndexCorruption::NotIncreasing { index: i });
            }
        }
        index.persisted = index.entries.len();
        Ok(index)
    }
}

fn encode(entries: &[OffsetIndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * OFFSET_INDEX_ENTRY_LEN);
    for e in entries {
        out.extend_from_slice(&e.relative_offset.to_be_bytes());
        out.extend_from_slice(&e.position.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> OffsetIndex {
        let mut idx = OffsetIndex::new();
        assert!(idx.append(9, 4100));
        assert!(idx.append(20, 8300));
        assert!(idx.append(35, 12500));
        idx
    }

    #[test]
    fn lookup_finds_largest_entry_not_after_target() {
        let idx = sample();
        assert_eq!(idx.lookup(0), None);
        assert_eq!(idx.lookup(8), None);
        assert_eq!(idx.lookup(9).map(|e| e.position), Some(4100));
        assert_eq!(idx.lookup(19).map(|e| e.position), Some(4100));
        assert_eq!(idx.lookup(20).map(|e| e.position), Some(8300));
        assert_eq!(idx.lookup(u32::MAX).map(|e| e.position), Some(12500));
    }

    #[test]
    fn append_rejects_non_increasing_entries() {
        let mut idx = sample();
        assert!(!idx.append(35, 20000));
        assert!(!idx.append(40, 12500));
        assert_eq!(idx.len(), 3);
    }

    #[test]
    fn encode_decode_round_trip() {
        let idx = sample();
        let bytes = idx.encode_all();
        assert_eq!(bytes.len(), 24);
        let back = OffsetIndex::decode(&bytes, 20000).expect("valid");
        assert_eq!(back.entries(), idx.entries());
        assert!(back.unpersisted().is_none());
    }

    #[test]
    fn decode_rejects_corruption() {
        let bytes = sample().encode_all();
        assert!(matches!(
            OffsetIndex::decode(&bytes[..20], 20000),
            Err(IndexCorruption::PartialEntry { .. })
        ));
        assert!(matches!(
            OffsetIndex::decode(&bytes, 10000),
            Err(IndexCorruption::PastLogEnd { index: 2, .. })
        ));
        let mut zeroed = bytes.clone();
        zeroed.extend_from_slice(&[0u8; 8]);
        assert!(matches!(
            OffsetIndex::decode(&zeroed, 20000),
            Err(IndexCorruption::NotIncreasing { index: 3 })
        ));
    }

    #[test]
    fn truncate_and_unpersisted_tracking() {
        let mut idx = sample();
        let (pos, bytes) = idx.unpersisted().expect("all new");
        assert_eq!((pos, bytes.len()), (0, 24));
        idx.mark_persisted(3);
        assert!(idx.unpersisted().is_none());
        idx.truncate_to_position(8300);
        assert_eq!(idx.len(), 1);
        assert!(idx.append(15, 9000));
        let (pos, bytes) = idx.unpersisted().expect("one new");
        assert_eq!((pos, bytes.len()), (8, 8));
    }
}
