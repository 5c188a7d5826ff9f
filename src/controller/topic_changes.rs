//! A forwarded topic request as the active controller decides it: the changes of one
//! CreateTopics, DeleteTopics, CreatePartitions or AlterConfigs request, each validated on the
//! committed metadata plus the request's earlier changes (so two creates of one name in one
//! request conflict, as they do in Kafka), becoming records proposed as one batch. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::active_controller::ActiveController;
use super::cluster_metadata::ClusterMetadata;
use super::error::ControllerError;
use super::records::{MetadataRecord, SetBrokerConfig};
use super::topic_admin::CreateTopicRequest;
use crate::model::{BrokerId, MetadataOffset};

/// One topic's part of an admin request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopicChange {
    Create(CreateTopicRequest),
    Delete {
        name: String,
    },
    CreatePartitions {
        name: String,
        total: i32,
        assignment: Option<Vec<Vec<BrokerId>>>,
    },
    /// Replaces the topic's overrides with `configs` (AlterConfigs' whole-set semantics;
    /// IncrementalAlterConfigs computes the whole set first).
    SetConfigs {
        name: String,
        configs: BTreeMap<String, String>,
    },
    /// Replaces the dynamic configs of broker resource `resource` ("" the cluster-wide
    /// defaults, else a broker id) with `configs`, already checked by the forwarding broker
    /// against the broker property table.
    BrokerConfigs {
        resource: String,
        configs: BTreeMap<String, String>,
    },
}

/// A refusal as it travels back to the forwarding broker: a Kafka error code and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRefused {
    pub code: i16,
    pub message: String,
}

impl From<ControllerError> for ChangeRefused {
    fn from(e: ControllerError) -> ChangeRefused {
        ChangeRefused {
            code: e.code(),
            message: e.to_string(),
        }
    }
}

/// What the controller decided: per change (in request order) accepted or why not, and the
/// records of the accepted ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeDecision {
    pub results: Vec<Result<(), ChangeRefused>>,
    pub records: Vec<MetadataRecord>,
}

impl ActiveController {
    /// `new_id` draws a topic id per created topic (random in the broker, fixed in tests).
    pub fn decide_topic_changes(
        &self,
        meta: &ClusterMetadata,
        changes: &[TopicChange],
        mut new_id: impl FnMut() -> Uuid,
    ) -> ChangeDecision {
        let mut scratch = meta.clone();
        let mut next = meta.applied_offset().map_or(1, |o| o.0 + 1);
        let mut decision = ChangeDecision::default();
        for change in changes {
            let records = match change {
                TopicChange::Create(r) => self.create_topic(&scratch, r, new_id()),
                TopicChange::Delete { name } => self.delete_topic(&scratch, name),
                TopicChange::CreatePartitions {
                    name,
                    total,
                    assignment,
                } => self.create_partitions(&scratch, name, *total, assignment.as_deref()),
                TopicChange::SetConfigs { name, configs } => {
                    self.replace_configs(&scratch, name, configs)
                }
                TopicChange::BrokerConfigs { resource, configs } => {
                    Ok(broker_config_records(&scratch, resource, configs))
                }
            };
            match records {
                Ok(records) => {
                    for r in &records {
                        // A record that would be skipped is a decision bug; the batch still
                        // commits whole and the skip is logged where it is applied.
                        let _ = scratch.apply(MetadataOffset(next), r);
                        next += 1;
                    }
                    decision.records.extend(records);
                    decision.results.push(Ok(()));
                }
                Err(e) => decision.results.push(Err(e.into())),
            }
        }
        decision
    }

    /// The records that make `name`'s overrides exactly `configs`.
    fn replace_configs(
        &self,
        meta: &ClusterMetadata,
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let topic = meta
            .topic_by_name(name)
            .ok_or_else(|| ControllerError::UnknownTopic(name.to_string()))?;
        let mut records = Vec::new();
        for key in topic.configs.keys().filter(|k| !configs.contains_key(*k)) {
            records.extend(self.set_topic_config(meta, name, key, None)?);
        }
        for (key, value) in configs {
            if topic.configs.get(key) != Some(value) {
                records.extend(self.set_topic_config(meta, name, key, Some(value))?);
            }
        }
        Ok(records)
    }
}

