//! The group coordinator over every group of the `__consumer_offsets` partitions it serves:
//! routing calls, loading partitions, tracking the appends replies wait for, and time.
//!
//! The protocol itself lives next door: `membership.rs` (join, sync, heartbeat, leave and the
//! rebalance they drive), `offsets.rs` (commit, fetch, delete, retention), `admin.rs` (list,
//! describe, delete groups).
//!
//! Appends are assumed to reach the log in the order they are emitted, and `append_done` to
//! be reported in that order per partition: in-memory state follows the log that way.

use crate::util::hash::HashMap;
use std::collections::BTreeMap;

use bytes::Bytes;

use super::api::{
    offsets_partition_for, Call, JoinReply, OffsetsRecord, Output, PendingAppend, Reply, SyncReply,
    Token,
};
use super::group_state::{Group, TopicPartition};
use super::records::{
    decode_key, encode_group_metadata_key, encode_offset_commit_key, GroupMetadataValue,
    OffsetCommitValue, RecordError, RecordKey,
};
use crate::config::GroupConfig;
use crate::protocol::ResponseError;

/// Kafka's `offsets.retention.check.interval.ms`: how often expired offsets are looked for.
pub const OFFSETS_RETENTION_CHECK_INTERVAL_MS: i64 = 600_000;

/// Makes a member id from a prefix (the client id, or the group instance id of a static member).
pub type MemberIdSource = Box<dyn FnMut(&str) -> String + Send>;

/// What a coordinator knows about one of its partitions.
enum PartitionLoad {
    /// Records replayed so far: the latest value per key, `None` for a tombstone.
    Loading(LoadedRecords),
    /// `complete`: every record of the partition was replayed. Only then may its live state
    /// replace the log (compaction): the records a partial load missed exist only on disk.
    Serving { complete: bool },
}

#[derive(Default)]
struct LoadedRecords {
    metadata: HashMap<String, Option<(GroupMetadataValue, Bytes)>>,
    offsets: HashMap<String, BTreeMap<TopicPartition, Option<OffsetCommitValue>>>,
    /// A record or batch of the partition could not be replayed.
    incomplete: bool,
}

/// An offset to remove once its tombstone is stored: (group, partition, the value expected to
/// be there, `None` for "whatever it is").
pub(super) type OffsetTombstone = (String, TopicPartition, Option<OffsetCommitValue>);

/// What an append's outcome completes.
pub(super) enum PendingWork {
    /// The leader's assignment for `generation`; sync replies wait for it.
    Assignment {
        group_id: String,
        generation: i32,
        assignments: HashMap<String, Bytes>,
        value: Bytes,
    },
    /// The group's record after it became empty (nobody waits for it).
    EmptyGroup { group_id: String, value: Bytes },
    /// A static member rejoined a stable group under a new member id; its join waits.
    StaticRejoin {
        group_id: String,
        token: Token,
        value: Bytes,
        revert: StaticRevert,
    },
    OffsetCommit {
        group_id: String,
        token: Token,
        /// Reply in request order; stored partitions get their code when the append finishes.
        reply: Vec<(String, i32, i16)>,
        stored: Vec<(TopicPartition, OffsetCommitValue)>,
    },
    OffsetDelete {
        group_id: String,
        token: Token,
        reply: Vec<(String, i32, i16)>,
        deleted: Vec<TopicPartition>,
    },
    /// Tombstones for offsets (an expected value: only remove if still that one; `None`:
    /// always) and for whole groups (marked Dead until then).
    Cleanup {
        token: Option<Token>,
        offsets: Vec<OffsetTombstone>,
        groups: Vec<String>,
    },
}

/// How to undo a static member's replacement if storing it fails.
pub(super) struct StaticRevert {
    pub old_member_id: String,
    pub new_member_id: String,
    pub old_protocols: Vec<(String, Bytes)>,
    pub old_rebalance_timeout_ms: i32,
    pub old_session_timeout_ms: i32,
}

/// DeleteGroups replies waiting for one append per partition.
pub(super) struct DeleteGroupsWait {
    pub results: Vec<(String, i16)>,
    pub outstanding: usize,
}

