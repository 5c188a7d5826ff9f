//! `GET /metrics/stages.json`: the latency breakdown merged across shards, for tools (the
//! `bench` command prints it next to its client-side figures). The shape is documented in
//! docs/metrics.md; every latency is in microseconds.

use std::collections::BTreeMap;

use serde::Serialize;

use super::latency::Latency;
use super::registry::{Registry, Stage};
use super::snapshot::ShardMetrics;

pub const CONTENT_TYPE: &str = "application/json";

#[derive(Debug, Serialize)]
pub struct StagesReport {
    /// Shards merged into this report.
    pub shards: usize,
    /// Per stage (`queue`, `decode`, `hop`, `append`, `fsync`, `acks`, `encode`, `write`),
    /// every stage present even when empty.
    pub stages: BTreeMap<&'static str, LatencySummary>,
    /// Per API seen (`Produce`, `Fetch`, ...): whole-request latency and counters.
    pub apis: BTreeMap<String, ApiSummary>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub sum_us: u64,
}

impl LatencySummary {
    fn of(latency: &Latency) -> LatencySummary {
        LatencySummary {
            count: latency.count(),
            p50_us: latency.quantile_micros(0.5),
            p90_us: latency.quantile_micros(0.9),
            p99_us: latency.quantile_micros(0.99),
            p999_us: latency.quantile_micros(0.999),
            max_us: latency.max_micros(),
            sum_us: latency.sum_micros(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ApiSummary {
    /// Whole-request latency.
    #[serde(flatten)]
    pub latency: LatencySummary,
    /// The handler's share of it.
    pub handle: LatencySummary,
    pub failed: u64,
    pub partition_errors: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

pub fn report(shards: &[ShardMetrics]) -> StagesReport {
    let mut merged = Registry::new();
    for s in shards {
        merged.merge(&s.registry);
    }
    StagesReport {
        shards: shards.len(),
        stages: Stage::ALL
            .iter()
            .map(|stage| (stage.name(), LatencySummary::of(merged.stage(*stage))))
            .collect(),
        apis: merged
            .apis()
            .map(|(api, stats)| {
                (
                    format!("{api:?}"),
                    ApiSummary {
                        latency: LatencySummary::of(&stats.latency),
                        handle: LatencySummary::of(&stats.handle),
                        failed: stats.failed,
                        partition_errors: stats.partition_errors.values().sum(),
                        bytes_in: stats.bytes_in,
                        bytes_out: stats.bytes_out,
                    },
                )
            })
            .collect(),
    }
}

pub fn render(shards: &[ShardMetrics]) -> String {
    // Plain maps, strings and integers: serialization cannot fail.
    serde_json::to_string_pretty(&report(shards)).unwrap_or_else(|_| "{}".to_string())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::metrics::registry::RequestDone;
    use crate::protocol::messages::ApiKey;

    fn shard(id: usize, micros: u64) -> ShardMetrics {
        let mut registry = Registry::new();
        registry.record_stage(Stage::Fsync, Duration::from_micros(micros));
        registry.record_request(RequestDone {
            api_key: ApiKey::Produce as i16,
            bytes_in: 10,
            bytes_out: 5,
            elapsed: Duration::from_micros(micros),
            failed: false,
        });
        ShardMetrics {
            shard: id,
            registry,
            partitions: Vec::new(),
            group_offsets: Vec::new(),
            produce_memory: Default::default(),
            stalls: Default::default(),
            offline_partitions: 0,
            tail_cache: Default::default(),
            fetch_sessions: 0,
        }
    }

    #[test]
    fn merges_shards_into_one_breakdown() {
        let json = render(&[shard(0, 100), shard(1, 300)]);
        let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert_eq!(v["shards"], 2);
        assert_eq!(v["stages"]["fsync"]["count"], 2);
        assert_eq!(v["stages"]["fsync"]["sum_us"], 400);
        assert_eq!(v["stages"]["hop"]["count"], 0);
        let max = v["stages"]["fsync"]["max_us"].as_u64().expect("max");
        assert!((299..=302).contains(&max), "{max}");
        assert_eq!(v["apis"]["Produce"]["count"], 2);
        assert_eq!(v["apis"]["Produce"]["bytes_in"], 20);
        assert!(v["apis"]["Produce"]["p999_us"].as_u64().expect("p999") >= 299);
    }
}
