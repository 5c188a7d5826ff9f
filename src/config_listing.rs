//! The broker properties by Kafka name, with their effective values: the one table that
//! [`BrokerConfig::set`] accepts names from and that `serve --check-config` prints, so the
//! two cannot drift (a name missing from the table is refused by `set`; a name in the table
//! that `set` does not handle fails the tests below).

use std::fmt::Write as _;

use crate::config::BrokerConfig;
use crate::protocol::record_batch::TimestampType;

/// One broker property.
pub struct BrokerProperty {
    /// The Kafka name, as listed.
    pub name: &'static str,
    /// Other names `set` accepts for it (Kafka's older names and other units); they set the
    /// same value and are not listed separately.
    pub aliases: &'static [&'static str],
    /// The effective value, in a form `set` accepts back.
    pub value: fn(&BrokerConfig) -> String,
}

macro_rules! prop {
    ($name:literal, |$c:ident| $value:expr) => {
        prop!($name, &[], |$c| $value)
    };
    ($name:literal, $aliases:expr, |$c:ident| $value:expr) => {
        BrokerProperty {
            name: $name,
            aliases: $aliases,
            value: |$c: &BrokerConfig| $value,
        }
    };
}

/// Every broker property, sorted by name.
pub const BROKER_PROPERTIES: &[BrokerProperty] = &[
    prop!("advertised.listeners", |c| c
        .cluster_listeners("advertised.listeners")
        .unwrap_or_else(|| format!(
            "PLAINTEXT://{}:{}",
            bracket_ipv6(&c.advertised_host),
            c.advertised_port
        ))),
    prop!("auto.create.topics.enable", |c| c
        .auto_create_topics
        .to_string()),
    prop!("broker.heartbeat.interval.ms", |c| c
        .cluster_property("broker.heartbeat.interval.ms")),
    prop!("broker.rack", |c| c.cluster_property("broker.rack")),
    prop!("broker.session.timeout.ms", |c| c
        .cluster_property("broker.session.timeout.ms")),
    prop!("cluster.id", |c| c.cluster_property("cluster.id")),
    prop!("connections.max.idle.ms", |c| c
        .connections_max_idle_ms
        .to_string()),
    prop!("controller.listener.names", |c| c
        .cluster_property("controller.listener.names")),
    prop!("controller.quorum.election.timeout.ms", |c| c
        .cluster_property("controller.quorum.election.timeout.ms")),
    prop!("controller.quorum.voters", |c| c
        .cluster_property("controller.quorum.voters")),
    prop!("default.replication.factor", |c| c
        .cluster_property("default.replication.factor")),
    prop!("fetch.max.bytes", |c| c.fetch_max_bytes.to_string()),
    prop!("group.initial.rebalance.delay.ms", |c| c
        .group
        .initial_rebalance_delay_ms
        .to_string()),
    prop!("group.max.session.timeout.ms", |c| c
        .group
        .max_session_timeout_ms
        .to_string()),
    prop!("group.max.size", |c| c.group.max_size.to_string()),
    prop!("group.min.session.timeout.ms", |c| c
        .group
        .min_session_timeout_ms
        .to_string()),
    prop!("listeners", |c| c
        .cluster_listeners("listeners")
        .unwrap_or_else(|| format!("PLAINTEXT://{}", c.listen))),
    prop!("log.dirs", &["log.dir"], |c| c
        .data_dir
        .display()
        .to_string()),
    prop!("log.flush.interval.messages", |c| {
        // u64::MAX means "never" (Kafka's Long.MAX_VALUE), which is what `set` accepts.
        i64::try_from(c.log_defaults.flush_messages)
            .unwrap_or(i64::MAX)
            .to_string()
    }),
    prop!("log.flush.interval.ms", |c| c
        .log_defaults
        .flush_ms
        .to_string()),
    prop!("log.flush.offset.checkpoint.interval.ms", |c| c
        .checkpoint_interval_ms
        .to_string()),
    prop!("log.index.interval.bytes", |c| c
        .log_defaults
        .index_interval_bytes
        .to_string()),
    prop!(
        "log.message.timestamp.type",
        |c| match c.log_defaults.message_timestamp_type {
            TimestampType::CreateTime => "CreateTime".to_string(),
            TimestampType::LogAppendTime => "LogAppendTime".to_string(),
        }
    ),
    prop!("log.retention.bytes", |c| c
        .log_defaults
        .retention_bytes
        .to_string()),
    prop!(
        "log.retention.ms",
        &["log.retention.minutes", "log.retention.hours"],
        |c| c.log_defaults.retention_ms.to_string()
    ),
    prop!("log.roll.ms", &["log.roll.hours"], |c| c
        .log_defaults
        .segment_ms
        .to_string()),
    prop!("log.segment.bytes", |c| c
        .log_defaults
        .segment_bytes
        .to_string()),
    prop!("max.connections", |c| c.max_connections.to_string()),
    prop!("max.connections.per.ip", |c| c
        .max_connections_per_ip
        .to_string()),
    prop!("max.connections.per.ip.overrides", |c| c
        .max_connections_per_ip_overrides
        .iter()
        .map(|(ip, n)| format!("{}:{n}", bracket_ipv6(&ip.to_string())))
        .collect::<Vec<_>>()
        .join(",")),
    prop!("max.incremental.fetch.session.cache.slots", |c| c
        .fetch_session_cache_slots
        .to_string()),
    prop!("message.max.bytes", |c| c.message_max_bytes.to_string()),
    prop!("node.id", &["broker.id"], |c| c.node_id.to_string()),
    prop!("num.partitions", |c| c.num_partitions.to_string()),
    prop!("num.shards", |c| c.shards.to_string()),
    prop!("offsets.retention.minutes", |c| (c
        .group
        .offsets_retention_ms
        / 60_000)
        .to_string()),
    prop!("offsets.topic.num.partitions", |c| c
        .group
        .offsets_partitions
        .to_string()),
    prop!("offsets.topic.replication.factor", |c| c
        .cluster_property("offsets.topic.replication.factor")),
    prop!("process.roles", |c| c.cluster_property("process.roles")),
    prop!("producer.id.expiration.ms", |c| c
        .producer_id_expiration_ms
        .to_string()),
    prop!("queued.max.request.bytes", |c| c.queued_max_request_bytes()),
    prop!("replica.fetch.max.bytes", |c| c
        .cluster_property("replica.fetch.max.bytes")),
    prop!("replica.fetch.response.max.bytes", |c| c
        .cluster_property("replica.fetch.response.max.bytes")),
    prop!("replica.fetch.wait.max.ms", |c| c
        .cluster_property("replica.fetch.wait.max.ms")),
    prop!("replica.high.watermark.checkpoint.interval.ms", |c| c
        .hw_checkpoint_interval_ms
        .to_string()),
    prop!("replica.lag.time.max.ms", |c| c
        .cluster_property("replica.lag.time.max.ms")),
    prop!("ringbroker.acks.all.fsync", |c| c
        .fsync_on_acks_all
        .to_string()),
    prop!("ringbroker.disk.free.warn.bytes", |c| c
        .disk_free_warn_bytes
        .to_string()),
    prop!("ringbroker.disk.free.warn.percent", |c| c
        .disk_free_warn_percent
        .to_string()),
    prop!("ringbroker.log.io", |c| log_io_name(c.log_defaults.io)
        .to_string()),
    prop!("ringbroker.log.slow.fsync.warn.ms", |c| c
        .slow_fsync_warn_ms
        .to_string()),
    prop!("ringbroker.log.tail.cache.bytes", |c| c
        .tail_cache_bytes
        .to_string()),
    prop!("ringbroker.metrics.listen", |c| c
        .metrics_listen
        .map_or_else(|| "none".to_string(), |a| a.to_string())),
    prop!("ringbroker.pin.shards", |c| c.pin_shards.to_string()),
    prop!("ringbroker.produce.memory.max.bytes", |c| c
        .produce_memory_limit()
        .to_string()),
    prop!("ringbroker.request.read.timeout.ms", |c| c
        .request_read_timeout_ms
        .to_string()),
    prop!("ringbroker.shutdown.timeout.ms", |c| c
        .shutdown_timeout_ms
        .to_string()),
    prop!("socket.request.max.bytes", |c| c
        .socket_request_max_bytes
        .to_string()),
];

