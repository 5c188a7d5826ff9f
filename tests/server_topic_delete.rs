//! Deleted data never comes back: a topic delete renames the partition directories aside at
//! once and removes them in the background, a start removes what a crash left of them, and
//! every partition directory names its topic id (Kafka's `partition.metadata`), so a directory
//! of another incarnation of a topic is set aside instead of being served. Every wait is
//! bounded; the broker is stopped with SIGTERM and must exit 0.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use uuid::Uuid;

mod broker;
use broker::{Broker, WAIT};

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// Entries of the data dir whose name starts with `prefix` and ends with `suffix`.
fn entries(data: &Path, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(data)
        .expect("read the data dir")
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Waits (bounded) until `gone` holds.
fn wait_until(what: &str, mut gone: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !gone() {
        assert!(Instant::now() < deadline, "still waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kafka's `partition.metadata` for `id`.
fn kafka_partition_metadata(id: Uuid) -> String {
    format!(
        "version: 0\ntopic_id: {}",
        URL_SAFE_NO_PAD.encode(id.as_bytes())
    )
}

/// What a crash right after the metadata was saved leaves: the topic gone from the stored
/// metadata, its directories still there.
fn forget_topic_in_stored_metadata(data: &Path, topic: &str) {
    let path = data.join("__ringbroker_metadata").join("snapshot.json");
    let text = std::fs::read_to_string(&path).expect("read the metadata");
    let mut meta: serde_json::Value = serde_json::from_str(&text).expect("metadata JSON");
    let topics = meta["snapshot"]["topics"]
        .as_array_mut()
        .expect("a snapshot's topics");
    let before = topics.len();
    topics.retain(|t| t["name"] != topic);
    assert_eq!(topics.len(), before - 1, "{topic} in {text}");
    std::fs::write(&path, serde_json::to_vec(&meta).expect("encode")).expect("write");
}

#[test]
fn a_topic_deleted_just_before_a_crash_does_not_come_back() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("d", 2, &[]);
    for p in 0..2 {
        assert_eq!(c.produce("d", p, 5, 10), (NONE, 0));
    }
    drop(c);
    broker.assert_clean_stop();
    let data = broker.data_dir();
    forget_topic_in_stored_metadata(&data, "d");

    broker.spawn();
    let mut c = broker.client();
    assert_eq!(c.topic_metadata("d").0, UNKNOWN_TOPIC_OR_PARTITION);
    c.create_topic("d", 2, &[]);
    for p in 0..2 {
        // Before: the old segments were loaded as the new topic's (high watermark 5).
        let (code, _, hw, bytes) = c.fetch("d", p, 0);
        assert_eq!(
            (code, hw, bytes),
            (NONE, 0, 0),
            "partition {p} starts empty"
        );
        assert_eq!(c.produce("d", p, 1, 10), (NONE, 0));
    }
    // The old data is set aside for the operator, not served and not deleted.
    assert_eq!(entries(&data, "d-", "-stray").len(), 2);
    drop(c);
    broker.stop_cleanly();
}

#[test]
fn a_directory_of_another_incarnation_of_the_topic_is_set_aside() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("e", 1, &[]);
    assert_eq!(c.produce("e", 0, 4, 10), (NONE, 0));
    let (_, _, id) = c.topic_metadata("e");
    drop(c);
    broker.assert_clean_stop();
    let dir = broker.data_dir().join("e-0");
    let file = dir.join("partition.metadata");
    std::fs::write(
        &file,
        kafka_partition_metadata(ringbroker::util::entropy::uuid_v4()),
    )
    .expect("write");

    broker.spawn();
    let mut c = broker.client();
    let (code, _, hw, _) = c.fetch("e", 0, 0);
    assert_eq!(
        (code, hw),
        (NONE, 0),
        "the other incarnation's records are not served"
    );
    let strays = entries(&broker.data_dir(), "e-0.", "-stray");
    assert_eq!(strays.len(), 1);
    assert!(strays[0].join(format!("{:020}.log", 0)).exists(), "kept");
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        kafka_partition_metadata(id)
    );
    drop(c);
    broker.stop_cleanly();
}

#[test]
fn partition_metadata_is_kafkas_and_written_for_existing_directories() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("f", 2, &[]);
    assert_eq!(c.produce("f", 1, 3, 10), (NONE, 0));
    let (_, _, id) = c.topic_metadata("f");
    let data = broker.data_dir();
    let file = |p: i32| data.join(format!("f-{p}/partition.metadata"));
    for p in 0..2 {
        let text = std::fs::read_to_string(file(p)).expect("partition.metadata written");
        assert_eq!(text, kafka_partition_metadata(id));
    }
    drop(c);
    broker.assert_clean_stop();

    // A directory from before the file existed gets it and keeps its data.
    std::fs::remove_file(file(1)).expect("remove");
    broker.spawn();
    let mut c = broker.client();
    assert_eq!(c.fetch("f", 1, 0).2, 3);
    let text = std::fs::read_to_string(file(1)).expect("partition.metadata written again");
    assert_eq!(text, kafka_partition_metadata(id));
    drop(c);
    broker.stop_cleanly();
}

