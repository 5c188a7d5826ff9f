//! The time index of one segment (`<base offset>.timeindex`).
//!
//! Format, as Kafka's: 12-byte entries, big endian, (timestamp i64, relative offset u32). An
//! entry is added alongside an offset index entry when the largest timestamp seen so far has
//! grown, recording that timestamp and the (last) offset of the batch that carried it, and once
//! more when the segment is rolled. Timestamps and offsets are both non-decreasing, so a binary
//! search gives the first place where timestamps ≥ t may start.

use super::offset_index::IndexCorruption;

pub const TIME_INDEX_ENTRY_LEN: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeIndexEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeIndexEntry>,
    persisted: usize,
}

impl TimeIndex {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn last(&self) -> Option<TimeIndexEntry> {
        self.entries.last().copied()
    }

    /// Appends an entry if its timestamp is larger than the last one (and its offset not
    /// smaller); returns whether it did.
    pub fn maybe_append(&mut self, timestamp: i64, relative_offset: u32) -> bool {
        if let Some(last) = self.entries.last() {
            if timestamp <= last.timestamp || relative_offset < last.relative_offset {
                return false;
            }
        }
        self.entries.push(TimeIndexEntry {
            timestamp,
            relative_offset,
        });
        true
    }

    /// The relative offset from which to scan for the first record with a timestamp ≥
    /// `timestamp`: the offset of the last entry whose timestamp is below it (records before
    /// that entry's batch all have smaller timestamps). `None` means "from the start".
    pub fn lookup(&self, timestamp: i64) -> Option<u32> {
        let n = self.entries.partition_point(|e| e.timestamp < timestamp);
        n.checked_sub(1).map(|i| self.entries[i].relative_offset)
    }

    /// Drops entries for offsets at or after `relative_offset`.
    pub fn truncate_to_offset(&mut self, relative_offset: u32) {
        let keep = self
            .entries
            .partition_point(|e| e.relative_offset < relative_offset);
        self.entries.truncate(keep);
        self.persisted = self.persisted.min(keep);
    }

    pub fn unpersisted(&self) -> Option<(u64, Vec<u8>)> {
        if self.persisted >= self.entries.len() {
            return None;
        }
        let pos = (self.persisted * TIME_INDEX_ENTRY_LEN) as u64;
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

    pub fn mark_unpersisted(&mut self) {
        self.persisted = 0;
    }

    pub fn encode_all(&self) -> Vec<u8> {
        encode(&self.entries)
    }

    /// Parses a time index file; `max_relative_offset` is the segment's last relative offset.
    pub fn decode(bytes: &[u8], max_relative_offset: u32) -> Result<TimeIndex, IndexCorruption> {
        if bytes.len() % TIME_INDEX_ENTRY_LEN != 0 {
            return Err(IndexCorruption::PartialEntry {
                len: bytes.len(),
                entry: TIME_INDEX_ENTRY_LEN,
            });
        }
        let mut index = TimeIndex::new();
        for (i, c) in bytes.chunks_exact(TIME_INDEX_ENTRY_LEN).enumerate() {
            let timestamp = i64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            let relative_offset = u32::from_be_bytes([c[8], c[9], c[10], c[11]]);
            if relative_offset > max_relative_offset
                || !index.maybe_append(timestamp, relative_offset)
            {
                return Err(IndexCorruption::NotIncreasing { index: i });
            }
        }
        index.persisted = index.entries.len();
        Ok(index)
    }
}

fn encode(entries: &[TimeIndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * TIME_INDEX_ENTRY_LEN);
    for e in entries {
        out.extend_from_slice(&e.timestamp.to_be_bytes());
        out.extend_from_slice(&e.relative_offset.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_returns_last_entry_strictly_before_timestamp() {
        let mut idx = TimeIndex::new();
        assert!(idx.maybe_append(1000, 4));
        assert!(idx.maybe_append(2000, 10));
        assert!(!idx.maybe_append(1500, 12), "timestamps must grow");
        assert!(idx.maybe_append(3000, 20));
        assert_eq!(idx.lookup(500), None);
        assert_eq!(idx.lookup(1000), None);
        assert_eq!(idx.lookup(1001), Some(4));
        assert_eq!(idx.lookup(2500), Some(10));
        assert_eq!(idx.lookup(9999), Some(20));
    }

    #[test]
    fn round_trip_and_corruption() {
        let mut idx = TimeIndex::new();
        idx.maybe_append(10, 1);
        idx.maybe_append(20, 5);
        let bytes = idx.encode_all();
        let back = TimeIndex::decode(&bytes, 5).expect("valid");
        assert_eq!(back.last(), idx.last());
        assert!(TimeIndex::decode(&bytes[..13], 5).is_err());
        assert!(
            TimeIndex::decode(&bytes, 4).is_err(),
            "offset past segment end"
        );
        let mut zeros = bytes.clone();
        zeros.extend_from_slice(&[0u8; 12]);
        assert!(TimeIndex::decode(&zeros, 5).is_err());
    }

    #[test]
    fn truncate_drops_entries_at_or_after_offset() {
        let mut idx = TimeIndex::new();
        idx.maybe_append(10, 1);
        idx.maybe_append(20, 5);
        idx.mark_persisted(2);
        idx.truncate_to_offset(5);
        assert_eq!(idx.len(), 1);
        assert!(idx.unpersisted().is_none());
        idx.maybe_append(30, 6);
        assert_eq!(idx.unpersisted().map(|(p, b)| (p, b.len())), Some((12, 12)));
    }
}