/// The listed name of a property given by its name or an alias; `None` if unknown.
pub fn canonical_name(name: &str) -> Option<&'static str> {
    BROKER_PROPERTIES
        .iter()
        .find(|p| p.name == name || p.aliases.contains(&name))
        .map(|p| p.name)
}

/// One line of `--check-config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveProperty {
    pub name: &'static str,
    pub value: String,
    /// Set in the file, with `--set` or a flag, rather than left at its default.
    pub explicit: bool,
}

impl BrokerConfig {
    /// Every property with its effective value, sorted by name.
    pub fn effective_properties(&self) -> Vec<EffectiveProperty> {
        let mut list: Vec<EffectiveProperty> = BROKER_PROPERTIES
            .iter()
            .map(|p| EffectiveProperty {
                name: p.name,
                value: (p.value)(self),
                explicit: self.is_explicit(p.name),
            })
            .collect();
        list.sort_by_key(|p| p.name);
        list
    }
}

/// The listing as text: `"name" = "value"  # set|default`, aligned. Keys are quoted (as
/// dotted keys `max.connections` and `max.connections.per.ip` would clash as TOML tables),
/// so the output is a valid config file with the same effect.
pub fn render(list: &[EffectiveProperty]) -> String {
    let width = list.iter().map(|p| p.name.len() + 2).max().unwrap_or(0);
    let mut out = String::new();
    for p in list {
        let key = format!("\"{}\"", p.name);
        let value = toml::Value::String(p.value.clone()).to_string();
        let origin = if p.explicit { "set" } else { "default" };
        let _ = writeln!(out, "{key:<width$} = {value}  # {origin}");
    }
    out
}

