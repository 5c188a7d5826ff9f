//! The broker's own latency breakdown, next to the client's figures: `ringbroker bench` reads
//! `/metrics/stages.json` from a ringbroker broker before and after the run. The broker's
//! histograms are cumulative since it started, so counts and means are taken over the run
//! (differences of counts and sums) and percentiles are labelled as cumulative.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{json, Value};

/// Bound on connecting to, and reading from, the metrics endpoint.
const TIMEOUT: Duration = Duration::from_secs(2);
/// Largest response accepted.
const MAX_RESPONSE: usize = 4 << 20;
/// ringbroker's default metrics port (`ringbroker.metrics.listen`).
pub const DEFAULT_METRICS_PORT: u16 = 9644;

/// Stages in the order a produce (then a fetch) request meets them (the broker's names).
const STAGES: [&str; 10] = [
    "queue",
    "decode",
    "hop",
    "append",
    "fsync",
    "acks",
    "read",
    "fetch_wait",
    "encode",
    "write",
];

#[derive(Debug, thiserror::Error)]
pub enum BreakdownError {
    #[error("cannot resolve the metrics address {0}")]
    Address(String),
    #[error("metrics endpoint {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("metrics endpoint {addr} answered {status}")]
    Status { addr: String, status: String },
    #[error("metrics endpoint {addr}: not the stages JSON ({reason})")]
    Body { addr: String, reason: String },
}

/// Where to look: `--broker-metrics` if given ("none" disables), else the first bootstrap
/// host on ringbroker's default metrics port.
pub fn metrics_address(flag: Option<&str>, bootstrap: &str) -> Option<String> {
    match flag {
        Some("none") | Some("") => None,
        Some(addr) => Some(addr.to_string()),
        None => {
            let first = bootstrap.split(',').next()?.trim();
            let host = first.rsplit_once(':').map_or(first, |(h, _)| h);
            Some(format!("{host}:{DEFAULT_METRICS_PORT}"))
        }
    }
}

/// GET /metrics/stages.json (HTTP/1.0, one request per connection).
pub fn fetch(addr: &str) -> Result<Value, BreakdownError> {
    let io = |source| BreakdownError::Io {
        addr: addr.to_string(),
        source,
    };
    let target: SocketAddr = addr
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| BreakdownError::Address(addr.to_string()))?;
    let mut s = TcpStream::connect_timeout(&target, TIMEOUT).map_err(io)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    s.write_all(b"GET /metrics/stages.json HTTP/1.0\r\nHost: ringbroker\r\n\r\n")
        .map_err(io)?;
    let mut raw = Vec::new();
    s.take(MAX_RESPONSE as u64)
        .read_to_end(&mut raw)
        .map_err(io)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or("").to_string();
    if !status.contains(" 200") {
        return Err(BreakdownError::Status {
            addr: addr.to_string(),
            status,
        });
    }
    let value: Value = serde_json::from_str(body).map_err(|e| BreakdownError::Body {
        addr: addr.to_string(),
        reason: e.to_string(),
    })?;
    if value.get("stages").is_none() {
        return Err(BreakdownError::Body {
            addr: addr.to_string(),
            reason: "no `stages`".to_string(),
        });
    }
    Ok(value)
}

/// One stage or API over the run: requests seen during it and their mean, plus the
/// broker's cumulative percentiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

fn field(v: &Value, name: &str) -> u64 {
    v.get(name).and_then(Value::as_u64).unwrap_or(0)
}

fn row(name: &str, before: Option<&Value>, after: &Value) -> Row {
    let count = field(after, "count").saturating_sub(before.map_or(0, |b| field(b, "count")));
    let sum = field(after, "sum_us").saturating_sub(before.map_or(0, |b| field(b, "sum_us")));
    Row {
        name: name.to_string(),
        count,
        mean_us: if count == 0 {
            0.0
        } else {
            sum as f64 / count as f64
        },
        p50_us: field(after, "p50_us"),
        p99_us: field(after, "p99_us"),
        max_us: field(after, "max_us"),
    }
}

