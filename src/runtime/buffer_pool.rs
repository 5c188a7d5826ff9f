//! The shard's pool of aligned buffers for direct writes (`WriteBuffer`).
//!
//! Buffers come in power-of-two sizes from 128 KiB to 8 MiB and go back to the pool once
//! their write completes, so that steady appends allocate nothing: a fresh 4 KiB-aligned heap
//! buffer per write made glibc keep tens of MiB it could not reuse (measured with
//! `tests/server_produce_memory.rs`), and new pages cost a fault each on the VMs we run on.
//! The pool keeps at most `MAX_POOLED_BYTES` per shard; larger or surplus buffers are freed.

use std::cell::RefCell;

use glommio::io::DmaBuffer;

/// Smallest buffer handed out: appends staged during one flight share it.
const MIN_CLASS: usize = 128 << 10;
/// Number of size classes (128 KiB · 2^i).
const CLASSES: usize = 7;
/// Bytes of idle buffers a shard keeps (buffers in the tail cache are not idle).
const MAX_POOLED_BYTES: usize = 8 << 20;

#[derive(Default)]
struct Pool {
    free: [Vec<DmaBuffer>; CLASSES],
    pooled_bytes: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

/// The class index of a buffer of at least `size` bytes, if it is small enough to pool.
fn class_of(size: usize) -> Option<usize> {
    let rounded = size.max(MIN_CLASS).next_power_of_two();
    let class = (rounded / MIN_CLASS).trailing_zeros() as usize;
    (class < CLASSES).then_some(class)
}

/// A buffer of at least `size` bytes (its length is its full capacity).
pub fn take(size: usize) -> DmaBuffer {
    let Some(class) = class_of(size) else {
        return glommio::allocate_dma_buffer_global(size);
    };
    let pooled = POOL.with(|p| {
        let mut p = p.borrow_mut();
        let buf = p.free[class].pop();
        if let Some(b) = &buf {
            p.pooled_bytes -= b.capacity();
        }
        buf
    });
    // From the heap, not from the executor's registered memory: a registered buffer belongs
    // to one executor's rings, and a thread may run several executors one after the other
    // (tests, tools); writing one through another ring fails with EFAULT.
    pooled.unwrap_or_else(|| glommio::allocate_dma_buffer_global(MIN_CLASS << class))
}

/// Returns a buffer whose write completed.
pub fn give_back(mut buf: DmaBuffer) {
    let capacity = buf.capacity();
    let Some(class) = class_of(capacity).filter(|c| MIN_CLASS << c == capacity) else {
        return;
    };
    buf.restore_size(capacity);
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.pooled_bytes + capacity <= MAX_POOLED_BYTES {
            p.pooled_bytes += capacity;
            p.free[class].push(buf);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_powers_of_two() {
        assert_eq!(class_of(1), Some(0));
        assert_eq!(class_of(MIN_CLASS), Some(0));
        assert_eq!(class_of(MIN_CLASS + 1), Some(1));
        assert_eq!(class_of(1 << 20), Some(3));
        assert_eq!(class_of(8 << 20), Some(6));
        assert_eq!(class_of((8 << 20) + 1), None);
    }
}
