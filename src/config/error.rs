//! Why a broker configuration is refused.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("unknown property `{0}`")]
    UnknownProperty(String),
    #[error("property `{name}`: {reason}")]
    BadValue { name: String, reason: String },
}