pub struct GroupCoordinator {
    pub(super) config: GroupConfig,
    partitions: HashMap<i32, PartitionLoad>,
    pub(super) groups: HashMap<String, Group>,
    pending: HashMap<u64, PendingWork>,
    next_append_id: u64,
    member_ids: MemberIdSource,
    pub(super) next_retention_check_ms: i64,
    pub(super) delete_waits: HashMap<Token, DeleteGroupsWait>,
}

impl GroupCoordinator {
    /// Member ids are `{client_id}-{uuid v4}` (`{group_instance_id}-{uuid}` for static
    /// members), as Kafka makes them.
    pub fn new(config: GroupConfig) -> Self {
        Self::with_member_ids(
            config,
            Box::new(|prefix| format!("{prefix}-{}", crate::util::entropy::uuid_v4())),
        )
    }

    /// With a chosen source of member ids (tests make them deterministic).
    pub fn with_member_ids(config: GroupConfig, member_ids: MemberIdSource) -> Self {
        GroupCoordinator {
            config,
            partitions: HashMap::default(),
            groups: HashMap::default(),
            pending: HashMap::default(),
            next_append_id: 1,
            member_ids,
            next_retention_check_ms: 0,
            delete_waits: HashMap::default(),
        }
    }

    /// Routes groups over `partitions` partitions from now on: the real partition count of
    /// `__consumer_offsets`, which differs from `offsets.topic.num.partitions` when the topic
    /// was created with another value (Kafka routes by the topic's count too).
    pub fn set_offsets_partitions(&mut self, partitions: i32) {
        self.config.offsets_partitions = partitions;
    }

    /// Starts serving `partition`: its groups answer COORDINATOR_LOAD_IN_PROGRESS until
    /// `finish_load`. Loading a partition again forgets what was known of it (use `unload`
    /// first to answer requests waiting in its groups).
    pub fn begin_load(&mut self, partition: i32) {
        self.groups.retain(|_, g| g.partition != partition);
        self.partitions
            .insert(partition, PartitionLoad::Loading(LoadedRecords::default()));
    }

