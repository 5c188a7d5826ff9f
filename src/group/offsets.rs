//! Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and retention expiry.
//! A commit becomes visible only once its records are in the log.

use crate::util::hash::HashSet;
use std::collections::{BTreeMap, BTreeSet};

use super::api::{
    FetchedOffset, OffsetCommitCall, OffsetCommitReply, OffsetDeleteCall, OffsetDeleteReply,
    OffsetFetchCall, OffsetFetchReply, OffsetsRecord, Output, Reply, Token,
};
use super::coordinator::{GroupCoordinator, OffsetTombstone, PendingWork};
use super::group_state::{Group, GroupState, TopicPartition};
use super::membership::validate_current_member;
use super::records::{encode_group_metadata_key, encode_offset_commit_key, OffsetCommitValue};
use crate::protocol::ResponseError;

/// Kafka's `offset.metadata.max.bytes`.
pub const OFFSET_METADATA_MAX_BYTES: usize = 4096;

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// Kafka's `validateOffsetCommit`: who may commit to this group now.
fn commit_error(group: &Group, call: &OffsetCommitCall) -> Option<i16> {
    if group.state == GroupState::Dead {
        return Some(code(ResponseError::CoordinatorNotAvailable));
    }
    // Admin clients and consumers without group management commit with generation -1, which
    // is only allowed while nobody is a member.
    if call.generation_id < 0 && group.state == GroupState::Empty {
        return None;
    }
    if call.generation_id >= 0 || !call.member_id.is_empty() || call.group_instance_id.is_some() {
        if let Some(error) =
            validate_current_member(group, &call.member_id, call.group_instance_id.as_deref())
        {
            return Some(error);
        }
        if call.generation_id != group.generation {
            return Some(code(ResponseError::IllegalGeneration));
        }
        return None;
    }
    Some(code(ResponseError::UnknownMemberId))
}

fn unknown_offset(topic: String, partition: i32) -> FetchedOffset {
    FetchedOffset {
        topic,
        partition,
        offset: -1,
        leader_epoch: -1,
        metadata: Some(String::new()),
        error: 0,
    }
}

fn fetched(topic: String, partition: i32, value: &OffsetCommitValue) -> FetchedOffset {
    FetchedOffset {
        topic,
        partition,
        offset: value.offset,
        leader_epoch: value.leader_epoch,
        metadata: Some(value.metadata.clone()),
        error: 0,
    }
}

/// Offsets of `group` that retention expires at `now_ms` (Kafka 2.1+ rules): all of an empty
/// group's offsets once it has been empty for the retention time; for a stable consumer group
/// the offsets of topics nobody subscribes to any more; for a simple group (offsets only)
/// each offset by its commit time. Old commits with an explicit expire time use that.
fn expired_offsets(
    group: &Group,
    now_ms: i64,
    retention_ms: i64,
) -> Vec<(TopicPartition, OffsetCommitValue)> {
    let (empty_since, subscribed): (Option<i64>, BTreeSet<String>) =
        match (&group.protocol_type, group.state) {
            (Some(_), GroupState::Empty) => (group.state_since_ms, BTreeSet::new()),
            (Some(_), GroupState::Stable) if group.is_consumer_group() => {
                match group.subscribed_topics() {
                    Some(topics) => (None, topics),
                    None => return Vec::new(),
                }
            }
            (None, _) => (None, BTreeSet::new()),
            _ => return Vec::new(),
        };
    group
        .offsets
        .iter()
        .filter(|(tp, _)| {
            !subscribed.contains(&tp.0)
                && !group.pending_commits.contains_key(*tp)
                && !group.expiring.contains(*tp)
        })
        .filter(|(_, v)| match v.expire_timestamp {
            Some(expire) => now_ms >= expire,
            // Saturating: replayed timestamps can be anything.
            None => {
                now_ms.saturating_sub(empty_since.unwrap_or(v.commit_timestamp)) >= retention_ms
            }
        })
        .map(|(tp, v)| (tp.clone(), v.clone()))
        .collect()
}

