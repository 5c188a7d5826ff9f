//! Files and directory entries, through io_uring. Every call passes the fault layer's hooks
//! (`fault.rs`); a file no test scope covers pays one check at open and nothing after.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::rc::Rc;

use glommio::io::{BufferedFile, DmaFile, OpenOptions};

use super::fault::{self, FileOp, TrackedPath};
use super::file_io::FileIo;
use super::write_buffer::{Staged, WriteBuffer, WrittenBuffer};

enum Inner {
    Buffered(BufferedFile),
    /// Written O_DIRECT; read through a second, buffered descriptor: reads of older data then
    /// get the kernel's readahead (direct reads of a consumer catching up were 4× slower,
    /// `benches/kafka_perf`), and the page cache is coherent with direct writes.
    Direct {
        writer: DmaFile,
        reader: BufferedFile,
    },
    /// In a simulation ([`super::sim`]): synchronous system calls, which complete before the
    /// next task runs, so that a seed replays the same run.
    Std(std::fs::File),
}

/// A file read and written through io_uring, buffered or direct ([`FileIo`]).
///
/// Indexes, checkpoints and snapshots are small and rewritten: they stay buffered. Segment
/// files may be direct (`ringbroker.log.io=direct`): they are written once, sequentially, in
/// large aligned writes, and the page-cache copy was up to half of the broker's CPU per
/// produced byte on our VMs (issue 13's profile).
pub struct File {
    inner: Inner,
    /// Set when a fault scope covered the path at open.
    tracked: Option<TrackedPath>,
    /// A [`File::start_writeback`] call is still running on the blocking pool.
    writeback_running: Rc<Cell<bool>>,
}

impl File {
    /// Opens `path` for reading and writing, creating it if it is missing.
    pub async fn open_or_create(path: &Path) -> io::Result<File> {
        Self::open(path, FileIo::Buffered, true).await
    }

    /// Opens an existing file for reading and writing.
    pub async fn open_existing(path: &Path) -> io::Result<File> {
        Self::open(path, FileIo::Buffered, false).await
    }

    /// Opens `path` for reading and writing as `io` says, creating it if `create`.
    pub async fn open(path: &Path, io: FileIo, create: bool) -> io::Result<File> {
        let tracked = fault::before_open(path, create)?;
        if super::sim::active() {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .open(path)?;
            return Ok(File {
                inner: Inner::Std(file),
                tracked,
                writeback_running: Rc::new(Cell::new(false)),
            });
        }
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(create);
        let inner = match io {
            FileIo::Buffered => Inner::Buffered(options.buffered_open(path).await?),
            FileIo::Direct => {
                let writer = options.dma_open(path).await?;
                let reader = OpenOptions::new().read(true).buffered_open(path).await?;
                Inner::Direct { writer, reader }
            }
        };
        Ok(File {
            inner,
            tracked,
            writeback_running: Rc::new(Cell::new(false)),
        })
    }

    /// How this file's writes are done; direct files take only [`File::write_buffer`].
    pub fn io(&self) -> FileIo {
        match self.inner {
            Inner::Buffered(_) | Inner::Std(_) => FileIo::Buffered,
            Inner::Direct { .. } => FileIo::Direct,
        }
    }

    fn raw_fd(&self) -> std::os::fd::RawFd {
        match &self.inner {
            Inner::Buffered(f) => f.as_raw_fd(),
            Inner::Direct { writer, .. } => writer.as_raw_fd(),
            Inner::Std(f) => f.as_raw_fd(),
        }
    }

