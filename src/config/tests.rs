//! Parsing and validation of the broker properties.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::broker_config::default_produce_memory;
use super::*;
use crate::log::LogConfig;

/// Found by fuzz/fuzz_targets/config.rs: `hours * 3_600_000` overflowed (a panic with
/// overflow checks, a wrapped retention without), and `as i32` made 2^31 partitions -2^31.
#[test]
fn huge_values_are_rejected_not_wrapped() {
    let mut c = BrokerConfig::default();
    for (name, value) in [
        ("log.retention.hours", "9999999999999"),
        ("log.retention.minutes", "-9999999999999999"),
        ("log.roll.hours", "9223372036854775807"),
        ("num.partitions", "2147483648"),
        ("node.id", "4294967297"),
        ("log.index.interval.bytes", "4294967296"),
    ] {
        assert!(
            matches!(c.set(name, value), Err(ConfigError::BadValue { .. })),
            "{name}={value}"
        );
    }
    assert_eq!(c.num_partitions, 1);
    let overrides =
        BTreeMap::from([("index.interval.bytes".to_string(), "4294967296".to_string())]);
    assert!(topic_log_config(&LogConfig::default(), &overrides).is_err());
}

/// Kafka's own default for `queued.max.request.bytes` is -1 (no limit); a config file
/// taken from Kafka must start.
#[test]
fn queued_max_request_bytes_minus_one_means_no_limit() {
    let mut c = BrokerConfig::default();
    c.set("queued.max.request.bytes", "-1")
        .expect("Kafka's default");
    assert_eq!(c.connection_max_inflight_bytes, usize::MAX);
    let listed = broker_property("queued.max.request.bytes").map(|p| (p.get)(&c));
    assert_eq!(listed.as_deref(), Some("-1"), "listed as Kafka writes it");
    c.set("queued.max.request.bytes", "1000").expect("a limit");
    assert_eq!(c.connection_max_inflight_bytes, 1000);
    assert!(c.set("queued.max.request.bytes", "0").is_err());
    assert!(c.set("queued.max.request.bytes", "-2").is_err());
}

/// Several data directories (Kafka's JBOD) are not supported: refused, naming the
/// property, rather than silently serving the first one only.
#[test]
fn several_log_dirs_are_refused_by_name() {
    let mut c = BrokerConfig::default();
    for name in ["log.dirs", "log.dir"] {
        let err = c.set(name, "/a,/b").expect_err("two directories");
        assert!(
            matches!(&err, ConfigError::BadValue { name: n, .. } if n == name),
            "{err}"
        );
        assert!(err.to_string().contains(name), "{err}");
    }
    assert_eq!(c.data_dir, PathBuf::from("./data"), "unchanged");
    c.set("log.dirs", " /srv/data ").expect("one directory");
    assert_eq!(c.data_dir, PathBuf::from("/srv/data"));
    c.set("log.dirs", "/srv/other,")
        .expect("a trailing comma is one directory");
    assert_eq!(c.data_dir, PathBuf::from("/srv/other"));
}

#[test]
fn toml_with_quoted_and_dotted_keys() {
    let mut c = BrokerConfig::default();
    c.apply_toml(
        r#"
        "log.dirs" = "/srv/data"
        listeners = "PLAINTEXT://127.0.0.1:19092"
        num.partitions = 3
        log.retention.ms = -1
        auto.create.topics.enable = false
        "#,
    )
    .expect("valid");
    assert_eq!(c.data_dir, PathBuf::from("/srv/data"));
    assert_eq!(c.listen.port(), 19092);
    assert_eq!(c.advertised_port, 19092);
    assert_eq!(c.num_partitions, 3);
    assert_eq!(c.log_defaults.retention_ms, -1);
    assert!(!c.auto_create_topics);
}

#[test]
fn advertised_listeners_win_over_listeners_in_any_order() {
    for order in [
        ["advertised.listeners", "listeners"],
        ["listeners", "advertised.listeners"],
    ] {
        let mut c = BrokerConfig::default();
        for name in order {
            let value = if name == "listeners" {
                "PLAINTEXT://127.0.0.1:9000"
            } else {
                "PLAINTEXT://proxy.local:9100"
            };
            c.set(name, value).expect("valid");
        }
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(
            (c.advertised_host.as_str(), c.advertised_port),
            ("proxy.local", 9100)
        );
    }
    let mut c = BrokerConfig::default();
    c.set("listeners", "127.0.0.1:9000").expect("valid");
    assert_eq!(
        c.advertised_port, 9000,
        "advertised follows listeners by default"
    );
}

