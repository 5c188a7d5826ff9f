//! FindCoordinator (key 10): which broker coordinates a group: on a single node this one, in
//! cluster mode the leader of the group's `__consumer_offsets` partition. Transactions are not
//! supported. v0–v3 ask for one key, v4+ for a batch (`coordinator_keys`), each answered on
//! its own.

use crate::protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use crate::protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use crate::protocol::messages::BrokerId;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{str_bytes, HandlerError, Request};
use crate::shard::cluster_admin::CoordinatorBroker;

/// `key_type` values (v1+; v0 always means a group).
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The first version with batched keys.
const BATCHED_VERSION: i16 = 4;

/// Kafka's "no node" answered with an error.
const NO_NODE_ID: i32 = -1;
const NO_NODE_PORT: i32 = -1;

/// Why no coordinator is named: an error code and its message.
type Refusal = (i16, String);

pub fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: FindCoordinatorRequest = req.decode()?;
    let config = req.config();
    // One broker coordinates every group, once `__consumer_offsets` exists (it is created at
    // startup; until then Kafka's answer is COORDINATOR_NOT_AVAILABLE, which clients retry).
    let groups = req.groups();
    let offsets_ready = groups.offsets_topic_ready();
    let this_broker = CoordinatorBroker {
        id: config.node_id,
        host: config.advertised_host.clone(),
        port: config.advertised_port,
    };
    // Cluster mode: the leader of the group's offsets partition, wherever it is.
    let outcome_for = |key: &str| -> Result<CoordinatorBroker, Refusal> {
        coordinator_for(request.key_type)?;
        match groups.cluster_coordinator(key) {
            Some(Ok(b)) => Ok(b),
            Some(Err(code)) => Err((
                code,
                "the group's offsets partition has no leader".to_string(),
            )),
            None if offsets_ready => Ok(this_broker.clone()),
            None => Err((
                ResponseError::CoordinatorNotAvailable.code(),
                "the offsets topic is not created yet".to_string(),
            )),
        }
    };
    let mut response = FindCoordinatorResponse::default();
    if req.version() >= BATCHED_VERSION {
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(|key| {
                let mut c = Coordinator::default();
                c.key = key.clone();
                match &outcome_for(key) {
                    Ok(b) => {
                        c.node_id = BrokerId(b.id);
                        c.host = str_bytes(b.host.clone());
                        c.port = i32::from(b.port);
                        c.error_message = None;
                    }
                    Err((code, message)) => {
                        c.node_id = BrokerId(NO_NODE_ID);
                        c.port = NO_NODE_PORT;
                        c.error_code = *code;
                        c.error_message = Some(str_bytes(message.clone()));
                    }
                }
                c
            })
            .collect();
    } else {
        match outcome_for(&request.key) {
            Ok(b) => {
                response.node_id = BrokerId(b.id);
                response.host = str_bytes(b.host);
                response.port = i32::from(b.port);
                response.error_message = None;
            }
            Err((code, message)) => {
                response.error_code = code;
                response.node_id = BrokerId(NO_NODE_ID);
                response.port = NO_NODE_PORT;
                // v0 has no message field (left at its default, it is not encoded).
                if req.version() >= 1 {
                    response.error_message = Some(str_bytes(message));
                }
            }
        }
    }
    req.encode(&response)
}

/// This broker for groups (Kafka does not check the key: an empty group id has a coordinator
/// too); a refusal for any other key type.
fn coordinator_for(key_type: i8) -> Result<(), Refusal> {
    match key_type {
        KEY_TYPE_GROUP => Ok(()),
        KEY_TYPE_TRANSACTION => Err((
            ResponseError::CoordinatorNotAvailable.code(),
            "transactions are not supported".to_string(),
        )),
        other => Err((
            ResponseError::InvalidRequest.code(),
            format!("unknown coordinator key type {other}"),
        )),
    }
}
