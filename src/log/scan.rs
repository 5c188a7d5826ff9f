//! Walking the batches of a segment file: header by header, optionally checking CRCs.
//!
//! Used by recovery (full scans of unflushed segments, short tail scans after a clean stop),
//! by reads (the forward scan after the index lookup) and by timestamp lookups. Only batch
//! headers are parsed; records are never decoded.

use std::io;

use crate::protocol::record_batch::{
    self, BatchError, BatchHeader, BATCH_HEADER_LEN, LOG_OVERHEAD,
};
use crate::runtime::File;

/// What the scan found at a position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scanned {
    /// A whole, valid batch at this position.
    Batch {
        position: usize,
        header: BatchHeader,
    },
    /// The buffer ends exactly here.
    End,
    /// A batch starts here but the buffer holds only part of it; `needed` is its full length.
    Incomplete { position: usize, needed: usize },
    /// The bytes here are not a valid batch (zero padding, a torn write, corruption).
    Invalid { position: usize, error: BatchError },
}

/// Iterates over the batches in a buffer. `verify_crc` checks each batch's CRC32C (recovery);
/// without it only headers are checked (reads of data already verified on append).
pub struct BatchScanner<'a> {
    buf: &'a [u8],
    position: usize,
    verify_crc: bool,
}

impl<'a> BatchScanner<'a> {
    pub fn new(buf: &'a [u8], verify_crc: bool) -> Self {
        BatchScanner {
            buf,
            position: 0,
            verify_crc,
        }
    }

    /// The position of the next batch to be scanned.
    pub fn position(&self) -> usize {
        self.position
    }

    pub fn next_batch(&mut self) -> Scanned {
        let position = self.position;
        let rest = &self.buf[position..];
        if rest.is_empty() {
            return Scanned::End;
        }
        if rest.len() < BATCH_HEADER_LEN {
            // Zeros through the length field (a batch length of 0) can't start a batch: call
            // that out as invalid rather than torn. Fewer zeros may well be the high bytes of
            // a batch's base offset, cut by the end of a buffer that is not the file's end.
            if rest.len() >= LOG_OVERHEAD && rest.iter().all(|b| *b == 0) {
                return Scanned::Invalid {
                    position,
                    error: BatchError::TooShort { len: rest.len() },
                };
            }
            return Scanned::Incomplete {
                position,
                needed: BATCH_HEADER_LEN,
            };
        }
        let header = match BatchHeader::parse(rest) {
            Ok(h) => h,
            Err(error) => return Scanned::Invalid { position, error },
        };
        let total = header.total_len();
        if total > rest.len() {
            return Scanned::Incomplete {
                position,
                needed: total,
            };
        }
        let checked = if self.verify_crc {
            record_batch::validate(&rest[..total])
        } else {
            Ok(header)
        };
        match checked {
            Ok(header) => {
                self.position += total;
                Scanned::Batch { position, header }
            }
            Err(error) => Scanned::Invalid { position, error },
        }
    }
}

/// Where a file scan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// Every byte up to the end was a valid batch.
    Clean,
    /// The last batch is cut short by the end of the file (a torn write).
    Torn { position: u64 },
    /// Invalid bytes (zero padding, corruption) from `position` on.
    Invalid { position: u64, error: BatchError },
    /// A valid batch whose offsets do not follow the previous batch's (the visitor said stop).
    OutOfOrder { position: u64 },
}

/// Summary of a file scan: where the valid data ends and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileScan {
    /// End of the last valid batch: everything from here on is not part of the log.
    pub valid_end: u64,
    pub end: ScanEnd,
}

/// Chunk size for file scans. Batches larger than this are read whole on their own.
const SCAN_CHUNK: usize = 1 << 20;

