//! One client connection: read frames, run each request as its own task, write responses in
//! request order (pipelining), stop reading when too many bytes are in flight (backpressure):
//! on this connection (`queued.max.request.bytes`), or, for Produce requests, on the shard
//! (`ringbroker.produce.memory.max.bytes`, [`crate::util::memory_budget`]). Both budgets are
//! waited for after a frame's size and API key are read and before its body is, so the bytes
//! of a request the broker cannot take yet stay in the socket, not in the broker. A
//! connection idle for `connections.max.idle.ms`, or whose request stops arriving halfway,
//! is closed ([`super::connection_timeouts`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::runtime::Instant;

use bytes::Bytes;
use futures_lite::{AsyncRead, AsyncWriteExt};

use super::connection_timeouts::{within, Activity, ReadError, Timeouts};
use super::handlers::{self, HandlerError};
use super::response_writer::write_frame;
use crate::metrics::registry::{self as metrics, RequestDone, Stage};
use crate::protocol::frame::{read_frame_body, read_frame_head_rest, read_frame_start, FrameError};
use crate::protocol::header::RequestFrame;
use crate::protocol::messages::ApiKey;
use crate::protocol::response_frame::ResponseFrame;
use crate::runtime::{self, Task, TcpStream};
use crate::shard::Shard;
use crate::util::local_oneshot;
use crate::util::memory_budget::{MemoryBudget, MemoryPermit};
use crate::util::shutdown::ShutdownSignal;

/// Requests accepted but not yet answered, per connection.
const MAX_PIPELINED_REQUESTS: usize = 256;

/// A Fetch response can be as large as the client asks (tens of MiB) and is held in memory
/// until written. So one Fetch per connection at a time: the next is not started before the
/// previous response is written, and a client that never reads its socket holds at most one
/// response (it used to be up to `MAX_PIPELINED_REQUESTS`, gigabytes; tests/server_limits.rs).
/// Kafka consumers keep one fetch in flight per broker anyway.
const FETCHES_IN_FLIGHT: usize = 1;

/// Bytes of requests in flight on one connection; the reader waits while it is over budget.
struct ByteBudget {
    limit: usize,
    used: RefCell<usize>,
    waiters: RefCell<Vec<local_oneshot::Sender<()>>>,
}

impl ByteBudget {
    fn new(limit: usize) -> Self {
        ByteBudget {
            limit,
            used: RefCell::new(0),
            waiters: RefCell::new(Vec::new()),
        }
    }

    /// Takes `n` bytes; a request larger than the whole budget still goes when nothing else
    /// is in flight.
    async fn acquire(&self, n: usize) {
        loop {
            let used = *self.used.borrow();
            if used == 0 || used + n <= self.limit {
                *self.used.borrow_mut() += n;
                return;
            }
            let (tx, rx) = local_oneshot::channel();
            self.waiters.borrow_mut().push(tx);
            rx.await;
        }
    }

    fn release(&self, n: usize) {
        let mut used = self.used.borrow_mut();
        *used = used.saturating_sub(n);
        drop(used);
        for w in self.waiters.borrow_mut().drain(..) {
            w.send(());
        }
    }
}

/// A request's task, its frame size, API key and version, and when its frame was read.
type Pending = (
    Task<Result<Option<ResponseFrame>, HandlerError>>,
    usize,
    i16,
    i16,
    Instant,
);

/// Bytes of the length prefix in front of every frame (counted in the byte metrics).
const LENGTH_PREFIX: usize = 4;

/// What a connection reads requests with.
struct Reading<'a> {
    limit: usize,
    timeouts: Timeouts,
    budget: &'a ByteBudget,
    produce_memory: &'a MemoryBudget,
    activity: &'a Activity,
}

/// Reads the next request frame once the connection's in-flight budget has room for it and,
/// for a Produce request, once the shard's produce memory budget has too. `Ok(None)`: the
/// client closed the connection between frames.
async fn read_request<R: AsyncRead + Unpin>(
    reader: &mut R,
    r: &Reading<'_>,
) -> Result<Option<(Bytes, Option<MemoryPermit>)>, ReadError> {
    let start = match r.timeouts.idle {
        Some(idle) => within_idle(idle, r.activity, read_frame_start(reader)).await?,
        None => read_frame_start(reader).await,
    };
    let Some(start) = start? else {
        return Ok(None);
    };
    let stalled = || ReadError::Stalled(r.timeouts.read);
    let reading_from = Instant::now();
    let head = within(
        r.timeouts.read,
        read_frame_head_rest(reader, start, r.limit),
    )
    .await
    .ok_or_else(stalled)??;
    // The bound is on the client's sending, not on the broker's budgets: the time spent
    // waiting for them below is not counted.
    let left = r.timeouts.read.saturating_sub(reading_from.elapsed());
    r.budget.acquire(head.size).await;
    let permit = if head.api_key == Some(ApiKey::Produce as i16) {
        Some(r.produce_memory.acquire(head.size).await)
    } else {
        None
    };
    let body = within(left, read_frame_body(reader, head))
        .await
        .ok_or_else(stalled)??;
    Ok(Some((body, permit)))
}

/// `wait` (for the first bytes of a request), unless the connection is idle for `idle` first.
async fn within_idle<T>(
    idle: Duration,
    activity: &Activity,
    wait: impl std::future::Future<Output = T>,
) -> Result<T, ReadError> {
    futures_lite::future::or(async { Ok(wait.await) }, async {
        activity.idle_for(idle).await;
        Err(ReadError::Idle(idle))
    })
    .await
}

