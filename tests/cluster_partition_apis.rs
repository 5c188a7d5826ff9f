//! Partition APIs of an RF 3 partition across three `ringbroker serve` processes, as Kafka
//! answers them: ListOffsets and DeleteRecords at the leader only (NOT_LEADER_OR_FOLLOWER at
//! a follower; a debugging client, replica id -2, may ask any replica), ListOffsets fenced by
//! `current_leader_epoch`, DeleteRecords past the high watermark OFFSET_OUT_OF_RANGE, and
//! DeleteRecords answered once the followers' log starts followed the leader's; after a failover, earliest carries the
//! epoch of its batch and latest the new leader's; every replica checkpoints the HW it knows
//! on `replica.high.watermark.checkpoint.interval.ms`; DeleteTopics is answered once the broker
//! asked no longer lists the topic. Every wait is a bounded number of polls;
//! every process is stopped at the end (and by `Drop` on a failure).

mod broker;

use broker::cluster::{
    broker_ids, free_ports, start_three_with, topic_partitions, voters, wait_for, Node, MAX_POLLS,
    POLL,
};
use broker::Client;

const TOPIC: &str = "apis";
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const DEBUGGING: i32 = -2;
const CONSUMER: i32 = -1;
const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const REQUEST_TIMED_OUT: i16 = 7;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// (leader, leader epoch, ISR size) of the topic's partition 0 as `node` tells it.
fn partition_state(node: &Node) -> Option<(i32, i32, usize)> {
    let partitions = topic_partitions(node, TOPIC)?;
    let p = partitions.iter().find(|p| p.partition_index == 0)?;
    Some((p.leader_id.0, p.leader_epoch, p.isr_nodes.len()))
}

/// Polls `check` until it returns `Some`, at most [`MAX_POLLS`] times.
fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    for _ in 0..MAX_POLLS {
        if let Some(v) = check() {
            return v;
        }
        std::thread::sleep(POLL);
    }
    panic!("{what}: not reached after {MAX_POLLS} polls");
}

