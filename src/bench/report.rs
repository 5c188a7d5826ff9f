//! What a run reports: the summary table (stdout), results.json, timeseries.csv.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::json;

use super::run::{Outcome, Workload};
use super::stats::{LatencySummary, Recorder};

/// How latency was measured, in words (for the table and results.json).
pub fn latency_mode(o: &Outcome) -> &'static str {
    match (o.workload, o.open_loop) {
        (Workload::Consume, _) => "fetch round trip (request sent to response received)",
        (_, true) => {
            "open-loop at --rate: latency counts from when each record was due per the schedule \
             (corrected for coordinated omission)"
        }
        (_, false) => {
            "max throughput (--rate 0): latency counts from when each record was handed to the \
             producer (not corrected for coordinated omission)"
        }
    }
}

/// The metric shown as "the" latency of the workload, and its recorder.
pub fn primary_latency(o: &Outcome) -> (&'static str, Option<&Recorder>) {
    match o.workload {
        Workload::Produce => ("produce_ack", o.produced.as_ref()),
        Workload::Consume => ("fetch_round_trip", o.fetches.as_ref()),
        Workload::EndToEnd => ("end_to_end", o.consumed.as_ref()),
    }
}

/// The recorder whose record counts are "the" throughput of the workload.
pub fn primary_throughput(o: &Outcome) -> Option<&Recorder> {
    match o.workload {
        Workload::Produce => o.produced.as_ref(),
        Workload::Consume | Workload::EndToEnd => o.consumed.as_ref(),
    }
}

fn all_recorders(o: &Outcome) -> impl Iterator<Item = &Recorder> {
    [&o.produced, &o.consumed, &o.fetches]
        .into_iter()
        .filter_map(Option::as_ref)
}

/// Errors by name over every producer and consumer.
pub fn errors(o: &Outcome) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for r in all_recorders(o) {
        for (name, n) in &r.errors {
            *out.entry(name.clone()).or_insert(0) += n;
        }
    }
    out
}

/// Records/s and MB/s (10^6 bytes) over the measured window.
pub fn throughput(r: &Recorder) -> (f64, f64) {
    let secs = r.measured_seconds();
    if secs <= 0.0 {
        return (0.0, 0.0);
    }
    (
        r.measured_records as f64 / secs,
        r.measured_bytes as f64 / secs / 1e6,
    )
}

pub fn latencies(o: &Outcome) -> BTreeMap<&'static str, LatencySummary> {
    let mut out = BTreeMap::new();
    if let Some(p) = &o.produced {
        out.insert("produce_ack", p.summary());
    }
    if o.workload == Workload::EndToEnd {
        if let Some(c) = &o.consumed {
            out.insert("end_to_end", c.summary());
        }
    }
    if let Some(f) = &o.fetches {
        out.insert("fetch_round_trip", f.summary());
    }
    out
}

pub fn results_json(o: &Outcome, files: &[String]) -> serde_json::Value {
    let (metric, _) = primary_latency(o);
    let primary = primary_throughput(o);
    let (rps, mbps) = primary.map(throughput).unwrap_or((0.0, 0.0));
    let measured_s = primary.map_or(0.0, Recorder::measured_seconds);
    let produced = o.produced.as_ref();
    let consumed = o.consumed.as_ref();
    json!({
        "tool": "ringbroker bench",
        "version": env!("CARGO_PKG_VERSION"),
        "workload": o.workload.name(),
        "config": o.args,
        "partitions": o.partitions,
        "latency_mode": {
            "open_loop": o.open_loop,
            "description": latency_mode(o),
            "primary_metric": metric,
            "unit": "us",
        },
        "timings": {
            "started_unix_ms": o.started_unix_ms,
            "warmup_s": o.args.warmup.as_secs_f64(),
            "measured_s": measured_s,
            "total_s": o.finished.duration_since(o.start).as_secs_f64(),
        },
        "totals": {
            "records_sent": o.records_sent,
            "records_acked": produced.map_or(0, |r| r.total_records),
            "bytes_acked": produced.map_or(0, |r| r.total_bytes),
            "records_failed": produced.map_or(0, |r| r.total_errors),
            "records_consumed": consumed.map_or(0, |r| r.total_records),
            "bytes_consumed": consumed.map_or(0, |r| r.total_bytes),
            "errors": errors(o).values().sum::<u64>(),
        },
        "throughput": {
            "records": primary.map_or(0, |r| r.measured_records),
            "bytes": primary.map_or(0, |r| r.measured_bytes),
            "records_per_sec": rps,
            "mb_per_sec": mbps,
        },
        "latency": latencies(o),
        "errors": errors(o),
        "files": files,
    })
}

