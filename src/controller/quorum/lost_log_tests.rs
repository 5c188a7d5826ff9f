//! A voter whose metadata log was lost is not started (issue 32, finding 7): found by the
//! marker beside its log directory, or, with the whole data directory gone, by the leader's
//! knowledge of what it had replicated there. Every wait is bounded by a count of rounds.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::node::{QuorumConfig, QuorumError, QuorumNode};
use super::test_support::{register, voter_addresses};
use crate::model::BrokerId;
use crate::runtime::{self, TcpListener};

const MAX_ROUNDS: usize = 400;
const ROUND: Duration = Duration::from_millis(50);

fn config(id: i32, voters: &[(BrokerId, String)], root: &Path) -> QuorumConfig {
    QuorumConfig {
        election_timeout_ms: 150,
        heartbeat_interval_ms: 30,
        ..QuorumConfig::new(
            BrokerId(id),
            voters.to_vec(),
            root.join(format!("node-{id}")).join("__cluster_metadata-0"),
        )
    }
}

async fn start(
    id: i32,
    addr: SocketAddr,
    voters: &[(BrokerId, String)],
    root: &Path,
) -> Result<QuorumNode, QuorumError> {
    // A stopped node's listener closes in the background: its port frees a moment later.
    let mut bound = None;
    for _ in 0..MAX_ROUNDS {
        match TcpListener::bind_exclusive(addr) {
            Ok(l) => {
                bound = Some(l);
                break;
            }
            Err(_) => runtime::sleep(ROUND).await,
        }
    }
    let listener = bound.expect("binds the controller port");
    QuorumNode::start(config(id, voters, root), listener, None).await
}

async fn propose_on_leader(nodes: &[&QuorumNode], id: i32) {
    for _ in 0..MAX_ROUNDS {
        for n in nodes {
            if n.status().is_leader && n.propose(vec![register(id)]).await.is_ok() {
                return;
            }
        }
        runtime::sleep(ROUND).await;
    }
    panic!("nothing committed in {MAX_ROUNDS} rounds");
}

#[test]
fn a_voter_whose_log_directory_was_wiped_is_not_started() {
    let root = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (addrs, voters) = voter_addresses(1);
        let node = start(1, addrs[0], &voters, root.path())
            .await
            .expect("starts");
        propose_on_leader(&[&node], 10).await;
        node.shutdown().await;
        let dir = root.path().join("node-1").join("__cluster_metadata-0");
        std::fs::remove_dir_all(&dir).expect("wipe the log directory");
        match start(1, addrs[0], &voters, root.path()).await {
            Err(QuorumError::LostLog { evidence, .. }) => {
                assert!(evidence.contains(".voter"), "{evidence}")
            }
            Ok(_) => panic!("a voter with a lost log started"),
            Err(e) => panic!("refused for another reason: {e}"),
        }
    })
    .expect("executor");
}

#[test]
fn a_voter_whose_whole_data_directory_was_wiped_is_refused_by_what_the_leader_knows() {
    let root = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (addrs, voters) = voter_addresses(3);
        let mut nodes = Vec::new();
        for (i, addr) in addrs.iter().enumerate() {
            nodes.push(Some(
                start(i as i32 + 1, *addr, &voters, root.path())
                    .await
                    .expect("starts"),
            ));
        }
        {
            let live: Vec<&QuorumNode> = nodes.iter().flatten().collect();
            propose_on_leader(&live, 10).await;
            propose_on_leader(&live, 11).await;
        }
        // A follower that the leader replicated to goes, and its data directory with it.
        let leader_index = |nodes: &Vec<Option<QuorumNode>>| {
            nodes
                .iter()
                .position(|n| n.as_ref().is_some_and(|n| n.status().is_leader))
        };
        let mut follower = None;
        for _ in 0..MAX_ROUNDS {
            if let Some(l) = leader_index(&nodes) {
                let leader = nodes[l].as_ref().expect("leader").status();
                // Wait until the leader knows a follower holds both entries.
                follower = (0..3).find(|i| {
                    *i != l
                        && leader
                            .voter_log_ends
                            .get(&BrokerId(*i as i32 + 1))
                            .copied()
                            .flatten()
                            .is_some_and(|end| end >= 2)
                });
                if follower.is_some() {
                    break;
                }
            }
            runtime::sleep(ROUND).await;
        }
        let follower = follower.expect("a follower the leader replicated to");
        nodes[follower].take().expect("follower").shutdown().await;
        std::fs::remove_dir_all(root.path().join(format!("node-{}", follower + 1)))
            .expect("wipe the data directory");
        match start(follower as i32 + 1, addrs[follower], &voters, root.path()).await {
            Err(QuorumError::LostLog { evidence, .. }) => {
                assert!(evidence.contains("replicated"), "{evidence}")
            }
            Ok(_) => panic!("a voter with a lost log started"),
            Err(e) => panic!("refused for another reason: {e}"),
        }
        for n in nodes.into_iter().flatten() {
            n.shutdown().await;
        }
    })
    .expect("executor");
}
