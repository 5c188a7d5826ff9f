use std::collections::BTreeMap;

use super::*;
use crate::controller::topic_admin::CreateTopicRequest;
use crate::metadata::legacy_json::{LegacyPartition, LegacyTopic};

fn me(id: i32) -> LiveBroker {
    LiveBroker {
        id: BrokerId(id),
        host: "127.0.0.1".to_string(),
        port: 9092,
        rack: None,
    }
}

fn create(name: &str, partitions: i32) -> TopicChange {
    TopicChange::Create(CreateTopicRequest {
        name: name.to_string(),
        partitions: Some(partitions),
        ..CreateTopicRequest::default()
    })
}

#[test]
fn a_new_node_registers_itself_once_and_leads_what_it_creates() {
    let (local, changed) = LocalController::open(
        MetadataSnapshot::default(),
        &me(1),
        ControllerConfig::default(),
    )
    .expect("opens");
    assert!(changed, "registered on the first start");
    assert!(local.metadata().is_unfenced(BrokerId(1)));
    let (mut local, changed) = LocalController::open(
        local.metadata().to_snapshot(),
        &me(1),
        ControllerConfig::default(),
    )
    .expect("reopens");
    assert!(!changed, "nothing to record at a restart");
    let mut ids = (1..).map(Uuid::from_u128);
    let decision = local.decide(&[create("a", 3), create("a", 1)], || ids.next().unwrap());
    assert!(decision.results[0].is_ok());
    assert_eq!(
        decision.results[1].as_ref().map_err(|e| e.code),
        Err(crate::protocol::ResponseError::TopicAlreadyExists.code()),
        "checked against the earlier change of the same request"
    );
    let before = local.metadata().applied_offset();
    let next = local.applied(&decision.records);
    assert_eq!(
        local.metadata().applied_offset(),
        before,
        "a copy until committed"
    );
    local.commit(next);
    let a = local.metadata().topic_by_name("a").expect("a");
    assert_eq!(a.partitions.len(), 3);
    assert!(a.partitions.iter().all(|p| p.leader == Some(BrokerId(1))
        && p.isr == [BrokerId(1)]
        && p.leader_epoch == LeaderEpoch(0)));
    let slots: Vec<usize> = a.partitions.iter().map(|p| p.slot).collect();
    assert_eq!(slots, [0, 1, 2], "round-robin slots");
}

#[test]
fn broker_configs_become_records_that_make_the_set_exact() {
    let (mut local, _) = LocalController::open(
        MetadataSnapshot::default(),
        &me(1),
        ControllerConfig::default(),
    )
    .expect("opens");
    let set = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let records = |local: &LocalController, configs: &BTreeMap<String, String>| {
        let change = TopicChange::BrokerConfigs {
            resource: String::new(),
            configs: configs.clone(),
        };
        let decision = local.decide(&[change], crate::util::entropy::uuid_v4);
        assert!(decision.results[0].is_ok());
        decision.records
    };
    let first = set(&[("log.retention.ms", "5"), ("log.segment.bytes", "9999999")]);
    let changes = records(&local, &first);
    assert_eq!(changes.len(), 2);
    local.commit(local.applied(&changes));
    assert_eq!(local.metadata().broker_configs().get(""), Some(&first));
    let second = set(&[("log.retention.ms", "6")]);
    let changes = records(&local, &second);
    assert_eq!(changes.len(), 2, "one removal, one change");
    local.commit(local.applied(&changes));
    assert_eq!(local.metadata().broker_configs().get(""), Some(&second));
    local.commit(local.applied(&records(&local, &BTreeMap::new())));
    assert!(local.metadata().broker_configs().is_empty());
    assert!(records(&local, &BTreeMap::new()).is_empty());
}

#[test]
fn a_data_dir_of_another_node_is_refused() {
    let (mut local, _) = LocalController::open(
        MetadataSnapshot::default(),
        &me(1),
        ControllerConfig::default(),
    )
    .expect("opens");
    let decision = local.decide(&[create("a", 1)], || Uuid::from_u128(5));
    local.commit(local.applied(&decision.records));
    let refused = LocalController::open(
        local.metadata().to_snapshot(),
        &me(2),
        ControllerConfig::default(),
    );
    assert_eq!(
        refused.err(),
        Some(LocalStartError::OtherNode {
            stored: 1,
            configured: 2
        })
    );
}

fn legacy() -> LegacyMetadata {
    let topic = |name: &str, id: u128, hosted: &[bool], from_controller: bool| LegacyTopic {
        name: name.to_string(),
        id: Uuid::from_u128(id),
        partitions: hosted
            .iter()
            .enumerate()
            .map(|(slot, hosted)| LegacyPartition {
                slot: slot + 4,
                hosted: *hosted,
            })
            .collect(),
        configs: BTreeMap::from([("retention.ms".to_string(), "77".to_string())]),
        from_controller,
    };
    LegacyMetadata {
        version: 12,
        cluster_id: "c".to_string(),
        topics: BTreeMap::from([
            ("a".to_string(), topic("a", 1, &[true, true], false)),
            ("b".to_string(), topic("b", 2, &[false, true], true)),
        ]),
        next_slot: 9,
        controller_offset: Some(40),
        broker_configs: BTreeMap::from([(
            String::new(),
            BTreeMap::from([("log.retention.ms".to_string(), "3".to_string())]),
        )]),
    }
}

#[test]
fn a_single_nodes_old_file_imports_with_every_topic_slot_and_config() {
    let snapshot = import_legacy(&legacy(), BrokerId(3), false);
    let (local, changed) =
        LocalController::open(snapshot, &me(3), ControllerConfig::default()).expect("valid");
    assert!(!changed, "the import registers the node already");
    let meta = local.metadata();
    assert_eq!(meta.next_slot(), 9);
    assert_eq!(meta.broker_configs().get("").map(|c| c.len()), Some(1));
    for (name, id) in [("a", 1), ("b", 2)] {
        let t = meta.topic_by_name(name).expect("imported");
        assert_eq!(t.id, Uuid::from_u128(id));
        assert_eq!(
            t.configs.get("retention.ms").map(String::as_str),
            Some("77")
        );
        let slots: Vec<usize> = t.partitions.iter().map(|p| p.slot).collect();
        assert_eq!(slots, [4, 5]);
        assert!(t.partitions.iter().all(|p| p.leader == Some(BrokerId(3))));
    }
}

#[test]
fn a_cluster_brokers_old_copy_places_only_what_it_hosted() {
    let snapshot = import_legacy(&legacy(), BrokerId(3), true);
    assert_eq!(snapshot.applied, Some(MetadataOffset(40)));
    let names: Vec<&str> = snapshot.topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["b"], "a topic of the node alone is left out");
    let replicas: Vec<Vec<BrokerId>> = snapshot.topics[0]
        .partitions
        .iter()
        .map(|p| p.replicas.clone())
        .collect();
    assert_eq!(replicas, [vec![], vec![BrokerId(3)]]);
    assert!(snapshot.topics[0]
        .partitions
        .iter()
        .all(|p| p.leader.is_none()));
}
