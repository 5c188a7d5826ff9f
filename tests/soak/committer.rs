//! A consumer thread that reads every partition from its position, checks each record's
//! number against its offset, and commits its positions for a group (OffsetCommit outside
//! group management, generation -1), remembering the last acknowledged commit. Each new
//! connection (the broker may have been killed and restarted) begins with an OffsetFetch that
//! must return at least the last acknowledged commit of every partition.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::records;
use super::wire::Connection;
use super::Target;

const BACKOFF: Duration = Duration::from_millis(20);
/// How long an OffsetFetch may keep answering "coordinator loading" after a restart.
const COORDINATOR_WAIT: Duration = Duration::from_secs(30);
const FETCH_VERSION: i16 = 11;
const COMMIT_VERSION: i16 = 8;
const OFFSET_FETCH_VERSION: i16 = 7;

#[derive(Debug, Default)]
pub struct CommitterReport {
    pub commits_acked: u64,
    /// OffsetFetches compared with the last acknowledged commits (one per new connection).
    pub offset_checks: u64,
    pub records_consumed: u64,
    /// The last acknowledged commit per partition (-1: none).
    pub last_acked: BTreeMap<i32, i64>,
    pub errors: BTreeMap<i16, u64>,
    pub violations: Vec<String>,
}

pub struct CommitterConfig {
    pub topic: &'static str,
    pub group: &'static str,
    pub partitions: Vec<i32>,
}

pub fn run(config: CommitterConfig, target: Target, stop: &AtomicBool) -> CommitterReport {
    let mut report = CommitterReport::default();
    let mut position: BTreeMap<i32, i64> = config.partitions.iter().map(|p| (*p, 0)).collect();
    report.last_acked = config.partitions.iter().map(|p| (*p, -1)).collect();
    let mut connection: Option<Connection> = None;
    while !stop.load(Ordering::Relaxed) {
        let conn = match connection.as_mut() {
            Some(c) => c,
            None => {
                let Ok(mut c) = Connection::open(target.get()) else {
                    std::thread::sleep(BACKOFF);
                    continue;
                };
                if check_committed(&mut c, &config, &mut report, stop).is_err() {
                    std::thread::sleep(BACKOFF);
                    continue;
                }
                connection.insert(c)
            }
        };
        if consume(conn, &config, &mut position, &mut report).is_err()
            || commit(conn, &config, &position, &mut report).is_err()
        {
            connection = None;
            std::thread::sleep(BACKOFF);
        }
    }
    report
}

/// OffsetFetch, compared with the last acknowledged commits. Err: the connection failed.
fn check_committed(
    conn: &mut Connection,
    config: &CommitterConfig,
    report: &mut CommitterReport,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let mut t = OffsetFetchRequestTopic::default();
    t.name = topic_name(config.topic);
    t.partition_indexes = config.partitions.clone();
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(StrBytes::from_static_str(config.group));
    req.topics = Some(vec![t]);
    let deadline = Instant::now() + COORDINATOR_WAIT;
    loop {
        let resp: OffsetFetchResponse =
            conn.call(ApiKey::OffsetFetch, OFFSET_FETCH_VERSION, &req)?;
        let partition_error = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| p.error_code)
            .find(|c| *c != 0);
        let code = if resp.error_code != 0 {
            Some(resp.error_code)
        } else {
            partition_error
        };
        if let Some(code) = code {
            *report.errors.entry(code).or_default() += 1;
            if Instant::now() > deadline || stop.load(Ordering::Relaxed) {
                report.violations.push(format!(
                    "OffsetFetch still failing with error {code} after {COORDINATOR_WAIT:?}"
                ));
                return Ok(());
            }
            std::thread::sleep(BACKOFF);
            continue;
        }
        report.offset_checks += 1;
        for p in resp.topics.iter().flat_map(|t| t.partitions.iter()) {
            let acked = report
                .last_acked
                .get(&p.partition_index)
                .copied()
                .unwrap_or(-1);
            if p.committed_offset < acked {
                report.violations.push(format!(
                    "partition {}: committed offset {} after a restart, but {acked} was acknowledged",
                    p.partition_index, p.committed_offset
                ));
            }
        }
        return Ok(());
    }
}

/// One Fetch of every partition from its position; checks and counts what it reads.
fn consume(
    conn: &mut Connection,
    config: &CommitterConfig,
    position: &mut BTreeMap<i32, i64>,
    report: &mut CommitterReport,
) -> std::io::Result<()> {
    let mut t = FetchTopic::default();
    t.topic = topic_name(config.topic);
    t.partitions = position
        .iter()
        .map(|(p, offset)| {
            let mut f = FetchPartition::default();
            f.partition = *p;
            f.fetch_offset = *offset;
            f.partition_max_bytes = 256 << 10;
            f
        })
        .collect();
    let mut req = FetchRequest::default();
    req.replica_id = kafka_protocol::messages::BrokerId(-1);
    req.max_wait_ms = 100;
    req.min_bytes = 1;
    req.max_bytes = 4 << 20;
    req.topics = vec![t];
    let resp: FetchResponse = conn.call(ApiKey::Fetch, FETCH_VERSION, &req)?;
    for part in resp.responses.iter().flat_map(|t| t.partitions.iter()) {
        if part.error_code != 0 {
            *report.errors.entry(part.error_code).or_default() += 1;
            continue;
        }
        let Some(bytes) = part.records.as_ref() else {
            continue;
        };
        let read = match records::read_all(bytes) {
            Ok(r) => r,
            Err(e) => {
                report
                    .violations
                    .push(format!("partition {}: {e}", part.partition_index));
                continue;
            }
        };
        let Some(pos) = position.get_mut(&part.partition_index) else {
            continue;
        };
        let from = *pos;
        for r in read.into_iter().filter(|r| r.offset >= from) {
            let number = r.value.as_deref().and_then(records::parse);
            if number != Some((part.partition_index, r.offset)) {
                report.violations.push(format!(
                    "partition {} offset {}: consumed {:?}",
                    part.partition_index,
                    r.offset,
                    r.value.as_deref().map(String::from_utf8_lossy)
                ));
            }
            if r.offset != *pos {
                report.violations.push(format!(
                    "partition {}: consumed offset {} where {} was next",
                    part.partition_index, r.offset, *pos
                ));
            }
            *pos = r.offset + 1;
            report.records_consumed += 1;
        }
    }
    Ok(())
}

/// Commits every position; remembers them once the whole commit is acknowledged.
fn commit(
    conn: &mut Connection,
    config: &CommitterConfig,
    position: &BTreeMap<i32, i64>,
    report: &mut CommitterReport,
) -> std::io::Result<()> {
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(config.topic);
    t.partitions = position
        .iter()
        .map(|(p, offset)| {
            let mut c = OffsetCommitRequestPartition::default();
            c.partition_index = *p;
            c.committed_offset = *offset;
            c.committed_leader_epoch = -1;
            c
        })
        .collect();
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_static_str(config.group));
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    let resp: OffsetCommitResponse = conn.call(ApiKey::OffsetCommit, COMMIT_VERSION, &req)?;
    let codes: Vec<i16> = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .collect();
    if let Some(code) = codes.iter().find(|c| **c != 0) {
        *report.errors.entry(*code).or_default() += 1;
        std::thread::sleep(BACKOFF);
        return Ok(());
    }
    if codes.len() != position.len() {
        report
            .violations
            .push(format!("OffsetCommit answered {} partitions", codes.len()));
        return Ok(());
    }
    report.commits_acked += 1;
    report.last_acked = position.clone();
    Ok(())
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}
