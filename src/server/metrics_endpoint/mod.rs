//! The metrics HTTP endpoint, served by shard 0: `GET /metrics` (Prometheus text) and
//! `GET /metrics/stages.json` (the merged latency breakdown). Each scrape asks every shard
//! for its report over the mesh. Connections are short: one request, one answer, close.

mod cluster_text;
mod http;

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};

use crate::config::BrokerConfig;
use crate::metrics::process_cpu::{self, CpuByKind};
use crate::metrics::{prometheus_text, stages_json};
use crate::runtime::{self, TcpListener, TcpStream};
use crate::shard::Shard;
use crate::util::shutdown::ShutdownSignal;
use http::Status;

/// Bound on reading a request head (a client that dribbles bytes is cut off).
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on writing an answer to a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes served at once; more are answered 503 (each one asks every shard).
const MAX_CONCURRENT: usize = 8;
/// How often the process's threads are sampled for `ringbroker_process_cpu_seconds_total`:
/// io_uring's workers come and go, and a sample per second sees almost all of a worker's time
/// before it ends (see `metrics::process_cpu`). About 10 small procfs reads a second.
const CPU_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a restarted broker waits for a port its killed predecessor still holds.
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(2);

pub const METRICS_PATH: &str = "/metrics";
pub const STAGES_JSON_PATH: &str = "/metrics/stages.json";

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("cannot serve metrics on {addr}: {source} (is another broker running with this metrics port? set ringbroker.metrics.listen to another address, or to none)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// The metrics port, bound and listening from before the shards start until the process
/// ends: nothing else on the machine can take it meanwhile (a second broker on the same port
/// is refused at its start, as on the Kafka port). Shard 0 takes it once it serves;
/// connections that come earlier wait in the backlog.
pub struct Reserved {
    listener: std::sync::Mutex<Option<std::net::TcpListener>>,
}

/// Binds the metrics address before the shards start (port 0 resolves to a real port).
/// Returns `None` when metrics are off. A taken address, the default one included, is an
/// error: two brokers answering scrapes on one port would report each other's figures.
pub fn reserve(config: &BrokerConfig) -> Result<Option<(SocketAddr, Reserved)>, EndpointError> {
    let Some(addr) = config.metrics_listen else {
        return Ok(None);
    };
    let started = std::time::Instant::now();
    loop {
        let bound = std::net::TcpListener::bind(addr).and_then(|l| l.local_addr().map(|a| (a, l)));
        match bound {
            Ok((bound, listener)) => {
                let reserved = Reserved {
                    listener: std::sync::Mutex::new(Some(listener)),
                };
                return Ok(Some((bound, reserved)));
            }
            // A killed predecessor's port is released a moment after it dies.
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && started.elapsed() < PORT_RELEASE_WAIT =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(source) => return Err(EndpointError::Bind { addr, source }),
        }
    }
}

/// Shard 0 takes the endpoint [`reserve`] bound and prints `metrics on ADDR`.
pub fn bind(shard_id: usize, reserved: Option<&Reserved>) -> Option<TcpListener> {
    if shard_id != 0 {
        return None;
    }
    let std_listener = reserved?.listener.lock().ok()?.take()?;
    let addr = std_listener.local_addr().ok()?;
    let listener = TcpListener::from_std(std_listener);
    {
        use std::io::Write;
        println!("metrics on {addr}");
        let _ = std::io::stdout().flush();
    }
    tracing::info!(%addr, "metrics endpoint listening");
    Some(listener)
}

/// Serves scrapes until shutdown.
pub fn spawn(listener: TcpListener, shard: Rc<Shard>, shutdown: Rc<ShutdownSignal>) {
    let cpu = Rc::new(RefCell::new(CpuByKind::default()));
    spawn_cpu_sampler(Rc::clone(&cpu), Rc::clone(&shutdown));
    runtime::spawn_detached(async move {
        let active = Rc::new(Cell::new(0usize));
        while let Some(stream) =
            super::accept::accept_until_shutdown(&listener, &shutdown, "metrics").await
        {
            let shard = Rc::clone(&shard);
            let active = Rc::clone(&active);
            let shutdown = Rc::clone(&shutdown);
            let cpu = Rc::clone(&cpu);
            runtime::spawn_detached(async move {
                if active.get() >= MAX_CONCURRENT {
                    let busy = http::error_response(
                        Status::ServiceUnavailable,
                        "too many scrapes at once",
                    );
                    write_and_close(stream, busy).await;
                    return;
                }
                active.set(active.get() + 1);
                // A stopping broker closes scrapes in progress: one waiting on a shard that
                // already stopped would never be answered.
                futures_lite::future::or(serve_one(&shard, &cpu, stream), shutdown.wait()).await;
                active.set(active.get() - 1);
            });
        }
    });
}

/// Samples the process's threads every [`CPU_SAMPLE_INTERVAL`] until shutdown. procfs reads
/// do not touch a disk, so they run on the reactor.
fn spawn_cpu_sampler(cpu: Rc<RefCell<CpuByKind>>, shutdown: Rc<ShutdownSignal>) {
    runtime::spawn_detached(async move {
        let sampling = async {
            loop {
                sample_cpu(&cpu);
                runtime::sleep(CPU_SAMPLE_INTERVAL).await;
            }
        };
        futures_lite::future::or(sampling, shutdown.wait()).await;
    });
}

/// The latest totals by kind; `None` if procfs could not be read (not Linux's, or hidden).
fn sample_cpu(cpu: &RefCell<CpuByKind>) -> Option<[u64; 3]> {
    match cpu.borrow_mut().sample_self() {
        Ok(ticks) => Some(ticks),
        Err(error) => {
            tracing::debug!(%error, "cannot read /proc/self/task for the CPU metrics");
            None
        }
    }
}

async fn serve_one(shard: &Rc<Shard>, cpu: &RefCell<CpuByKind>, mut stream: TcpStream) {
    let read = async { Some(read_head(&mut stream).await) };
    let timeout = async {
        runtime::sleep(READ_TIMEOUT).await;
        None
    };
    let answer = match futures_lite::future::or(read, timeout).await {
        None => http::error_response(Status::RequestTimeout, "request head not received in time"),
        Some(Ok(None)) => return, // closed before a full head: nobody to answer
        Some(Err(e)) => http::error_response(e.status(), &e.to_string()),
        Some(Ok(Some(head))) => match head.path.as_str() {
            METRICS_PATH => {
                let mut body = prometheus_text::render(&shard.collect_metrics().await);
                if let Some(ticks) = sample_cpu(cpu) {
                    body.push_str(&process_cpu::render(ticks, process_cpu::ticks_per_second()));
                }
                if shard.config.is_cluster_mode() {
                    body.push_str(&cluster_text::render_cluster(&shard.image()));
                }
                http::response(
                    Status::Ok,
                    prometheus_text::CONTENT_TYPE,
                    &body,
                    head.head_only,
                )
            }
            STAGES_JSON_PATH => {
                let body = stages_json::render(&shard.collect_metrics().await);
                http::response(Status::Ok, stages_json::CONTENT_TYPE, &body, head.head_only)
            }
            _ => http::error_response(
                Status::NotFound,
                &format!("not found; try {METRICS_PATH} or {STAGES_JSON_PATH}"),
            ),
        },
    };
    write_and_close(stream, answer).await;
}

/// Reads until the request head is complete. `Ok(None)`: the client closed first.
async fn read_head(stream: &mut TcpStream) -> Result<Option<http::RequestHead>, http::HttpError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Ok(None),
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(head) = http::parse_head(&buf)? {
            return Ok(Some(head));
        }
    }
}

async fn write_and_close(mut stream: TcpStream, bytes: Vec<u8>) {
    let write = async {
        if stream.write_all(&bytes).await.is_ok() {
            let _ = stream.flush().await;
        }
    };
    let timeout = runtime::sleep(WRITE_TIMEOUT);
    futures_lite::future::or(write, timeout).await;
    let _ = stream.close().await;
}