/// Scans `file` from `from` to `end`, calling `visit(position, header)` for each valid batch;
/// the visitor returns false to reject a batch (its offsets are out of order), which ends the
/// scan there.
pub async fn scan_file(
    file: &File,
    from: u64,
    end: u64,
    verify_crc: bool,
    mut visit: impl FnMut(u64, &BatchHeader) -> bool,
) -> io::Result<FileScan> {
    let mut chunk_start = from;
    let mut want = SCAN_CHUNK;
    while chunk_start < end {
        let len = want.min((end - chunk_start) as usize);
        let chunk = file.read_at(chunk_start, len).await?;
        if chunk.is_empty() {
            break;
        }
        let file_ends_in_chunk = chunk_start + chunk.len() as u64 >= end;
        let mut scanner = BatchScanner::new(&chunk, verify_crc);
        want = SCAN_CHUNK;
        loop {
            match scanner.next_batch() {
                Scanned::Batch { position, header } => {
                    let p = chunk_start + position as u64;
                    if !visit(p, &header) {
                        return Ok(FileScan {
                            valid_end: p,
                            end: ScanEnd::OutOfOrder { position: p },
                        });
                    }
                }
                Scanned::End => break,
                Scanned::Incomplete { position, needed } => {
                    if file_ends_in_chunk {
                        return Ok(FileScan {
                            valid_end: chunk_start + position as u64,
                            end: ScanEnd::Torn {
                                position: chunk_start + position as u64,
                            },
                        });
                    }
                    want = needed.max(SCAN_CHUNK);
                    break;
                }
                Scanned::Invalid { position, error } => {
                    let p = chunk_start + position as u64;
                    return Ok(FileScan {
                        valid_end: p,
                        end: ScanEnd::Invalid { position: p, error },
                    });
                }
            }
        }
        let advanced = scanner.position() as u64;
        if advanced == 0 && chunk.len() >= want {
            // No progress although the chunk was as large as asked: cannot happen for a
            // well-formed scanner; stop rather than loop.
            break;
        }
        chunk_start += advanced;
        if file_ends_in_chunk && advanced as usize == chunk.len() {
            break;
        }
    }
    Ok(FileScan {
        valid_end: chunk_start.min(end),
        end: ScanEnd::Clean,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch_builder::BatchBuilder;

    fn batch(n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(1000);
        for i in 0..n {
            b.push(
                None,
                Some(format!("value-{i}").as_bytes()),
                1000 + i as i64,
                &[],
            );
        }
        b.build().to_vec()
    }

    #[test]
    fn scans_consecutive_batches_then_end() {
        let mut buf = batch(3);
        let first_len = buf.len();
        buf.extend(batch(2));
        let mut s = BatchScanner::new(&buf, true);
        assert!(matches!(s.next_batch(), Scanned::Batch { position: 0, .. }));
        assert!(matches!(s.next_batch(), Scanned::Batch { position, .. } if position == first_len));
        assert_eq!(s.next_batch(), Scanned::End);
    }

    #[test]
    fn zero_padding_is_invalid_and_cut_batch_is_incomplete() {
        let mut buf = batch(3);
        let len = buf.len();
        buf.extend(vec![0u8; 4096]);
        let mut s = BatchScanner::new(&buf, true);
        assert!(matches!(s.next_batch(), Scanned::Batch { .. }));
        assert!(matches!(s.next_batch(), Scanned::Invalid { position, .. } if position == len));

        let whole = batch(3);
        let mut s = BatchScanner::new(&whole[..whole.len() - 1], true);
        assert!(matches!(
            s.next_batch(),
            Scanned::Incomplete { position: 0, .. }
        ));
    }

    #[test]
    fn flipped_byte_fails_crc_only_when_verifying() {
        let mut buf = batch(3);
        let last = buf.len() - 1;
        buf[last] ^= 0xff;
        assert!(matches!(
            BatchScanner::new(&buf, true).next_batch(),
            Scanned::Invalid {
                error: BatchError::CrcMismatch { .. },
                ..
            }
        ));
        assert!(matches!(
            BatchScanner::new(&buf, false).next_batch(),
            Scanned::Batch { .. }
        ));
    }
}
