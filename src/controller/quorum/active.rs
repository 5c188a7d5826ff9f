//! The active controller's loop on a voter: while this node leads the metadata quorum it
//! answers brokers' registrations and heartbeats and ticks the [`ActiveController`]
//! (fencing brokers whose session ran out), proposing what it decides. A new term where this
//! node leads creates a new `ActiveController`, which gives every broker a full session of
//! grace (CLUSTER.md, "The controller").
//!
//! Requests are answered one at a time, in arrival order: a decision is made on the applied
//! metadata, proposed, and answered once committed and applied here, so the next decision
//! sees it.

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use crate::runtime::Instant;

use super::node::{ProposeError, QuorumNode};
use super::server::BrokerCall;
use super::wire::{ControllerRequest, ControllerResponse};
use crate::controller::active_controller::{ActiveController, ControllerConfig};
use crate::controller::alter_partition::AlterPartitionRequest;
use crate::controller::broker_lifecycle::{BrokerRegistrationRequest, Heartbeat};
use crate::controller::records::MetadataRecord;
use crate::controller::topic_changes::TopicChange;
use crate::model::{BrokerEpoch, BrokerId, MetadataOffset};
use crate::runtime::{self, LocalReceiver};
use crate::util::shutdown::ShutdownSignal;

/// Runs until `shutdown`. `tick` is how often sessions are checked: on a deadline of its
/// own, not after `tick` of silence, so brokers heartbeating more often than `tick` cannot
/// keep a silent broker from being fenced.
pub async fn run(
    node: Rc<QuorumNode>,
    calls: LocalReceiver<BrokerCall>,
    config: ControllerConfig,
    tick: Duration,
    shutdown: Rc<ShutdownSignal>,
) {
    let clock = Instant::now();
    let now_ms = || clock.elapsed().as_millis() as u64;
    let mut active: Option<(u64, ActiveController)> = None;
    let mut next_tick = Instant::now() + tick;
    // Requests taken out of `calls` before a session check (see there), answered first.
    let mut backlog: VecDeque<BrokerCall> = VecDeque::new();
    while !shutdown.is_triggered() {
        let until_tick = next_tick.saturating_duration_since(Instant::now());
        let woke = match backlog.pop_front() {
            Some(call) => Some(Some(call)),
            None => {
                futures_lite::future::or(
                    async { calls.recv().await.map(Some) },
                    futures_lite::future::or(
                        async {
                            runtime::sleep(until_tick).await;
                            Some(None)
                        },
                        async {
                            shutdown.wait().await;
                            None
                        },
                    ),
                )
                .await
            }
        };
        let Some(woke) = woke else { return };
        let mut status = node.status();
        if status.is_leader && !status.leader_caught_up && woke.is_some() {
            status = caught_up(&node, &shutdown).await;
        }
        if !status.is_leader || !status.leader_caught_up {
            // Not leading, or leading but not yet applied what earlier leaders committed:
            // a decision on that older view could hand out a producer-id block twice or
            // undo a committed ISR change.
            active = None;
        } else if active.as_ref().is_none_or(|(term, _)| *term != status.term) {
            tracing::info!(term = status.term, "this node is the active controller");
            active = Some((status.term, ActiveController::new(config.clone(), now_ms())));
        }
        // `None`: woken by the session check's deadline.
        if let Some((request, reply)) = woke {
            let Some((_, controller)) = active.as_mut() else {
                // A leader still catching up names no controller: asked again, it answers.
                let leader = status.leader.filter(|_| !status.is_leader);
                reply.send(ControllerResponse::NotController { leader });
                continue;
            };
            // Shutdown does not wait for a proposal that cannot commit (no quorum).
            let response =
                futures_lite::future::or(answer(&node, controller, request, now_ms()), async {
                    shutdown.wait().await;
                    ControllerResponse::NotController { leader: None }
                })
                .await;
            reply.send(response);
        }
        if Instant::now() < next_tick {
            continue;
        }
        next_tick = Instant::now() + tick;
        if let Some((_, controller)) = active.as_mut() {
            // Requests are answered one at a time and an answer can wait for its decision to
            // commit, so heartbeats may have queued up meanwhile (many ISR changes at once, each
            // a commit, once held them back for longer than a session): their brokers are
            // alive, and fencing them would move every partition they lead.
            while let Some(call) = calls.try_recv().await {
                backlog.push_back(call);
            }
            let now = now_ms();
            let records = {
                // A borrow of the applied metadata: not held across the proposal's await.
                let meta = node.view().get();
                for (request, _) in &backlog {
                    if let ControllerRequest::BrokerHeartbeat(h) = request {
                        controller.heard_from(&meta, h, now);
                    }
                }
                controller.tick(&meta, now)
            };
            futures_lite::future::or(
                async {
                    propose(&node, records).await;
                },
                shutdown.wait(),
            )
            .await;
        }
    }
}

