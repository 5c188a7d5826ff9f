//! The controller's decisions, with every proposal committed at once.

use super::*;
use crate::controller::broker_lifecycle::{BrokerRegistrationRequest, Heartbeat, HeartbeatReply};
use crate::controller::topic_admin::CreateTopicRequest;
use crate::model::LeaderEpoch;

const SESSION: u64 = 9_000;

struct Cluster {
    meta: ClusterMetadata,
    controller: ActiveController,
    next_offset: u64,
    now: u64,
}

impl Cluster {
    fn new() -> Cluster {
        let config = ControllerConfig {
            session_timeout_ms: SESSION,
            default_replication_factor: 1,
            default_partitions: 1,
            unclean_leader_election: false,
            retry_ms: 500,
            followers_replicate: true,
        };
        Cluster {
            meta: ClusterMetadata::new(),
            controller: ActiveController::new(config, 0),
            next_offset: 1,
            now: 0,
        }
    }

    fn commit(&mut self, records: Vec<MetadataRecord>) {
        for r in records {
            let _ = self.meta.apply(MetadataOffset(self.next_offset), &r);
            self.next_offset += 1;
        }
    }

    fn epoch(&self, id: i32) -> BrokerEpoch {
        self.meta.broker(BrokerId(id)).expect("registered").epoch
    }

    fn heartbeat(&mut self, id: i32) -> HeartbeatReply {
        let hb = Heartbeat {
            broker_id: BrokerId(id),
            broker_epoch: self.epoch(id),
            applied_offset: self.meta.applied_offset(),
            want_fence: false,
            want_shutdown: false,
        };
        let (reply, records) = self
            .controller
            .heartbeat(&self.meta, &hb, self.now)
            .expect("heartbeat accepted");
        self.commit(records);
        reply
    }

    fn join(&mut self, id: i32, rack: Option<&str>) {
        let request = BrokerRegistrationRequest {
            broker_id: BrokerId(id),
            incarnation: Uuid::from_u128(id as u128 * 1000 + self.now as u128),
            endpoints: Vec::new(),
            rack: rack.map(str::to_string),
        };
        let records = self
            .controller
            .register_broker(&self.meta, &request, self.now)
            .expect("registered");
        self.commit(records);
        self.heartbeat(id);
        assert!(self.meta.is_unfenced(BrokerId(id)), "broker {id} unfenced");
    }

    fn create(&mut self, name: &str, partitions: i32, rf: i32) -> Result<(), ControllerError> {
        let request = CreateTopicRequest {
            name: name.to_string(),
            partitions: Some(partitions),
            replication_factor: Some(rf),
            ..CreateTopicRequest::default()
        };
        let id = Uuid::from_u128(self.next_offset as u128);
        let records = self.controller.create_topic(&self.meta, &request, id)?;
        self.commit(records);
        Ok(())
    }

    fn partition(&self, name: &str, p: usize) -> crate::controller::PartitionState {
        self.meta.topic_by_name(name).expect("topic").partitions[p].clone()
    }

    /// Advances time, heartbeating `alive`, ticking the controller.
    fn run(&mut self, ms: u64, alive: &[i32]) {
        for _ in 0..ms / 1000 {
            self.now += 1000;
            for id in alive {
                self.heartbeat(*id);
            }
            let records = self.controller.tick(&self.meta, self.now);
            self.commit(records);
        }
    }
}

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().copied().map(BrokerId).collect()
}

