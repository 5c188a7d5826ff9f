//! `ringbroker topic ...`: create, list, describe, delete topics, change their configs and
//! add partitions, against any Kafka-compatible broker.

use serde::Serialize;

use crate::client::admin::{self, ConfigChange, ConfigResource, NewTopic};
use crate::client::ClientError;
use kafka_protocol::ResponseError;

use super::connect::ConnectArgs;
use super::explain::CliError;
use super::table::{emit, emit_json, yes_no, Format, OutputArgs, Table};
use super::topic_describe::{describe, one_topic, DescribeArgs};

// `verbatim_doc_comment`: keep the example lines as written (clap would join them).
#[derive(clap::Subcommand, Debug)]
pub enum TopicCommand {
    /// Create a topic.
    ///
    /// Creating a topic that exists fails with TOPIC_ALREADY_EXISTS (exit 1) unless
    /// --if-not-exists is given. Waits until every partition has a leader.
    ///
    /// Examples:
    ///   ringbroker topic create orders
    ///   ringbroker topic create orders -p 12 -c retention.ms=86400000 -c segment.bytes=67108864
    ///   ringbroker topic create orders -p 3 --if-not-exists -b broker1:9092
    #[command(verbatim_doc_comment)]
    Create(CreateArgs),
    /// List topics with their partition counts.
    ///
    /// Internal topics (__consumer_offsets) only with --internal.
    ///
    /// Examples:
    ///   ringbroker topic list
    ///   ringbroker topic list --internal --format json
    #[command(verbatim_doc_comment)]
    List(ListArgs),
    /// Show a topic's partitions, offsets and configs.
    ///
    /// Per partition: leader, replicas, in-sync replicas, STATUS (ok, or under-replicated,
    /// under-min-isr, unavailable: no live leader), log start offset, high watermark, and
    /// messages = high watermark - log start (an upper bound: transaction markers take
    /// offsets too). Then the configs set on the topic (--all-configs: every config with
    /// where its value comes from). SIZE-BYTES is each partition's size on disk
    /// (DescribeLogDirs; `-` from a broker without it).
    ///
    /// With kafka-topics.sh's filters (--under-replicated-partitions,
    /// --under-min-isr-partitions, --at-min-isr-partitions, --unavailable-partitions) only
    /// the partitions matching any of them are listed, of the topic named or of every topic,
    /// and nothing at all in the table format when none matches.
    ///
    /// Examples:
    ///   ringbroker topic describe orders
    ///   ringbroker topic describe orders --all-configs
    ///   ringbroker topic describe orders --format json
    ///   ringbroker topic describe --under-replicated-partitions
    ///   ringbroker topic describe orders --under-min-isr-partitions --format json
    #[command(verbatim_doc_comment)]
    Describe(DescribeArgs),
    /// Delete topics and all their data.
    ///
    /// Example:
    ///   ringbroker topic delete orders payments
    #[command(verbatim_doc_comment)]
    Delete(DeleteArgs),
    /// Set or remove configs of a topic.
    ///
    /// Uses IncrementalAlterConfigs (AlterConfigs on brokers without it). A removed config
    /// goes back to the broker's default.
    ///
    /// Examples:
    ///   ringbroker topic alter-config orders --set retention.ms=3600000
    ///   ringbroker topic alter-config orders --set retention.bytes=1073741824 --delete segment.ms
    #[command(verbatim_doc_comment)]
    AlterConfig(AlterConfigArgs),
    /// Add partitions to a topic.
    ///
    /// A topic's partition count can only grow. Records already written stay where they
    /// are, so keys may map to other partitions from now on.
    ///
    /// Example:
    ///   ringbroker topic add-partitions orders --num 6
    #[command(verbatim_doc_comment)]
    AddPartitions(AddPartitionsArgs),
}

