//! The metrics HTTP endpoint, served by shard 0: `GET /metrics` (Prometheus text) and
//! `GET /metrics/stages.json` (the merged latency breakdown). Each scrape asks every shard
//! for its report over the mesh. Connections are short: one request, one answer, close.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use futures_lite::{AsyncReadExt, AsyncWriteExt};

use super::http::{self, Status};
use super::{prometheus_text, stages_json};
use crate::config::BrokerConfig;
use crate::runtime::{self, TcpListener, TcpStream};
use crate::shard::Shard;
use crate::util::shutdown::ShutdownSignal;

/// Bound on reading a request head (a client that dribbles bytes is cut off).
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Bound on writing an answer to a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Scrapes served at once; more are answered 503 (each one asks every shard).
const MAX_CONCURRENT: usize = 8;
/// How long a restarted broker waits for a port its killed predecessor still holds.
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(2);

pub const METRICS_PATH: &str = "/metrics";
pub const STAGES_JSON_PATH: &str = "/metrics/stages.json";

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("cannot serve metrics on {addr}: {source} (set ringbroker.metrics.listen to another address, or to none)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Checks before the shards start that the metrics address is free, and resolves port 0 to
/// a real port. Returns the address shard 0 will bind, or `None` when metrics are off or the
/// default address is taken (logged: another broker on the machine holds it). A configured
/// address that stays taken is an error, so the broker does not start.
pub fn reserve(config: &BrokerConfig) -> Result<Option<SocketAddr>, EndpointError> {
    let Some(addr) = config.metrics_listen else {
        return Ok(None);
    };
    let started = std::time::Instant::now();
    loop {
        match std::net::TcpListener::bind(addr).and_then(|probe| probe.local_addr()) {
            Ok(bound) => return Ok(Some(bound)),
            // Only a configured address is worth waiting for (a killed predecessor's port is
            // released a moment after it dies); the default one is often held by another
            // broker on the machine, and every start would pay the wait.
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && config.metrics_listen_explicit
                    && started.elapsed() < PORT_RELEASE_WAIT =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(source) if !config.metrics_listen_explicit => {
                tracing::warn!(%addr, error = %source, "metrics endpoint not started: the default metrics address is taken (set ringbroker.metrics.listen)");
                return Ok(None);
            }
            Err(source) => return Err(EndpointError::Bind { addr, source }),
        }
    }
}

/// Binds the endpoint on shard 0 (the address [`reserve`] checked) and prints
/// `metrics on ADDR`. Failing here (the port was taken since) costs the metrics, not the
/// broker: the shard logs it and serves Kafka without them.
pub fn bind(shard_id: usize, config: &BrokerConfig) -> Option<TcpListener> {
    let addr = config.metrics_listen.filter(|_| shard_id == 0)?;
    let listener = match TcpListener::bind_exclusive(addr) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(%addr, error = %e, "metrics endpoint not started");
            return None;
        }
    };
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
    runtime::spawn_detached(async move {
        let active = Rc::new(Cell::new(0usize));
        while let Some(stream) =
            crate::server::accept::accept_until_shutdown(&listener, &shutdown, "metrics").await
        {
            let shard = Rc::clone(&shard);
            let active = Rc::clone(&active);
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
                serve_one(&shard, stream).await;
                active.set(active.get() - 1);
            });
        }
    });
}

async fn serve_one(shard: &Rc<Shard>, mut stream: TcpStream) {
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
                if let Some(cluster) = shard.cluster.get() {
                    body.push_str(&prometheus_text::render_cluster(&cluster.get()));
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
