//! Busy processes that keep the cores loaded for a test's length: lost wakeups and stuck
//! stops showed only under CPU contention.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `per_core` busy loops per core, each bounded by `limit` (`timeout`); killed on drop.
pub struct CpuLoad {
    children: Vec<Child>,
}

impl CpuLoad {
    pub fn start(per_core: usize, limit: Duration) -> CpuLoad {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let children = (0..per_core * cores)
            .map(|_| {
                // A group of its own, so that drop kills `timeout` and the loop it runs.
                Command::new("timeout")
                    .arg(limit.as_secs().max(1).to_string())
                    .args(["sh", "-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .expect("start a CPU load process")
            })
            .collect();
        CpuLoad { children }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        for child in &mut self.children {
            // SAFETY: kill(2) of the process group of a child we spawned and have not reaped.
            unsafe {
                libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
            }
            let _ = child.wait();
        }
    }
}
