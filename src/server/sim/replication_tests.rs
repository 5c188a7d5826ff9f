//! A three-broker cluster of the real broker under the simulator: acks=all writes while
//! brokers crash and restart and links are cut, then, healed, every acknowledged record must
//! be in the log at the offset it was acknowledged with, and every replica's log the same
//! below the high watermark.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::broker::client_addr;
use super::client::SimClient;
use super::cluster::{
    any_client, log_if_asked, power_losses, run_seed, run_seed_outcome, run_seeds, SimCluster,
    FAULT_PHASE, IDS,
};
use crate::protocol::batch_builder::{decode_records, BatchBuilder};
use crate::protocol::record_batch::BatchHeader;
use crate::runtime::sim;
use crate::runtime::{self, Instant};
use crate::shard::Shard;

const TOPIC: &str = "sim";
/// Records per producer.
const RECORDS: u64 = 60;
const PRODUCERS: u64 = 2;
const TOTAL: usize = (RECORDS * PRODUCERS) as usize;

/// Every batch of `id`'s log that starts below `end`, whole, in order (an error if the log
/// has a gap there).
async fn batches_below(
    id: i32,
    shard: Option<Rc<Shard>>,
    end: i64,
) -> Result<Vec<bytes::Bytes>, String> {
    let shard = shard.ok_or(format!("broker {id} is down"))?;
    let p = shard
        .partitions
        .get(TOPIC, 0)
        .ok_or(format!("broker {id} has no log"))?;
    let mut out = Vec::new();
    let mut next = 0i64;
    for _ in 0..10_000 {
        if next >= end {
            break;
        }
        let r = p
            .log
            .read(next, 1 << 20, Some(end))
            .await
            .map_err(|e| format!("broker {id}: read at {next}: {e}"))?;
        if r.records.is_empty() {
            return Err(format!("broker {id}: nothing at {next} (< {end})"));
        }
        let mut at = 0;
        while r.records.len() - at >= 61 {
            let h =
                BatchHeader::parse(&r.records[at..]).map_err(|e| format!("broker {id}: {e}"))?;
            let len = h.total_len().min(r.records.len() - at);
            if h.base_offset < end {
                out.push(r.records.slice(at..at + len));
            }
            next = h.last_offset() + 1;
            at += len;
        }
    }
    Ok(out)
}

