//! The tail cache: what a partition log wrote last, kept in memory, so that consumers and
//! followers reading near the end never touch the disk, whatever the page cache does.
//!
//! With direct segment writes nothing written is in the page cache, and on the VMs we run on
//! the host reclaims the page cache anyway. The group commit hands each direct write buffer
//! here once written (`insert`): no copy. A read of bytes all held here copies them out once
//! (`copy_range`); anything else reads the file.
//!
//! Memory: one byte budget per shard (`set_shard_budget`, `ringbroker.log.tail.cache.bytes`)
//! over all its logs. Over it, the oldest chunk of the least recently used log goes (LRU by
//! partition); a dropped chunk's buffer returns to the shard's buffer pool. Chunks mostly
//! empty (a small flight in a large buffer) are copied into a buffer of their size instead,
//! so that the budget holds data rather than spare capacity.

use crate::metrics::snapshot::{ShardTailCache, TailCacheStats};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use crate::runtime::WrittenBuffer;

/// The per-shard budget when none was set (log tools, tests).
pub const DEFAULT_SHARD_BUDGET: usize = 64 << 20;

thread_local! {
    static SHARD: ShardCaches = ShardCaches::default();
}

/// Every tail cache of this shard (thread), for the shared budget.
struct ShardCaches {
    budget: Cell<usize>,
    used: Cell<usize>,
    /// Use counter: a cache's `last_use` is the tick of its last insert or hit.
    tick: Cell<u64>,
    caches: RefCell<Vec<Weak<RefCell<TailCache>>>>,
    /// Over every cache of the shard, since it started.
    stats: Cell<TailCacheStats>,
}

impl Default for ShardCaches {
    fn default() -> Self {
        ShardCaches {
            budget: Cell::new(DEFAULT_SHARD_BUDGET),
            used: Cell::new(0),
            tick: Cell::new(0),
            caches: RefCell::new(Vec::new()),
            stats: Cell::new(TailCacheStats::default()),
        }
    }
}

/// Sets this shard's tail-cache budget in bytes (0 turns caching off).
pub fn set_shard_budget(bytes: usize) {
    SHARD.with(|s| s.budget.set(bytes));
    evict_over_budget();
}

pub fn shard_tail_cache() -> ShardTailCache {
    SHARD.with(|s| ShardTailCache {
        bytes: s.used.get(),
        budget: s.budget.get(),
        stats: s.stats.get(),
    })
}

fn count(hit_bytes: Option<usize>) {
    SHARD.with(|s| {
        let mut st = s.stats.get();
        match hit_bytes {
            Some(n) => {
                st.hits += 1;
                st.hit_bytes += n as u64;
            }
            None => st.misses += 1,
        }
        s.stats.set(st);
    });
}

fn next_tick() -> u64 {
    SHARD.with(|s| {
        let t = s.tick.get() + 1;
        s.tick.set(t);
        t
    })
}

enum ChunkBytes {
    Pooled(WrittenBuffer),
    Copied(Vec<u8>),
}

impl ChunkBytes {
    fn bytes(&self) -> &[u8] {
        match self {
            ChunkBytes::Pooled(b) => b.bytes(),
            ChunkBytes::Copied(v) => v,
        }
    }

    /// Memory held, for the budget.
    fn footprint(&self) -> usize {
        match self {
            ChunkBytes::Pooled(b) => b.capacity(),
            ChunkBytes::Copied(v) => v.capacity(),
        }
    }
}

struct Chunk {
    segment_base: i64,
    /// File position of the first byte.
    position: u64,
    data: ChunkBytes,
}

impl Chunk {
    fn end(&self) -> u64 {
        self.position + self.data.bytes().len() as u64
    }
}

/// One log's recently written bytes, in file order: by segment, then position. Chunks may
/// overlap (a direct write repeats the last partial block of the one before); overlapping
/// bytes are equal.
#[derive(Default)]
pub struct TailCache {
    chunks: VecDeque<Chunk>,
    bytes: usize,
    last_use: u64,
    pub stats: TailCacheStats,
}

