//! `ringbroker bench` as a user runs it, against the real broker: produce, e2e and consume
//! with small bounded sizes and `--out`; results.json must be complete and agree with what the
//! broker stored, and every output file must parse. No wall-clock thresholds.

mod broker;

use std::path::Path;
use std::process::{Command, Output};

use broker::{Broker, WAIT};
use ringbroker::client::cluster::LATEST;
use ringbroker::client::{ClientConfig, Cluster};
use serde_json::Value;

fn bench(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .arg("bench")
        .args(args)
        .arg("--quiet")
        .output()
        .expect("run ringbroker bench");
    assert!(
        out.status.success(),
        "bench {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stored_records(broker: &Broker, topic: &str, partitions: i32) -> u64 {
    let mut config = ClientConfig::new(&broker.addr.to_string());
    config.request_timeout = WAIT;
    let cluster = Cluster::connect(config).expect("connect");
    cluster.wait_for_leaders(topic).expect("topic exists");
    let all: Vec<i32> = (0..partitions).collect();
    cluster
        .list_offsets(topic, &all, LATEST)
        .expect("list offsets")
        .iter()
        .sum::<i64>() as u64
}

fn u(v: &Value, path: &str) -> u64 {
    v.pointer(path)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} missing in {v:#}"))
}

/// Checks the files of `--out` and returns results.json.
fn check_outputs(dir: &Path, metric: &str) -> Value {
    let results: Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).expect("results.json"))
            .expect("results.json parses");
    for key in [
        "config",
        "latency_mode",
        "timings",
        "totals",
        "throughput",
        "latency",
        "errors",
    ] {
        assert!(results.get(key).is_some(), "results.json has {key}");
    }
    assert_eq!(results["latency_mode"]["primary_metric"], metric);
    let latency = &results["latency"][metric];
    let order = ["min", "p50", "p90", "p99", "p99_9", "p99_99", "max"];
    let values: Vec<u64> = order.iter().map(|k| u(latency, &format!("/{k}"))).collect();
    assert!(
        values.windows(2).all(|w| w[0] <= w[1]),
        "percentiles are monotone: {values:?}"
    );
    assert!(u(latency, "/count") > 0);

    let hgrm = std::fs::read_to_string(dir.join("latency.hgrm")).expect("latency.hgrm");
    let header: Vec<&str> = hgrm.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
    );
    assert!(hgrm.contains("#[Mean    ="));
    assert!(hgrm.contains("#[Max     ="));
    assert!(hgrm.contains("#[Buckets ="));
    let last_row = hgrm
        .lines()
        .rfind(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap();
    let cols: Vec<f64> = last_row
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(cols[1], 1.0, "the table ends at percentile 1");
    assert_eq!(
        cols[2] as u64,
        u(latency, "/count"),
        "TotalCount = histogram count"
    );

    let csv = std::fs::read_to_string(dir.join("timeseries.csv")).expect("timeseries.csv");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("second,warmup,records,bytes,p50_us,p99_us,max_us,errors")
    );
    let rows: Vec<Vec<u64>> = lines
        .map(|l| l.split(',').map(|c| c.parse().unwrap()).collect())
        .collect();
    let total_s = results["timings"]["total_s"].as_f64().unwrap();
    assert!(!rows.is_empty());
    assert!(
        (rows.len() as f64) <= total_s.ceil() + 1.0,
        "{} rows for {total_s} s",
        rows.len()
    );
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.len(), 8);
        assert_eq!(r[0], i as u64);
        assert!(r[4] <= r[5] && r[5] <= r[6], "p50 <= p99 <= max: {r:?}");
    }
    let svg = std::fs::read_to_string(dir.join("chart.svg")).expect("chart.svg");
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    results
}

#[test]
fn produce_e2e_and_consume_runs_agree_with_the_broker() {
    let broker = Broker::start(&[]);
    let addr = broker.addr.to_string();
    let out = tempfile::tempdir().expect("tempdir");

    // produce: max throughput, 2 producers, lz4.
    let dir = out.path().join("produce");
    let stdout = bench(&[
        "produce",
        "--bootstrap",
        &addr,
        "--topic",
        "bench-produce",
        "--partitions",
        "2",
        "--records",
        "20000",
        "--record-size",
        "uniform:50-300",
        "--producers",
        "2",
        "--compression",
        "lz4",
        "--out",
        dir.to_str().unwrap(),
    ])
    .stdout;
    let table = String::from_utf8_lossy(&stdout);
    assert!(table.contains("produce_ack"), "{table}");
    assert!(table.contains("errors: none"), "{table}");
    let results = check_outputs(&dir, "produce_ack");
    assert_eq!(u(&results, "/totals/records_sent"), 20000);
    assert_eq!(u(&results, "/totals/records_acked"), 20000);
    assert_eq!(u(&results, "/totals/errors"), 0);
    assert_eq!(results["latency_mode"]["open_loop"], false);
    assert_eq!(stored_records(&broker, "bench-produce", 2), 20000);
    let bytes = u(&results, "/totals/bytes_acked");
    assert!((50 * 20000..=300 * 20000).contains(&bytes), "{bytes}");

    // e2e: open loop at a rate, idempotent, 2 consumers.
    let dir = out.path().join("e2e");
    bench(&[
        "e2e",
        "--bootstrap",
        &addr,
        "--topic",
        "bench-e2e",
        "--partitions",
        "2",
        "--records",
        "20000",
        "--record-size",
        "100",
        "--rate",
        "20000",
        "--consumers",
        "2",
        "--idempotence",
        "--compression",
        "zstd",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let results = check_outputs(&dir, "end_to_end");
    assert_eq!(results["latency_mode"]["open_loop"], true);
    assert_eq!(u(&results, "/totals/records_acked"), 20000);
    assert_eq!(u(&results, "/totals/records_consumed"), 20000);
    assert_eq!(u(&results, "/latency/end_to_end/count"), 20000);
    assert_eq!(u(&results, "/latency/produce_ack/count"), 20000);
    assert_eq!(stored_records(&broker, "bench-e2e", 2), 20000);

    // consume what the produce run stored.
    let dir = out.path().join("consume");
    bench(&[
        "consume",
        "--bootstrap",
        &addr,
        "--topic",
        "bench-produce",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let results = check_outputs(&dir, "fetch_round_trip");
    assert_eq!(u(&results, "/totals/records_consumed"), 20000);
    assert_eq!(u(&results, "/totals/bytes_consumed"), bytes);
}

#[test]
fn bad_arguments_are_refused_with_a_message() {
    let out = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["bench", "produce", "--record-size", "normal:1-2"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("normal:1-2"));
    let out = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args([
            "bench",
            "e2e",
            "--record-size",
            "4",
            "--bootstrap",
            "127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 8 bytes"));
}
