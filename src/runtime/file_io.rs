//! The two ways a file's data reaches the device; both the file and its write buffer
//! depend on the choice.

/// How a file's data reaches the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileIo {
    /// Through the page cache: the kernel copies every write into it and writes it back later;
    /// reads of recent data come from memory.
    Buffered,
    /// O_DIRECT: writes go from our aligned buffers to the device with no copy into the page
    /// cache, and reads come from the device. On a file system without O_DIRECT (tmpfs) the
    /// same calls are served buffered.
    Direct,
}
