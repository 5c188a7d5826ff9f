//! Dynamic broker configs (Kafka's `kafka-configs --entity-type brokers --alter`): which
//! overrides a broker resource may hold, and the broker config with them applied. What may
//! change follows the broker property table: Kafka's update mode, and whether ringbroker
//! applies the property while running.

use std::collections::BTreeMap;

use super::broker_config::BrokerConfig;
use super::broker_properties::broker_property;
use super::broker_property::Scope;

/// Why a set of dynamic broker configs is refused. Kafka answers the first three with
/// INVALID_REQUEST and a bad value with INVALID_CONFIG.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DynamicConfigError {
    #[error("Unknown broker config name: {0}")]
    Unknown(String),
    #[error("Cannot update these configs dynamically: {}", .0.join(", "))]
    ReadOnly(Vec<String>),
    #[error(
        "Cannot update these configs at default cluster level, broker id must be specified: {}",
        .0.join(", ")
    )]
    PerBrokerOnly(Vec<String>),
    #[error(
        "ringbroker does not apply these configs while running yet (set them in the config \
         file or with --set and restart): {}",
        .0.join(", ")
    )]
    NotApplied(Vec<String>),
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        name: String,
        value: String,
        reason: String,
    },
}

/// Checks the complete override set of one broker resource: `cluster_default` for the
/// cluster-wide defaults (empty resource name), otherwise one broker's.
pub fn validate_dynamic(
    base: &BrokerConfig,
    configs: &BTreeMap<String, String>,
    cluster_default: bool,
) -> Result<(), DynamicConfigError> {
    let mut read_only = Vec::new();
    let mut per_broker = Vec::new();
    let mut not_applied = Vec::new();
    for name in configs.keys() {
        let prop =
            broker_property(name).ok_or_else(|| DynamicConfigError::Unknown(name.clone()))?;
        match prop.scope {
            Scope::ReadOnly => read_only.push(name.clone()),
            Scope::PerBroker if cluster_default => per_broker.push(name.clone()),
            _ if !prop.runtime => not_applied.push(name.clone()),
            _ => {}
        }
    }
    if !read_only.is_empty() {
        return Err(DynamicConfigError::ReadOnly(read_only));
    }
    if !per_broker.is_empty() {
        return Err(DynamicConfigError::PerBrokerOnly(per_broker));
    }
    if !not_applied.is_empty() {
        return Err(DynamicConfigError::NotApplied(not_applied));
    }
    let mut scratch = base.clone();
    for (name, value) in configs {
        if let Some(prop) = broker_property(name) {
            prop.set_from(&mut scratch, name, value).map_err(|reason| {
                DynamicConfigError::Invalid {
                    name: name.clone(),
                    value: value.clone(),
                    reason,
                }
            })?;
        }
    }
    Ok(())
}

impl BrokerConfig {
    /// This config with dynamic overrides applied, weakest layer first (the cluster-wide
    /// defaults, then the broker's own). Within a layer names apply in sorted order, which
    /// is also Kafka's precedence of the unit aliases: `log.retention.ms` over `.minutes`
    /// over `.hours`.
    pub fn with_dynamic(&self, layers: &[Option<&BTreeMap<String, String>>]) -> BrokerConfig {
        let mut c = self.clone();
        for (name, value) in layers.iter().flatten().flat_map(|l| l.iter()) {
            let applied = broker_property(name)
                .ok_or_else(|| "unknown property".to_string())
                .and_then(|p| p.set_from(&mut c, name, value));
            // Validated before it was stored; a later version may have dropped the name.
            if let Err(e) = applied {
                tracing::error!(property = %name, value = %value, error = %e, "dynamic broker config ignored");
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(name.to_string(), value.to_string())])
    }

    #[test]
    fn only_runtime_properties_of_the_right_scope_are_accepted() {
        let base = BrokerConfig::default();
        assert_eq!(
            validate_dynamic(&base, &one("log.retention.ms", "1000"), true),
            Ok(())
        );
        assert_eq!(
            validate_dynamic(&base, &one("log.retention.hours", "2"), false),
            Ok(())
        );
        assert!(matches!(
            validate_dynamic(&base, &one("num.partitions", "3"), false),
            Err(DynamicConfigError::ReadOnly(n)) if n == ["num.partitions"]
        ));
        assert!(matches!(
            validate_dynamic(&base, &one("listeners", "127.0.0.1:1"), true),
            Err(DynamicConfigError::PerBrokerOnly(_))
        ));
        assert!(matches!(
            validate_dynamic(&base, &one("max.connections", "10"), false),
            Err(DynamicConfigError::NotApplied(_))
        ));
        assert!(matches!(
            validate_dynamic(&base, &one("log.segment.bytes", "0"), true),
            Err(DynamicConfigError::Invalid { .. })
        ));
        assert!(matches!(
            validate_dynamic(&base, &one("no.such.thing", "0"), true),
            Err(DynamicConfigError::Unknown(_))
        ));
    }

    #[test]
    fn layers_apply_in_order_and_leave_the_static_config_alone() {
        let base = BrokerConfig::default();
        let defaults = one("log.retention.ms", "1000");
        let own = BTreeMap::from([
            ("log.retention.hours".to_string(), "1".to_string()),
            ("message.max.bytes".to_string(), "500".to_string()),
        ]);
        let c = base.with_dynamic(&[Some(&defaults), Some(&own)]);
        assert_eq!(
            c.log_defaults.retention_ms, 3_600_000,
            "the broker's own wins"
        );
        assert_eq!(c.log_defaults.max_message_bytes, 500);
        assert!(!c.is_explicit("log.retention.ms"), "dynamic is not static");
        assert_eq!(
            base.with_dynamic(&[None, None]).log_defaults,
            base.log_defaults
        );
    }
}
