//! Reading the running system into a [`SystemSnapshot`]. Every value is best effort: what
//! cannot be read (a file this kernel does not have, no permission) stays `None` and is
//! reported as unavailable, never an error.

use std::path::{Path, PathBuf};

use super::parse;
use super::snapshot::{
    CpuInfo, DataDir, DiskSpace, Governor, NetSettings, Rlimit, SystemSnapshot, Thp, VmSettings,
};
use super::sysroot::SysRoot;

/// Reads everything `evaluate` needs. `shards`: the planned shard count, or `None` for the
/// broker's default (one per online CPU).
pub fn read_snapshot(root: &SysRoot, data_dir: &Path, shards: Option<usize>) -> SystemSnapshot {
    let cpu = cpu_info(root);
    let online = cpu.online.as_ref().map(Vec::len).filter(|n| *n > 0);
    let shards = shards
        .or(online)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    SystemSnapshot {
        kernel_release: text(root, "/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()),
        shards,
        memlock: rlimit(libc::RLIMIT_MEMLOCK),
        cap_ipc_lock: text(root, "/proc/self/status").and_then(|s| parse::has_cap_ipc_lock(&s)),
        nofile: rlimit(libc::RLIMIT_NOFILE),
        io_uring_disabled: number(root, "/proc/sys/kernel/io_uring_disabled"),
        vm: VmSettings {
            swap_total: text(root, "/proc/meminfo")
                .and_then(|m| parse::meminfo_bytes(&m, "SwapTotal")),
            swappiness: number(root, "/proc/sys/vm/swappiness"),
            dirty_ratio: number(root, "/proc/sys/vm/dirty_ratio"),
            dirty_background_ratio: number(root, "/proc/sys/vm/dirty_background_ratio"),
            dirty_bytes: number(root, "/proc/sys/vm/dirty_bytes"),
            dirty_background_bytes: number(root, "/proc/sys/vm/dirty_background_bytes"),
            dirty_expire_centisecs: number(root, "/proc/sys/vm/dirty_expire_centisecs"),
            max_map_count: number(root, "/proc/sys/vm/max_map_count"),
        },
        thp: Thp {
            enabled: text(root, "/sys/kernel/mm/transparent_hugepage/enabled")
                .and_then(|s| parse::bracketed(&s)),
            defrag: text(root, "/sys/kernel/mm/transparent_hugepage/defrag")
                .and_then(|s| parse::bracketed(&s)),
        },
        net: NetSettings {
            somaxconn: number(root, "/proc/sys/net/core/somaxconn"),
            rmem_max: number(root, "/proc/sys/net/core/rmem_max"),
            wmem_max: number(root, "/proc/sys/net/core/wmem_max"),
            tcp_rmem: text(root, "/proc/sys/net/ipv4/tcp_rmem").and_then(|s| parse::triple(&s)),
            tcp_wmem: text(root, "/proc/sys/net/ipv4/tcp_wmem").and_then(|s| parse::triple(&s)),
            netdev_max_backlog: number(root, "/proc/sys/net/core/netdev_max_backlog"),
            softnet_dropped: text(root, "/proc/net/softnet_stat")
                .and_then(|s| parse::softnet_dropped(&s)),
        },
        cpu,
        data_dir: data_dir_info(root, data_dir),
    }
}

/// A kernel file's text, or `None` if it cannot be read.
pub fn text(root: &SysRoot, kernel_path: &str) -> Option<String> {
    std::fs::read_to_string(root.path(kernel_path)).ok()
}

fn number(root: &SysRoot, kernel_path: &str) -> Option<u64> {
    text(root, kernel_path)?.trim().parse().ok()
}

/// This process's limit; a broker started from the same shell or unit inherits it.
fn rlimit(resource: libc::__rlimit_resource_t) -> Option<Rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one plain struct we own.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 {
        return None;
    }
    let finite = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    Some(Rlimit {
        soft: finite(r.rlim_cur),
        hard: finite(r.rlim_max),
    })
}

