//! ListGroups (key 16): every group of every coordinator shard. v4 filters by state (and
//! reports each group's state); v5 (KIP-848) filters by type and reports it: every group
//! here is "classic", so a filter without that type lists nothing, as in Kafka.

use crate::protocol::messages::list_groups_request::ListGroupsRequest;
use crate::protocol::messages::list_groups_response::{ListGroupsResponse, ListedGroup};
use bytes::Bytes;

use super::{group_id, str_bytes, HandlerError, Request};

/// The first version with states (filter and listing).
const STATES_VERSION: i16 = 4;
/// The first version with group types (filter and listing).
const TYPES_VERSION: i16 = 5;
/// The one group type (the classic protocol).
const CLASSIC: &str = "classic";

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: ListGroupsRequest = req.decode()?;
    let version = req.version();
    let states_filter = request
        .states_filter
        .iter()
        .map(|s| s.to_string())
        .collect();
    let classic_wanted = request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.eq_ignore_ascii_case(CLASSIC));
    let mut response = ListGroupsResponse::default();
    if !classic_wanted {
        return req.encode(&response);
    }
    let reply = req.groups().list(states_filter).await;
    response.error_code = reply.error;
    response.groups = reply
        .groups
        .into_iter()
        .map(|g| {
            let mut listed = ListedGroup::default();
            listed.group_id = group_id(&g.group_id);
            listed.protocol_type = str_bytes(g.protocol_type);
            if version >= STATES_VERSION {
                listed.group_state = str_bytes(g.state);
            }
            if version >= TYPES_VERSION {
                listed.group_type = str_bytes(CLASSIC);
            }
            listed
        })
        .collect();
    req.encode(&response)
}
