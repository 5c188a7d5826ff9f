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