/// Serves one connection until the client closes it, it misbehaves, or shutdown.
pub async fn serve(
    shard: Rc<Shard>,
    stream: TcpStream,
    peer: String,
    shutdown: Rc<ShutdownSignal>,
) {
    metrics::connection_accepted();
    let (mut reader, mut writer) = runtime::stream_halves::split(stream);
    // Shared with every request task (group members record it as their client host).
    let request_peer: Rc<str> = Rc::from(peer.as_str());
    let budget = Rc::new(ByteBudget::new(shard.config.connection_max_inflight_bytes));
    let activity = Rc::new(Activity::new(Instant::now()));
    // Set when the writer stops (the client went away, a request failed): the reader must
    // not wait for a next request no one will answer.
    let writer_stopped = Rc::new(ShutdownSignal::new());
    let fetch_turn = Rc::new(ByteBudget::new(FETCHES_IN_FLIGHT));
    let (tx, rx) = runtime::local_channel::<Pending>(MAX_PIPELINED_REQUESTS);

    let writer_budget = Rc::clone(&budget);
    let writer_fetch_turn = Rc::clone(&fetch_turn);
    let writer_peer = peer.clone();
    let writer_activity = Rc::clone(&activity);
    let writer_done = Rc::clone(&writer_stopped);
    let writer_task = runtime::spawn(async move {
        while let Some((task, size, api_key, version, read_at)) = rx.recv().await {
            let outcome = task.await;
            writer_budget.release(size);
            let mut done = RequestDone {
                api_key,
                bytes_in: size + LENGTH_PREFIX,
                bytes_out: 0,
                elapsed: Duration::ZERO,
                failed: false,
            };
            match outcome {
                Ok(Some(frame)) => {
                    let write_started = Instant::now();
                    let written = write_frame(&mut writer, &frame).await;
                    // One clock read for both: each costs tens of ns on some VMs.
                    let write_done = Instant::now();
                    metrics::record_stage(Stage::Write, write_done - write_started);
                    writer_activity.finished(write_done);
                    done.bytes_out = frame.len();
                    done.failed = written.is_err();
                    done.elapsed = write_done - read_at;
                    metrics::record_request(done);
                    if let Err(e) = written {
                        tracing::debug!(peer = %writer_peer, error = %e, "client went away");
                        break;
                    }
                }
                Ok(None) => {
                    done.elapsed = read_at.elapsed();
                    writer_activity.finished(read_at + done.elapsed);
                    metrics::record_request(done);
                }
                Err(e) => {
                    done.failed = true;
                    done.elapsed = read_at.elapsed();
                    metrics::record_request(done);
                    tracing::warn!(peer = %writer_peer, api_key, version, error = %e, "closing connection");
                    break;
                }
            }
            if api_key == ApiKey::Fetch as i16 {
                writer_fetch_turn.release(1);
            }
        }
        // A reader waiting for its fetch turn or a request must see the end rather than wait
        // forever.
        writer_fetch_turn.release(usize::MAX);
        writer_done.trigger();
        let _ = writer.flush().await;
        let _ = writer.close().await;
    });

    let reading = Reading {
        limit: shard.config.socket_request_max_bytes,
        timeouts: Timeouts::from_config(&shard.config),
        budget: &budget,
        produce_memory: &shard.produce_memory,
        activity: &activity,
    };
    loop {
        let next = futures_lite::future::or(
            async { Some(read_request(&mut reader, &reading).await) },
            async {
                futures_lite::future::or(shutdown.wait(), writer_stopped.wait()).await;
                None
            },
        )
        .await;
        let (frame, produce_permit) = match next {
            None => break,
            Some(Ok(Some(read))) => read,
            Some(Ok(None)) => break,
            Some(Err(ReadError::Frame(FrameError::Truncated))) => {
                tracing::debug!(peer = %peer, "client disconnected mid-request");
                break;
            }
            Some(Err(e @ ReadError::Idle(_))) => {
                tracing::debug!(peer = %peer, reason = %e, "closing idle connection");
                break;
            }
            Some(Err(e @ ReadError::Stalled(_))) => {
                tracing::info!(peer = %peer, reason = %e, "closing connection: request stalled");
                break;
            }
            Some(Err(e)) => {
                tracing::warn!(peer = %peer, error = %e, "closing connection");
                break;
            }
        };
        let read_at = Instant::now();
        activity.started(read_at);
        let size = frame.len();
        let request = match RequestFrame::parse(frame) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(peer = %peer, error = %e, "malformed request header; closing connection");
                break;
            }
        };
        let (api_key, version) = (request.api_key, request.api_version);
        if api_key == ApiKey::Fetch as i16 {
            fetch_turn.acquire(1).await;
        }
        let task_shard = Rc::clone(&shard);
        let task_peer = Rc::clone(&request_peer);
        let (decoded_tx, decoded_rx) = local_oneshot::channel();
        let task = runtime::spawn(async move {
            // Held until the handler is done with the request's bytes (appends answered).
            let _produce_memory = produce_permit;
            let started = Instant::now();
            metrics::record_stage(Stage::Queue, started.saturating_duration_since(read_at));
            let response = handlers::dispatch(&task_shard, &request, &task_peer, decoded_tx).await;
            metrics::record_handle(api_key, started.elapsed());
            response
        });
        if tx
            .send((task, size, api_key, version, read_at))
            .await
            .is_err()
        {
            break;
        }
        // Decoding is synchronous at the start of each handler, so this waits only for the
        // task's first step; execution stays pipelined. A request the broker cannot take ends
        // the connection, and nothing after it may run.
        if decoded_rx.await == Some(false) {
            break;
        }
    }
    drop(tx);
    writer_task.await;
    metrics::connection_closed();
}
