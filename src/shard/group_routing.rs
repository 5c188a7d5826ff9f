//! Routing of consumer-group work to the shard that coordinates each group: the owner of the
//! group's `__consumer_offsets` partition. Handlers call these from any shard.

use crate::util::hash::HashMap;
use std::rc::{Rc, Weak};

use crate::group::api::{
    offsets_partition_for, Call, GroupDescription, ListGroupsReply, Reply, OFFSETS_TOPIC,
};
use crate::partition::replica_manager::RoleListener;
use crate::partition::Partition;
use crate::protocol::ResponseError;
use crate::runtime;

use super::messages::{ShardReply, ShardRequest};
use super::Shard;
use crate::group::service::GroupHost;
use crate::metadata::MetadataImage;

/// Why a group call got no answer from its coordinator: a Kafka error code for the whole
/// request (COORDINATOR_NOT_AVAILABLE while the offsets topic is missing or a shard is gone).
pub type GroupCallError = i16;

impl GroupHost for Shard {
    fn offsets_partition(&self, index: i32) -> Option<Rc<Partition>> {
        self.partitions.get(OFFSETS_TOPIC, index)
    }

    fn offsets_partitions(&self) -> Vec<Rc<Partition>> {
        let mut owned = self.partitions.all();
        owned.retain(|p| p.topic == OFFSETS_TOPIC);
        owned
    }

    fn offsets_partition_count(&self) -> Option<i32> {
        // The placement image: the partitions whose logs this broker holds (the published
        // image may still be the empty one of a cluster-mode start when roles are applied).
        let placed = self.placement();
        let topic = placed.topic_by_name(OFFSETS_TOPIC)?;
        i32::try_from(topic.partitions.len()).ok()
    }
}

/// The group service hears of `__consumer_offsets` leadership from the shard's replica
/// manager: groups load where their partition is led and unload where it is followed.
pub struct GroupRoles(pub Weak<Shard>);

impl RoleListener for GroupRoles {
    fn followed(&self, p: &Partition) {
        if p.topic != OFFSETS_TOPIC {
            return;
        }
        if let Some(shard) = self.0.upgrade() {
            shard.groups.unload_partition(&shard.group_host(), p.index);
        }
    }

    fn leading(&self, leading: &[Rc<Partition>]) {
        if !leading.iter().any(|p| p.topic == OFFSETS_TOPIC) {
            return;
        }
        let Some(shard) = self.0.upgrade() else {
            return;
        };
        // The coordinator moves with the leadership: groups of newly led partitions are
        // loading (COORDINATOR_LOAD_IN_PROGRESS) before the metadata names this broker,
        // and load in the background.
        let loads = shard.groups.begin_loads(&*shard);
        if !loads.is_empty() {
            let (groups, host) = (Rc::clone(&shard.groups), shard.group_host());
            runtime::spawn_detached(async move { groups.finish_loads(&*host, loads).await });
        }
    }
}

impl Shard {
    /// This shard as its group service's host.
    pub fn group_host(self: &Rc<Self>) -> Rc<dyn GroupHost> {
        Rc::clone(self) as Rc<dyn GroupHost>
    }

    /// Shard 0 at startup: creates `__consumer_offsets` if it does not exist yet (Kafka creates
    /// it on the first FindCoordinator; creating it up front means the first consumer does
    /// not wait for it). `replication_factor` -1: `default.replication.factor`.
    pub async fn ensure_offsets_topic(self: &Rc<Self>, replication_factor: i32) {
        if self.id != 0 || self.image().topic_by_name(OFFSETS_TOPIC).is_some() {
            return;
        }
        let mut configs = std::collections::BTreeMap::new();
        // Small segments: compaction (a rewrite of the live state) frees space by dropping
        // whole segments.
        configs.insert(
            "segment.bytes".to_string(),
            crate::group::service::OFFSETS_SEGMENT_BYTES.to_string(),
        );
        let partitions = self.config.group.offsets_partitions;
        let created = self
            .admin(super::messages::AdminOp::CreateTopic {
                name: OFFSETS_TOPIC.to_string(),
                replication_factor,
                assignment: None,
                partitions,
                configs,
                validate_only: false,
            })
            .await;
        match created {
            Ok(_) => tracing::info!(partitions, "created {OFFSETS_TOPIC}"),
            // Cluster mode: another broker's attempt committed first.
            Err(e) if e.code == crate::protocol::ResponseError::TopicAlreadyExists.code() => {
                tracing::debug!("{OFFSETS_TOPIC} was created by another broker")
            }
            Err(e) => {
                tracing::error!(code = e.code, error = %e.message, "could not create {OFFSETS_TOPIC}; consumer groups are unavailable")
            }
        }
    }

    /// The shard coordinating `group_id`, or None while `__consumer_offsets` does not exist.
    pub fn group_coordinator_shard(&self, group_id: &str) -> Option<usize> {
        let meta = self.image();
        let partitions = offsets_partition_count(&meta)?;
        let partition = offsets_partition_for(group_id, partitions);
        meta.shard_of(OFFSETS_TOPIC, partition, self.count)
    }

