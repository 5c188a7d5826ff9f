//! The judgement: a [`SystemSnapshot`] and a [`Profile`] in, one [`Finding`] per setting
//! out. Pure: no I/O, so every rule is unit-tested on fabricated snapshots.
//!
//! Sources for the thresholds are in `tuning/README.md`; where a rule rests on how
//! ringbroker itself works (listen backlog, files per segment, write-behind), the `why`
//! says so.

use super::finding::Finding;
use super::parse::kernel_version;
use super::profile::Profile;
use super::snapshot::{Rlimit, SystemSnapshot};
use super::units::{bytes, limit};

/// glommio refuses to start an executor below this `RLIMIT_MEMLOCK` (its own check).
pub const GLOMMIO_MIN_MEMLOCK: u64 = 512 * 1024;
/// Locked memory one shard needs: glommio registers the shard's I/O buffer
/// (`runtime::DEFAULT_IO_MEMORY`, 512 KiB) with each of its 3 rings (main, latency, poll),
/// and each registration is counted; plus a margin. Measured as an unprivileged user
/// (tuning/README.md): 1536 KiB is not enough for 1 shard, 2048 KiB is; 8 MiB holds 5
/// shards, not 6.
pub const MEMLOCK_PER_SHARD: u64 = 3 * crate::runtime::DEFAULT_IO_MEMORY as u64 + (64 << 10);
/// Kafka's documented starting point for the broker's open files.
pub const RECOMMENDED_NOFILE: u64 = 100_000;
/// Oldest kernel ringbroker supports (io_uring features glommio uses).
pub const MIN_KERNEL: (u32, u32) = (5, 8);
/// Each shard listens with this backlog (`runtime::TcpListener::bind`); the kernel caps
/// it at `net.core.somaxconn`.
pub const LISTEN_BACKLOG: u64 = 1024;
/// Socket buffer ceilings below this limit one TCP stream to about 4 MiB per round trip
/// (≈ 25 Gbit/s at 1 ms RTT, ≈ 340 Mbit/s at 100 ms).
pub const MIN_SOCKET_BUFFER_MAX: u64 = 4 << 20;
pub const RECOMMENDED_SOCKET_BUFFER_MAX: u64 = 16 << 20;
/// Free space below this share of the file system (or below 1 GiB) is flagged.
pub const MIN_FREE_PERCENT: u64 = 10;
pub const MIN_FREE_BYTES: u64 = 1 << 30;

const UNREADABLE: &str = "unavailable";

/// Judges every setting of the snapshot for the profile, in a stable order.
pub fn evaluate(s: &SystemSnapshot, profile: Profile) -> Vec<Finding> {
    vec![
        kernel(s),
        io_uring(s),
        memlock(s),
        nofile(s),
        cpu_cores(s),
        cpu_isolated(s, profile),
        cpu_governor(s),
        swappiness(s),
        dirty_background_ratio(s, profile),
        dirty_ratio(s, profile),
        dirty_expire(s),
        max_map_count(s),
        thp_enabled(s, profile),
        thp_defrag(s),
        fs_type(s),
        fs_atime(s),
        fs_free(s),
        somaxconn(s),
        socket_max(
            "net.core.rmem_max",
            "/proc/sys/net/core/rmem_max",
            s.net.rmem_max,
            "receive",
        ),
        socket_max(
            "net.core.wmem_max",
            "/proc/sys/net/core/wmem_max",
            s.net.wmem_max,
            "send",
        ),
        tcp_mem(
            "net.ipv4.tcp_rmem",
            "/proc/sys/net/ipv4/tcp_rmem",
            s.net.tcp_rmem,
            "receive",
        ),
        tcp_mem(
            "net.ipv4.tcp_wmem",
            "/proc/sys/net/ipv4/tcp_wmem",
            s.net.tcp_wmem,
            "send",
        ),
        netdev_backlog(s),
    ]
}

/// True when every finding is fine (exit status 0).
pub fn all_ok(findings: &[Finding]) -> bool {
    findings.iter().all(|f| f.ok)
}

fn unreadable(name: &str, recommended: impl Into<String>, what: &str) -> Finding {
    Finding::new(name, UNREADABLE, recommended).why(format!("could not read {what}"))
}

fn kernel(s: &SystemSnapshot) -> Finding {
    let min = format!("≥ {}.{}", MIN_KERNEL.0, MIN_KERNEL.1);
    let Some(release) = &s.kernel_release else {
        return unreadable("kernel", min, "/proc/sys/kernel/osrelease");
    };
    let ok = kernel_version(release).is_none_or(|v| v >= MIN_KERNEL);
    Finding::new("kernel", release.trim(), min)
        .ok(ok)
        .why("glommio needs io_uring as of Linux 5.8")
}

