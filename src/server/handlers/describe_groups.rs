//! DescribeGroups (key 15): state, protocol and members of groups, each asked of its
//! coordinator. v3 adds authorized operations (there is no authorizer: the field keeps its
//! "not requested" default), v4 the members' group instance ids.

use crate::group::api::GroupDescription;
use crate::protocol::messages::describe_groups_request::DescribeGroupsRequest;
use crate::protocol::messages::describe_groups_response::{
    DescribeGroupsResponse, DescribedGroup, DescribedGroupMember,
};
use bytes::Bytes;

use super::{group_id, str_bytes, HandlerError, Request};

/// The first version with group instance ids.
const INSTANCE_ID_VERSION: i16 = 4;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: DescribeGroupsRequest = req.decode()?;
    let version = req.version();
    // Empty group ids are allowed (Kafka describes them like any other).
    let ids = request.groups.iter().map(|g| g.0.to_string()).collect();
    let descriptions = req.groups().describe(ids).await;
    let mut response = DescribeGroupsResponse::default();
    response.groups = descriptions
        .into_iter()
        .map(|d| described(d, version))
        .collect();
    req.encode(&response)
}

fn described(d: GroupDescription, version: i16) -> DescribedGroup {
    let mut group = DescribedGroup::default();
    group.error_code = d.error;
    group.group_id = group_id(&d.group_id);
    group.group_state = str_bytes(d.state);
    group.protocol_type = str_bytes(d.protocol_type);
    group.protocol_data = str_bytes(d.protocol_data);
    group.members = d
        .members
        .into_iter()
        .map(|m| {
            let mut member = DescribedGroupMember::default();
            member.member_id = str_bytes(m.member_id);
            if version >= INSTANCE_ID_VERSION {
                member.group_instance_id = m.group_instance_id.map(str_bytes);
            }
            member.client_id = str_bytes(m.client_id);
            member.client_host = str_bytes(m.client_host);
            member.member_metadata = m.metadata;
            member.member_assignment = m.assignment;
            member
        })
        .collect();
    group
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::api::MemberDescription;
    use crate::protocol::Encodable;

    #[test]
    fn a_group_with_members_encodes_in_every_version() {
        let description = GroupDescription {
            group_id: "g".to_string(),
            error: 0,
            state: "Stable".to_string(),
            protocol_type: "consumer".to_string(),
            protocol_data: "range".to_string(),
            members: vec![MemberDescription {
                member_id: "m1".to_string(),
                group_instance_id: Some("i1".to_string()),
                client_id: "c".to_string(),
                client_host: "/127.0.0.1".to_string(),
                metadata: Bytes::from_static(b"meta"),
                assignment: Bytes::from_static(b"assignment"),
            }],
        };
        for version in 0..=5 {
            let mut response = DescribeGroupsResponse::default();
            response.groups = vec![described(description.clone(), version)];
            let mut buf = bytes::BytesMut::new();
            response
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
        }
    }
}