#[test]
fn connection_limits_default_and_parse() {
    let mut c = BrokerConfig::default();
    assert_eq!(c.max_connections, DEFAULT_MAX_CONNECTIONS);
    assert_eq!(c.max_connections_per_ip, i32::MAX as u64, "Kafka's default");
    c.set("max.connections", "1000").expect("valid");
    c.set("max.connections.per.ip", "50").expect("valid");
    assert_eq!((c.max_connections, c.max_connections_per_ip), (1000, 50));
    assert!(c.set("max.connections.per.ip", "0").is_err());
}

#[test]
fn per_ip_overrides_parse_ips_and_refuse_names() {
    let mut c = BrokerConfig::default();
    assert!(c.max_connections_per_ip_overrides.is_empty());
    c.set(
        "max.connections.per.ip.overrides",
        "127.0.0.1:200, 10.0.0.5:5,[::1]:7,fe80::2:0,::ffff:10.0.0.6:3",
    )
    .expect("valid");
    let o = &c.max_connections_per_ip_overrides;
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    assert_eq!(o.get(&ip("127.0.0.1")), Some(&200));
    assert_eq!(o.get(&ip("10.0.0.5")), Some(&5));
    assert_eq!(o.get(&ip("::1")), Some(&7));
    assert_eq!(o.get(&ip("fe80::2")), Some(&0), "0 refuses the address");
    assert_eq!(
        o.get(&ip("10.0.0.6")),
        Some(&3),
        "mapped IPv4 is plain IPv4"
    );
    for bad in ["localhost:5", "127.0.0.1", "127.0.0.1:-1", "127.0.0.1:x"] {
        let e = c.set("max.connections.per.ip.overrides", bad).unwrap_err();
        assert!(
            matches!(&e, ConfigError::BadValue { name, .. } if name == "max.connections.per.ip.overrides"),
            "{bad}: {e}"
        );
    }
    assert!(c
        .set("max.connections.per.ip.overrides", "localhost:5")
        .unwrap_err()
        .to_string()
        .contains("not an IP address"),);
    c.set("max.connections.per.ip.overrides", "")
        .expect("empty");
    assert!(c.max_connections_per_ip_overrides.is_empty());
}

#[test]
fn produce_memory_limit_is_set_or_derived_from_ram() {
    let mut c = BrokerConfig::default();
    assert!((PRODUCE_MEMORY_DEFAULT_FLOOR..=PRODUCE_MEMORY_DEFAULT_CAP)
        .contains(&c.produce_memory_limit()));
    c.set("ringbroker.produce.memory.max.bytes", "8388608")
        .expect("valid");
    assert_eq!(c.produce_memory_limit(), 8 << 20);
    assert!(c.set("ringbroker.produce.memory.max.bytes", "0").is_err());
    let gib = 1u64 << 30;
    assert_eq!(default_produce_memory(Some(64 * gib), 32), 256 << 20);
    assert_eq!(default_produce_memory(Some(2 * gib), 2), 256 << 20);
    assert_eq!(default_produce_memory(Some(gib), 2), 128 << 20);
    assert_eq!(default_produce_memory(Some(gib / 4), 8), 16 << 20);
    assert_eq!(default_produce_memory(None, 4), 256 << 20);
}

#[test]
fn errors_name_the_property() {
    let mut c = BrokerConfig::default();
    let e = c.apply_toml("log.retention.msec = 5").unwrap_err();
    assert!(e.to_string().contains("log.retention.msec"), "{e}");
    let e = c.apply_toml("num.partitions = 0").unwrap_err();
    assert!(e.to_string().contains("must be positive"), "{e}");
    assert!(c.apply_toml("not toml = = 1").is_err());
    assert!(c.set("listeners", "nonsense").is_err());
}

#[test]
fn metrics_listen_defaults_can_move_or_be_disabled() {
    let c = BrokerConfig::default();
    assert_eq!(c.metrics_listen, Some(DEFAULT_METRICS_LISTEN));
    let mut c = BrokerConfig::default();
    c.apply_toml("ringbroker.metrics.listen = \"0.0.0.0:9999\"")
        .expect("valid");
    assert_eq!(c.metrics_listen, Some(([0, 0, 0, 0], 9999).into()));
    for off in ["none", ""] {
        let mut c = BrokerConfig::default();
        c.set("ringbroker.metrics.listen", off).expect("valid");
        assert_eq!(c.metrics_listen, None, "{off:?}");
    }
    assert!(c.set("ringbroker.metrics.listen", "nonsense").is_err());
}