#[test]
fn offsets_and_deletions_are_the_leaders_and_followers_follow_its_log_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(6);
    let voters = voters(&ports);
    // High watermarks checkpointed often, so the test sees them written while the brokers run.
    let mut nodes = start_three_with(
        root.path(),
        &ports,
        &voters,
        None,
        &["replica.high.watermark.checkpoint.interval.ms=200"],
    );
    wait_for(&nodes, &[0, 1, 2], "three live brokers", |m| {
        broker_ids(m) == vec![1, 2, 3] && m.controller_id.0 > 0
    });
    let created =
        Client::connect(nodes[0].addr).try_create_replicated_topic(TOPIC, 1, 3, &[], false);
    assert_eq!(
        created.error_code, NONE,
        "create: {:?}",
        created.error_message
    );
    let (leader, epoch) = poll("a leader with all three replicas in sync", || {
        let states: Vec<_> = nodes.iter().map(partition_state).collect();
        match states[0] {
            Some((leader, epoch, 3)) if leader > 0 && states.iter().all(|s| *s == states[0]) => {
                Some((leader, epoch))
            }
            _ => None,
        }
    });
    let at = |id: i32| nodes.iter().find(|n| n.id == id).expect("node").addr;
    let followers: Vec<i32> = [1, 2, 3].into_iter().filter(|&id| id != leader).collect();
    // The leader takes the role a moment after the metadata names it.
    poll("the leader takes produce requests", || {
        let (code, _) = Client::connect(at(leader)).produce(TOPIC, 0, 10, 20);
        (code == NONE).then_some(())
    });
    let consumer_latest = |id: i32| {
        let (code, offset, _) =
            Client::connect(at(id)).list_offset_as(7, CONSUMER, -1, TOPIC, 0, LATEST);
        (code, offset)
    };
    assert_eq!(
        consumer_latest(leader),
        (NONE, 10),
        "acks=all: the HW passed the batch"
    );

    // Every replica writes the HW it knows within the checkpoint interval, with no roll and
    // no clean close (Kafka's replication-offset-checkpoint, every 5 s by default).
    for node in &nodes {
        let file = node
            .data
            .join(format!("{TOPIC}-0/recovery-point-offset-checkpoint"));
        poll("the high watermark checkpointed on every replica", || {
            let text = std::fs::read_to_string(&file).ok()?;
            text.lines().any(|l| l == "high-watermark 10").then_some(())
        });
    }

    for &f in &followers {
        assert_eq!(
            consumer_latest(f).0,
            NOT_LEADER_OR_FOLLOWER,
            "a consumer's ListOffsets at follower {f}"
        );
        assert_eq!(
            Client::connect(at(f)).delete_records(TOPIC, 0, 2).0,
            NOT_LEADER_OR_FOLLOWER,
            "DeleteRecords at follower {f}"
        );
        // A debugging client may ask a follower: its log end, once it fetched the batch.
        poll("a follower's log end by a debugging ListOffsets", || {
            let (code, offset, _) =
                Client::connect(at(f)).list_offset_as(7, DEBUGGING, -1, TOPIC, 0, LATEST);
            (code == NONE && offset == 10).then_some(())
        });
        // A follower asking the leader as a replica gets the leader's log end.
        let (code, offset, _) =
            Client::connect(at(leader)).list_offset_as(7, f, epoch, TOPIC, 0, LATEST);
        assert_eq!(
            (code, offset),
            (NONE, 10),
            "a replica's ListOffsets at the leader"
        );
    }

    let (code, _, _) =
        Client::connect(at(leader)).list_offset_as(7, CONSUMER, epoch + 1, TOPIC, 0, LATEST);
    assert_eq!(
        code, UNKNOWN_LEADER_EPOCH,
        "a newer epoch than the leader's"
    );
    let (code, offset, answered_epoch) =
        Client::connect(at(leader)).list_offset_as(7, CONSUMER, epoch, TOPIC, 0, LATEST);
    assert_eq!((code, offset, answered_epoch), (NONE, 10, epoch));

    let mut admin = Client::connect(at(leader));
    assert_eq!(
        admin.delete_records(TOPIC, 0, 11).0,
        OFFSET_OUT_OF_RANGE,
        "DeleteRecords past the HW"
    );
    // Answered once the low watermark reached 4: every follower deleted them too (Kafka's
    // DelayedDeleteRecords), so a debugging read of each follower sees 4 at once, no polling.
    assert_eq!(admin.delete_records(TOPIC, 0, 4), (NONE, 4));
    for &f in &followers {
        let (code, offset, _) =
            Client::connect(at(f)).list_offset_as(7, DEBUGGING, -1, TOPIC, 0, EARLIEST);
        assert_eq!((code, offset), (NONE, 4), "follower {f}'s log start");
    }

    // Failover: the new leader answers earliest with the epoch its batch was written at.
    let old = nodes.iter().position(|n| n.id == leader).expect("leader");
    nodes[old].kill9();
    let (new_leader, new_epoch) = poll("a new leader", || {
        let by = nodes.iter().find(|n| n.id != leader)?;
        match partition_state(by)? {
            (l, e, _) if l > 0 && l != leader && e > epoch => Some((l, e)),
            _ => None,
        }
    });
    let addr = nodes
        .iter()
        .find(|n| n.id == new_leader)
        .expect("node")
        .addr;
    let answer = |timestamp| {
        poll("the new leader answers ListOffsets", || {
            let (code, offset, e) =
                Client::connect(addr).list_offset_as(7, CONSUMER, -1, TOPIC, 0, timestamp);
            (code == NONE).then_some((offset, e))
        })
    };
    assert_eq!(
        answer(EARLIEST),
        (4, epoch),
        "earliest: the epoch of its batch"
    );
    assert_eq!(answer(LATEST), (10, new_epoch), "latest: the current epoch");
}