/// Stage rows then whole-request rows per API, over the run.
pub fn rows(before: Option<&Value>, after: &Value) -> (Vec<Row>, Vec<Row>) {
    let stage = |v: &Value, s: &str| v.get("stages").and_then(|st| st.get(s)).cloned();
    let stages = STAGES
        .iter()
        .filter_map(|s| {
            let a = stage(after, s)?;
            let b = before.and_then(|b| stage(b, s));
            Some(row(s, b.as_ref(), &a))
        })
        .collect();
    let mut apis = Vec::new();
    if let Some(map) = after.get("apis").and_then(Value::as_object) {
        for (name, a) in map {
            let b = before.and_then(|b| b.get("apis")).and_then(|m| m.get(name));
            let r = row(name, b, a);
            if r.count > 0 {
                apis.push(r);
            }
        }
    }
    (stages, apis)
}

/// The table printed after the client's summary.
pub fn table(before: Option<&Value>, after: &Value) -> String {
    let (stages, apis) = rows(before, after);
    let mut t = String::from(
        "\nbroker latency breakdown (count and mean: this run; percentiles: since the broker started)\n",
    );
    t.push_str(&format!(
        "  {:<16} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "stage", "count", "mean ms", "p50 ms", "p99 ms", "max ms"
    ));
    let ms = |us: f64| us / 1000.0;
    for r in stages.iter().chain(apis.iter()) {
        t.push_str(&format!(
            "  {:<16} {:>10} {:>10.3} {:>10.3} {:>10.3} {:>10.3}\n",
            r.name,
            r.count,
            ms(r.mean_us),
            ms(r.p50_us as f64),
            ms(r.p99_us as f64),
            ms(r.max_us as f64)
        ));
    }
    t
}

/// The same as JSON, for `--out` (broker_breakdown.json).
pub fn to_json(before: Option<&Value>, after: &Value) -> Value {
    let (stages, apis) = rows(before, after);
    let rows_json = |rs: &[Row]| -> Value {
        rs.iter()
            .map(|r| {
                (
                    r.name.clone(),
                    json!({"count": r.count, "mean_us": r.mean_us, "cumulative_p50_us": r.p50_us,
                           "cumulative_p99_us": r.p99_us, "cumulative_max_us": r.max_us}),
                )
            })
            .collect::<serde_json::Map<String, Value>>()
            .into()
    };
    json!({"stages": rows_json(&stages), "apis": rows_json(&apis), "raw_after": after})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(count: u64, sum: u64) -> Value {
        json!({"shards": 2, "stages": {
            "append": {"count": count, "sum_us": sum, "p50_us": 100, "p99_us": 900, "max_us": 1000},
        }, "apis": {"Produce": {"count": count, "sum_us": sum * 2, "p50_us": 1, "p99_us": 2, "max_us": 3}}})
    }

    #[test]
    fn counts_and_means_are_over_the_run() {
        let before = snapshot(10, 1_000);
        let after = snapshot(30, 5_000);
        let (stages, apis) = rows(Some(&before), &after);
        assert_eq!(stages.len(), 1);
        assert_eq!(stages[0].count, 20);
        assert!((stages[0].mean_us - 200.0).abs() < 1e-9);
        assert_eq!(stages[0].p99_us, 900);
        assert_eq!(apis[0].name, "Produce");
        assert!((apis[0].mean_us - 400.0).abs() < 1e-9);
        assert!(table(Some(&before), &after).contains("append"));
    }

    #[test]
    fn address_defaults_to_the_bootstrap_host() {
        assert_eq!(
            metrics_address(None, "10.0.0.1:9092,10.0.0.2:9092").as_deref(),
            Some("10.0.0.1:9644")
        );
        assert_eq!(metrics_address(Some("none"), "h:1"), None);
        assert_eq!(
            metrics_address(Some("127.0.0.1:1"), "h:1").as_deref(),
            Some("127.0.0.1:1")
        );
    }
}
