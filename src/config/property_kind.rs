//! How a topic property's value is parsed and checked (Kafka's ConfigDef types and
//! validators), and the typed value it yields.

/// How a value is parsed and which values are valid (Kafka's ConfigDef type and validator).
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// INT within [min, max].
    Int {
        min: i64,
        max: i64,
    },
    /// LONG of at least `min`.
    Long {
        min: i64,
    },
    /// DOUBLE within [min, max].
    Double {
        min: f64,
        max: f64,
    },
    Bool,
    /// BOOLEAN that only `false` is valid for here (the feature is not available); the
    /// message says why, as Kafka's does when the broker lacks the feature.
    FalseOnly(&'static str),
    /// STRING, one of these.
    OneOf(&'static [&'static str]),
    /// LIST of these (possibly empty).
    ListOf(&'static [&'static str]),
    /// LIST of `partition:broker` pairs, or `*` (the replication throttles).
    ThrottledReplicas,
    /// STRING naming a Kafka release (`message.format.version`).
    Version,
    /// INT compression level of gzip: -1 (the codec's default) or 1 to 9.
    GzipLevel,
}

/// DescribeConfigs' config types (v3+).
pub const TYPE_BOOLEAN: i8 = 1;
pub const TYPE_STRING: i8 = 2;
pub const TYPE_INT: i8 = 3;
pub const TYPE_LONG: i8 = 5;
pub const TYPE_DOUBLE: i8 = 6;
pub const TYPE_LIST: i8 = 7;

impl Kind {
    /// The DescribeConfigs type.
    pub fn config_type(self) -> i8 {
        match self {
            Kind::Int { .. } | Kind::GzipLevel => TYPE_INT,
            Kind::Long { .. } => TYPE_LONG,
            Kind::Double { .. } => TYPE_DOUBLE,
            Kind::Bool | Kind::FalseOnly(_) => TYPE_BOOLEAN,
            Kind::OneOf(_) | Kind::Version => TYPE_STRING,
            Kind::ListOf(_) | Kind::ThrottledReplicas => TYPE_LIST,
        }
    }

    /// Parses and checks `value`, with Kafka's wording for what is wrong.
    pub fn parse(self, value: &str) -> Result<Parsed, String> {
        let v = value.trim();
        let int = |type_name: &str| {
            v.parse::<i64>()
                .map_err(|_| format!("Not a number of type {type_name}"))
        };
        match self {
            Kind::Int { min, max } => {
                let n = int("INT")?;
                if n < i64::from(i32::MIN) || n > i64::from(i32::MAX) {
                    return Err("Not a number of type INT".to_string());
                }
                in_range(n, min, max).map(Parsed::Int)
            }
            Kind::Long { min } => in_range(int("LONG")?, min, i64::MAX).map(Parsed::Int),
            Kind::GzipLevel => match int("INT")? {
                n @ (-1 | 1..=9) => Ok(Parsed::Int(n)),
                _ => Err("Value must be between 1 and 9, or -1 (the codec's default)".to_string()),
            },
            Kind::Double { min, max } => {
                let x: f64 = v
                    .parse()
                    .map_err(|_| "Not a number of type DOUBLE".to_string())?;
                if !(min..=max).contains(&x) {
                    return Err(format!("Value must be between {min} and {max}"));
                }
                Ok(Parsed::Double(x))
            }
            Kind::Bool | Kind::FalseOnly(_) => {
                let b = match v.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err("Expected value to be either true or false".to_string()),
                };
                match self {
                    Kind::FalseOnly(why) if b => Err(why.to_string()),
                    _ => Ok(Parsed::Bool(b)),
                }
            }
            Kind::OneOf(allowed) => {
                if allowed.contains(&v) {
                    Ok(Parsed::Text(v.to_string()))
                } else {
                    Err(format!("String must be one of: {}", allowed.join(", ")))
                }
            }
            Kind::ListOf(allowed) => {
                let items = list_items(v);
                match items.iter().find(|i| !allowed.contains(i)) {
                    Some(bad) => Err(format!(
                        "Invalid value {bad}: String must be one of: {}",
                        allowed.join(", ")
                    )),
                    None => Ok(Parsed::Text(items.join(","))),
                }
            }
            Kind::ThrottledReplicas => {
                let items = list_items(v);
                let pair = |i: &&str| {
                    i.split_once(':').is_some_and(|(p, b)| {
                        p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok()
                    })
                };
                if items == ["*"] || items.iter().all(pair) {
                    Ok(Parsed::Text(items.join(",")))
                } else {
                    Err(
                        "must be the literal '*' or a list of replicas in the following format: \
                         [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                            .to_string(),
                    )
                }
            }
            Kind::Version => {
                if is_release_version(v) {
                    Ok(Parsed::Text(v.to_string()))
                } else {
                    Err(format!("Version `{v}` is not a valid version"))
                }
            }
        }
    }
}

fn in_range(n: i64, min: i64, max: i64) -> Result<i64, String> {
    if n < min {
        Err(format!("Value must be at least {min}"))
    } else if n > max {
        Err(format!("Value must be no more than {max}"))
    } else {
        Ok(n)
    }
}

pub(super) fn list_items(v: &str) -> Vec<&str> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// `0.10.2`, `2.8`, `3.0-IV1`: digits separated by dots, optionally an `-IVn` suffix.
fn is_release_version(v: &str) -> bool {
    let (release, iv) = match v.split_once("-IV") {
        Some((r, n)) => (r, Some(n)),
        None => (v, None),
    };
    let parts: Vec<&str> = release.split('.').collect();
    (2..=4).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && iv.is_none_or(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A valid value, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Int(i64),
    Double(f64),
    Bool(bool),
    Text(String),
}

impl Parsed {
    pub(super) fn int(&self) -> i64 {
        match self {
            Parsed::Int(n) => *n,
            _ => 0,
        }
    }
    pub(super) fn boolean(&self) -> bool {
        matches!(self, Parsed::Bool(true))
    }
    pub(super) fn text(&self) -> &str {
        match self {
            Parsed::Text(s) => s,
            _ => "",
        }
    }
}
