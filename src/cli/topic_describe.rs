//! `ringbroker topic describe`: a topic's partitions (leader, replicas, ISR, offsets, size,
//! health) and configs; and kafka-topics.sh's `--describe` filters (under-replicated,
//! under/at min ISR, unavailable) over one topic or every topic.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;
use serde::Serialize;

use crate::client::admin::{self, ConfigEntry, ConfigResource, PartitionInfo, TopicInfo};
use crate::client::cluster::{EARLIEST, LATEST};
use crate::client::{log_dirs, ClientError, Cluster};

use super::connect::ConnectArgs;
use super::explain::CliError;
use super::table::{emit, emit_json, yes_no, Format, OutputArgs, Table};

const MIN_ISR: &str = "min.insync.replicas";

#[derive(clap::Args, Debug)]
pub struct DescribeArgs {
    /// The topic's name. May be left out with a filter: then every topic (internal ones too,
    /// as kafka-topics.sh does).
    #[arg(required_unless_present_any = [
        "under_replicated_partitions",
        "under_min_isr_partitions",
        "at_min_isr_partitions",
        "unavailable_partitions",
    ])]
    pub name: Option<String>,
    /// Show every config with its source, not only those set on the topic.
    #[arg(long, conflicts_with_all = [
        "under_replicated_partitions",
        "under_min_isr_partitions",
        "at_min_isr_partitions",
        "unavailable_partitions",
    ])]
    pub all_configs: bool,
    #[command(flatten)]
    pub filters: PartitionFilters,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// kafka-topics.sh's `--describe` filters, by its names. With any of them only the matching
/// partitions are listed (a partition matching any one given), without offsets or configs.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionFilters {
    /// Only partitions with fewer in-sync replicas than replicas.
    #[arg(long)]
    pub under_replicated_partitions: bool,
    /// Only partitions with fewer in-sync replicas than the topic's min.insync.replicas
    /// (acks=all produce is refused), or without a leader (as Kafka counts them).
    #[arg(long)]
    pub under_min_isr_partitions: bool,
    /// Only partitions with exactly min.insync.replicas in-sync replicas (one more loss and
    /// acks=all produce is refused).
    #[arg(long)]
    pub at_min_isr_partitions: bool,
    /// Only partitions without a live leader.
    #[arg(long)]
    pub unavailable_partitions: bool,
}

impl PartitionFilters {
    pub fn any(&self) -> bool {
        self.under_replicated_partitions
            || self.under_min_isr_partitions
            || self.at_min_isr_partitions
            || self.unavailable_partitions
    }

    /// Whether the topics' min.insync.replicas must be looked up (DescribeConfigs).
    pub fn needs_min_isr(&self) -> bool {
        self.under_min_isr_partitions || self.at_min_isr_partitions
    }

    pub fn matches(&self, h: &PartitionHealth) -> bool {
        (self.under_replicated_partitions && h.under_replicated)
            || (self.unavailable_partitions && h.unavailable)
            || (self.under_min_isr_partitions && h.under_min_isr == Some(true))
            || (self.at_min_isr_partitions && h.at_min_isr == Some(true))
    }
}

/// A partition's replication state, from Metadata (and min.insync.replicas when known).
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionHealth {
    /// Fewer in-sync replicas than replicas.
    pub under_replicated: bool,
    /// No live leader: -1, or a broker that is not among the live ones.
    pub unavailable: bool,
    /// `None` where min.insync.replicas was not looked up.
    pub under_min_isr: Option<bool>,
    pub at_min_isr: Option<bool>,
}

impl PartitionHealth {
    /// Kafka's rules (TopicCommand's PartitionDescription): a partition without a leader
    /// counts as under min ISR too.
    pub fn of(p: &PartitionInfo, live: &BTreeSet<i32>, min_isr: Option<i32>) -> PartitionHealth {
        let isr = p.isr.len() as i64;
        let leaderless = p.leader < 0;
        PartitionHealth {
            under_replicated: p.isr.len() < p.replicas.len(),
            unavailable: leaderless || !live.contains(&p.leader),
            under_min_isr: min_isr.map(|m| leaderless || isr < i64::from(m)),
            at_min_isr: min_isr.map(|m| isr == i64::from(m)),
        }
    }

