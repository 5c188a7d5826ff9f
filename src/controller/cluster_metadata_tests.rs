use super::*;
use crate::controller::records::Endpoint;

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().copied().map(BrokerId).collect()
}

/// Applies records at consecutive offsets after the last one.
struct Log {
    meta: ClusterMetadata,
    next: u64,
}

impl Log {
    fn new() -> Log {
        Log {
            meta: ClusterMetadata::new(),
            next: 1,
        }
    }

    fn apply(&mut self, r: MetadataRecord) -> Result<MetadataDelta, Skipped> {
        let offset = MetadataOffset(self.next);
        self.next += 1;
        self.meta.apply(offset, &r)
    }

    fn ok(&mut self, r: MetadataRecord) -> MetadataDelta {
        let text = format!("{r:?}");
        self.apply(r)
            .unwrap_or_else(|e| panic!("{text} skipped: {e}"))
    }

    /// Registers and unfences brokers; returns their epochs.
    fn brokers(&mut self, n: i32) -> Vec<BrokerEpoch> {
        (1..=n)
            .map(|id| {
                self.ok(register(id, id as u128));
                let epoch = self.meta.broker(BrokerId(id)).expect("registered").epoch;
                self.ok(MetadataRecord::UnfenceBroker(fencing(id, epoch)));
                epoch
            })
            .collect()
    }
}

fn register(id: i32, incarnation: u128) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBroker {
        broker_id: BrokerId(id),
        incarnation: Uuid::from_u128(incarnation),
        endpoints: vec![Endpoint {
            name: "PLAINTEXT".to_string(),
            host: "127.0.0.1".to_string(),
            port: 9092,
        }],
        rack: None,
    })
}

fn fencing(id: i32, epoch: BrokerEpoch) -> BrokerFencing {
    BrokerFencing {
        broker_id: BrokerId(id),
        broker_epoch: epoch,
    }
}

const TOPIC: Uuid = Uuid::from_u128(0x70);

fn topic(replicas: &[&[i32]]) -> MetadataRecord {
    MetadataRecord::CreateTopic(CreateTopic {
        name: "t".to_string(),
        topic_id: TOPIC,
        partitions: replicas
            .iter()
            .enumerate()
            .map(|(i, r)| NewPartition {
                replicas: ids(r),
                isr: ids(r),
                leader: Some(BrokerId(r[0])),
                slot: i + 10,
            })
            .collect(),
        configs: BTreeMap::new(),
    })
}

fn change(
    from: i32,
    leader: Option<i32>,
    isr: &[i32],
    leader_epoch: i32,
    epoch: i32,
) -> MetadataRecord {
    MetadataRecord::PartitionChange(PartitionChange {
        topic_id: TOPIC,
        partition: 0,
        from_partition_epoch: PartitionEpoch(from),
        leader: leader.map(BrokerId),
        isr: ids(isr),
        leader_epoch: LeaderEpoch(leader_epoch),
        partition_epoch: PartitionEpoch(epoch),
    })
}

#[test]
fn the_broker_epoch_is_the_registration_offset_and_a_broker_starts_fenced() {
    let mut log = Log::new();
    log.next = 42;
    let delta = log.ok(register(1, 1));
    assert!(delta.changed_brokers.contains(&BrokerId(1)));
    let b = log.meta.broker(BrokerId(1)).expect("registered");
    assert_eq!(b.epoch, BrokerEpoch(42));
    assert!(b.fenced);
}

#[test]
fn a_retried_registration_keeps_the_first_epoch() {
    let mut log = Log::new();
    log.ok(register(1, 1));
    assert_eq!(
        log.apply(register(1, 1)),
        Err(Skipped::NoChange(BrokerId(1)))
    );
    assert_eq!(
        log.meta.broker(BrokerId(1)).expect("registered").epoch,
        BrokerEpoch(1)
    );
}

