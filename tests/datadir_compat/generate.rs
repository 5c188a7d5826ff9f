//! The generators (ignored tests, run by hand): today's broker writes a new fixture.

use super::*;

/// Writes `tests/fixtures/datadir-single-<commit>.{tar.gz,json}` from today's broker.
#[test]
#[ignore = "writes a new fixture: run by hand when the on-disk format changes"]
fn write_single_node_fixture() {
    let head = git(&["rev-parse", "--short=7", "HEAD"]);
    // The broker is built from src/ (and the vendored glommio): changes elsewhere, this
    // test's own included, do not make another on-disk format.
    let source_changes = git(&["status", "--porcelain", "--", "src", "vendor"]);
    let described = if source_changes.is_empty() {
        git(&["rev-parse", "HEAD"])
    } else {
        format!(
            "{} with uncommitted changes to src/",
            git(&["rev-parse", "HEAD"])
        )
    };
    let work = tempfile::tempdir().expect("tempdir");
    let data = work.path().join("data");
    let broker = Broker::start_with_data_dir(Some(data.clone()), SETTINGS);
    let mut c = broker.client();

    // Topics: several partition counts, configs at creation, one altered later, one grown.
    c.create_topic("events", 4, &[]);
    c.create_topic(
        "compacted",
        2,
        &[
            ("cleanup.policy", "compact"),
            ("retention.ms", "-1"),
            ("max.message.bytes", "65536"),
            ("segment.bytes", "1024"),
            ("min.compaction.lag.ms", "3600000"),
        ],
    );
    c.create_topic("idem", 1, &[("message.timestamp.type", "LogAppendTime")]);
    c.create_topic("grown", 1, &[]);
    c.create_topic("empty", 2, &[]);
    c.create_topic("gone", 2, &[]);
    incremental_set(&mut c, "events", "retention.bytes", "1073741824");
    let (code, msg) = c.create_partitions("grown", 3, None, false);
    assert_eq!(code, 0, "CreatePartitions grown: {msg:?}");

    // events: every codec, keys (and a null key), values (and a null one), headers.
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for round in 0..3i64 {
        for p in 0..4i32 {
            let codec = codecs[(p as usize + round as usize) % codecs.len()];
            let keys: Vec<String> = (0..5).map(|i| format!("key-{p}-{round}-{i}")).collect();
            let values: Vec<String> = (0..5)
                .map(|i| format!("value {p}/{round}/{i} {}", "x".repeat(i * 7)))
                .collect();
            let recs: Vec<Rec> = (0..5)
                .map(|i| {
                    let key = (i != 3).then(|| keys[i].as_bytes());
                    let value = (i != 4).then(|| values[i].as_bytes());
                    let headers = if i % 2 == 0 {
                        vec![("trace", b"abc".as_slice()), ("n", keys[i].as_bytes())]
                    } else {
                        vec![]
                    };
                    (key, value, TS + round * 1000 + i as i64 * 3, headers)
                })
                .collect();
            produce_ok(&mut c, "events", p, batch_of(&recs, codec));
        }
    }
    // A log start moved by DeleteRecords, mid-batch.
    let (code, low) = c.delete_records("events", 1, 7);
    assert_eq!((code, low), (0, 7), "DeleteRecords events-1");

    // compacted: unique keys (the cleaner has nothing to remove), enough to roll segments.
    for p in 0..2i32 {
        for b in 0..6i64 {
            let keys: Vec<String> = (0..4).map(|i| format!("ck-{p}-{b}-{i}")).collect();
            let value = "c".repeat(200);
            let recs: Vec<Rec> = (0..4)
                .map(|i| {
                    (
                        Some(keys[i].as_bytes()),
                        Some(value.as_bytes()),
                        TS + b * 100 + i as i64,
                        vec![],
                    )
                })
                .collect();
            let codec = if b % 2 == 0 {
                Compression::None
            } else {
                Compression::Gzip
            };
            produce_ok(&mut c, "compacted", p, batch_of(&recs, codec));
        }
    }

    // grown: records in the old partition and the new ones.
    for p in 0..3 {
        let v = format!("grown {p}");
        produce_ok(
            &mut c,
            "grown",
            p,
            batch_of(&[(None, Some(v.as_bytes()), TS, vec![])], Compression::None),
        );
    }

    // idem: an idempotent producer's batches (and one of another producer).
    let (pid, epoch) = init_producer_id(&mut c);
    let mut producers = BTreeMap::new();
    let mut seq = 0;
    let mut last = None;
    for b in 0..4i64 {
        let values: Vec<String> = (0..3).map(|i| format!("idem {b}/{i}")).collect();
        let batch = idempotent_batch(pid, epoch, seq, &values, TS + b * 10);
        let base = produce_ok(&mut c, "idem", 0, batch);
        last = Some((seq, base, values.clone(), TS + b * 10));
        seq += values.len() as i32;
    }
    let (last_seq, last_base, last_values, last_ts) = last.expect("batches");
    producers.insert(
        "idem/0".to_string(),
        ProducerManifest {
            producer_id: pid,
            epoch,
            last_base_sequence: last_seq,
            last_count: last_values.len(),
            last_base_offset: last_base,
            last_values,
            last_timestamp: last_ts,
        },
    );
    let (other, other_epoch) = init_producer_id(&mut c);
    produce_ok(
        &mut c,
        "events",
        0,
        idempotent_batch(other, other_epoch, 0, &["other producer".to_string()], TS),
    );

    // gone: records, committed offsets, then deleted.
    produce_ok(
        &mut c,
        "gone",
        0,
        batch_of(&[(None, Some(b"soon gone"), TS, vec![])], Compression::None),
    );

    // Groups: a member of a real generation, and commits outside group management.
    let mut member = broker.client();
    let first: JoinGroupResponse = until_coordinator_ready(|| {
        let r: JoinGroupResponse =
            member.call(ApiKey::JoinGroup, 7, &join_group_request("consumers", ""));
        if r.error_code == ResponseError::MemberIdRequired.code() {
            Ok(r)
        } else {
            Err(r.error_code)
        }
    });
    let joined: JoinGroupResponse = member.call(
        ApiKey::JoinGroup,
        7,
        &join_group_request("consumers", &first.member_id),
    );
    assert_eq!(joined.error_code, 0, "JoinGroup");
    let member_id = joined.member_id.to_string();
    let mut sync = SyncGroupRequest::default();
    sync.group_id = GroupId(s("consumers"));
    sync.generation_id = joined.generation_id;
    sync.member_id = s(&member_id);
    sync.protocol_type = Some(s("consumer"));
    sync.protocol_name = Some(s("range"));
    let mut a = SyncGroupRequestAssignment::default();
    a.member_id = s(&member_id);
    a.assignment = Bytes::from_static(b"all of events");
    sync.assignments = vec![a];
    let synced: SyncGroupResponse = member.call(ApiKey::SyncGroup, 5, &sync);
    assert_eq!(synced.error_code, 0, "SyncGroup");
    commit(
        &mut member,
        "consumers",
        joined.generation_id,
        &member_id,
        &[
            ("events", 0, 3, "first"),
            ("events", 1, 8, ""),
            ("events", 2, 5, "m2"),
        ],
    );
    // A later commit of the same partition wins.
    commit(
        &mut member,
        "consumers",
        joined.generation_id,
        &member_id,
        &[("events", 0, 11, "second"), ("events", 3, 15, "m3")],
    );
    commit(
        &mut c,
        "standalone",
        -1,
        "",
        &[
            ("compacted", 0, 10, "c0"),
            ("compacted", 1, 24, "c1"),
            ("idem", 0, 6, "{\"json\": true}"),
            ("grown", 2, 1, "new partition"),
        ],
    );
    commit(&mut c, "gone-readers", -1, "", &[("gone", 0, 1, "")]);
    let (code, _) = c.delete_topic(Some("gone"), uuid::Uuid::nil());
    assert_eq!(code, 0, "DeleteTopics gone");
    for _ in 0..100 {
        if c.topic_metadata("gone").0 == ResponseError::UnknownTopicOrPartition.code() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    // What the broker answers now is the manifest.
    let route = Route {
        nodes: vec![broker.addr],
    };
    let manifest = Manifest {
        written_by: described,
        generator: "cargo test --test datadir_compat -- --ignored write_single_node_fixture"
            .to_string(),
        shards: 2,
        settings: SETTINGS.iter().map(|s| s.to_string()).collect(),
        topics: observe_topics(&route),
        deleted_topics: vec!["gone".to_string()],
        groups: observe_groups(&route),
        producers,
        highest_producer_id: pid.max(other),
    };
    assert!(!manifest.topics.contains_key("gone"));
    drop(member);
    drop(c);
    broker.stop_cleanly();

    std::fs::create_dir_all(FIXTURES).expect("fixtures dir");
    let name = format!("{SINGLE_PREFIX}{head}");
    let tarball = Path::new(FIXTURES).join(format!("{name}.tar.gz"));
    assert!(
        !tarball.exists(),
        "{} exists: a fixture is never replaced",
        tarball.display()
    );
    pack(&data, &tarball);
    let json = serde_json::to_string_pretty(&manifest).expect("manifest json");
    std::fs::write(
        Path::new(FIXTURES).join(format!("{name}.json")),
        json + "\n",
    )
    .expect("write the manifest");
    eprintln!(
        "wrote {} ({} bytes) and its manifest",
        tarball.display(),
        std::fs::metadata(&tarball).expect("tarball").len()
    );
}

/// Writes `tests/fixtures/datadir-cluster-<commit>.{tar.gz,json}`: three nodes (controller and
/// broker each) of today's broker.
#[test]
#[ignore = "writes a new fixture: run by hand when the on-disk format changes"]
fn write_cluster_fixture() {
    let head = git(&["rev-parse", "--short=7", "HEAD"]);
    let root = tempfile::tempdir().expect("tempdir");
    let _ports = PortsLock::take(&CLUSTER_CONTROLLER_PORTS);
    let kafka_ports = cluster::free_ports(3);
    let settings = cluster_node_settings(&CLUSTER_CONTROLLER_PORTS, &kafka_ports);
    let mut nodes: Vec<cluster::Node> = (0..3)
        .map(|i| cluster::start_node(root.path(), i as i32 + 1, &settings[i]))
        .collect();
    cluster::wait_for(&nodes, &[0, 1, 2], "three brokers and a controller", |m| {
        cluster::broker_ids(m) == vec![1, 2, 3] && m.controller_id.0 > 0
    });
    let route = Route {
        nodes: nodes.iter().map(|n| n.addr).collect(),
    };
    let mut c = route.any();
    for (name, partitions, configs) in [
        ("orders", 3, vec![]),
        (
            "profiles",
            2,
            vec![
                ("cleanup.policy", "compact"),
                ("retention.ms", "-1"),
                ("segment.bytes", "1024"),
                ("max.message.bytes", "65536"),
            ],
        ),
        ("gone", 1, vec![]),
    ] {
        let r = c.try_create_replicated_topic(name, partitions, 3, &configs, false);
        assert_eq!(r.error_code, 0, "create {name}: {:?}", r.error_message);
    }
    wait_all_led(&nodes);
    let codecs = [Compression::None, Compression::Gzip, Compression::Zstd];
    for round in 0..4i64 {
        for (topic, partitions) in [("orders", 3), ("profiles", 2), ("gone", 1)] {
            for p in 0..partitions {
                let keys: Vec<String> =
                    (0..4).map(|i| format!("{topic}-{p}-{round}-{i}")).collect();
                let value = format!("{topic} value {}", "v".repeat(100));
                let recs: Vec<Rec> = (0..4)
                    .map(|i| {
                        (
                            Some(keys[i].as_bytes()),
                            Some(value.as_bytes()),
                            TS + round * 100 + i as i64,
                            vec![("h", keys[i].as_bytes())],
                        )
                    })
                    .collect();
                let codec = codecs[(round as usize + p as usize) % codecs.len()];
                produce_ok(
                    &mut route.leader(topic, p),
                    topic,
                    p,
                    batch_of(&recs, codec),
                );
            }
        }
    }
    let (code, low) = route.leader("orders", 2).delete_records("orders", 2, 5);
    assert_eq!((code, low), (0, 5), "DeleteRecords orders-2");
    commit(
        &mut route.coordinator("cluster-readers"),
        "cluster-readers",
        -1,
        "",
        &[
            ("orders", 0, 16, "o0"),
            ("orders", 2, 9, ""),
            ("profiles", 1, 12, "p1"),
        ],
    );
    commit(
        &mut route.coordinator("other-readers"),
        "other-readers",
        -1,
        "",
        &[("orders", 1, 4, "x")],
    );
    let (code, _) = c.delete_topic(Some("gone"), uuid::Uuid::nil());
    assert_eq!(code, 0, "DeleteTopics gone");
    cluster::wait_for(&nodes, &[0, 1, 2], "gone deleted everywhere", |m| {
        m.topics
            .iter()
            .all(|t| t.name.as_ref().is_none_or(|n| n.0.as_str() != "gone"))
    });
    let replicas = wait_all_led(&nodes);
    let manifest = ClusterManifest {
        written_by: git(&["rev-parse", "HEAD"]),
        generator: "cargo test --test datadir_compat -- --ignored write_cluster_fixture"
            .to_string(),
        controller_ports: CLUSTER_CONTROLLER_PORTS.to_vec(),
        settings: CLUSTER_SETTINGS.iter().map(|s| s.to_string()).collect(),
        cluster_id: cluster_id(&route),
        replicas,
        topics: observe_topics(&route),
        deleted_topics: vec!["gone".to_string()],
        groups: observe_groups(&route),
    };
    drop(c);
    stop_all(&mut nodes);

    let name = format!("{CLUSTER_PREFIX}{head}");
    let tarball = Path::new(FIXTURES).join(format!("{name}.tar.gz"));
    assert!(
        !tarball.exists(),
        "{} exists: a fixture is never replaced",
        tarball.display()
    );
    pack_dirs(root.path(), &["data-1", "data-2", "data-3"], &tarball);
    let json = serde_json::to_string_pretty(&manifest).expect("manifest json");
    std::fs::write(
        Path::new(FIXTURES).join(format!("{name}.json")),
        json + "\n",
    )
    .expect("write the manifest");
    eprintln!(
        "wrote {} ({} bytes) and its manifest",
        tarball.display(),
        std::fs::metadata(&tarball).expect("tarball").len()
    );
}
