//! `ringbroker tune` as a user runs it: `--check --json` on this machine, `--apply` on a
//! fabricated `/proc` + `/sys` tree (`--sys-root`), never on the real kernel.

use std::path::Path;
use std::process::{Command, Output};

fn tune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .arg("tune")
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run ringbroker tune")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn check_json_on_this_machine() {
    let data = tempfile::tempdir().unwrap();
    for profile in ["throughput", "latency"] {
        let out = tune(&[
            "--check",
            "--json",
            "--profile",
            profile,
            "--data-dir",
            data.path().to_str().unwrap(),
        ]);
        let doc = json(&out);
        assert_eq!(doc["profile"], profile);
        let findings = doc["findings"].as_array().expect("findings array");
        assert!(findings.len() >= 20, "{} findings", findings.len());
        for f in findings {
            for key in ["name", "current", "recommended", "why"] {
                assert!(f[key].is_string(), "{key} of {f}");
                assert!(!f[key].as_str().unwrap().is_empty(), "{key} of {f}");
            }
            assert!(f["ok"].is_boolean(), "ok of {f}");
            assert!(f["apply"].is_array(), "apply of {f}");
        }
        let all_ok = findings.iter().all(|f| f["ok"] == true);
        assert_eq!(doc["ok"], all_ok);
        let expected = if all_ok { 0 } else { 1 };
        assert_eq!(out.status.code(), Some(expected), "exit status vs findings");
        // The data directory's file system was found.
        let fs = findings.iter().find(|f| f["name"] == "fs.type").unwrap();
        assert_ne!(fs["current"], "unavailable");
    }
}

#[test]
fn check_table_is_one_line_per_setting() {
    let data = tempfile::tempdir().unwrap();
    let out = tune(&["--data-dir", data.path().to_str().unwrap()]);
    assert!(matches!(out.status.code(), Some(0 | 1)));
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "memlock",
        "nofile",
        "vm.swappiness",
        "thp.enabled",
        "fs.atime",
    ] {
        let lines = text
            .lines()
            .filter(|l| l.split_whitespace().nth(1) == Some(name))
            .count();
        assert_eq!(lines, 1, "{name} in\n{text}");
    }
}

