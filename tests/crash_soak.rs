//! Crash soak: acknowledged writes are never lost or duplicated across SIGKILLs.
//!
//! A broker (2 shards, `ringbroker.acks.all.fsync=true`: acks=all waits for fdatasync) serves
//! a topic of several partitions. Idempotent producers (one producer id each, one writer per
//! partition) pipeline numbered records with acks=all and resend the same batches after any
//! error or lost connection; a committer consumes every partition and commits its positions
//! for a group. Meanwhile a killer SIGKILLs the broker at seeded random moments and restarts
//! it over the same data directory. Then every partition is read from the start and must hold
//! exactly the records its producer sent, in order, each once (record number == offset), with
//! every acknowledged record among them; committed offsets must never go back below an
//! acknowledged commit (checked after every restart and at the end).
//!
//! Knobs: `CRASH_SOAK_CYCLES` (kills, default 20), `CRASH_SOAK_BUDGET_SECS` (time for the kill
//! cycles, default 60; the run stops early when it is spent), `CRASH_SOAK_SEED`. The long run
//! in docs/testing.md is `CRASH_SOAK_CYCLES=1000 CRASH_SOAK_BUDGET_SECS=5400 cargo test
//! --release --test crash_soak -- --nocapture` (`RINGBROKER_BIN` points it at a copy of the broker binary, so
//! that rebuilding meanwhile does not change the binary under test).

mod broker;
mod soak;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, GroupId};

use broker::{s, topic_name, Broker};
use soak::committer::{self, CommitterConfig, CommitterReport};
use soak::producer::{self, ProducerConfig, ProducerReport};
use soak::records;
use soak::{Target, XorShift};

