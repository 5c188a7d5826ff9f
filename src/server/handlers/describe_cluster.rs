//! DescribeCluster (key 60): the cluster id, the controller and the live brokers, as the
//! shard's metadata image has them (this one alone on a single node).

use crate::protocol::messages::describe_cluster_request::DescribeClusterRequest;
use crate::protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use crate::protocol::messages::BrokerId;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{str_bytes, HandlerError, Request};

/// `endpoint_type` values (v1+).
const ENDPOINT_BROKERS: i8 = 1;
const ENDPOINT_CONTROLLERS: i8 = 2;

pub fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: DescribeClusterRequest = req.decode()?;
    let config = req.config();
    let mut response = DescribeClusterResponse::default();
    // Only v1+ has the field; v0 always means brokers (and the default is 1).
    let endpoint_type = if req.version() >= 1 {
        request.endpoint_type
    } else {
        ENDPOINT_BROKERS
    };
    match endpoint_type {
        ENDPOINT_BROKERS => {
            // The live brokers of the image, as in Metadata (this one alone until the
            // image lists any).
            let image = req.image();
            response.brokers = super::client_brokers(config, &image)
                .into_iter()
                .map(|b| {
                    let mut broker = DescribeClusterBroker::default();
                    broker.broker_id = BrokerId(b.id.0);
                    broker.host = str_bytes(b.host);
                    broker.port = i32::from(b.port);
                    broker.rack = b.rack.map(str_bytes);
                    broker
                })
                .collect();
            response.cluster_id = str_bytes(image.cluster_id.clone());
            response.controller_id =
                BrokerId(image.client_controller().map_or(config.node_id, |c| c.0));
        }
        ENDPOINT_CONTROLLERS => {
            response.error_code = ResponseError::UnsupportedEndpointType.code();
            response.error_message = Some(str_bytes(
                "this broker does not answer DescribeCluster for controllers; ask for brokers",
            ));
        }
        other => {
            response.error_code = ResponseError::InvalidRequest.code();
            response.error_message = Some(str_bytes(format!("unknown endpoint type {other}")));
        }
    }
    // The response echoes the endpoint type in v1+; in v0 it must stay at its default (1).
    if req.version() >= 1 {
        response.endpoint_type = endpoint_type;
    }
    // No authorizer: cluster_authorized_operations keeps its "not requested" default.
    req.encode(&response)
}