/// How long a request waits for a new leader to apply its term's first entry before it is
/// answered NOT_CONTROLLER (the broker asks again).
const CATCH_UP_WAIT: Duration = Duration::from_secs(5);

/// Waits (at most [`CATCH_UP_WAIT`]) until this node, if it still leads, has applied an entry
/// of its own term; returns the status then.
async fn caught_up(node: &QuorumNode, shutdown: &ShutdownSignal) -> super::node::QuorumStatus {
    let started = Instant::now();
    loop {
        let status = node.status();
        if !status.is_leader
            || status.leader_caught_up
            || started.elapsed() >= CATCH_UP_WAIT
            || shutdown.is_triggered()
        {
            return status;
        }
        futures_lite::future::or(node.changed(Duration::from_millis(50)), shutdown.wait()).await;
    }
}

/// How long a decision may take to commit before the request is answered without it (a
/// leader that lost its quorum would wait forever). The records may still commit later;
/// they carry the versions they were decided on, so a late one is harmless.
const PROPOSE_TIMEOUT: Duration = Duration::from_secs(5);

async fn propose(node: &QuorumNode, records: Vec<MetadataRecord>) -> Option<ProposeError> {
    propose_at(node, records).await.err()
}

/// Proposes `records` (not empty) and returns the offset of the last one once applied.
async fn propose_at(
    node: &QuorumNode,
    records: Vec<MetadataRecord>,
) -> Result<MetadataOffset, ProposeError> {
    propose_applied(node, records).await.map(|(last, _)| last)
}

/// [`propose_at`], with the number of records skipped when applied.
async fn propose_applied(
    node: &QuorumNode,
    records: Vec<MetadataRecord>,
) -> Result<(MetadataOffset, usize), ProposeError> {
    let count = records.len() as u64;
    if count == 0 {
        return Err(ProposeError::Empty);
    }
    let timed_out = async {
        runtime::sleep(PROPOSE_TIMEOUT).await;
        Err(ProposeError::Failed(format!(
            "not committed within {PROPOSE_TIMEOUT:?}"
        )))
    };
    match futures_lite::future::or(node.propose_applied(records), timed_out).await {
        Ok((first, skipped)) => Ok((MetadataOffset(first.0 + count - 1), skipped)),
        Err(e) => {
            tracing::debug!(error = %e, "controller decision not committed");
            Err(e)
        }
    }
}

/// The answer to a broker request whose decision did not commit: the leader it lost to, or
/// REQUEST_TIMED_OUT (the change may still commit; the broker retries and sees it).
fn not_committed(e: ProposeError) -> ControllerResponse {
    match e {
        ProposeError::NotLeader(n) => ControllerResponse::NotController { leader: n.leader },
        e => refused(e, crate::protocol::ResponseError::RequestTimedOut.code()),
    }
}

fn refused(e: impl std::fmt::Display, code: i16) -> ControllerResponse {
    ControllerResponse::Refused {
        code,
        message: e.to_string(),
    }
}

async fn answer(
    node: &QuorumNode,
    controller: &mut ActiveController,
    request: ControllerRequest,
    now_ms: u64,
) -> ControllerResponse {
    match request {
        ControllerRequest::RegisterBroker(r) => register(node, controller, r, now_ms).await,
        ControllerRequest::BrokerHeartbeat(h) => heartbeat(node, controller, h, now_ms).await,
        ControllerRequest::TopicChanges {
            changes,
            validate_only,
        } => topic_changes(node, controller, &changes, validate_only).await,
        ControllerRequest::AlterPartition(r) => alter_partition(node, controller, &r).await,
        ControllerRequest::AllocateProducerIds {
            broker_id,
            broker_epoch,
        } => allocate_producer_ids(node, controller, broker_id, broker_epoch).await,
        // Raft's own requests never come this way (server.rs answers them).
        _ => refused("not a broker request", -1),
    }
}