#[test]
fn offsets_must_grow() {
    let mut log = Log::new();
    log.ok(register(1, 1));
    let again = log.meta.apply(MetadataOffset(1), &register(2, 2));
    assert!(matches!(again, Err(Skipped::OffsetNotAfter { .. })));
    assert!(log.meta.broker(BrokerId(2)).is_none());
}

#[test]
fn a_live_registration_is_not_replaced() {
    let mut log = Log::new();
    let epochs = log.brokers(1);
    assert_eq!(
        log.apply(register(1, 99)),
        Err(Skipped::BrokerStillRegistered(BrokerId(1)))
    );
    log.ok(MetadataRecord::FenceBroker(fencing(1, epochs[0])));
    log.ok(register(1, 99));
    assert!(log.meta.broker(BrokerId(1)).expect("registered").epoch > epochs[0]);
}

#[test]
fn a_broker_that_leads_cannot_be_fenced_until_it_no_longer_does() {
    let mut log = Log::new();
    let epochs = log.brokers(2);
    log.ok(topic(&[&[1, 2]]));
    let fence1 = MetadataRecord::FenceBroker(fencing(1, epochs[0]));
    assert_eq!(
        log.apply(fence1.clone()),
        Err(Skipped::BrokerStillInUse(BrokerId(1)))
    );
    log.ok(change(0, Some(2), &[2], 1, 1));
    log.ok(fence1.clone());
    assert!(!log.meta.is_unfenced(BrokerId(1)));
    assert_eq!(log.apply(fence1), Err(Skipped::NoChange(BrokerId(1))));
}

#[test]
fn the_sole_isr_member_may_be_fenced_and_stays_in_the_isr() {
    let mut log = Log::new();
    let epochs = log.brokers(1);
    log.ok(topic(&[&[1]]));
    log.ok(change(0, None, &[1], 1, 1));
    log.ok(MetadataRecord::FenceBroker(fencing(1, epochs[0])));
    let p = &log.meta.topic(TOPIC).expect("topic").partitions[0];
    assert_eq!((p.leader, p.isr.clone()), (None, ids(&[1])));
}

#[test]
fn a_stale_broker_epoch_is_skipped() {
    let mut log = Log::new();
    log.brokers(1);
    let stale = fencing(1, BrokerEpoch(999));
    assert_eq!(
        log.apply(MetadataRecord::FenceBroker(stale)),
        Err(Skipped::BrokerEpoch(BrokerId(1)))
    );
}

#[test]
fn partition_changes_are_compare_and_set_on_the_partition_epoch() {
    let mut log = Log::new();
    log.brokers(3);
    let delta = log.ok(topic(&[&[1, 2, 3]]));
    assert_eq!(delta, MetadataDelta::topic(TOPIC));
    log.ok(change(0, Some(1), &[1, 2], 0, 1));
    // Decided on epoch 0 too: stale now.
    assert!(log.apply(change(0, Some(3), &[3], 1, 1)).is_err());
    let p = &log.meta.topic(TOPIC).expect("topic").partitions[0];
    assert_eq!(p.isr, ids(&[1, 2]));
    assert_eq!(p.partition_epoch, PartitionEpoch(1));
    assert_eq!(p.leader_epoch, LeaderEpoch(0));
}

#[test]
fn partition_changes_that_would_break_an_invariant_are_skipped() {
    let mut log = Log::new();
    let epochs = log.brokers(3);
    log.ok(topic(&[&[1, 2]]));
    for (name, bad) in [
        ("leader outside the ISR", change(0, Some(1), &[2], 1, 1)),
        (
            "ISR outside the replicas",
            change(0, Some(1), &[1, 3], 0, 1),
        ),
        ("empty ISR", change(0, None, &[], 1, 1)),
        ("new leader, same epoch", change(0, Some(2), &[1, 2], 0, 1)),
        (
            "partition epoch not advancing",
            change(0, Some(1), &[1], 0, 0),
        ),
        ("leader epoch going back", change(0, Some(1), &[1], -1, 1)),
    ] {
        assert!(log.apply(bad).is_err(), "{name}");
    }
    log.ok(change(0, Some(1), &[1], 0, 1));
    log.ok(MetadataRecord::FenceBroker(fencing(2, epochs[1])));
    // A fenced broker cannot be made leader.
    assert!(log.apply(change(1, Some(2), &[1, 2], 1, 2)).is_err());
}

