//! Group administration: ListGroups, DescribeGroups, DeleteGroups.

use std::collections::BTreeMap;

use super::api::{
    GroupDescription, ListGroupsReply, ListedGroup, MemberDescription, OffsetsRecord, Output,
    Reply, Token,
};
use super::coordinator::{DeleteGroupsWait, GroupCoordinator, PendingWork};
use super::group_state::{Group, GroupState};
use super::records::{encode_group_metadata_key, encode_offset_commit_key};
use crate::protocol::ResponseError;

/// Kafka's group summary: member metadata and assignments only once the group is Stable.
fn describe(group: &Group) -> GroupDescription {
    let stable = group.state == GroupState::Stable;
    let protocol = if stable {
        group.protocol.clone().unwrap_or_default()
    } else {
        String::new()
    };
    GroupDescription {
        group_id: group.id.clone(),
        error: 0,
        state: group.state.name().to_string(),
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        members: group
            .members
            .iter()
            .map(|m| MemberDescription {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata_for(&protocol)
                } else {
                    Default::default()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Default::default()
                },
            })
            .collect(),
        protocol_data: protocol,
    }
}

impl GroupCoordinator {
    pub(super) fn list_groups(&mut self, token: Token, states_filter: &[String], out: &mut Output) {
        let mut groups: Vec<ListedGroup> = self
            .groups
            .values()
            .filter(|g| self.is_serving(g.partition))
            .filter(|g| {
                states_filter.is_empty()
                    || states_filter
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(g.state.name()))
            })
            .map(|g| ListedGroup {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state.name().to_string(),
            })
            .collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        // Kafka lists what it has but says some groups may be missing.
        let error = if self.is_loading_any() {
            ResponseError::CoordinatorLoadInProgress.code()
        } else {
            0
        };
        out.replies
            .push((token, Reply::ListGroups(ListGroupsReply { error, groups })));
    }

    pub(super) fn describe_groups(&mut self, token: Token, group_ids: &[String], out: &mut Output) {
        let descriptions = group_ids
            .iter()
            .map(|id| {
                if let Err(error) = self.check_coordinator(id) {
                    return GroupDescription {
                        group_id: id.clone(),
                        error,
                        ..GroupDescription::default()
                    };
                }
                match self.groups.get(id) {
                    Some(group) => describe(group),
                    None => GroupDescription {
                        group_id: id.clone(),
                        state: GroupState::Dead.name().to_string(),
                        ..GroupDescription::default()
                    },
                }
            })
            .collect();
        out.replies
            .push((token, Reply::DescribeGroups(descriptions)));
    }

    /// Deletes empty groups with their offsets: tombstones in one append per partition; the
    /// reply waits for all of them. Groups are Dead (refusing joins and commits) meanwhile.
    pub(super) fn delete_groups(&mut self, token: Token, group_ids: &[String], out: &mut Output) {
        let mut results = Vec::with_capacity(group_ids.len());
        let mut by_partition: BTreeMap<i32, Vec<String>> = BTreeMap::new();
        for id in group_ids {
            if let Err(error) = self.check_coordinator(id) {
                results.push((id.clone(), error));
                continue;
            }
            let error = match self.groups.get_mut(id) {
                None => ResponseError::GroupIdNotFound.code(),
                Some(group) => match group.state {
                    GroupState::Dead => ResponseError::GroupIdNotFound.code(),
                    GroupState::Empty => {
                        group.state = GroupState::Dead;
                        by_partition
                            .entry(group.partition)
                            .or_default()
                            .push(id.clone());
                        0
                    }
                    _ => ResponseError::NonEmptyGroup.code(),
                },
            };
            results.push((id.clone(), error));
        }
        if by_partition.is_empty() {
            out.replies.push((token, Reply::DeleteGroups(results)));
            return;
        }
        self.delete_waits.insert(
            token,
            DeleteGroupsWait {
                results,
                outstanding: by_partition.len(),
            },
        );
        for (partition, ids) in by_partition {
            let mut records = Vec::new();
            for id in &ids {
                let Some(group) = self.groups.get(id) else {
                    continue;
                };
                records.extend(group.all_offset_partitions().into_iter().map(|(t, p)| {
                    OffsetsRecord {
                        key: encode_offset_commit_key(id, &t, p),
                        value: None,
                    }
                }));
                records.push(OffsetsRecord {
                    key: encode_group_metadata_key(id),
                    value: None,
                });
            }
            let work = PendingWork::Cleanup {
                token: Some(token),
                offsets: Vec::new(),
                groups: ids,
            };
            self.start_append(partition, records, work, out);
        }
    }
}
