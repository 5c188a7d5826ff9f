//! InitProducerId (key 22): a producer id and epoch for an idempotent producer.
//!
//! Without a transactional id Kafka always hands out a fresh id at epoch 0, even when the
//! request carries the producer's current id and epoch (KIP-360: an idempotent producer bumps
//! its epoch itself and asks for a new id only when the epoch is exhausted); so do we.
//!
//! Transactions are not implemented (no AddPartitionsToTxn or EndTxn is advertised), so a
//! transactional id is refused with INVALID_REQUEST: Kafka's answer to a request it cannot
//! serve as asked (it gives the same for an empty transactional id). Clients report it as a
//! fatal error pointing at the broker, rather than retrying (COORDINATOR_* codes would make
//! them loop until a timeout) or blaming ACLs (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//! Versions 0–4 are served; v5+ fields (two-phase commit) keep their defaults.

use crate::protocol::messages::init_producer_id_request::InitProducerIdRequest;
use crate::protocol::messages::init_producer_id_response::InitProducerIdResponse;
use crate::protocol::messages::ProducerId;
use crate::protocol::{Decodable, ResponseError};
use bytes::{Buf, Bytes};

use super::{HandlerError, Request};

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request = decode_exact(req)?;
    let mut response = InitProducerIdResponse::default();
    response.producer_id = ProducerId(-1);
    response.producer_epoch = -1;
    if let Some(transactional_id) = &request.transactional_id {
        tracing::warn!(transactional_id = %transactional_id.0, "InitProducerId for a transactional producer refused: transactions are not supported");
        response.error_code = ResponseError::InvalidRequest.code();
        return req.encode(&response);
    }
    match req.producer_ids().allocate().await {
        Ok(id) => {
            response.producer_id = ProducerId(id);
            response.producer_epoch = 0;
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot allocate a producer id");
            // Kafka's answer while its producer id manager has no block ready: retriable.
            response.error_code = ResponseError::CoordinatorLoadInProgress.code();
        }
    }
    req.encode(&response)
}

/// Decodes the body and requires that nothing follows it. The request is a few fixed fields
/// with no array, so bytes left over mean the client and the broker disagree on its layout
/// (garbage that happens to parse must not be answered as if it were a request).
fn decode_exact(req: &Request<'_>) -> Result<InitProducerIdRequest, HandlerError> {
    let mut body = req.frame.body.clone();
    let decoded = InitProducerIdRequest::decode(&mut body, req.version())
        .map_err(|e| e.to_string())
        .and_then(|r| match body.remaining() {
            0 => Ok(r),
            extra => Err(format!("{extra} bytes after the end of the request")),
        })
        .map_err(|reason| HandlerError::Decode {
            api: req.api,
            version: req.version(),
            reason,
        });
    req.signal_decoded(decoded.is_ok());
    decoded
}
