//! Reading whole batches out of one segment file, starting at an index position.
//!
//! The decisions are a pure function of one chunk of the file ([`scan_chunk`]); the async
//! loop around it only reads chunks. Every step either ends the read or moves on (a later
//! position, or a larger chunk that holds the whole next batch), so a read always ends.

use std::cell::RefCell;
use std::ops::Range;

use bytes::Bytes;

use super::scan::{BatchScanner, Scanned};
use super::segment::SegmentFiles;
use super::tail_cache::TailCache;
use crate::protocol::record_batch::BatchError;

/// What to read: the batches from the one holding `offset`, within `max_bytes`, stopping
/// before `bound`. With `whole_first` the first batch comes whole even when it is larger than
/// `max_bytes` (the first batch of a Fetch response, KIP-74); without it a first batch that
/// does not fit means nothing is returned.
#[derive(Debug, Clone, Copy)]
pub struct SegmentRead {
    pub offset: i64,
    pub bound: i64,
    pub max_bytes: usize,
    pub whole_first: bool,
    pub index_interval: u32,
}

/// Why a segment read failed.
#[derive(Debug)]
pub enum SegmentReadError {
    Io(std::io::Error),
    /// The bytes where a batch must be are not one: the read cannot go on past them.
    Corrupt {
        position: u64,
        reason: String,
    },
}

impl From<std::io::Error> for SegmentReadError {
    fn from(e: std::io::Error) -> Self {
        SegmentReadError::Io(e)
    }
}

/// What one chunk of a segment says about a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkStep {
    /// These bytes of the chunk are the answer (empty: the first batch does not fit).
    Found(Range<usize>),
    /// The segment holds nothing at or after the offset.
    Nothing,
    /// Read a chunk of at least `at_least` bytes at file position `pos` and scan it.
    ReadAt { pos: u64, at_least: usize },
    /// A bad batch where the read needs one, at this file position.
    Corrupt { position: u64, reason: String },
}

/// How many bytes to read at `pos` for `read` (`at_least`: a batch known to be that long).
pub fn chunk_len(read: &SegmentRead, pos: u64, size: u64, at_least: usize) -> usize {
    // The index lands within about one interval (plus one batch) of the target.
    let slack = read.index_interval as usize + 64 * 1024;
    let left = usize::try_from(size.saturating_sub(pos)).unwrap_or(usize::MAX);
    read.max_bytes
        .max(1)
        .saturating_add(slack)
        .max(at_least)
        .min(left)
}

/// Scans `chunk`, the bytes of the segment at file position `pos` (`size`: the bytes written).
pub fn scan_chunk(chunk: &[u8], pos: u64, size: u64, read: &SegmentRead) -> ChunkStep {
    if chunk.is_empty() {
        return ChunkStep::Nothing;
    }
    let mut scanner = BatchScanner::new(chunk, false);
    let mut first: Option<usize> = None;
    let mut end = 0usize;
    loop {
        match scanner.next_batch() {
            Scanned::Batch { position, header } => {
                if header.base_offset >= read.bound {
                    break;
                }
                match first {
                    None if header.last_offset() < read.offset => {}
                    None if !read.whole_first && header.total_len() > read.max_bytes => {
                        return ChunkStep::Found(position..position);
                    }
                    None => {
                        first = Some(position);
                        end = position + header.total_len();
                    }
                    Some(f) => {
                        if position + header.total_len() - f > read.max_bytes {
                            break;
                        }
                        end = position + header.total_len();
                    }
                }
            }
            Scanned::Incomplete { position, needed } if first.is_none() => {
                let at = pos + position as u64;
                if at.saturating_add(needed as u64) > size {
                    return ChunkStep::Corrupt {
                        position: at,
                        reason: format!(
                            "the batch declares {needed} bytes, the segment holds {} from there",
                            size - at
                        ),
                    };
                }
                // The next batch does not fit in this chunk: read again from it, whole.
                return ChunkStep::ReadAt {
                    pos: at,
                    at_least: needed,
                };
            }
            Scanned::Invalid { position, error } if first.is_none() => {
                return corrupt(pos + position as u64, &error);
            }
            Scanned::Incomplete { .. } | Scanned::End | Scanned::Invalid { .. } => break,
        }
    }
    if let Some(f) = first {
        return ChunkStep::Found(f..end);
    }
    match scanner.position() {
        0 => ChunkStep::Nothing,
        advanced => ChunkStep::ReadAt {
            pos: pos + advanced as u64,
            at_least: 0,
        },
    }
}

fn corrupt(position: u64, error: &BatchError) -> ChunkStep {
    ChunkStep::Corrupt {
        position,
        reason: error.to_string(),
    }
}

