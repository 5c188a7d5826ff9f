//! Broker configuration: a TOML file (`BrokerConfig::apply_toml`), one `--set NAME=VALUE`
//! (`BrokerConfig::set`), and topic properties from CreateTopics/AlterConfigs requests
//! (`topic_log_config`, reachable from the network).
//!
//! Input: `[mode, text...]`; mode bit 0 and 1 pick TOML, broker `set` or topic property; for the
//! last two the text is `NAME=VALUE`. A value that is accepted must leave the properties the
//! parser requires to be positive positive (a wrapped cast would not).
//!
//! `listeners` resolves its host (getaddrinfo): TOML documents that mention it are skipped and
//! `set listeners` is tried only with an IP-literal host, so the fuzzer never waits on DNS.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;

use ringbroker::config::{topic_log_config, BrokerConfig};
use ringbroker::log::LogConfig;

#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

/// Whether `host:port` (optionally `scheme://`, `[v6]`, comma-separated) names its host by IP.
fn host_is_ip_literal(value: &str) -> bool {
    let first = value.split(',').next().unwrap_or("").trim();
    let without_scheme = first.split_once("://").map_or(first, |(_, rest)| rest);
    let host = without_scheme
        .rsplit_once(':')
        .map_or(without_scheme, |(host, _)| host)
        .trim_matches(['[', ']']);
    host.is_empty() || host.parse::<std::net::IpAddr>().is_ok()
}

fn check(config: &BrokerConfig) {
    assert!(config.shards >= 1, "num.shards {}", config.shards);
    assert!(
        config.num_partitions >= 1,
        "num.partitions {}",
        config.num_partitions
    );
    assert!(config.group.offsets_partitions >= 1);
    assert!(config.log_defaults.segment_ms >= 1);
}

fuzz_target!(|input: &[u8]| {
    let [mode, rest @ ..] = input else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let mut config = BrokerConfig::default();
    match mode % 3 {
        0 => {
            if text.contains("listeners") {
                return;
            }
            if config.apply_toml(text).is_ok() {
                check(&config);
            }
        }
        1 => {
            let Some((name, value)) = text.split_once('=') else {
                return;
            };
            if name.trim() == "listeners" && !host_is_ip_literal(value) {
                return;
            }
            if config.set(name.trim(), value.trim()).is_ok() {
                check(&config);
            }
        }
        _ => {
            let Some((name, value)) = text.split_once('=') else {
                return;
            };
            let overrides = BTreeMap::from([(name.to_string(), value.to_string())]);
            if let Ok(log) = topic_log_config(&LogConfig::default(), &overrides) {
                assert!(log.segment_ms >= 1 && log.flush_messages >= 1);
            }
        }
    }
});
