//! Small files replaced atomically and durably, and read whole: write a temporary file,
//! fdatasync it, rename it over the old one, fsync the directory. A crash leaves the old or
//! the new content, never a torn one.

use std::io;
use std::path::Path;

use super::{self as runtime, File};

/// Replaces `path` with `bytes` (the temporary file is `<path>.tmp`, in the same directory).
pub async fn replace(path: &Path, bytes: Vec<u8>) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let file = File::open_or_create(&tmp).await?;
    file.truncate(0).await?;
    file.write_all_at(bytes, 0).await?;
    file.fdatasync().await?;
    file.close().await?;
    runtime::rename(&tmp, path).await?;
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => runtime::sync_dir(dir).await,
        _ => runtime::sync_dir(Path::new(".")).await,
    }
}

/// The whole content of `path`.
pub async fn read_all(path: &Path) -> io::Result<Vec<u8>> {
    let file = File::open_existing(path).await?;
    let size = file.size().await?;
    let bytes = file.read_at(0, size as usize).await?;
    file.close().await?;
    Ok(bytes)
}
