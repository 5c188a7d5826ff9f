//! The group coordinator's inputs and outputs, independent of the wire protocol version.
//!
//! The coordinator is a state machine without I/O: the shard feeds it a [`Call`] with a
//! [`Token`] naming the waiting client request, and it answers with an [`Output`]: replies that
//! can go out now, and at most one append of records to a `__consumer_offsets` partition whose
//! replies wait for the append (the shard reports the outcome with `append_done`). Time comes in
//! as an argument (`now_ms`), so tests drive it with a simulated clock.

use bytes::Bytes;

/// Names a client request waiting for its reply (chosen by the shard, unique while pending).
pub type Token = u64;

/// A request to the coordinator. Error codes in replies are Kafka's (`ResponseError::code`).
#[derive(Debug, Clone)]
pub enum Call {
    Join(JoinCall),
    Sync(SyncCall),
    Heartbeat(HeartbeatCall),
    Leave(LeaveCall),
    OffsetCommit(OffsetCommitCall),
    OffsetFetch(OffsetFetchCall),
    /// Groups whose state is in the filter (empty filter: all groups).
    ListGroups {
        states_filter: Vec<String>,
    },
    DescribeGroups {
        group_ids: Vec<String>,
    },
    DeleteGroups {
        group_ids: Vec<String>,
    },
    OffsetDelete(OffsetDeleteCall),
}

#[derive(Debug, Clone)]
pub enum Reply {
    Join(JoinReply),
    Sync(SyncReply),
    /// Heartbeat: just an error code (0 = none).
    Heartbeat(i16),
    Leave(LeaveReply),
    OffsetCommit(OffsetCommitReply),
    OffsetFetch(OffsetFetchReply),
    ListGroups(ListGroupsReply),
    DescribeGroups(Vec<GroupDescription>),
    /// (group id, error code) per requested group.
    DeleteGroups(Vec<(String, i16)>),
    OffsetDelete(OffsetDeleteReply),
}

#[derive(Debug, Clone)]
pub struct JoinCall {
    pub group_id: String,
    /// Empty on a member's first join.
    pub member_id: String,
    /// `group.instance.id` (static membership).
    pub group_instance_id: Option<String>,
    pub session_timeout_ms: i32,
    /// v0 has none: the shard passes the session timeout.
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub client_id: String,
    pub client_host: String,
    /// Join v4+: an unknown member without an id first gets MEMBER_ID_REQUIRED with its new id.
    pub require_known_member_id: bool,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinReply {
    pub error: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    /// Static leader rejoining a stable group: keep the current assignment (Join v9).
    pub skip_assignment: bool,
    pub member_id: String,
    /// Filled for the leader only: every member and its metadata for the chosen protocol.
    pub members: Vec<JoinMember>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone)]
pub struct SyncCall {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+: checked against the group's when present (INCONSISTENT_GROUP_PROTOCOL).
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment: (member id, assignment); empty from followers.
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncReply {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

#[derive(Debug, Clone)]
pub struct HeartbeatCall {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct LeaveCall {
    pub group_id: String,
    /// (member id, group instance id); v0–v2 carry one member without an instance id.
    pub members: Vec<(String, Option<String>)>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LeaveReply {
    pub error: i16,
    /// Per member, in request order: (member id, group instance id, error code).
    pub members: Vec<(String, Option<String>, i16)>,
}

#[derive(Debug, Clone)]
pub struct OffsetCommitCall {
    pub group_id: String,
    /// -1 for a commit outside group management (simple consumer).
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub offsets: Vec<OffsetToCommit>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetToCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    /// The commit time OffsetCommit v1 gives; `None` (or -1 on the wire): the broker's time.
    pub commit_timestamp: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetCommitReply {
    /// (topic, partition, error code), in request order.
    pub partitions: Vec<(String, i32, i16)>,
}

#[derive(Debug, Clone)]
pub struct OffsetFetchCall {
    pub group_id: String,
    /// None: every partition the group has an offset for.
    pub partitions: Option<Vec<(String, i32)>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetFetchReply {
    /// Group-level error (COORDINATOR_LOAD_IN_PROGRESS, ...).
    pub error: i16,
    pub partitions: Vec<FetchedOffset>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FetchedOffset {
    pub topic: String,
    pub partition: i32,
    /// -1 when the group has no offset for the partition.
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    pub error: i16,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListGroupsReply {
    pub error: i16,
    pub groups: Vec<ListedGroup>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    /// Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub state: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupDescription {
    pub group_id: String,
    /// GROUP_ID_NOT_FOUND is not used by Kafka here: an unknown group is described as Dead.
    pub error: i16,
    pub state: String,
    pub protocol_type: String,
    /// The chosen protocol (assignor) name; empty before the first rebalance.
    pub protocol_data: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// The member's metadata for the chosen protocol.
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone)]
pub struct OffsetDeleteCall {
    pub group_id: String,
    pub partitions: Vec<(String, i32)>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetDeleteReply {
    pub error: i16,
    /// (topic, partition, error code); GROUP_SUBSCRIBED_TO_TOPIC when a member consumes it.
    pub partitions: Vec<(String, i32, i16)>,
}

/// One record of `__consumer_offsets`: a key and a value, or a tombstone (`value: None`).
/// Encoded with Kafka's schemas (see `records.rs`), so Kafka tools can read them.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetsRecord {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// Records the shard must append to `__consumer_offsets` partition `partition`, as one batch.
/// The shard calls `append_done(id, ok, now)` when the append finished.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingAppend {
    pub id: u64,
    pub partition: i32,
    pub records: Vec<OffsetsRecord>,
}

/// What the coordinator wants done after an input.
#[derive(Debug, Default)]
pub struct Output {
    pub replies: Vec<(Token, Reply)>,
    pub appends: Vec<PendingAppend>,
}

impl Output {
    pub fn reply(token: Token, reply: Reply) -> Output {
        Output {
            replies: vec![(token, reply)],
            appends: Vec::new(),
        }
    }

    pub fn merge(&mut self, other: Output) {
        self.replies.extend(other.replies);
        self.appends.extend(other.appends);
    }
}

/// The `__consumer_offsets` partition of a group: Kafka's `abs(groupId.hashCode) % partitions`
/// (Java's String.hashCode over UTF-16 units, and Kafka's abs that maps MIN_VALUE to 0).
pub fn offsets_partition_for(group_id: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group_id.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_kafka() {
        // Java: "my-group".hashCode() = -1_906_497_762 → abs % 50 = 12.
        assert_eq!(offsets_partition_for("my-group", 50), 12);
        assert_eq!(offsets_partition_for("", 50), 0);
        for g in ["a", "group-1", "ünïcode", "x".repeat(300).as_str()] {
            let p = offsets_partition_for(g, 50);
            assert!((0..50).contains(&p));
        }
    }
}