/// (base offset, CRC) of each batch.
fn batch_ids(batches: &[bytes::Bytes]) -> Result<Vec<(i64, u32)>, String> {
    batches
        .iter()
        .map(|b| {
            BatchHeader::parse(b)
                .map(|h| (h.base_offset, h.crc))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Producer `k`: an idempotent producer writing values `k * 1_000_000 + i` with sequence `i`.
async fn produce(k: u64, acked: Rc<RefCell<Vec<(u64, i64)>>>, acks: i16) {
    let mut producer = None;
    for _ in 0..600 {
        if let Some((_, mut c)) = any_client(&IDS).await {
            if let Ok((0, id, epoch)) = c.init_producer_id().await {
                producer = Some((id, epoch));
                break;
            }
        }
        runtime::sleep(Duration::from_millis(100)).await;
    }
    let Some((id, epoch)) = producer else { return };
    let mut client: Option<SimClient> = None;
    // Writing stops at the fault loop's end: a producer stuck on a sequence gap (a lost
    // acks=1 write) must not hold the run until its time limit.
    let started = Instant::now();
    for i in 0..RECORDS {
        if started.elapsed() > FAULT_PHASE {
            return;
        }
        let value = k * 1_000_000 + i;
        // Paced, so that the faults fall among the writes.
        runtime::sleep(Duration::from_millis(sim::random_u64() % 300)).await;
        for _attempt in 0..600 {
            if started.elapsed() > FAULT_PHASE {
                return;
            }
            if client.is_none() {
                // Find the leader through any broker, then connect to it.
                if let Some((_, mut c)) = any_client(&IDS).await {
                    if let Some(l) = c.leader(TOPIC, 0).await {
                        client = SimClient::connect(client_addr(l)).await.ok();
                    }
                }
            }
            if let Some(c) = client.as_mut() {
                let mut b = BatchBuilder::new(runtime::now_ms()).producer(id, epoch, i as i32);
                b.push(None, Some(&value.to_be_bytes()), runtime::now_ms(), &[]);
                match c.produce(TOPIC, 0, b.finish(), acks).await {
                    Ok(p) if p.error_code == 0 => {
                        acked.borrow_mut().push((value, p.base_offset));
                        break;
                    }
                    _ => client = None,
                }
            }
            runtime::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// InitProducerId on a random broker every few hundred ms while `writing`: the ids.
async fn init_producer_ids(writing: Rc<std::cell::Cell<bool>>) -> Vec<i64> {
    let mut ids = Vec::new();
    for _ in 0..10_000 {
        if !writing.get() {
            break;
        }
        runtime::sleep(Duration::from_millis(100 + sim::random_u64() % 400)).await;
        let id = IDS[(sim::random_u64() % 3) as usize];
        if let Ok(mut c) = SimClient::connect(client_addr(id)).await {
            if let Ok((0, pid, _)) = c.init_producer_id().await {
                ids.push(pid);
            }
        }
    }
    ids
}

/// What a run of the scenario varies.
#[derive(Debug, Clone, Copy)]
struct Knobs {
    /// Power losses among the faults.
    power: bool,
    /// The producers' acks (-1: all).
    acks: i16,
}

/// The scenario as CI runs it: acks=all, every kind of fault (power losses when asked).
async fn cluster_run(seed: u64, dir: std::path::PathBuf) -> Result<String, String> {
    let knobs = Knobs {
        power: power_losses(),
        acks: -1,
    };
    scenario(seed, dir, knobs).await
}

async fn scenario(seed: u64, dir: std::path::PathBuf, knobs: Knobs) -> Result<String, String> {
    let cluster = SimCluster::start(&dir, vec![(TOPIC.to_string(), 0)])?;
    cluster.formed().await?;
    cluster
        .create_topic(TOPIC, &[("min.insync.replicas", "2")])
        .await?;
    // Idempotent acks=all writes, one batch of one record at a time, each retried with its
    // sequence number until acknowledged; (value, offset) of each ack.
    let acked: Rc<RefCell<Vec<(u64, i64)>>> = Rc::new(RefCell::new(Vec::new()));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|k| runtime::spawn(produce(k, Rc::clone(&acked), knobs.acks)))
        .collect();
    // Producer ids handed out while brokers restart (each restart takes a new block from
    // the controller, which may be failing over): no id twice.
    let writing = Rc::new(std::cell::Cell::new(true));
    let ids = runtime::spawn(init_producer_ids(Rc::clone(&writing)));
    // Faults until the writes are done (see SimCluster::fault for the kinds).
    cluster
        .faults_while(|| acked.borrow().len() < TOTAL, knobs.power)
        .await?;
    for p in producers {
        p.await;
    }
    writing.set(false);
    let mut ids = ids.await;
    let handed = ids.len();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != handed {
        return Err(format!(
            "{} of {handed} producer ids were handed out twice",
            handed - ids.len()
        ));
    }
    cluster.heal();
    let acked = acked.borrow().clone();
    // Healed: every replica holds the leader's high watermark, which covers every ack (if it
    // never does, the checks below say which acknowledged record is missing).
    let hw = match cluster.caught_up(TOPIC, acked.len() as i64).await {
        Ok(hw) => hw,
        Err(_) => cluster.caught_up(TOPIC, 0).await?,
    };
    let mut logs = Vec::new();
    for (id, shard) in cluster.shards() {
        logs.push((id, batches_below(id, shard, hw).await?));
    }
    let first = batch_ids(&logs[0].1)?;
    for (id, bs) in &logs[1..] {
        if batch_ids(bs)? != first {
            return Err(format!(
                "broker {id}'s log differs from broker {}'s below the high watermark {hw}",
                logs[0].0
            ));
        }
    }
    // Every record of broker 1's log below the HW: offset → value.
    let mut values = std::collections::BTreeMap::new();
    for b in &logs[0].1 {
        for rec in decode_records(b).map_err(|e| e.to_string())? {
            if rec.offset < hw {
                values.insert(rec.offset, rec.value);
            }
        }
    }
    // Every acknowledged record is where its ack said.
    for (value, offset) in &acked {
        let found = values.get(offset);
        if found.cloned().flatten() != Some(value.to_be_bytes().to_vec()) {
            return Err(format!(
                "acknowledged record {value} at offset {offset} is not there (found {found:?})"
            ));
        }
    }
    // Checked after the acks: a producer that stalls on a sequence gap left by a lost write
    // is a symptom; the lost write is the finding.
    if acked.len() < TOTAL {
        return Err(format!(
            "only {} of {TOTAL} writes were acknowledged",
            acked.len()
        ));
    }
    // Exactly once: the log below the HW holds each acknowledged value once, nothing else.
    if hw != TOTAL as i64 {
        return Err(format!(
            "the high watermark is {hw} after {TOTAL} idempotent writes (duplicates or extras)"
        ));
    }
    let mut seen = std::collections::BTreeMap::new();
    for v in values.into_values() {
        *seen.entry(v.unwrap_or_default()).or_insert(0u32) += 1;
    }
    if let Some((v, n)) = seen.iter().find(|(_, n)| **n != 1) {
        return Err(format!("value {v:?} is in the log {n} times"));
    }
    cluster.crash_all();
    // The acknowledged offsets in the order they were acknowledged: two runs of one seed must
    // agree on them, not only on their count.
    let order: Vec<i64> = acked.iter().map(|a| a.1).collect();
    Ok(format!(
        "seed {seed}: {} acked, high watermark {hw}, {:?} of virtual time, {} polls {}, {handed} producer ids, acks at {order:?}",
        acked.len(),
        sim::elapsed(),
        sim::polls(),
        cluster.checked()
    ))
}

#[test]
fn acknowledged_writes_survive_crashes_and_partitions_of_the_real_broker() {
    run_seeds(cluster_run);
}

/// A seed is a replay: the same seed runs the same schedule to the same end (same faults,
/// acks at the same offsets in the same order, same virtual time and task polls), however
/// many runs came before it in the process. Without power losses: with them, one run in about
/// four takes another path from the first power loss on (by one task poll; the input from
/// outside the seed is not found yet).
#[test]
fn a_seed_replays_exactly() {
    log_if_asked();
    let seed = 5;
    let knobs = Knobs {
        power: false,
        acks: -1,
    };
    let without_power = |seed, dir| scenario(seed, dir, knobs);
    let first = run_seed(seed, without_power);
    let second = run_seed(seed, without_power);
    assert_eq!(first, second, "two runs of seed {seed} differ");
}

/// The checks are not vacuous: acks=1 writes, acknowledged by the leader alone, are lost when
/// it fails before its followers fetch them (Kafka's documented trade-off), and the checks
/// must say so within a few seeds.
#[test]
fn the_checks_catch_the_losses_of_acks_1() {
    log_if_asked();
    let knobs = Knobs {
        power: false,
        acks: 1,
    };
    let caught = (0..32)
        .find_map(|seed| run_seed_outcome(seed, move |seed, dir| scenario(seed, dir, knobs)).err());
    let caught = caught.expect("32 seeds of acks=1 writes under faults lost nothing");
    assert!(
        caught.contains("is not there"),
        "acks=1 failed otherwise than by a lost acknowledged write: {caught}"
    );
    eprintln!("acks=1 caught: {caught}");
}