#[test]
fn a_registered_broker_is_unfenced_once_caught_up() {
    let mut c = Cluster::new();
    let request = BrokerRegistrationRequest {
        broker_id: BrokerId(1),
        incarnation: Uuid::from_u128(1),
        endpoints: Vec::new(),
        rack: None,
    };
    let records = c
        .controller
        .register_broker(&c.meta, &request, 0)
        .expect("ok");
    c.commit(records);
    // Behind its own registration: stays fenced.
    let hb = Heartbeat {
        broker_id: BrokerId(1),
        broker_epoch: c.epoch(1),
        applied_offset: None,
        want_fence: false,
        want_shutdown: false,
    };
    let (reply, records) = c.controller.heartbeat(&c.meta, &hb, 0).expect("ok");
    assert!(reply.fenced && !reply.caught_up && records.is_empty());
    let reply = c.heartbeat(1);
    assert!(reply.fenced && reply.caught_up);
    assert!(c.meta.is_unfenced(BrokerId(1)));
    // A retried registration changes nothing.
    assert_eq!(
        c.controller.register_broker(&c.meta, &request, 0),
        Ok(Vec::new())
    );
}

#[test]
fn heartbeats_with_a_stale_epoch_or_unknown_id_are_refused() {
    let mut c = Cluster::new();
    c.join(1, None);
    let mut hb = Heartbeat {
        broker_id: BrokerId(1),
        broker_epoch: BrokerEpoch(0),
        applied_offset: None,
        want_fence: false,
        want_shutdown: false,
    };
    let err = c.controller.heartbeat(&c.meta, &hb, 0).expect_err("stale");
    assert_eq!(err.code(), 77);
    hb.broker_id = BrokerId(5);
    let err = c
        .controller
        .heartbeat(&c.meta, &hb, 0)
        .expect_err("unknown");
    assert_eq!(err.code(), 102);
}

#[test]
fn a_second_process_with_a_live_id_is_refused_until_the_session_expires() {
    let mut c = Cluster::new();
    c.join(1, None);
    c.join(2, None);
    c.create("t", 2, 2).expect("created");
    let impostor = BrokerRegistrationRequest {
        broker_id: BrokerId(1),
        incarnation: Uuid::from_u128(777),
        endpoints: Vec::new(),
        rack: None,
    };
    let err = c
        .controller
        .register_broker(&c.meta, &impostor, c.now)
        .expect_err("duplicate");
    assert_eq!(err.code(), 101);
    // Broker 1 crashed and restarts after its session ran out: re-registered with a new
    // epoch, its old registration fenced in the same batch.
    let old = c.epoch(1);
    c.now += SESSION + 1;
    c.heartbeat(2);
    let records = c
        .controller
        .register_broker(&c.meta, &impostor, c.now)
        .expect("registered");
    c.commit(records);
    assert!(c.epoch(1) > old);
    assert!(c.partition("t", 0).leader == Some(BrokerId(2)));
    assert!(!c.partition("t", 0).isr.contains(&BrokerId(1)));
}

#[test]
fn a_silent_broker_is_fenced_after_the_session_and_its_partitions_move() {
    let mut c = Cluster::new();
    for id in 1..=3 {
        c.join(id, None);
    }
    c.create("t", 3, 3).expect("created");
    assert_eq!(c.partition("t", 0).leader, Some(BrokerId(1)));
    c.run(SESSION - 1000, &[2, 3]);
    assert!(c.meta.is_unfenced(BrokerId(1)), "still within its session");
    c.run(2000, &[2, 3]);
    assert!(!c.meta.is_unfenced(BrokerId(1)), "fenced");
    for p in 0..3 {
        let part = c.partition("t", p);
        assert!(!part.isr.contains(&BrokerId(1)), "partition {p}: {part:?}");
        assert_ne!(part.leader, Some(BrokerId(1)));
        assert!(part.leader.is_some());
    }
    let p0 = c.partition("t", 0);
    assert_eq!(p0.leader, Some(BrokerId(2)));
    assert_eq!(p0.leader_epoch, LeaderEpoch(1));
    // Partition 1 (replicas 2, 3, 1) kept its leader and its leader epoch.
    assert_eq!(c.partition("t", 1).leader_epoch, LeaderEpoch(0));
}

