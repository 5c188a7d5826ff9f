//! Output: the aligned findings table, the `--json` document, the `--apply` report.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::apply::ApplyReport;
use super::finding::Finding;
use super::profile::Profile;

/// The `--check --json` document.
#[derive(Debug, Serialize)]
pub struct CheckJson<'a> {
    pub profile: Profile,
    pub data_dir: &'a Path,
    pub ok: bool,
    pub findings: &'a [Finding],
}

/// The `--apply --json` document.
#[derive(Debug, Serialize)]
pub struct ApplyJson<'a> {
    pub profile: Profile,
    pub dry_run: bool,
    #[serde(flatten)]
    pub report: &'a ApplyReport,
    /// Settings still off afterwards (those `--apply` cannot change at runtime).
    pub remaining: Vec<&'a Finding>,
}

/// One line per setting, columns aligned, then how to fix what is off.
pub fn table(findings: &[Finding], profile: Profile, data_dir: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ringbroker tune: profile {profile}, data directory {}\n",
        data_dir.display()
    );
    let header = ["", "SETTING", "CURRENT", "RECOMMENDED", "WHY"];
    let rows: Vec<[&str; 5]> = findings
        .iter()
        .map(|f| {
            [
                if f.ok { "ok" } else { "OFF" },
                f.name.as_str(),
                f.current.as_str(),
                f.recommended.as_str(),
                f.why.as_str(),
            ]
        })
        .collect();
    let mut widths = header.map(width);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                line.push_str(&" ".repeat(widths[i] - width(cell) + 2));
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let off: Vec<&Finding> = findings.iter().filter(|f| !f.ok).collect();
    if off.is_empty() {
        let _ = writeln!(out, "\nall {} settings fine for {profile}", findings.len());
        return out;
    }
    let _ = writeln!(out, "\n{} of {} settings off:", off.len(), findings.len());
    for f in &off {
        let persist = f
            .apply
            .iter()
            .filter_map(|w| sysctl_name(&w.path).map(|name| format!("{name} = {}", w.value)))
            .collect::<Vec<_>>();
        let runtime = if persist.is_empty() {
            "`ringbroker tune --apply` at runtime".to_string()
        } else {
            format!(
                "`ringbroker tune --apply` at runtime; persist `{}` in /etc/sysctl.d/",
                persist.join("`, `")
            )
        };
        let how = match (&f.apply.is_empty(), &f.hint) {
            (false, Some(h)) => format!("{runtime}; {h}"),
            (false, None) => runtime,
            (true, Some(h)) => h.clone(),
            (true, None) => "see tuning/README.md".to_string(),
        };
        let _ = writeln!(out, "  {}: {how}", f.name);
    }
    out
}

/// What `--apply` changed (or would change), what failed, what is still off.
pub fn apply_report(report: &ApplyReport, remaining: &[&Finding], dry_run: bool) -> String {
    let mut out = String::new();
    let verb = if dry_run { "would change" } else { "changed" };
    if report.changes.is_empty() && report.failures.is_empty() {
        let _ = writeln!(out, "nothing to change at runtime");
    }
    for c in &report.changes {
        let _ = writeln!(
            out,
            "{verb} {}: {} → {} ({})",
            c.setting,
            c.old,
            c.new,
            c.path.display()
        );
    }
    for f in &report.failures {
        let _ = writeln!(
            out,
            "FAILED {}: writing {} to {}: {}",
            f.setting,
            f.value,
            f.path.display(),
            f.error
        );
    }
    if !dry_run && !report.changes.is_empty() {
        let _ = writeln!(
            out,
            "\nThese last until reboot. To persist them, see tuning/README.md (\"Persisting\")."
        );
    }
    if !remaining.is_empty() {
        let _ = writeln!(out, "\nstill off (not changeable at runtime by tune):");
        for f in remaining {
            let hint = f.hint.as_deref().unwrap_or("see tuning/README.md");
            let _ = writeln!(
                out,
                "  {}: {} (want {}): {hint}",
                f.name, f.current, f.recommended
            );
        }
    }
    out
}

/// `/proc/sys/vm/swappiness` → `vm.swappiness`; `None` for anything outside /proc/sys.
fn sysctl_name(path: &Path) -> Option<String> {
    let rest = path.strip_prefix("/proc/sys").ok()?;
    let parts: Vec<String> = rest
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join("."))
}

fn width(s: &str) -> usize {
    s.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_aligned_one_line_per_setting() {
        let findings = vec![
            Finding::new("vm.swappiness", "60", "1")
                .ok(false)
                .why("swap")
                .apply("/proc/sys/vm/swappiness", "1"),
            Finding::new("memlock", "8 MiB", "≥ 1 MiB").why("io_uring"),
        ];
        let t = table(&findings, Profile::Throughput, Path::new("./data"));
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("profile throughput"));
        let header = lines[2];
        let row1 = lines[3];
        let row2 = lines[4];
        assert!(row1.starts_with("OFF  vm.swappiness"));
        assert!(row2.starts_with("ok   memlock"));
        // Columns line up (counted in characters: "≥" is one).
        let col = |line: &str, word: &str| line.find(word).map(|b| line[..b].chars().count());
        assert_eq!(col(header, "CURRENT"), col(row1, "60"));
        assert_eq!(col(header, "RECOMMENDED"), col(row2, "≥ 1 MiB"));
        assert!(t.contains("1 of 2 settings off"));
        assert!(t.contains(
            "vm.swappiness: `ringbroker tune --apply` at runtime; persist `vm.swappiness = 1` in /etc/sysctl.d/"
        ));
        assert_eq!(
            sysctl_name(Path::new("/proc/sys/net/ipv4/tcp_rmem")).as_deref(),
            Some("net.ipv4.tcp_rmem")
        );
        assert_eq!(
            sysctl_name(Path::new("/sys/kernel/mm/transparent_hugepage/enabled")),
            None
        );
    }
}
