//! `ringbroker consume TOPIC`: print records like `kcat -C` or `rpk topic consume`, from
//! chosen partitions or as a member of a consumer group (committing what it printed).
//!
//! Stops at `-n` records, at the end of every partition (`-e`), on a closed stdout (`| head`)
//! or on Ctrl-C / SIGTERM; a group member then commits and leaves the group.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;

use crate::bench::args::parse_duration;
use crate::client::accumulator::TopicPartition;
use crate::client::cluster::{EARLIEST, LATEST};
use crate::client::group_coordinator;
use crate::client::group_member::{GroupConfig, GroupEvent, GroupMember};
use crate::client::{ClientError, Cluster, Consumer, ConsumerConfig, OffsetSpec};

use super::connect::ConnectArgs;
use super::explain::CliError;
use super::record_format::RecordFormat;
use super::topic_exists::{check_partition, partition_count};

#[derive(clap::Args, Debug, Clone)]
pub struct ConsumeArgs {
    /// The topic to read.
    pub topic: String,
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Where to start: beginning, end, an OFFSET, -N (N before the end of each partition) or
    /// @TIMESTAMP_MS (the first record at or after it). With --group, only for partitions
    /// the group has no committed offset for (Kafka's auto.offset.reset).
    #[arg(long, short = 'o', default_value = "end", allow_hyphen_values = true, value_parser = StartFrom::parse)]
    pub from: StartFrom,
    /// Read only this partition, repeatable (default: all). Not with --group.
    #[arg(long = "partition", short = 'p', conflicts_with = "group")]
    pub partitions: Vec<i32>,
    /// Join this consumer group: partitions are shared with its other members (any Kafka
    /// client), reading starts at the committed offsets, and what was printed is committed
    /// periodically and on exit.
    #[arg(long, short = 'g')]
    pub group: Option<String>,
    /// Stop after this many records.
    #[arg(long, short = 'n')]
    pub count: Option<u64>,
    /// Stop once every assigned partition reached its end (the high watermark when reached).
    #[arg(long, short = 'e')]
    pub exit_at_end: bool,
    /// value (default), kv (key TAB value), json, or a template: %t topic, %p partition,
    /// %o offset, %k key, %s value, %T timestamp ms, %h headers, %K/%S key/value length,
    /// escapes \n \t; e.g. '%p:%o %k=%s\n'.
    #[arg(long, short = 'f', default_value = "value", value_parser = parse_format)]
    pub format: RecordFormat,
    /// With --group: commit this often (and on rebalance and exit).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub commit_interval: Duration,
    /// With --group: the session timeout (silence after which the group drops a member).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub session_timeout: Duration,
    /// Nothing on stderr but errors (no assignments, no summary).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

fn parse_format(s: &str) -> Result<RecordFormat, String> {
    RecordFormat::parse(s).map_err(|e| e.to_string())
}

/// Where reading starts in each partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    Beginning,
    End,
    Offset(i64),
    /// This many records before the end (not before the start).
    FromEnd(i64),
    Timestamp(i64),
}

impl StartFrom {
    pub fn parse(s: &str) -> Result<StartFrom, String> {
        let bad = || format!("--from {s:?}: beginning, end, OFFSET, -N or @TIMESTAMP_MS");
        match s {
            "beginning" | "earliest" => Ok(StartFrom::Beginning),
            "end" | "latest" => Ok(StartFrom::End),
            _ => {
                if let Some(ts) = s.strip_prefix('@') {
                    return ts.parse().map(StartFrom::Timestamp).map_err(|_| bad());
                }
                match s.parse::<i64>().map_err(|_| bad())? {
                    n if n < 0 => Ok(StartFrom::FromEnd(n.unsigned_abs() as i64)),
                    n => Ok(StartFrom::Offset(n)),
                }
            }
        }
    }
}

/// Start offsets of `partitions` (same order).
fn start_offsets(
    cluster: &Cluster,
    topic: &str,
    partitions: &[i32],
    from: StartFrom,
) -> Result<Vec<i64>, ClientError> {
    Ok(match from {
        StartFrom::Beginning => cluster.list_offsets(topic, partitions, EARLIEST)?,
        StartFrom::End => cluster.list_offsets(topic, partitions, LATEST)?,
        StartFrom::Offset(o) => vec![o; partitions.len()],
        StartFrom::FromEnd(n) => {
            let starts = cluster.list_offsets(topic, partitions, EARLIEST)?;
            let ends = cluster.list_offsets(topic, partitions, LATEST)?;
            starts
                .iter()
                .zip(&ends)
                .map(|(&s, &e)| e.saturating_sub(n).max(s))
                .collect()
        }
        StartFrom::Timestamp(ts) => {
            let found = cluster.list_offsets(topic, partitions, ts)?;
            let ends = cluster.list_offsets(topic, partitions, LATEST)?;
            // -1: no record at or after the time; start at the end.
            found
                .iter()
                .zip(&ends)
                .map(|(&f, &e)| if f < 0 { e } else { f })
                .collect()
        }
    })
}

