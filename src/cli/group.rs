//! `ringbroker group ...`: list, describe (members, committed offsets, lag), delete consumer
//! groups and reset their offsets, as kafka-consumer-groups.sh does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::client::accumulator::TopicPartition;
use crate::client::admin::{self, GroupInfo};
use crate::client::cluster::LATEST;
use crate::client::group_coordinator;
use crate::client::{ClientError, Cluster};

use super::connect::ConnectArgs;
use super::explain::CliError;
use super::group_reset::{reset_offsets, ResetArgs};
use super::table::{emit, emit_json, opt, Format, OutputArgs, Table};

// `verbatim_doc_comment`: keep the example lines as written (clap would join them).
#[derive(clap::Subcommand, Debug)]
pub enum GroupCommand {
    /// List consumer groups with their state and protocol type.
    ///
    /// Examples:
    ///   ringbroker group list
    ///   ringbroker group list --format json
    #[command(verbatim_doc_comment)]
    List(ListArgs),
    /// Show a group's members, committed offsets and lag.
    ///
    /// State and assignor; per partition the committed offset, the log end offset, the lag
    /// (log end - committed) and the member it is assigned to; then each member with its
    /// client id, host and assigned partitions. A group that does not exist is
    /// GROUP_ID_NOT_FOUND (exit 1).
    ///
    /// Examples:
    ///   ringbroker group describe billing
    ///   ringbroker group describe billing --format json
    #[command(verbatim_doc_comment)]
    Describe(DescribeArgs),
    /// Delete groups and their committed offsets.
    ///
    /// Kafka refuses groups that still have members (NON_EMPTY_GROUP).
    ///
    /// Example:
    ///   ringbroker group delete billing audit
    #[command(verbatim_doc_comment)]
    Delete(DeleteArgs),
    /// Move a group's committed offsets of a topic (dry run unless --execute).
    ///
    /// Prints each partition's current and new offset; commits them only with --execute.
    /// Only while the group has no active members: stop its consumers first (they would
    /// overwrite the offsets with their own commits).
    ///
    /// Examples:
    ///   ringbroker group reset-offsets billing --topic orders --to-earliest
    ///   ringbroker group reset-offsets billing --topic orders --to-latest --execute
    ///   ringbroker group reset-offsets billing --topic orders --partition 0 --to-offset 1500 --execute
    ///   ringbroker group reset-offsets billing --topic orders --to-datetime 2024-05-01T12:00:00Z
    ///   ringbroker group reset-offsets billing --topic orders --shift-by -100 --execute
    #[command(verbatim_doc_comment)]
    ResetOffsets(ResetArgs),
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct DescribeArgs {
    /// The group id.
    pub group: String,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// The group ids.
    #[arg(required = true)]
    pub groups: Vec<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: GroupCommand) -> Result<(), CliError> {
    match command {
        GroupCommand::List(args) => list(args),
        GroupCommand::Describe(args) => describe(args),
        GroupCommand::Delete(args) => delete(args),
        GroupCommand::ResetOffsets(args) => reset_offsets(args),
    }
}

#[derive(Serialize)]
struct ListedGroup {
    group: String,
    state: Option<String>,
    protocol_type: String,
}

#[derive(Serialize)]
struct ListOutput {
    groups: Vec<ListedGroup>,
}

fn list(args: ListArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    let groups: Vec<ListedGroup> = admin::list_groups(&cluster)?
        .into_iter()
        .map(|g| ListedGroup {
            group: g.group_id,
            state: g.state,
            protocol_type: g.protocol_type,
        })
        .collect();
    match args.output.format {
        Format::Json => emit_json(&ListOutput { groups }),
        Format::Table => {
            let mut table = Table::new(&["GROUP", "STATE", "PROTOCOL-TYPE"]);
            for g in &groups {
                table.row(vec![
                    g.group.clone(),
                    g.state.clone().unwrap_or_else(|| "-".into()),
                    dash_if_empty(&g.protocol_type),
                ]);
            }
            emit(&table.render())
        }
    }
}

fn dash_if_empty(s: &str) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.to_string()
    }
}

#[derive(Serialize, Debug, PartialEq)]
struct AssignedTopic {
    topic: String,
    partitions: Vec<i32>,
}

#[derive(Serialize, Debug, PartialEq)]
struct DescribedMember {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    host: String,
    assignment: Vec<AssignedTopic>,
}

#[derive(Serialize, Debug, PartialEq)]
struct PartitionLag {
    topic: String,
    partition: i32,
    /// `None` when the group has not committed for this partition.
    committed_offset: Option<i64>,
    log_end_offset: i64,
    /// log end - committed; `None` without a commit.
    lag: Option<i64>,
    /// The member the partition is assigned to, if any.
    member_id: Option<String>,
    client_id: Option<String>,
    host: Option<String>,
}

