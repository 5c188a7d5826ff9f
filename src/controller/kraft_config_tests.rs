use super::*;

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const VOTERS: &str = "1@127.0.0.1:29091,2@127.0.0.1:29092,3@127.0.0.1:29093";

fn voter_props(node: &str) -> BTreeMap<String, String> {
    props(&[
        ("node.id", node),
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:19091,CONTROLLER://127.0.0.1:29091",
        ),
        ("controller.quorum.voters", VOTERS),
    ])
}

#[test]
fn without_voters_nothing_changes() {
    let p = props(&[
        ("node.id", "1"),
        ("listeners", "PLAINTEXT://127.0.0.1:9092"),
    ]);
    assert_eq!(KraftConfig::from_properties(&p), Ok(None));
}

#[test]
fn the_issue_example_parses_with_kafkas_defaults() {
    let c = KraftConfig::from_properties(&voter_props("1"))
        .expect("valid")
        .expect("cluster mode");
    assert_eq!(c.node_id, NodeId::from(1));
    assert_eq!(
        c.roles,
        ProcessRoles {
            broker: true,
            controller: true
        }
    );
    assert_eq!(c.voters.len(), 3);
    assert_eq!(c.voters[2].address.port, 29093);
    assert_eq!(c.own_voter().map(|v| v.address.port), Some(29091));
    assert_eq!(c.controller_listener_names, vec!["CONTROLLER".to_string()]);
    assert_eq!(
        c.advertised_listeners.len(),
        1,
        "controller listener not advertised"
    );
    assert_eq!(c.advertised_listeners[0].name, "PLAINTEXT");
    assert_eq!(c.heartbeat_interval_ms, 2_000);
    assert_eq!(c.session_timeout_ms, 9_000);
    assert_eq!(c.election_timeout_ms, 1_000);
    assert_eq!(c.default_replication_factor, 1);
    assert_eq!(
        (
            c.replica_fetch_max_bytes,
            c.replica_fetch_response_max_bytes
        ),
        (1 << 20, 10 << 20),
        "Kafka's defaults"
    );
    assert_eq!((c.cluster_id.clone(), c.rack.clone()), (None, None));
}

#[test]
fn a_broker_only_node() {
    let p = props(&[
        ("node.id", "4"),
        ("listeners", "PLAINTEXT://127.0.0.1:19094"),
        ("advertised.listeners", "PLAINTEXT://broker4.example:9092"),
        ("controller.quorum.voters", VOTERS),
        ("broker.rack", "rack-b"),
        ("cluster.id", "J8qXRwI-Qyi2G0guFTiuYw"),
        ("broker.session.timeout.ms", "3000"),
        ("broker.heartbeat.interval.ms", "500"),
        ("default.replication.factor", "3"),
        ("replica.fetch.response.max.bytes", "65536"),
    ]);
    let c = KraftConfig::from_properties(&p)
        .expect("valid")
        .expect("cluster mode");
    assert_eq!(
        c.roles,
        ProcessRoles {
            broker: true,
            controller: false
        }
    );
    assert_eq!(c.advertised_listeners[0].address.host, "broker4.example");
    assert_eq!(c.rack.as_deref(), Some("rack-b"));
    assert_eq!(c.cluster_id.as_deref(), Some("J8qXRwI-Qyi2G0guFTiuYw"));
    assert_eq!((c.session_timeout_ms, c.heartbeat_interval_ms), (3000, 500));
    assert_eq!(c.default_replication_factor, 3);
    assert_eq!(c.replica_fetch_response_max_bytes, 65536);
    assert!(c.own_voter().is_none());
}

#[test]
fn list_syntax() {
    let v = parse_voters(" 1@h:1 , ,2@[::1]:2 ").expect("valid");
    assert_eq!(v[1].address.host, "::1");
    let l = parse_listeners("listeners", "plaintext://:9092").expect("valid");
    assert_eq!(
        (l[0].name.as_str(), l[0].address.host.as_str()),
        ("PLAINTEXT", "")
    );
    assert_eq!(
        parse_process_roles("controller, broker"),
        Ok(ProcessRoles {
            broker: true,
            controller: true
        })
    );
}

#[test]
fn bad_values_are_refused() {
    for bad in [
        "",
        "1",
        "1@host",
        "x@h:1",
        "-1@h:1",
        "1@h:1,1@h:2",
        "1@h:99999",
    ] {
        assert!(parse_voters(bad).is_err(), "{bad:?}");
    }
    for bad in ["", "h:1", "A://h:1,a://h:2", "A B://h:1", "A://h"] {
        assert!(parse_listeners("listeners", bad).is_err(), "{bad:?}");
    }
    for bad in ["", "broker,zookeeper"] {
        assert!(parse_process_roles(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn inconsistent_settings_are_refused() {
    let with = |extra: &[(&str, &str)], node: &str| {
        let mut p = voter_props(node);
        for (k, v) in extra {
            p.insert(k.to_string(), v.to_string());
        }
        KraftConfig::from_properties(&p)
    };
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (
            "a voter must be a controller",
            &[("process.roles", "broker")],
            "1",
        ),
        (
            "a controller must be a voter",
            &[
                ("process.roles", "broker,controller"),
                ("listeners", "PLAINTEXT://h:1,CONTROLLER://h:2"),
            ],
            "9",
        ),
        (
            "a broker-only node must not have a controller listener",
            &[],
            "9",
        ),
        (
            "a controller needs its listener",
            &[("listeners", "PLAINTEXT://h:1")],
            "1",
        ),
        (
            "a broker needs a client listener",
            &[("listeners", "CONTROLLER://h:1")],
            "1",
        ),
        (
            "the controller listener is not advertised",
            &[("advertised.listeners", "CONTROLLER://h:1")],
            "1",
        ),
        (
            "heartbeats must come within a session",
            &[("broker.heartbeat.interval.ms", "9000")],
            "1",
        ),
        (
            "timeouts are positive",
            &[("broker.session.timeout.ms", "0")],
            "1",
        ),
        (
            "fetch sizes are positive",
            &[("replica.fetch.response.max.bytes", "0")],
            "1",
        ),
        (
            "RF is at least 1",
            &[("default.replication.factor", "0")],
            "1",
        ),
        ("cluster ids are tokens", &[("cluster.id", "a b")], "1"),
        ("node ids are not negative", &[], "-1"),
    ];
    for (name, extra, node) in cases {
        assert!(with(extra, node).is_err(), "{name}");
    }
    let mut p = voter_props("1");
    p.remove("listeners");
    assert_eq!(
        KraftConfig::from_properties(&p),
        Err(KraftConfigError::Missing("listeners"))
    );
}
