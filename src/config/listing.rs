//! `serve --check-config`: every broker property with its effective value and whether it was
//! set, as a config file with the same effect.

use std::fmt::Write as _;

use super::broker_config::BrokerConfig;
use super::broker_properties::BROKER_PROPERTIES;

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
                value: (p.get)(self),
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

#[cfg(test)]
mod tests {
    use super::*;

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