/// Kafka's DelayedDeleteRecords: the leader answers once every follower on a live broker
/// deleted the records too; a follower that cannot fetch holds the answer until the request's
/// timeout (REQUEST_TIMED_OUT), and once the controller fenced its broker it is not waited for.
#[test]
fn delete_records_waits_for_the_followers_of_live_brokers() {
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(6);
    let voters = voters(&ports);
    let nodes = start_three_with(root.path(), &ports, &voters, None, &[]);
    wait_for(&nodes, &[0, 1, 2], "three live brokers", |m| {
        broker_ids(m) == vec![1, 2, 3] && m.controller_id.0 > 0
    });
    let created =
        Client::connect(nodes[0].addr).try_create_replicated_topic(TOPIC, 1, 3, &[], false);
    assert_eq!(created.error_code, NONE, "{:?}", created.error_message);
    let leader = poll(
        "a leader with all three replicas in sync",
        || match partition_state(&nodes[0])? {
            (leader, _, 3) if leader > 0 => Some(leader),
            _ => None,
        },
    );
    let at = |id: i32| nodes.iter().find(|n| n.id == id).expect("node");
    poll("the leader takes produce requests", || {
        let (code, _) = Client::connect(at(leader).addr).produce(TOPIC, 0, 10, 20);
        (code == NONE).then_some(())
    });
    let stopped = at([1, 2, 3]
        .into_iter()
        .find(|&id| id != leader)
        .expect("a follower"));
    stopped.signal(libc::SIGSTOP);

    let mut admin = Client::connect(at(leader).addr);
    let (code, _) = admin.delete_records_within(TOPIC, 0, 3, 300);
    assert_eq!(
        code, REQUEST_TIMED_OUT,
        "a stopped follower holds the answer"
    );
    let low = poll("answered without the broker once it is fenced", || {
        let (code, low) = admin.delete_records_within(TOPIC, 0, 3, 300);
        (code == NONE).then_some(low)
    });
    assert_eq!(low, 3);
    stopped.signal(libc::SIGCONT);
    drop(admin);
    // Every broker stops promptly on SIGTERM (a stop used to wait for the offsets topic's
    // creation, held up by the stopped broker).
    let mut nodes = nodes;
    for node in nodes.iter_mut() {
        let status = node.stop();
        assert!(
            status.is_some_and(|s| s.success()),
            "node {} did not stop cleanly on SIGTERM: {status:?}",
            node.id
        );
    }
}

/// DeleteTopics in a cluster is answered once the broker that received it applied the
/// committed deletion: its very next Metadata does not list the topic (by name:
/// UNKNOWN_TOPIC_OR_PARTITION, also for the auto-creating request kafka-go sends, which
/// creates it anew through the controller), and the other brokers drop it soon after.
#[test]
fn a_deleted_topic_is_gone_from_the_next_metadata_of_the_broker_asked() {
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(6);
    let voters = voters(&ports);
    let mut nodes = start_three_with(root.path(), &ports, &voters, None, &[]);
    wait_for(&nodes, &[0, 1, 2], "three live brokers", |m| {
        broker_ids(m) == vec![1, 2, 3] && m.controller_id.0 > 0
    });
    let created =
        Client::connect(nodes[0].addr).try_create_replicated_topic("doomed", 1, 3, &[], false);
    assert_eq!(created.error_code, NONE, "{:?}", created.error_message);
    for node in &nodes {
        poll("every broker lists the topic", || {
            topic_partitions(node, "doomed").map(|_| ())
        });
    }
    // Asked of a broker that is not the one that created it.
    let mut c = Client::connect(nodes[1].addr);
    assert_eq!(c.delete_topic(Some("doomed"), uuid::Uuid::nil()).0, NONE);
    let all = c.listing(12, None, false);
    assert!(
        all.iter().all(|(n, _, _)| n != "doomed"),
        "listed right after its deletion: {all:?}"
    );
    let by_name = c.listing(12, Some(&["doomed"]), false);
    assert_eq!(by_name[0].1, UNKNOWN_TOPIC_OR_PARTITION);
    for node in &nodes {
        poll("every broker drops the topic", || {
            topic_partitions(node, "doomed").is_none().then_some(())
        });
    }
    let auto = c.listing(6, Some(&["doomed"]), true);
    assert_eq!((auto[0].1, auto[0].2), (UNKNOWN_TOPIC_OR_PARTITION, 0));
    let again = c.listing(6, Some(&["doomed"]), true);
    assert_eq!(again[0].1, NONE, "auto-created anew: {again:?}");
    drop(c);
    for node in nodes.iter_mut() {
        let status = node.stop();
        assert!(status.is_some_and(|s| s.success()), "node {}", node.id);
    }
}