/// The records that make broker resource `resource`'s dynamic configs exactly `configs`.
fn broker_config_records(
    meta: &ClusterMetadata,
    resource: &str,
    configs: &BTreeMap<String, String>,
) -> Vec<MetadataRecord> {
    let empty = BTreeMap::new();
    let current = meta.broker_configs().get(resource).unwrap_or(&empty);
    let record = |name: &String, value: Option<&String>| {
        MetadataRecord::SetBrokerConfig(SetBrokerConfig {
            resource: resource.to_string(),
            name: name.clone(),
            value: value.cloned(),
        })
    };
    let removed = current
        .keys()
        .filter(|k| !configs.contains_key(*k))
        .map(|k| record(k, None));
    let set = configs
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(v))
        .map(|(k, v)| record(k, Some(v)));
    removed.chain(set).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::active_controller::ControllerConfig;
    use crate::controller::records::{BrokerFencing, Endpoint, RegisterBroker};
    use crate::model::BrokerEpoch;

    fn two_live_brokers() -> ClusterMetadata {
        let mut meta = ClusterMetadata::new();
        let mut offset = 0;
        for id in [1, 2] {
            offset += 1;
            let register = MetadataRecord::RegisterBroker(RegisterBroker {
                broker_id: BrokerId(id),
                incarnation: Uuid::from_u128(id as u128),
                endpoints: vec![Endpoint {
                    name: "PLAINTEXT".into(),
                    host: "127.0.0.1".into(),
                    port: 9000 + id as u16,
                }],
                rack: None,
            });
            meta.apply(MetadataOffset(offset), &register)
                .expect("registers");
            let epoch = BrokerEpoch(offset);
            offset += 1;
            let unfence = MetadataRecord::UnfenceBroker(BrokerFencing {
                broker_id: BrokerId(id),
                broker_epoch: epoch,
            });
            meta.apply(MetadataOffset(offset), &unfence)
                .expect("unfences");
        }
        meta
    }

    fn create(name: &str, partitions: i32, rf: i32) -> TopicChange {
        TopicChange::Create(CreateTopicRequest {
            name: name.into(),
            partitions: Some(partitions),
            replication_factor: Some(rf),
            ..CreateTopicRequest::default()
        })
    }

    fn apply_all(meta: &mut ClusterMetadata, records: &[MetadataRecord]) {
        let first = meta.applied_offset().map_or(1, |o| o.0 + 1);
        for (offset, r) in (first..).zip(records) {
            meta.apply(MetadataOffset(offset), r).expect("applies");
        }
    }

    #[test]
    fn each_change_sees_the_ones_before_it() {
        let meta = two_live_brokers();
        let controller = ActiveController::new(ControllerConfig::default(), 0);
        let mut ids = (1u128..).map(Uuid::from_u128);
        let changes = vec![
            create("a", 2, 1),
            create("a", 1, 1),
            create("b", 1, 3),
            TopicChange::CreatePartitions {
                name: "a".into(),
                total: 4,
                assignment: None,
            },
            TopicChange::Delete {
                name: "missing".into(),
            },
        ];
        let d = controller.decide_topic_changes(&meta, &changes, || ids.next().expect("id"));
        let codes: Vec<i16> = d
            .results
            .iter()
            .map(|r| r.as_ref().err().map_or(0, |e| e.code))
            .collect();
        // TOPIC_ALREADY_EXISTS 36, INVALID_REPLICATION_FACTOR 38, UNKNOWN_TOPIC_OR_PARTITION 3.
        assert_eq!(codes, vec![0, 36, 38, 0, 3]);
        let mut after = meta.clone();
        apply_all(&mut after, &d.records);
        let a = after.topic_by_name("a").expect("created");
        assert_eq!(a.partitions.len(), 4);
        let leaders: Vec<Option<BrokerId>> = a.partitions.iter().map(|p| p.leader).collect();
        assert_eq!(
            leaders,
            vec![
                Some(BrokerId(1)),
                Some(BrokerId(2)),
                Some(BrokerId(1)),
                Some(BrokerId(2))
            ],
            "partition i on broker i mod n, continued by CreatePartitions"
        );
    }

    #[test]
    fn without_replicating_followers_only_the_leader_is_in_sync() {
        let meta = two_live_brokers();
        for (replicate, isr_len) in [(true, 2), (false, 1)] {
            let config = ControllerConfig {
                followers_replicate: replicate,
                ..ControllerConfig::default()
            };
            let controller = ActiveController::new(config, 0);
            let d =
                controller.decide_topic_changes(&meta, &[create("r", 2, 2)], || Uuid::from_u128(5));
            let mut after = meta.clone();
            apply_all(&mut after, &d.records);
            let t = after.topic_by_name("r").expect("created");
            for p in &t.partitions {
                assert_eq!(p.replicas.len(), 2);
                assert_eq!(p.isr.len(), isr_len, "replicate={replicate}");
                assert_eq!(p.leader, p.isr.first().copied());
            }
        }
    }

    #[test]
    fn configs_are_replaced_as_a_whole() {
        let mut meta = two_live_brokers();
        let controller = ActiveController::new(ControllerConfig::default(), 0);
        let mut with_config = CreateTopicRequest {
            name: "t".into(),
            partitions: Some(1),
            replication_factor: Some(1),
            ..CreateTopicRequest::default()
        };
        with_config
            .configs
            .insert("retention.ms".into(), "1000".into());
        let d = controller.decide_topic_changes(&meta, &[TopicChange::Create(with_config)], || {
            Uuid::from_u128(9)
        });
        apply_all(&mut meta, &d.records);
        let configs = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        let d = controller.decide_topic_changes(
            &meta,
            &[TopicChange::SetConfigs {
                name: "t".into(),
                configs: configs.clone(),
            }],
            crate::util::entropy::uuid_v4,
        );
        assert_eq!(d.results, vec![Ok(())]);
        apply_all(&mut meta, &d.records);
        assert_eq!(meta.topic_by_name("t").expect("t").configs, configs);
        let bad = controller.decide_topic_changes(
            &meta,
            &[TopicChange::SetConfigs {
                name: "t".into(),
                configs: BTreeMap::from([("retention.ms".to_string(), "soon".to_string())]),
            }],
            crate::util::entropy::uuid_v4,
        );
        assert!(bad.records.is_empty());
        assert_eq!(bad.results[0].as_ref().err().map(|e| e.code), Some(40));
    }
}