impl GroupCoordinator {
    pub(super) fn offset_commit(
        &mut self,
        token: Token,
        call: OffsetCommitCall,
        now_ms: i64,
        out: &mut Output,
    ) {
        let reply_all = |error: i16| {
            Reply::OffsetCommit(OffsetCommitReply {
                partitions: call
                    .offsets
                    .iter()
                    .map(|o| (o.topic.clone(), o.partition, error))
                    .collect(),
            })
        };
        if let Err(error) = self.check_coordinator(&call.group_id) {
            out.replies.push((token, reply_all(error)));
            return;
        }
        if !self.groups.contains_key(&call.group_id) {
            if call.generation_id >= 0 {
                // A member of a generation this coordinator does not know (it was lost).
                out.replies
                    .push((token, reply_all(code(ResponseError::IllegalGeneration))));
                return;
            }
            // A consumer storing offsets without group management: the group is made for it.
            let partition = self.partition_of(&call.group_id);
            let group = Group::new(call.group_id.clone(), partition, now_ms);
            self.groups.insert(call.group_id.clone(), group);
        }
        let Some(group) = self.groups.get_mut(&call.group_id) else {
            return;
        };
        if let Some(error) = commit_error(group, &call) {
            out.replies.push((token, reply_all(error)));
            return;
        }
        match group.state {
            // The member has the new generation from its join reply but no assignment yet.
            GroupState::CompletingRebalance => {
                out.replies
                    .push((token, reply_all(code(ResponseError::RebalanceInProgress))));
                return;
            }
            // Allowed while rebalancing: the member learns of it from its next heartbeat.
            GroupState::Stable | GroupState::PreparingRebalance => {
                if let Some(member) = group.member_mut(&call.member_id) {
                    member.refresh_session(now_ms);
                }
            }
            GroupState::Empty | GroupState::Dead => {}
        }
        self.store_offsets(token, call, now_ms, out);
    }

