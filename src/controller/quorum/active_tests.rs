//! The active controller's loop on a one-voter quorum: a broker that goes silent is fenced
//! even while another broker heartbeats more often than the loop's session check (the check
//! once ran only after a whole tick without any request, so steady heartbeats starved it
//! and a killed broker stayed leader). Bounded by a count of heartbeats, not a wall clock.

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

async fn heartbeat(
    node: &QuorumNode,
    calls: &LocalSender<BrokerCall>,
    id: i32,
    epoch: BrokerEpoch,
) {
    let request = ControllerRequest::BrokerHeartbeat(Heartbeat {
        broker_id: BrokerId(id),
        broker_epoch: epoch,
        applied_offset: node.view().applied_offset(),
        want_fence: false,
        want_shutdown: false,
    });
    call(calls, request).await;
}

fn unfenced(node: &QuorumNode, id: i32) -> bool {
    node.view().get().is_unfenced(BrokerId(id))
}

#[test]
fn a_silent_broker_is_fenced_while_another_heartbeats_faster_than_the_tick() {
    let root = tempfile::tempdir().expect("tempdir");
    runtime::block_on(async {
        let listener =
            TcpListener::bind_exclusive("127.0.0.1:0".parse().expect("addr")).expect("bind");
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

        let silent = register(&calls_tx, 10).await;
        let live = register(&calls_tx, 11).await;
        let mut both_unfenced = false;
        for _ in 0..MAX_HEARTBEATS {
            heartbeat(&node, &calls_tx, 10, silent).await;
            heartbeat(&node, &calls_tx, 11, live).await;
            if unfenced(&node, 10) && unfenced(&node, 11) {
                both_unfenced = true;
                break;
            }
            runtime::sleep(HEARTBEAT_EVERY).await;
        }
        assert!(
            both_unfenced,
            "both brokers were unfenced by their heartbeats"
        );

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

        shutdown.trigger();
        loop_task.await;
        Rc::try_unwrap(node)
            .ok()
            .expect("the loop let go of the node")
            .shutdown()
            .await;
    })
    .expect("executor");
}