    /// Writes a staged buffer at `pos`, its file position (for a direct buffer: the alignment
    /// boundary its head starts at). Errors as [`File::write_all_at`]; a direct write also
    /// writes the zeroed padding up to the next boundary, past the data. A direct buffer comes
    /// back once written, for the caller to keep (reads of recent data) or drop (to the pool).
    pub async fn write_buffer(
        &self,
        buffer: WriteBuffer,
        pos: u64,
    ) -> io::Result<Option<WrittenBuffer>> {
        match (buffer.into_write(), &self.inner) {
            (Staged::Heap(data), _) => self.write_all_at(data, pos).await.map(|()| None),
            (Staged::Aligned { buf, len }, Inner::Direct { writer: file, .. }) => {
                let mut keep = len;
                if let Some(t) = &self.tracked {
                    keep = fault::before_write(t, len)?;
                }
                let mut buf = buf;
                let padded = buf.len();
                if keep < len {
                    // A short write, as a full device gives: only whole blocks get written.
                    buf.trim_to_size(super::write_buffer::align_down(keep as u64) as usize);
                }
                let copy = self.tracked.as_ref().map(|_| buf.as_bytes().to_vec());
                let (written, done) = if buf.is_empty() {
                    (0, None)
                } else {
                    let shared = std::rc::Rc::new(buf);
                    let written = file.write_rc_at(std::rc::Rc::clone(&shared), pos).await;
                    // The ring is done with it: the caller keeps it or it goes to the pool.
                    let done = std::rc::Rc::try_unwrap(shared)
                        .ok()
                        .map(|b| WrittenBuffer::new(b, len));
                    (written?, done)
                };
                if let (Some(t), Some(copy)) = (&self.tracked, copy) {
                    fault::after_write(t, pos, &copy[..written.min(copy.len())]);
                }
                check_written(written, padded, pos)?;
                Ok(done)
            }
            (Staged::Aligned { buf, len }, Inner::Buffered(_) | Inner::Std(_)) => self
                .write_all_at(buf.as_bytes()[..len].to_vec(), pos)
                .await
                .map(|()| None),
        }
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
            match &self.inner {
                Inner::Buffered(f) => f.write_at(data, pos).await?,
                Inner::Std(f) => std_write_at(f, &data, pos)?,
                Inner::Direct { .. } => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a direct file is written with aligned buffers (write_buffer)",
                    ))
                }
            }
        };
        if let (Some(t), Some(copy)) = (&self.tracked, copy) {
            fault::after_write(t, pos, &copy[..written.min(copy.len())]);
        }
        check_written(written, len, pos)
    }

    /// Reads up to `len` bytes at `pos`; fewer at the end of the file.
    pub async fn read_at(&self, pos: u64, len: usize) -> io::Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        if let Some(t) = &self.tracked {
            fault::before(t, FileOp::Read)?;
        }
        let reader = match &self.inner {
            Inner::Buffered(f) => f,
            Inner::Direct { reader, .. } => reader,
            Inner::Std(f) => return std_read_at(f, pos, len),
        };
        // Recent data is usually in the page cache: copy it straight into the result, on the
        // reactor, without an io_uring round trip and the second copy out of glommio's buffer.
        let mut out = read_cached(reader.as_raw_fd(), pos, len)?;
        if out.len() < len {
            // Not cached (or only partly, or the end of the file): the rest asynchronously.
            let rest = reader
                .read_at(pos + out.len() as u64, len - out.len())
                .await?;
            if out.is_empty() {
                return Ok(rest.to_vec());
            }
            out.extend_from_slice(&rest);
        }
        Ok(out)
    }

    /// Asks the kernel to start writing back the dirty pages of `[offset, offset + len)`
    /// (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`) and returns without waiting for it.
    /// Without this the page cache holds everything until the next fdatasync, and copying
    /// into the cache and writing to the disk happen one after the other instead of together.
    /// The call runs on the blocking pool: it waits whenever the device's queue is full
    /// (0.55–0.66 s measured here), and on the reactor that stalled every connection of the
    /// shard. At most one runs per file; `Ok(false)`: one is still running, nothing started.
    /// Direct files have nothing in the cache: a no-op.
    pub fn start_writeback(&self, offset: u64, len: u64) -> io::Result<bool> {
        if self.io() == FileIo::Direct
            || self.writeback_running.get()
            || matches!(self.inner, Inner::Std(_))
        {
            return Ok(false);
        }
        // A descriptor of its own keeps the file open (and its number unreused) until the
        // call returns, even if the segment is closed or deleted meanwhile.
        // SAFETY: `dup` of a descriptor we own; the result is checked before use.
        let fd = unsafe { libc::dup(self.raw_fd()) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by `dup` and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let running = Rc::clone(&self.writeback_running);
        running.set(true);
        super::spawn_detached(async move {
            let result = super::spawn_blocking(move || {
                // SAFETY: a plain syscall on a descriptor this closure owns.
                let rc = unsafe {
                    libc::sync_file_range(
                        fd.as_raw_fd(),
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
            })
            .await;
            running.set(false);
            if let Err(error) = result {
                // Only an optimisation: the data is written and fdatasync still works.
                tracing::debug!(%error, "sync_file_range failed");
            }
        });
        Ok(true)
    }

    /// Allocates the blocks of `[0, len)` without changing the file's size
    /// (`fallocate(FALLOC_FL_KEEP_SIZE)`): appends then find their space allocated, and the
    /// size still says where the data ends, so recovery and readers are unaffected. A file
    /// system without fallocate is not an error (nothing is allocated).
    pub fn preallocate(&self, len: u64) -> io::Result<()> {
        // SAFETY: a plain syscall on a descriptor we own; no memory is passed.
        let rc = unsafe {
            libc::fallocate(
                self.raw_fd(),
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
        match &self.inner {
            Inner::Buffered(f) => f.fdatasync().await?,
            Inner::Direct { writer, .. } => writer.fdatasync().await?,
            Inner::Std(f) => f.sync_data()?,
        }
        if let Some(t) = &self.tracked {
            fault::after_fsync(t);
        }
        Ok(())
    }

    /// Cuts what direct writes padded past `size`, the data's end (a no-op for buffered files,
    /// which are never padded): a sealed or closed segment ends at its data.
    pub async fn cut_padding(&self, size: u64) -> io::Result<()> {
        match self.io() {
            FileIo::Direct => self.truncate(size).await,
            FileIo::Buffered => Ok(()),
        }
    }

    pub async fn truncate(&self, size: u64) -> io::Result<()> {
        if let Some(t) = &self.tracked {
            fault::before(t, FileOp::Truncate)?;
        }
        match &self.inner {
            Inner::Buffered(f) => f.truncate(size).await?,
            Inner::Direct { writer, .. } => writer.truncate(size).await?,
            Inner::Std(f) => f.set_len(size)?,
        }
        if let Some(t) = &self.tracked {
            fault::after_truncate(t, size);
        }
        Ok(())
    }

    pub async fn size(&self) -> io::Result<u64> {
        Ok(match &self.inner {
            Inner::Buffered(f) => f.file_size().await?,
            Inner::Direct { writer, .. } => writer.file_size().await?,
            Inner::Std(f) => f.metadata()?.len(),
        })
    }

    pub async fn close(self) -> io::Result<()> {
        match self.inner {
            Inner::Buffered(f) => f.close().await?,
            Inner::Direct { writer, reader } => {
                writer.close().await?;
                reader.close().await?;
            }
            Inner::Std(f) => drop(f),
        }
        Ok(())
    }
}

/// A write that wrote less than asked (the device ran out of space part way) is an error of
/// kind `StorageFull`: the caller truncates back to what it knows is valid.
fn check_written(written: usize, len: usize, pos: u64) -> io::Result<()> {
    if written < len {
        return Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!("short write: {written} of {len} bytes at position {pos}"),
        ));
    }
    Ok(())
}

/// Removes a file; a file that is already gone is not an error.
pub async fn remove_file(path: &Path) -> io::Result<()> {
    fault::before_remove(path)?;
    let removed = if super::sim::active() {
        std::fs::remove_file(path)
    } else {
        glommio::io::remove(path).await.map_err(io::Error::from)
    };
    match removed {
        Ok(()) => Ok(()),
        Err(e) => {
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
    if super::sim::active() {
        std::fs::rename(from, to)?;
    } else {
        glommio::io::rename(from, to).await?;
    }
    fault::after_rename(from, to);
    Ok(())
}

/// Makes a directory's entries (files created, renamed or removed in it) durable.
pub async fn sync_dir(path: &Path) -> io::Result<()> {
    fault::before_sync_dir(path)?;
    // glommio opens directories relative to nothing: make the path absolute first.
    let path = std::path::absolute(path)?;
    if super::sim::active() {
        std::fs::File::open(&path)?.sync_all()?;
    } else {
        let dir = glommio::io::Directory::open(&path).await?;
        dir.sync().await?;
        dir.close().await?;
    }
    fault::after_sync_dir(&path);
    Ok(())
}

/// Writes what it can of `data` at `pos` (short only at a full device), synchronously.
fn std_write_at(f: &std::fs::File, data: &[u8], pos: u64) -> io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut done = 0;
    while done < data.len() {
        match f.write_at(&data[done..], pos + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if done > 0 && e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Reads up to `len` bytes at `pos`, fewer at the end of the file, synchronously.
fn std_read_at(f: &std::fs::File, pos: u64, len: usize) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut out = vec![0u8; len];
    let mut done = 0;
    while done < len {
        match f.read_at(&mut out[done..], pos + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(done);
    Ok(out)
}

/// What `preadv2(RWF_NOWAIT)` can read of `[pos, pos + len)` from the page cache without
/// blocking: all of it, a prefix, or nothing (`EAGAIN`: not cached; some kernels and file
/// systems refuse the flag altogether, which also reads nothing here).
fn read_cached(fd: std::os::fd::RawFd, pos: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let iov = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: len,
    };
    // SAFETY: the iovec covers `out`'s allocation of `len` bytes, which the kernel only writes;
    // the length is set below to what it reports as written.
    let n = unsafe { libc::preadv2(fd, &iov, 1, pos as libc::off_t, libc::RWF_NOWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => Ok(Vec::new()),
            _ => Err(e),
        };
    }
    // SAFETY: the kernel initialised the first `n` (≤ `len`, the capacity) bytes.
    unsafe { out.set_len(n as usize) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_come_back_whole_from_the_cache_and_short_at_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        crate::runtime::block_on(async {
            let f = File::open_or_create(&path).await.expect("open");
            let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
            f.write_all_at(data.clone(), 0).await.expect("write");
            // Just written: in the page cache, served by `read_cached` alone.
            assert_eq!(
                read_cached(f.raw_fd(), 10, 1000).expect("cached"),
                data[10..1010]
            );
            assert_eq!(f.read_at(7, 200_000).await.expect("read"), data[7..200_007]);
            // Past the end: what is there, then nothing.
            assert_eq!(
                f.read_at(299_990, 100).await.expect("read"),
                data[299_990..]
            );
            assert!(f.read_at(300_000, 100).await.expect("read").is_empty());
            // Clean pages only can be dropped from the cache.
            f.fdatasync().await.expect("sync");
            f.close().await.expect("close");
            // Dropped from the cache: the asynchronous read gives the same bytes.
            let reopened = File::open_existing(&path).await.expect("reopen");
            // SAFETY: a plain advice syscall on a descriptor we own.
            unsafe { libc::posix_fadvise(reopened.raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            assert_eq!(
                reopened.read_at(5, 250_000).await.expect("read"),
                data[5..250_005]
            );
            reopened.close().await.expect("close");
        })
        .expect("executor");
    }
}
