//! Live counters shared by the bench threads, and the once-a-second progress line on stderr.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct Live {
    pub produced: AtomicU64,
    pub produced_bytes: AtomicU64,
    pub consumed: AtomicU64,
    pub consumed_bytes: AtomicU64,
    pub errors: AtomicU64,
}

impl Live {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> [u64; 5] {
        [
            self.produced.load(Ordering::Relaxed),
            self.produced_bytes.load(Ordering::Relaxed),
            self.consumed.load(Ordering::Relaxed),
            self.consumed_bytes.load(Ordering::Relaxed),
            self.errors.load(Ordering::Relaxed),
        ]
    }
}

/// Prints records/s and MB/s of the last second until dropped.
pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    pub fn start(live: Arc<Live>, start: Instant, warmup: Duration, enabled: bool) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = enabled.then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || progress_loop(&live, start, warmup, &stop))
        });
        Progress { stop, thread }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn progress_loop(live: &Live, start: Instant, warmup: Duration, stop: &AtomicBool) {
    let tty = std::io::stderr().is_terminal();
    let mut last = live.snapshot();
    let mut tick = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if tick.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let secs = tick.elapsed().as_secs_f64();
        tick = Instant::now();
        let now = live.snapshot();
        let rate = |i: usize| (now[i] - last[i]) as f64 / secs;
        let elapsed = start.elapsed();
        let phase = if elapsed < warmup { " warm-up" } else { "" };
        let mut line = format!("[{:>5.0}s{phase}]", elapsed.as_secs_f64());
        if now[0] > 0 {
            line += &format!(
                " produced {:>10.0} rec/s {:>8.1} MB/s",
                rate(0),
                rate(1) / 1e6
            );
        }
        if now[2] > 0 {
            line += &format!(
                " | consumed {:>10.0} rec/s {:>8.1} MB/s",
                rate(2),
                rate(3) / 1e6
            );
        }
        line += &format!(" | errors {}", now[4]);
        let mut err = std::io::stderr().lock();
        let _ = if tty {
            write!(err, "\r{line}   ")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
        last = now;
    }
    if tty {
        let _ = writeln!(std::io::stderr());
    }
}
