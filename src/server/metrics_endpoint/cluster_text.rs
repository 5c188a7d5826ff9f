//! The cluster-mode gauges of the metrics endpoint (controller, metadata offset, brokers,
//! leaderless partitions), rendered from the metadata image shard 0 published.

use crate::metadata::MetadataImage;
use crate::metrics::text::Text;

/// The cluster-mode gauges, from the image shard 0 published last.
pub fn render_cluster(summary: &MetadataImage) -> String {
    let mut out = Text::default();
    let leaderless = summary
        .topics()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.leader.is_none())
        .count();
    let gauges: [(&str, &str, f64); 5] = [
        (
            "ringbroker_controller_leader",
            "Node id of the active controller (the metadata quorum's leader); -1 when none is known.",
            summary.controller.map_or(-1.0, |c| f64::from(c.0)),
        ),
        (
            "ringbroker_metadata_offset",
            "Offset of the last metadata record applied by this broker; -1 before the first.",
            summary.metadata_offset.map_or(-1.0, |o| o.0 as f64),
        ),
        (
            "ringbroker_brokers_live",
            "Registered brokers that are not fenced.",
            summary.live_brokers().len() as f64,
        ),
        (
            "ringbroker_brokers_fenced",
            "Registered brokers that are fenced.",
            summary.fenced_brokers().len() as f64,
        ),
        (
            "ringbroker_leaderless_partitions",
            "Partitions of the cluster without a leader (their replicas all fenced).",
            leaderless as f64,
        ),
    ];
    for (name, help, value) in gauges {
        out.family(name, "gauge", help);
        out.sample(name, &[], value);
    }
    out.into_text()
}