/// Which partitions reached their end (for `-e`): a partition counts once the next offset to
/// print is at its high watermark, and stays counted.
#[derive(Debug, Default)]
pub struct EndTracker {
    reached: BTreeSet<TopicPartition>,
}

impl EndTracker {
    pub fn update(&mut self, tp: &TopicPartition, next: i64, high_watermark: Option<i64>) {
        if high_watermark.is_some_and(|hw| next >= hw) {
            self.reached.insert(tp.clone());
        }
    }

    /// Whether every one of `assigned` reached its end (false while nothing is assigned: a
    /// group member between assignments is not done).
    pub fn all_reached<'a>(&self, mut assigned: impl Iterator<Item = &'a TopicPartition>) -> bool {
        let mut any = false;
        let all = assigned.all(|tp| {
            any = true;
            self.reached.contains(tp)
        });
        any && all
    }

    pub fn forget(&mut self) {
        self.reached.clear();
    }
}

/// What a run did.
#[derive(Debug, Default)]
pub struct ConsumeOutcome {
    pub records: u64,
}

/// How the loop ended.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    Count,
    End,
    Signal,
    ClosedOutput,
}

pub fn run(args: ConsumeArgs) -> Result<ConsumeOutcome, CliError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second Ctrl-C exits at once; the first asks for a clean stop.
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()))
            .map_err(|e| CliError::io("install the signal handler", e))?;
    }
    let cluster = args.connect.connect()?;
    let partitions = partition_count(&cluster, &args.topic)?;
    for &p in &args.partitions {
        check_partition(&args.topic, partitions, p)?;
    }
    let config = ConsumerConfig {
        fetch_max_wait: Duration::from_millis(250),
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(cluster, config)?;
    let mut session = Session {
        args: &args,
        consumer,
        member: None,
        next: BTreeMap::new(),
        ends: EndTracker::default(),
        records: 0,
    };
    match &args.group {
        Some(group) => {
            let mut config = GroupConfig::new(group, &[&args.topic]);
            config.session_timeout = args.session_timeout;
            config.heartbeat_interval = (args.session_timeout / 5).max(Duration::from_millis(100));
            session.member = Some(GroupMember::new(config));
            session.rejoin()?;
        }
        None => {
            let chosen: Vec<i32> = if args.partitions.is_empty() {
                (0..partitions as i32).collect()
            } else {
                let set: BTreeSet<i32> = args.partitions.iter().copied().collect();
                set.into_iter().collect()
            };
            let offsets =
                start_offsets(session.consumer.cluster(), &args.topic, &chosen, args.from)?;
            session.assign(&chosen, &offsets)?;
        }
    }
    let result = session.run_loop(&stop);
    // Commit what was printed and leave, also after an error of the loop.
    let closed = session.close();
    let how = result?;
    closed?;
    if !args.quiet {
        let why = match how {
            Stop::Count => "count reached",
            Stop::End => "end of every partition",
            Stop::Signal => "interrupted",
            Stop::ClosedOutput => "output closed",
        };
        eprintln!(
            "consume: {} records from {} ({why})",
            session.records, args.topic
        );
    }
    Ok(ConsumeOutcome {
        records: session.records,
    })
}

struct Session<'a> {
    args: &'a ConsumeArgs,
    consumer: Consumer,
    member: Option<GroupMember>,
    /// Next offset to print per assigned partition: what a commit stores.
    next: BTreeMap<TopicPartition, i64>,
    ends: EndTracker,
    records: u64,
}

