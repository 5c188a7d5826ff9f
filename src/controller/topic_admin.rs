//! Topic requests at the active controller (CreateTopics, DeleteTopics, CreatePartitions,
//! AlterConfigs), forwarded there from any broker. Each is validated against the committed
//! metadata and becomes records; the forwarding broker answers once they are applied.

use std::collections::BTreeMap;

use uuid::Uuid;

use super::active_controller::ActiveController;
use super::cluster_metadata::ClusterMetadata;
use super::error::ControllerError;
use super::placement::{assign_replicas, check_manual_assignment, placement_order};
use super::records::{CreatePartitions, CreateTopic, MetadataRecord, NewPartition, SetConfig};
use crate::config::topic_properties::parse_topic_property;
use crate::model::BrokerId;
use crate::model::{validate_topic_name, InvalidTopicName, MAX_PARTITIONS};

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreateTopicRequest {
    pub name: String,
    /// `None` (-1 on the wire): `num.partitions`.
    pub partitions: Option<i32>,
    /// `None` (-1 on the wire): `default.replication.factor`.
    pub replication_factor: Option<i32>,
    /// Replicas chosen by the client, per partition; replaces the two counts above.
    pub assignment: Option<Vec<Vec<BrokerId>>>,
    pub configs: BTreeMap<String, String>,
}

impl ActiveController {
    /// `topic_id` is random, drawn by the caller (the decision itself stays deterministic).
    pub fn create_topic(
        &self,
        meta: &ClusterMetadata,
        request: &CreateTopicRequest,
        topic_id: Uuid,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        validate_topic_name(&request.name).map_err(invalid_topic)?;
        if meta.topic_by_name(&request.name).is_some() {
            return Err(ControllerError::TopicExists(request.name.clone()));
        }
        for (name, value) in &request.configs {
            check_config(name, value)?;
        }
        let replicas = match &request.assignment {
            Some(assignment) => {
                check_count(assignment.len() as i64)?;
                check_manual_assignment(assignment, |b| meta.broker(b).is_some())?;
                assignment.clone()
            }
            None => {
                let count = request.partitions.unwrap_or(self.config.default_partitions);
                check_count(i64::from(count))?;
                let rf = request
                    .replication_factor
                    .unwrap_or(self.config.default_replication_factor);
                assign_replicas(&live_order(meta), 0, count as usize, rf)?
            }
        };
        let partitions = new_partitions(
            meta,
            meta.next_slot(),
            replicas,
            self.config.followers_replicate,
        )?;
        Ok(vec![MetadataRecord::CreateTopic(CreateTopic {
            name: request.name.clone(),
            topic_id,
            partitions,
            configs: request.configs.clone(),
        })])
    }

    pub fn delete_topic(
        &self,
        meta: &ClusterMetadata,
        name: &str,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let topic = meta
            .topic_by_name(name)
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        Ok(vec![MetadataRecord::DeleteTopic { topic_id: topic.id }])
    }

    /// Grows `name` to `total` partitions; new ones continue the placement rotation with the
    /// topic's replication factor unless `assignment` names their replicas.
    pub fn create_partitions(
        &self,
        meta: &ClusterMetadata,
        name: &str,
        total: i32,
        assignment: Option<&[Vec<BrokerId>]>,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let topic = meta
            .topic_by_name(name)
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        let current = topic.partitions.len();
        check_count(i64::from(total))?;
        let added = usize::try_from(total)
            .ok()
            .filter(|t| *t > current)
            .map(|t| t - current)
            .ok_or(ControllerError::InvalidPartitions(i64::from(total)))?;
        let replicas = match assignment {
            Some(a) => {
                if a.len() != added {
                    return Err(ControllerError::InvalidReplicaAssignment(format!(
                        "{} assignments for {added} new partitions",
                        a.len()
                    )));
                }
                check_manual_assignment(a, |b| meta.broker(b).is_some())?;
                a.to_vec()
            }
            None => {
                let rf = topic.partitions.first().map_or(1, |p| p.replicas.len());
                let rf = i32::try_from(rf).unwrap_or(i32::MAX);
                assign_replicas(&live_order(meta), current, added, rf)?
            }
        };
        Ok(vec![MetadataRecord::CreatePartitions(CreatePartitions {
            topic_id: topic.id,
            from_count: current,
            partitions: new_partitions(
                meta,
                meta.next_slot(),
                replicas,
                self.config.followers_replicate,
            )?,
        })])
    }

    /// Sets (`Some`) or removes (`None`) one topic config override.
    pub fn set_topic_config(
        &self,
        meta: &ClusterMetadata,
        topic: &str,
        name: &str,
        value: Option<&str>,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let t = meta
            .topic_by_name(topic)
            .ok_or_else(|| ControllerError::UnknownTopic(topic.to_string()))?;
        match value {
            Some(v) => check_config(name, v)?,
            None => check_config_name(name)?,
        }
        Ok(vec![MetadataRecord::SetConfig(SetConfig {
            topic_id: t.id,
            name: name.to_string(),
            value: value.map(str::to_string),
        })])
    }
}

/// The unfenced brokers in placement order.
fn live_order(meta: &ClusterMetadata) -> Vec<BrokerId> {
    let live: Vec<(BrokerId, Option<&str>)> = meta
        .brokers()
        .filter(|b| !b.fenced)
        .map(|b| (b.id, b.rack.as_deref()))
        .collect();
    placement_order(&live)
}

/// Partitions with their first ISR: the unfenced replicas (only the first of them, which
/// leads, unless `followers_replicate`). A partition whose replicas are all fenced is
/// refused, as Kafka does.
fn new_partitions(
    meta: &ClusterMetadata,
    first_slot: usize,
    replicas: Vec<Vec<BrokerId>>,
    followers_replicate: bool,
) -> Result<Vec<NewPartition>, ControllerError> {
    replicas
        .into_iter()
        .enumerate()
        .map(|(i, replicas)| {
            let mut isr: Vec<BrokerId> = replicas
                .iter()
                .copied()
                .filter(|b| meta.is_unfenced(*b))
                .collect();
            if !followers_replicate {
                isr.truncate(1);
            }
            let leader = isr.first().copied().ok_or_else(|| {
                ControllerError::InvalidReplicaAssignment(format!(
                    "all brokers of partition {i} are fenced"
                ))
            })?;
            Ok(NewPartition {
                replicas,
                isr,
                leader: Some(leader),
                slot: first_slot.wrapping_add(i),
            })
        })
        .collect()
}

fn check_count(count: i64) -> Result<(), ControllerError> {
    if count <= 0 || count > i64::from(MAX_PARTITIONS) {
        return Err(ControllerError::InvalidPartitions(count));
    }
    Ok(())
}

fn check_config(name: &str, value: &str) -> Result<(), ControllerError> {
    parse_topic_property(name, value)
        .map(|_| ())
        .map_err(|e| ControllerError::InvalidConfig(e.to_string()))
}

fn check_config_name(name: &str) -> Result<(), ControllerError> {
    crate::config::topic_properties::topic_property(name)
        .map(|_| ())
        .ok_or_else(|| ControllerError::InvalidConfig(format!("Unknown topic config name: {name}")))
}

fn invalid_topic(e: InvalidTopicName) -> ControllerError {
    ControllerError::InvalidTopic {
        name: e.name,
        reason: e.reason,
    }
}
