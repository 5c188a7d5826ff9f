//! The replication families of the Prometheus text (cluster mode): ISR sizes, followers'
//! lag, under-replicated and under-min-ISR counts, replicated bytes.

use super::snapshot::{PartitionStats, ReplicationStats, ShardMetrics};
use super::text::Text;

/// Cluster mode: per partition this broker leads, its ISR and followers' lag; per shard, the
/// under-replicated and under-min-ISR counts; per partition, replicated bytes both ways.
fn replicated(s: &ShardMetrics) -> Vec<(&PartitionStats, &ReplicationStats)> {
    s.partitions
        .iter()
        .filter_map(|p| p.replication.as_ref().map(|r| (p, r)))
        .collect()
}

pub(super) fn replication_families(out: &mut Text, shards: &[ShardMetrics]) {
    if !shards.iter().any(|s| !replicated(s).is_empty()) {
        return;
    }
    type Counted = fn(&ReplicationStats) -> bool;
    let counts: [(&str, &str, Counted); 2] = [
        (
            "ringbroker_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set.",
            |r| r.leader && r.isr_size < r.replicas,
        ),
        (
            "ringbroker_under_min_isr_partitions",
            "Partitions led here whose ISR is below min.insync.replicas (acks=all is refused).",
            |r| r.leader && r.under_min_isr,
        ),
    ];
    for (name, help, counted) in counts {
        out.family(name, "gauge", help);
        for s in shards {
            let n = replicated(s).iter().filter(|(_, r)| counted(r)).count();
            out.sample(name, &[("shard", &s.shard.to_string())], n as f64);
        }
    }
    type Value = fn(&ReplicationStats) -> Option<f64>;
    let per_partition: [(&str, &str, &str, Value); 3] = [
        (
            "ringbroker_partition_isr_size",
            "gauge",
            "In-sync replicas of a partition led here.",
            |r| r.leader.then_some(r.isr_size as f64),
        ),
        (
            "ringbroker_replication_fetched_bytes_total",
            "counter",
            "Bytes this broker appended from the partition's leader.",
            |r| Some(r.fetched_bytes as f64),
        ),
        (
            "ringbroker_replication_served_bytes_total",
            "counter",
            "Bytes read for the partition's followers while leading it.",
            |r| Some(r.served_bytes as f64),
        ),
    ];
    for (name, kind, help, value) in per_partition {
        out.family(name, kind, help);
        for s in shards {
            let shard = s.shard.to_string();
            for (p, r) in replicated(s) {
                if let Some(v) = value(r) {
                    let partition = p.partition.to_string();
                    let labels = [
                        ("shard", shard.as_str()),
                        ("topic", p.topic.as_str()),
                        ("partition", partition.as_str()),
                    ];
                    out.sample(name, &labels, v);
                }
            }
        }
    }
    type Lag = fn(&(i32, i64, i64)) -> f64;
    let lag: [(&str, &str, Lag); 2] = [
        (
            "ringbroker_replica_lag_offsets",
            "Offsets a follower is behind the leader's log end (partitions led here).",
            |f| f.1 as f64,
        ),
        (
            "ringbroker_replica_lag_seconds",
            "Seconds since a follower was last caught up with the leader (partitions led here).",
            |f| f.2 as f64 / 1000.0,
        ),
    ];
    for (name, help, value) in lag {
        out.family(name, "gauge", help);
        for s in shards {
            for (p, r) in replicated(s) {
                for f in &r.followers {
                    let (partition, follower) = (p.partition.to_string(), f.0.to_string());
                    let labels = [
                        ("topic", p.topic.as_str()),
                        ("partition", partition.as_str()),
                        ("follower", follower.as_str()),
                    ];
                    out.sample(name, &labels, value(f));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::registry::Registry;

    fn shard_with(replication: Option<ReplicationStats>) -> ShardMetrics {
        ShardMetrics {
            shard: 0,
            registry: Registry::new(),
            partitions: vec![PartitionStats {
                topic: "orders".into(),
                partition: 2,
                log_start_offset: 0,
                high_watermark: 40,
                log_end_offset: 42,
                size_bytes: 4096,
                segments: 1,
                flights: 3,
                fsyncs: 1,
                replication,
            }],
            group_offsets: Vec::new(),
            produce_memory: Default::default(),
            stalls: Default::default(),
            offline_partitions: 0,
            tail_cache: Default::default(),
            fetch_sessions: 0,
        }
    }

    fn render(shards: &[ShardMetrics]) -> String {
        let mut out = Text::default();
        replication_families(&mut out, shards);
        out.into_text()
    }

    #[test]
    fn a_leader_reports_its_isr_and_followers_lag() {
        let stats = ReplicationStats {
            leader: true,
            isr_size: 2,
            replicas: 3,
            under_min_isr: false,
            followers: vec![(2, 0, 0), (3, 17, 4500)],
            fetched_bytes: 0,
            served_bytes: 900,
        };
        let text = render(&[shard_with(Some(stats))]);
        for line in [
            r#"ringbroker_under_replicated_partitions{shard="0"} 1"#,
            r#"ringbroker_under_min_isr_partitions{shard="0"} 0"#,
            r#"ringbroker_partition_isr_size{shard="0",topic="orders",partition="2"} 2"#,
            r#"ringbroker_replication_served_bytes_total{shard="0",topic="orders",partition="2"} 900"#,
            r#"ringbroker_replica_lag_offsets{topic="orders",partition="2",follower="3"} 17"#,
            r#"ringbroker_replica_lag_seconds{topic="orders",partition="2",follower="3"} 4.5"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }

    #[test]
    fn a_single_node_has_no_replication_families() {
        assert_eq!(render(&[shard_with(None)]), "");
    }
}
