//! DeleteGroups (key 42): deletes empty groups and their offsets; an error per group
//! (NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND, ...).

use crate::protocol::messages::delete_groups_request::DeleteGroupsRequest;
use crate::protocol::messages::delete_groups_response::{
    DeletableGroupResult, DeleteGroupsResponse,
};
use bytes::Bytes;

use super::{group_id, HandlerError, Request};

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: DeleteGroupsRequest = req.decode()?;
    // Empty group ids are allowed (Kafka lets the state of the "" group be deleted).
    let ids = request
        .groups_names
        .iter()
        .map(|g| g.0.to_string())
        .collect();
    let results = req.groups().delete(ids).await;
    let mut response = DeleteGroupsResponse::default();
    response.results = results
        .into_iter()
        .map(|(id, error)| {
            let mut result = DeletableGroupResult::default();
            result.group_id = group_id(&id);
            result.error_code = error;
            result
        })
        .collect();
    req.encode(&response)
}