    /// Stops serving `partition` (Kafka's group unloading): its groups are forgotten and the
    /// joins and syncs waiting in them get NOT_COORDINATOR, so clients find the new coordinator.
    /// Appends already emitted still report to `append_done`, which then only answers the
    /// replies waiting for them.
    pub fn unload(&mut self, partition: i32) -> Output {
        let mut out = Output::default();
        self.partitions.remove(&partition);
        let not_coordinator = ResponseError::NotCoordinator.code();
        let mut ids: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.partition == partition)
            .map(|g| g.id.clone())
            .collect();
        ids.sort();
        for id in ids {
            let Some(group) = self.groups.remove(&id) else {
                continue;
            };
            for member in group.members {
                if let Some(token) = member.awaiting_join {
                    out.replies.push((
                        token,
                        Reply::Join(JoinReply {
                            error: not_coordinator,
                            generation_id: -1,
                            member_id: member.id.clone(),
                            ..JoinReply::default()
                        }),
                    ));
                }
                if let Some(token) = member.awaiting_sync {
                    out.replies.push((
                        token,
                        Reply::Sync(SyncReply {
                            error: not_coordinator,
                            ..SyncReply::default()
                        }),
                    ));
                }
            }
        }
        out
    }

    /// Replays one record of a loading partition (latest value per key wins; `None` deletes).
    /// Record types this coordinator does not use are skipped. A record that cannot be
    /// decoded makes the load incomplete (see [`GroupCoordinator::load_incomplete`]).
    pub fn replay(
        &mut self,
        partition: i32,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), RecordError> {
        let Some(PartitionLoad::Loading(loaded)) = self.partitions.get_mut(&partition) else {
            return Err(RecordError::PartitionNotLoading(partition));
        };
        let replayed = replay_into(loaded, key, value);
        if replayed.is_err() {
            loaded.incomplete = true;
        }
        replayed
    }

    /// Records of the loading `partition` were not replayed (a read failed, a batch could
    /// not be decoded, the load stopped before the log's end): its groups are served from
    /// what was read, but it is never compacted ([`GroupCoordinator::snapshot_records`]).
    pub fn load_incomplete(&mut self, partition: i32) {
        if let Some(PartitionLoad::Loading(loaded)) = self.partitions.get_mut(&partition) {
            loaded.incomplete = true;
        }
    }

    /// The partition's groups become servable: groups with members are Stable, their sessions
    /// starting now.
    pub fn finish_load(&mut self, partition: i32, now_ms: i64) {
        if !matches!(
            self.partitions.get(&partition),
            Some(PartitionLoad::Loading(_))
        ) {
            return;
        }
        let Some(PartitionLoad::Loading(loaded)) = self.partitions.remove(&partition) else {
            return;
        };
        let LoadedRecords {
            mut metadata,
            offsets,
            incomplete,
        } = loaded;
        self.partitions.insert(
            partition,
            PartitionLoad::Serving {
                complete: !incomplete,
            },
        );
        let mut ids: Vec<String> = metadata.keys().chain(offsets.keys()).cloned().collect();
        ids.sort();
        ids.dedup();
        let mut offsets = offsets;
        for id in ids {
            let group_metadata = metadata.remove(&id).flatten();
            let group_offsets: BTreeMap<TopicPartition, OffsetCommitValue> = offsets
                .remove(&id)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(tp, v)| v.map(|v| (tp, v)))
                .collect();
            if group_metadata.is_none() && group_offsets.is_empty() {
                continue;
            }
            let group = Group::loaded(id.clone(), partition, group_metadata, group_offsets, now_ms);
            self.groups.insert(id, group);
        }
    }

    pub fn handle(&mut self, token: Token, call: Call, now_ms: i64) -> Output {
        let mut out = Output::default();
        match call {
            Call::Join(c) => self.join(token, c, now_ms, &mut out),
            Call::Sync(c) => self.sync(token, c, now_ms, &mut out),
            Call::Heartbeat(c) => self.heartbeat(token, c, now_ms, &mut out),
            Call::Leave(c) => self.leave(token, c, now_ms, &mut out),
            Call::OffsetCommit(c) => self.offset_commit(token, c, now_ms, &mut out),
            Call::OffsetFetch(c) => self.offset_fetch(token, c, &mut out),
            Call::ListGroups { states_filter } => self.list_groups(token, &states_filter, &mut out),
            Call::DescribeGroups { group_ids } => self.describe_groups(token, &group_ids, &mut out),
            Call::DeleteGroups { group_ids } => self.delete_groups(token, &group_ids, &mut out),
            Call::OffsetDelete(c) => self.offset_delete(token, c, &mut out),
        }
        out
    }

    /// Drives timeouts: expired sessions and pending member ids, join and sync phase deadlines,
    /// the initial rebalance delay, and offset retention.
    pub fn tick(&mut self, now_ms: i64) -> Output {
        let mut out = Output::default();
        let mut ids: Vec<String> = self
            .groups
            .values()
            .filter(|g| self.is_serving(g.partition))
            .map(|g| g.id.clone())
            .collect();
        ids.sort();
        for id in &ids {
            self.expire_members(id, now_ms, &mut out);
            self.expire_join_phase(id, now_ms, &mut out);
            self.expire_sync_phase(id, now_ms, &mut out);
        }
        if now_ms >= self.next_retention_check_ms {
            self.next_retention_check_ms = now_ms + OFFSETS_RETENTION_CHECK_INTERVAL_MS;
            self.expire_offsets(now_ms, &mut out);
        }
        out
    }

    /// The earliest time `tick` has something to do.
    pub fn next_deadline(&self) -> Option<i64> {
        let mut earliest = Some(self.next_retention_check_ms);
        let mut consider = |t: i64| {
            earliest = Some(earliest.map_or(t, |e: i64| e.min(t)));
        };
        // As `tick`: groups of a partition still loading wait for its load.
        for group in self
            .groups
            .values()
            .filter(|g| self.is_serving(g.partition))
        {
            group.pending_members.values().for_each(|&t| consider(t));
            if let Some(phase) = group.join_phase {
                consider(phase.deadline_ms());
            }
            if let Some(t) = group.sync_deadline_ms {
                consider(t);
            }
            for member in &group.members {
                if member.awaiting_join.is_some() {
                    if member.is_new {
                        consider(member.new_member_deadline_ms);
                    }
                } else if member.awaiting_sync.is_none() {
                    consider(member.session_deadline_ms);
                }
            }
        }
        earliest
    }

    /// The outcome of an append from an earlier Output: replies that waited for it go out; on
    /// failure they carry COORDINATOR_NOT_AVAILABLE and nothing is applied.
    pub fn append_done(&mut self, id: u64, ok: bool, now_ms: i64) -> Output {
        let mut out = Output::default();
        let Some(work) = self.pending.remove(&id) else {
            return out;
        };
        match work {
            PendingWork::Assignment {
                group_id,
                generation,
                assignments,
                value,
            } => self.assignment_stored(
                &group_id,
                generation,
                assignments,
                value,
                ok,
                now_ms,
                &mut out,
            ),
            PendingWork::EmptyGroup { group_id, value } => {
                // A failed write is only logged by Kafka: the group is empty either way, and an
                // older generation in the log has no members that could act on it.
                if ok {
                    if let Some(group) = self.groups.get_mut(&group_id) {
                        group.persisted_metadata = Some(value);
                    }
                }
            }
            PendingWork::StaticRejoin {
                group_id,
                token,
                value,
                revert,
            } => self.static_rejoin_stored(&group_id, token, value, revert, ok, now_ms, &mut out),
            PendingWork::OffsetCommit {
                group_id,
                token,
                reply,
                stored,
            } => self.commit_stored(&group_id, token, reply, stored, ok, &mut out),
            PendingWork::OffsetDelete {
                group_id,
                token,
                reply,
                deleted,
            } => self.offset_delete_stored(&group_id, token, reply, deleted, ok, &mut out),
            PendingWork::Cleanup {
                token,
                offsets,
                groups,
            } => self.cleanup_stored(token, offsets, groups, ok, &mut out),
        }
        out
    }

    /// The live state of `partition` as records: each group's latest stored metadata and its
    /// stored offsets, enough to replace everything older in the partition. `None` unless the
    /// partition is served from a complete load: after a partial one, records that were not
    /// read would be replaced by nothing.
    pub fn snapshot_records(&self, partition: i32) -> Option<Vec<OffsetsRecord>> {
        if !matches!(
            self.partitions.get(&partition),
            Some(PartitionLoad::Serving { complete: true })
        ) {
            return None;
        }
        let mut groups: Vec<&Group> = self
            .groups
            .values()
            .filter(|g| g.partition == partition)
            .collect();
        groups.sort_by(|a, b| a.id.cmp(&b.id));
        let mut records = Vec::new();
        for group in groups {
            if let Some(value) = &group.persisted_metadata {
                records.push(OffsetsRecord {
                    key: encode_group_metadata_key(&group.id),
                    value: Some(value.clone()),
                });
            }
            for ((topic, p), value) in &group.offsets {
                records.push(OffsetsRecord {
                    key: encode_offset_commit_key(&group.id, topic, *p),
                    value: Some(value.encode()),
                });
            }
        }
        Some(records)
    }

    /// Every committed offset held: (group, topic, partition, offset). Read-only, for the
    /// consumer-lag metrics.
    pub fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        self.groups
            .values()
            .flat_map(|g| {
                g.offsets
                    .iter()
                    .map(|((topic, p), v)| (g.id.clone(), topic.clone(), *p, v.offset))
            })
            .collect()
    }

    // ---- shared helpers ----

    pub(super) fn partition_of(&self, group_id: &str) -> i32 {
        offsets_partition_for(group_id, self.config.offsets_partitions)
    }

    pub(super) fn is_serving(&self, partition: i32) -> bool {
        matches!(
            self.partitions.get(&partition),
            Some(PartitionLoad::Serving { .. })
        )
    }

    pub(super) fn is_loading_any(&self) -> bool {
        self.partitions
            .values()
            .any(|p| matches!(p, PartitionLoad::Loading(_)))
    }

    /// Whether this coordinator can answer for `group_id` now: the error code if not.
    pub(super) fn check_coordinator(&self, group_id: &str) -> Result<(), i16> {
        match self.partitions.get(&self.partition_of(group_id)) {
            Some(PartitionLoad::Serving { .. }) => Ok(()),
            Some(PartitionLoad::Loading(_)) => Err(ResponseError::CoordinatorLoadInProgress.code()),
            None => Err(ResponseError::NotCoordinator.code()),
        }
    }

    pub(super) fn new_member_id(&mut self, prefix: &str) -> String {
        (self.member_ids)(prefix)
    }

    /// Registers `work` to complete when the append of `records` to `partition` finishes.
    pub(super) fn start_append(
        &mut self,
        partition: i32,
        records: Vec<OffsetsRecord>,
        work: PendingWork,
        out: &mut Output,
    ) -> u64 {
        let id = self.next_append_id;
        self.next_append_id += 1;
        self.pending.insert(id, work);
        out.appends.push(PendingAppend {
            id,
            partition,
            records,
        });
        id
    }

    /// Stores the group's current metadata (after it became empty).
    pub(super) fn store_empty_group(&mut self, group_id: &str, out: &mut Output) {
        let Some(group) = self.groups.get(group_id) else {
            return;
        };
        let value = group.metadata_value(None).encode();
        let partition = group.partition;
        let record = OffsetsRecord {
            key: encode_group_metadata_key(group_id),
            value: Some(value.clone()),
        };
        self.start_append(
            partition,
            vec![record],
            PendingWork::EmptyGroup {
                group_id: group_id.to_string(),
                value,
            },
            out,
        );
    }
}

