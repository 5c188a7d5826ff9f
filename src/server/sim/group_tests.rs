//! Committed offsets across group coordinator failover, on the real broker under the
//! simulator: a committer commits increasing offsets for a group while brokers crash and
//! links are cut (the coordinator with them, as `__consumer_offsets`' leadership moves), and a
//! reader keeps fetching the group's offset. A commit once acknowledged must never be read
//! back lower, from any coordinator, and after healing the last one must be what is read.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use super::broker::client_addr;
use super::client::SimClient;
use super::cluster::{any_client, power_losses, run_seeds, SimCluster, IDS};
use crate::runtime;
use crate::runtime::sim;

const OFFSETS_TOPIC: &str = "__consumer_offsets";
const TOPIC: &str = "sim";
const GROUP: &str = "sim-group";
const COMMITS: i64 = 60;

/// A connection to `GROUP`'s coordinator, found through any broker.
async fn coordinator() -> Option<SimClient> {
    let (_, mut c) = any_client(&IDS).await?;
    match c.find_coordinator(GROUP).await {
        Ok((0, node)) => SimClient::connect(client_addr(node)).await.ok(),
        _ => None,
    }
}

/// Commits 1..=COMMITS in order, each retried until acknowledged; `acked` is the last
/// acknowledged.
async fn commit_all(acked: Rc<Cell<i64>>) {
    let mut client: Option<SimClient> = None;
    for offset in 1..=COMMITS {
        runtime::sleep(Duration::from_millis(sim::random_u64() % 300)).await;
        for _attempt in 0..600 {
            if client.is_none() {
                client = coordinator().await;
            }
            if let Some(c) = client.as_mut() {
                match c.commit_offset(GROUP, TOPIC, 0, offset).await {
                    Ok(0) => {
                        acked.set(offset);
                        break;
                    }
                    // Not the coordinator, loading, not available, a timeout: find it again.
                    _ => client = None,
                }
            }
            runtime::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Reads the committed offset until `done`; an answer below what was acknowledged before
/// the read was sent is a regression (the first is returned).
async fn read_until(done: Rc<Cell<bool>>, acked: Rc<Cell<i64>>) -> (u32, Option<String>) {
    let mut reads = 0;
    let mut client: Option<SimClient> = None;
    while !done.get() && reads < 100_000 {
        runtime::sleep(Duration::from_millis(50 + sim::random_u64() % 200)).await;
        if client.is_none() {
            client = coordinator().await;
        }
        let Some(c) = client.as_mut() else { continue };
        let floor = acked.get();
        match c.fetch_offset(GROUP, TOPIC, 0).await {
            Ok((0, offset)) => {
                reads += 1;
                if offset < floor {
                    return (
                        reads,
                        Some(format!(
                            "the committed offset read back as {offset} after {floor} was acknowledged \
                             (at {:?})",
                            sim::elapsed()
                        )),
                    );
                }
            }
            _ => client = None,
        }
    }
    (reads, None)
}

async fn group_run(seed: u64, dir: std::path::PathBuf) -> Result<String, String> {
    let cluster = SimCluster::start(
        &dir,
        vec![(OFFSETS_TOPIC.to_string(), 0), (TOPIC.to_string(), 0)],
    )?;
    cluster.formed().await?;
    cluster
        .create_topic(TOPIC, &[("min.insync.replicas", "2")])
        .await?;
    // -1: nothing committed yet (what OffsetFetch answers then).
    let acked = Rc::new(Cell::new(-1i64));
    let done = Rc::new(Cell::new(false));
    let committer = runtime::spawn(commit_all(Rc::clone(&acked)));
    let reader = runtime::spawn(read_until(Rc::clone(&done), Rc::clone(&acked)));
    cluster
        .faults_while(|| acked.get() < COMMITS, power_losses())
        .await?;
    committer.await;
    cluster.heal();
    if acked.get() < COMMITS {
        return Err(format!(
            "only {} of {COMMITS} commits were acknowledged",
            acked.get()
        ));
    }
    // Healed: the coordinator, wherever it is now, reads back the last commit.
    let mut last = None;
    for _ in 0..300 {
        runtime::sleep(Duration::from_millis(100)).await;
        if let Some(mut c) = coordinator().await {
            if let Ok((0, offset)) = c.fetch_offset(GROUP, TOPIC, 0).await {
                last = Some(offset);
                break;
            }
        }
    }
    done.set(true);
    let (reads, regression) = reader.await;
    if let Some(r) = regression {
        return Err(r);
    }
    if last != Some(COMMITS) {
        return Err(format!(
            "after healing the group's committed offset reads {last:?}, not {COMMITS}"
        ));
    }
    cluster.crash_all();
    Ok(format!(
        "seed {seed}: {COMMITS} commits acknowledged, {reads} reads, {:?} of virtual time, {} polls {}",
        sim::elapsed(),
        sim::polls(),
        cluster.checked()
    ))
}

#[test]
fn committed_offsets_survive_coordinator_failover_of_the_real_broker() {
    run_seeds(group_run);
}
