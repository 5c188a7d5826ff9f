//! The Prometheus text exposition format (version 0.0.4), rendered by hand: the registry is
//! plain per-shard data with HDR histograms, which client libraries (built around their own
//! atomic metric types, without quantile summaries) do not take as they are.
//!
//! Every latency is a summary in seconds with quantiles 0.5/0.9/0.99/0.999, `_sum` and
//! `_count`, labelled with the shard.

use super::registry::{ApiStats, Stage};
use super::snapshot::{group_lag, PartitionStats, ShardMetrics};
use super::text::Text;

/// The `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders every shard's metrics.
pub fn render(shards: &[ShardMetrics]) -> String {
    let mut out = Text::default();
    let shard_label = |s: &ShardMetrics| s.shard.to_string();

    out.family(
        "ringbroker_metrics_shards_reporting",
        "gauge",
        "Shards that answered this scrape.",
    );
    out.sample(
        "ringbroker_metrics_shards_reporting",
        &[],
        shards.len() as f64,
    );

    out.family(
        "ringbroker_stage_latency_seconds",
        "summary",
        "Time spent in one stage of request processing (see docs/metrics.md for the stages).",
    );
    for s in shards {
        for stage in Stage::ALL {
            let shard = shard_label(s);
            out.summary(
                "ringbroker_stage_latency_seconds",
                &[("shard", &shard), ("stage", stage.name())],
                s.registry.stage(stage),
            );
        }
    }

    out.family(
        "ringbroker_request_latency_seconds",
        "summary",
        "Whole request: frame read to response written, per API.",
    );
    for s in shards {
        let shard = shard_label(s);
        for (api, stats) in s.registry.apis() {
            let api = format!("{api:?}");
            out.summary(
                "ringbroker_request_latency_seconds",
                &[("shard", &shard), ("api", &api)],
                &stats.latency,
            );
        }
    }

    out.family(
        "ringbroker_request_handle_latency_seconds",
        "summary",
        "Handler started to response framed, per API (the handler's whole work).",
    );
    for s in shards {
        let shard = shard_label(s);
        for (api, stats) in s.registry.apis() {
            let api = format!("{api:?}");
            out.summary(
                "ringbroker_request_handle_latency_seconds",
                &[("shard", &shard), ("api", &api)],
                &stats.handle,
            );
        }
    }

    type ApiValue = fn(&ApiStats) -> u64;
    let per_api: [(&str, &str, ApiValue); 4] = [
        ("ringbroker_requests_total", "Requests completed.", |a| {
            a.requests
        }),
        (
            "ringbroker_request_failures_total",
            "Requests that failed and closed their connection.",
            |a| a.failed,
        ),
        (
            "ringbroker_request_bytes_total",
            "Request bytes received (length prefix included).",
            |a| a.bytes_in,
        ),
        (
            "ringbroker_response_bytes_total",
            "Response bytes sent (length prefix included).",
            |a| a.bytes_out,
        ),
    ];
    for (name, help, value) in per_api {
        out.family(name, "counter", help);
        for s in shards {
            let shard = shard_label(s);
            for (api, stats) in s.registry.apis() {
                let api = format!("{api:?}");
                out.sample(
                    name,
                    &[("shard", &shard), ("api", &api)],
                    value(stats) as f64,
                );
            }
        }
    }

    out.family(
        "ringbroker_partition_errors_total",
        "counter",
        "Partition results with a non-zero error code, per API and Kafka error code.",
    );
    for s in shards {
        let shard = shard_label(s);
        for (api, stats) in s.registry.apis() {
            let api = format!("{api:?}");
            for (code, n) in &stats.partition_errors {
                let code = code.to_string();
                out.sample(
                    "ringbroker_partition_errors_total",
                    &[("shard", &shard), ("api", &api), ("code", &code)],
                    *n as f64,
                );
            }
        }
    }

    out.family(
        "ringbroker_unknown_api_requests_total",
        "counter",
        "Requests with an API key the broker does not know.",
    );
    for s in shards {
        out.sample(
            "ringbroker_unknown_api_requests_total",
            &[("shard", &shard_label(s))],
            s.registry.unknown_api_requests as f64,
        );
    }

    type ShardValue = fn(&ShardMetrics) -> f64;
    let connections: [(&str, &str, &str, ShardValue); 3] = [
        (
            "ringbroker_connections_accepted_total",
            "counter",
            "Kafka connections accepted.",
            |s| s.registry.connections_accepted as f64,
        ),
        (
            "ringbroker_connections_closed_total",
            "counter",
            "Kafka connections closed.",
            |s| s.registry.connections_closed as f64,
        ),
        (
            "ringbroker_connections_open",
            "gauge",
            "Kafka connections open.",
            |s| s.registry.connections_open() as f64,
        ),
    ];
    out.per_shard(shards, &connections);

    let fetches: [(&str, &str, &str, ShardValue); 3] = [
        (
            "ringbroker_replica_fetch_partitions_local_total",
            "counter",
            "Partitions of followers' fetches read on the shard that received the fetch.",
            |s| s.registry.replica_fetch_local as f64,
        ),
        (
            "ringbroker_replica_fetch_partitions_forwarded_total",
            "counter",
            "Partitions of followers' fetches read on another shard than the one that received the fetch (a mesh hop; replication connections are steered to avoid it).",
            |s| s.registry.replica_fetch_forwarded as f64,
        ),
        (
            "ringbroker_fetch_sessions",
            "gauge",
            "Incremental fetch sessions (KIP-227) cached on the shard, consumers' and followers'.",
            |s| s.fetch_sessions as f64,
        ),
    ];
    out.per_shard(shards, &fetches);

    let produce_memory: [(&str, &str, &str, ShardValue); 7] = [
        (
            "ringbroker_produce_memory_bytes",
            "gauge",
            "Bytes of Produce requests held on the shard now (read and not yet answered, or forwarded by another shard).",
            |s| s.produce_memory.held as f64,
        ),
        (
            "ringbroker_produce_memory_forwarded_bytes",
            "gauge",
            "Of ringbroker_produce_memory_bytes, produce data forwarded by other shards (counted, never waited for).",
            |s| s.produce_memory.charged as f64,
        ),
        (
            "ringbroker_produce_memory_peak_bytes",
            "gauge",
            "Highest ringbroker_produce_memory_bytes since the broker started.",
            |s| s.produce_memory.peak as f64,
        ),
        (
            "ringbroker_produce_memory_limit_bytes",
            "gauge",
            "ringbroker.produce.memory.max.bytes: past it, connections stop reading Produce requests.",
            |s| s.produce_memory.limit as f64,
        ),
        (
            "ringbroker_produce_memory_waiting_requests",
            "gauge",
            "Produce requests waiting for produce memory now (one per connection at most).",
            |s| s.produce_memory.waiting as f64,
        ),
        (
            "ringbroker_produce_memory_waits_total",
            "counter",
            "Produce requests that waited for produce memory before being read.",
            |s| s.produce_memory.waits as f64,
        ),
        (
            "ringbroker_produce_memory_wait_seconds_total",
            "counter",
            "Time Produce requests spent waiting for produce memory.",
            |s| s.produce_memory.wait_time.as_secs_f64(),
        ),
    ];
    out.per_shard(shards, &produce_memory);

    let tail_cache: [(&str, &str, &str, ShardValue); 5] = [
        (
            "ringbroker_tail_cache_bytes",
            "gauge",
            "Memory the shard's tail cache holds (recently written log bytes, served to fetches without a disk read).",
            |s| s.tail_cache.bytes as f64,
        ),
        (
            "ringbroker_tail_cache_budget_bytes",
            "gauge",
            "The shard's tail cache budget (ringbroker.log.tail.cache.bytes).",
            |s| s.tail_cache.budget as f64,
        ),
        (
            "ringbroker_tail_cache_hits_total",
            "counter",
            "Segment reads of fetches served from the tail cache.",
            |s| s.tail_cache.stats.hits as f64,
        ),
        (
            "ringbroker_tail_cache_misses_total",
            "counter",
            "Segment reads of fetches that went to the file.",
            |s| s.tail_cache.stats.misses as f64,
        ),
        (
            "ringbroker_tail_cache_hit_bytes_total",
            "counter",
            "Bytes copied out of the tail cache for fetches.",
            |s| s.tail_cache.stats.hit_bytes as f64,
        ),
    ];
    out.per_shard(shards, &tail_cache);

    let health: [(&str, &str, &str, ShardValue); 3] = [
        (
            "ringbroker_offline_partitions",
            "gauge",
            "Partitions the shard owns but cannot serve: their log failed to open or failed while serving (KAFKA_STORAGE_ERROR).",
            |s| s.offline_partitions as f64,
        ),
        (
            "ringbroker_reactor_stall_longest_seconds",
            "gauge",
            "Longest single poll of a task on the shard's thread since start: nothing else on the shard ran meanwhile.",
            |s| s.stalls.longest.as_secs_f64(),
        ),
        (
            "ringbroker_reactor_stalls_total",
            "counter",
            "Polls that held the shard's thread for 100 ms or more (each also logged, rate-limited).",
            |s| s.stalls.over_threshold as f64,
        ),
    ];
    out.per_shard(shards, &health);

    type PartitionValue = fn(&PartitionStats) -> f64;
    let partition_gauges: [(&str, &str, &str, PartitionValue); 7] = [
        (
            "ringbroker_partition_log_start_offset",
            "gauge",
            "First offset still in the log.",
            |p| p.log_start_offset as f64,
        ),
        (
            "ringbroker_partition_high_watermark",
            "gauge",
            "One past the last offset consumers may read.",
            |p| p.high_watermark as f64,
        ),
        (
            "ringbroker_partition_log_end_offset",
            "gauge",
            "Next offset to assign (staged appends included).",
            |p| p.log_end_offset as f64,
        ),
        (
            "ringbroker_partition_size_bytes",
            "gauge",
            "Bytes of the partition's segments.",
            |p| p.size_bytes as f64,
        ),
        (
            "ringbroker_partition_segments",
            "gauge",
            "Segments of the partition's log.",
            |p| p.segments as f64,
        ),
        (
            "ringbroker_partition_flights_total",
            "counter",
            "Group-commit flights (one write per segment touched) since the log opened.",
            |p| p.flights as f64,
        ),
        (
            "ringbroker_partition_fsyncs_total",
            "counter",
            "fdatasync calls since the log opened.",
            |p| p.fsyncs as f64,
        ),
    ];
    for (name, kind, help, value) in partition_gauges {
        out.family(name, kind, help);
        for s in shards {
            let shard = shard_label(s);
            for p in &s.partitions {
                let partition = p.partition.to_string();
                out.sample(
                    name,
                    &[
                        ("shard", &shard),
                        ("topic", &p.topic),
                        ("partition", &partition),
                    ],
                    value(p),
                );
            }
        }
    }

    super::replication_text::replication_families(&mut out, shards);

    out.family(
        "ringbroker_consumer_group_committed_offset",
        "gauge",
        "Offset committed by a consumer group.",
    );
    for s in shards {
        for g in &s.group_offsets {
            let partition = g.partition.to_string();
            out.sample(
                "ringbroker_consumer_group_committed_offset",
                &[
                    ("group", &g.group),
                    ("topic", &g.topic),
                    ("partition", &partition),
                ],
                g.committed_offset as f64,
            );
        }
    }
    out.family(
        "ringbroker_consumer_group_lag",
        "gauge",
        "High watermark minus the committed offset.",
    );
    for s in shards {
        for g in &s.group_offsets {
            let Some(lag) = group_lag(g, shards) else {
                continue;
            };
            let partition = g.partition.to_string();
            out.sample(
                "ringbroker_consumer_group_lag",
                &[
                    ("group", &g.group),
                    ("topic", &g.topic),
                    ("partition", &partition),
                ],
                lag as f64,
            );
        }
    }
    out.into_text()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::metrics::registry::{Registry, RequestDone};
    use crate::metrics::snapshot::{GroupOffset, PartitionStats};
    use crate::protocol::messages::ApiKey;
    use crate::runtime::stall::StallStats;
    use crate::util::memory_budget::MemoryBudgetStats;

    fn shard(id: usize) -> ShardMetrics {
        let mut registry = Registry::new();
        registry.record_stage(Stage::Append, Duration::from_micros(1500));
        registry.record_request(RequestDone {
            api_key: ApiKey::Produce as i16,
            bytes_in: 1000,
            bytes_out: 50,
            elapsed: Duration::from_micros(2000),
            failed: false,
        });
        registry.connections_accepted = 2;
        ShardMetrics {
            shard: id,
            registry,
            partitions: vec![PartitionStats {
                topic: "orders".into(),
                partition: id as i32,
                log_start_offset: 0,
                high_watermark: 42,
                log_end_offset: 42,
                size_bytes: 4096,
                segments: 1,
                flights: 3,
                fsyncs: 1,
                replication: None,
            }],
            group_offsets: vec![GroupOffset {
                group: "g \"quoted\"\\".into(),
                topic: "orders".into(),
                partition: id as i32,
                committed_offset: 40,
            }],
            produce_memory: MemoryBudgetStats {
                limit: 8 << 20,
                held: 1000 * (id + 1),
                charged: 0,
                peak: 9 << 20,
                waiting: 1,
                waits: 3,
                wait_time: Duration::from_millis(250),
            },
            stalls: StallStats {
                longest: Duration::from_millis(150 * (id as u64 + 1)),
                over_threshold: 2,
            },
            offline_partitions: id,
            tail_cache: Default::default(),
            fetch_sessions: 0,
        }
    }

    /// Every non-comment line is `name{labels} value` with a parseable value.
    fn samples(text: &str) -> Vec<(String, f64)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("a value");
                (series.to_string(), value.parse::<f64>().expect("a number"))
            })
            .collect()
    }

    #[test]
    fn renders_summaries_counters_partitions_and_lag() {
        let text = render(&[shard(0), shard(1)]);
        let samples = samples(&text);
        let find = |series: &str| {
            samples
                .iter()
                .find(|(s, _)| s == series)
                .map(|(_, v)| *v)
                .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        };
        assert_eq!(
            find(r#"ringbroker_stage_latency_seconds_count{shard="1",stage="append"}"#),
            1.0
        );
        let p99 =
            find(r#"ringbroker_stage_latency_seconds{shard="0",stage="append",quantile="0.99"}"#);
        assert!((0.00148..0.00152).contains(&p99), "{p99}");
        assert_eq!(
            find(r#"ringbroker_stage_latency_seconds_sum{shard="0",stage="append"}"#),
            0.0015
        );
        assert_eq!(
            find(r#"ringbroker_requests_total{shard="0",api="Produce"}"#),
            1.0
        );
        assert_eq!(
            find(r#"ringbroker_request_bytes_total{shard="1",api="Produce"}"#),
            1000.0
        );
        assert_eq!(find(r#"ringbroker_connections_open{shard="1"}"#), 2.0);
        assert_eq!(
            find(r#"ringbroker_partition_high_watermark{shard="1",topic="orders",partition="1"}"#),
            42.0
        );
        assert_eq!(
            find(
                r#"ringbroker_consumer_group_lag{group="g \"quoted\"\\",topic="orders",partition="0"}"#
            ),
            2.0
        );
        assert_eq!(find("ringbroker_metrics_shards_reporting"), 2.0);
        assert_eq!(
            find(r#"ringbroker_produce_memory_bytes{shard="1"}"#),
            2000.0
        );
        assert_eq!(
            find(r#"ringbroker_produce_memory_waits_total{shard="0"}"#),
            3.0
        );
        assert_eq!(
            find(r#"ringbroker_produce_memory_wait_seconds_total{shard="0"}"#),
            0.25
        );
        assert_eq!(
            find(r#"ringbroker_reactor_stall_longest_seconds{shard="1"}"#),
            0.3
        );
        assert_eq!(find(r#"ringbroker_reactor_stalls_total{shard="0"}"#), 2.0);
        assert_eq!(find(r#"ringbroker_offline_partitions{shard="1"}"#), 1.0);
        assert_eq!(
            find(r#"ringbroker_produce_memory_limit_bytes{shard="0"}"#),
            8388608.0
        );
        // Each family is declared once, before its samples.
        let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        let mut names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap_or(""))
            .collect();
        names.dedup();
        assert_eq!(types, names.len());
    }
}
