//! Deleting segments the way Kafka does (`file.delete.delay.ms`): the files are renamed to
//! `<name>.deleted` at once (so the segment is gone from the log's directory listing, durably
//! once the directory is synced) and removed after the delay, which leaves readers that still
//! hold them, and an operator who made a mistake, some time. Leftovers of a stop before the
//! delay ran out are removed at the next open (`recovery::list_segments`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::segment::SegmentPaths;
use crate::runtime;

/// The suffix of a segment file waiting for its delayed deletion.
pub const DELETED_SUFFIX: &str = ".deleted";

fn deleted_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(DELETED_SUFFIX);
    PathBuf::from(name)
}

/// Removes a segment's files now (`delay_ms` ≤ 0) or renames them and removes them after the
/// delay, in the background. The caller syncs the directory.
pub async fn delete_segment(paths: &SegmentPaths, delay_ms: i64) -> std::io::Result<()> {
    if delay_ms <= 0 {
        return paths.remove_files().await;
    }
    let files = [&paths.log, &paths.index, &paths.time_index];
    let mut renamed = Vec::with_capacity(files.len());
    for f in files {
        if f.exists() {
            let to = deleted_name(f);
            runtime::rename(f, &to).await?;
            renamed.push(to);
        }
    }
    runtime::spawn_detached(async move {
        runtime::sleep(Duration::from_millis(delay_ms as u64)).await;
        for f in renamed {
            if let Err(error) = runtime::remove_file(&f).await {
                tracing::warn!(path = %f.display(), %error, "could not remove a deleted segment file; the next start will");
            }
        }
    });
    Ok(())
}
