//! A small tmpfs mounted for a test (needs root; tests skip without it), unmounted (lazily)
//! however the test ends: the way to give a test a file system that fills up.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

pub struct Tmpfs {
    pub path: PathBuf,
    // Dropped after the unmount in `Drop::drop`: removes the (then empty) mount point.
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (mount's syntax: "8m"), or says why it cannot.
    pub fn mount(size: &str) -> Result<Tmpfs, String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root".to_string());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs {
            path: dir.path().to_path_buf(),
            _dir: dir,
        })
    }

    /// Mounts one, or prints why the test is skipped and returns None.
    pub fn mount_or_skip(test: &str, size: &str) -> Option<Tmpfs> {
        match Tmpfs::mount(size) {
            Ok(fs) => Some(fs),
            Err(why) => {
                println!("SKIPPED {test}: needs root to mount tmpfs ({why})");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
