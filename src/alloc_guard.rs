//! A global allocator that survives allocations sized by untrusted wire lengths.
//!
//! The kafka-protocol crate decodes an array by reading its length from the wire and calling
//! `Vec::with_capacity(length)` before reading any element. A 20-byte request claiming two
//! billion elements asks for hundreds of GiB; the system allocator refuses, and Rust aborts
//! the process on allocation failure. This allocator serves such huge requests (≥ 1 GiB)
//! with an `mmap(MAP_NORESERVE)` mapping instead: address space only, no memory is committed
//! until touched. The decode then fails on the missing bytes a moment later and the mapping is
//! returned, and the broker answers with an error instead of dying.
//!
//! Installed by the `ringbroker` binary (`#[global_allocator]` in main.rs). Everything below
//! the threshold goes to the system allocator unchanged.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at least this large are mapped lazily.
pub const HUGE_ALLOCATION: usize = 1 << 30;
const PAGE: usize = 4096;

pub struct GuardedAllocator;

fn is_huge(layout: &Layout) -> bool {
    layout.size() >= HUGE_ALLOCATION && layout.align() <= PAGE
}

unsafe fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping of `size` bytes; no existing memory is touched.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        ptr.cast()
    }
}

unsafe impl GlobalAlloc for GuardedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            // SAFETY: see `map`.
            unsafe { map(layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_huge(&layout) {
            // Anonymous mappings are zero-filled.
            // SAFETY: see `map`.
            unsafe { map(layout.size()) }
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_huge(&layout) {
            // SAFETY: `ptr` came from `map` with this same size (the layout decides which
            // allocator served it, and callers pass back the layout they allocated with).
            unsafe {
                libc::munmap(ptr.cast(), layout.size());
            }
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        if !is_huge(&layout) && !is_huge(&new_layout) {
            // SAFETY: forwarded with the caller's layout and size.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: a fresh block of the new layout, the overlap copied, the old block freed
        // with the layout it was allocated with.
        unsafe {
            let fresh = self.alloc(new_layout);
            if !fresh.is_null() {
                std::ptr::copy_nonoverlapping(ptr, fresh, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            fresh
        }
    }
}

/// Keeps freed buffers of up to `KEPT_ALLOCATION` in the allocator's heap instead of giving
/// them back to the kernel. glibc maps large allocations on their own and returns them (and
/// trims freed heap tops) at once, so every fetch read buffer and every follower response was
/// new memory: a page fault and a zeroed page per 4 KiB touched (4 % of a leader's CPU in a
/// profile). Called once, before any thread starts.
pub fn keep_freed_buffers() {
    if std::env::var_os("RINGBROKER_MALLOC_DEFAULT").is_some() {
        return;
    }
    // glibc caps the mmap threshold at 32 MiB on 64-bit; the trim threshold is four times
    // that so a heap keeps a few freed buffers of that size.
    const KEPT_ALLOCATION: libc::c_int = 32 << 20;
    // SAFETY: mallopt only changes the allocator's thresholds; no memory is touched.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, KEPT_ALLOCATION);
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEPT_ALLOCATION * 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_allocations_are_lazy_mappings() {
        let a = GuardedAllocator;
        // 256 GiB: far more than the machine has; the mapping still succeeds.
        let layout = Layout::from_size_align(256usize << 30, 8).expect("layout");
        // SAFETY: allocation and release with the same layout; one page touched.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            *p = 7;
            assert_eq!(*p, 7);
            a.dealloc(p, layout);
        }
    }

    #[test]
    fn small_allocations_and_realloc_across_the_threshold() {
        let a = GuardedAllocator;
        let small = Layout::from_size_align(64, 8).expect("layout");
        // SAFETY: each block is released with the layout it was allocated with.
        unsafe {
            let p = a.alloc(small);
            assert!(!p.is_null());
            p.write_bytes(3, 64);
            let big = a.realloc(p, small, HUGE_ALLOCATION);
            assert!(!big.is_null());
            assert_eq!(*big.add(63), 3);
            let big_layout = Layout::from_size_align(HUGE_ALLOCATION, 8).expect("layout");
            let back = a.realloc(big, big_layout, 128);
            assert_eq!(*back.add(10), 3);
            a.dealloc(back, Layout::from_size_align(128, 8).expect("layout"));
        }
    }
}
