//! The `ringbroker bench` command line.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::record_size::RecordSize;
use crate::client::compression::{compression_name, parse_compression, Compression};

#[derive(clap::Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Produce records as fast as possible or at --rate; latency = produce acknowledgement.
    ///
    /// Example: ringbroker bench produce --bootstrap 127.0.0.1:9092 --records 1000000 --out results/
    Produce(BenchArgs),
    /// Consume existing records (from the earliest offset); latency = fetch round trip.
    ///
    /// Example: ringbroker bench consume --topic ringbroker-bench --records 1000000
    Consume(BenchArgs),
    /// Produce and consume together; latency = end to end, from the time stamped in each value.
    ///
    /// Example: ringbroker bench e2e --rate 50000 --duration 60s --warmup 10s --out results/
    E2e(BenchArgs),
}

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct BenchArgs {
    /// Brokers to bootstrap from, host:port[,host:port...].
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Topic (created with --partitions if missing).
    #[arg(long, default_value = "ringbroker-bench")]
    pub topic: String,
    /// Partitions of a topic that has to be created.
    #[arg(long, default_value_t = 4)]
    pub partitions: i32,
    /// Value size in bytes: N, or uniform:MIN-MAX.
    #[arg(long, default_value = "1024", value_parser = parse_record_size)]
    #[serde(serialize_with = "display")]
    pub record_size: RecordSize,
    /// Records in total (over all producers; for consume, at most this many).
    #[arg(long)]
    pub records: Option<u64>,
    /// Run this long after the warm-up instead (e.g. 30s, 2m, 500ms).
    #[arg(long, value_parser = parse_duration)]
    #[serde(serialize_with = "seconds_opt")]
    pub duration: Option<Duration>,
    /// Leading time excluded from the statistics (e.g. 5s).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    #[serde(serialize_with = "seconds")]
    pub warmup: Duration,
    /// Producer instances (one thread and one connection per broker each).
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Consumer instances (partitions are split between them).
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// Records/s over all producers; 0 = as fast as possible. Above 0 the load is open-loop
    /// and latency counts from each record's scheduled time.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// 0, 1 or all (-1).
    #[arg(long, default_value = "all", value_parser = parse_acks)]
    pub acks: i16,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none", value_parser = parse_compression)]
    #[serde(serialize_with = "codec")]
    pub compression: Compression,
    /// Producer batch size in bytes per partition.
    #[arg(long, default_value_t = 16384)]
    pub batch_size: usize,
    /// Producer linger in milliseconds.
    #[arg(long, default_value_t = 5)]
    pub linger_ms: u64,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 5)]
    pub max_in_flight: usize,
    /// Idempotent producers (needs acks=all and --max-in-flight <= 5).
    #[arg(long)]
    pub idempotence: bool,
    /// Write results.json, latency.hgrm, timeseries.csv and chart.svg here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of record sizes and payloads.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No live progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// ringbroker's metrics endpoint (host:port), read before and after the run to print the
    /// broker's latency breakdown; default: the first bootstrap host, port 9644; `none` skips.
    #[arg(long)]
    pub broker_metrics: Option<String>,
}

impl BenchCommand {
    pub fn args(&self) -> &BenchArgs {
        match self {
            BenchCommand::Produce(a) | BenchCommand::Consume(a) | BenchCommand::E2e(a) => a,
        }
    }
}

impl BenchArgs {
    pub fn validate(&self, workload: &str) -> Result<(), String> {
        if self.partitions < 1 {
            return Err("--partitions must be at least 1".into());
        }
        if self.producers == 0 || self.consumers == 0 {
            return Err("--producers and --consumers must be at least 1".into());
        }
        if self.rate < 0.0 || !self.rate.is_finite() {
            return Err("--rate must be a number >= 0".into());
        }
        if workload == "e2e" && self.record_size.min() < super::payload::STAMP_LEN {
            return Err(format!(
                "e2e needs records of at least {} bytes (the timestamp)",
                super::payload::STAMP_LEN
            ));
        }
        if self.records.is_some() && self.duration.is_some() {
            return Err("give --records or --duration, not both".into());
        }
        if self.records == Some(0) {
            return Err("--records must be at least 1".into());
        }
        Ok(())
    }
}

fn parse_record_size(s: &str) -> Result<RecordSize, String> {
    s.parse()
}

fn parse_acks(s: &str) -> Result<i16, String> {
    match s {
        "all" | "-1" => Ok(-1),
        "1" => Ok(1),
        "0" => Ok(0),
        other => Err(format!("acks {other:?}: 0, 1 or all")),
    }
}

/// `30s`, `2m`, `500ms`, `1.5s` or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (30s, 2m, 500ms)"))?;
    let seconds = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => return Err(format!("{s:?}: unknown unit {other:?} (ms, s, m, h)")),
    };
    if !(0.0..=1e9).contains(&seconds) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn display<S: serde::Serializer, T: std::fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn seconds_opt<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn codec<S: serde::Serializer>(c: &Compression, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(compression_name(*c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
