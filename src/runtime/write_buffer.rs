//! The bytes of one contiguous file write, staged in memory before the write is issued.
//!
//! Two kinds, one per way a file is written (`File::open_*` with [`FileIo`]):
//! - buffered files take a plain `Vec` (the kernel copies it into the page cache);
//! - direct (O_DIRECT) files take an aligned buffer that starts on an alignment boundary and
//!   is written whole up to the next boundary, so that the device reads the memory itself and
//!   nothing passes through the page cache. Its first bytes (the `head`) repeat what the file
//!   already holds from the boundary to where the new bytes start; the tail past the end is
//!   zeroed when written, and the next write, which starts at the same boundary, covers it.

use glommio::io::DmaBuffer;

use super::file_io::FileIo;

/// Direct writes start and end on multiples of this. 4 KiB covers every logical block size
/// Linux devices report (512 or 4096) and is the page size, which O_DIRECT is happiest with.
pub const DIRECT_ALIGNMENT: u64 = 4096;

/// Rounds `v` down to a multiple of [`DIRECT_ALIGNMENT`].
pub fn align_down(v: u64) -> u64 {
    v - v % DIRECT_ALIGNMENT
}

/// Rounds `v` up to a multiple of [`DIRECT_ALIGNMENT`].
pub fn align_up(v: u64) -> u64 {
    v.div_ceil(DIRECT_ALIGNMENT) * DIRECT_ALIGNMENT
}

enum Storage {
    Heap(Vec<u8>),
    /// `DmaBuffer` has a fixed size: `len` says how much of it is filled.
    Aligned {
        buf: DmaBuffer,
        len: usize,
    },
}

/// Bytes staged for one write at a file position; see the module comment.
pub struct WriteBuffer {
    storage: Storage,
}

impl WriteBuffer {
    /// A buffer for a write of about `capacity` new bytes to a file written as `io` says,
    /// starting with `head` (for direct files: the file's bytes from the alignment boundary
    /// before the write's position; empty for buffered files). A direct buffer holds at least
    /// `head` plus `capacity` (it comes from the shard's pool, in power-of-two sizes).
    pub fn new(io: FileIo, head: &[u8], capacity: usize) -> WriteBuffer {
        match io {
            FileIo::Buffered => {
                let mut v = Vec::with_capacity(head.len() + capacity);
                v.extend_from_slice(head);
                WriteBuffer {
                    storage: Storage::Heap(v),
                }
            }
            FileIo::Direct => {
                let size = align_up((head.len() + capacity).max(1) as u64) as usize;
                let mut buf = super::buffer_pool::take(size);
                buf.as_bytes_mut()[..head.len()].copy_from_slice(head);
                WriteBuffer {
                    storage: Storage::Aligned {
                        buf,
                        len: head.len(),
                    },
                }
            }
        }
    }

    /// Bytes staged so far (the head included).
    pub fn len(&self) -> usize {
        match &self.storage {
            Storage::Heap(v) => v.len(),
            Storage::Aligned { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `n` more bytes fit without a new buffer (heap buffers always grow).
    pub fn fits(&self, n: usize) -> bool {
        match &self.storage {
            Storage::Heap(_) => true,
            Storage::Aligned { buf, len } => buf.len() - len >= n,
        }
    }

    /// Appends `bytes` and returns where they landed, to be patched in place. The caller
    /// checks [`WriteBuffer::fits`] first; an aligned buffer that is too small panics.
    pub fn extend(&mut self, bytes: &[u8]) -> &mut [u8] {
        match &mut self.storage {
            Storage::Heap(v) => {
                let at = v.len();
                v.extend_from_slice(bytes);
                &mut v[at..]
            }
            Storage::Aligned { buf, len } => {
                let at = *len;
                *len += bytes.len();
                let dst = &mut buf.as_bytes_mut()[at..*len];
                dst.copy_from_slice(bytes);
                dst
            }
        }
    }

    /// The staged bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Heap(v) => v,
            Storage::Aligned { buf, len } => &buf.as_bytes()[..*len],
        }
    }

    /// The staged bytes from the last alignment boundary on (what a direct write that follows
    /// this one must start with). `start` is the file position of the first staged byte.
    pub fn tail_block(&self, start: u64) -> &[u8] {
        let end = start + self.len() as u64;
        let from = (align_down(end).max(start) - start) as usize;
        &self.bytes()[from..]
    }

    /// Turns the buffer into what the file write takes: a `Vec`, or the aligned buffer cut at
    /// the next alignment boundary with the bytes past the staged ones zeroed.
    pub(super) fn into_write(mut self) -> Staged {
        match std::mem::replace(&mut self.storage, Storage::Heap(Vec::new())) {
            Storage::Heap(v) => Staged::Heap(v),
            Storage::Aligned { mut buf, len } => {
                let padded = (align_up(len as u64) as usize).min(buf.len());
                buf.as_bytes_mut()[len..padded].fill(0);
                buf.trim_to_size(padded);
                Staged::Aligned { buf, len }
            }
        }
    }
}

impl Drop for WriteBuffer {
    /// A buffer that is never written (a flight that failed before its write) goes back to
    /// the pool as well.
    fn drop(&mut self) {
        if let Storage::Aligned { buf, .. } =
            std::mem::replace(&mut self.storage, Storage::Heap(Vec::new()))
        {
            super::buffer_pool::give_back(buf);
        }
    }
}

/// A direct buffer whose write completed, kept for reads (the log's tail cache) until dropped;
/// dropping it gives it back to the shard's pool.
pub struct WrittenBuffer {
    buf: Option<DmaBuffer>,
    len: usize,
}

impl WrittenBuffer {
    pub(super) fn new(buf: DmaBuffer, len: usize) -> WrittenBuffer {
        WrittenBuffer {
            buf: Some(buf),
            len,
        }
    }

    /// The staged bytes (head included), not the padding.
    pub fn bytes(&self) -> &[u8] {
        match &self.buf {
            Some(b) => &b.as_bytes()[..self.len],
            None => &[],
        }
    }

    /// Memory the buffer holds.
    pub fn capacity(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.capacity())
    }
}

impl Drop for WrittenBuffer {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            super::buffer_pool::give_back(buf);
        }
    }
}

/// A buffer ready to be written (see [`WriteBuffer::into_write`]).
pub(super) enum Staged {
    Heap(Vec<u8>),
    /// `len` bytes of data; the buffer is longer by the zeroed padding.
    Aligned {
        buf: DmaBuffer,
        len: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_helpers() {
        assert_eq!(align_down(0), 0);
        assert_eq!(align_down(4095), 0);
        assert_eq!(align_down(4096), 4096);
        assert_eq!(align_up(0), 0);
        assert_eq!(align_up(1), 4096);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(4097), 8192);
    }

    #[test]
    fn heap_buffers_grow_and_keep_the_head() {
        let mut b = WriteBuffer::new(FileIo::Buffered, b"ab", 1);
        assert!(b.fits(1 << 20));
        b.extend(b"cdef")[0] = b'C';
        assert_eq!(b.bytes(), b"abCdef");
        assert_eq!(
            b.tail_block(4094),
            b"Cdef".as_slice(),
            "from the boundary at 4096"
        );
        assert!(matches!(b.into_write(), Staged::Heap(v) if v == b"abCdef"));
    }
}