    /// Runs one call for `group_id` on its coordinator and returns the reply.
    pub async fn group_call(
        self: &Rc<Self>,
        group_id: &str,
        call: Call,
    ) -> Result<Reply, GroupCallError> {
        match self.cluster_coordinator(group_id) {
            Some(Err(code)) => return Err(code),
            Some(Ok(b)) if b.id != self.config.node_id => {
                return Err(ResponseError::NotCoordinator.code())
            }
            _ => {}
        }
        let Some(owner) = self.group_coordinator_shard(group_id) else {
            return Err(ResponseError::CoordinatorNotAvailable.code());
        };
        self.group_call_on(owner, call).await
    }

    async fn group_call_on(self: &Rc<Self>, owner: usize, call: Call) -> Result<Reply, i16> {
        if owner == self.id {
            return self.groups.run_call(&self.group_host(), call).await;
        }
        match self.request(owner, ShardRequest::Group(call)).await {
            Some(ShardReply::Group(r)) => r,
            _ => Err(ResponseError::CoordinatorNotAvailable.code()),
        }
    }

    /// ListGroups over every shard's coordinator, merged.
    pub async fn list_groups(self: &Rc<Self>, states_filter: Vec<String>) -> ListGroupsReply {
        let mut tasks = Vec::new();
        for owner in 0..self.count {
            let shard = Rc::clone(self);
            let call = Call::ListGroups {
                states_filter: states_filter.clone(),
            };
            tasks.push(runtime::spawn(async move {
                shard.group_call_on(owner, call).await
            }));
        }
        let mut merged = ListGroupsReply::default();
        for t in tasks {
            match t.await {
                Ok(Reply::ListGroups(r)) => {
                    if r.error != 0 && merged.error == 0 {
                        merged.error = r.error;
                    }
                    merged.groups.extend(r.groups);
                }
                Ok(_) | Err(_) => {
                    merged.error = ResponseError::CoordinatorNotAvailable.code();
                }
            }
        }
        merged.groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        merged
    }

    /// DescribeGroups: each group asked of its coordinator; results in request order.
    pub async fn describe_groups(self: &Rc<Self>, group_ids: Vec<String>) -> Vec<GroupDescription> {
        let replies = self
            .per_coordinator(group_ids.clone(), |ids| Call::DescribeGroups {
                group_ids: ids,
            })
            .await;
        let mut found: HashMap<String, GroupDescription> = HashMap::default();
        for (ids, reply) in replies {
            match reply {
                Ok(Reply::DescribeGroups(list)) => {
                    for d in list {
                        found.insert(d.group_id.clone(), d);
                    }
                }
                Ok(_) | Err(_) => {
                    for id in ids {
                        found.insert(id.clone(), coordinator_missing_description(id));
                    }
                }
            }
        }
        group_ids
            .into_iter()
            .map(|id| {
                found
                    .remove(&id)
                    .unwrap_or_else(|| coordinator_missing_description(id))
            })
            .collect()
    }

    /// DeleteGroups: (group id, error code) in request order.
    pub async fn delete_groups(self: &Rc<Self>, group_ids: Vec<String>) -> Vec<(String, i16)> {
        let replies = self
            .per_coordinator(group_ids.clone(), |ids| Call::DeleteGroups {
                group_ids: ids,
            })
            .await;
        let mut found: HashMap<String, i16> = HashMap::default();
        for (ids, reply) in replies {
            match reply {
                Ok(Reply::DeleteGroups(list)) => found.extend(list),
                Ok(_) | Err(_) => {
                    for id in ids {
                        found.insert(id, ResponseError::CoordinatorNotAvailable.code());
                    }
                }
            }
        }
        group_ids
            .into_iter()
            .map(|id| {
                let code = found
                    .get(&id)
                    .copied()
                    .unwrap_or(ResponseError::CoordinatorNotAvailable.code());
                (id, code)
            })
            .collect()
    }

    /// Splits group ids by coordinator shard and runs `make(ids)` on each, concurrently.
    async fn per_coordinator(
        self: &Rc<Self>,
        group_ids: Vec<String>,
        make: impl Fn(Vec<String>) -> Call,
    ) -> Vec<(Vec<String>, Result<Reply, i16>)> {
        let mut by_owner: HashMap<usize, Vec<String>> = HashMap::default();
        let mut out = Vec::new();
        for id in group_ids {
            match self.group_coordinator_shard(&id) {
                Some(owner) => by_owner.entry(owner).or_default().push(id),
                None => out.push((vec![id], Err(ResponseError::CoordinatorNotAvailable.code()))),
            }
        }
        let mut tasks = Vec::new();
        for (owner, ids) in by_owner {
            let shard = Rc::clone(self);
            let call = make(ids.clone());
            tasks.push(runtime::spawn(async move {
                (ids, shard.group_call_on(owner, call).await)
            }));
        }
        for t in tasks {
            out.push(t.await);
        }
        out
    }
}

/// Partitions of `__consumer_offsets` as it exists, which groups are routed by (Kafka's
/// rule): `offsets.topic.num.partitions` only sizes the topic when it is created, and a
/// restart with another value must still find the groups where their records are.
pub(super) fn offsets_partition_count(meta: &MetadataImage) -> Option<i32> {
    let topic = meta.topic_by_name(OFFSETS_TOPIC)?;
    i32::try_from(topic.partitions.len()).ok()
}

fn coordinator_missing_description(group_id: String) -> GroupDescription {
    GroupDescription {
        group_id,
        error: ResponseError::CoordinatorNotAvailable.code(),
        ..GroupDescription::default()
    }
}