#[test]
fn topics_partitions_and_configs() {
    let mut log = Log::new();
    log.brokers(2);
    log.ok(topic(&[&[1], &[2]]));
    assert_eq!(log.meta.next_slot(), 12);
    assert_eq!(
        log.apply(topic(&[&[1]])),
        Err(Skipped::TopicExists("t".to_string()))
    );
    let grow = |from_count| {
        MetadataRecord::CreatePartitions(CreatePartitions {
            topic_id: TOPIC,
            from_count,
            partitions: vec![NewPartition {
                replicas: ids(&[2]),
                isr: ids(&[2]),
                leader: Some(BrokerId(2)),
                slot: 12,
            }],
        })
    };
    assert!(log.apply(grow(1)).is_err());
    log.ok(grow(2));
    assert!(log.apply(grow(2)).is_err(), "a duplicate is stale");
    assert_eq!(log.meta.topic(TOPIC).expect("topic").partitions.len(), 3);
    assert_eq!(log.meta.next_slot(), 13);
    let set = |value: Option<&str>| {
        MetadataRecord::SetConfig(SetConfig {
            topic_id: TOPIC,
            name: "retention.ms".to_string(),
            value: value.map(str::to_string),
        })
    };
    log.ok(set(Some("1000")));
    let configs = &log.meta.topic_by_name("t").expect("topic").configs;
    assert_eq!(
        configs.get("retention.ms").map(String::as_str),
        Some("1000")
    );
    log.ok(set(None));
    assert!(log.meta.topic(TOPIC).expect("topic").configs.is_empty());
    let delta = log.ok(MetadataRecord::DeleteTopic { topic_id: TOPIC });
    assert_eq!(
        delta.deleted_topics.get(&TOPIC).map(String::as_str),
        Some("t")
    );
    assert!(log.meta.topic_by_name("t").is_none());
    assert!(log.apply(set(Some("1"))).is_err());
}

#[test]
fn a_change_copies_only_the_topic_it_touches() {
    let mut log = Log::new();
    log.brokers(2);
    log.ok(topic(&[&[1, 2]]));
    let before = Arc::clone(log.meta.topic(TOPIC).expect("topic"));
    let snapshot = log.meta.clone();
    log.ok(change(0, Some(1), &[1], 0, 1));
    // The old value still shares nothing changed; the new one has its own copy.
    assert!(Arc::ptr_eq(&before, snapshot.topic(TOPIC).expect("topic")));
    assert!(!Arc::ptr_eq(&before, log.meta.topic(TOPIC).expect("topic")));
}

#[test]
fn producer_id_blocks_follow_each_other_and_a_stale_one_is_skipped() {
    let mut log = Log::new();
    let epochs = log.brokers(2);
    let block = |id: i32, start| {
        MetadataRecord::ProducerIdBlock(ProducerIdBlockAllocation {
            broker_id: BrokerId(id),
            broker_epoch: epochs[(id - 1) as usize],
            start,
            size: 1000,
        })
    };
    let d = log.ok(block(1, 0));
    assert_eq!(
        d.producer_id_block,
        Some((
            BrokerId(1),
            ProducerIdBlock {
                start: 0,
                end: 1000
            }
        ))
    );
    assert_eq!(log.apply(block(2, 0)), Err(Skipped::ProducerIdBlock));
    log.ok(block(2, 1000));
    assert_eq!(log.meta.next_producer_id(), 2000);
    let stale_epoch = MetadataRecord::ProducerIdBlock(ProducerIdBlockAllocation {
        broker_id: BrokerId(1),
        broker_epoch: BrokerEpoch(12345),
        start: 2000,
        size: 1000,
    });
    assert_eq!(
        log.apply(stale_epoch),
        Err(Skipped::BrokerEpoch(BrokerId(1)))
    );
}