#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// The topic's name.
    pub name: String,
    /// Number of partitions (default: the broker's num.partitions).
    #[arg(long, short = 'p')]
    pub partitions: Option<i32>,
    /// Replication factor (default: the broker's default.replication.factor).
    #[arg(long, short = 'r', conflicts_with = "replica_assignment")]
    pub replication_factor: Option<i16>,
    /// Replicas of each partition instead of the broker's placement, as kafka-topics.sh
    /// takes them: partitions separated by commas, broker ids by colons, the first the
    /// preferred leader: --replica-assignment 1:2:3,2:3:1
    #[arg(long, value_parser = parse_replica_assignment, conflicts_with = "partitions")]
    pub replica_assignment: Option<ReplicaAssignment>,
    /// A topic config, repeatable: -c retention.ms=86400000
    #[arg(long = "config", short = 'c', value_name = "NAME=VALUE", value_parser = parse_key_value)]
    pub configs: Vec<(String, String)>,
    /// Succeed without changing anything when the topic exists already.
    #[arg(long)]
    pub if_not_exists: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Also list internal topics (__consumer_offsets).
    #[arg(long)]
    pub internal: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// The topics to delete.
    #[arg(required = true)]
    pub names: Vec<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("change").required(true).multiple(true).args(["set", "delete"]))]
pub struct AlterConfigArgs {
    /// The topic's name.
    pub name: String,
    /// Set a config, repeatable: --set retention.ms=3600000
    #[arg(long, value_name = "NAME=VALUE", value_parser = parse_key_value)]
    pub set: Vec<(String, String)>,
    /// Remove a config set on the topic (back to the default), repeatable.
    #[arg(long, value_name = "NAME")]
    pub delete: Vec<String>,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct AddPartitionsArgs {
    /// The topic's name.
    pub name: String,
    /// How many partitions to add.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    pub num: i32,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `NAME=VALUE` → (NAME, VALUE); the value may contain `=` and may be empty, the name not.
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("{s:?} has no name before '='"));
    }
    Ok((name.to_string(), value.trim().to_string()))
}

/// `--replica-assignment`'s value: the broker ids of each partition's replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaAssignment(pub Vec<Vec<i32>>);

pub fn parse_replica_assignment(s: &str) -> Result<ReplicaAssignment, String> {
    let partitions = s
        .split(',')
        .map(|p| {
            p.split(':')
                .map(|b| {
                    b.trim()
                        .parse::<i32>()
                        .map_err(|_| format!("{b:?} in {s:?} is not a broker id"))
                })
                .collect::<Result<Vec<i32>, String>>()
        })
        .collect::<Result<Vec<Vec<i32>>, String>>()?;
    Ok(ReplicaAssignment(partitions))
}

pub fn run(command: TopicCommand) -> Result<(), CliError> {
    match command {
        TopicCommand::Create(args) => create(args),
        TopicCommand::List(args) => list(args),
        TopicCommand::Describe(args) => describe(args),
        TopicCommand::Delete(args) => delete(args),
        TopicCommand::AlterConfig(args) => alter_config(args),
        TopicCommand::AddPartitions(args) => add_partitions(args),
    }
}

#[derive(Serialize)]
struct CreateOutput<'a> {
    topic: &'a str,
    created: bool,
    partitions: usize,
}

fn create(args: CreateArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    let topic = NewTopic {
        name: args.name.clone(),
        partitions: args.partitions,
        replication_factor: args.replication_factor,
        replica_assignment: args.replica_assignment.clone().map(|a| a.0),
        configs: args.configs.clone(),
    };
    let created = match admin::create_topic(&cluster, &topic) {
        Ok(()) => true,
        Err(e)
            if args.if_not_exists
                && admin::is_kafka_error(&e, ResponseError::TopicAlreadyExists) =>
        {
            false
        }
        Err(e) => return Err(e.into()),
    };
    // Wait for leaders, so that the next command (produce, describe) finds the topic ready.
    let partitions = cluster.wait_for_leaders(&args.name)?;
    let out = CreateOutput {
        topic: &args.name,
        created,
        partitions,
    };
    match args.output.format {
        Format::Json => emit_json(&out),
        Format::Table if created => emit(&format!(
            "created topic {} with {partitions} partition(s)\n",
            args.name
        )),
        Format::Table => emit(&format!(
            "topic {} exists already ({partitions} partition(s)); nothing changed\n",
            args.name
        )),
    }
}

#[derive(Serialize)]
struct ListedTopic {
    name: String,
    partitions: usize,
    internal: bool,
}

#[derive(Serialize)]
struct ListOutput {
    topics: Vec<ListedTopic>,
}

