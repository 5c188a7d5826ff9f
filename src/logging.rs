//! The process's log output: `tracing` events to stderr, as text for people or as one JSON
//! object per line for log shippers.
//!
//! The format comes from `--log-format` (or `RINGBROKER_LOG_FORMAT`), the level from
//! `--log-level`; `RUST_LOG`, when set, wins, so per-module directives
//! (`RUST_LOG=info,ringbroker::log=debug`) work as in any tracing-based program.

use std::str::FromStr;

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines (tracing-subscriber's default format).
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (the message and
    /// every field of the event, with its type kept), `span`s.
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("unknown log format {0:?} (expected text or json)")]
    UnknownFormat(String),
    #[error("invalid log filter {filter:?}: {reason}")]
    BadFilter { filter: String, reason: String },
    #[error("a log subscriber is already installed")]
    AlreadyInstalled,
}

impl FromStr for LogFormat {
    type Err = LoggingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(LoggingError::UnknownFormat(s.to_string())),
        }
    }
}

/// The level used when neither `--log-level` nor `RUST_LOG` says otherwise.
pub const DEFAULT_LEVEL: &str = "info";

/// Added to a plain level: openraft logs every vote and append at info, which would drown
/// the broker's own lines (RUST_LOG can still ask for them).
const DEPENDENCY_LEVELS: &str = "openraft=warn";

/// The filter in effect: `RUST_LOG` if set (and not empty), else `level`, else info (the
/// latter two with [`DEPENDENCY_LEVELS`]).
pub fn filter_directives(rust_log: Option<&str>, level: Option<&str>) -> String {
    match (rust_log.map(str::trim), level.map(str::trim)) {
        (Some(env), _) if !env.is_empty() => env.to_string(),
        (_, Some(level)) if !level.is_empty() => format!("{level},{DEPENDENCY_LEVELS}"),
        _ => format!("{DEFAULT_LEVEL},{DEPENDENCY_LEVELS}"),
    }
}

/// Installs the global subscriber, writing to stderr (stdout carries the broker's
/// `listening on` line and command output, which scripts parse).
pub fn init(format: LogFormat, level: Option<&str>) -> Result<(), LoggingError> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let directives = filter_directives(rust_log.as_deref(), level);
    let filter = EnvFilter::try_new(&directives).map_err(|e| LoggingError::BadFilter {
        filter: directives.clone(),
        reason: e.to_string(),
    })?;
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a terminal: in a file or a pipe they get in the way of grep.
        .with_ansi(std::io::stderr().is_terminal());
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        // Flattened: the event's fields sit next to `message` at the top level, which is
        // what log shippers (Loki, Elasticsearch, jq) query most easily.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
    installed.map_err(|_| LoggingError::AlreadyInstalled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_wins_over_the_level_flag() {
        assert_eq!(filter_directives(None, None), "info,openraft=warn");
        assert_eq!(
            filter_directives(None, Some("debug")),
            "debug,openraft=warn"
        );
        assert_eq!(
            filter_directives(Some("warn,ringbroker::log=trace"), Some("debug")),
            "warn,ringbroker::log=trace"
        );
        assert_eq!(
            filter_directives(Some(" "), Some("error")),
            "error,openraft=warn"
        );
    }

    #[test]
    fn formats_parse() {
        assert_eq!("json".parse::<LogFormat>().ok(), Some(LogFormat::Json));
        assert_eq!("TEXT".parse::<LogFormat>().ok(), Some(LogFormat::Text));
        assert!("yaml".parse::<LogFormat>().is_err());
    }
}
