//! Tests of the settings evaluation: each check's verdict over readings of a system, and where the profiles differ.

use std::path::PathBuf;

use super::*;
use crate::tune::snapshot::{
    CpuInfo, DataDir, DiskSpace, Governor, Mount, NetSettings, Thp, VmSettings,
};

/// A well-tuned machine: everything fine for both profiles.
fn good() -> SystemSnapshot {
    SystemSnapshot {
        kernel_release: Some("6.8.0-45-generic".into()),
        shards: 4,
        memlock: Some(Rlimit {
            soft: None,
            hard: None,
        }),
        cap_ipc_lock: Some(false),
        nofile: Some(Rlimit {
            soft: Some(1 << 20),
            hard: Some(1 << 20),
        }),
        io_uring_disabled: Some(0),
        vm: VmSettings {
            swap_total: Some(1 << 30),
            swappiness: Some(1),
            dirty_ratio: Some(20),
            dirty_background_ratio: Some(5),
            dirty_bytes: Some(0),
            dirty_background_bytes: Some(0),
            dirty_expire_centisecs: Some(3000),
            max_map_count: Some(262144),
        },
        thp: Thp {
            enabled: Some("madvise".into()),
            defrag: Some("madvise".into()),
        },
        net: NetSettings {
            somaxconn: Some(4096),
            rmem_max: Some(16 << 20),
            wmem_max: Some(16 << 20),
            tcp_rmem: Some([4096, 131072, 16 << 20]),
            tcp_wmem: Some([4096, 16384, 16 << 20]),
            netdev_max_backlog: Some(1000),
            softnet_dropped: Some(0),
        },
        cpu: CpuInfo {
            online: Some(vec![0, 1, 2, 3]),
            isolated: Some(vec![]),
            governors: vec![],
        },
        data_dir: DataDir {
            path: PathBuf::from("/var/lib/ringbroker"),
            examined: PathBuf::from("/var/lib/ringbroker"),
            exists: true,
            mount: Some(Mount {
                mount_point: PathBuf::from("/var/lib/ringbroker"),
                fs_type: "xfs".into(),
                source: "/dev/nvme0n1".into(),
                options: vec!["rw".into(), "noatime".into()],
            }),
            space: Some(DiskSpace {
                total: 1 << 40,
                available: 1 << 39,
            }),
        },
    }
}

fn find<'a>(findings: &'a [Finding], name: &str) -> &'a Finding {
    findings
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no finding {name}"))
}

fn off(s: &SystemSnapshot, profile: Profile) -> Vec<String> {
    evaluate(s, profile)
        .into_iter()
        .filter(|f| !f.ok)
        .map(|f| f.name)
        .collect()
}

#[test]
fn a_tuned_machine_is_fine_for_both_profiles() {
    for profile in [Profile::Throughput, Profile::Latency] {
        let findings = evaluate(&good(), profile);
        assert!(all_ok(&findings), "{profile}: {:?}", off(&good(), profile));
        assert!(findings.iter().all(|f| f.apply.is_empty()));
        assert!(
            findings.iter().all(|f| !f.why.is_empty()),
            "every finding says why"
        );
    }
}

#[test]
fn names_are_unique_and_stable() {
    let findings = evaluate(&good(), Profile::Throughput);
    let mut names: Vec<&str> = findings.iter().map(|f| f.name.as_str()).collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n);
    for expected in [
        "memlock",
        "nofile",
        "kernel.io_uring_disabled",
        "vm.swappiness",
        "vm.dirty_ratio",
        "vm.dirty_background_ratio",
        "vm.dirty_expire_centisecs",
        "vm.max_map_count",
        "thp.enabled",
        "thp.defrag",
        "net.core.somaxconn",
        "net.core.rmem_max",
        "net.core.wmem_max",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.core.netdev_max_backlog",
        "cpu.governor",
        "cpu.cores",
        "cpu.isolated",
        "fs.type",
        "fs.atime",
        "fs.free",
    ] {
        assert!(names.contains(&expected), "missing {expected}");
    }
}