async fn register(
    node: &QuorumNode,
    controller: &mut ActiveController,
    request: BrokerRegistrationRequest,
    now_ms: u64,
) -> ControllerResponse {
    let decided = controller.register_broker(&node.view().get(), &request, now_ms);
    let records = match decided {
        Ok(records) => records,
        Err(e) => return refused(&e, e.code()),
    };
    if let Some(ProposeError::NotLeader(n)) = propose(node, records).await {
        return ControllerResponse::NotController { leader: n.leader };
    }
    // The epoch is that of the registration now applied, whichever proposal wrote it.
    let meta = node.view().get();
    match meta
        .broker(request.broker_id)
        .filter(|b| b.incarnation == request.incarnation)
    {
        Some(b) => ControllerResponse::Registered {
            broker_epoch: b.epoch,
        },
        None => refused("the registration was not committed; retry", -1),
    }
}

async fn heartbeat(
    node: &QuorumNode,
    controller: &mut ActiveController,
    heartbeat: Heartbeat,
    now_ms: u64,
) -> ControllerResponse {
    if let Some(offset) = heartbeat.applied_offset {
        node.view().note_reported(heartbeat.broker_id, offset);
    }
    let decided = controller.heartbeat(&node.view().get(), &heartbeat, now_ms);
    match decided {
        Err(e) => refused(&e, e.code()),
        Ok((reply, records)) => {
            if let Some(ProposeError::NotLeader(n)) = propose(node, records).await {
                return ControllerResponse::NotController { leader: n.leader };
            }
            ControllerResponse::Heartbeat(reply)
        }
    }
}

async fn topic_changes(
    node: &QuorumNode,
    controller: &mut ActiveController,
    changes: &[TopicChange],
    validate_only: bool,
) -> ControllerResponse {
    let decision =
        controller.decide_topic_changes(&node.view().get(), changes, crate::util::entropy::uuid_v4);
    if validate_only || decision.records.is_empty() {
        return ControllerResponse::TopicChanges {
            results: decision.results,
            committed: None,
        };
    }
    match propose_at(node, decision.records).await {
        Ok(last) => ControllerResponse::TopicChanges {
            results: decision.results,
            committed: Some(last),
        },
        Err(e) => not_committed(e),
    }
}

/// An ISR change asked for by a leader: decided as a compare-and-set on its epochs, proposed,
/// and answered with the partition as committed.
async fn alter_partition(
    node: &QuorumNode,
    controller: &mut ActiveController,
    request: &AlterPartitionRequest,
) -> ControllerResponse {
    let records = match controller.alter_partition(&node.view().get(), request) {
        Ok(records) => records,
        Err(e) => return refused(&e, e.code()),
    };
    if !records.is_empty() {
        match propose_at(node, records).await {
            Ok(_) => {}
            Err(e) => return not_committed(e),
        }
    }
    let meta = node.view().get();
    let partition = meta
        .topic(request.topic_id)
        .and_then(|t| t.partitions.get(request.partition as usize));
    match partition {
        Some(p) => ControllerResponse::PartitionState {
            isr: p.isr.clone(),
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
        },
        None => refused(
            "the partition no longer exists",
            crate::protocol::ResponseError::UnknownTopicOrPartition.code(),
        ),
    }
}

/// A block of producer ids for a broker, answered once committed. The controller answers
/// one call at a time, so no other block is decided on the same state meanwhile.
async fn allocate_producer_ids(
    node: &QuorumNode,
    controller: &mut ActiveController,
    broker: BrokerId,
    broker_epoch: BrokerEpoch,
) -> ControllerResponse {
    let records = match controller.allocate_producer_ids(&node.view().get(), broker, broker_epoch) {
        Ok(records) => records,
        Err(e) => return refused(&e, e.code()),
    };
    let block = records.iter().find_map(|r| match r {
        MetadataRecord::ProducerIdBlock(b) => Some((b.start, b.start + b.size)),
        _ => None,
    });
    let Some((start, end)) = block else {
        return refused("no producer id block decided", -1);
    };
    // Confirmed by its own record having applied: one decided on a view that was no longer
    // current is skipped, and the ids it named may be someone else's.
    match propose_applied(node, records).await {
        Ok((_, 0)) => ControllerResponse::ProducerIds { start, end },
        Ok(_) => refused("the producer id block was not applied; retry", -1),
        Err(e) => not_committed(e),
    }
}
