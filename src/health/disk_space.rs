//! Low free space on the data dir's filesystem.
//!
//! A full disk fails every append (the log rolls back and keeps working, see `log/commit.rs`),
//! so an operator wants to hear about it before it happens. Shard 0 checks the filesystem
//! every [`DISK_CHECK_INTERVAL`]; the decision of what to log is [`DiskSpaceWatch`], pure.

use std::path::Path;
use std::time::{Duration, Instant};

use super::rate_limit::RateLimiter;

/// How often shard 0 looks at the free space (a statvfs: no disk I/O, microseconds).
pub const DISK_CHECK_INTERVAL: Duration = Duration::from_secs(10);
/// While space stays low, the warning is repeated at most this often.
pub const LOW_DISK_REPEAT_INTERVAL: Duration = Duration::from_secs(300);

/// Free and total space of a filesystem, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    /// Available to an unprivileged writer (`f_bavail`): root's reserve does not help a
    /// broker that should not run as root.
    pub free_bytes: u64,
    pub total_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DiskSpaceError {
    #[error("path {0} contains a NUL byte")]
    BadPath(String),
    #[error("statvfs {path}: {source}")]
    Statvfs {
        path: String,
        source: std::io::Error,
    },
}

/// The usage of the filesystem holding `path`.
pub fn usage(path: &Path) -> Result<DiskUsage, DiskSpaceError> {
    use std::os::unix::ffi::OsStrExt;
    let shown = || path.display().to_string();
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| DiskSpaceError::BadPath(shown()))?;
    // SAFETY: statvfs writes into the zeroed struct we own; c_path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(DiskSpaceError::Statvfs {
            path: shown(),
            source: std::io::Error::last_os_error(),
        });
    }
    // The field types differ between targets (u32 or u64): the casts are not all no-ops.
    #[allow(clippy::unnecessary_cast)]
    let block = st.f_frsize as u64;
    #[allow(clippy::unnecessary_cast)]
    let (available, blocks) = (st.f_bavail as u64, st.f_blocks as u64);
    Ok(DiskUsage {
        free_bytes: available.saturating_mul(block),
        total_bytes: blocks.saturating_mul(block),
    })
}

/// `ringbroker.disk.free.warn.bytes` and `.percent`; 0 disables either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskThresholds {
    pub bytes: u64,
    pub percent: u64,
}

impl DiskThresholds {
    /// Whether free space is below either threshold.
    pub fn is_low(&self, u: DiskUsage) -> bool {
        let below_bytes = self.bytes > 0 && u.free_bytes < self.bytes;
        // free/total < percent/100, in integers (u128: no overflow for any disk).
        let below_percent = self.percent > 0
            && u.total_bytes > 0
            && u128::from(u.free_bytes) * 100
                < u128::from(self.percent) * u128::from(u.total_bytes);
        below_bytes || below_percent
    }
}

/// What to log after a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskSpaceEvent {
    /// Free space is below a threshold: warn. `checks` is how many checks found it low since
    /// the previous warning (1 the first time).
    Low { checks: u64 },
    /// Space was low and no longer is: one info line.
    Recovered,
}

/// Remembers whether space was low, so that a low disk is announced once, repeated rarely,
/// and its recovery is announced once.
#[derive(Debug, Clone)]
pub struct DiskSpaceWatch {
    thresholds: DiskThresholds,
    low: bool,
    limiter: RateLimiter,
}

impl DiskSpaceWatch {
    pub fn new(thresholds: DiskThresholds, repeat: Duration) -> Self {
        DiskSpaceWatch {
            thresholds,
            low: false,
            limiter: RateLimiter::new(repeat),
        }
    }

    pub fn observe(&mut self, usage: DiskUsage, now: Instant) -> Option<DiskSpaceEvent> {
        if self.thresholds.is_low(usage) {
            self.low = true;
            return self
                .limiter
                .event(now)
                .map(|checks| DiskSpaceEvent::Low { checks });
        }
        if std::mem::take(&mut self.low) {
            // A later drop is news again, whatever the repeat interval.
            self.limiter.reset();
            return Some(DiskSpaceEvent::Recovered);
        }
        None
    }
}

