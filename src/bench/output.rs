//! `--out DIR`: results.json, latency.hgrm, timeseries.csv, chart.svg.

use std::path::Path;

use super::chart;
use super::hgrm::percentile_distribution;
use super::report::{primary_latency, primary_throughput, results_json, timeseries_csv};
use super::run::{BenchError, Outcome};
use super::stats::new_histogram;

pub const FILES: [&str; 4] = [
    "results.json",
    "latency.hgrm",
    "timeseries.csv",
    "chart.svg",
];

/// Writes every output file into `dir` (created if needed).
pub fn write_all(o: &Outcome, dir: &Path) -> Result<(), BenchError> {
    let io = |what: String| move |source| BenchError::Io { what, source };
    std::fs::create_dir_all(dir).map_err(io(format!("create {}", dir.display())))?;
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(format!("write {}", path.display())))
    };
    let (metric, latency) = primary_latency(o);
    let empty = new_histogram(3);
    let histogram = latency.map_or(&empty, |r| &r.latency);
    write("latency.hgrm", &percentile_distribution(histogram, 1000.0))?;
    write("timeseries.csv", &timeseries_csv(o))?;
    let throughput: Vec<(f64, f64)> = primary_throughput(o)
        .map(|r| {
            r.seconds
                .iter()
                .enumerate()
                .map(|(i, s)| (i as f64, s.records as f64))
                .collect()
        })
        .unwrap_or_default();
    let svg = chart::render(o.workload.name(), metric, histogram, &throughput)
        .map_err(BenchError::Chart)?;
    write("chart.svg", &svg)?;
    let files: Vec<String> = FILES.iter().map(|f| f.to_string()).collect();
    let json = serde_json::to_string_pretty(&results_json(o, &files))
        .map_err(|e| BenchError::Config(format!("results.json: {e}")))?;
    write("results.json", &json)?;
    Ok(())
}

/// Writes the broker's breakdown next to the client's results.
pub fn write_broker_breakdown(dir: &Path, breakdown: &serde_json::Value) -> Result<(), BenchError> {
    let path = dir.join("broker_breakdown.json");
    let text = serde_json::to_string_pretty(breakdown)
        .map_err(|e| BenchError::Config(format!("broker_breakdown.json: {e}")))?;
    std::fs::write(&path, text).map_err(|source| BenchError::Io {
        what: format!("write {}", path.display()),
        source,
    })
}
