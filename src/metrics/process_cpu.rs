//! The broker process's CPU time split by thread kind: shard threads, io_uring's worker
//! threads (`iou-wrk-*`, which run the operations io_uring could not complete inline) and the
//! rest (the main thread, glommio's blocking pool, ...). Read from `/proc/self/task/*/stat`
//! (each thread's utime + stime) and `/proc/self/stat` (the whole process, exited threads
//! included).
//!
//! Why it is tracked and not just read on each scrape: io_uring creates and ends its workers
//! as it needs them, and a thread that ended is gone from `/proc/self/task`. The tracker keeps
//! each thread's last seen time and, when the thread is gone, adds it to its kind's total, so
//! the counters never go back. Sampled often enough (the endpoint samples every second), this
//! loses almost nothing: an io-wq worker ends only after 5 s idle, so its last sample already
//! holds its work. Whatever is still unaccounted (a thread that lived and ended between two
//! samples) is in `other`, so the three kinds add up to the process's CPU time.

use crate::util::hash::HashMap;
use std::io;
use std::path::Path;

use super::text::Text;

/// What a thread is, from its name (`comm`, at most 15 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadKind {
    /// `ringbroker-shard-N` (truncated by the kernel to `ringbroker-shar`): the reactors.
    Shard,
    /// `iou-wrk-*` (io-wq workers) and `iou-sqp-*` (submission-queue pollers): io_uring's
    /// kernel threads attached to the process.
    IoWorker,
    Other,
}

/// Prefix of the shard threads' name (glommio names them `<pool name>-<id>`; the kernel keeps
/// 15 bytes of it).
const SHARD_PREFIX: &str = "ringbroker-shar";

impl ThreadKind {
    pub const ALL: [ThreadKind; 3] = [ThreadKind::Shard, ThreadKind::IoWorker, ThreadKind::Other];

    pub fn of_comm(comm: &str) -> ThreadKind {
        if comm.starts_with(SHARD_PREFIX) {
            ThreadKind::Shard
        } else if comm.starts_with("iou-wrk-") || comm.starts_with("iou-sqp-") {
            ThreadKind::IoWorker
        } else {
            ThreadKind::Other
        }
    }