fn io_uring(s: &SystemSnapshot) -> Finding {
    let name = "kernel.io_uring_disabled";
    match s.io_uring_disabled {
        None => Finding::new(name, "no such sysctl (kernel < 6.6): enabled", "0")
            .why("every shard is an io_uring event loop; this kernel has no switch to disable it"),
        Some(0) => Finding::new(name, "0", "0").why("every shard is an io_uring event loop"),
        Some(v) => Finding::new(name, v.to_string(), "0")
            .ok(false)
            .why(if v == 1 {
                "io_uring is limited to CAP_SYS_ADMIN or kernel.io_uring_group: the broker may not start"
            } else {
                "io_uring is disabled: the broker cannot start"
            })
            .hint(
                "a security decision someone made on purpose, so tune does not change it: \
                 `sysctl -w kernel.io_uring_disabled=0` (persist in /etc/sysctl.d/)",
            ),
    }
}

fn memlock(s: &SystemSnapshot) -> Finding {
    let need = MEMLOCK_PER_SHARD.saturating_mul(s.shards as u64);
    let recommended = format!(
        "≥ {} ({} × {} shards; unlimited is simplest)",
        bytes(need),
        bytes(MEMLOCK_PER_SHARD),
        s.shards
    );
    let per_shard = format!(
        "each shard registers its {} I/O buffer with 3 io_uring rings ({} locked)",
        bytes(crate::runtime::DEFAULT_IO_MEMORY as u64),
        bytes(MEMLOCK_PER_SHARD)
    );
    let hint = "`ulimit -l unlimited` in the shell that starts the broker; systemd: \
                LimitMEMLOCK=infinity; /etc/security/limits.conf: `<user> - memlock unlimited`; \
                docker: --ulimit memlock=-1";
    let Some(Rlimit { soft, hard }) = s.memlock else {
        return unreadable("memlock", recommended, "RLIMIT_MEMLOCK");
    };
    let fits = soft.map(|v| v / MEMLOCK_PER_SHARD);
    let fits_text = match fits {
        None => "any number of shards fit".to_string(),
        Some(n) => format!("{n} shard(s) fit"),
    };
    let current = format!(
        "{} (hard {}): {fits_text}",
        limit(soft, true),
        limit(hard, true)
    );
    let privileged = s.cap_ipc_lock == Some(true);
    let f = Finding::new("memlock", current, recommended).hint(hint);
    match soft {
        Some(v) if v < GLOMMIO_MIN_MEMLOCK => f.ok(false).why(format!(
            "glommio refuses to start a shard below {}: the broker cannot start",
            bytes(GLOMMIO_MIN_MEMLOCK)
        )),
        Some(v) if v < need && !privileged => f.ok(false).why(format!(
            "{per_shard}; past {fits_text} glommio skips the registration with a warning"
        )),
        Some(v) if v < need => f.why(format!(
            "{per_shard}; this process has CAP_IPC_LOCK, which exempts them from the limit \
             (a broker started as another user would not be)"
        )),
        _ => f.why(format!("{per_shard}, counted against RLIMIT_MEMLOCK")),
    }
}

fn nofile(s: &SystemSnapshot) -> Finding {
    let recommended = format!("≥ {RECOMMENDED_NOFILE}");
    let Some(Rlimit { soft, hard }) = s.nofile else {
        return unreadable("nofile", recommended, "RLIMIT_NOFILE");
    };
    let ok = soft.is_none_or(|v| v >= RECOMMENDED_NOFILE);
    Finding::new(
        "nofile",
        format!("{} (hard {})", limit(soft, false), limit(hard, false)),
        recommended,
    )
    .ok(ok)
    .why("3 files per segment (.log, .index, .timeindex) stay open, plus 1 per connection")
    .hint(format!(
        "`ulimit -n {RECOMMENDED_NOFILE}` before starting the broker (up to the hard limit); \
         systemd: LimitNOFILE={RECOMMENDED_NOFILE}"
    ))
}

fn cpu_cores(s: &SystemSnapshot) -> Finding {
    let Some(online) = &s.cpu.online else {
        return unreadable(
            "cpu.cores",
            "one shard per core",
            "/sys/devices/system/cpu/online",
        );
    };
    let n = online.len();
    Finding::new(
        "cpu.cores",
        format!("{n} online; {} shard(s) planned", s.shards),
        format!("shards ≤ {n}"),
    )
    .ok(s.shards <= n.max(1))
    .why("a shard is one thread running its event loop; two shards on one core take turns")
    .hint("num.shards (or serve --shards) defaults to one per online core")
}