#[test]
fn delete_renames_at_once_and_removes_in_the_background_and_at_start() {
    let mut broker = Broker::start(&[]);
    let data = broker.data_dir();
    let mut c = broker.client();
    c.create_topic("g", 2, &[]);
    assert_eq!(c.produce("g", 0, 3, 10), (NONE, 0));
    assert_eq!(c.delete_topic(Some("g"), Uuid::nil()).0, NONE);
    // Acknowledged only once no directory carries the partition's name.
    assert!(entries(&data, "g-", "").iter().all(|e| {
        let name = e
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        name.ends_with("-delete")
    }));
    wait_until("g's directories removed", || {
        entries(&data, "g-", "").is_empty()
    });
    drop(c);
    broker.assert_clean_stop();

    // Left over by a crash during the background removal: removed at the next start.
    let leftover = data.join(format!(
        "h-0.{}-delete",
        ringbroker::util::entropy::uuid_v4().simple()
    ));
    std::fs::create_dir_all(&leftover).expect("create");
    std::fs::write(leftover.join(format!("{:020}.log", 0)), b"old data").expect("write");
    broker.spawn();
    wait_until("the -delete directory removed at start", || {
        !leftover.exists()
    });
    broker.stop_cleanly();
}

/// kafka-go's `testDeleteTopics`: right after DeleteTopics answers, the next Metadata on any
/// shard lists neither topic, by name it answers UNKNOWN_TOPIC_OR_PARTITION, and so does the
/// auto-creating Metadata v6 kafka-go sends, without partitions, as Kafka's KRaft broker does
/// (it only sends the creation to its controller); the listing after that has the new topic.
#[test]
fn a_deleted_topic_is_gone_from_the_next_metadata_on_every_shard() {
    let broker = Broker::start(&[]);
    let mut admin = broker.client();
    let mut on_shard: Vec<Option<broker::Client>> = vec![None, None];
    for _ in 0..200 {
        if on_shard.iter().all(Option::is_some) {
            break;
        }
        let c = broker.client();
        let shard = c.shard(2);
        on_shard[shard].get_or_insert(c);
    }
    let mut on_shard: Vec<broker::Client> = on_shard
        .into_iter()
        .map(|c| c.expect("a connection on each of the 2 shards"))
        .collect();
    let names = ["gone-a", "gone-b"];
    for name in names {
        admin.create_topic(name, 1, &[]);
    }
    for name in names {
        assert_eq!(admin.delete_topic(Some(name), Uuid::nil()).0, NONE);
    }
    for (shard, c) in on_shard.iter_mut().enumerate() {
        let all = c.listing(12, None, false);
        assert!(
            all.iter().all(|(n, _, _)| !names.contains(&n.as_str())),
            "shard {shard} lists a deleted topic: {all:?}"
        );
        let by_name = c.listing(12, Some(&names), false);
        for t in &by_name {
            assert_eq!(
                (t.1, t.2),
                (UNKNOWN_TOPIC_OR_PARTITION, 0),
                "shard {shard}: {t:?}"
            );
        }
    }
    // kafka-go's ReadPartitions: Metadata v6, auto-creation allowed.
    let c = &mut on_shard[1];
    for t in c.listing(6, Some(&names), true) {
        assert_eq!((t.1, t.2), (UNKNOWN_TOPIC_OR_PARTITION, 0), "{t:?}");
    }
    // Created all the same: the next listing has them.
    for t in c.listing(6, Some(&names), true) {
        assert_eq!((t.1, t.2), (NONE, 1), "{t:?}");
    }
    drop(on_shard);
    drop(admin);
    broker.stop_cleanly();
}