/// One check of `dir`, logging what [`DiskSpaceWatch`] decides.
pub fn check(watch: &mut DiskSpaceWatch, dir: &Path) {
    let u = match usage(dir) {
        Ok(u) => u,
        Err(e) => {
            tracing::debug!(error = %e, "cannot check free disk space");
            return;
        }
    };
    let free_percent = if u.total_bytes > 0 {
        u.free_bytes as f64 * 100.0 / u.total_bytes as f64
    } else {
        0.0
    };
    let dir_shown = dir.display().to_string();
    match watch.observe(u, Instant::now()) {
        Some(DiskSpaceEvent::Low { checks }) => tracing::warn!(
            data_dir = %dir_shown,
            free_bytes = u.free_bytes,
            total_bytes = u.total_bytes,
            free_percent,
            warn_below_bytes = watch.thresholds.bytes,
            warn_below_percent = watch.thresholds.percent,
            checks_low = checks,
            "disk space low on the data dir: appends fail once it is full"
        ),
        Some(DiskSpaceEvent::Recovered) => tracing::info!(
            data_dir = %dir_shown,
            free_bytes = u.free_bytes,
            total_bytes = u.total_bytes,
            free_percent,
            "disk space on the data dir is above the warning thresholds again"
        ),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn usage(free: u64, total: u64) -> DiskUsage {
        DiskUsage {
            free_bytes: free,
            total_bytes: total,
        }
    }

    #[test]
    fn either_threshold_makes_it_low_and_zero_disables() {
        let t = DiskThresholds {
            bytes: GIB,
            percent: 5,
        };
        assert!(!t.is_low(usage(10 * GIB, 100 * GIB)));
        assert!(t.is_low(usage(GIB - 1, 10 * GIB)), "under 1 GiB");
        assert!(t.is_low(usage(4 * GIB, 100 * GIB)), "under 5%");
        assert!(
            !t.is_low(usage(5 * GIB, 100 * GIB)),
            "exactly 5% is not below"
        );
        let bytes_only = DiskThresholds {
            bytes: GIB,
            percent: 0,
        };
        assert!(!bytes_only.is_low(usage(2 * GIB, 1000 * GIB)));
        let off = DiskThresholds {
            bytes: 0,
            percent: 0,
        };
        assert!(!off.is_low(usage(0, 100)));
        assert!(!t.is_low(usage(u64::MAX, u64::MAX)), "no overflow");
    }

    #[test]
    fn low_warns_once_repeats_rarely_and_recovery_is_announced_once() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let t = DiskThresholds {
            bytes: GIB,
            percent: 0,
        };
        let mut w = DiskSpaceWatch::new(t, s(300));
        let low = usage(GIB / 2, 100 * GIB);
        let fine = usage(50 * GIB, 100 * GIB);
        assert_eq!(w.observe(fine, t0), None);
        assert_eq!(
            w.observe(low, t0 + s(10)),
            Some(DiskSpaceEvent::Low { checks: 1 })
        );
        assert_eq!(w.observe(low, t0 + s(20)), None);
        assert_eq!(w.observe(low, t0 + s(30)), None);
        assert_eq!(
            w.observe(low, t0 + s(310)),
            Some(DiskSpaceEvent::Low { checks: 3 }),
            "repeated after the interval with the checks in between"
        );
        assert_eq!(
            w.observe(fine, t0 + s(320)),
            Some(DiskSpaceEvent::Recovered)
        );
        assert_eq!(w.observe(fine, t0 + s(330)), None);
        assert_eq!(
            w.observe(low, t0 + s(340)),
            Some(DiskSpaceEvent::Low { checks: 1 }),
            "a new drop is reported at once"
        );
    }

    #[test]
    fn usage_of_a_real_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let u = super::usage(dir.path()).expect("statvfs");
        assert!(u.total_bytes > 0 && u.free_bytes <= u.total_bytes, "{u:?}");
        assert!(super::usage(&dir.path().join("missing")).is_err());
    }
}
