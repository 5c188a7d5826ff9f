//! What the log benches share: where their data lives, exact-size batches, and the executor
//! thread each benchmark runs its log on (criterion cannot drive glommio futures itself, so
//! iterations are timed on the executor and reported back).

use std::future::Future;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::record_batch::BATCH_HEADER_LEN;
use ringbroker::runtime;

/// Where benchmark logs live: a directory on the real disk.
pub fn bench_root() -> PathBuf {
    let root = std::env::var_os("RINGBROKER_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data"));
    std::fs::create_dir_all(&root).expect("creating the benchmark data directory");
    root
}

/// A valid RecordBatch v2 of exactly `size` bytes: one record whose value fills the batch.
pub fn batch_of_exact_size(size: usize) -> Bytes {
    let ts = 1_700_000_000_000i64;
    let room = size
        .checked_sub(BATCH_HEADER_LEN)
        .expect("batch size below the header size");
    // A record adds at most ~16 bytes of framing to its value; a null, empty or one-byte key
    // shifts the size by one where a varint length changes width.
    for key in [None, Some(&b""[..]), Some(&b"k"[..])] {
        for len in (room.saturating_sub(24)..=room).rev() {
            let value: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut builder = BatchBuilder::new(ts);
            builder.push(key, Some(&value), ts, &[]);
            if builder.encoded_len() == size {
                return builder.build();
            }
        }
    }
    panic!("no single-record batch of exactly {size} bytes");
}

/// One benchmark's executor thread. `measure(iters)` runs `iters` iterations on it and returns
/// the time they took there.
pub struct Driver {
    requests: Option<mpsc::Sender<u64>>,
    replies: mpsc::Receiver<Duration>,
    thread: Option<JoinHandle<()>>,
}

impl Driver {
    /// Starts an executor thread running `body`, which serves the requests (see [`serve`]).
    pub fn start<F, Fut>(name: &str, body: F) -> Driver
    where
        F: FnOnce(mpsc::Receiver<u64>, mpsc::Sender<Duration>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let (req_tx, req_rx) = mpsc::channel();
        let (rep_tx, rep_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("bench-{name}"))
            .spawn(move || {
                runtime::block_on(body(req_rx, rep_tx)).expect("starting a glommio executor");
            })
            .expect("spawning the executor thread");
        Driver {
            requests: Some(req_tx),
            replies: rep_rx,
            thread: Some(thread),
        }
    }

    pub fn measure(&self, iters: u64) -> Duration {
        self.requests
            .as_ref()
            .expect("driver running")
            .send(iters)
            .expect("the executor thread stopped (see its panic above)");
        self.replies
            .recv()
            .expect("the executor thread stopped (see its panic above)")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Closing the request channel ends `serve`; the body then cleans up.
        self.requests.take();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() && !std::thread::panicking() {
                panic!("the executor thread panicked");
            }
        }
    }
}

/// Inside the executor: for each request, runs `run(iters)` (which measures itself), replies,
/// then runs `between` (unmeasured housekeeping). Returns when the driver is dropped.
///
/// Waiting for the next request blocks the executor thread; nothing runs on it meanwhile
/// (every append has completed, and the group commit task with it).
pub async fn serve<R, RF, B, BF>(
    requests: mpsc::Receiver<u64>,
    replies: mpsc::Sender<Duration>,
    mut run: R,
    mut between: B,
) where
    R: FnMut(u64) -> RF,
    RF: Future<Output = Duration>,
    B: FnMut() -> BF,
    BF: Future<Output = ()>,
{
    while let Ok(iters) = requests.recv() {
        let elapsed = run(iters).await;
        if replies.send(elapsed).is_err() {
            return;
        }
        between().await;
    }
}
