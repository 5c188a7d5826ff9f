//! What one broker property is: its Kafka type and accepted range, default, documentation,
//! how Kafka lets it change at runtime, and how it reads and writes [`BrokerConfig`]. The
//! table of them is `broker_properties`.

use super::broker_config::BrokerConfig;
pub use super::property_kind::{Parsed, TYPE_BOOLEAN, TYPE_INT, TYPE_LIST, TYPE_LONG, TYPE_STRING};

/// Kafka's type for the property (what DescribeConfigs reports) and the values accepted.
///
/// The range is ringbroker's, which is at times wider than Kafka's: a value a config file
/// was accepted with before stays accepted.
#[derive(Debug, Clone, Copy)]
pub enum BrokerKind {
    /// INT (reported), any integer within [min, max].
    Int { min: i64, max: i64 },
    /// LONG (reported), any integer within [min, max].
    Long { min: i64, max: i64 },
    /// BOOLEAN: `true` or `false`.
    Bool,
    /// STRING; the setter checks its form.
    Text,
    /// LIST (comma-separated); the setter checks its items.
    List,
}

/// The ranges used most.
pub const POSITIVE: (i64, i64) = (1, i64::MAX);
pub const NON_NEGATIVE: (i64, i64) = (0, i64::MAX);
pub const ANY: (i64, i64) = (i64::MIN, i64::MAX);

impl BrokerKind {
    /// DescribeConfigs' config type.
    pub fn config_type(self) -> i8 {
        match self {
            BrokerKind::Int { .. } => TYPE_INT,
            BrokerKind::Long { .. } => TYPE_LONG,
            BrokerKind::Bool => TYPE_BOOLEAN,
            BrokerKind::Text => TYPE_STRING,
            BrokerKind::List => TYPE_LIST,
        }
    }

    /// Parses and range-checks `value`.
    pub fn parse(self, value: &str) -> Result<Parsed, String> {
        let v = value.trim();
        match self {
            BrokerKind::Int { min, max } | BrokerKind::Long { min, max } => {
                let n: i64 = v
                    .parse()
                    .map_err(|_| format!("expected an integer, got {value:?}"))?;
                check_range(n, min, max).map(Parsed::Int)
            }
            BrokerKind::Bool => match v {
                "true" => Ok(Parsed::Bool(true)),
                "false" => Ok(Parsed::Bool(false)),
                other => Err(format!("expected true or false, got {other:?}")),
            },
            BrokerKind::Text | BrokerKind::List => Ok(Parsed::Text(v.to_string())),
        }
    }
}

fn check_range(n: i64, min: i64, max: i64) -> Result<i64, String> {
    if (min..=max).contains(&n) {
        return Ok(n);
    }
    Err(match (min, max) {
        (1, _) if n < min => format!("must be positive, got {n}"),
        (0, _) if n < min => format!("must not be negative, got {n}"),
        (min, i64::MAX) => format!("must be at least {min}, got {n}"),
        (min, max) => format!("must be between {min} and {max}, got {n}"),
    })
}

/// How a property may change while the broker runs, as Kafka classifies it (the "Update
/// Mode" of Kafka's broker config reference; `DynamicBrokerConfig` in its sources).
/// ringbroker's own `ringbroker.*` properties are classified by what ringbroker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Read at start-up only: a change needs a restart.
    ReadOnly,
    /// May be altered for one broker (resource name: its id).
    PerBroker,
    /// May be altered as the cluster-wide default (empty resource name) or for one broker.
    ClusterWide,
}

impl Scope {
    /// Kafka's name for the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::ReadOnly => "read-only",
            Scope::PerBroker => "per-broker",
            Scope::ClusterWide => "cluster-wide",
        }
    }
}

/// The value a property has when nothing sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultValue {
    /// This value, in the form the getter returns (checked by the table's tests against
    /// `BrokerConfig::default()`).
    Fixed(&'static str),
    /// Worked out from the machine or from other properties; the text says how.
    Derived(&'static str),
}

/// Another name a property is set by: Kafka's older name (`broker.id`, `log.dir`) or the same
/// setting in another unit (`log.retention.hours`: the value times `factor` ms).
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    pub name: &'static str,
    /// What one unit of the alias is in the property's unit (1: the same value).
    pub factor: i64,
}

/// One broker property.
pub struct BrokerProperty {
    /// The Kafka name, as listed.
    pub name: &'static str,
    pub aliases: &'static [Alias],
    pub kind: BrokerKind,
    pub default: DefaultValue,
    pub doc: &'static str,
    pub scope: Scope,
    /// ringbroker applies a change while running (IncrementalAlterConfigs on a broker
    /// resource); only ever true of a property Kafka makes dynamic.
    pub runtime: bool,
    /// Stores a value `kind` accepted; `Err` says why the value is still wrong (a form the
    /// kind cannot check: an address, a list of directories).
    pub set: fn(&mut BrokerConfig, Parsed) -> Result<(), String>,
    /// The effective value, in a form `set` accepts back.
    pub get: fn(&BrokerConfig) -> String,
}

impl BrokerProperty {
    /// Parses `value` given under `name` (the property's name or an alias) and stores it.
    pub fn set_from(&self, c: &mut BrokerConfig, name: &str, value: &str) -> Result<(), String> {
        let mut parsed = self.kind.parse(value)?;
        let factor = self
            .aliases
            .iter()
            .find(|a| a.name == name)
            .map_or(1, |a| a.factor);
        if let (Parsed::Int(n), true) = (&parsed, factor != 1) {
            let scaled = n
                .checked_mul(factor)
                .ok_or_else(|| format!("{n} is too large"))?;
            parsed = Parsed::Int(scaled);
        }
        (self.set)(c, parsed)
    }

    /// Whether `name` is this property's name or one of its aliases.
    pub fn is_named(&self, name: &str) -> bool {
        self.name == name || self.aliases.iter().any(|a| a.name == name)
    }

    /// The default as documented: the value, or how it is worked out.
    pub fn default_text(&self) -> &'static str {
        match self.default {
            DefaultValue::Fixed(v) | DefaultValue::Derived(v) => v,
        }
    }
}
