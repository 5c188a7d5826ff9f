//! docs/configuration.md, rendered from the two property tables: what a reader of the docs
//! sees is what the broker accepts. `ringbroker config-reference` prints it; a test fails
//! when the committed file differs.

use std::fmt::Write as _;

use super::broker_properties::{broker_property, BROKER_PROPERTIES};
use super::broker_property::{BrokerKind, BrokerProperty, DefaultValue, Scope};
use super::property_kind::{TYPE_BOOLEAN, TYPE_DOUBLE, TYPE_INT, TYPE_LIST, TYPE_LONG};
use super::topic_properties::{Effect, TOPIC_PROPERTIES};

/// Where the rendered reference is committed, from the repository root.
pub const REFERENCE_PATH: &str = "docs/configuration.md";

/// The whole reference, as Markdown.
pub fn render() -> String {
    let mut out = String::new();
    out.push_str(
        "# Configuration reference\n\n\
         <!-- Generated from src/config/broker_properties.rs and \
         src/config/topic_properties.rs: do not edit by hand, run\n     \
         `cargo run -- config-reference > docs/configuration.md` -->\n\n\
         ringbroker takes Kafka's property names. Broker properties are set in the TOML config \
         file (`serve --config`, quoted or dotted keys) or with `serve --set NAME=VALUE`; \
         `serve --check-config` lists every one with its effective value. Topic properties are \
         set with CreateTopics, AlterConfigs or IncrementalAlterConfigs (`ringbroker topic \
         create -c`, `ringbroker topic alter-config`, `kafka-configs.sh`).\n\n",
    );
    broker_section(&mut out);
    topic_section(&mut out);
    out
}

fn broker_section(out: &mut String) {
    out.push_str(
        "## Broker properties\n\n\
         *Update mode*: `read-only` is read at start-up (change it in the config file and \
         restart); `cluster-wide` can be altered while the broker runs, as the cluster-wide \
         default (`kafka-configs.sh --entity-type brokers --entity-default --alter`) or for one \
         broker (`--entity-name <id>`). Where Kafka alters a property at runtime but ringbroker \
         does not yet, the mode says so. A default that is not a plain value says how it is \
         worked out.\n\n\
         | Name | Type | Default | Valid values | Update mode | Description |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for p in BROKER_PROPERTIES {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} |",
            p.name,
            type_name(p.kind.config_type()),
            broker_default(p),
            cell(&range(p.kind)),
            update_mode(p),
            cell(&broker_doc(p)),
        );
    }
    out.push('\n');
}

fn topic_section(out: &mut String) {
    out.push_str(
        "## Topic properties\n\n\
         Every topic property can be set per topic at creation and altered at runtime. \
         *Broker default* names the broker property that sets the default for topics without \
         an override (Kafka's synonym; see above). *Here* says what ringbroker does with it.\n\n\
         | Name | Type | Default | Broker default | Here | Description |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for p in TOPIC_PROPERTIES {
        let here = match p.effect {
            Effect::Applied => "applied".to_string(),
            Effect::Stored(what) => format!("stored, {what}"),
            Effect::NoEffect(why) => format!("no effect: {why}"),
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} |",
            p.name,
            type_name(p.kind.config_type()),
            code(p.default),
            p.broker_name.map_or_else(String::new, broker_synonym),
            cell(&here),
            cell(p.doc),
        );
    }
}

/// Kafka's update mode where ringbroker applies the property while running; otherwise
/// read-only, with Kafka's mode beside it when that differs.
fn update_mode(p: &BrokerProperty) -> String {
    match p.scope {
        Scope::ReadOnly => "read-only".to_string(),
        scope if p.runtime => scope.as_str().to_string(),
        scope => format!("read-only (Kafka: {})", scope.as_str()),
    }
}

/// A topic property's broker synonym; Kafka's name is shown even where ringbroker has no
/// such broker property (yet), so that it says so.
fn broker_synonym(name: &str) -> String {
    if broker_property(name).is_some() {
        code(name)
    } else {
        format!(
            "{} (Kafka's; not a broker property here: the default is fixed)",
            code(name)
        )
    }
}

fn broker_default(p: &BrokerProperty) -> String {
    match p.default {
        DefaultValue::Fixed(v) => code(v),
        DefaultValue::Derived(how) => cell(how),
    }
}

/// The doc, with the other names the property is set by.
fn broker_doc(p: &BrokerProperty) -> String {
    let mut doc = p.doc.to_string();
    for a in p.aliases {
        let unit = match a.factor {
            1 => String::new(),
            60_000 => " (in minutes)".to_string(),
            3_600_000 => " (in hours)".to_string(),
            n => format!(" (times {n})"),
        };
        let _ = write!(doc, " Also set by `{}`{unit}.", a.name);
    }
    doc
}

/// Kafka's notation for a range: `[1,...]`, `[0,...,100]`; empty for any value.
fn range(kind: BrokerKind) -> String {
    let (min, max) = match kind {
        BrokerKind::Int { min, max } | BrokerKind::Long { min, max } => (min, max),
        BrokerKind::Bool | BrokerKind::Text | BrokerKind::List => return String::new(),
    };
    match (min, max) {
        (i64::MIN, i64::MAX) => String::new(),
        (min, i64::MAX) => format!("[{min},...]"),
        (min, max) => format!("[{min},...,{max}]"),
    }
}

/// Kafka's documentation names of the DescribeConfigs types.
fn type_name(config_type: i8) -> &'static str {
    match config_type {
        TYPE_BOOLEAN => "boolean",
        TYPE_INT => "int",
        TYPE_LONG => "long",
        TYPE_DOUBLE => "double",
        TYPE_LIST => "list",
        _ => "string",
    }
}

/// A value in code style; an empty one is shown as such.
fn code(v: &str) -> String {
    if v.is_empty() {
        "(empty)".to_string()
    } else {
        format!("`{}`", v.replace('|', "\\|"))
    }
}

/// Text that is safe inside a table cell.
fn cell(v: &str) -> String {
    v.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed reference is what the tables render: a property added, renamed or
    /// re-documented without regenerating the file fails here.
    #[test]
    fn committed_reference_matches_the_tables() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(REFERENCE_PATH);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == render(),
            "{REFERENCE_PATH} is not what the property tables generate; regenerate it with \
             `cargo run -- config-reference > {REFERENCE_PATH}` and commit it"
        );
    }

    #[test]
    fn every_property_of_both_tables_is_in_the_reference() {
        let text = render();
        for name in BROKER_PROPERTIES
            .iter()
            .map(|p| p.name)
            .chain(TOPIC_PROPERTIES.iter().map(|p| p.name))
        {
            assert!(text.contains(&format!("| `{name}` |")), "{name}");
        }
    }
}
