//! Where the kernel's files are: `/` on a real system, a directory of fabricated
//! `proc/sys/...` and `sys/...` files in tests (`ringbroker tune --sys-root`).

use std::path::{Path, PathBuf};

/// A root under which `proc/` and `sys/` are looked up. Paths given to it are written the
/// way the kernel documents them (`/proc/sys/vm/swappiness`) and re-rooted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot {
    root: PathBuf,
}

impl Default for SysRoot {
    fn default() -> Self {
        SysRoot::new("/")
    }
}

impl SysRoot {
    pub fn new(root: impl Into<PathBuf>) -> SysRoot {
        SysRoot { root: root.into() }
    }

    /// True for the real system (`/`): writes need root and change the running kernel.
    pub fn is_real(&self) -> bool {
        self.root == Path::new("/")
    }

    /// `kernel_path` (absolute, as in `/proc/sys/vm/swappiness`) under this root.
    pub fn path(&self, kernel_path: &str) -> PathBuf {
        self.root.join(kernel_path.trim_start_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn re_roots_absolute_kernel_paths() {
        assert_eq!(
            SysRoot::default().path("/proc/sys/vm/swappiness"),
            PathBuf::from("/proc/sys/vm/swappiness")
        );
        assert_eq!(
            SysRoot::new("/tmp/fake").path("/proc/sys/vm/swappiness"),
            PathBuf::from("/tmp/fake/proc/sys/vm/swappiness")
        );
        assert!(SysRoot::default().is_real());
        assert!(!SysRoot::new("/tmp/fake").is_real());
    }
}
