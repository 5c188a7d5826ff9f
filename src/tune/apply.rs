//! `tune --apply`: performs the runtime writes the findings ask for and reports each one
//! as old → new. Only files under `/proc/sys` and `/sys` are written; nothing persistent
//! (no `/etc`), nothing that needs a remount or a reboot.

use std::path::PathBuf;

use super::finding::{Finding, Write};
use super::parse;
use super::sysroot::SysRoot;

/// One write that was made (or, for a dry run, would be made).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    pub setting: String,
    pub path: PathBuf,
    pub old: String,
    pub new: String,
}

/// One write that failed; the others were still attempted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Failure {
    pub setting: String,
    pub path: PathBuf,
    pub value: String,
    pub error: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ApplyReport {
    pub changes: Vec<Change>,
    pub failures: Vec<Failure>,
}

/// Writes every finding's `apply` list under `root`; with `dry_run`, only reads the old
/// values. A write whose file already holds the value is skipped.
pub fn apply(findings: &[Finding], root: &SysRoot, dry_run: bool) -> ApplyReport {
    let mut report = ApplyReport::default();
    for finding in findings {
        for Write { path, value } in &finding.apply {
            let kernel_path = path.to_string_lossy();
            let real = root.path(&kernel_path);
            let old = match std::fs::read_to_string(&real) {
                Ok(text) => shown(&text),
                Err(e) => {
                    report.failures.push(Failure {
                        setting: finding.name.clone(),
                        path: path.clone(),
                        value: value.clone(),
                        error: format!("cannot read: {e}"),
                    });
                    continue;
                }
            };
            if old == shown(value) {
                continue;
            }
            if !dry_run {
                if let Err(e) = std::fs::write(&real, format!("{value}\n")) {
                    report.failures.push(Failure {
                        setting: finding.name.clone(),
                        path: path.clone(),
                        value: value.clone(),
                        error: e.to_string(),
                    });
                    continue;
                }
            }
            report.changes.push(Change {
                setting: finding.name.clone(),
                path: path.clone(),
                old,
                new: value.clone(),
            });
        }
    }
    report
}

/// A kernel file's value as shown to a person: the selected `[mode]` of a sysfs mode file,
/// otherwise the words separated by single spaces (`4096\t131072\t6291456` →
/// `4096 131072 6291456`).
fn shown(text: &str) -> String {
    if text.contains('[') {
        if let Some(mode) = parse::bracketed(text) {
            return mode;
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(name: &str, path: &str, value: &str) -> Finding {
        Finding::new(name, "x", "y").ok(false).apply(path, value)
    }

    #[test]
    fn writes_and_reports_old_and_new() {
        let dir = tempfile::tempdir().unwrap();
        let root = SysRoot::new(dir.path());
        let swappiness = root.path("/proc/sys/vm/swappiness");
        let thp = root.path("/sys/kernel/mm/transparent_hugepage/enabled");
        let wmem = root.path("/proc/sys/net/ipv4/tcp_wmem");
        for p in [&swappiness, &thp, &wmem] {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        }
        std::fs::write(&swappiness, "60\n").unwrap();
        std::fs::write(&thp, "[always] madvise never\n").unwrap();
        std::fs::write(&wmem, "4096\t16384\t16777216\n").unwrap();
        let findings = vec![
            finding("vm.swappiness", "/proc/sys/vm/swappiness", "1"),
            finding(
                "thp.enabled",
                "/sys/kernel/mm/transparent_hugepage/enabled",
                "never",
            ),
            // Already at the value: skipped.
            finding(
                "net.ipv4.tcp_wmem",
                "/proc/sys/net/ipv4/tcp_wmem",
                "4096 16384 16777216",
            ),
            finding("vm.missing", "/proc/sys/vm/no_such_knob", "1"),
        ];

        let dry = apply(&findings, &root, true);
        assert_eq!(dry.changes.len(), 2);
        assert_eq!(
            std::fs::read_to_string(&swappiness).unwrap(),
            "60\n",
            "dry run writes nothing"
        );

        let report = apply(&findings, &root, false);
        assert_eq!(
            report.changes,
            vec![
                Change {
                    setting: "vm.swappiness".into(),
                    path: "/proc/sys/vm/swappiness".into(),
                    old: "60".into(),
                    new: "1".into(),
                },
                Change {
                    setting: "thp.enabled".into(),
                    path: "/sys/kernel/mm/transparent_hugepage/enabled".into(),
                    old: "always".into(),
                    new: "never".into(),
                },
            ]
        );
        assert_eq!(report.failures.len(), 1);
        assert_eq!(report.failures[0].setting, "vm.missing");
        assert_eq!(std::fs::read_to_string(&swappiness).unwrap(), "1\n");
        assert_eq!(std::fs::read_to_string(&thp).unwrap(), "never\n");
    }
}
