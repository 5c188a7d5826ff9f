//! The active controller's loop on a one-voter quorum: a broker that goes silent is fenced
//! even while another broker heartbeats more often than the loop's session check (the check
//! once ran only after a whole tick without any request, so steady heartbeats starved it
//! and a killed broker stayed leader). Bounded by a count of heartbeats, not a wall clock.
//! And a broker whose heartbeat waits in the loop's queue while the loop is busy is not fenced
//! (the check once ran before the queued heartbeats were read: partitions_test.py saw a cut of
//! one broker's replication make the controller, busy with dozens of ISR changes, fence the
//! two others and move every partition to the cut broker).

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use super::active;
use super::node::{QuorumConfig, QuorumNode};
use super::server::BrokerCall;
use super::test_support::call;
use super::wire::{ControllerRequest, ControllerResponse};
use crate::controller::active_controller::ControllerConfig;
use crate::controller::broker_lifecycle::{BrokerRegistrationRequest, Heartbeat};
use crate::model::{BrokerEpoch, BrokerId};
use crate::runtime::{self, LocalSender, TcpListener};
use crate::util::local_oneshot;
use crate::util::shutdown::ShutdownSignal;

const TICK: Duration = Duration::from_millis(100);
const SESSION_MS: u64 = 400;
/// Heartbeats of the live broker: 4 per tick, far under the tick's length apart.
const HEARTBEAT_EVERY: Duration = Duration::from_millis(25);
/// 1,200 heartbeats at 25 ms are 30 sessions; the silent broker is fenced after about one.
const MAX_HEARTBEATS: usize = 1_200;

async fn register(calls: &LocalSender<BrokerCall>, id: i32) -> BrokerEpoch {
    let request = BrokerRegistrationRequest {
        broker_id: BrokerId(id),
        incarnation: uuid::Uuid::from_u128(id as u128),
        endpoints: Vec::new(),
        rack: None,
    };
    for _ in 0..MAX_HEARTBEATS {
        match call(calls, ControllerRequest::RegisterBroker(request.clone())).await {
            ControllerResponse::Registered { broker_epoch } => return broker_epoch,
            // Not leading yet: the one voter elects itself after an election timeout.
            _ => runtime::sleep(HEARTBEAT_EVERY).await,
        }
    }
    panic!("broker {id} never registered");
}

fn heartbeat_request(node: &QuorumNode, id: i32, epoch: BrokerEpoch) -> ControllerRequest {
    ControllerRequest::BrokerHeartbeat(Heartbeat {
        broker_id: BrokerId(id),
        broker_epoch: epoch,
        applied_offset: node.view().applied_offset(),
        want_fence: false,
        want_shutdown: false,
    })
}

async fn heartbeat(
    node: &QuorumNode,
    calls: &LocalSender<BrokerCall>,
    id: i32,
    epoch: BrokerEpoch,
) {
    call(calls, heartbeat_request(node, id, epoch)).await;
}

fn unfenced(node: &QuorumNode, id: i32) -> bool {
    node.view().get().is_unfenced(BrokerId(id))
}

