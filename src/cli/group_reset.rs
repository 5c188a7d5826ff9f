//! `ringbroker group reset-offsets`: move a group's committed offsets (to the earliest, the
//! latest, an offset, a time, or by N), shown first and committed with `--execute`, as
//! kafka-consumer-groups.sh --reset-offsets does.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use serde::Serialize;

use crate::client::accumulator::TopicPartition;
use crate::client::admin;
use crate::client::cluster::{EARLIEST, LATEST};
use crate::client::group_coordinator::{self, CommitIdentity};
use crate::client::ClientError;

use super::connect::ConnectArgs;
use super::explain::CliError;
use super::table::{emit, emit_json, opt, Format, OutputArgs, Table};

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("target").required(true).multiple(false)
    .args(["to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by"]))]
pub struct ResetArgs {
    /// The group id.
    pub group: String,
    /// The topic whose offsets to reset.
    #[arg(long)]
    pub topic: String,
    /// Only these partitions (repeatable; default: every partition of the topic).
    #[arg(long)]
    pub partition: Vec<i32>,
    /// To the log start offset.
    #[arg(long)]
    pub to_earliest: bool,
    /// To the log end offset (skip everything not consumed yet).
    #[arg(long)]
    pub to_latest: bool,
    /// To this offset (clamped to the partition's log start and end).
    #[arg(long, value_name = "OFFSET")]
    pub to_offset: Option<i64>,
    /// To the first record at or after this time: RFC 3339 (2024-05-01T12:00:00Z,
    /// 2024-05-01T14:00:00.5+02:00) or milliseconds since the epoch. Past the last record:
    /// the log end.
    #[arg(long, value_name = "TIME", value_parser = parse_datetime)]
    pub to_datetime: Option<i64>,
    /// Move the committed offset by N (negative: back), clamped to the log.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub shift_by: Option<i64>,
    /// Commit the new offsets (without it, only show them).
    #[arg(long)]
    pub execute: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where to move a committed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTarget {
    Earliest,
    Latest,
    Offset(i64),
    /// The first offset at or after this time (ms); the ListOffsets answer is passed to
    /// [`new_offset`].
    Datetime(i64),
    ShiftBy(i64),
}

impl ResetArgs {
    fn target(&self) -> Result<ResetTarget, CliError> {
        let target = if self.to_earliest {
            ResetTarget::Earliest
        } else if self.to_latest {
            ResetTarget::Latest
        } else if let Some(o) = self.to_offset {
            ResetTarget::Offset(o)
        } else if let Some(t) = self.to_datetime {
            ResetTarget::Datetime(t)
        } else if let Some(n) = self.shift_by {
            ResetTarget::ShiftBy(n)
        } else {
            return Err(CliError::Usage(
                "say where to: --to-earliest, --to-latest, --to-offset, --to-datetime or --shift-by"
                    .into(),
            ));
        };
        Ok(target)
    }
}

/// The offset to commit for one partition: `current` is the committed offset, `start` and
/// `end` the log start and end, `at_time` the ListOffsets answer for a datetime (-1: no record
/// that late). Results outside the log are clamped to it, as Kafka's tool does.
pub fn new_offset(
    target: ResetTarget,
    current: Option<i64>,
    start: i64,
    end: i64,
    at_time: Option<i64>,
) -> Result<i64, String> {
    let wanted = match target {
        ResetTarget::Earliest => start,
        ResetTarget::Latest => end,
        ResetTarget::Offset(o) => o,
        ResetTarget::Datetime(_) => at_time.filter(|&o| o >= 0).unwrap_or(end),
        ResetTarget::ShiftBy(n) => current
            .ok_or(
                "no committed offset to shift from (use --to-earliest, --to-latest or --to-offset)",
            )?
            .saturating_add(n),
    };
    Ok(wanted.clamp(start, end.max(start)))
}

/// `2024-05-01T12:00:00Z`, `2024-05-01T14:00:00.250+02:00` (RFC 3339) or milliseconds since
/// the epoch → milliseconds since the epoch.
pub fn parse_datetime(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map_err(|_| format!("{s:?}: too large"));
    }
    let bad = || {
        format!(
            "{s:?} is not a time: use RFC 3339 (2024-05-01T12:00:00Z, 2024-05-01T14:00:00+02:00) \
             or milliseconds since the epoch"
        )
    };
    let (date, rest) = s.split_once(['T', 't', ' ']).ok_or_else(bad)?;
    let mut ymd = date.splitn(3, '-');
    let mut next_number = |len: usize| -> Result<i64, String> {
        let part = ymd.next().ok_or_else(bad)?;
        if part.len() != len || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    let (year, month, day) = (next_number(4)?, next_number(2)?, next_number(2)?);
    // Time, then an optional fraction, then Z or ±HH:MM.
    let zone_at = rest.find(['Z', 'z', '+', '-']).ok_or_else(bad)?;
    let (time, zone) = rest.split_at(zone_at);
    let (hms, fraction) = match time.split_once('.') {
        Some((hms, f)) => (hms, f),
        None => (time, ""),
    };
    let fields: Vec<&str> = hms.split(':').collect();
    let two_digits = |f: &str| -> Result<i64, String> {
        if f.len() != 2 || !f.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        f.parse().map_err(|_| bad())
    };
    let [h, m, sec] = fields.as_slice() else {
        return Err(bad());
    };
    let (hour, minute, second) = (two_digits(h)?, two_digits(m)?, two_digits(sec)?);
    if !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let millis: i64 = format!("{fraction:0<3}")[..3].parse().map_err(|_| bad())?;
    let offset_minutes = match zone {
        "Z" | "z" => 0,
        _ => {
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let (zh, zm) = zone[1..].split_once(':').ok_or_else(bad)?;
            sign * (two_digits(zh)? * 60 + two_digits(zm)?)
        }
    };
    let valid = (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour < 24
        && minute < 60
        && second < 61;
    if !valid {
        return Err(bad());
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1000 + millis)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[derive(Serialize, Debug, PartialEq)]
struct ResetRow {
    topic: String,
    partition: i32,
    current_offset: Option<i64>,
    new_offset: i64,
}

#[derive(Serialize)]
struct ResetOutput {
    group: String,
    executed: bool,
    partitions: Vec<ResetRow>,
}

/// Commit errors that mean someone is a member of the group (Kafka accepts commits from
/// outside the group only while it is empty).
fn means_active_members(e: &ClientError) -> bool {
    [
        ResponseError::UnknownMemberId,
        ResponseError::IllegalGeneration,
        ResponseError::RebalanceInProgress,
        ResponseError::NonEmptyGroup,
    ]
    .into_iter()
    .any(|code| admin::is_kafka_error(e, code))
}

fn active_members_refusal(group: &str, detail: &str) -> CliError {
    CliError::Refused(format!(
        "cannot reset the offsets of group {group}: {detail}\n  \
         offsets can only be reset while the group has no active members; stop its consumers \
         (and wait for their session to end) first"
    ))
}

pub(super) fn reset_offsets(args: ResetArgs) -> Result<(), CliError> {
    let target = args.target()?;
    let cluster = args.connect.connect()?;
    // Refuse early, as kafka-consumer-groups.sh does: members would overwrite the offsets.
    match admin::describe_group(&cluster, &args.group) {
        Ok(info) if !info.members.is_empty() => {
            return Err(active_members_refusal(
                &args.group,
                &format!(
                    "it has {} active member(s) (state {})",
                    info.members.len(),
                    info.state
                ),
            ))
        }
        Ok(_) => {}
        // A group that does not exist yet gets its first offsets.
        Err(e) if admin::is_kafka_error(&e, ResponseError::GroupIdNotFound) => {}
        Err(e) => return Err(e.into()),
    }
    let topic = args.topic.as_str();
    let md = cluster.refresh_metadata(&[topic])?;
    let known = match md.topics.get(topic) {
        Some(t) if t.error.is_none() => t.partitions.iter().map(|p| p.partition).collect(),
        Some(t) => {
            return Err(CliError::Client(ClientError::Kafka {
                api: "Metadata",
                code: t.error.unwrap_or(crate::client::KafkaCode(
                    ResponseError::UnknownTopicOrPartition.code(),
                )),
                message: Some(format!("topic {topic}")),
            }))
        }
        None => Vec::new(),
    };
    if known.is_empty() {
        return Err(CliError::Client(ClientError::Kafka {
            api: "Metadata",
            code: crate::client::KafkaCode(ResponseError::UnknownTopicOrPartition.code()),
            message: Some(format!("topic {topic}")),
        }));
    }
    let partitions: Vec<i32> = if args.partition.is_empty() {
        known
    } else {
        for p in &args.partition {
            if !known.contains(p) {
                return Err(ClientError::NoSuchPartition {
                    topic: topic.to_string(),
                    partition: *p,
                }
                .into());
            }
        }
        let mut wanted = args.partition.clone();
        wanted.sort_unstable();
        wanted.dedup();
        wanted
    };
    let starts = cluster.list_offsets(topic, &partitions, EARLIEST)?;
    let ends = cluster.list_offsets(topic, &partitions, LATEST)?;
    let at_time = match target {
        ResetTarget::Datetime(ms) => Some(cluster.list_offsets(topic, &partitions, ms)?),
        _ => None,
    };
    let committed = group_coordinator::fetch_offsets(
        &cluster,
        &args.group,
        Some(&[(topic, partitions.clone())]),
    )?;
    let name: Arc<str> = Arc::from(topic);
    let mut rows = Vec::new();
    for (i, &p) in partitions.iter().enumerate() {
        let tp = TopicPartition {
            topic: name.clone(),
            partition: p,
        };
        let current = committed.get(&tp).copied();
        let new = new_offset(
            target,
            current,
            starts[i],
            ends[i],
            at_time.as_ref().map(|t| t[i]),
        )
        .map_err(|e| CliError::Refused(format!("{topic}-{p}: {e}")))?;
        rows.push(ResetRow {
            topic: topic.to_string(),
            partition: p,
            current_offset: current,
            new_offset: new,
        });
    }
    if args.execute {
        let offsets: BTreeMap<TopicPartition, i64> = rows
            .iter()
            .map(|r| {
                (
                    TopicPartition {
                        topic: name.clone(),
                        partition: r.partition,
                    },
                    r.new_offset,
                )
            })
            .collect();
        group_coordinator::commit_offsets(
            &cluster,
            &args.group,
            &CommitIdentity::standalone(),
            &offsets,
        )
        .map_err(|e| {
            if means_active_members(&e) {
                active_members_refusal(&args.group, &format!("the broker answered {e}"))
            } else {
                e.into()
            }
        })?;
    }
    let out = ResetOutput {
        group: args.group.clone(),
        executed: args.execute,
        partitions: rows,
    };
    match args.output.format {
        Format::Json => emit_json(&out)?,
        Format::Table => emit(&render_reset(&out))?,
    }
    if !args.execute {
        eprintln!("dry run: nothing was changed; add --execute to commit these offsets");
    }
    Ok(())
}

fn render_reset(out: &ResetOutput) -> String {
    let mut table = Table::new(&[
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "NEW-OFFSET",
    ]);
    for r in &out.partitions {
        table.row(vec![
            out.group.clone(),
            r.topic.clone(),
            r.partition.to_string(),
            opt(r.current_offset),
            r.new_offset.to_string(),
        ]);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_targets_are_clamped_to_the_log() {
        use ResetTarget::*;
        assert_eq!(new_offset(Earliest, Some(7), 5, 20, None), Ok(5));
        assert_eq!(new_offset(Latest, None, 5, 20, None), Ok(20));
        assert_eq!(new_offset(Offset(12), None, 5, 20, None), Ok(12));
        assert_eq!(new_offset(Offset(2), None, 5, 20, None), Ok(5));
        assert_eq!(new_offset(Offset(99), None, 5, 20, None), Ok(20));
        assert_eq!(new_offset(ShiftBy(-3), Some(10), 5, 20, None), Ok(7));
        assert_eq!(new_offset(ShiftBy(-30), Some(10), 5, 20, None), Ok(5));
        assert_eq!(new_offset(ShiftBy(30), Some(10), 5, 20, None), Ok(20));
        assert!(new_offset(ShiftBy(1), None, 5, 20, None).is_err());
        assert_eq!(new_offset(Datetime(0), None, 5, 20, Some(9)), Ok(9));
        // No record at or after the time: the log end.
        assert_eq!(new_offset(Datetime(0), None, 5, 20, Some(-1)), Ok(20));
        // An empty log.
        assert_eq!(new_offset(Latest, None, 0, 0, None), Ok(0));
    }

    #[test]
    fn datetimes_parse_as_rfc3339_or_millis() {
        assert_eq!(parse_datetime("1700000000123"), Ok(1_700_000_000_123));
        assert_eq!(parse_datetime("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_datetime("2021-01-01T00:00:00Z"),
            Ok(1_609_459_200_000)
        );
        assert_eq!(
            parse_datetime("2021-01-01T02:00:00.25+02:00"),
            Ok(1_609_459_200_250)
        );
        assert_eq!(
            parse_datetime("2020-12-31T23:30:00-00:30"),
            Ok(1_609_459_200_000)
        );
        assert_eq!(
            parse_datetime("2024-02-29T00:00:00Z"),
            Ok(1_709_164_800_000)
        );
        for bad in [
            "",
            "yesterday",
            "2021-01-01",
            "2021-01-01T00:00:00",
            "2021-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2021-01-01T24:00:00Z",
            "2021-01-01T00:00:00+0200",
            "21-01-01T00:00:00Z",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_dry_run_table_shows_old_and_new_offsets() {
        let out = ResetOutput {
            group: "g".into(),
            executed: false,
            partitions: vec![ResetRow {
                topic: "t".into(),
                partition: 0,
                current_offset: None,
                new_offset: 5,
            }],
        };
        assert_eq!(
            render_reset(&out),
            "GROUP  TOPIC  PARTITION  CURRENT-OFFSET  NEW-OFFSET\n\
             g      t              0  -                        5\n"
        );
    }
}
