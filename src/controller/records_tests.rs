use proptest::prelude::*;

use super::*;

fn broker() -> impl Strategy<Value = BrokerId> {
    (-1i32..10).prop_map(BrokerId)
}

fn brokers() -> impl Strategy<Value = Vec<BrokerId>> {
    prop::collection::vec(broker(), 0..5)
}

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<u128>().prop_map(Uuid::from_u128)
}

fn new_partition() -> impl Strategy<Value = NewPartition> {
    (
        brokers(),
        brokers(),
        prop::option::of(broker()),
        0usize..1000,
    )
        .prop_map(|(replicas, isr, leader, slot)| NewPartition {
            replicas,
            isr,
            leader,
            slot,
        })
}

fn configs() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map("[a-z.]{1,20}", "\\PC{0,10}", 0..4)
}

fn fencing() -> impl Strategy<Value = BrokerFencing> {
    (broker(), any::<u64>()).prop_map(|(broker_id, e)| BrokerFencing {
        broker_id,
        broker_epoch: BrokerEpoch(e),
    })
}

fn record() -> impl Strategy<Value = MetadataRecord> {
    prop_oneof![
        (
            broker(),
            uuid(),
            prop::collection::vec(("[A-Z_]{1,10}", "\\PC{0,12}", any::<u16>()), 0..3),
            prop::option::of("\\PC{0,8}")
        )
            .prop_map(|(broker_id, incarnation, eps, rack)| {
                MetadataRecord::RegisterBroker(RegisterBroker {
                    broker_id,
                    incarnation,
                    endpoints: eps
                        .into_iter()
                        .map(|(name, host, port)| Endpoint { name, host, port })
                        .collect(),
                    rack,
                })
            }),
        fencing().prop_map(MetadataRecord::FenceBroker),
        fencing().prop_map(MetadataRecord::UnfenceBroker),
        (
            "\\PC{1,30}",
            uuid(),
            prop::collection::vec(new_partition(), 0..4),
            configs()
        )
            .prop_map(|(name, topic_id, partitions, configs)| {
                MetadataRecord::CreateTopic(CreateTopic {
                    name,
                    topic_id,
                    partitions,
                    configs,
                })
            }),
        uuid().prop_map(|topic_id| MetadataRecord::DeleteTopic { topic_id }),
        (
            uuid(),
            0usize..100,
            prop::collection::vec(new_partition(), 0..3)
        )
            .prop_map(|(topic_id, from_count, partitions)| {
                MetadataRecord::CreatePartitions(CreatePartitions {
                    topic_id,
                    from_count,
                    partitions,
                })
            }),
        (uuid(), "[a-z.]{1,20}", prop::option::of("\\PC{0,10}")).prop_map(
            |(topic_id, name, value)| MetadataRecord::SetConfig(SetConfig {
                topic_id,
                name,
                value,
            })
        ),
        (
            uuid(),
            any::<u32>(),
            any::<i32>(),
            prop::option::of(broker()),
            brokers(),
            any::<i32>(),
            any::<i32>()
        )
            .prop_map(|(topic_id, partition, from, leader, isr, le, pe)| {
                MetadataRecord::PartitionChange(PartitionChange {
                    topic_id,
                    partition,
                    from_partition_epoch: PartitionEpoch(from),
                    leader,
                    isr,
                    leader_epoch: LeaderEpoch(le),
                    partition_epoch: PartitionEpoch(pe),
                })
            }),
        (broker(), any::<u64>(), any::<i64>(), any::<i64>()).prop_map(
            |(broker_id, e, start, size)| MetadataRecord::ProducerIdBlock(
                ProducerIdBlockAllocation {
                    broker_id,
                    broker_epoch: BrokerEpoch(e),
                    start,
                    size,
                }
            )
        ),
    ]
}

proptest! {
    #[test]
    fn every_record_round_trips(r in record()) {
        let bytes = encode(&r).expect("encodes");
        prop_assert_eq!(decode(&bytes).expect("decodes"), r);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode(&bytes);
    }
}

#[test]
fn the_envelope_names_its_version_and_the_record_type() {
    let bytes = encode(&MetadataRecord::DeleteTopic {
        topic_id: Uuid::from_u128(1),
    })
    .expect("encodes");
    let text = String::from_utf8(bytes).expect("JSON is UTF-8");
    assert_eq!(
        text,
        r#"{"version":1,"record":{"type":"DeleteTopic","topic_id":"00000000-0000-0000-0000-000000000001"}}"#
    );
}

#[test]
fn another_format_version_is_refused() {
    let text = br#"{"version":2,"record":{"type":"DeleteTopic","topic_id":"00000000-0000-0000-0000-000000000001"}}"#;
    assert!(matches!(decode(text), Err(RecordDecodeError::Version(2))));
}