/// One record into the records of a loading partition.
fn replay_into(
    loaded: &mut LoadedRecords,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(), RecordError> {
    match decode_key(key)? {
        RecordKey::OffsetCommit {
            group,
            topic,
            partition,
        } => {
            let value = value.map(OffsetCommitValue::decode).transpose()?;
            loaded
                .offsets
                .entry(group)
                .or_default()
                .insert((topic, partition), value);
        }
        RecordKey::GroupMetadata { group } => {
            let value = match value {
                Some(raw) => Some((
                    GroupMetadataValue::decode(raw)?,
                    Bytes::copy_from_slice(raw),
                )),
                None => None,
            };
            loaded.metadata.insert(group, value);
        }
        RecordKey::Other(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: i32 = 3;

    fn commit_record(group: &str, offset: i64) -> (Bytes, Bytes) {
        let value = OffsetCommitValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
            expire_timestamp: None,
        };
        (encode_offset_commit_key(group, "t", 0), value.encode())
    }

    /// A coordinator that loaded partition `P` from `records` (a `None` value: a record that
    /// does not decode), after `gap` when the service reports a gap in the log.
    fn loaded(records: &[(&str, Option<i64>)], gap: bool) -> GroupCoordinator {
        let mut coord = GroupCoordinator::new(GroupConfig::default());
        coord.begin_load(P);
        for (group, offset) in records {
            let (key, value) = commit_record(group, offset.unwrap_or(0));
            let value = if offset.is_some() {
                value
            } else {
                Bytes::from_static(&[0xff, 0xff])
            };
            let _ = coord.replay(P, &key, Some(&value));
        }
        if gap {
            coord.load_incomplete(P);
        }
        coord.finish_load(P, 0);
        coord
    }

    /// Compaction replaces the partition with its snapshot: after a partial load the
    /// snapshot lacks what was not loaded, so there must be none (issue 12).
    #[test]
    fn a_partially_loaded_partition_has_no_snapshot() {
        let whole = loaded(&[("a", Some(5)), ("b", Some(7))], false);
        assert_eq!(whole.snapshot_records(P).map(|r| r.len()), Some(2));

        let bad_record = loaded(&[("a", Some(5)), ("b", None)], false);
        assert_eq!(
            bad_record.snapshot_records(P),
            None,
            "a record did not decode"
        );
        let gap = loaded(&[("a", Some(5))], true);
        assert_eq!(
            gap.snapshot_records(P),
            None,
            "the log was not read to its end"
        );

        // What was read is still served.
        for coord in [&bad_record, &gap] {
            assert_eq!(
                coord.committed_offsets(),
                vec![("a".to_string(), "t".to_string(), 0, 5)]
            );
        }
        // Loading it again, whole, allows compaction again.
        let mut again = loaded(&[("a", Some(5))], true);
        again.begin_load(P);
        again.finish_load(P, 0);
        assert_eq!(again.snapshot_records(P), Some(Vec::new()));
    }
}
