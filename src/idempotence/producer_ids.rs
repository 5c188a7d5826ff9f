//! Producer ids for InitProducerId: unique for the life of the data directory, restarts and
//! kill -9 included.
//!
//! Shard 0 owns the counter, `<data dir>/__ringbroker_metadata/producer-ids`: the first id of
//! the next block not yet handed out. A shard that needs ids asks shard 0 for a block of
//! [`PRODUCER_ID_BLOCK_SIZE`]; shard 0 persists the advanced counter (temporary file, fdatasync, rename,
//! directory sync) before answering, so no id of a block is used before the block is on disk
//! as used. Ids left in a block when the broker stops are skipped, never reused.

use std::cell::Cell;
use std::io;
use std::path::{Path, PathBuf};

use crate::model::{ProducerIdBlock, PRODUCER_ID_BLOCK_SIZE};
use crate::runtime::{self, File};
use crate::util::exclusive::Exclusive;

const FILE_NAME: &str = "producer-ids";
const FORMAT_LINE: &str = "ringbroker-producer-ids 1";

#[derive(Debug, thiserror::Error)]
pub enum ProducerIdError {
    #[error("cannot access the producer id counter {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("the producer id counter {path} is corrupt ({reason}); refusing to hand out ids that might repeat")]
    Corrupt { path: PathBuf, reason: String },
    #[error("producer ids are exhausted")]
    Exhausted,
    #[error("shard 0 did not answer a producer id request")]
    Unavailable,
    #[error("the controller did not hand out producer ids: {0}")]
    Controller(String),
}

/// Per shard: the block ids are taken from. On shard 0 also the persisted counter.
#[derive(Default)]
pub struct ProducerIdAllocator {
    /// The current block: next id to hand out, end (exclusive).
    next: Cell<i64>,
    end: Cell<i64>,
    /// Shard 0: the first id of the next block (loaded on first use); one block is
    /// persisted at a time (a cancelled allocation leaves the section: see [`Exclusive`]).
    next_block: Cell<Option<i64>>,
    allocating: Exclusive,
}

impl ProducerIdAllocator {
    pub fn new() -> Self {
        Self::default()
    }

    /// An id from the current block, if any is left.
    pub fn take(&self) -> Option<i64> {
        let next = self.next.get();
        if next < self.end.get() {
            self.next.set(next + 1);
            Some(next)
        } else {
            None
        }
    }

    /// Installs a fresh block and takes its first id.
    pub fn install_and_take(&self, block: ProducerIdBlock) -> Option<i64> {
        if self.next.get() >= self.end.get() {
            self.next.set(block.start);
            self.end.set(block.end);
        }
        // Another request installed a block meanwhile: take from it; `block`'s ids are
        // skipped, which is allowed (ids are unique, not dense).
        self.take()
    }

    /// Shard 0 only: reserves the next block, durably, before returning it. `dir` holds the
    /// counter file (the broker's metadata directory).
    pub async fn allocate_block(&self, dir: &Path) -> Result<ProducerIdBlock, ProducerIdError> {
        let _inside = self.allocating.enter().await;
        self.allocate_block_exclusive(dir).await
    }

    async fn allocate_block_exclusive(
        &self,
        dir: &Path,
    ) -> Result<ProducerIdBlock, ProducerIdError> {
        let start = match self.next_block.get() {
            Some(n) => n,
            None => read_counter(dir).await?,
        };
        let end = start
            .checked_add(PRODUCER_ID_BLOCK_SIZE)
            .ok_or(ProducerIdError::Exhausted)?;
        write_counter(dir, end).await?;
        self.next_block.set(Some(end));
        Ok(ProducerIdBlock { start, end })
    }
}

/// The stored counter; 0 when there is none yet.
async fn read_counter(dir: &Path) -> Result<i64, ProducerIdError> {
    let path = dir.join(FILE_NAME);
    if !path.exists() {
        return Ok(0);
    }
    let io_err = |source| ProducerIdError::Io {
        path: path.clone(),
        source,
    };
    let file = File::open_existing(&path).await.map_err(io_err)?;
    let size = file.size().await.map_err(io_err)?;
    let bytes = file
        .read_at(0, size.min(4096) as usize)
        .await
        .map_err(io_err)?;
    file.close().await.map_err(io_err)?;
    decode_counter(&bytes).map_err(|reason| ProducerIdError::Corrupt { path, reason })
}

