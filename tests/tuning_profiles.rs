//! The broker profiles in tuning/profiles/ are config files `serve --config` accepts: every
//! one parses with `BrokerConfig::from_file` and says what its comments promise.

use std::path::{Path, PathBuf};

use ringbroker::config::BrokerConfig;

fn profiles_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tuning/profiles")
}

fn load(name: &str) -> BrokerConfig {
    let path = profiles_dir().join(name);
    BrokerConfig::from_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_profile_parses() {
    let mut names: Vec<String> = std::fs::read_dir(profiles_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["durability.toml", "low-latency.toml", "throughput.toml"]
    );
    for name in &names {
        let c = load(name);
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/ringbroker"), "{name}");
        assert!(c.pin_shards, "{name}");
    }
}

#[test]
fn profiles_say_what_they_promise() {
    let throughput = load("throughput.toml");
    assert!(!throughput.fsync_on_acks_all);
    assert_eq!(throughput.log_defaults.flush_ms, i64::MAX);
    assert_eq!(throughput.log_defaults.segment_bytes, 1 << 30);

    let latency = load("low-latency.toml");
    assert!(!latency.fsync_on_acks_all);
    assert_eq!(latency.group.initial_rebalance_delay_ms, 0);

    let durable = load("durability.toml");
    assert!(durable.fsync_on_acks_all);
    assert_eq!(durable.log_defaults.flush_ms, 1000);
}
