//! The `ringbroker tune` command line.

use std::path::PathBuf;

use super::profile::Profile;

#[derive(clap::Args, Debug, Clone)]
pub struct TuneArgs {
    /// Read the system and report each setting against the profile (the default).
    /// Exit status: 0 all fine, 1 something is off, 2 error.
    #[arg(long, conflicts_with = "apply")]
    pub check: bool,
    /// Change what can be changed safely at runtime (sysctls, THP, CPU governor) and
    /// print each change as old → new. Needs root. Nothing persistent is touched.
    #[arg(long)]
    pub apply: bool,
    /// With --apply: print what would change, change nothing (no root needed).
    #[arg(long, requires = "apply")]
    pub dry_run: bool,
    /// What to tune for.
    #[arg(long, value_enum, default_value_t = Profile::Throughput)]
    pub profile: Profile,
    /// The broker's data directory (`log.dirs`): its file system, mount options and free
    /// space are checked. Default ./data, or log.dirs of --config.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Shards the broker will run (`num.shards`); default one per online core, or
    /// num.shards of --config.
    #[arg(long)]
    pub shards: Option<usize>,
    /// Take the data directory and shard count from this broker config (TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Machine-readable output (one JSON document on stdout).
    #[arg(long)]
    pub json: bool,
    /// Read and write kernel files under this directory instead of / (tests).
    #[arg(long, hide = true, default_value = "/")]
    pub sys_root: PathBuf,
}