#[test]
fn topic_properties_round_trip() {
    let mut overrides = BTreeMap::new();
    overrides.insert("retention.ms".to_string(), "1000".to_string());
    overrides.insert(
        "message.timestamp.type".to_string(),
        "LogAppendTime".to_string(),
    );
    let c = topic_log_config(&LogConfig::default(), &overrides).expect("valid");
    assert_eq!(
        topic_property_value(&c, "retention.ms").as_deref(),
        Some("1000")
    );
    assert_eq!(
        topic_property_value(&c, "message.timestamp.type").as_deref(),
        Some("LogAppendTime")
    );
    overrides.insert("bogus".to_string(), "1".to_string());
    assert!(topic_log_config(&LogConfig::default(), &overrides).is_err());
    for p in TOPIC_PROPERTIES {
        assert!(topic_property_value(&c, p.name).is_some(), "{}", p.name);
    }
}

/// `connections.max.idle.ms` as Kafka takes it (-1 never closes), and the bound on reading one
/// request, which never exceeds it.
#[test]
fn idle_and_request_read_timeouts() {
    let mut c = BrokerConfig::default();
    assert_eq!(
        c.connection_idle_timeout(),
        Some(Duration::from_secs(600)),
        "Kafka's default"
    );
    assert_eq!(c.request_read_timeout(), Duration::from_secs(30));
    c.set("connections.max.idle.ms", "300").expect("valid");
    assert_eq!(
        c.connection_idle_timeout(),
        Some(Duration::from_millis(300))
    );
    assert_eq!(
        c.request_read_timeout(),
        Duration::from_millis(300),
        "no longer than an idle connection lives"
    );
    c.set("connections.max.idle.ms", "-1")
        .expect("Kafka's 'never'");
    assert_eq!(c.connection_idle_timeout(), None);
    assert_eq!(c.request_read_timeout(), Duration::from_secs(30));
    assert!(c.set("connections.max.idle.ms", "0").is_err());
    c.set("ringbroker.request.read.timeout.ms", "5000")
        .expect("valid");
    assert_eq!(c.request_read_timeout(), Duration::from_secs(5));
    assert!(c.set("ringbroker.request.read.timeout.ms", "0").is_err());
}

#[test]
fn checkpoint_interval_defaults_to_kafkas_and_parses() {
    let mut c = BrokerConfig::default();
    assert_eq!(c.checkpoint_interval_ms, 60_000, "Kafka's default");
    c.set("log.flush.offset.checkpoint.interval.ms", "5000")
        .expect("valid");
    assert_eq!(c.checkpoint_interval_ms, 5000);
    assert!(c
        .set("log.flush.offset.checkpoint.interval.ms", "0")
        .is_err());
}

#[test]
fn high_watermark_checkpoint_interval_defaults_to_kafkas_and_parses() {
    let mut c = BrokerConfig::default();
    assert_eq!(c.hw_checkpoint_interval_ms, 5000, "Kafka's default");
    c.set("replica.high.watermark.checkpoint.interval.ms", "250")
        .expect("valid");
    assert_eq!(c.hw_checkpoint_interval_ms, 250);
    assert!(c
        .set("replica.high.watermark.checkpoint.interval.ms", "-1")
        .is_err());
}

/// Kafka's KRaft names are accepted; the client listener is the first one that is not a
/// controller listener, and the whole set reaches `controller::kraft_config`.
#[test]
fn kraft_properties_are_accepted_and_parsed_together() {
    let mut c = BrokerConfig::default();
    assert!(!c.is_cluster_mode());
    c.set("node.id", "2").expect("node.id");
    c.set(
        "listeners",
        "CONTROLLER://127.0.0.1:29092,PLAINTEXT://127.0.0.1:19092",
    )
    .expect("listeners");
    assert_eq!(
        c.listen.port(),
        19092,
        "the client listener, not CONTROLLER"
    );
    assert_eq!(c.advertised_port, 19092);
    c.set(
        "controller.quorum.voters",
        "1@127.0.0.1:29091,2@127.0.0.1:29092",
    )
    .expect("voters");
    c.set("broker.session.timeout.ms", "3000").expect("session");
    c.set("broker.rack", "r1").expect("rack");
    assert!(c.is_cluster_mode());
    assert!(c.set("broker.heartbeat.interval.ms", "-5").is_err());
    let kraft =
        crate::controller::kraft_config::KraftConfig::from_properties(&c.cluster_properties())
            .expect("valid")
            .expect("cluster mode");
    assert_eq!(kraft.node_id.0, 2);
    assert!(kraft.roles.controller && kraft.roles.broker);
    assert_eq!(kraft.session_timeout_ms, 3000);
    assert_eq!(kraft.rack.as_deref(), Some("r1"));
    assert_eq!(kraft.advertised_listeners.len(), 1);
    // Empty means unset: back to single node.
    c.set("controller.quorum.voters", "").expect("unset");
    assert!(!c.is_cluster_mode());
}