    /// The STATUS cell: the problems, or `ok`. `at-min-isr` only when asked for: with a
    /// replication factor of min.insync.replicas it is every healthy partition.
    fn label(&self, with_at_min_isr: bool) -> String {
        let flags: Vec<&str> = [
            (self.under_replicated, "under-replicated"),
            (self.under_min_isr == Some(true), "under-min-isr"),
            (
                with_at_min_isr && self.at_min_isr == Some(true),
                "at-min-isr",
            ),
            (self.unavailable, "unavailable"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect();
        if flags.is_empty() {
            "ok".into()
        } else {
            flags.join(",")
        }
    }
}

/// One partition as a filtered describe lists it.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct PartitionRow {
    pub topic: String,
    pub partition: i32,
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The topic's, when a min-ISR filter had it looked up.
    pub min_insync_replicas: Option<i32>,
    #[serde(flatten)]
    pub health: PartitionHealth,
}

/// The partitions of `topics` that `filters` select, in the order given. `live` are the
/// live brokers' ids; `min_isr` the topics' min.insync.replicas (a topic missing from it has
/// no min-ISR state, so the min-ISR filters select none of its partitions).
pub fn select_partitions(
    topics: &[TopicInfo],
    live: &BTreeSet<i32>,
    min_isr: &BTreeMap<String, i32>,
    filters: &PartitionFilters,
) -> Vec<PartitionRow> {
    let mut rows = Vec::new();
    for t in topics {
        let topic_min_isr = min_isr.get(&t.name).copied();
        for p in &t.partitions {
            let health = PartitionHealth::of(p, live, topic_min_isr);
            if filters.matches(&health) {
                rows.push(PartitionRow {
                    topic: t.name.clone(),
                    partition: p.partition,
                    leader: p.leader,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    min_insync_replicas: topic_min_isr,
                    health,
                });
            }
        }
    }
    rows
}

/// The topic's min.insync.replicas (its own or the broker default: DescribeConfigs gives the
/// value in force either way); `None` if the broker does not describe it.
fn min_isr_of(configs: &[ConfigEntry]) -> Option<i32> {
    configs
        .iter()
        .find(|c| c.name == MIN_ISR)
        .and_then(|c| c.value.as_deref())
        .and_then(|v| v.trim().parse().ok())
}

/// The ids of the live brokers: those Metadata lists (fenced ones are left out).
fn live_brokers(cluster: &Cluster, topic: Option<&str>) -> Result<BTreeSet<i32>, CliError> {
    let topics: Vec<&str> = topic.into_iter().collect();
    Ok(cluster
        .refresh_metadata(&topics)?
        .brokers
        .keys()
        .copied()
        .collect())
}

pub fn describe(args: DescribeArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    match (&args.name, args.filters.any()) {
        (Some(name), false) => describe_one(&cluster, name, &args),
        _ => describe_filtered(&cluster, &args),
    }
}

#[derive(Serialize)]
struct FilteredOutput {
    partitions: Vec<PartitionRow>,
}

fn describe_filtered(cluster: &Cluster, args: &DescribeArgs) -> Result<(), CliError> {
    let topics = match &args.name {
        Some(name) => vec![one_topic(cluster, name)?],
        None => admin::describe_topics(cluster, None)?,
    };
    let live = live_brokers(cluster, args.name.as_deref())?;
    let mut min_isr = BTreeMap::new();
    if args.filters.needs_min_isr() {
        for t in &topics {
            let resource = ConfigResource::Topic(t.name.clone());
            let configs = match admin::describe_configs(cluster, &resource) {
                Ok(configs) => configs,
                // Deleted since Metadata listed it: nothing to report of it.
                Err(e)
                    if args.name.is_none()
                        && admin::is_kafka_error(&e, ResponseError::UnknownTopicOrPartition) =>
                {
                    continue
                }
                Err(e) => return Err(e.into()),
            };
            let value = min_isr_of(&configs).ok_or_else(|| {
                CliError::Refused(format!(
                    "the broker does not describe {MIN_ISR} of topic {}",
                    t.name
                ))
            })?;
            min_isr.insert(t.name.clone(), value);
        }
    }
    let partitions = select_partitions(&topics, &live, &min_isr, &args.filters);
    match args.output.format {
        Format::Json => emit_json(&FilteredOutput { partitions }),
        // Nothing at all when nothing matches, as kafka-topics.sh: scripts test for output.
        Format::Table if partitions.is_empty() => Ok(()),
        Format::Table => emit(&render_rows(&partitions, &args.filters)),
    }
}

fn render_rows(rows: &[PartitionRow], filters: &PartitionFilters) -> String {
    let with_min_isr = filters.needs_min_isr();
    let mut headers = vec!["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"];
    if with_min_isr {
        headers.push("MIN-ISR");
    }
    headers.push("STATUS");
    let mut table = Table::new(&headers);
    for r in rows {
        let mut cells = vec![
            r.topic.clone(),
            r.partition.to_string(),
            r.leader.to_string(),
            node_list(&r.replicas),
            node_list(&r.isr),
        ];
        if with_min_isr {
            cells.push(
                r.min_insync_replicas
                    .map_or_else(|| "-".into(), |m| m.to_string()),
            );
        }
        cells.push(r.health.label(filters.at_min_isr_partitions));
        table.row(cells);
    }
    table.render()
}

#[derive(Serialize, Debug, PartialEq)]
struct DescribedPartition {
    partition: i32,
    leader: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    log_start_offset: i64,
    high_watermark: i64,
    messages: i64,
    /// Bytes on disk (DescribeLogDirs); `None` when the broker does not say.
    size_bytes: Option<i64>,
    #[serde(flatten)]
    health: PartitionHealth,
}

#[derive(Serialize)]
struct DescribedConfig {
    name: String,
    value: Option<String>,
    source: &'static str,
    read_only: bool,
    sensitive: bool,
}

#[derive(Serialize)]
struct DescribeOutput {
    name: String,
    internal: bool,
    replication_factor: usize,
    min_insync_replicas: Option<i32>,
    partitions: Vec<DescribedPartition>,
    configs: Vec<DescribedConfig>,
}

fn describe_one(cluster: &Cluster, name: &str, args: &DescribeArgs) -> Result<(), CliError> {
    let topic = one_topic(cluster, name)?;
    // Refreshes the cached metadata too: ListOffsets goes to each partition's leader.
    let live = live_brokers(cluster, Some(name))?;
    let indexes: Vec<i32> = topic.partitions.iter().map(|p| p.partition).collect();
    let starts = cluster.list_offsets(name, &indexes, EARLIEST)?;
    let ends = cluster.list_offsets(name, &indexes, LATEST)?;
    // Sizes are extra: a broker without DescribeLogDirs still gets the rest described.
    let sizes = log_dirs::partition_sizes(cluster, name, &indexes).unwrap_or_else(|e| {
        tracing::debug!(error = %e, "no partition sizes");
        Default::default()
    });
    let all_configs = admin::describe_configs(cluster, &ConfigResource::Topic(name.to_string()))?;
    // Every config is described anyway, so the min-ISR state costs nothing here.
    let min_isr = min_isr_of(&all_configs);
    let partitions: Vec<DescribedPartition> = topic
        .partitions
        .iter()
        .zip(starts.iter().zip(&ends))
        .map(|(p, (&start, &end))| DescribedPartition {
            partition: p.partition,
            leader: p.leader,
            replicas: p.replicas.clone(),
            isr: p.isr.clone(),
            log_start_offset: start,
            high_watermark: end,
            messages: (end - start).max(0),
            size_bytes: sizes.get(&p.partition).copied(),
            health: PartitionHealth::of(p, &live, min_isr),
        })
        .collect();
    let configs = all_configs
        .into_iter()
        .filter(|c| args.all_configs || c.source.is_override())
        .map(described_config)
        .collect();
    let out = DescribeOutput {
        name: topic.name.clone(),
        internal: topic.internal,
        replication_factor: topic
            .partitions
            .first()
            .map(|p| p.replicas.len())
            .unwrap_or(0),
        min_insync_replicas: min_isr,
        partitions,
        configs,
    };
    match args.output.format {
        Format::Json => emit_json(&out),
        Format::Table => emit(&render_description(&out, args.all_configs)),
    }
}

fn described_config(c: ConfigEntry) -> DescribedConfig {
    DescribedConfig {
        value: if c.sensitive {
            Some("(sensitive)".into())
        } else {
            c.value
        },
        name: c.name,
        source: c.source.name(),
        read_only: c.read_only,
        sensitive: c.sensitive,
    }
}

fn node_list(nodes: &[i32]) -> String {
    let list: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    list.join(",")
}

fn render_description(out: &DescribeOutput, all_configs: bool) -> String {
    let min_isr = out
        .min_insync_replicas
        .map_or_else(|| "-".into(), |m| m.to_string());
    let mut text = format!(
        "Topic: {}  partitions: {}  replication factor: {}  min ISR: {min_isr}  internal: {}\n\n",
        out.name,
        out.partitions.len(),
        out.replication_factor,
        yes_no(out.internal)
    );
    let mut table = Table::new(&[
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "ISR",
        "STATUS",
        "LOG-START",
        "HIGH-WATERMARK",
        "MESSAGES",
        "SIZE-BYTES",
    ]);
    for p in &out.partitions {
        table.row(vec![
            p.partition.to_string(),
            p.leader.to_string(),
            node_list(&p.replicas),
            node_list(&p.isr),
            p.health.label(false),
            p.log_start_offset.to_string(),
            p.high_watermark.to_string(),
            p.messages.to_string(),
            p.size_bytes.map_or_else(|| "-".into(), |b| b.to_string()),
        ]);
    }
    text.push_str(&table.render());
    text.push('\n');
    if out.configs.is_empty() {
        text.push_str("Configs: none set on the topic (broker defaults apply)\n");
        return text;
    }
    text.push_str(if all_configs {
        "Configs:\n"
    } else {
        "Configs set on the topic (--all-configs for every one):\n"
    });
    let mut configs = Table::new(&["NAME", "VALUE", "SOURCE"]);
    for c in &out.configs {
        configs.row(vec![
            c.name.clone(),
            c.value.clone().unwrap_or_else(|| "-".into()),
            c.source.into(),
        ]);
    }
    text.push_str(&configs.render());
    text
}

/// The one topic `name` (UNKNOWN_TOPIC_OR_PARTITION if it does not exist).
pub(super) fn one_topic(cluster: &Cluster, name: &str) -> Result<TopicInfo, CliError> {
    admin::describe_topics(cluster, Some(&[name]))?
        .into_iter()
        .find(|t| t.name == name)
        .ok_or_else(|| {
            CliError::Client(ClientError::Kafka {
                api: "Metadata",
                code: crate::client::KafkaCode(ResponseError::UnknownTopicOrPartition.code()),
                message: Some(format!("topic {name}")),
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::admin::ConfigSource;

    fn partition(partition: i32, leader: i32, replicas: &[i32], isr: &[i32]) -> PartitionInfo {
        PartitionInfo {
            partition,
            leader,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            error: None,
        }
    }

    fn topic(name: &str, partitions: Vec<PartitionInfo>) -> TopicInfo {
        TopicInfo {
            name: name.into(),
            internal: false,
            partitions,
        }
    }

    /// Broker 3 is down: it left the ISRs; partition 2 of `orders` had only it in sync.
    fn cluster_without_broker_3() -> (Vec<TopicInfo>, BTreeSet<i32>) {
        let topics = vec![
            topic(
                "orders",
                vec![
                    partition(0, 1, &[1, 2, 3], &[1, 2, 3]),
                    partition(1, 2, &[2, 3, 1], &[2, 1]),
                    partition(2, -1, &[3, 1, 2], &[3]),
                    partition(3, 1, &[1, 2, 3], &[1]),
                ],
            ),
            topic("pairs", vec![partition(0, 1, &[1, 2], &[1, 2])]),
        ];
        (topics, BTreeSet::from([1, 2]))
    }

    fn selected(rows: &[PartitionRow]) -> Vec<(&str, i32)> {
        rows.iter()
            .map(|r| (r.topic.as_str(), r.partition))
            .collect()
    }

    #[test]
    fn under_replicated_is_an_isr_smaller_than_the_replicas() {
        let (topics, live) = cluster_without_broker_3();
        let filters = PartitionFilters {
            under_replicated_partitions: true,
            ..Default::default()
        };
        let rows = select_partitions(&topics, &live, &BTreeMap::new(), &filters);
        assert_eq!(
            selected(&rows),
            [("orders", 1), ("orders", 2), ("orders", 3)]
        );
        // Without min.insync.replicas looked up there is no min-ISR state to show.
        assert!(rows.iter().all(|r| r.min_insync_replicas.is_none()
            && r.health.under_min_isr.is_none()
            && r.health.at_min_isr.is_none()));
        // A healthy cluster: none.
        let healthy = vec![topic("orders", vec![partition(0, 1, &[1, 2], &[2, 1])])];
        assert!(select_partitions(&healthy, &live, &BTreeMap::new(), &filters).is_empty());
    }

    #[test]
    fn unavailable_is_no_leader_or_a_leader_that_is_not_live() {
        let (mut topics, live) = cluster_without_broker_3();
        // Metadata may still name a leader that is no longer live.
        topics[1].partitions[0].leader = 3;
        let filters = PartitionFilters {
            unavailable_partitions: true,
            ..Default::default()
        };
        let rows = select_partitions(&topics, &live, &BTreeMap::new(), &filters);
        assert_eq!(selected(&rows), [("orders", 2), ("pairs", 0)]);
        assert!(rows.iter().all(|r| r.health.unavailable));
    }

    #[test]
    fn min_isr_filters_compare_the_isr_with_each_topics_min_isr() {
        let (topics, live) = cluster_without_broker_3();
        let min_isr = BTreeMap::from([("orders".to_string(), 2), ("pairs".to_string(), 1)]);
        let under = PartitionFilters {
            under_min_isr_partitions: true,
            ..Default::default()
        };
        // Partition 2 has no leader, which Kafka counts as under min ISR as well.
        let rows = select_partitions(&topics, &live, &min_isr, &under);
        assert_eq!(selected(&rows), [("orders", 2), ("orders", 3)]);
        assert_eq!(rows[0].min_insync_replicas, Some(2));
        let at = PartitionFilters {
            at_min_isr_partitions: true,
            ..Default::default()
        };
        let rows = select_partitions(&topics, &live, &min_isr, &at);
        assert_eq!(selected(&rows), [("orders", 1)]);
        // A topic whose min ISR is unknown is selected by neither.
        let only_pairs = BTreeMap::from([("pairs".to_string(), 2)]);
        let rows = select_partitions(&topics, &live, &only_pairs, &at);
        assert_eq!(selected(&rows), [("pairs", 0)]);
    }

    #[test]
    fn filters_given_together_select_what_any_of_them_selects() {
        let (topics, live) = cluster_without_broker_3();
        let min_isr = BTreeMap::from([("orders".to_string(), 2), ("pairs".to_string(), 2)]);
        let filters = PartitionFilters {
            at_min_isr_partitions: true,
            unavailable_partitions: true,
            ..Default::default()
        };
        assert!(filters.any() && filters.needs_min_isr());
        let rows = select_partitions(&topics, &live, &min_isr, &filters);
        assert_eq!(
            selected(&rows),
            [("orders", 1), ("orders", 2), ("pairs", 0)]
        );
        assert!(!PartitionFilters::default().any());
        assert!(
            select_partitions(&topics, &live, &min_isr, &PartitionFilters::default()).is_empty()
        );
    }

    #[test]
    fn statuses_name_the_problems() {
        let (topics, live) = cluster_without_broker_3();
        let health =
            |p: usize, min_isr| PartitionHealth::of(&topics[0].partitions[p], &live, min_isr);
        assert_eq!(health(0, Some(2)).label(false), "ok");
        assert_eq!(health(1, None).label(false), "under-replicated");
        assert_eq!(health(1, Some(2)).label(false), "under-replicated");
        assert_eq!(
            health(1, Some(2)).label(true),
            "under-replicated,at-min-isr"
        );
        assert_eq!(
            health(2, Some(2)).label(false),
            "under-replicated,under-min-isr,unavailable"
        );
        assert_eq!(health(2, None).label(false), "under-replicated,unavailable");
    }

    #[test]
    fn a_filtered_listing_has_a_row_per_partition_and_min_isr_when_asked() {
        let (topics, live) = cluster_without_broker_3();
        let min_isr = BTreeMap::from([("orders".to_string(), 2)]);
        let filters = PartitionFilters {
            under_min_isr_partitions: true,
            ..Default::default()
        };
        let text = render_rows(
            &select_partitions(&topics, &live, &min_isr, &filters),
            &filters,
        );
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            lines,
            [
                vec![
                    "TOPIC",
                    "PARTITION",
                    "LEADER",
                    "REPLICAS",
                    "ISR",
                    "MIN-ISR",
                    "STATUS"
                ],
                vec![
                    "orders",
                    "2",
                    "-1",
                    "3,1,2",
                    "3",
                    "2",
                    "under-replicated,under-min-isr,unavailable"
                ],
                vec![
                    "orders",
                    "3",
                    "1",
                    "1,2,3",
                    "1",
                    "2",
                    "under-replicated,under-min-isr"
                ],
            ],
            "{text}"
        );
        let json = serde_json::to_value(FilteredOutput {
            partitions: select_partitions(&topics, &live, &min_isr, &filters),
        })
        .expect("JSON");
        assert_eq!(json["partitions"][1]["under_min_isr"], true, "{json}");
        assert_eq!(json["partitions"][1]["unavailable"], false, "{json}");
        assert_eq!(json["partitions"][1]["min_insync_replicas"], 2, "{json}");
    }

    #[test]
    fn min_isr_is_the_described_value_whatever_its_source() {
        let entry = |value: Option<&str>, source| ConfigEntry {
            name: MIN_ISR.into(),
            value: value.map(Into::into),
            source,
            read_only: false,
            sensitive: false,
        };
        assert_eq!(
            min_isr_of(&[entry(Some("2"), ConfigSource::DynamicTopic)]),
            Some(2)
        );
        assert_eq!(
            min_isr_of(&[entry(Some("1"), ConfigSource::Default)]),
            Some(1)
        );
        assert_eq!(min_isr_of(&[entry(None, ConfigSource::Default)]), None);
        assert_eq!(min_isr_of(&[]), None);
    }

    #[test]
    fn a_description_shows_partitions_and_configs() {
        let out = DescribeOutput {
            name: "orders".into(),
            internal: false,
            replication_factor: 1,
            min_insync_replicas: Some(1),
            partitions: vec![DescribedPartition {
                partition: 0,
                leader: 0,
                replicas: vec![0],
                isr: vec![0],
                log_start_offset: 5,
                high_watermark: 12,
                messages: 7,
                size_bytes: Some(410),
                health: PartitionHealth::of(
                    &partition(0, 0, &[0], &[0]),
                    &BTreeSet::from([0]),
                    Some(1),
                ),
            }],
            configs: vec![DescribedConfig {
                name: "retention.ms".into(),
                value: Some("1000".into()),
                source: "DYNAMIC_TOPIC_CONFIG",
                read_only: false,
                sensitive: false,
            }],
        };
        let text = render_description(&out, false);
        assert!(text.starts_with("Topic: orders  partitions: 1"), "{text}");
        assert!(
            text.lines()
                .next()
                .is_some_and(|l| l.contains("min ISR: 1")),
            "{text}"
        );
        let header = text
            .lines()
            .position(|l| l.starts_with("PARTITION"))
            .expect("a partition table");
        let row: Vec<&str> = text
            .lines()
            .nth(header + 1)
            .unwrap()
            .split_whitespace()
            .collect();
        // At min ISR with a replication factor of 1 is healthy: `ok`.
        assert_eq!(
            row,
            ["0", "0", "0", "0", "ok", "5", "12", "7", "410"],
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()
                    == ["retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"]),
            "{text}"
        );
    }
}
