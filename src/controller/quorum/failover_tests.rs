//! The active controller across a failover, on three voters in one executor with their
//! controller loops: a new leader whose state machine has not applied what the previous
//! leader committed must not decide on that older view (issue 32, finding 2: the same
//! producer-id block handed to two brokers, so the second producer's first batch is taken as a
//! duplicate, acknowledged and never written). Every wait is bounded by a count of rounds.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use super::active;
use super::node::{QuorumConfig, QuorumNode};
use super::server::BrokerCall;
use super::test_support::{call, voter_addresses};
use super::wire::{ControllerRequest, ControllerResponse};
use crate::controller::active_controller::ControllerConfig;
use crate::controller::broker_lifecycle::BrokerRegistrationRequest;
use crate::model::{BrokerEpoch, BrokerId};
use crate::runtime::{self, LocalSender, Task, TcpListener};
use crate::util::shutdown::ShutdownSignal;

const MAX_ROUNDS: usize = 400;
const ROUND: Duration = Duration::from_millis(50);

struct Voter {
    node: Rc<QuorumNode>,
    calls: LocalSender<BrokerCall>,
    gate: Rc<Cell<bool>>,
    shutdown: Rc<ShutdownSignal>,
    controller: Task<()>,
}

impl Voter {
    async fn stop(self) {
        self.shutdown.trigger();
        self.controller.await;
        Rc::try_unwrap(self.node)
            .ok()
            .expect("the loop let go of the node")
            .shutdown()
            .await;
    }
}

async fn start(
    id: i32,
    addr: SocketAddr,
    voters: &[(BrokerId, String)],
    root: &std::path::Path,
) -> Voter {
    let listener = TcpListener::bind_exclusive(addr).expect("binds the controller port");
    let gate = Rc::new(Cell::new(false));
    let config = QuorumConfig {
        election_timeout_ms: 150,
        heartbeat_interval_ms: 30,
        apply_gate: Some(Rc::clone(&gate)),
        ..QuorumConfig::new(
            BrokerId(id),
            voters.to_vec(),
            root.join(format!("node-{id}")),
        )
    };
    let node = Rc::new(
        QuorumNode::start(config, listener, None)
            .await
            .expect("node starts"),
    );
    let (calls, calls_rx) = runtime::local_channel(64);
    let shutdown = Rc::new(ShutdownSignal::new());
    let controller = runtime::spawn(active::run(
        Rc::clone(&node),
        calls_rx,
        ControllerConfig::default(),
        Duration::from_millis(100),
        Rc::clone(&shutdown),
    ));
    Voter {
        node,
        calls,
        gate,
        shutdown,
        controller,
    }
}

/// The index of the voter every live one agrees leads.
async fn leader(voters: &[Option<Voter>]) -> usize {
    for _ in 0..MAX_ROUNDS {
        let live: Vec<&Voter> = voters.iter().flatten().collect();
        let leaders: Vec<_> = live.iter().map(|v| v.node.status().leader).collect();
        if let Some(Some(l)) = leaders.first() {
            let index = (l.0 - 1) as usize;
            if leaders.iter().all(|x| x == &Some(*l))
                && voters[index]
                    .as_ref()
                    .is_some_and(|v| v.node.status().is_leader)
            {
                return index;
            }
        }
        live[0].node.changed(ROUND).await;
    }
    panic!("no leader agreed on within {MAX_ROUNDS} rounds");
}

/// Asks until an answer that is not NOT_CONTROLLER comes.
async fn ask(
    calls: &LocalSender<BrokerCall>,
    request: impl Fn() -> ControllerRequest,
) -> ControllerResponse {
    for _ in 0..MAX_ROUNDS {
        match call(calls, request()).await {
            ControllerResponse::NotController { .. } => runtime::sleep(ROUND).await,
            answer => return answer,
        }
    }
    panic!("no answer to {:?} in {MAX_ROUNDS} rounds", request());
}

async fn register(calls: &LocalSender<BrokerCall>, id: i32) -> BrokerEpoch {
    let request = || {
        ControllerRequest::RegisterBroker(BrokerRegistrationRequest {
            broker_id: BrokerId(id),
            incarnation: uuid::Uuid::from_u128(id as u128),
            endpoints: Vec::new(),
            rack: None,
        })
    };
    match ask(calls, request).await {
        ControllerResponse::Registered { broker_epoch } => broker_epoch,
        other => panic!("broker {id} not registered: {other:?}"),
    }
}

async fn block(calls: &LocalSender<BrokerCall>, id: i32, epoch: BrokerEpoch) -> Option<(i64, i64)> {
    let request = || ControllerRequest::AllocateProducerIds {
        broker_id: BrokerId(id),
        broker_epoch: epoch,
    };
    match ask(calls, request).await {
        ControllerResponse::ProducerIds { start, end } => Some((start, end)),
        _ => None,
    }
}

#[test]
fn a_new_leader_behind_its_log_does_not_hand_out_a_producer_id_block_twice() {
    let root = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (addrs, ids) = voter_addresses(3);
        let mut voters = Vec::new();
        for (i, addr) in addrs.iter().enumerate() {
            voters.push(Some(start(i as i32 + 1, *addr, &ids, root.path()).await));
        }
        let first = leader(&voters).await;
        let epoch_7 = register(&voters[first].as_ref().expect("live").calls, 7).await;
        let epoch_8 = register(&voters[first].as_ref().expect("live").calls, 8).await;
        // Everyone has the registrations; then the followers stop applying (their logs still
        // take every entry, so either can win the next election).
        for _ in 0..MAX_ROUNDS {
            let everywhere = voters.iter().flatten().all(|v| {
                let meta = v.node.view().get();
                meta.broker(BrokerId(7)).is_some() && meta.broker(BrokerId(8)).is_some()
            });
            if everywhere {
                break;
            }
            runtime::sleep(ROUND).await;
        }
        for (i, v) in voters.iter().enumerate() {
            if i != first {
                v.as_ref().expect("live").gate.set(true);
            }
        }
        let given_to_7 = block(&voters[first].as_ref().expect("live").calls, 7, epoch_7)
            .await
            .expect("a block for broker 7");

        // The leader goes; a follower that has the block's entry but not applied it leads.
        voters[first].take().expect("leader").stop().await;
        let second = leader(&voters).await;
        // Its state machine catches up a little later, as a loaded one would.
        let gates: Vec<Rc<Cell<bool>>> = voters
            .iter()
            .flatten()
            .map(|v| Rc::clone(&v.gate))
            .collect();
        runtime::spawn_detached(async move {
            runtime::sleep(Duration::from_millis(300)).await;
            for g in gates {
                g.set(false);
            }
        });
        let given_to_8 = block(&voters[second].as_ref().expect("live").calls, 8, epoch_8)
            .await
            .expect("a block for broker 8");
        assert!(
            given_to_8.0 >= given_to_7.1 || given_to_8.1 <= given_to_7.0,
            "broker 7 was given {given_to_7:?}, broker 8 {given_to_8:?}: the same producer ids"
        );
        for v in voters.into_iter().flatten() {
            v.stop().await;
        }
    })
    .expect("executor");
}
