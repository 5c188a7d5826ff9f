//! The broker resource of AlterConfigs and IncrementalAlterConfigs: dynamic broker configs
//! (Kafka's `kafka-configs --entity-type brokers [--entity-default] --alter`). The override
//! set of the resource ("" for the cluster-wide defaults, or this broker's id) is replaced
//! through shard 0, which checks it against the broker property table, stores it with the
//! metadata and hands it to every shard; each applies it to its open logs.

use std::collections::BTreeMap;

use crate::config::BrokerConfig;
use crate::protocol::ResponseError;
use crate::shard::messages::AdminOp;

use super::config_resource::Failure;
use super::Request;

/// Refuses a broker resource name other than "" (the cluster-wide defaults) or this
/// broker's id, with Kafka's message.
pub(super) fn check_broker_resource(config: &BrokerConfig, name: &str) -> Result<(), Failure> {
    if name.is_empty() || name.parse::<i32>().ok() == Some(config.node_id) {
        return Ok(());
    }
    Err((
        ResponseError::InvalidRequest.code(),
        format!(
            "unexpected broker id, expected {} or empty string, but received {name}",
            config.node_id
        ),
    ))
}

/// The dynamic overrides the broker resource `name` holds now.
pub(super) fn existing_broker_configs(
    req: &Request<'_>,
    name: &str,
) -> Result<BTreeMap<String, String>, Failure> {
    check_broker_resource(req.config(), name)?;
    Ok(req
        .image()
        .broker_configs()
        .get(name)
        .cloned()
        .unwrap_or_default())
}

/// Replaces the overrides of the broker resource `name` (validated by shard 0).
pub(super) async fn apply_broker_configs(
    req: &Request<'_>,
    name: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), Failure> {
    check_broker_resource(req.config(), name)?;
    let summary = format!("{configs:?}");
    req.admin(AdminOp::SetBrokerConfigs {
        resource: name.to_string(),
        configs,
        validate_only,
    })
    .await
    .map_err(|e| (e.code, e.message))?;
    if !validate_only {
        tracing::info!(resource = %name, configs = %summary, "altered dynamic broker configs");
    }
    Ok(())
}