const TOPIC: &str = "soak";
const GROUP: &str = "soak-group";
const PRODUCERS: i32 = 3;
const PARTITIONS_PER_PRODUCER: i32 = 2;
const DEFAULT_CYCLES: u64 = 20;
/// One broken guarantee tends to cascade; the first few tell the story.
const MAX_VIOLATIONS_SHOWN: usize = 40;
const DEFAULT_BUDGET: Duration = Duration::from_secs(60);
/// The broker runs this long (ms, seeded) between a restart and the next kill. Short delays
/// kill it during recovery or right after; long ones let it build up in-flight work.
const KILL_DELAY_MS: (u64, u64) = (20, 1200);

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn acknowledged_writes_survive_sigkill_without_loss_or_duplicates() {
    let cycles = env_u64("CRASH_SOAK_CYCLES").unwrap_or(DEFAULT_CYCLES);
    let budget = env_u64("CRASH_SOAK_BUDGET_SECS").map_or(DEFAULT_BUDGET, Duration::from_secs);
    let seed = env_u64("CRASH_SOAK_SEED").unwrap_or(0x5eed_c0de);
    let started = Instant::now();

    let mut broker = Broker::start(&[
        "ringbroker.acks.all.fsync=true",
        "group.initial.rebalance.delay.ms=0",
    ]);
    let partitions = PRODUCERS * PARTITIONS_PER_PRODUCER;
    broker.client().create_topic(TOPIC, partitions, &[]);
    let target = Target::new(broker.addr);
    let stop = Arc::new(AtomicBool::new(false));

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|i| {
            let config = ProducerConfig {
                topic: TOPIC,
                partitions: (0..PARTITIONS_PER_PRODUCER)
                    .map(|j| i * PARTITIONS_PER_PRODUCER + j)
                    .collect(),
                seed: seed.wrapping_add(i as u64 + 1),
            };
            let (target, stop) = (target.clone(), Arc::clone(&stop));
            std::thread::spawn(move || producer::run(config, target, &stop))
        })
        .collect();
    let committer = {
        let config = CommitterConfig {
            topic: TOPIC,
            group: GROUP,
            partitions: (0..partitions).collect(),
        };
        let (target, stop) = (target.clone(), Arc::clone(&stop));
        std::thread::spawn(move || committer::run(config, target, &stop))
    };

    let mut rng = XorShift::new(seed);
    let mut done = 0;
    // From SIGKILL to the restarted broker's `listening on` (reported, not asserted).
    let mut restarts: Vec<Duration> = Vec::new();
    while done < cycles && started.elapsed() < budget {
        std::thread::sleep(Duration::from_millis(
            rng.between(KILL_DELAY_MS.0, KILL_DELAY_MS.1),
        ));
        let restarting = Instant::now();
        broker.kill9_and_restart();
        restarts.push(restarting.elapsed());
        target.set(broker.addr);
        done += 1;
        if done % 50 == 0 {
            eprintln!("crash soak: {done} kills, {:?}", started.elapsed());
        }
    }
    // Let the clients finish against the last incarnation.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let producer_reports: Vec<ProducerReport> = producers
        .into_iter()
        .map(|h| h.join().expect("producer thread"))
        .collect();
    let committer_report = committer.join().expect("committer thread");

    let verdict = verify(&broker, &producer_reports, &committer_report);
    let acked: i64 = producer_reports
        .iter()
        .flat_map(|r| r.ledgers.iter())
        .map(|l| l.1)
        .sum();
    let sum = |f: fn(&ProducerReport) -> u64| producer_reports.iter().map(f).sum::<u64>();
    let mut errors: BTreeMap<i16, u64> = committer_report.errors.clone();
    for r in &producer_reports {
        for (code, n) in &r.errors {
            *errors.entry(*code).or_default() += n;
        }
    }
    println!(
        "crash soak: seed {seed:#x}, cycles {done}, records acked {acked}, batches acked {}, \
         retries {}, duplicate probes {}, connections {}, commits acked {}, offset checks {}, \
         records consumed live {}, error codes seen {errors:?}, duplicates found {}, lost {}, \
         out of order {}, unnumbered {}, violations {}, restart {}, elapsed {:.1?}",
        sum(|r| r.batches_acked),
        sum(|r| r.retries),
        sum(|r| r.probes),
        sum(|r| r.connections),
        committer_report.commits_acked,
        committer_report.offset_checks,
        committer_report.records_consumed,
        verdict.duplicates,
        verdict.lost,
        verdict.out_of_order,
        verdict.unnumbered,
        verdict.violations.len(),
        restart_times(restarts),
        started.elapsed(),
    );
    let unacked: usize = producer_reports.iter().map(|r| r.unacked_at_end).sum();
    assert!(
        verdict.violations.is_empty(),
        "{} broken guarantees, the first ones:\n{}",
        verdict.violations.len(),
        verdict.violations[..verdict.violations.len().min(MAX_VIOLATIONS_SHOWN)].join("\n")
    );
    assert_eq!(unacked, 0, "batches still unacknowledged after the drain");
    assert!(done > 0 && acked > 0, "the soak did nothing");
    broker.stop_cleanly();
}

/// "median 0.4s, max 1.2s" of the restarts' durations.
fn restart_times(mut times: Vec<Duration>) -> String {
    times.sort();
    match (times.get(times.len() / 2), times.last()) {
        (Some(median), Some(max)) => format!("median {median:.1?}, max {max:.1?}"),
        _ => "none".to_string(),
    }
}

#[derive(Default)]
struct Verdict {
    duplicates: u64,
    lost: u64,
    out_of_order: u64,
    unnumbered: u64,
    violations: Vec<String>,
}

