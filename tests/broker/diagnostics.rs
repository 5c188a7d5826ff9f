//! What a broker process that does not come up is doing: its threads' states, kernel wait
//! channels and io_uring queues from /proc, and gdb's backtraces of every thread.

use std::process::{Command, Stdio};

/// Each thread of process `pid` with its state and kernel wait channel (`D io_schedule`: stuck
/// on the disk), for a broker that does not come up.
pub fn thread_states(pid: i32) -> String {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return "unknown".into();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let path = task.path();
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        // The state follows the parenthesised command name.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("?");
        let wchan = std::fs::read_to_string(path.join("wchan")).unwrap_or_default();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        out.push(format!("{} {state} {wchan}", comm.trim()));
    }
    out.push(io_uring_states(pid));
    out.join("; ")
}

/// Every thread's stack of process `pid`, by gdb when it is installed (a rare startup hang
/// was seen once and never reproduced: the stacks are what would explain it).
pub fn backtraces(pid: i32) -> String {
    let out = Command::new("timeout")
        .args([
            "60",
            "gdb",
            "-p",
            &pid.to_string(),
            "-batch",
            "-ex",
            "thread apply all bt",
        ])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(400)..];
            format!("gdb backtraces:\n{}", tail.join("\n"))
        }
        _ => "no backtraces (gdb is not installed or could not attach)".into(),
    }
}

/// The head and tail of every io_uring of process `pid` (its fdinfo): a ring whose CqTail is
/// ahead of its CqHead holds completions its thread has not seen.
fn io_uring_states(pid: i32) -> String {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return String::new();
    };
    let mut out = Vec::new();
    for fd in fds.flatten() {
        let is_ring = std::fs::read_link(fd.path())
            .is_ok_and(|target| target.to_string_lossy().contains("io_uring"));
        if !is_ring {
            continue;
        }
        let name = fd.file_name().to_string_lossy().into_owned();
        let info =
            std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{name}")).unwrap_or_default();
        let fields: Vec<&str> = info
            .lines()
            .filter(|l| {
                ["SqHead", "SqTail", "CqHead", "CqTail", "CachedCqTail"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .collect();
        out.push(format!("io_uring fd {name}: {}", fields.join(" ")));
    }
    out.join("; ")
}
