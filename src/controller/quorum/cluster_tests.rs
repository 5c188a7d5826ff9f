//! Three voters on loopback ports in one glommio executor: they elect a leader, commit
//! proposals, and after the leader stops the other two elect a new one that still has every
//! committed entry; the stopped node restarts from its files and catches up. Every wait is
//! bounded by a count of waits (each itself bounded), not by a wall-clock threshold.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::node::{QuorumConfig, QuorumNode};
use super::test_support::{register, voter_addresses};
use crate::model::{BrokerId, MetadataOffset};
use crate::runtime::{self, TcpListener};

/// Rounds of waiting for a change of some node's Raft state.
const MAX_ROUNDS: usize = 400;
const ROUND: Duration = Duration::from_millis(50);

fn config(id: i32, voters: &[(BrokerId, String)], root: &Path) -> QuorumConfig {
    QuorumConfig {
        election_timeout_ms: 150,
        heartbeat_interval_ms: 30,
        // Small, so the run also takes snapshots and purges the log.
        snapshot_after_entries: 4,
        ..QuorumConfig::new(
            BrokerId(id),
            voters.to_vec(),
            root.join(format!("node-{id}")),
        )
    }
}

async fn start(
    id: i32,
    addr: SocketAddr,
    voters: &[(BrokerId, String)],
    root: &Path,
) -> QuorumNode {
    let listener = TcpListener::bind_exclusive(addr).expect("binds the controller port");
    QuorumNode::start(config(id, voters, root), listener, None)
        .await
        .expect("node starts")
}

/// Waits until one of `nodes` is leader and every one of them knows it.
async fn leader_of(nodes: &[&QuorumNode]) -> BrokerId {
    for _ in 0..MAX_ROUNDS {
        let leaders: Vec<_> = nodes.iter().map(|n| n.status().leader).collect();
        if let Some(Some(leader)) = leaders.first() {
            let agreed = leaders.iter().all(|l| *l == Some(*leader));
            let is_member = nodes
                .iter()
                .any(|n| n.node_id() == *leader && n.status().is_leader);
            if agreed && is_member {
                return *leader;
            }
        }
        nodes[0].changed(ROUND).await;
    }
    let states: Vec<_> = nodes.iter().map(|n| (n.status(), n.failure())).collect();
    panic!("no leader agreed on within {MAX_ROUNDS} rounds: {states:#?}");
}

async fn applied_everywhere(nodes: &[&QuorumNode], offset: MetadataOffset) {
    for _ in 0..MAX_ROUNDS {
        if nodes
            .iter()
            .all(|n| n.view().applied_offset() >= Some(offset))
        {
            return;
        }
        runtime::sleep(ROUND).await;
    }
    let applied: Vec<_> = nodes.iter().map(|n| n.view().applied_offset()).collect();
    panic!("offset {offset:?} not applied everywhere: {applied:?}");
}

fn registered(node: &QuorumNode) -> Vec<i32> {
    node.view().get().brokers().map(|b| b.id.0).collect()
}

#[test]
fn three_voters_elect_commit_and_survive_losing_the_leader() {
    let root = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (addrs, voters) = voter_addresses(3);
        let mut nodes = Vec::new();
        for (i, addr) in addrs.iter().enumerate() {
            nodes.push(Some(start(i as i32 + 1, *addr, &voters, root.path()).await));
        }
        let live = |nodes: &Vec<Option<QuorumNode>>| -> Vec<usize> {
            (0..nodes.len()).filter(|i| nodes[*i].is_some()).collect()
        };
        let first_leader = {
            let refs: Vec<&QuorumNode> = nodes.iter().flatten().collect();
            leader_of(&refs).await
        };
        let leader_index = (first_leader.0 - 1) as usize;
        // Single-record and multi-record batches; offsets number records, not batches.
        let mut last = MetadataOffset(0);
        for id in [10, 11] {
            let offset = nodes[leader_index]
                .as_ref()
                .expect("leader")
                .propose(vec![register(id)])
                .await
                .expect("committed");
            assert!(offset > last);
            last = offset;
        }
        let offset = nodes[leader_index]
            .as_ref()
            .expect("leader")
            .propose((12..17).map(register).collect())
            .await
            .expect("committed");
        assert_eq!(offset, MetadataOffset(last.0 + 1));
        last = MetadataOffset(offset.0 + 4);
        // A follower refuses proposals and names the leader.
        let follower = live(&nodes)
            .into_iter()
            .find(|i| *i != leader_index)
            .expect("a follower");
        let refused = nodes[follower]
            .as_ref()
            .expect("follower")
            .propose(vec![register(99)])
            .await;
        assert_eq!(
            refused,
            Err(super::ProposeError::NotLeader(super::NotLeader {
                leader: Some(first_leader)
            }))
        );
        {
            let refs: Vec<&QuorumNode> = nodes.iter().flatten().collect();
            applied_everywhere(&refs, last).await;
        }
        let before: Vec<i32> = (10..17).collect();
        for node in nodes.iter().flatten() {
            assert_eq!(registered(node), before);
        }

        // The leader stops; the other two elect a new one holding every committed entry.
        nodes[leader_index].take().expect("leader").shutdown().await;
        let second_leader = {
            let refs: Vec<&QuorumNode> = nodes.iter().flatten().collect();
            leader_of(&refs).await
        };
        assert_ne!(second_leader, first_leader);
        let new_index = (second_leader.0 - 1) as usize;
        assert_eq!(
            registered(nodes[new_index].as_ref().expect("new leader")),
            before
        );
        let offset = nodes[new_index]
            .as_ref()
            .expect("new leader")
            .propose(vec![register(20)])
            .await
            .expect("committed by two of three");
        assert!(offset > last);

        // The old leader restarts from its files and catches up (log, vote, snapshot).
        nodes[leader_index] =
            Some(start(first_leader.0, addrs[leader_index], &voters, root.path()).await);
        let refs: Vec<&QuorumNode> = nodes.iter().flatten().collect();
        applied_everywhere(&refs, offset).await;
        let after: Vec<i32> = (10..17).chain([20]).collect();
        for node in &refs {
            assert_eq!(registered(node), after);
        }
        drop(refs);
        for node in nodes.into_iter().flatten() {
            node.shutdown().await;
        }
    })
    .expect("executor");
}