#[test]
fn brokers_that_go_silent_together_are_fenced_in_one_tick() {
    let mut c = Cluster::new();
    for id in 1..=3 {
        c.join(id, None);
    }
    c.create("t", 3, 3).expect("created");
    c.run(SESSION + 1000, &[3]);
    assert!(!c.meta.is_unfenced(BrokerId(1)) && !c.meta.is_unfenced(BrokerId(2)));
    for p in 0..3 {
        let part = c.partition("t", p);
        assert_eq!(
            (part.leader, part.isr.clone()),
            (Some(BrokerId(3)), ids(&[3]))
        );
    }
}

#[test]
fn an_rf1_partition_is_leaderless_while_its_broker_is_fenced_and_back_after() {
    let mut c = Cluster::new();
    c.join(1, None);
    c.join(2, None);
    c.create("t", 2, 1).expect("created");
    assert_eq!(c.partition("t", 1).leader, Some(BrokerId(2)));
    c.run(SESSION + 2000, &[1]);
    let p = c.partition("t", 1);
    assert_eq!((p.leader, p.isr.clone()), (None, ids(&[2])));
    assert_eq!(p.leader_epoch, LeaderEpoch(1));
    // Broker 2 restarts: new registration, catches up, is unfenced and leads again.
    c.join(2, None);
    let p = c.partition("t", 1);
    assert_eq!(p.leader, Some(BrokerId(2)));
    assert_eq!(p.leader_epoch, LeaderEpoch(2));
}

#[test]
fn a_new_controller_gives_every_broker_a_full_session_of_grace() {
    let mut c = Cluster::new();
    c.join(1, None);
    c.join(2, None);
    c.now = 100_000;
    // The previous controller heard from neither for a long time; this one just started.
    c.controller = ActiveController::new(c.controller.config().clone(), c.now);
    c.run(SESSION, &[]);
    assert!(c.meta.is_unfenced(BrokerId(1)) && c.meta.is_unfenced(BrokerId(2)));
    c.run(2000, &[2]);
    assert!(!c.meta.is_unfenced(BrokerId(1)));
    assert!(c.meta.is_unfenced(BrokerId(2)));
}

#[test]
fn controlled_shutdown_moves_leadership_then_fences() {
    let mut c = Cluster::new();
    c.join(1, None);
    c.join(2, None);
    c.create("t", 1, 2).expect("created");
    let hb = Heartbeat {
        broker_id: BrokerId(1),
        broker_epoch: c.epoch(1),
        applied_offset: c.meta.applied_offset(),
        want_fence: false,
        want_shutdown: true,
    };
    let (reply, records) = c.controller.heartbeat(&c.meta, &hb, c.now).expect("ok");
    assert!(!reply.should_shut_down);
    c.commit(records);
    assert_eq!(c.partition("t", 0).leader, Some(BrokerId(2)));
    let (reply, records) = c.controller.heartbeat(&c.meta, &hb, c.now).expect("ok");
    assert!(reply.should_shut_down && records.is_empty());
}

#[test]
fn a_proposal_in_flight_is_not_repeated_until_the_retry_time() {
    let mut c = Cluster::new();
    c.join(1, None);
    c.join(2, None);
    c.now += SESSION + 1;
    let first = c.controller.tick(&c.meta, c.now);
    assert_eq!(first.len(), 2, "fence both: {first:?}");
    assert!(c.controller.tick(&c.meta, c.now + 100).is_empty());
    assert_eq!(c.controller.tick(&c.meta, c.now + 600), first);
}