fn encode_counter(next_block: i64) -> String {
    format!("{FORMAT_LINE}\nnext-block-start {next_block}\n")
}

fn decode_counter(bytes: &[u8]) -> Result<i64, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let mut lines = text.lines();
    if lines.next() != Some(FORMAT_LINE) {
        return Err("unknown format line".to_string());
    }
    lines
        .next()
        .and_then(|l| l.strip_prefix("next-block-start "))
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|v| *v >= 0)
        .ok_or_else(|| "missing or bad next-block-start".to_string())
}

/// Replaces the counter atomically and durably.
async fn write_counter(dir: &Path, next_block: i64) -> Result<(), ProducerIdError> {
    let path = dir.join(FILE_NAME);
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let io_err = |source| ProducerIdError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io_err)?;
    let file = File::open_or_create(&tmp).await.map_err(io_err)?;
    file.truncate(0).await.map_err(io_err)?;
    file.write_all_at(encode_counter(next_block).into_bytes(), 0)
        .await
        .map_err(io_err)?;
    file.fdatasync().await.map_err(io_err)?;
    file.close().await.map_err(io_err)?;
    runtime::rename(&tmp, &path).await.map_err(io_err)?;
    runtime::sync_dir(dir).await.map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_encoding() {
        assert_eq!(decode_counter(encode_counter(3000).as_bytes()), Ok(3000));
        assert!(decode_counter(b"").is_err());
        assert!(decode_counter(b"ringbroker-producer-ids 1\nnext-block-start -1\n").is_err());
        assert!(decode_counter(b"ringbroker-producer-ids 1\nnext-block-start x\n").is_err());
    }

    #[test]
    fn an_allocation_cancelled_midway_does_not_block_the_next() {
        let dir = tempfile::tempdir().expect("tempdir");
        crate::runtime::block_on(async {
            let a = ProducerIdAllocator::new();
            // Started (it waits on the counter file's I/O) and then dropped, as a handler
            // task is when its connection closes.
            let mut first = Box::pin(a.allocate_block(dir.path()));
            let polled = futures_lite::future::poll_once(&mut first).await;
            assert!(polled.is_none(), "the allocation is still in flight");
            drop(first);
            // Bounded: a leftover busy flag would make this wait forever.
            let second = futures_lite::future::or(
                async { Some(a.allocate_block(dir.path()).await) },
                async {
                    crate::runtime::sleep(std::time::Duration::from_secs(10)).await;
                    None
                },
            )
            .await;
            let block = second
                .expect("the next allocation completes")
                .expect("block");
            assert_eq!(block.end - block.start, PRODUCER_ID_BLOCK_SIZE);
        })
        .expect("executor");
    }

    #[test]
    fn blocks_are_persisted_and_never_repeat_across_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        crate::runtime::block_on(async {
            let a = ProducerIdAllocator::new();
            assert_eq!(a.take(), None);
            let b1 = a.allocate_block(dir.path()).await.expect("block");
            let b2 = a.allocate_block(dir.path()).await.expect("block");
            assert_eq!(
                (b1.start, b1.end, b2.start),
                (0, PRODUCER_ID_BLOCK_SIZE, PRODUCER_ID_BLOCK_SIZE)
            );
            assert_eq!(a.install_and_take(b1), Some(0));
            assert_eq!(a.take(), Some(1));
            // A restart: a new allocator over the same directory starts after every block.
            let restarted = ProducerIdAllocator::new();
            let b3 = restarted.allocate_block(dir.path()).await.expect("block");
            assert_eq!(b3.start, 2 * PRODUCER_ID_BLOCK_SIZE);
            std::fs::write(dir.path().join(FILE_NAME), b"junk").expect("write");
            let corrupt = ProducerIdAllocator::new();
            assert!(matches!(
                corrupt.allocate_block(dir.path()).await,
                Err(ProducerIdError::Corrupt { .. })
            ));
        })
        .expect("executor");
    }
}