/// The table printed on stdout.
pub fn summary_table(o: &Outcome) -> String {
    let mut t = String::new();
    let a = &o.args;
    let _ = writeln!(
        t,
        "ringbroker bench {}: topic {} ({} partitions), {} producer(s), {} consumer(s), record size {}, acks {}, compression {}",
        o.workload.name(),
        a.topic,
        o.partitions,
        a.producers,
        a.consumers,
        a.record_size,
        if a.acks == -1 { "all".to_string() } else { a.acks.to_string() },
        crate::client::compression::compression_name(a.compression),
    );
    let _ = writeln!(t, "latency: {}", latency_mode(o));
    if let Some(p) = &o.produced {
        let (rps, mbps) = throughput(p);
        let _ = writeln!(
            t,
            "produced: {} acked of {} sent, {:.0} records/s, {:.2} MB/s over {:.2} s measured",
            p.total_records,
            o.records_sent,
            rps,
            mbps,
            p.measured_seconds()
        );
    }
    if let Some(c) = &o.consumed {
        let (rps, mbps) = throughput(c);
        let _ = writeln!(
            t,
            "consumed: {} records, {:.0} records/s, {:.2} MB/s over {:.2} s measured",
            c.total_records,
            rps,
            mbps,
            c.measured_seconds()
        );
    }
    let _ = writeln!(
        t,
        "\n{:<18} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "latency (ms)", "count", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max"
    );
    for (name, s) in latencies(o) {
        let ms = |us: u64| us as f64 / 1000.0;
        let _ = writeln!(
            t,
            "{:<18} {:>10} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
            name,
            s.count,
            ms(s.min),
            ms(s.p50),
            ms(s.p90),
            ms(s.p99),
            ms(s.p99_9),
            ms(s.p99_99),
            ms(s.max)
        );
    }
    let errors = errors(o);
    if errors.is_empty() {
        let _ = writeln!(t, "\nerrors: none");
    } else {
        let _ = writeln!(t, "\nerrors:");
        for (name, n) in errors {
            let _ = writeln!(t, "  {name:<40} {n}");
        }
    }
    t
}

/// One row per second of the run: `second,warmup,records,bytes,p50_us,p99_us,max_us,errors`.
/// Records and bytes are the workload's throughput (acknowledged for produce, consumed
/// otherwise); latency is its primary metric; errors are all errors of that second.
pub fn timeseries_csv(o: &Outcome) -> String {
    let mut out = String::from("second,warmup,records,bytes,p50_us,p99_us,max_us,errors\n");
    let throughput = primary_throughput(o);
    let (_, latency) = primary_latency(o);
    let seconds = all_recorders(o).map(|r| r.seconds.len()).max().unwrap_or(0);
    let warmup_secs = o.args.warmup.as_secs_f64();
    for i in 0..seconds {
        let (records, bytes) = throughput
            .and_then(|r| r.seconds.get(i))
            .map_or((0, 0), |s| (s.records, s.bytes));
        let (p50, p99, max) = latency
            .and_then(|r| r.seconds.get(i))
            .filter(|s| !s.latency.is_empty())
            .map_or((0, 0, 0), |s| {
                (
                    s.latency.value_at_quantile(0.5),
                    s.latency.value_at_quantile(0.99),
                    s.latency.max(),
                )
            });
        let errors: u64 = all_recorders(o)
            .filter_map(|r| r.seconds.get(i))
            .map(|s| s.errors)
            .sum();
        let warmup = u8::from((i as f64) < warmup_secs);
        let _ = writeln!(
            out,
            "{i},{warmup},{records},{bytes},{p50},{p99},{max},{errors}"
        );
    }
    out
}