/// A log's handle on its cache (shared with the shard's budget).
pub type SharedTailCache = Rc<RefCell<TailCache>>;

/// A new, empty cache registered with this shard's budget.
pub fn new_shared() -> SharedTailCache {
    let cache = Rc::new(RefCell::new(TailCache::default()));
    SHARD.with(|s| s.caches.borrow_mut().push(Rc::downgrade(&cache)));
    cache
}

impl TailCache {
    /// Keeps a written buffer: `position` is its file position in segment `segment_base`.
    /// Call [`evict_over_budget`] after releasing the borrow.
    pub fn insert(&mut self, segment_base: i64, position: u64, written: WrittenBuffer) {
        if SHARD.with(|s| s.budget.get()) == 0 || written.bytes().is_empty() {
            return;
        }
        let data = if written.bytes().len() * 4 < written.capacity() {
            ChunkBytes::Copied(written.bytes().to_vec())
        } else {
            ChunkBytes::Pooled(written)
        };
        self.push(Chunk {
            segment_base,
            position,
            data,
        });
    }

    fn push(&mut self, chunk: Chunk) {
        let (segment_base, position) = (chunk.segment_base, chunk.position);
        // Out of order would mean a write into the past: keep the cache consistent instead.
        if self
            .chunks
            .back()
            .is_some_and(|last| (last.segment_base, last.position) > (segment_base, position))
        {
            self.clear();
        }
        self.add_bytes(chunk.data.footprint());
        self.chunks.push_back(chunk);
        self.last_use = next_tick();
    }

    /// The bytes `[position, position + len)` of segment `segment_base`, if all are here.
    pub fn copy_range(&mut self, segment_base: i64, position: u64, len: usize) -> Option<Vec<u8>> {
        let found = self.find(segment_base, position, len);
        match &found {
            Some(bytes) => {
                self.stats.hits += 1;
                self.stats.hit_bytes += bytes.len() as u64;
                self.last_use = next_tick();
            }
            None => self.stats.misses += 1,
        }
        count(found.as_ref().map(Vec::len));
        found
    }

    fn find(&self, segment_base: i64, position: u64, len: usize) -> Option<Vec<u8>> {
        let end = position + len as u64;
        // The first chunk that ends after `position` in this segment.
        let first = self
            .chunks
            .partition_point(|c| (c.segment_base, c.end()) <= (segment_base, position));
        let mut out = Vec::with_capacity(len);
        let mut filled = position;
        for chunk in self.chunks.range(first..) {
            if chunk.segment_base != segment_base || chunk.position > filled {
                return None;
            }
            let take_end = end.min(chunk.end());
            if take_end > filled {
                let bytes = chunk.data.bytes();
                let from = (filled - chunk.position) as usize;
                let to = (take_end - chunk.position) as usize;
                out.extend_from_slice(&bytes[from..to]);
                filled = take_end;
            }
            if filled == end {
                return Some(out);
            }
        }
        (len == 0).then_some(out)
    }

    /// Drops everything (truncation, close).
    pub fn clear(&mut self) {
        let freed: usize = self.chunks.iter().map(|c| c.data.footprint()).sum();
        self.chunks.clear();
        self.sub_bytes(freed);
    }

