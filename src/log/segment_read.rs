//! Reading whole batches out of one segment file, starting at an index position.

use bytes::Bytes;

use crate::protocol::record_batch::BatchError;

use super::scan::{BatchScanner, Scanned};
use super::segment::SegmentFiles;

/// What to read: the batches from the one holding `offset`, within `max_bytes`, stopping
/// before `bound`. With `whole_first` the first batch comes whole even when it is larger than
/// `max_bytes` (the first batch of a Fetch response, KIP-74); without it a first batch that
/// does not fit means nothing is returned.
#[derive(Debug, Clone, Copy)]
pub(super) struct SegmentRead {
    pub offset: i64,
    pub bound: i64,
    pub max_bytes: usize,
    pub whole_first: bool,
    pub index_interval: u32,
}

/// Why a segment read failed.
#[derive(Debug)]
pub(super) enum SegmentReadError {
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
) -> Result<Option<Bytes>, SegmentReadError> {
    let SegmentRead {
        offset,
        bound,
        max_bytes,
        whole_first,
        index_interval,
    } = read;
    // The index lands within about one interval (plus one batch) of the target.
    let slack = index_interval as usize + 64 * 1024;
    let mut pos = start;
    let mut at_least = 0usize;
    'chunks: while pos < size {
        let want = max_bytes
            .max(1)
            .saturating_add(slack)
            .max(at_least)
            .min((size - pos) as usize);
        let chunk = Bytes::from(files.log.read_at(pos, want).await?);
        if chunk.is_empty() {
            return Ok(None);
        }
        let mut scanner = BatchScanner::new(&chunk, false);
        let mut first: Option<usize> = None;
        let mut end = 0usize;
        loop {
            match scanner.next_batch() {
                Scanned::Batch { position, header } => {
                    if header.base_offset >= bound {
                        break;
                    }
                    match first {
                        None if header.last_offset() < offset => {}
                        None if !whole_first && header.total_len() > max_bytes => {
                            return Ok(Some(Bytes::new()));
                        }
                        None => {
                            first = Some(position);
                            end = position + header.total_len();
                        }
                        Some(f) => {
                            if position + header.total_len() - f > max_bytes {
                                break;
                            }
                            end = position + header.total_len();
                        }
                    }
                }
                Scanned::Incomplete { position, needed } if first.is_none() => {
                    let at = pos + position as u64;
                    if at.saturating_add(needed as u64) > size {
                        return Err(SegmentReadError::Corrupt {
                            position: at,
                            reason: format!(
                                "the batch declares {needed} bytes, the segment holds {} from there",
                                size - at
                            ),
                        });
                    }
                    // The next batch does not fit in this chunk: read again from it.
                    pos = at;
                    at_least = needed;
                    continue 'chunks;
                }
                Scanned::Invalid { position, error } if first.is_none() => {
                    return Err(corrupt(pos + position as u64, &error));
                }
                Scanned::Incomplete { .. } | Scanned::End | Scanned::Invalid { .. } => break,
            }
        }
        if let Some(f) = first {
            return Ok(Some(chunk.slice(f..end)));
        }
        let advanced = scanner.position();
        if advanced == 0 {
            return Ok(None);
        }
        pos += advanced as u64;
        at_least = 0;
    }
    Ok(None)
}

fn corrupt(position: u64, error: &BatchError) -> SegmentReadError {
    SegmentReadError::Corrupt {
        position,
        reason: error.to_string(),
    }
}