#[test]
fn memlock_counts_shards_that_fit() {
    let mut s = good();
    // Measured: 8 MiB holds 5 shards as an unprivileged user, not 6.
    s.memlock = Some(Rlimit {
        soft: Some(8 << 20),
        hard: Some(8 << 20),
    });
    s.shards = 6;
    let f = find(&evaluate(&s, Profile::Throughput), "memlock").clone();
    assert!(!f.ok);
    assert!(f.current.contains("5 shard(s) fit"), "{}", f.current);
    s.shards = 4;
    s.memlock = Some(Rlimit {
        soft: Some(4 << 20),
        hard: Some(8 << 20),
    });
    let f = find(&evaluate(&s, Profile::Throughput), "memlock").clone();
    assert!(!f.ok);
    assert!(f.current.contains("2 shard(s) fit"), "{}", f.current);
    assert!(f.recommended.starts_with("≥ 6.2 MiB"), "{}", f.recommended);
    assert!(
        f.apply.is_empty(),
        "an rlimit is not something tune can set for the broker"
    );
    assert!(f.hint.as_deref().unwrap_or("").contains("LimitMEMLOCK"));

    // Enough for 4 shards.
    s.memlock = Some(Rlimit {
        soft: Some(8 << 20),
        hard: Some(8 << 20),
    });
    assert!(find(&evaluate(&s, Profile::Throughput), "memlock").ok);

    // CAP_IPC_LOCK exempts registered buffers, but not glommio's own minimum.
    s.memlock = Some(Rlimit {
        soft: Some(1 << 20),
        hard: Some(1 << 20),
    });
    s.cap_ipc_lock = Some(true);
    assert!(find(&evaluate(&s, Profile::Throughput), "memlock").ok);
    s.memlock = Some(Rlimit {
        soft: Some(64 << 10),
        hard: Some(64 << 10),
    });
    let f = find(&evaluate(&s, Profile::Throughput), "memlock").clone();
    assert!(!f.ok);
    assert!(f.why.contains("cannot start"), "{}", f.why);
}

#[test]
fn nofile_below_kafkas_starting_point() {
    let mut s = good();
    s.nofile = Some(Rlimit {
        soft: Some(20000),
        hard: Some(20000),
    });
    let f = find(&evaluate(&s, Profile::Throughput), "nofile").clone();
    assert!(!f.ok);
    assert_eq!(f.current, "20000 (hard 20000)");
}

#[test]
fn io_uring_disabled_is_reported_not_changed() {
    let mut s = good();
    for v in [1, 2] {
        s.io_uring_disabled = Some(v);
        let f = find(
            &evaluate(&s, Profile::Throughput),
            "kernel.io_uring_disabled",
        )
        .clone();
        assert!(!f.ok);
        assert!(
            f.apply.is_empty(),
            "a security setting is never changed by tune"
        );
    }
    s.io_uring_disabled = None;
    assert!(
        find(
            &evaluate(&s, Profile::Throughput),
            "kernel.io_uring_disabled"
        )
        .ok
    );
}

#[test]
fn old_kernel_is_off() {
    let mut s = good();
    s.kernel_release = Some("5.4.0-150-generic".into());
    assert_eq!(off(&s, Profile::Throughput), ["kernel"]);
}

#[test]
fn swappiness_matters_only_with_swap() {
    let mut s = good();
    s.vm.swappiness = Some(60);
    let f = find(&evaluate(&s, Profile::Latency), "vm.swappiness").clone();
    assert!(!f.ok);
    assert_eq!(f.apply.len(), 1);
    assert_eq!(f.apply[0].path, PathBuf::from("/proc/sys/vm/swappiness"));
    assert_eq!(f.apply[0].value, "1");
    s.vm.swap_total = Some(0);
    assert!(find(&evaluate(&s, Profile::Latency), "vm.swappiness").ok);
}

#[test]
fn profiles_differ_on_dirty_ratios_and_thp() {
    let mut s = good();
    s.vm.dirty_background_ratio = Some(10);
    s.vm.dirty_ratio = Some(60);
    s.thp.enabled = Some("always".into());
    assert!(off(&s, Profile::Throughput).is_empty());
    let latency = evaluate(&s, Profile::Latency);
    let names: Vec<&str> = latency
        .iter()
        .filter(|f| !f.ok)
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["vm.dirty_background_ratio", "vm.dirty_ratio", "thp.enabled"]
    );
    assert_eq!(find(&latency, "vm.dirty_ratio").apply[0].value, "20");
    assert_eq!(
        find(&latency, "vm.dirty_background_ratio").apply[0].value,
        "5"
    );
    assert_eq!(find(&latency, "thp.enabled").apply[0].value, "never");

    // A throughput machine throttling writers at 5% is off, and raised to the minimum.
    s.vm.dirty_ratio = Some(5);
    let f = find(&evaluate(&s, Profile::Throughput), "vm.dirty_ratio").clone();
    assert!(!f.ok);
    assert_eq!(f.apply[0].value, "20");
}

#[test]
fn dirty_bytes_replace_ratios() {
    let mut s = good();
    s.vm.dirty_ratio = Some(0);
    s.vm.dirty_bytes = Some(512 << 20);
    s.vm.dirty_background_ratio = Some(0);
    s.vm.dirty_background_bytes = Some(64 << 20);
    for profile in [Profile::Throughput, Profile::Latency] {
        let findings = evaluate(&s, profile);
        assert!(find(&findings, "vm.dirty_ratio").ok);
        assert!(find(&findings, "vm.dirty_background_ratio").ok);
        assert!(find(&findings, "vm.dirty_ratio")
            .current
            .contains("512 MiB"));
    }
}

