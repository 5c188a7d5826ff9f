//! Parsers of the kernel's text formats (no I/O): CPU lists, `[selected]` sysfs modes,
//! sysctl triples, `/proc/self/mountinfo`, `/proc/net/softnet_stat`, release strings.

use std::path::{Path, PathBuf};

use super::snapshot::Mount;

/// A CPU list as in `/sys/devices/system/cpu/online` or `isolated`: `0-3,8,10-11`; an
/// empty string is no CPU. `None` when malformed.
pub fn cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if a > b || b - a > 1 << 16 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// The selected word of a sysfs mode file: `always [madvise] never` → `madvise`; a file
/// holding a single word is that word.
pub fn bracketed(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    if let (Some(only), None) = (words.next(), words.next()) {
        if !only.contains('[') {
            return Some(only.to_string());
        }
    }
    let start = text.find('[')?;
    let end = start + text[start..].find(']')?;
    Some(text[start + 1..end].to_string())
}

/// A sysctl of three integers (`net.ipv4.tcp_rmem`: min default max).
pub fn triple(text: &str) -> Option<[u64; 3]> {
    let mut it = text.split_whitespace().map(|w| w.parse::<u64>());
    let t = [it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?];
    match it.next() {
        None => Some(t),
        Some(_) => None,
    }
}

/// Every mount of `/proc/self/mountinfo` (malformed lines are skipped).
pub fn mountinfo(text: &str) -> Vec<Mount> {
    text.lines().filter_map(mountinfo_line).collect()
}

fn mountinfo_line(line: &str) -> Option<Mount> {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    let (before, after) = line.split_once(" - ")?;
    let fields: Vec<&str> = before.split(' ').collect();
    let mount_point = unescape_octal(fields.get(4)?);
    let options = fields.get(5)?.split(',').map(str::to_string).collect();
    let mut after = after.split(' ');
    let fs_type = after.next()?.to_string();
    let source = after.next().unwrap_or("").to_string();
    Some(Mount {
        mount_point: PathBuf::from(mount_point),
        fs_type,
        source,
        options,
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let digits = std::str::from_utf8(&bytes[i + 1..i + 4]).ok();
            if let Some(v) = digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount holding `path` (an absolute, canonical path): the longest mount point that
/// is a prefix of it; of equal ones, the last listed (it is mounted over the others).
pub fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let mut best: Option<&Mount> = None;
    for m in mounts {
        if path.starts_with(&m.mount_point) {
            let better = match best {
                None => true,
                Some(b) => m.mount_point.components().count() >= b.mount_point.components().count(),
            };
            if better {
                best = Some(m);
            }
        }
    }
    best
}

/// Packets dropped because a CPU's input backlog (`net.core.netdev_max_backlog`) was full:
/// the second (hex) column of `/proc/net/softnet_stat`, summed over CPUs.
pub fn softnet_dropped(text: &str) -> Option<u64> {
    let mut total = 0u64;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let col = line.split_whitespace().nth(1)?;
        total = total.saturating_add(u64::from_str_radix(col, 16).ok()?);
    }
    Some(total)
}

/// Whether the `CapEff:` line of `/proc/<pid>/status` has CAP_IPC_LOCK (bit 14).
pub fn has_cap_ipc_lock(status: &str) -> Option<bool> {
    const CAP_IPC_LOCK: u32 = 14;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    let mask = u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()?;
    Some(mask & (1 << CAP_IPC_LOCK) != 0)
}

/// A `/proc/meminfo` field in bytes (`SwapTotal:  1024 kB` → 1048576).
pub fn meminfo_bytes(meminfo: &str, field: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find(|l| l.split(':').next() == Some(field))?;
    let mut words = line.split(':').nth(1)?.split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => Some(n.saturating_mul(1024)),
        None => Some(n),
        Some(_) => None,
    }
}

/// `6.18.0-1-amd64` → (6, 18).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.trim().split(['.', '-', '+']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_list("\n"), Some(vec![]));
        assert_eq!(cpu_list("0"), Some(vec![0]));
        assert_eq!(cpu_list("3-1"), None);
        assert_eq!(cpu_list("x"), None);
    }

    #[test]
    fn bracketed_modes() {
        assert_eq!(
            bracketed("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            bracketed("always defer [defer+madvise] madvise never").as_deref(),
            Some("defer+madvise")
        );
        assert_eq!(bracketed("always madvise never"), None);
        assert_eq!(bracketed("never\n").as_deref(), Some("never"));
        assert_eq!(bracketed("[never]").as_deref(), Some("never"));
    }

    #[test]
    fn triples() {
        assert_eq!(
            triple("4096\t131072\t6291456\n"),
            Some([4096, 131072, 6291456])
        );
        assert_eq!(triple("4096 131072"), None);
        assert_eq!(triple("1 2 3 4"), None);
    }

    #[test]
    fn mountinfo_and_longest_prefix() {
        let text = "\
22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
40 22 0:35 / /var/lib/ring\\040data rw,noatime shared:2 - xfs /dev/nvme0n1 rw,attr2
41 22 0:36 / /var rw,relatime - tmpfs tmpfs rw
";
        let mounts = mountinfo(text);
        assert_eq!(mounts.len(), 3);
        assert_eq!(mounts[1].mount_point, PathBuf::from("/var/lib/ring data"));
        assert_eq!(mounts[1].fs_type, "xfs");
        assert!(mounts[1].options.iter().any(|o| o == "noatime"));
        let m = mount_of(&mounts, Path::new("/var/lib/ring data/orders-0")).unwrap();
        assert_eq!(m.fs_type, "xfs");
        assert_eq!(
            mount_of(&mounts, Path::new("/var/log")).unwrap().fs_type,
            "tmpfs"
        );
        // `/var/lib/ring` is not inside `/var/lib/ring data`: components, not string prefixes.
        assert_eq!(
            mount_of(&mounts, Path::new("/var/lib/ring"))
                .unwrap()
                .fs_type,
            "tmpfs"
        );
        assert_eq!(
            mount_of(&mounts, Path::new("/home")).unwrap().fs_type,
            "ext4"
        );
    }

    #[test]
    fn softnet_drops() {
        let text = "0000a1b2 00000000 00000001\n0000a1b2 00000010 00000000\n";
        assert_eq!(softnet_dropped(text), Some(16));
        assert_eq!(softnet_dropped("zz zz\n"), None);
    }

    #[test]
    fn capabilities() {
        let root = "Name:\tx\nCapEff:\t000001ffffffffff\n";
        assert_eq!(has_cap_ipc_lock(root), Some(true));
        assert_eq!(has_cap_ipc_lock("CapEff:\t0000000000000000\n"), Some(false));
        assert_eq!(has_cap_ipc_lock("CapEff:\t0000000000004000\n"), Some(true));
        assert_eq!(has_cap_ipc_lock("Name: x\n"), None);
    }

    #[test]
    fn meminfo_fields() {
        let text =
            "MemTotal:        8000000 kB\nSwapTotal:             0 kB\nHugePages_Total:       0\n";
        assert_eq!(meminfo_bytes(text, "SwapTotal"), Some(0));
        assert_eq!(meminfo_bytes(text, "MemTotal"), Some(8_192_000_000));
        assert_eq!(meminfo_bytes(text, "HugePages_Total"), Some(0));
        assert_eq!(meminfo_bytes(text, "Swap"), None);
    }

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("6.18.0-1-amd64\n"), Some((6, 18)));
        assert_eq!(kernel_version("5.8"), Some((5, 8)));
        assert_eq!(kernel_version("garbage"), None);
    }
}
