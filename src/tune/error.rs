//! Why `ringbroker tune` could not do its job (exit status 2). Settings that cannot be
//! read are not errors: they are reported as unavailable.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error(
        "--apply writes kernel settings under /proc/sys and /sys and needs root; \
         run it with sudo, or see what it would do with --apply --dry-run"
    )]
    NotRoot,
    #[error("cannot read the broker config: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("--sys-root {0} is not a directory")]
    SysRoot(PathBuf),
    #[error("{failed} of {attempted} writes failed (see above)")]
    ApplyFailed { failed: usize, attempted: usize },
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
}