#[test]
fn thp_defrag_always_is_off_everywhere() {
    let mut s = good();
    s.thp.defrag = Some("always".into());
    for profile in [Profile::Throughput, Profile::Latency] {
        let f = find(&evaluate(&s, profile), "thp.defrag").clone();
        assert!(!f.ok);
        assert_eq!(f.apply[0].value, "madvise");
    }
}

#[test]
fn governors_other_than_performance_are_set_where_available() {
    let mut s = good();
    s.cpu.governors = vec![
        Governor {
            cpu: 0,
            current: "powersave".into(),
            available: vec!["performance".into(), "powersave".into()],
        },
        Governor {
            cpu: 1,
            current: "performance".into(),
            available: vec!["performance".into(), "powersave".into()],
        },
        Governor {
            cpu: 2,
            current: "schedutil".into(),
            available: vec!["schedutil".into()],
        },
    ];
    let f = find(&evaluate(&s, Profile::Throughput), "cpu.governor").clone();
    assert!(!f.ok);
    assert_eq!(f.current, "performance,powersave,schedutil");
    assert_eq!(f.apply.len(), 1, "cpu2 has no performance governor");
    assert_eq!(
        f.apply[0].path,
        PathBuf::from("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    );
}

#[test]
fn more_shards_than_cores() {
    let mut s = good();
    s.shards = 8;
    s.memlock = Some(Rlimit {
        soft: None,
        hard: None,
    });
    assert_eq!(off(&s, Profile::Throughput), ["cpu.cores"]);
}

#[test]
fn file_system_checks() {
    let mut s = good();
    let mount = s.data_dir.mount.as_mut().unwrap();
    mount.fs_type = "tmpfs".into();
    mount.options = vec!["rw".into(), "relatime".into()];
    let findings = evaluate(&s, Profile::Throughput);
    assert!(!find(&findings, "fs.type").ok);
    let atime = find(&findings, "fs.atime");
    assert!(!atime.ok);
    assert_eq!(atime.current, "relatime");
    assert!(atime.apply.is_empty(), "no remounts from tune");

    s.data_dir.mount.as_mut().unwrap().fs_type = "ext4".into();
    assert!(find(&evaluate(&s, Profile::Throughput), "fs.type").ok);

    s.data_dir.space = Some(DiskSpace {
        total: 100 << 30,
        available: 5 << 30,
    });
    let f = find(&evaluate(&s, Profile::Throughput), "fs.free").clone();
    assert!(!f.ok);
    assert_eq!(f.current, "5 GiB free of 100 GiB (5%)");
    s.data_dir.space = Some(DiskSpace {
        total: 4 << 30,
        available: 2 << 30,
    });
    assert!(find(&evaluate(&s, Profile::Throughput), "fs.free").ok);
    s.data_dir.space = Some(DiskSpace {
        total: 2 << 30,
        available: 512 << 20,
    });
    assert!(!find(&evaluate(&s, Profile::Throughput), "fs.free").ok);
}

#[test]
fn network_buffers_keep_min_and_default() {
    let mut s = good();
    s.net.tcp_wmem = Some([4096, 16384, 4 << 20]);
    assert!(find(&evaluate(&s, Profile::Throughput), "net.ipv4.tcp_wmem").ok);
    s.net.tcp_wmem = Some([4096, 16384, 1 << 20]);
    s.net.rmem_max = Some(212992);
    let findings = evaluate(&s, Profile::Throughput);
    let f = find(&findings, "net.ipv4.tcp_wmem");
    assert!(!f.ok);
    assert_eq!(f.apply[0].value, "4096 16384 16777216");
    let f = find(&findings, "net.core.rmem_max");
    assert!(!f.ok);
    assert_eq!(f.apply[0].value, "16777216");
    s.net.somaxconn = Some(128);
    assert!(!find(&evaluate(&s, Profile::Throughput), "net.core.somaxconn").ok);
}

#[test]
fn backlog_is_raised_only_after_drops() {
    let mut s = good();
    s.net.softnet_dropped = Some(17);
    let f = find(
        &evaluate(&s, Profile::Throughput),
        "net.core.netdev_max_backlog",
    )
    .clone();
    assert!(!f.ok);
    assert_eq!(f.apply[0].value, "5000");
    s.net.softnet_dropped = None;
    assert!(
        find(
            &evaluate(&s, Profile::Throughput),
            "net.core.netdev_max_backlog"
        )
        .ok
    );
}

#[test]
fn unreadable_values_are_not_judged() {
    let s = SystemSnapshot {
        shards: 1,
        ..SystemSnapshot::default()
    };
    let findings = evaluate(&s, Profile::Latency);
    assert!(all_ok(&findings), "{:?}", off(&s, Profile::Latency));
    assert!(findings.iter().all(|f| f.apply.is_empty()));
}
