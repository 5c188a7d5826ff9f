//! What `ringbroker tune` reads from the running system: plain values, no I/O. `None`
//! means the value could not be read (no such file on this kernel, no permission).

use std::path::PathBuf;

/// Everything [`super::evaluate::evaluate`] judges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemSnapshot {
    /// `/proc/sys/kernel/osrelease`, e.g. `6.18.0-1-amd64`.
    pub kernel_release: Option<String>,
    /// Shards the broker will run: `--shards`, or one per online CPU (the broker's default).
    pub shards: usize,
    /// `RLIMIT_MEMLOCK` of this process (a broker started from the same shell inherits it).
    pub memlock: Option<Rlimit>,
    /// Whether this process has CAP_IPC_LOCK (`CapEff` of `/proc/self/status`): the kernel
    /// then does not count io_uring registered buffers against `RLIMIT_MEMLOCK`.
    pub cap_ipc_lock: Option<bool>,
    /// `RLIMIT_NOFILE` of this process.
    pub nofile: Option<Rlimit>,
    /// `/proc/sys/kernel/io_uring_disabled` (kernel ≥ 6.6; absent before).
    pub io_uring_disabled: Option<u64>,
    pub vm: VmSettings,
    pub thp: Thp,
    pub net: NetSettings,
    pub cpu: CpuInfo,
    pub data_dir: DataDir,
}

/// A resource limit: soft (what applies) and hard (what the soft one may be raised to
/// without privilege). `None` is unlimited (`RLIM_INFINITY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rlimit {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// `vm.*` sysctls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmSettings {
    /// `SwapTotal` of `/proc/meminfo`, bytes: with no swap, swappiness does not matter.
    pub swap_total: Option<u64>,
    pub swappiness: Option<u64>,
    pub dirty_ratio: Option<u64>,
    pub dirty_background_ratio: Option<u64>,
    /// Non-zero replaces `dirty_ratio` (the kernel keeps only one of the pair).
    pub dirty_bytes: Option<u64>,
    /// Non-zero replaces `dirty_background_ratio`.
    pub dirty_background_bytes: Option<u64>,
    pub dirty_expire_centisecs: Option<u64>,
    pub max_map_count: Option<u64>,
}

/// Transparent huge pages: the selected word of `enabled` and `defrag`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thp {
    pub enabled: Option<String>,
    pub defrag: Option<String>,
}

/// `net.*` sysctls and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetSettings {
    pub somaxconn: Option<u64>,
    pub rmem_max: Option<u64>,
    pub wmem_max: Option<u64>,
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
    pub netdev_max_backlog: Option<u64>,
    /// Packets dropped so far because a CPU's backlog was full (`/proc/net/softnet_stat`).
    pub softnet_dropped: Option<u64>,
}

/// CPUs and their frequency governors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfo {
    /// `/sys/devices/system/cpu/online`.
    pub online: Option<Vec<usize>>,
    /// `/sys/devices/system/cpu/isolated` (`isolcpus=`), empty when none.
    pub isolated: Option<Vec<usize>>,
    /// One entry per CPU exposing cpufreq; empty when there is no cpufreq (common in VMs).
    pub governors: Vec<Governor>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Governor {
    pub cpu: usize,
    pub current: String,
    pub available: Vec<String>,
}

/// The data directory and the file system it lives on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataDir {
    /// As given (`--data-dir`, default `./data`).
    pub path: PathBuf,
    /// The directory actually examined: the data directory, or its nearest existing
    /// ancestor when it does not exist yet (the broker creates it).
    pub examined: PathBuf,
    pub exists: bool,
    pub mount: Option<Mount>,
    pub space: Option<DiskSpace>,
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mount {
    pub mount_point: PathBuf,
    pub fs_type: String,
    pub source: String,
    /// Per-mount options (`rw,noatime`).
    pub options: Vec<String>,
}

/// `statvfs` of the data directory: bytes available to an unprivileged writer, and total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    pub total: u64,
    pub available: u64,
}