#[derive(Serialize)]
struct DescribeOutput {
    group: String,
    coordinator: String,
    state: String,
    protocol_type: String,
    protocol: String,
    members: Vec<DescribedMember>,
    partitions: Vec<PartitionLag>,
    total_lag: i64,
}

/// Every partition the group has committed for or has assigned, with its lag.
fn partition_lags(
    info: &GroupInfo,
    committed: &BTreeMap<TopicPartition, i64>,
    log_ends: &BTreeMap<TopicPartition, i64>,
) -> Vec<PartitionLag> {
    let mut owner: BTreeMap<(String, i32), usize> = BTreeMap::new();
    for (i, m) in info.members.iter().enumerate() {
        for (topic, parts) in &m.assignment {
            for &p in parts {
                owner.insert((topic.clone(), p), i);
            }
        }
    }
    let mut keys: BTreeSet<(String, i32)> = owner.keys().cloned().collect();
    keys.extend(
        committed
            .keys()
            .map(|tp| (tp.topic.to_string(), tp.partition)),
    );
    keys.into_iter()
        .map(|(topic, partition)| {
            let tp = TopicPartition {
                topic: Arc::from(topic.as_str()),
                partition,
            };
            let committed_offset = committed.get(&tp).copied();
            let log_end_offset = log_ends.get(&tp).copied().unwrap_or(-1);
            let member = owner
                .get(&(topic.clone(), partition))
                .map(|&i| &info.members[i]);
            PartitionLag {
                lag: committed_offset
                    .filter(|_| log_end_offset >= 0)
                    .map(|c| (log_end_offset - c).max(0)),
                topic,
                partition,
                committed_offset,
                log_end_offset,
                member_id: member.map(|m| m.member_id.clone()),
                client_id: member.map(|m| m.client_id.clone()),
                host: member.map(|m| m.client_host.clone()),
            }
        })
        .collect()
}

/// Log end offsets of `partitions`, by topic. Topics that no longer exist are left out (their
/// lag is unknown), as kafka-consumer-groups.sh does.
fn log_end_offsets(
    cluster: &Cluster,
    partitions: impl Iterator<Item = (String, i32)>,
) -> Result<BTreeMap<TopicPartition, i64>, CliError> {
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (topic, p) in partitions {
        by_topic.entry(topic).or_default().push(p);
    }
    let mut out = BTreeMap::new();
    for (topic, parts) in by_topic {
        let md = cluster.refresh_metadata(&[&topic])?;
        let existing: Vec<i32> = parts
            .into_iter()
            .filter(|&p| md.leader(&topic, p).is_some())
            .collect();
        if existing.is_empty() {
            continue;
        }
        let ends = cluster.list_offsets(&topic, &existing, LATEST)?;
        let name: Arc<str> = Arc::from(topic.as_str());
        for (p, end) in existing.into_iter().zip(ends) {
            out.insert(
                TopicPartition {
                    topic: name.clone(),
                    partition: p,
                },
                end,
            );
        }
    }
    Ok(out)
}

fn describe(args: DescribeArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    let info = admin::describe_group(&cluster, &args.group)?;
    let coordinator = admin::coordinator_of(&cluster, &args.group)?;
    let committed = group_coordinator::fetch_offsets(&cluster, &args.group, None)?;
    let wanted = committed
        .keys()
        .map(|tp| (tp.topic.to_string(), tp.partition))
        .chain(info.members.iter().flat_map(|m| {
            m.assignment
                .iter()
                .flat_map(|(t, ps)| ps.iter().map(move |&p| (t.clone(), p)))
        }));
    let log_ends = log_end_offsets(&cluster, wanted)?;
    let partitions = partition_lags(&info, &committed, &log_ends);
    let out = DescribeOutput {
        total_lag: partitions.iter().filter_map(|p| p.lag).sum(),
        group: info.group_id.clone(),
        coordinator,
        state: info.state.clone(),
        protocol_type: info.protocol_type.clone(),
        protocol: info.protocol.clone(),
        members: info
            .members
            .iter()
            .map(|m| DescribedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                host: m.client_host.clone(),
                assignment: m
                    .assignment
                    .iter()
                    .map(|(topic, partitions)| AssignedTopic {
                        topic: topic.clone(),
                        partitions: partitions.clone(),
                    })
                    .collect(),
            })
            .collect(),
        partitions,
    };
    match args.output.format {
        Format::Json => emit_json(&out),
        Format::Table => emit(&render_description(&out)),
    }
}