    fn store_offsets(
        &mut self,
        token: Token,
        call: OffsetCommitCall,
        now_ms: i64,
        out: &mut Output,
    ) {
        let Some(group) = self.groups.get_mut(&call.group_id) else {
            return;
        };
        let mut reply = Vec::with_capacity(call.offsets.len());
        let mut stored = Vec::new();
        let mut records = Vec::new();
        for o in call.offsets {
            let metadata = o.metadata.unwrap_or_default();
            if metadata.len() > OFFSET_METADATA_MAX_BYTES {
                reply.push((
                    o.topic,
                    o.partition,
                    code(ResponseError::OffsetMetadataTooLarge),
                ));
                continue;
            }
            let value = OffsetCommitValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata,
                commit_timestamp: o.commit_timestamp.filter(|&t| t != -1).unwrap_or(now_ms),
                expire_timestamp: None,
            };
            records.push(OffsetsRecord {
                key: encode_offset_commit_key(&call.group_id, &o.topic, o.partition),
                value: Some(value.encode()),
            });
            reply.push((o.topic.clone(), o.partition, 0));
            stored.push(((o.topic, o.partition), value));
        }
        if stored.is_empty() {
            out.replies.push((
                token,
                Reply::OffsetCommit(OffsetCommitReply { partitions: reply }),
            ));
            return;
        }
        for (tp, _) in &stored {
            *group.pending_commits.entry(tp.clone()).or_default() += 1;
        }
        let partition = group.partition;
        let work = PendingWork::OffsetCommit {
            group_id: call.group_id,
            token,
            reply,
            stored,
        };
        self.start_append(partition, records, work, out);
    }

    pub(super) fn commit_stored(
        &mut self,
        group_id: &str,
        token: Token,
        mut reply: Vec<(String, i32, i16)>,
        stored: Vec<(TopicPartition, OffsetCommitValue)>,
        ok: bool,
        out: &mut Output,
    ) {
        if let Some(group) = self.groups.get_mut(group_id) {
            for (tp, value) in stored {
                if let Some(count) = group.pending_commits.get_mut(&tp) {
                    *count -= 1;
                    if *count == 0 {
                        group.pending_commits.remove(&tp);
                    }
                }
                if ok {
                    group.offsets.insert(tp, value);
                }
            }
        }
        if !ok {
            // Only partitions that were being stored carry code 0 at this point.
            for entry in reply.iter_mut().filter(|e| e.2 == 0) {
                entry.2 = code(ResponseError::CoordinatorNotAvailable);
            }
        }
        out.replies.push((
            token,
            Reply::OffsetCommit(OffsetCommitReply { partitions: reply }),
        ));
    }

    pub(super) fn offset_fetch(&mut self, token: Token, call: OffsetFetchCall, out: &mut Output) {
        if let Err(error) = self.check_coordinator(&call.group_id) {
            out.replies.push((
                token,
                Reply::OffsetFetch(OffsetFetchReply {
                    error,
                    partitions: Vec::new(),
                }),
            ));
            return;
        }
        let group = self
            .groups
            .get(&call.group_id)
            .filter(|g| g.state != GroupState::Dead);
        let partitions = match (group, call.partitions) {
            (None, None) => Vec::new(),
            (None, Some(requested)) => requested
                .into_iter()
                .map(|(t, p)| unknown_offset(t, p))
                .collect(),
            (Some(group), None) => group
                .offsets
                .iter()
                .map(|((t, p), v)| fetched(t.clone(), *p, v))
                .collect(),
            (Some(group), Some(requested)) => requested
                .into_iter()
                .map(|(t, p)| match group.offsets.get(&(t.clone(), p)) {
                    Some(v) => fetched(t, p, v),
                    None => unknown_offset(t, p),
                })
                .collect(),
        };
        out.replies.push((
            token,
            Reply::OffsetFetch(OffsetFetchReply {
                error: 0,
                partitions,
            }),
        ));
    }

    pub(super) fn offset_delete(&mut self, token: Token, call: OffsetDeleteCall, out: &mut Output) {
        let group_error = |error: i16| {
            Reply::OffsetDelete(OffsetDeleteReply {
                error,
                partitions: Vec::new(),
            })
        };
        if call.group_id.is_empty() {
            out.replies
                .push((token, group_error(code(ResponseError::InvalidGroupId))));
            return;
        }
        if let Err(error) = self.check_coordinator(&call.group_id) {
            out.replies.push((token, group_error(error)));
            return;
        }
        let Some(group) = self
            .groups
            .get(&call.group_id)
            .filter(|g| g.state != GroupState::Dead)
        else {
            out.replies
                .push((token, group_error(code(ResponseError::GroupIdNotFound))));
            return;
        };
        let subscribed = match group.state {
            GroupState::Empty => BTreeSet::new(),
            _ if group.is_consumer_group() => group.subscribed_topics().unwrap_or_default(),
            _ => {
                out.replies
                    .push((token, group_error(code(ResponseError::NonEmptyGroup))));
                return;
            }
        };
        let stored = group.all_offset_partitions();
        let mut reply = Vec::with_capacity(call.partitions.len());
        let mut deleted = Vec::new();
        for (topic, partition) in call.partitions {
            if subscribed.contains(&topic) {
                reply.push((
                    topic,
                    partition,
                    code(ResponseError::GroupSubscribedToTopic),
                ));
                continue;
            }
            let tp = (topic, partition);
            if stored.contains(&tp) && !deleted.contains(&tp) {
                deleted.push(tp.clone());
            }
            reply.push((tp.0, tp.1, 0));
        }
        if deleted.is_empty() {
            out.replies.push((
                token,
                Reply::OffsetDelete(OffsetDeleteReply {
                    error: 0,
                    partitions: reply,
                }),
            ));
            return;
        }
        let records = deleted
            .iter()
            .map(|(t, p)| OffsetsRecord {
                key: encode_offset_commit_key(&call.group_id, t, *p),
                value: None,
            })
            .collect();
        let partition = group.partition;
        let work = PendingWork::OffsetDelete {
            group_id: call.group_id,
            token,
            reply,
            deleted,
        };
        self.start_append(partition, records, work, out);
    }

    pub(super) fn offset_delete_stored(
        &mut self,
        group_id: &str,
        token: Token,
        mut reply: Vec<(String, i32, i16)>,
        deleted: Vec<TopicPartition>,
        ok: bool,
        out: &mut Output,
    ) {
        if ok {
            if let Some(group) = self.groups.get_mut(group_id) {
                for tp in &deleted {
                    group.offsets.remove(tp);
                }
            }
        } else {
            let deleted: HashSet<&TopicPartition> = deleted.iter().collect();
            for entry in &mut reply {
                if deleted.contains(&(entry.0.clone(), entry.1)) {
                    entry.2 = code(ResponseError::CoordinatorNotAvailable);
                }
            }
        }
        out.replies.push((
            token,
            Reply::OffsetDelete(OffsetDeleteReply {
                error: 0,
                partitions: reply,
            }),
        ));
    }

    /// Retention: tombstones for expired offsets, and for empty groups left without offsets
    /// (they are forgotten). One append per partition.
    pub(super) fn expire_offsets(&mut self, now_ms: i64, out: &mut Output) {
        let retention_ms = self.config.offsets_retention_ms;
        let mut per_partition: BTreeMap<i32, (Vec<OffsetTombstone>, Vec<String>)> = BTreeMap::new();
        let mut ids: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.state != GroupState::Dead && self.is_serving(g.partition))
            .map(|g| g.id.clone())
            .collect();
        ids.sort();
        for id in ids {
            let Some(group) = self.groups.get_mut(&id) else {
                continue;
            };
            let expired = expired_offsets(group, now_ms, retention_ms);
            let entry = per_partition.entry(group.partition).or_default();
            for (tp, value) in expired {
                group.expiring.insert(tp.clone());
                entry.0.push((id.clone(), tp, Some(value)));
            }
            let nothing_left = group.offsets.keys().all(|tp| group.expiring.contains(tp))
                && group.pending_commits.is_empty();
            if group.state == GroupState::Empty && nothing_left && group.pending_members.is_empty()
            {
                // Dead until the tombstone is stored (joins meanwhile are told to retry).
                group.state = GroupState::Dead;
                entry.1.push(id.clone());
            }
        }
        for (partition, (offsets, groups)) in per_partition {
            if offsets.is_empty() && groups.is_empty() {
                continue;
            }
            let mut records: Vec<OffsetsRecord> = offsets
                .iter()
                .map(|(g, (t, p), _)| OffsetsRecord {
                    key: encode_offset_commit_key(g, t, *p),
                    value: None,
                })
                .collect();
            records.extend(groups.iter().map(|g| OffsetsRecord {
                key: encode_group_metadata_key(g),
                value: None,
            }));
            let work = PendingWork::Cleanup {
                token: None,
                offsets,
                groups,
            };
            self.start_append(partition, records, work, out);
        }
    }

    /// Tombstones stored (or not): offsets and groups go, or come back as they were.
    pub(super) fn cleanup_stored(
        &mut self,
        token: Option<Token>,
        offsets: Vec<OffsetTombstone>,
        groups: Vec<String>,
        ok: bool,
        out: &mut Output,
    ) {
        for (group_id, tp, expected) in offsets {
            let Some(group) = self.groups.get_mut(&group_id) else {
                continue;
            };
            group.expiring.remove(&tp);
            // A commit stored after the tombstone was written must survive it.
            if ok && expected.is_none_or(|v| group.offsets.get(&tp) == Some(&v)) {
                group.offsets.remove(&tp);
            }
        }
        for group_id in &groups {
            let Some(group) = self.groups.get_mut(group_id) else {
                continue;
            };
            if group.state != GroupState::Dead {
                continue;
            }
            if ok {
                self.groups.remove(group_id);
            } else {
                group.state = GroupState::Empty;
            }
        }
        let Some(token) = token else {
            return;
        };
        let result = if ok {
            0
        } else {
            code(ResponseError::CoordinatorNotAvailable)
        };
        let Some(wait) = self.delete_waits.get_mut(&token) else {
            return;
        };
        for entry in &mut wait.results {
            if groups.contains(&entry.0) {
                entry.1 = result;
            }
        }
        wait.outstanding -= 1;
        if wait.outstanding == 0 {
            if let Some(wait) = self.delete_waits.remove(&token) {
                out.replies.push((token, Reply::DeleteGroups(wait.results)));
            }
        }
    }
}