fn list(args: ListArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    let topics: Vec<ListedTopic> = admin::describe_topics(&cluster, None)?
        .into_iter()
        .filter(|t| args.internal || !t.internal)
        .map(|t| ListedTopic {
            partitions: t.partitions.len(),
            name: t.name,
            internal: t.internal,
        })
        .collect();
    match args.output.format {
        Format::Json => emit_json(&ListOutput { topics }),
        Format::Table => {
            let mut table = Table::new(&["TOPIC", "PARTITIONS", "INTERNAL"]);
            for t in &topics {
                table.row(vec![
                    t.name.clone(),
                    t.partitions.to_string(),
                    yes_no(t.internal).into(),
                ]);
            }
            emit(&table.render())
        }
    }
}

#[derive(Serialize)]
struct DeletedTopic {
    topic: String,
    deleted: bool,
    error: Option<String>,
}

fn delete(args: DeleteArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    let names: Vec<&str> = args.names.iter().map(String::as_str).collect();
    let results = admin::delete_topics(&cluster, &names)?;
    let rows: Vec<DeletedTopic> = results
        .iter()
        .map(|(topic, result)| DeletedTopic {
            topic: topic.clone(),
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
                .map(|r| format!("deleted topic {}\n", r.topic))
                .collect();
            emit(&deleted)?;
        }
    }
    // The first failure decides the exit status; the others are reported on stderr too.
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

#[derive(Serialize)]
struct AlterOutput<'a> {
    topic: &'a str,
    set: Vec<(String, String)>,
    deleted: &'a [String],
}

fn alter_config(args: AlterConfigArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    let mut changes: Vec<ConfigChange> = args
        .set
        .iter()
        .map(|(name, value)| ConfigChange::Set {
            name: name.clone(),
            value: value.clone(),
        })
        .collect();
    changes.extend(
        args.delete
            .iter()
            .map(|name| ConfigChange::Delete { name: name.clone() }),
    );
    // Name the topic in the error rather than letting the broker describe an unknown resource.
    one_topic(&cluster, &args.name)?;
    admin::alter_configs(
        &cluster,
        &ConfigResource::Topic(args.name.clone()),
        &changes,
    )?;
    match args.output.format {
        Format::Json => emit_json(&AlterOutput {
            topic: &args.name,
            set: args.set.clone(),
            deleted: &args.delete,
        }),
        Format::Table => {
            let mut text = String::new();
            for (name, value) in &args.set {
                text.push_str(&format!("{}: set {name}={value}\n", args.name));
            }
            for name in &args.delete {
                text.push_str(&format!("{}: removed {name}\n", args.name));
            }
            emit(&text)
        }
    }
}

#[derive(Serialize)]
struct AddPartitionsOutput<'a> {
    topic: &'a str,
    partitions_before: usize,
    partitions_after: usize,
}

fn add_partitions(args: AddPartitionsArgs) -> Result<(), CliError> {
    let cluster = args.connect.connect()?;
    let before = one_topic(&cluster, &args.name)?.partitions.len();
    let total = i32::try_from(before)
        .ok()
        .and_then(|b| b.checked_add(args.num))
        .ok_or_else(|| CliError::Usage(format!("--num {} is too large", args.num)))?;
    admin::create_partitions(&cluster, &args.name, total)?;
    let after = cluster.wait_for_leaders(&args.name)?;
    match args.output.format {
        Format::Json => emit_json(&AddPartitionsOutput {
            topic: &args.name,
            partitions_before: before,
            partitions_after: after,
        }),
        Format::Table => emit(&format!(
            "topic {}: {before} → {after} partitions\n",
            args.name
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_assignments_are_read_as_kafka_topics_takes_them() {
        assert_eq!(
            parse_replica_assignment("1:2:3,2:3:1"),
            Ok(ReplicaAssignment(vec![vec![1, 2, 3], vec![2, 3, 1]]))
        );
        assert_eq!(
            parse_replica_assignment("1"),
            Ok(ReplicaAssignment(vec![vec![1]]))
        );
        assert!(parse_replica_assignment("1:x").is_err());
        assert!(parse_replica_assignment("1,,2").is_err());
    }

    #[test]
    fn key_values_split_at_the_first_equals_sign() {
        assert_eq!(
            parse_key_value("retention.ms=1000"),
            Ok(("retention.ms".into(), "1000".into()))
        );
        assert_eq!(parse_key_value(" a = b=c "), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_key_value("a="), Ok(("a".into(), String::new())));
        assert!(parse_key_value("retention.ms").is_err());
        assert!(parse_key_value("=1").is_err());
    }
}
