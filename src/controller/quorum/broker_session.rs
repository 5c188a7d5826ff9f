//! A broker's session with the active controller (Kafka's BrokerLifecycleManager): register
//! with a fresh incarnation id, then heartbeat every `broker.heartbeat.interval.ms` with the
//! metadata offset applied here. The controller is found by asking any voter: one that is
//! not the leader names it. A heartbeat refused (a stale epoch: the controller fenced and
//! forgot this registration) makes the broker register again, with a new epoch.
//!
//! On shutdown the broker asks to be fenced (controlled shutdown: a heartbeat with
//! `want_shutdown`), so the controller moves its leaderships away now rather than after a
//! session timeout; one bounded attempt, the session timeout covers a failed one.

use std::rc::Rc;
use std::time::Duration;

use uuid::Uuid;

use super::network::ControllerClient;
use super::wire::{ControllerRequest, ControllerResponse};
use crate::controller::broker_lifecycle::{BrokerRegistrationRequest, Heartbeat};
use crate::controller::records::Endpoint;
use crate::model::{BrokerEpoch, BrokerId, MetadataOffset};
use crate::runtime;
use crate::util::shutdown::ShutdownSignal;

#[derive(Debug, Clone)]
pub struct BrokerSessionConfig {
    /// This process's registration id (new at every start).
    pub incarnation: Uuid,
    pub broker_id: BrokerId,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    /// Every voter's CONTROLLER endpoint.
    pub voters: Vec<(BrokerId, String)>,
    pub heartbeat_interval: Duration,
    /// Each request's bound.
    pub request_timeout: Duration,
}

/// Runs until `shutdown`; `applied` reads this broker's applied metadata offset.
pub async fn run(
    config: BrokerSessionConfig,
    applied: impl Fn() -> Option<MetadataOffset>,
    shutdown: Rc<ShutdownSignal>,
) {
    if config.voters.is_empty() {
        return;
    }
    let incarnation = config.incarnation;
    let mut clients: Vec<ControllerClient> = config
        .voters
        .iter()
        .map(|(_, addr)| ControllerClient::new(addr))
        .collect();
    let mut target = 0usize;
    let mut epoch: Option<BrokerEpoch> = None;
    let mut fenced = true;
    while !shutdown.is_triggered() {
        let request = match epoch {
            None => ControllerRequest::RegisterBroker(BrokerRegistrationRequest {
                broker_id: config.broker_id,
                incarnation,
                endpoints: config.endpoints.clone(),
                rack: config.rack.clone(),
            }),
            Some(broker_epoch) => ControllerRequest::BrokerHeartbeat(Heartbeat {
                broker_id: config.broker_id,
                broker_epoch,
                applied_offset: applied(),
                want_fence: false,
                want_shutdown: false,
            }),
        };
        let answered = clients[target].call(&request, config.request_timeout).await;
        let mut settled = false;
        match answered {
            Ok(ControllerResponse::Registered { broker_epoch }) => {
                tracing::info!(
                    broker_epoch = broker_epoch.0,
                    "registered with the controller"
                );
                epoch = Some(broker_epoch);
                settled = true;
            }
            Ok(ControllerResponse::Heartbeat(reply)) => {
                if reply.fenced != fenced {
                    tracing::info!(fenced = reply.fenced, "broker fencing changed");
                    fenced = reply.fenced;
                }
                settled = true;
            }
            Ok(ControllerResponse::NotController { leader }) => {
                target = leader
                    .and_then(|l| config.voters.iter().position(|(id, _)| *id == l))
                    .filter(|t| *t != target)
                    .unwrap_or((target + 1) % clients.len());
            }
            Ok(ControllerResponse::Refused { code, message }) => {
                tracing::warn!(code, %message, "controller refused this broker; registering again");
                epoch = None;
            }
            Ok(_) => target = (target + 1) % clients.len(),
            Err(e) => {
                tracing::debug!(error = %e, "controller not reachable; trying another voter");
                target = (target + 1) % clients.len();
            }
        }
        // Settled: the next heartbeat is due in a full interval. Otherwise retry soon, at
        // another voter, without spinning.
        let wait = if settled {
            config.heartbeat_interval
        } else {
            (config.heartbeat_interval / 4).max(Duration::from_millis(20))
        };
        futures_lite::future::or(runtime::sleep(wait), shutdown.wait()).await;
    }
    if let Some(broker_epoch) = epoch {
        let farewell = ControllerRequest::BrokerHeartbeat(Heartbeat {
            broker_id: config.broker_id,
            broker_epoch,
            applied_offset: applied(),
            want_fence: true,
            want_shutdown: true,
        });
        match clients[target]
            .call(&farewell, config.request_timeout)
            .await
        {
            Ok(ControllerResponse::Heartbeat(_)) => {
                tracing::info!("controlled shutdown: the controller fences this broker")
            }
            other => tracing::info!(
                answer = ?other.map(|_| ()),
                "controlled shutdown not confirmed; the session timeout will fence this broker"
            ),
        }
    }
}