fn cpu_info(root: &SysRoot) -> CpuInfo {
    let online = text(root, "/sys/devices/system/cpu/online").and_then(|s| parse::cpu_list(&s));
    let isolated = text(root, "/sys/devices/system/cpu/isolated").and_then(|s| parse::cpu_list(&s));
    let governors = online
        .iter()
        .flatten()
        .filter_map(|&cpu| {
            let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
            let current = text(root, &format!("{dir}/scaling_governor"))?;
            let available =
                text(root, &format!("{dir}/scaling_available_governors")).unwrap_or_default();
            Some(Governor {
                cpu,
                current: current.trim().to_string(),
                available: available.split_whitespace().map(str::to_string).collect(),
            })
        })
        .collect();
    CpuInfo {
        online,
        isolated,
        governors,
    }
}

fn data_dir_info(root: &SysRoot, path: &Path) -> DataDir {
    let exists = path.is_dir();
    let examined = nearest_existing(path);
    let mount = text(root, "/proc/self/mountinfo").and_then(|info| {
        let mounts = parse::mountinfo(&info);
        parse::mount_of(&mounts, &examined).cloned()
    });
    DataDir {
        path: path.to_path_buf(),
        space: disk_space(&examined),
        examined,
        exists,
        mount,
    }
}

/// The path made absolute and canonical, or its nearest existing ancestor's if it does not
/// exist yet.
fn nearest_existing(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut candidate = absolute.as_path();
    loop {
        if let Ok(real) = candidate.canonicalize() {
            return real;
        }
        match candidate.parent() {
            Some(parent) => candidate = parent,
            None => return PathBuf::from("/"),
        }
    }
}

/// The same statvfs the broker's low-disk warning uses.
fn disk_space(dir: &Path) -> Option<DiskSpace> {
    let usage = crate::health::disk_space::usage(dir).ok()?;
    Some(DiskSpace {
        total: usage.total_bytes,
        available: usage.free_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_fabricated_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path());
        let put = |p: &str, v: &str| {
            let path = root.path(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, v).unwrap();
        };
        put("/proc/sys/vm/swappiness", "60\n");
        put("/proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n");
        put(
            "/sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        );
        put("/sys/devices/system/cpu/online", "0-1\n");
        put("/sys/devices/system/cpu/isolated", "\n");
        put(
            "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
            "powersave\n",
        );
        put(
            "/sys/devices/system/cpu/cpu1/cpufreq/scaling_available_governors",
            "performance powersave\n",
        );
        put(
            "/proc/self/mountinfo",
            "22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n",
        );
        let s = read_snapshot(&root, Path::new("/nonexistent/ringbroker-data"), None);
        assert_eq!(s.vm.swappiness, Some(60));
        assert_eq!(s.vm.dirty_ratio, None);
        assert_eq!(s.net.tcp_rmem, Some([4096, 131072, 6291456]));
        assert_eq!(s.thp.enabled.as_deref(), Some("madvise"));
        assert_eq!(s.cpu.online, Some(vec![0, 1]));
        assert_eq!(s.cpu.isolated, Some(vec![]));
        assert_eq!(s.shards, 2);
        assert_eq!(s.cpu.governors.len(), 1);
        assert_eq!(s.cpu.governors[0].cpu, 1);
        assert_eq!(s.cpu.governors[0].available, ["performance", "powersave"]);
        assert!(!s.data_dir.exists);
        assert_eq!(s.data_dir.examined, PathBuf::from("/"));
        assert_eq!(
            s.data_dir.mount.as_ref().map(|m| m.fs_type.as_str()),
            Some("ext4")
        );
        assert!(s.data_dir.space.is_some(), "statvfs of / works");
        assert!(s.nofile.is_some() && s.memlock.is_some());
    }

    #[test]
    fn explicit_shards_win() {
        let dir = tempfile::tempdir().unwrap();
        let s = read_snapshot(&SysRoot::new(dir.path()), dir.path(), Some(7));
        assert_eq!(s.shards, 7);
        assert!(s.data_dir.exists);
    }
}
