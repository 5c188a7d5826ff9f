//! A three-broker cluster of the real broker under the simulator: acks=all writes while
//! brokers crash and restart and links are cut, then, healed, every acknowledged record must
//! be in the log at the offset it was acknowledged with, and every replica's log the same
//! below the high watermark.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::broker::{self, client_addr, node_of, SimBroker};
use super::client::SimClient;
use super::invariants::LeaderInvariants;
use crate::protocol::batch_builder::{decode_records, BatchBuilder};
use crate::protocol::record_batch::BatchHeader;
use crate::runtime::sim::{self, net, SimConfig};
use crate::runtime::{self, Instant};
use crate::shard::Shard;

const IDS: [i32; 3] = [1, 2, 3];
const TOPIC: &str = "sim";
/// Records per producer.
const RECORDS: u64 = 60;
const PRODUCERS: u64 = 2;
const TOTAL: usize = (RECORDS * PRODUCERS) as usize;
const SEED_VAR: &str = "RINGBROKER_BROKER_SIM_SEED";
const SEEDS_VAR: &str = "RINGBROKER_BROKER_SIM_SEEDS";
const SEEDS: u64 = 8;

fn settings() -> Vec<(&'static str, &'static str)> {
    vec![
        ("controller.quorum.election.timeout.ms", "1000"),
        ("broker.heartbeat.interval.ms", "200"),
        ("broker.session.timeout.ms", "1500"),
        ("replica.lag.time.max.ms", "2000"),
        ("offsets.topic.replication.factor", "3"),
    ]
}