/// `serve --listen` replaces the client listener only: the CONTROLLER listener of a cluster
/// node stays (it used to replace the whole list, and the voter then had none).
#[test]
fn listen_flag_keeps_the_controller_listener() {
    let mut c = BrokerConfig::default();
    c.set(
        "listeners",
        "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:29092",
    )
    .expect("listeners");
    c.set_client_listener("127.0.0.1:18000").expect("listen");
    assert_eq!(c.listen.port(), 18000);
    assert_eq!(
        c.cluster_listeners("listeners").as_deref(),
        Some("PLAINTEXT://127.0.0.1:18000,CONTROLLER://127.0.0.1:29092")
    );
    let kraft = crate::controller::kraft_config::parse_listeners(
        "listeners",
        &c.cluster_listeners("listeners").expect("set"),
    )
    .expect("KRaft syntax");
    assert_eq!(kraft.len(), 2);
    // Single node, nothing else named: the flag is the whole list, as before.
    let mut single = BrokerConfig::default();
    single
        .set_client_listener("127.0.0.1:9001")
        .expect("listen");
    assert_eq!(
        single.cluster_listeners("listeners").as_deref(),
        Some("127.0.0.1:9001")
    );
    assert_eq!(single.listen.port(), 9001);
}

/// Every property reads back what it was set to, and its name and aliases mark it as set.
#[test]
fn every_listed_property_is_settable_and_round_trips() {
    let defaults = BrokerConfig::default();
    for p in BROKER_PROPERTIES {
        let mut c = BrokerConfig::default();
        let value = (p.get)(&defaults);
        c.set(p.name, &value)
            .unwrap_or_else(|e| panic!("{} = {value:?}: {e}", p.name));
        assert_eq!((p.get)(&c), value, "{} round trip", p.name);
        assert!(c.is_explicit(p.name), "{}", p.name);
        for alias in p.aliases.iter().map(|a| a.name) {
            let mut c = BrokerConfig::default();
            c.set(alias, "1")
                .unwrap_or_else(|e| panic!("alias {alias}: {e}"));
            assert!(c.is_explicit(p.name), "{alias} marks {}", p.name);
        }
    }
}

#[test]
fn names_are_sorted_and_unique() {
    let mut all: Vec<&str> = BROKER_PROPERTIES
        .iter()
        .flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().map(|a| a.name)))
        .collect();
    let names: Vec<&str> = BROKER_PROPERTIES.iter().map(|p| p.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "keep the table sorted");
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a name or alias appears twice");
}

/// A fixed default in the table is what `BrokerConfig::default()` holds, and a valid value.
#[test]
fn table_defaults_are_the_config_defaults() {
    let defaults = BrokerConfig::default();
    for p in BROKER_PROPERTIES {
        if let DefaultValue::Fixed(v) = p.default {
            assert_eq!((p.get)(&defaults), v, "{}", p.name);
            let mut c = BrokerConfig::default();
            c.set(p.name, v)
                .unwrap_or_else(|e| panic!("{} = {v:?}: {e}", p.name));
        }
    }
}

/// Kafka's update modes for the properties it makes dynamic; the rest are read-only.
#[test]
fn update_modes_follow_kafka() {
    let mode = |name: &str| broker_property(name).map(|p| p.scope);
    assert_eq!(mode("listeners"), Some(Scope::PerBroker));
    assert_eq!(mode("log.retention.hours"), Some(Scope::ClusterWide));
    assert_eq!(mode("max.connections"), Some(Scope::ClusterWide));
    assert_eq!(mode("num.partitions"), Some(Scope::ReadOnly));
    assert_eq!(mode("log.dirs"), Some(Scope::ReadOnly));
}

/// A broker property that is a topic default (Kafka's synonym) reads what topics inherit:
/// the two tables agree on its value, before and after it is set.
#[test]
fn broker_synonyms_of_topic_properties_agree_with_the_topic_table() {
    let mut c = BrokerConfig::default();
    c.set("log.retention.hours", "3").expect("valid");
    c.set("message.max.bytes", "4096").expect("valid");
    let mut paired = 0;
    for t in TOPIC_PROPERTIES {
        let Some(b) = t.broker_name.and_then(broker_property) else {
            continue;
        };
        paired += 1;
        for config in [&BrokerConfig::default(), &c] {
            let inherited = t.value(&config.log_defaults, &BTreeMap::new());
            assert_eq!((b.get)(config), inherited, "{} / {}", b.name, t.name);
        }
    }
    assert!(paired >= 9, "{paired}");
}