/// Reads every partition from offset 0 and compares it with the producers' ledgers; compares
/// the group's committed offsets with the last acknowledged commits.
fn verify(broker: &Broker, producers: &[ProducerReport], committer: &CommitterReport) -> Verdict {
    let mut v = Verdict::default();
    for r in producers {
        v.violations.extend(r.violations.iter().cloned());
    }
    v.violations.extend(committer.violations.iter().cloned());
    let mut conn = soak::wire::Connection::open(broker.addr).expect("connect for the final check");
    for (partition, acked, sent) in producers.iter().flat_map(|r| r.ledgers.iter()) {
        let log = read_partition(&mut conn, *partition);
        let mut seen = std::collections::BTreeSet::new();
        let mut next_number = 0i64;
        for (offset, value) in &log {
            let Some((p, number)) = value.as_deref().and_then(records::parse) else {
                v.unnumbered += 1;
                v.violations.push(format!(
                    "partition {partition} offset {offset}: not a soak record"
                ));
                continue;
            };
            if p != *partition {
                v.unnumbered += 1;
                v.violations.push(format!(
                    "partition {partition} offset {offset}: a record of partition {p}"
                ));
                continue;
            }
            if !seen.insert(number) {
                v.duplicates += 1;
                v.violations.push(format!(
                    "partition {partition} offset {offset}: record {number} again"
                ));
                continue;
            }
            if number != next_number || number != *offset {
                v.out_of_order += 1;
                v.violations.push(format!(
                    "partition {partition} offset {offset}: record {number} where {next_number} was next"
                ));
            }
            next_number = number + 1;
        }
        let lost = (0..*acked).filter(|n| !seen.contains(n)).count() as u64;
        if lost > 0 {
            v.lost += lost;
            v.violations.push(format!(
                "partition {partition}: {lost} of {acked} acknowledged records missing"
            ));
        }
        if seen.len() as i64 > *sent {
            v.violations.push(format!(
                "partition {partition}: {} records stored but only {sent} sent",
                seen.len()
            ));
        }
    }
    let committed = committed_offsets(&mut conn, committer.last_acked.keys().copied().collect());
    for (partition, acked) in &committer.last_acked {
        let now = committed.get(partition).copied().unwrap_or(-1);
        if now < *acked {
            v.violations.push(format!(
                "partition {partition}: committed offset {now} at the end, {acked} acknowledged"
            ));
        }
    }
    v
}

/// Every record of a partition, from offset 0 to the high watermark: (offset, value).
fn read_partition(
    conn: &mut soak::wire::Connection,
    partition: i32,
) -> Vec<(i64, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut next = 0i64;
    let deadline = Instant::now() + broker::WAIT * 3;
    loop {
        assert!(
            Instant::now() < deadline,
            "reading partition {partition} takes too long"
        );
        let mut p = FetchPartition::default();
        p.partition = partition;
        p.fetch_offset = next;
        p.partition_max_bytes = 1 << 20;
        let mut t = FetchTopic::default();
        t.topic = topic_name(TOPIC);
        t.partitions = vec![p];
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_wait_ms = 0;
        req.min_bytes = 0;
        req.max_bytes = 1 << 20;
        req.topics = vec![t];
        let resp: FetchResponse = conn.call(ApiKey::Fetch, 11, &req).expect("final fetch");
        let part = &resp.responses[0].partitions[0];
        assert_eq!(part.error_code, 0, "final fetch of partition {partition}");
        let bytes = part.records.clone().unwrap_or_default();
        let read = records::read_all(&bytes).expect("decode the final fetch");
        let from = next;
        for r in read.into_iter().filter(|r| r.offset >= from) {
            next = r.offset + 1;
            out.push((r.offset, r.value));
        }
        if next >= part.high_watermark {
            return out;
        }
        assert!(
            !bytes.is_empty(),
            "partition {partition}: nothing at {next} below the high watermark"
        );
    }
}

fn committed_offsets(
    conn: &mut soak::wire::Connection,
    partitions: Vec<i32>,
) -> BTreeMap<i32, i64> {
    let mut t = OffsetFetchRequestTopic::default();
    t.name = topic_name(TOPIC);
    t.partition_indexes = partitions;
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(s(GROUP));
    req.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = conn
        .call(ApiKey::OffsetFetch, 7, &req)
        .expect("final OffsetFetch");
    assert_eq!(resp.error_code, 0, "final OffsetFetch");
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.committed_offset))
        .collect()
}