#[test]
fn an_unknown_record_type_is_refused() {
    let text = br#"{"version":1,"record":{"type":"Teleport"}}"#;
    assert!(matches!(decode(text), Err(RecordDecodeError::Json(_))));
}

/// One record of each type, as the log stores it: the format must not change silently
/// (a change needs a new RECORD_FORMAT_VERSION and a reader for the old one).
fn one_of_each() -> Vec<MetadataRecord> {
    let topic_id = Uuid::from_u128(0x1234);
    let fencing = BrokerFencing {
        broker_id: BrokerId(2),
        broker_epoch: BrokerEpoch(17),
    };
    let partition = NewPartition {
        replicas: vec![BrokerId(1), BrokerId(2)],
        isr: vec![BrokerId(1)],
        leader: Some(BrokerId(1)),
        slot: 4,
    };
    vec![
        MetadataRecord::RegisterBroker(RegisterBroker {
            broker_id: BrokerId(1),
            incarnation: Uuid::from_u128(0xabc),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".to_string(),
                host: "h".to_string(),
                port: 9092,
            }],
            rack: Some("r1".to_string()),
        }),
        MetadataRecord::FenceBroker(fencing.clone()),
        MetadataRecord::UnfenceBroker(fencing),
        MetadataRecord::CreateTopic(CreateTopic {
            name: "t".to_string(),
            topic_id,
            partitions: vec![partition.clone()],
            configs: BTreeMap::from([("retention.ms".to_string(), "1".to_string())]),
        }),
        MetadataRecord::DeleteTopic { topic_id },
        MetadataRecord::CreatePartitions(CreatePartitions {
            topic_id,
            from_count: 1,
            partitions: vec![partition],
        }),
        MetadataRecord::SetConfig(SetConfig {
            topic_id,
            name: "retention.ms".to_string(),
            value: None,
        }),
        MetadataRecord::PartitionChange(PartitionChange {
            topic_id,
            partition: 0,
            from_partition_epoch: PartitionEpoch(3),
            leader: None,
            isr: vec![BrokerId(2)],
            leader_epoch: LeaderEpoch(5),
            partition_epoch: PartitionEpoch(4),
        }),
        MetadataRecord::ProducerIdBlock(ProducerIdBlockAllocation {
            broker_id: BrokerId(1),
            broker_epoch: BrokerEpoch(1),
            start: 1000,
            size: 1000,
        }),
    ]
}

const GOLDEN: &[&str] = &[
    r#"{"version":1,"record":{"type":"RegisterBroker","broker_id":1,"incarnation":"00000000-0000-0000-0000-000000000abc","endpoints":[{"name":"PLAINTEXT","host":"h","port":9092}],"rack":"r1"}}"#,
    r#"{"version":1,"record":{"type":"FenceBroker","broker_id":2,"broker_epoch":17}}"#,
    r#"{"version":1,"record":{"type":"UnfenceBroker","broker_id":2,"broker_epoch":17}}"#,
    r#"{"version":1,"record":{"type":"CreateTopic","name":"t","topic_id":"00000000-0000-0000-0000-000000001234","partitions":[{"replicas":[1,2],"isr":[1],"leader":1,"slot":4}],"configs":{"retention.ms":"1"}}}"#,
    r#"{"version":1,"record":{"type":"DeleteTopic","topic_id":"00000000-0000-0000-0000-000000001234"}}"#,
    r#"{"version":1,"record":{"type":"CreatePartitions","topic_id":"00000000-0000-0000-0000-000000001234","from_count":1,"partitions":[{"replicas":[1,2],"isr":[1],"leader":1,"slot":4}]}}"#,
    r#"{"version":1,"record":{"type":"SetConfig","topic_id":"00000000-0000-0000-0000-000000001234","name":"retention.ms","value":null}}"#,
    r#"{"version":1,"record":{"type":"PartitionChange","topic_id":"00000000-0000-0000-0000-000000001234","partition":0,"from_partition_epoch":3,"leader":null,"isr":[2],"leader_epoch":5,"partition_epoch":4}}"#,
    r#"{"version":1,"record":{"type":"ProducerIdBlock","broker_id":1,"broker_epoch":1,"start":1000,"size":1000}}"#,
];

#[test]
fn the_stored_form_of_every_record_type_is_fixed() {
    let records = one_of_each();
    assert_eq!(records.len(), GOLDEN.len());
    for (record, golden) in records.iter().zip(GOLDEN) {
        let bytes = encode(record).expect("encodes");
        assert_eq!(std::str::from_utf8(&bytes).expect("UTF-8"), *golden);
        assert_eq!(&decode(golden.as_bytes()).expect("decodes"), record);
    }
}