/// Connects to any broker that answers, trying them in turn.
async fn any_client(up: &[i32]) -> Option<(i32, SimClient)> {
    for &id in up {
        if let Ok(c) = SimClient::connect(client_addr(id)).await {
            return Some((id, c));
        }
    }
    None
}

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
async fn produce(k: u64, acked: Rc<RefCell<Vec<(u64, i64)>>>) {
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
    for i in 0..RECORDS {
        let value = k * 1_000_000 + i;
        // Paced, so that the faults fall among the writes.
        runtime::sleep(Duration::from_millis(sim::random_u64() % 300)).await;
        for _attempt in 0..600 {
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
                match c.produce(TOPIC, 0, b.finish(), -1).await {
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

async fn cluster_run(seed: u64, dir: std::path::PathBuf) -> Result<String, String> {
    let voters = broker::voters(&IDS);
    let extra = settings();
    let brokers: Rc<RefCell<Vec<SimBroker>>> = Rc::new(RefCell::new(
        IDS.iter()
            .map(|&id| {
                let d = dir.join(format!("broker-{id}"));
                let c = broker::config(id, &d, &voters, &extra)?;
                Ok(SimBroker::new(id, d, c))
            })
            .collect::<Result<_, String>>()?,
    ));
    for b in brokers.borrow_mut().iter_mut() {
        b.start();
    }
    let invariants = Rc::new(RefCell::new(LeaderInvariants::default()));
    {
        let (brokers, invariants) = (Rc::clone(&brokers), Rc::clone(&invariants));
        sim::check_every_step(move || {
            // A step that holds the list (a fault being injected) is checked at the next.
            let Ok(bs) = brokers.try_borrow() else {
                return Ok(());
            };
            invariants
                .borrow_mut()
                .check(TOPIC, 0, bs.iter().map(|b| (b.id, b.shard())))
        });
    }
    // The cluster forms: a broker answers with all three registered.
    let mut formed = false;
    for _ in 0..300 {
        runtime::sleep(Duration::from_millis(100)).await;
        if let Some((_, mut c)) = any_client(&IDS).await {
            if let Ok(m) = c.metadata(TOPIC).await {
                if m.brokers.len() == IDS.len() {
                    formed = true;
                    break;
                }
            }
        }
    }
    if !formed {
        return Err("the cluster did not form in 30 s".into());
    }
    let mut created = false;
    for _ in 0..100 {
        if let Some((_, mut c)) = any_client(&IDS).await {
            if let Ok(code) = c
                .create_topic(TOPIC, 1, 3, &[("min.insync.replicas", "2")])
                .await
            {
                if code == 0 || code == 36 {
                    created = true;
                    break;
                }
            }
        }
        runtime::sleep(Duration::from_millis(200)).await;
    }
    if !created {
        return Err("the topic was not created".into());
    }
    // Idempotent acks=all writes, one batch of one record at a time, each retried with its
    // sequence number until acknowledged; (value, offset) of each ack.
    let acked: Rc<RefCell<Vec<(u64, i64)>>> = Rc::new(RefCell::new(Vec::new()));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|k| runtime::spawn(produce(k, Rc::clone(&acked))))
        .collect();
    // Faults until the writes are done: a crash and restart, or a cut link and its heal.
    let mut faults = 0u32;
    let started = Instant::now();
    while acked.borrow().len() < TOTAL && started.elapsed() < Duration::from_secs(600) {
        runtime::sleep(Duration::from_millis(500 + sim::random_u64() % 1500)).await;
        let victim = IDS[(sim::random_u64() % 3) as usize];
        let other = IDS[(sim::random_u64() % 3) as usize];
        let hold = Duration::from_millis(300 + sim::random_u64() % 3000);
        if sim::random_u64() % 2 == 0 {
            brokers.borrow_mut()[(victim - 1) as usize].crash();
            runtime::sleep(hold).await;
            brokers.borrow_mut()[(victim - 1) as usize].start();
        } else if victim != other {
            net::partition(node_of(victim), node_of(other));
            runtime::sleep(hold).await;
            net::heal(node_of(victim), node_of(other));
        }
        faults += 1;
    }
    for p in producers {
        p.await;
    }
    net::heal_all();
    let acked = acked.borrow().clone();
    if acked.len() < TOTAL {
        return Err(format!(
            "only {} of {TOTAL} writes were acknowledged",
            acked.len()
        ));
    }
    // Healed: wait until every replica holds the leader's high watermark.
    let mut hw = -1;
    for _ in 0..600 {
        runtime::sleep(Duration::from_millis(100)).await;
        let bs = brokers.borrow();
        let mut ends = Vec::new();
        for b in bs.iter() {
            if let Some(p) = b.shard().and_then(|s| s.partitions.get(TOPIC, 0)) {
                ends.push((p.log.offsets().log_end_offset, p.high_watermark()));
            }
        }
        let max_hw = ends.iter().map(|e| e.1).max().unwrap_or(-1);
        if ends.len() == 3 && ends.iter().all(|e| e.0 >= max_hw) && max_hw >= acked.len() as i64 {
            hw = max_hw;
            break;
        }
    }
    if hw < 0 {
        return Err("the replicas did not catch up after healing".into());
    }
    // Every acknowledged record is where its ack said, in the leader's log.
    let shards: Vec<(i32, Option<Rc<Shard>>)> =
        brokers.borrow().iter().map(|b| (b.id, b.shard())).collect();
    let mut logs = Vec::new();
    for (id, shard) in shards {
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
    for b in brokers.borrow_mut().iter_mut() {
        b.crash();
    }
    // The acknowledged offsets in the order they were acknowledged: two runs of one seed must
    // agree on them, not only on their count.
    let order: Vec<i64> = acked.iter().map(|a| a.1).collect();
    let (steps, epochs) = {
        let i = invariants.borrow();
        (i.steps, i.epochs())
    };
    Ok(format!(
        "seed {seed}: {faults} faults, {} acked, high watermark {hw}, {:?} of virtual time, {} polls ({steps} checked), {epochs} leader epochs, acks at {order:?}",
        acked.len(),
        sim::elapsed(),
        sim::polls()
    ))
}

fn seeds() -> Vec<u64> {
    if let Some(s) = std::env::var(SEED_VAR).ok().and_then(|v| v.parse().ok()) {
        return vec![s];
    }
    let n = std::env::var(SEEDS_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SEEDS);
    (0..n).collect()
}

fn log_if_asked() {
    if std::env::var("RUST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// One seed's run, to its summary (panics, naming the seed, when a check fails).
fn run_seed(seed: u64) -> String {
    // On tmpfs when there is one: the brokers' fsyncs are real system calls, and the
    // simulation does not need them to reach a disk.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir");
    let path = dir.path().to_path_buf();
    // A run takes ~20–120k polls: a livelock (tasks that run on without time moving) fails
    // at the limit instead of hanging.
    let config = SimConfig {
        max_time: Duration::from_secs(1800),
        max_polls: 5_000_000,
        ..SimConfig::seeded(seed)
    };
    match sim::run(config, cluster_run(seed, path)) {
        Ok(Ok(summary)) => summary,
        Ok(Err(e)) => panic!("seed {seed} failed: {e} (replay: {SEED_VAR}={seed})"),
        Err(e) => panic!("seed {seed}: {e} (replay: {SEED_VAR}={seed})"),
    }
}

#[test]
fn acknowledged_writes_survive_crashes_and_partitions_of_the_real_broker() {
    log_if_asked();
    for seed in seeds() {
        eprintln!("{}", run_seed(seed));
    }
}

/// A seed is a replay: the same seed runs the same schedule to the same end (same faults,
/// acks at the same offsets in the same order, same virtual time and task polls), however
/// many runs came before it in the process.
#[test]
fn a_seed_replays_exactly() {
    log_if_asked();
    let seed = 5;
    let first = run_seed(seed);
    let second = run_seed(seed);
    assert_eq!(first, second, "two runs of seed {seed} differ");
}