/// Where the tail cache may hold the segment's bytes.
#[derive(Clone, Copy)]
pub struct CachedTail<'a> {
    pub cache: &'a RefCell<TailCache>,
    pub segment_base: i64,
}

/// Reads from one segment (`start`: a position at or before the batch holding the offset,
/// `size`: the bytes written). `None` when the segment holds nothing at or after the offset;
/// `Some` of empty bytes when the first batch is there but does not fit. A batch that cannot
/// be read where the first one must be (a bad header, a length past the end of the segment)
/// is [`SegmentReadError::Corrupt`]: never a retry, never silently nothing.
pub(super) async fn read_from_segment(
    files: &SegmentFiles,
    start: u64,
    size: u64,
    read: SegmentRead,
    cached: CachedTail<'_>,
) -> Result<Option<Bytes>, SegmentReadError> {
    let mut pos = start;
    let mut at_least = 0usize;
    while pos < size {
        let want = chunk_len(&read, pos, size, at_least);
        let from_cache = cached
            .cache
            .borrow_mut()
            .copy_range(cached.segment_base, pos, want);
        let chunk = match from_cache {
            Some(bytes) => Bytes::from(bytes),
            None => Bytes::from(files.log.read_at(pos, want).await?),
        };
        match scan_chunk(&chunk, pos, size, &read) {
            ChunkStep::Found(range) => return Ok(Some(chunk.slice(range))),
            ChunkStep::Nothing => return Ok(None),
            ChunkStep::ReadAt {
                pos: p,
                at_least: n,
            } => {
                pos = p;
                at_least = n;
            }
            ChunkStep::Corrupt { position, reason } => {
                return Err(SegmentReadError::Corrupt { position, reason })
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch_builder::BatchBuilder;
    use crate::protocol::record_batch::BATCH_HEADER_LEN;

    fn read(offset: i64, max_bytes: usize) -> SegmentRead {
        SegmentRead {
            offset,
            bound: i64::MAX,
            max_bytes,
            whole_first: true,
            index_interval: 4096,
        }
    }

    /// A segment of `n` one-record batches at offsets 0..n.
    fn segment(n: i64) -> Vec<u8> {
        let mut out = Vec::new();
        for o in 0..n {
            let mut b = BatchBuilder::new(0);
            b.push(None, Some(b"value"), 0, &[]);
            let mut bytes = b.build().to_vec();
            crate::protocol::record_batch::set_base_offset(&mut bytes, o);
            out.extend_from_slice(&bytes);
        }
        out
    }

    #[test]
    fn a_batch_longer_than_the_segment_is_corrupt_not_a_retry() {
        let mut file = segment(3);
        let size = file.len() as u64;
        // batchLength of the first batch now passes the end of the file.
        file[8..12].copy_from_slice(&(size as i32).to_be_bytes());
        let step = scan_chunk(&file, 0, size, &read(0, 1 << 20));
        assert!(
            matches!(step, ChunkStep::Corrupt { position: 0, .. }),
            "{step:?}"
        );
    }

    #[test]
    fn a_batch_cut_by_the_chunk_is_read_again_whole() {
        let file = segment(3);
        let size = file.len() as u64;
        let one = file.len() / 3;
        // Only 10 bytes of the second batch: read again from it, more than those 10 (its
        // header first, then, knowing its length, all of it).
        let step = scan_chunk(&file[..one + 10], 0, size, &read(1, 1 << 20));
        assert!(
            matches!(step, ChunkStep::ReadAt { pos, at_least } if pos == one as u64 && at_least > 10),
            "{step:?}"
        );
        let step = scan_chunk(
            &file[one..one + BATCH_HEADER_LEN],
            one as u64,
            size,
            &read(1, 1 << 20),
        );
        assert_eq!(
            step,
            ChunkStep::ReadAt {
                pos: one as u64,
                at_least: one
            }
        );
        let step = scan_chunk(&file[one..], one as u64, size, &read(1, 1 << 20));
        assert_eq!(step, ChunkStep::Found(0..2 * one));
    }

    #[test]
    fn a_bad_header_at_the_offset_is_corrupt_and_after_data_ends_the_read() {
        let mut file = segment(3);
        let one = file.len() / 3;
        file[one + 16] = 9; // the second batch's magic
        let size = file.len() as u64;
        let at_bad = scan_chunk(&file, 0, size, &read(1, 1 << 20));
        assert!(matches!(at_bad, ChunkStep::Corrupt { position, .. } if position == one as u64));
        // Reading from the first batch returns it and stops before the damage.
        assert_eq!(
            scan_chunk(&file, 0, size, &read(0, 1 << 20)),
            ChunkStep::Found(0..one)
        );
    }
}
