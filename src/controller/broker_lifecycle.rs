//! Broker registration and heartbeats at the active controller (Kafka's
//! BrokerRegistration and BrokerHeartbeat requests).
//!
//! A broker registers at start with a random incarnation id and gets a new broker epoch (the
//! offset of its RegisterBroker record), starting fenced. It heartbeats every
//! `broker.heartbeat.interval.ms` with the metadata offset it has applied; once that reaches
//! its registration, it is unfenced. A heartbeat asking to shut down fences it, which moves
//! its leaderships away first (controlled shutdown).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::active_controller::ActiveController;
use super::cluster_metadata::ClusterMetadata;
use super::error::ControllerError;
use super::records::{Endpoint, MetadataRecord, RegisterBroker};
use crate::model::{BrokerEpoch, BrokerId, MetadataOffset};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistrationRequest {
    pub broker_id: BrokerId,
    pub incarnation: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub broker_id: BrokerId,
    pub broker_epoch: BrokerEpoch,
    /// The last metadata offset the broker has applied.
    pub applied_offset: Option<MetadataOffset>,
    /// The broker wants to stay (or become) fenced, e.g. while it recovers its logs.
    pub want_fence: bool,
    pub want_shutdown: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// As committed; the records returned alongside may change it.
    pub fenced: bool,
    /// The broker has applied the log up to its own registration.
    pub caught_up: bool,
    /// Shutting down is safe: the broker is fenced, so it leads nothing.
    pub should_shut_down: bool,
}

impl ActiveController {
    /// Registers a broker. A retried registration (same incarnation) needs no record. A new
    /// incarnation while the previous one is unfenced and its session still runs is refused
    /// (two processes with one `node.id`); once that session ran out, the previous one is
    /// fenced in the same batch.
    pub fn register_broker(
        &mut self,
        meta: &ClusterMetadata,
        request: &BrokerRegistrationRequest,
        now_ms: u64,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let mut records = Vec::new();
        if let Some(existing) = meta.broker(request.broker_id) {
            if existing.incarnation == request.incarnation {
                self.touch(request.broker_id, now_ms);
                return Ok(records);
            }
            if !existing.fenced {
                if !self.session_expired(existing.id, now_ms) {
                    return Err(ControllerError::DuplicateBrokerRegistration(existing.id));
                }
                records = self.fence_records(meta, existing.id, existing.epoch, now_ms);
            }
        }
        self.touch(request.broker_id, now_ms);
        records.push(MetadataRecord::RegisterBroker(RegisterBroker {
            broker_id: request.broker_id,
            incarnation: request.incarnation,
            endpoints: request.endpoints.clone(),
            rack: request.rack.clone(),
        }));
        Ok(records)
    }

    /// A heartbeat that has arrived but is not answered yet (it waits behind other requests):
    /// renews the broker's session, as answering it would, if its epoch is the registered one.
    pub fn heard_from(&mut self, meta: &ClusterMetadata, heartbeat: &Heartbeat, now_ms: u64) {
        let id = heartbeat.broker_id;
        if self
            .check_broker_epoch(meta, id, heartbeat.broker_epoch)
            .is_ok()
        {
            self.touch(id, now_ms);
        }
    }

    /// Renews the broker's session and unfences or fences it as it asks.
    pub fn heartbeat(
        &mut self,
        meta: &ClusterMetadata,
        heartbeat: &Heartbeat,
        now_ms: u64,
    ) -> Result<(HeartbeatReply, Vec<MetadataRecord>), ControllerError> {
        let id = heartbeat.broker_id;
        self.check_broker_epoch(meta, id, heartbeat.broker_epoch)?;
        self.touch(id, now_ms);
        let fenced = !meta.is_unfenced(id);
        let caught_up = heartbeat
            .applied_offset
            .is_some_and(|o| BrokerEpoch::from(o) >= heartbeat.broker_epoch);
        let wants_out = heartbeat.want_fence || heartbeat.want_shutdown;
        let records = match (fenced, wants_out) {
            (true, false) if caught_up => {
                self.unfence_records(meta, id, heartbeat.broker_epoch, now_ms)
            }
            (false, true) => self.fence_records(meta, id, heartbeat.broker_epoch, now_ms),
            _ => Vec::new(),
        };
        let reply = HeartbeatReply {
            fenced,
            caught_up,
            should_shut_down: heartbeat.want_shutdown && fenced,
        };
        Ok((reply, records))
    }
}