/// A fake kernel tree with settings that are off for the latency profile.
fn fake_root(dir: &Path) {
    let files = [
        ("proc/sys/vm/swappiness", "60\n"),
        ("proc/sys/vm/dirty_ratio", "40\n"),
        ("proc/sys/vm/dirty_background_ratio", "10\n"),
        ("proc/sys/vm/dirty_bytes", "0\n"),
        ("proc/sys/vm/dirty_background_bytes", "0\n"),
        ("proc/sys/vm/dirty_expire_centisecs", "3000\n"),
        ("proc/sys/vm/max_map_count", "65530\n"),
        ("proc/sys/net/core/somaxconn", "128\n"),
        ("proc/sys/net/core/rmem_max", "212992\n"),
        ("proc/sys/net/core/wmem_max", "16777216\n"),
        ("proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n"),
        ("proc/sys/net/ipv4/tcp_wmem", "4096\t16384\t1048576\n"),
        ("proc/sys/net/core/netdev_max_backlog", "1000\n"),
        ("proc/net/softnet_stat", "00001000 00000000 00000000\n"),
        ("proc/sys/kernel/osrelease", "6.8.0-test\n"),
        ("proc/sys/kernel/io_uring_disabled", "0\n"),
        ("proc/meminfo", "SwapTotal:     1048576 kB\n"),
        (
            "sys/kernel/mm/transparent_hugepage/enabled",
            "[always] madvise never\n",
        ),
        (
            "sys/kernel/mm/transparent_hugepage/defrag",
            "[always] defer defer+madvise madvise never\n",
        ),
        ("sys/devices/system/cpu/online", "0-1\n"),
        ("sys/devices/system/cpu/isolated", "\n"),
        (
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
            "powersave\n",
        ),
        (
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors",
            "performance powersave\n",
        ),
    ];
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn read(dir: &Path, path: &str) -> String {
    std::fs::read_to_string(dir.join(path)).unwrap()
}

#[test]
fn apply_on_a_fake_root_prints_old_and_new() {
    let root = tempfile::tempdir().unwrap();
    fake_root(root.path());
    let root_arg = root.path().to_str().unwrap();
    let data = root.path().to_str().unwrap();

    // Dry run: reports, writes nothing.
    let out = tune(&[
        "--apply",
        "--dry-run",
        "--profile",
        "latency",
        "--sys-root",
        root_arg,
        "--data-dir",
        data,
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("would change vm.swappiness: 60 → 1"),
        "{text}"
    );
    assert_eq!(read(root.path(), "proc/sys/vm/swappiness"), "60\n");

    let out = tune(&[
        "--apply",
        "--json",
        "--profile",
        "latency",
        "--sys-root",
        root_arg,
        "--data-dir",
        data,
    ]);
    let doc = json(&out);
    assert_eq!(doc["dry_run"], false);
    let changes = doc["changes"].as_array().unwrap();
    let change = |name: &str| {
        changes
            .iter()
            .find(|c| c["setting"] == name)
            .unwrap_or_else(|| panic!("no change of {name} in {changes:?}"))
    };
    assert_eq!(change("vm.swappiness")["old"], "60");
    assert_eq!(change("vm.swappiness")["new"], "1");
    assert_eq!(change("thp.enabled")["old"], "always");
    assert_eq!(change("thp.enabled")["new"], "never");
    assert_eq!(change("thp.defrag")["new"], "madvise");
    assert_eq!(change("vm.dirty_ratio")["new"], "20");
    assert_eq!(change("vm.dirty_background_ratio")["new"], "5");
    assert_eq!(change("net.core.somaxconn")["new"], "4096");
    assert_eq!(change("net.core.rmem_max")["new"], "16777216");
    assert_eq!(change("net.ipv4.tcp_wmem")["new"], "4096 16384 16777216");
    assert_eq!(change("cpu.governor")["new"], "performance");
    assert!(
        changes.iter().all(|c| c["setting"] != "net.core.wmem_max"),
        "a fine setting is left alone"
    );
    assert_eq!(doc["failures"].as_array().unwrap().len(), 0);

    assert_eq!(read(root.path(), "proc/sys/vm/swappiness"), "1\n");
    assert_eq!(
        read(root.path(), "sys/kernel/mm/transparent_hugepage/enabled"),
        "never\n"
    );
    assert_eq!(
        read(
            root.path(),
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
        ),
        "performance\n"
    );
    assert_eq!(
        read(root.path(), "proc/sys/net/core/wmem_max"),
        "16777216\n"
    );

    // What is left can only be changed by hand (limits of this process, mounts...).
    let remaining = doc["remaining"].as_array().unwrap();
    assert!(
        remaining
            .iter()
            .all(|f| f["apply"].as_array().unwrap().is_empty()),
        "{remaining:?}"
    );
    let expected = if remaining.is_empty() { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(expected));

    // A second apply finds nothing more to change.
    let out = tune(&[
        "--apply",
        "--profile",
        "latency",
        "--sys-root",
        root_arg,
        "--data-dir",
        data,
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("nothing to change at runtime"), "{text}");
}

#[test]
fn apply_refuses_without_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let mut cmd = if euid == 0 {
        // Drop to nobody for this one process, if the tool to do so is there.
        if !Path::new("/usr/bin/setpriv").exists() {
            eprintln!("skipped: running as root and no setpriv to drop privileges");
            return;
        }
        let mut c = Command::new("/usr/bin/setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_ringbroker"),
        ]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_ringbroker"))
    };
    let out = cmd
        .args(["tune", "--apply", "--data-dir", "/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs root"), "{err}");
    assert!(out.stdout.is_empty(), "nothing applied");
}

#[test]
fn bad_arguments_are_exit_status_2() {
    assert_eq!(tune(&["--profile", "fastest"]).status.code(), Some(2));
    assert_eq!(tune(&["--check", "--apply"]).status.code(), Some(2));
    assert_eq!(tune(&["--dry-run"]).status.code(), Some(2));
    let out = tune(&["--config", "/nonexistent/broker.toml"]);
    assert_eq!(out.status.code(), Some(2));
}
