//! Setting properties by Kafka name: from a TOML file, `--set NAME=VALUE` and the `serve`
//! flags, each through the broker property table.
//!
//! A TOML file may spell a property as a quoted key (`"log.dirs" = "/data"`) or as a dotted key
//! (`log.dirs = "/data"`, which TOML reads as nested tables): both are flattened back to the
//! Kafka name. Unknown properties are an error, so a typo does not silently fall back to a
//! default.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::broker_config::BrokerConfig;
use super::broker_properties::broker_property;
use super::error::ConfigError;

impl BrokerConfig {
    /// Reads a TOML file of Kafka properties on top of the defaults.
    pub fn from_file(path: &Path) -> Result<BrokerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = BrokerConfig::default();
        config.apply_toml(&text).map_err(|e| match e {
            ConfigError::Toml { message, .. } => ConfigError::Toml {
                path: path.to_path_buf(),
                message,
            },
            other => other,
        })?;
        Ok(config)
    }

    /// Applies the properties of a TOML document.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Toml {
                path: PathBuf::new(),
                message: e.to_string(),
            })?;
        let mut flat = BTreeMap::new();
        flatten("", &toml::Value::Table(table), &mut flat);
        for (name, value) in flat {
            self.set(&name, &value)?;
        }
        Ok(())
    }

    /// Sets one property from its string form (as in server.properties): a name (or alias)
    /// of the broker property table, so that every settable property is also listed by
    /// `serve --check-config` and described by DescribeConfigs.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let prop =
            broker_property(name).ok_or_else(|| ConfigError::UnknownProperty(name.to_string()))?;
        prop.set_from(self, name, value)
            .map_err(|reason| ConfigError::BadValue {
                name: name.to_string(),
                reason,
            })?;
        self.explicit.insert(prop.name);
        Ok(())
    }

    /// Sets the client listener (`serve --listen`): the controller listeners named in
    /// `listeners` stay, every other entry gives way to `addr`.
    pub fn set_client_listener(&mut self, addr: &str) -> Result<(), ConfigError> {
        let value = self.listeners_with_client(addr);
        self.set("listeners", &value)
    }
}

fn flatten(prefix: &str, value: &toml::Value, out: &mut BTreeMap<String, String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&name, v, out);
            }
        }
        toml::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}
