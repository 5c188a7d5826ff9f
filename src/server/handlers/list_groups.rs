//! ListGroups (key 16): every group of every coordinator shard. v4 filters by state (and
//! reports each group's state); v5's type filter is not advertised (there is one group type).

use crate::protocol::messages::list_groups_request::ListGroupsRequest;
use crate::protocol::messages::list_groups_response::{ListGroupsResponse, ListedGroup};
use bytes::Bytes;

use super::{group_id, str_bytes, HandlerError, Request};

/// The first version with states (filter and listing).
const STATES_VERSION: i16 = 4;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: ListGroupsRequest = req.decode()?;
    let version = req.version();
    let states_filter = request
        .states_filter
        .iter()
        .map(|s| s.to_string())
        .collect();
    let reply = req.shard.list_groups(states_filter).await;
    let mut response = ListGroupsResponse::default();
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
            listed
        })
        .collect();
    req.encode(&response)
}