/// A one-voter quorum and the controller loop on it.
async fn start(
    root: &tempfile::TempDir,
) -> (
    Rc<QuorumNode>,
    LocalSender<BrokerCall>,
    Rc<ShutdownSignal>,
    runtime::Task<()>,
) {
    let listener = TcpListener::bind_exclusive("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    let voters = vec![(BrokerId(1), addr.to_string())];
    let config = QuorumConfig {
        election_timeout_ms: 150,
        heartbeat_interval_ms: 30,
        ..QuorumConfig::new(BrokerId(1), voters, root.path().join("node-1"))
    };
    let (calls_tx, calls_rx) = runtime::local_channel(64);
    let node = Rc::new(
        QuorumNode::start(config, listener, None)
            .await
            .expect("node starts"),
    );
    let shutdown = Rc::new(ShutdownSignal::new());
    let controller = ControllerConfig {
        session_timeout_ms: SESSION_MS,
        ..ControllerConfig::default()
    };
    let loop_task = runtime::spawn(active::run(
        Rc::clone(&node),
        calls_rx,
        controller,
        TICK,
        Rc::clone(&shutdown),
    ));
    (node, calls_tx, shutdown, loop_task)
}

async fn stop(node: Rc<QuorumNode>, shutdown: Rc<ShutdownSignal>, loop_task: runtime::Task<()>) {
    shutdown.trigger();
    loop_task.await;
    Rc::try_unwrap(node)
        .ok()
        .expect("the loop let go of the node")
        .shutdown()
        .await;
}

/// Registers brokers 10 and 11 and heartbeats until both are unfenced.
async fn two_unfenced(
    node: &QuorumNode,
    calls: &LocalSender<BrokerCall>,
) -> (BrokerEpoch, BrokerEpoch) {
    let first = register(calls, 10).await;
    let second = register(calls, 11).await;
    for _ in 0..MAX_HEARTBEATS {
        heartbeat(node, calls, 10, first).await;
        heartbeat(node, calls, 11, second).await;
        if unfenced(node, 10) && unfenced(node, 11) {
            return (first, second);
        }
        runtime::sleep(HEARTBEAT_EVERY).await;
    }
    panic!("the brokers were never unfenced by their heartbeats");
}

#[test]
fn a_silent_broker_is_fenced_while_another_heartbeats_faster_than_the_tick() {
    let root = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (node, calls_tx, shutdown, loop_task) = start(&root).await;
        let (_silent, live) = two_unfenced(&node, &calls_tx).await;

        // Broker 10 goes silent; broker 11 keeps heartbeating four times per tick.
        let mut fenced_after = None;
        for sent in 0..MAX_HEARTBEATS {
            heartbeat(&node, &calls_tx, 11, live).await;
            if !unfenced(&node, 10) {
                fenced_after = Some(sent);
                break;
            }
            runtime::sleep(HEARTBEAT_EVERY).await;
        }
        assert!(
            fenced_after.is_some(),
            "the silent broker was never fenced in {MAX_HEARTBEATS} heartbeats of the other"
        );
        assert!(
            unfenced(&node, 11),
            "the heartbeating broker stays unfenced"
        );

        stop(node, shutdown, loop_task).await;
    })
    .expect("executor");
}

#[test]
fn a_heartbeat_queued_while_the_loop_is_busy_keeps_its_broker_unfenced() {
    let root = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let (node, calls_tx, shutdown, loop_task) = start(&root).await;
        let (first, second) = two_unfenced(&node, &calls_tx).await;

        // Both brokers heartbeat, then the loop does not get to read either for longer than a
        // session (here the whole shard stalls; in a cluster it was answering ISR changes one
        // commit at a time). Once it runs, its session check is due before the second
        // heartbeat is read: that broker was alive all along.
        let (tx_first, rx_first) = local_oneshot::channel();
        let (tx_second, rx_second) = local_oneshot::channel();
        calls_tx
            .send((heartbeat_request(&node, 10, first), tx_first))
            .await
            .expect("the loop runs");
        calls_tx
            .send((heartbeat_request(&node, 11, second), tx_second))
            .await
            .expect("the loop runs");
        std::thread::sleep(Duration::from_millis(SESSION_MS) + 2 * TICK);
        for (id, rx) in [(10, rx_first), (11, rx_second)] {
            match rx.await.expect("the loop answers") {
                ControllerResponse::Heartbeat(reply) => assert!(
                    !reply.fenced,
                    "broker {id}, whose heartbeat waited in the queue, was fenced"
                ),
                other => panic!("broker {id}'s heartbeat answered {other:?}"),
            }
            assert!(unfenced(&node, id), "broker {id} stays unfenced");
        }

        stop(node, shutdown, loop_task).await;
    })
    .expect("executor");
}