impl Session<'_> {
    fn assign(&mut self, partitions: &[i32], offsets: &[i64]) -> Result<(), CliError> {
        for (&p, &o) in partitions.iter().zip(offsets) {
            self.consumer
                .assign(&self.args.topic, &[p], OffsetSpec::Offset(o))?;
            let tp = TopicPartition {
                topic: Arc::from(self.args.topic.as_str()),
                partition: p,
            };
            self.next.insert(tp, o);
        }
        Ok(())
    }

    /// Commits what was printed (as a group member), hands the partitions back and joins
    /// again: the new assignment starts at the group's committed offsets.
    fn rejoin(&mut self) -> Result<(), CliError> {
        let Some(mut member) = self.member.take() else {
            return Ok(());
        };
        let result = self.rejoin_as(&mut member);
        self.member = Some(member);
        result
    }

    fn rejoin_as(&mut self, member: &mut GroupMember) -> Result<(), CliError> {
        if !self.next.is_empty() {
            if let Err(e) = member.commit(self.consumer.cluster(), &self.next) {
                // Records printed since the last commit will be read again by their next owner.
                if !self.args.quiet {
                    eprintln!("consume: commit before rejoining failed: {e}");
                }
            }
        }
        let old: Vec<TopicPartition> = self.next.keys().cloned().collect();
        self.consumer.unassign(&old);
        self.next.clear();
        self.ends.forget();
        let cluster = self.consumer.cluster();
        let assigned = member.join(cluster)?;
        let mine: Vec<i32> = assigned
            .iter()
            .filter(|tp| *tp.topic == *self.args.topic)
            .map(|tp| tp.partition)
            .collect();
        if !self.args.quiet {
            let list: Vec<String> = mine
                .iter()
                .map(|p| format!("{}-{p}", self.args.topic))
                .collect();
            eprintln!(
                "consume: group {} generation {}: assigned [{}]",
                member.group(),
                member.state().generation,
                list.join(", ")
            );
        }
        if mine.is_empty() {
            return Ok(());
        }
        let committed = group_coordinator::fetch_offsets(
            cluster,
            member.group(),
            Some(&[(self.args.topic.as_str(), mine.clone())]),
        )?;
        let fallback = start_offsets(cluster, &self.args.topic, &mine, self.args.from)?;
        let offsets: Vec<i64> = mine
            .iter()
            .zip(fallback)
            .map(|(&p, f)| {
                let tp = TopicPartition {
                    topic: Arc::from(self.args.topic.as_str()),
                    partition: p,
                };
                committed.get(&tp).copied().unwrap_or(f)
            })
            .collect();
        self.assign(&mine, &offsets)
    }

    fn run_loop(&mut self, stop: &AtomicBool) -> Result<Stop, CliError> {
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        let mut last_commit = Instant::now();
        if self.args.count == Some(0) {
            return Ok(Stop::Count);
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(Stop::Signal);
            }
            let mut wait = Duration::from_millis(250);
            if let Some(member) = self.member.as_mut() {
                match member.poll(self.consumer.cluster())? {
                    GroupEvent::Rebalance => {
                        self.rejoin()?;
                        continue;
                    }
                    GroupEvent::Nothing => wait = wait.min(member.time_to_heartbeat()),
                }
                if last_commit.elapsed() >= self.args.commit_interval {
                    last_commit = Instant::now();
                    if let Err(e) = member.commit(self.consumer.cluster(), &self.next) {
                        if !self.args.quiet {
                            eprintln!("consume: periodic commit failed: {e}");
                        }
                    }
                }
            }
            let records = if self.next.is_empty() {
                // Nothing assigned (more group members than partitions): just heartbeat.
                std::thread::sleep(wait);
                Vec::new()
            } else {
                match self.consumer.poll(wait) {
                    Ok(records) => records,
                    Err(ClientError::Kafka { code, .. })
                        if self.member.is_some()
                            && code.0 == ResponseError::OffsetOutOfRange.code()
                            && self.reset_out_of_range()? =>
                    {
                        continue
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            for r in records {
                let tp = TopicPartition {
                    topic: r.topic.clone(),
                    partition: r.partition,
                };
                if !self.next.contains_key(&tp) {
                    continue;
                }
                if let Err(e) = self.args.format.write(&mut out, &r) {
                    return closed_output(e);
                }
                self.next.insert(tp, r.offset + 1);
                self.records += 1;
                if self.args.count.is_some_and(|n| self.records >= n) {
                    return out.flush().map_or_else(closed_output, |_| Ok(Stop::Count));
                }
            }
            if let Err(e) = out.flush() {
                return closed_output(e);
            }
            if self.args.exit_at_end {
                for (tp, &next) in &self.next {
                    self.ends.update(tp, next, self.consumer.high_watermark(tp));
                }
                if self.ends.all_reached(self.next.keys()) {
                    return Ok(Stop::End);
                }
            }
        }
    }

    /// A group's committed offset that is no longer in the log (retention, DeleteRecords)
    /// restarts at `--from`, as Kafka's auto.offset.reset does (an OFFSET there means the
    /// beginning). Returns whether any partition was reset.
    fn reset_out_of_range(&mut self) -> Result<bool, CliError> {
        let (tps, parts): (Vec<TopicPartition>, Vec<i32>) = self
            .next
            .keys()
            .map(|tp| (tp.clone(), tp.partition))
            .unzip();
        let cluster = self.consumer.cluster();
        let starts = cluster.list_offsets(&self.args.topic, &parts, EARLIEST)?;
        let ends = cluster.list_offsets(&self.args.topic, &parts, LATEST)?;
        let stale: Vec<usize> = (0..tps.len())
            .filter(|&i| !in_log(self.next[&tps[i]], starts[i], ends[i]))
            .collect();
        if stale.is_empty() {
            return Ok(false);
        }
        let from = match self.args.from {
            StartFrom::Offset(_) => StartFrom::Beginning,
            other => other,
        };
        let stale_parts: Vec<i32> = stale.iter().map(|&i| parts[i]).collect();
        let offsets = start_offsets(cluster, &self.args.topic, &stale_parts, from)?;
        let stale_tps: Vec<TopicPartition> = stale.iter().map(|&i| tps[i].clone()).collect();
        if !self.args.quiet {
            for (tp, o) in stale_tps.iter().zip(&offsets) {
                eprintln!(
                    "consume: {}-{} offset {} is not in the log any more; restarting at {o}",
                    tp.topic, tp.partition, self.next[tp]
                );
            }
        }
        self.consumer.unassign(&stale_tps);
        self.assign(&stale_parts, &offsets)?;
        Ok(true)
    }

    /// The group member commits what was printed and leaves the group.
    fn close(&mut self) -> Result<(), CliError> {
        let Some(member) = self.member.as_mut() else {
            return Ok(());
        };
        let cluster = self.consumer.cluster();
        let committed = if member.state().needs_join() {
            Ok(()) // our generation is gone: a commit would be refused
        } else {
            member.commit(cluster, &self.next)
        };
        let left = member.leave(cluster);
        committed?;
        left?;
        Ok(())
    }
}

/// Whether a position can be fetched: between the log start and the log end, inclusive.
fn in_log(position: i64, start: i64, end: i64) -> bool {
    (start..=end).contains(&position)
}

/// A closed stdout (`consume ... | head`) is a normal way to stop; other write errors are not.
fn closed_output(e: std::io::Error) -> Result<Stop, CliError> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(Stop::ClosedOutput)
    } else {
        Err(CliError::io("write to stdout", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_outside_the_log_are_out_of_range() {
        assert!(in_log(5, 5, 9));
        assert!(in_log(9, 5, 9)); // the end: waits for new records
        assert!(!in_log(4, 5, 9)); // deleted by retention
        assert!(!in_log(10, 5, 9));
    }

    #[test]
    fn start_positions_parse() {
        assert_eq!(StartFrom::parse("beginning"), Ok(StartFrom::Beginning));
        assert_eq!(StartFrom::parse("end"), Ok(StartFrom::End));
        assert_eq!(StartFrom::parse("42"), Ok(StartFrom::Offset(42)));
        assert_eq!(StartFrom::parse("-10"), Ok(StartFrom::FromEnd(10)));
        assert_eq!(
            StartFrom::parse("@1700000000000"),
            Ok(StartFrom::Timestamp(1700000000000))
        );
        assert!(StartFrom::parse("start").is_err());
        assert!(StartFrom::parse("@soon").is_err());
    }

    fn tp(p: i32) -> TopicPartition {
        TopicPartition {
            topic: Arc::from("t"),
            partition: p,
        }
    }

    #[test]
    fn the_end_is_reached_per_partition_and_stays_reached() {
        let mut ends = EndTracker::default();
        let assigned = [tp(0), tp(1)];
        ends.update(&tp(0), 5, Some(5));
        ends.update(&tp(1), 3, None); // no fetch answered yet
        assert!(!ends.all_reached(assigned.iter()));
        ends.update(&tp(1), 3, Some(7));
        assert!(!ends.all_reached(assigned.iter()));
        ends.update(&tp(1), 7, Some(7));
        // Partition 0 grew meanwhile: it reached its end when it did, as kcat -e counts it.
        ends.update(&tp(0), 5, Some(9));
        assert!(ends.all_reached(assigned.iter()));
        assert!(!ends.all_reached([].iter()));
        ends.forget();
        assert!(!ends.all_reached(assigned.iter()));
    }
}