fn render_description(out: &DescribeOutput) -> String {
    let protocol = match (out.protocol_type.as_str(), out.protocol.as_str()) {
        ("", _) => "-".to_string(),
        (t, "") => t.to_string(),
        (t, p) => format!("{t}/{p}"),
    };
    let mut text = format!(
        "Group: {}  state: {}  protocol: {protocol}  members: {}  coordinator: {}\n\n",
        out.group,
        out.state,
        out.members.len(),
        out.coordinator
    );
    let mut offsets = Table::new(&[
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]);
    for p in &out.partitions {
        offsets.row(vec![
            p.topic.clone(),
            p.partition.to_string(),
            opt(p.committed_offset),
            opt(Some(p.log_end_offset).filter(|&e| e >= 0)),
            opt(p.lag),
            p.member_id.clone().unwrap_or_else(|| "-".into()),
            p.host.clone().unwrap_or_else(|| "-".into()),
            p.client_id.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    if offsets.is_empty() {
        text.push_str("No committed offsets and no assigned partitions.\n");
    } else {
        text.push_str(&offsets.render());
        text.push_str(&format!("\nTotal lag: {}\n", out.total_lag));
    }
    if !out.members.is_empty() {
        let mut members = Table::new(&["MEMBER-ID", "CLIENT-ID", "HOST", "PARTITIONS"]);
        for m in &out.members {
            let assigned: Vec<String> = m
                .assignment
                .iter()
                .map(|a| {
                    let parts: Vec<String> = a.partitions.iter().map(|p| p.to_string()).collect();
                    format!("{}:{}", a.topic, parts.join(","))
                })
                .collect();
            members.row(vec![
                m.member_id.clone(),
                m.client_id.clone(),
                m.host.clone(),
                if assigned.is_empty() {
                    "-".into()
                } else {
                    assigned.join(" ")
                },
            ]);
        }
        text.push('\n');
        text.push_str(&members.render());
    }
    text
}

#[derive(Serialize)]
struct DeletedGroup {
    group: String,
    deleted: bool,
    error: Option<String>,
}

fn delete(args: DeleteArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    let names: Vec<&str> = args.groups.iter().map(String::as_str).collect();
    let results = admin::delete_groups(&cluster, &names);
    let rows: Vec<DeletedGroup> = results
        .iter()
        .map(|(group, result)| DeletedGroup {
            group: group.clone(),
            deleted: result.is_ok(),
            error: result.as_ref().err().map(ClientError::kind_name),
        })
        .collect();
    match args.output.format {
        Format::Json => emit_json(&rows)?,
        Format::Table => {
            let deleted: String = rows
                .iter()
                .filter(|r| r.deleted)
                .map(|r| format!("deleted group {}\n", r.group))
                .collect();
            emit(&deleted)?;
        }
    }
    let mut failures = results.into_iter().filter_map(|(_, r)| r.err());
    match failures.next() {
        None => Ok(()),
        Some(first) => {
            for other in failures {
                eprintln!("error: {}", CliError::Client(other));
            }
            Err(first.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::admin::MemberInfo;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: Arc::from(topic),
            partition,
        }
    }

    #[test]
    fn lag_is_log_end_minus_committed_and_unknown_without_a_commit() {
        let info = GroupInfo {
            group_id: "g".into(),
            state: "Stable".into(),
            protocol_type: "consumer".into(),
            protocol: "range".into(),
            members: vec![MemberInfo {
                member_id: "m1".into(),
                group_instance_id: None,
                client_id: "c1".into(),
                client_host: "/127.0.0.1".into(),
                assignment: [("t".to_string(), vec![0, 1])].into_iter().collect(),
            }],
        };
        let committed = [(tp("t", 0), 4), (tp("old", 0), 3)].into_iter().collect();
        let ends = [(tp("t", 0), 10), (tp("t", 1), 6)].into_iter().collect();
        let lags = partition_lags(&info, &committed, &ends);
        let row = |topic: &str, partition, committed_offset, log_end_offset, lag, owned: bool| {
            PartitionLag {
                topic: topic.into(),
                partition,
                committed_offset,
                log_end_offset,
                lag,
                member_id: owned.then(|| "m1".to_string()),
                client_id: owned.then(|| "c1".to_string()),
                host: owned.then(|| "/127.0.0.1".to_string()),
            }
        };
        assert_eq!(
            lags,
            vec![
                row("old", 0, Some(3), -1, None, false),
                row("t", 0, Some(4), 10, Some(6), true),
                row("t", 1, None, 6, None, true),
            ]
        );
    }
}