    /// Drops the chunks of segments below `segment_base` (deleted by retention).
    pub fn drop_segments_below(&mut self, segment_base: i64) {
        while self
            .chunks
            .front()
            .is_some_and(|c| c.segment_base < segment_base)
        {
            self.evict_oldest();
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn evict_oldest(&mut self) {
        if let Some(c) = self.chunks.pop_front() {
            self.sub_bytes(c.data.footprint());
        }
    }

    fn add_bytes(&mut self, n: usize) {
        self.bytes += n;
        let _ = SHARD.try_with(|s| s.used.set(s.used.get() + n));
    }

    fn sub_bytes(&mut self, n: usize) {
        self.bytes -= n;
        // `try_with`: a cache dropped while the thread exits may outlive the shard's state.
        let _ = SHARD.try_with(|s| s.used.set(s.used.get().saturating_sub(n)));
    }
}

impl Drop for TailCache {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Evicts, while the shard is over its budget, the oldest chunk of the least recently used
/// cache. Call with no cache borrowed.
pub fn evict_over_budget() {
    SHARD.with(|s| {
        // Bounded: every round frees a chunk or stops.
        while s.used.get() > s.budget.get() {
            let victim = {
                let mut caches = s.caches.borrow_mut();
                caches.retain(|w| w.strong_count() > 0);
                caches
                    .iter()
                    .filter_map(Weak::upgrade)
                    .filter(|c| c.try_borrow().is_ok_and(|c| !c.chunks.is_empty()))
                    .min_by_key(|c| c.borrow().last_use)
            };
            let Some(victim) = victim else {
                return;
            };
            victim.borrow_mut().evict_oldest();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(segment_base: i64, position: u64, bytes: &[u8]) -> Chunk {
        Chunk {
            segment_base,
            position,
            data: ChunkBytes::Copied(bytes.to_vec()),
        }
    }

    /// File bytes: position p holds p mod 251.
    fn file(from: u64, to: u64) -> Vec<u8> {
        (from..to).map(|p| (p % 251) as u8).collect()
    }

    #[test]
    fn ranges_across_overlapping_chunks_and_gaps() {
        let mut c = TailCache::default();
        // Two direct writes: the second repeats the block the first ended in.
        c.push(chunk(0, 0, &file(0, 5000)));
        c.push(chunk(0, 4096, &file(4096, 9000)));
        assert_eq!(c.copy_range(0, 10, 100), Some(file(10, 110)));
        assert_eq!(c.copy_range(0, 4000, 2000), Some(file(4000, 6000)));
        assert_eq!(c.copy_range(0, 8000, 1000), Some(file(8000, 9000)));
        assert_eq!(c.copy_range(0, 8000, 1001), None, "past the end");
        assert_eq!(c.copy_range(7, 0, 10), None, "another segment");
        // A gap: the next chunk starts after the end of this one.
        c.push(chunk(0, 12288, &file(12288, 13000)));
        assert_eq!(c.copy_range(0, 8990, 20), None);
        assert_eq!(c.copy_range(0, 12300, 10), Some(file(12300, 12310)));
        // The next segment.
        c.push(chunk(50, 0, &file(0, 100)));
        assert_eq!(c.copy_range(50, 0, 100), Some(file(0, 100)));
        assert_eq!(c.stats.misses, 3);
        c.drop_segments_below(50);
        assert_eq!(c.copy_range(0, 10, 10), None);
        assert_eq!(c.bytes(), 100);
        c.clear();
        assert_eq!(c.bytes(), 0);
    }

    #[test]
    fn the_shard_budget_evicts_the_least_recently_used_log_first() {
        set_shard_budget(10_000);
        let (a, b) = (new_shared(), new_shared());
        a.borrow_mut().push(chunk(0, 0, &file(0, 4000)));
        b.borrow_mut().push(chunk(0, 0, &file(0, 4000)));
        // a is read, so b is the least recently used when a third chunk passes the budget.
        assert!(a.borrow_mut().copy_range(0, 0, 10).is_some());
        a.borrow_mut().push(chunk(0, 4096, &file(4096, 8096)));
        evict_over_budget();
        assert_eq!(b.borrow().bytes(), 0, "b evicted");
        assert_eq!(a.borrow().bytes(), 8000);
        assert!(shard_tail_cache().bytes <= 10_000);
        set_shard_budget(0);
        assert_eq!(
            shard_tail_cache().bytes,
            0,
            "a zero budget empties every cache"
        );
        drop((a, b));
        set_shard_budget(DEFAULT_SHARD_BUDGET);
    }
}