    /// The `thread` label's value.
    pub fn label(self) -> &'static str {
        match self {
            ThreadKind::Shard => "shard",
            ThreadKind::IoWorker => "io_worker",
            ThreadKind::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The name and the CPU time (utime + stime, clock ticks) of one `stat` file of procfs.
/// `None` for a text that is not one (a thread that ended while being read).
pub fn parse_stat(text: &str) -> Option<(&str, u64)> {
    // The name is in parentheses and may itself contain spaces and parentheses: it ends at
    // the last ')'.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?;
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // `rest[0]` is field 3 (state); utime and stime are fields 14 and 15.
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

/// One live thread as sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskCpu {
    pub tid: u32,
    pub kind: ThreadKind,
    pub ticks: u64,
}

/// Reads every thread of `task_dir` (`/proc/self/task`). Threads that end while being read
/// are skipped.
pub fn read_tasks(task_dir: &Path) -> io::Result<Vec<TaskCpu>> {
    let mut tasks = Vec::new();
    for entry in std::fs::read_dir(task_dir)? {
        let entry = entry?;
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((comm, ticks)) = parse_stat(&text) {
            tasks.push(TaskCpu {
                tid,
                kind: ThreadKind::of_comm(comm),
                ticks,
            });
        }
    }
    Ok(tasks)
}

/// The whole process's CPU time (ticks) from its `stat` file (`/proc/self/stat`).
pub fn read_process_ticks(stat: &Path) -> io::Result<u64> {
    let text = std::fs::read_to_string(stat)?;
    parse_stat(&text)
        .map(|(_, ticks)| ticks)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unparsable stat file"))
}

/// CPU ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf reads a constant of the C library; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// The totals by kind, kept across samples (see the module's comment).
#[derive(Debug, Default)]
pub struct CpuByKind {
    live: HashMap<u32, (ThreadKind, u64)>,
    departed: [u64; 3],
    /// The last `other` reported: it is a difference of two readings, kept from going back.
    other: u64,
}

impl CpuByKind {
    /// Takes a sample (the live threads, then the process total read after them) and returns
    /// the ticks by kind, indexed like [`ThreadKind::ALL`].
    pub fn update(&mut self, tasks: &[TaskCpu], process_ticks: u64) -> [u64; 3] {
        let mut live = HashMap::with_capacity_and_hasher(tasks.len(), Default::default());
        for t in tasks {
            // A thread's time only grows; a reused tid with less is a new thread.
            live.insert(t.tid, (t.kind, t.ticks));
        }
        for (tid, (kind, ticks)) in &self.live {
            match live.get(tid) {
                Some((k, now)) if k == kind && now >= ticks => {}
                _ => self.departed[kind.index()] += ticks,
            }
        }
        self.live = live;
        let mut by_kind = self.departed;
        for (kind, ticks) in self.live.values() {
            by_kind[kind.index()] += ticks;
        }
        let named = by_kind[ThreadKind::Shard.index()] + by_kind[ThreadKind::IoWorker.index()];
        self.other = self
            .other
            .max(process_ticks.saturating_sub(named))
            .max(by_kind[ThreadKind::Other.index()]);
        by_kind[ThreadKind::Other.index()] = self.other;
        by_kind
    }

    /// Samples this process.
    pub fn sample_self(&mut self) -> io::Result<[u64; 3]> {
        let tasks = read_tasks(Path::new("/proc/self/task"))?;
        let total = read_process_ticks(Path::new("/proc/self/stat"))?;
        Ok(self.update(&tasks, total))
    }
}

pub const CPU_SECONDS_TOTAL: &str = "ringbroker_process_cpu_seconds_total";

/// Renders the family `ringbroker_process_cpu_seconds_total{thread=...}`.
pub fn render(ticks: [u64; 3], ticks_per_second: f64) -> String {
    let mut text = Text::default();
    text.family(
        CPU_SECONDS_TOTAL,
        "counter",
        "CPU time (user + system) of the broker process by thread kind: shard threads, io_uring workers (iou-wrk), other.",
    );
    for kind in ThreadKind::ALL {
        text.sample(
            CPU_SECONDS_TOTAL,
            &[("thread", kind.label())],
            ticks[kind.index()] as f64 / ticks_per_second,
        );
    }
    text.into_text()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(tid: u32, comm: &str, utime: u64, stime: u64) -> String {
        format!(
            "{tid} ({comm}) S 1 {tid} {tid} 0 -1 4194560 100 0 0 0 {utime} {stime} 0 0 20 0 9 0 \
             1234 1000000 500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
        )
    }

    #[test]
    fn classifies_thread_names() {
        assert_eq!(ThreadKind::of_comm("ringbroker-shar"), ThreadKind::Shard);
        assert_eq!(ThreadKind::of_comm("iou-wrk-4711"), ThreadKind::IoWorker);
        assert_eq!(ThreadKind::of_comm("iou-sqp-4711"), ThreadKind::IoWorker);
        assert_eq!(ThreadKind::of_comm("ringbroker"), ThreadKind::Other);
        assert_eq!(ThreadKind::of_comm("blocking-pool"), ThreadKind::Other);
    }

    #[test]
    fn parses_stat_lines_with_odd_names() {
        let line = stat(7, "ringbroker-shar", 120, 30);
        assert_eq!(parse_stat(&line), Some(("ringbroker-shar", 150)));
        let odd = stat(8, "a) (b", 1, 2);
        assert_eq!(parse_stat(&odd), Some(("a) (b", 3)));
        assert_eq!(parse_stat("8 (cut"), None);
        assert_eq!(parse_stat("8 (x) S 1 2"), None);
    }

    fn task(tid: u32, comm: &str, ticks: u64) -> TaskCpu {
        TaskCpu {
            tid,
            kind: ThreadKind::of_comm(comm),
            ticks,
        }
    }

    #[test]
    fn keeps_ended_threads_and_puts_the_rest_in_other() {
        let mut cpu = CpuByKind::default();
        let first = [
            task(1, "ringbroker", 5),
            task(2, "ringbroker-shar", 100),
            task(3, "iou-wrk-2", 40),
        ];
        assert_eq!(cpu.update(&first, 150), [100, 40, 10]);
        // The worker ended (its 40 stay with io_worker); a new one came and went unseen
        // between samples: its 7 ticks are only in the process total, so in `other`.
        let second = [task(1, "ringbroker", 5), task(2, "ringbroker-shar", 130)];
        assert_eq!(cpu.update(&second, 187), [130, 40, 17]);
        // A tid reused by a thread of another kind starts from its own time.
        let third = [
            task(1, "ringbroker", 5),
            task(2, "ringbroker-shar", 130),
            task(3, "iou-wrk-2", 2),
        ];
        assert_eq!(cpu.update(&third, 189), [130, 42, 17]);
        // `other` never goes back, even when the total is read a tick short.
        assert_eq!(cpu.update(&third, 180), [130, 42, 17]);
    }

    #[test]
    fn renders_one_sample_per_kind() {
        let text = render([250, 100, 5], 100.0);
        assert!(text.contains("# TYPE ringbroker_process_cpu_seconds_total counter"));
        assert!(text.contains("ringbroker_process_cpu_seconds_total{thread=\"shard\"} 2.5\n"));
        assert!(text.contains("ringbroker_process_cpu_seconds_total{thread=\"io_worker\"} 1\n"));
        assert!(text.contains("ringbroker_process_cpu_seconds_total{thread=\"other\"} 0.05\n"));
    }
}