#[test]
fn topic_creation_places_replicas_and_checks_the_replication_factor() {
    let mut c = Cluster::new();
    for id in [3, 1, 2] {
        c.join(id, None);
    }
    let err = c.create("big", 1, 4).expect_err("too many replicas");
    assert_eq!(err.code(), 38);
    c.create("t", 4, 2).expect("created");
    let replicas: Vec<Vec<BrokerId>> = (0..4).map(|p| c.partition("t", p).replicas).collect();
    assert_eq!(
        replicas,
        vec![ids(&[1, 2]), ids(&[2, 3]), ids(&[3, 1]), ids(&[1, 2])]
    );
    let slots: Vec<usize> = (0..4).map(|p| c.partition("t", p).slot).collect();
    assert_eq!(slots, vec![0, 1, 2, 3]);
    assert_eq!(c.create("t", 1, 1).expect_err("exists").code(), 36);
    assert_eq!(c.create("bad/name", 1, 1).expect_err("name").code(), 17);
    assert_eq!(c.create("zero", 0, 1).expect_err("count").code(), 37);
    // Slots continue across topics; fenced brokers get no new replicas.
    c.run(SESSION + 2000, &[1, 2]);
    c.create("u", 2, 2).expect("created");
    assert_eq!(c.partition("u", 0).slot, 4);
    assert_eq!(c.partition("u", 1).replicas, ids(&[2, 1]));
}

#[test]
fn rack_aware_placement_spreads_replicas() {
    let mut c = Cluster::new();
    for (id, rack) in [(1, "a"), (2, "a"), (3, "b"), (4, "b")] {
        c.join(id, Some(rack));
    }
    c.create("t", 4, 2).expect("created");
    for p in 0..4 {
        let r = c.partition("t", p).replicas;
        let rack = |b: BrokerId| if b.0 <= 2 { "a" } else { "b" };
        assert_ne!(rack(r[0]), rack(r[1]), "partition {p}: {r:?}");
    }
}

#[test]
fn partitions_grow_and_configs_are_validated() {
    let mut c = Cluster::new();
    c.join(1, None);
    c.join(2, None);
    c.create("t", 1, 2).expect("created");
    let records = c
        .controller
        .create_partitions(&c.meta, "t", 3, None)
        .expect("ok");
    c.commit(records);
    assert_eq!(c.partition("t", 2).replicas, ids(&[1, 2]));
    let err = c.controller.create_partitions(&c.meta, "t", 2, None);
    assert_eq!(err.expect_err("shrink").code(), 37);
    let err = c.controller.create_partitions(&c.meta, "nope", 2, None);
    assert_eq!(err.expect_err("unknown").code(), 3);
    let err = c
        .controller
        .set_topic_config(&c.meta, "t", "retention.ms", Some("x"));
    assert_eq!(err.expect_err("invalid").code(), 40);
    let records = c
        .controller
        .set_topic_config(&c.meta, "t", UNCLEAN_ELECTION_CONFIG, Some("true"))
        .expect("ok");
    c.commit(records);
    let t = c.meta.topic_by_name("t").expect("topic");
    assert!(c.controller.unclean_allowed(t));
    let records = c.controller.delete_topic(&c.meta, "t").expect("ok");
    c.commit(records);
    assert!(c.meta.topic_by_name("t").is_none());
}

#[test]
fn producer_id_blocks_are_unique_even_when_decided_concurrently() {
    let mut c = Cluster::new();
    c.join(1, None);
    c.join(2, None);
    let a = c
        .controller
        .allocate_producer_ids(&c.meta, BrokerId(1), c.epoch(1))
        .expect("ok");
    let b = c
        .controller
        .allocate_producer_ids(&c.meta, BrokerId(2), c.epoch(2))
        .expect("ok");
    c.commit(a);
    c.commit(b);
    assert_eq!(
        c.meta.next_producer_id(),
        PRODUCER_ID_BLOCK_SIZE,
        "the second was stale"
    );
    let b = c
        .controller
        .allocate_producer_ids(&c.meta, BrokerId(2), c.epoch(2))
        .expect("ok");
    c.commit(b);
    assert_eq!(c.meta.next_producer_id(), 2 * PRODUCER_ID_BLOCK_SIZE);
    let err = c
        .controller
        .allocate_producer_ids(&c.meta, BrokerId(2), BrokerEpoch(0));
    assert_eq!(err.expect_err("stale epoch").code(), 77);
}
