//! The broker's Prometheus text, scraped over plain HTTP/1.1, and sums over its series.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use super::WAIT;

/// The broker's Prometheus text.
pub fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect_timeout(&addr, WAIT).expect("connect to metrics");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n")
        .expect("scrape");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("metrics");
    text
}

/// The sum of a metric over its series whose labels contain `labels` (e.g. `topic="t"`).
pub fn sum(text: &str, name: &str, labels: &str) -> f64 {
    let prefix = format!("{name}{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix) && l.contains(labels))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}
