//! Files and directory entries, through io_uring. Every call passes the fault layer's hooks
//! (`fault.rs`); a file no test scope covers pays one check at open and nothing after.

use std::io;
use std::path::Path;

use glommio::io::{BufferedFile, OpenOptions};

use super::fault::{self, FileOp, TrackedPath};

/// A file read and written through io_uring, with the page cache (buffered I/O).
///
/// Buffered rather than O_DIRECT: the tail of a log is read back by consumers moments after it
/// is written, and the page cache serves those reads from memory; appends are sequential, so
/// the kernel's write-back is as good as our own buffering, and `fdatasync` gives durability.
pub struct File {
    inner: BufferedFile,
    /// Set when a fault scope covered the path at open.
    tracked: Option<TrackedPath>,
}

impl File {
    /// Opens `path` for reading and writing, creating it if it is missing.
    pub async fn open_or_create(path: &Path) -> io::Result<File> {
        let tracked = fault::before_open(path, true)?;
        let inner = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .buffered_open(path)
            .await?;
        Ok(File { inner, tracked })
    }

    /// Opens an existing file for reading and writing.
    pub async fn open_existing(path: &Path) -> io::Result<File> {
        let tracked = fault::before_open(path, false)?;
        let inner = OpenOptions::new()
            .read(true)
            .write(true)
            .buffered_open(path)
            .await?;
        Ok(File { inner, tracked })
    }

    /// Writes all of `data` at `pos`. A short write (the device ran out of space part way) is
    /// an error of kind `StorageFull`: the caller truncates back to what it knows is valid.
    pub async fn write_all_at(&self, mut data: Vec<u8>, pos: u64) -> io::Result<()> {
        let len = data.len();
        if len == 0 {
            return Ok(());
        }
        let mut copy = None;
        if let Some(t) = &self.tracked {
            data.truncate(fault::before_write(t, len)?);
            copy = Some(data.clone());
        }
        let written = if data.is_empty() {
            0
        } else {
            self.inner.write_at(data, pos).await?
        };
        if let (Some(t), Some(copy)) = (&self.tracked, copy) {
            fault::after_write(t, pos, &copy[..written.min(copy.len())]);
        }
        if written < len {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("short write: {written} of {len} bytes at position {pos}"),
            ));
        }
        Ok(())
    }

    /// Reads up to `len` bytes at `pos`; fewer at the end of the file.
    pub async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        if let Some(t) = &self.tracked {
            fault::before(t, FileOp::Read)?;
        }
        let result = self.inner.read_at(pos, len).await?;
        Ok(result.to_vec())
    }

    /// Asks the kernel to start writing back the dirty pages of `[offset, offset + len)`
    /// (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`) and returns without waiting for it.
    /// Without this the page cache holds everything until the next fdatasync, and copying
    /// into the cache and writing to the disk happen one after the other instead of together.
    pub fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain syscall on a descriptor we own; no memory is passed.
        let rc = unsafe {
            libc::sync_file_range(
                self.inner.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Allocates the blocks of `[0, len)` without changing the file's size
    /// (`fallocate(FALLOC_FL_KEEP_SIZE)`): appends then find their space allocated, and the
    /// size still says where the data ends, so recovery and readers are unaffected. A file
    /// system without fallocate is not an error (nothing is allocated).
    pub fn preallocate(&self, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain syscall on a descriptor we own; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                self.inner.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                0,
                len as libc::off_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EOPNOTSUPP) => Ok(()),
            _ => Err(error),
        }
    }

    pub async fn fdatasync(&self) -> io::Result<()> {
        if let Some(t) = &self.tracked {
            fault::before(t, FileOp::Fsync)?;
        }
        self.inner.fdatasync().await?;
        if let Some(t) = &self.tracked {
            fault::after_fsync(t);
        }
        Ok(())
    }

    pub async fn truncate(&self, size: u64) -> io::Result<()> {
        if let Some(t) = &self.tracked {
            fault::before(t, FileOp::Truncate)?;
        }
        self.inner.truncate(size).await?;
        if let Some(t) = &self.tracked {
            fault::after_truncate(t, size);
        }
        Ok(())
    }

    pub async fn size(&self) -> io::Result<u64> {
        Ok(self.inner.file_size().await?)
    }

    pub async fn close(self) -> io::Result<()> {
        self.inner.close().await?;
        Ok(())
    }
}

/// Removes a file; a file that is already gone is not an error.
pub async fn remove_file(path: &Path) -> io::Result<()> {
    fault::before_remove(path)?;
    match glommio::io::remove(path).await {
        Ok(()) => Ok(()),
        Err(e) => {
            let e: io::Error = e.into();
            if e.kind() == io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        }
    }
}

/// Renames a file (atomically replacing `to`).
pub async fn rename(from: &Path, to: &Path) -> io::Result<()> {
    fault::before_rename(to)?;
    glommio::io::rename(from, to).await?;
    fault::after_rename(from, to);
    Ok(())
}

/// Makes a directory's entries (files created, renamed or removed in it) durable.
pub async fn sync_dir(path: &Path) -> io::Result<()> {
    fault::before_sync_dir(path)?;
    // glommio opens directories relative to nothing: make the path absolute first.
    let path = std::path::absolute(path)?;
    let dir = glommio::io::Directory::open(&path).await?;
    dir.sync().await?;
    dir.close().await?;
    fault::after_sync_dir(&path);
    Ok(())
}