fn bracket_ipv6(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// The value of `ringbroker.log.io` as written in a config file.
pub fn log_io_name(io: crate::runtime::FileIo) -> &'static str {
    match io {
        crate::runtime::FileIo::Direct => "direct",
        crate::runtime::FileIo::Buffered => "buffered",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed name (and alias) is handled by `set`: a name without its arm in `set`
    /// would be refused as unknown here.
    #[test]
    fn every_listed_property_is_settable_and_round_trips() {
        let defaults = BrokerConfig::default();
        for p in BROKER_PROPERTIES {
            let mut c = BrokerConfig::default();
            let value = (p.value)(&defaults);
            c.set(p.name, &value)
                .unwrap_or_else(|e| panic!("{} = {value:?}: {e}", p.name));
            assert_eq!((p.value)(&c), value, "{} round trip", p.name);
            assert!(c.is_explicit(p.name), "{}", p.name);
            for alias in p.aliases {
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
            .flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()))
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

    #[test]
    fn unknown_names_are_refused_and_listing_marks_explicit_ones() {
        let mut c = BrokerConfig::default();
        assert!(c.set("log.retention.msec", "1").is_err());
        c.set("log.retention.hours", "2").expect("valid");
        c.set_data_dir("/srv/rb".into());
        let list = c.effective_properties();
        let get = |name: &str| list.iter().find(|p| p.name == name).cloned();
        let retention = get("log.retention.ms").expect("listed");
        assert_eq!(
            (retention.value.as_str(), retention.explicit),
            ("7200000", true)
        );
        assert_eq!(get("log.dirs").map(|p| p.explicit), Some(true));
        assert_eq!(get("num.partitions").map(|p| p.explicit), Some(false));
        assert_eq!(list.len(), BROKER_PROPERTIES.len());
    }

    /// The rendered listing is itself a config file that reproduces the same settings.
    #[test]
    fn rendered_listing_reads_back_as_toml() {
        let mut c = BrokerConfig::default();
        c.set("num.partitions", "7").expect("valid");
        c.set("ringbroker.metrics.listen", "none").expect("valid");
        let text = render(&c.effective_properties());
        assert!(text.contains("num.partitions"), "{text}");
        let mut back = BrokerConfig::default();
        back.apply_toml(&text).expect("listing parses as a config");
        assert_eq!(back.effective_properties().len(), BROKER_PROPERTIES.len());
        let values = |c: &BrokerConfig| {
            c.effective_properties()
                .into_iter()
                .map(|p| (p.name, p.value))
                .collect::<Vec<_>>()
        };
        assert_eq!(values(&back), values(&c));
    }
}