fn cpu_isolated(s: &SystemSnapshot, profile: Profile) -> Finding {
    let Some(isolated) = &s.cpu.isolated else {
        return unreadable("cpu.isolated", "-", "/sys/devices/system/cpu/isolated");
    };
    let current = if isolated.is_empty() {
        "none".to_string()
    } else {
        format!("{isolated:?}")
    };
    let (recommended, why) = match profile {
        Profile::Throughput => (
            "none needed",
            "isolation trades a core of throughput for steadier latency",
        ),
        Profile::Latency => (
            "optional: isolcpus/nohz_full for the broker's cores",
            "keeps other tasks and timer ticks off shard cores; boot parameters only (see tuning/README.md)",
        ),
    };
    Finding::new("cpu.isolated", current, recommended).why(why)
}

fn cpu_governor(s: &SystemSnapshot) -> Finding {
    let governors = &s.cpu.governors;
    if governors.is_empty() {
        return Finding::new(
            "cpu.governor",
            "no cpufreq (VM or fixed clock)",
            "performance",
        )
        .why("nothing to tune: the clock is not scaled by this kernel");
    }
    let mut names: Vec<&str> = governors.iter().map(|g| g.current.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let ok = names == ["performance"];
    let mut f = Finding::new("cpu.governor", names.join(","), "performance")
        .ok(ok)
        .why("a scaled-down clock adds latency on every burst until it ramps up")
        .hint("persist with cpupower frequency-set -g performance at boot, or tuned/systemd");
    for g in governors.iter().filter(|g| g.current != "performance") {
        if g.available.iter().any(|a| a == "performance") {
            f = f.apply(
                &format!(
                    "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor",
                    g.cpu
                ),
                "performance",
            );
        }
    }
    f
}

fn swappiness(s: &SystemSnapshot) -> Finding {
    let name = "vm.swappiness";
    let Some(v) = s.vm.swappiness else {
        return unreadable(name, "1", "/proc/sys/vm/swappiness");
    };
    let no_swap = s.vm.swap_total == Some(0);
    let current = if no_swap {
        format!("{v} (no swap configured)")
    } else {
        v.to_string()
    };
    Finding::new(name, current, "1")
        .ok(v <= 10 || no_swap)
        .why("reclaim page cache before swapping out broker memory (a swapped-in page stalls a shard)")
        .apply("/proc/sys/vm/swappiness", "1")
}

fn dirty_background_ratio(s: &SystemSnapshot, profile: Profile) -> Finding {
    let name = "vm.dirty_background_ratio";
    let (max, recommended) = match profile {
        Profile::Throughput => (10, "≤ 10 (default 10)"),
        Profile::Latency => (5, "5"),
    };
    if let Some(b) = s.vm.dirty_background_bytes.filter(|b| *b > 0) {
        return Finding::new(
            name,
            format!("unused: vm.dirty_background_bytes = {}", bytes(b)),
            recommended,
        )
        .why("a byte limit was chosen explicitly; left as is");
    }
    let Some(v) = s.vm.dirty_background_ratio else {
        return unreadable(name, recommended, "/proc/sys/vm/dirty_background_ratio");
    };
    Finding::new(name, v.to_string(), recommended)
        .ok(v <= max)
        .why(match profile {
            Profile::Throughput => {
                "% of memory dirty before background write-back starts; ringbroker already \
                 starts write-back every 8 MiB per segment"
            }
            Profile::Latency => {
                "start background write-back early so writers rarely reach vm.dirty_ratio and block"
            }
        })
        .apply("/proc/sys/vm/dirty_background_ratio", max.to_string())
}

fn dirty_ratio(s: &SystemSnapshot, profile: Profile) -> Finding {
    let name = "vm.dirty_ratio";
    let (range, recommended) = match profile {
        Profile::Throughput => (20..=80, "20-80 (default 20)"),
        Profile::Latency => (1..=20, "≤ 20 (default 20)"),
    };
    if let Some(b) = s.vm.dirty_bytes.filter(|b| *b > 0) {
        return Finding::new(
            name,
            format!("unused: vm.dirty_bytes = {}", bytes(b)),
            recommended,
        )
        .why("a byte limit was chosen explicitly; left as is");
    }
    let Some(v) = s.vm.dirty_ratio else {
        return unreadable(name, recommended, "/proc/sys/vm/dirty_ratio");
    };
    let target = if v < *range.start() {
        *range.start()
    } else {
        *range.end()
    };
    Finding::new(name, v.to_string(), recommended)
        .ok(range.contains(&v))
        .why(match profile {
            Profile::Throughput => {
                "% of memory dirty at which writers are throttled; too low throttles bursts the disk would absorb"
            }
            Profile::Latency => {
                "% of memory dirty at which writers block; a high value lets an fsync or a flush burst write GiBs at once"
            }
        })
        .apply("/proc/sys/vm/dirty_ratio", target.to_string())
}

fn dirty_expire(s: &SystemSnapshot) -> Finding {
    let name = "vm.dirty_expire_centisecs";
    let Some(v) = s.vm.dirty_expire_centisecs else {
        return unreadable(name, "≤ 3000", "/proc/sys/vm/dirty_expire_centisecs");
    };
    Finding::new(name, v.to_string(), "≤ 3000 (default)")
        .ok(v <= 3000)
        .why("age at which dirty data is written back: bounds what a power loss takes when fsync is off")
        .apply("/proc/sys/vm/dirty_expire_centisecs", "3000")
}

fn max_map_count(s: &SystemSnapshot) -> Finding {
    let name = "vm.max_map_count";
    let Some(v) = s.vm.max_map_count else {
        return unreadable(name, "≥ 65530", "/proc/sys/vm/max_map_count");
    };
    Finding::new(name, v.to_string(), "≥ 65530 (default)")
        .ok(v >= 65530)
        .why("ringbroker does not mmap segments or indexes (Kafka needs 2 maps per segment)")
        .apply("/proc/sys/vm/max_map_count", "65530")
}

const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
const THP_DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/defrag";

fn thp_enabled(s: &SystemSnapshot, profile: Profile) -> Finding {
    let name = "thp.enabled";
    let (ok_modes, recommended): (&[&str], &str) = match profile {
        Profile::Throughput => (&["always", "madvise", "never"], "madvise (or always)"),
        Profile::Latency => (&["madvise", "never"], "never"),
    };
    let Some(mode) = &s.thp.enabled else {
        return unreadable(name, recommended, THP_ENABLED);
    };
    Finding::new(name, mode.clone(), recommended)
        .ok(ok_modes.contains(&mode.as_str()))
        .why(match profile {
            Profile::Throughput => {
                "huge pages only help the heap; either mode is fine for throughput"
            }
            Profile::Latency => {
                "`always` lets page faults and khugepaged compact memory behind a shard's back"
            }
        })
        .hint("persist: transparent_hugepage=never on the kernel command line")
        .apply(THP_ENABLED, "never")
}

fn thp_defrag(s: &SystemSnapshot) -> Finding {
    let name = "thp.defrag";
    let Some(mode) = &s.thp.defrag else {
        return unreadable(name, "madvise", THP_DEFRAG);
    };
    Finding::new(name, mode.clone(), "madvise (default), defer or never")
        .ok(mode != "always")
        .why("`always` stalls a faulting thread in direct reclaim and compaction")
        .apply(THP_DEFRAG, "madvise")
}

fn fs_type(s: &SystemSnapshot) -> Finding {
    let name = "fs.type";
    let d = &s.data_dir;
    let Some(m) = &d.mount else {
        return unreadable(name, "xfs or ext4", "/proc/self/mountinfo");
    };
    let current = format!(
        "{} on {} ({})",
        m.fs_type,
        m.mount_point.display(),
        m.source
    );
    let f = Finding::new(name, current, "xfs or ext4");
    match m.fs_type.as_str() {
        "xfs" | "ext4" => f.why("the file systems Kafka's docs recommend and ringbroker is tested on"),
        "tmpfs" | "ramfs" => f
            .ok(false)
            .why("memory: the log is gone at reboot and competes with the page cache (fine for tests)"),
        "overlay" => f
            .ok(false)
            .why("a container layer: mount a volume for the data directory"),
        "nfs" | "nfs4" | "cifs" | "smb3" | "fuse" | "9p" => f
            .ok(false)
            .why("a network/FUSE file system: fsync and locking semantics differ"),
        _ => f
            .ok(false)
            .why("untested with ringbroker; xfs or ext4 recommended (copy-on-write file systems make fsync costlier)"),
    }
    .hint(format!(
        "data directory {} (examined: {}{})",
        d.path.display(),
        d.examined.display(),
        if d.exists { "" } else { ", not created yet" }
    ))
}

fn fs_atime(s: &SystemSnapshot) -> Finding {
    let name = "fs.atime";
    let Some(m) = &s.data_dir.mount else {
        return unreadable(name, "noatime", "/proc/self/mountinfo");
    };
    let has = |o: &str| m.options.iter().any(|x| x == o);
    let current = if has("noatime") {
        "noatime"
    } else if has("relatime") {
        "relatime"
    } else if has("strictatime") {
        "strictatime"
    } else {
        "atime"
    };
    Finding::new(name, current, "noatime")
        .ok(current == "noatime")
        .why("relatime still writes an inode when a consumer reads a segment written since its last read")
        .hint(format!(
            "mount -o remount,noatime {} and add noatime in /etc/fstab (not done by --apply: \
             it changes the whole file system)",
            m.mount_point.display()
        ))
}

fn fs_free(s: &SystemSnapshot) -> Finding {
    let name = "fs.free";
    let recommended = format!("≥ {MIN_FREE_PERCENT}% and ≥ {}", bytes(MIN_FREE_BYTES));
    let Some(space) = s.data_dir.space else {
        return unreadable(name, recommended, "statvfs of the data directory");
    };
    let percent = if space.total == 0 {
        0
    } else {
        ((space.available as u128 * 100) / space.total as u128) as u64
    };
    Finding::new(
        name,
        format!(
            "{} free of {} ({percent}%)",
            bytes(space.available),
            bytes(space.total)
        ),
        recommended,
    )
    .ok(percent >= MIN_FREE_PERCENT && space.available >= MIN_FREE_BYTES)
    .why("a full disk fails produce requests; retention frees space only a whole segment at a time")
}

fn somaxconn(s: &SystemSnapshot) -> Finding {
    let name = "net.core.somaxconn";
    let Some(v) = s.net.somaxconn else {
        return unreadable(name, "≥ 1024", "/proc/sys/net/core/somaxconn");
    };
    Finding::new(name, v.to_string(), format!("≥ {LISTEN_BACKLOG}"))
        .ok(v >= LISTEN_BACKLOG)
        .why("each shard listens with a backlog of 1024, capped by this: a connection storm is refused beyond it")
        .apply("/proc/sys/net/core/somaxconn", "4096")
}

fn socket_max(name: &str, path: &str, value: Option<u64>, direction: &str) -> Finding {
    let recommended = format!(
        "≥ {} ({})",
        bytes(MIN_SOCKET_BUFFER_MAX),
        bytes(RECOMMENDED_SOCKET_BUFFER_MAX)
    );
    let Some(v) = value else {
        return unreadable(name, recommended, path);
    };
    Finding::new(name, bytes(v), recommended)
        .ok(v >= MIN_SOCKET_BUFFER_MAX)
        .why(format!(
            "largest {direction} buffer a client may ask for with setsockopt (socket.{direction}.buffer.bytes)"
        ))
        .apply(path, RECOMMENDED_SOCKET_BUFFER_MAX.to_string())
}

fn tcp_mem(name: &str, path: &str, value: Option<[u64; 3]>, direction: &str) -> Finding {
    let recommended = format!(
        "max ≥ {} ({})",
        bytes(MIN_SOCKET_BUFFER_MAX),
        bytes(RECOMMENDED_SOCKET_BUFFER_MAX)
    );
    let Some([min, default, max]) = value else {
        return unreadable(name, recommended, path);
    };
    Finding::new(name, format!("{min} {default} {max}"), recommended)
        .ok(max >= MIN_SOCKET_BUFFER_MAX)
        .why(format!(
            "ringbroker's sockets are auto-tuned up to this {direction} max: one connection moves at most max per round trip"
        ))
        .apply(
            path,
            format!("{min} {default} {}", RECOMMENDED_SOCKET_BUFFER_MAX.max(max)),
        )
}

fn netdev_backlog(s: &SystemSnapshot) -> Finding {
    let name = "net.core.netdev_max_backlog";
    let Some(v) = s.net.netdev_max_backlog else {
        return unreadable(name, "no drops", "/proc/sys/net/core/netdev_max_backlog");
    };
    match s.net.softnet_dropped {
        Some(dropped) if dropped > 0 => {
            let target = (v.saturating_mul(2)).max(5000);
            Finding::new(
                name,
                format!("{v} ({dropped} packets dropped since boot)"),
                target.to_string(),
            )
            .ok(false)
            .why("packets were dropped because a CPU's input queue was full (/proc/net/softnet_stat)")
            .apply("/proc/sys/net/core/netdev_max_backlog", target.to_string())
        }
        Some(_) => Finding::new(
            name,
            format!("{v} (no drops since boot)"),
            "as is while nothing is dropped",
        )
        .why("input queue per CPU; raise only if /proc/net/softnet_stat shows drops"),
        None => Finding::new(name, v.to_string(), "as is while nothing is dropped")
            .why("could not read /proc/net/softnet_stat to see whether packets are dropped"),
    }
}

#[cfg(test)]
#[path = "evaluate_tests.rs"]
mod tests;
