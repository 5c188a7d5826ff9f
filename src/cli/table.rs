//! Output of the admin commands: aligned text tables for people, JSON (stable field names)
//! for scripts, chosen with `--format`.

use std::io::Write;

use serde::Serialize;

use super::explain::CliError;

/// How a command prints its result.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned columns.
    #[default]
    Table,
    /// One JSON document on stdout.
    Json,
}

/// `--format`, flattened into each command that prints a result.
#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// Output format: `table` for people, `json` for scripts.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// A table of text cells; columns are padded to their widest cell, and columns of numbers
/// (where `-` or a blank cell stands for no value) are right-aligned.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are blank, extra cells are dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let width = |c: usize| {
            self.rows
                .iter()
                .map(|r| r[c].chars().count())
                .chain([self.headers[c].chars().count()])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        let numeric: Vec<bool> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .all(|r| r[c].is_empty() || r[c] == "-" || r[c].parse::<i64>().is_ok())
                    && self.rows.iter().any(|r| r[c].parse::<i64>().is_ok())
            })
            .collect();
        let mut out = String::new();
        for cells in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (c, cell) in cells.iter().enumerate() {
                if c > 0 {
                    line.push_str("  ");
                }
                let pad = widths[c] - cell.chars().count();
                if numeric[c] {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    if c + 1 < columns {
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Writes `text` to stdout. A closed pipe (`| head`) is not an error.
pub fn emit(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::io("write to stdout", e))
        }
        _ => Ok(()),
    }
}

/// Writes `value` as pretty JSON and a newline.
pub fn emit_json<T: Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| {
        CliError::io(
            "encode the result as JSON",
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    emit(&format!("{text}\n"))
}

/// A flag as a table cell.
pub(super) fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// An optional number as a table cell: `-` when absent.
pub(super) fn opt(v: Option<i64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_and_numbers_right_aligned() {
        let mut t = Table::new(&["TOPIC", "PARTITIONS", "INTERNAL"]);
        t.row(vec!["orders".into(), "12".into(), "no".into()]);
        t.row(vec!["a".into(), "3".into(), "yes".into()]);
        assert_eq!(
            t.render(),
            "TOPIC   PARTITIONS  INTERNAL\n\
             orders          12  no\n\
             a                3  yes\n"
        );
    }

    #[test]
    fn short_rows_are_padded_and_dashes_count_as_numbers() {
        let mut t = Table::new(&["P", "LAG"]);
        t.row(vec!["0".into(), "-".into()]);
        t.row(vec!["10".into()]);
        t.row(vec!["1".into(), "250".into()]);
        assert_eq!(t.render(), " P  LAG\n 0    -\n10\n 1  250\n");
    }

    #[test]
    fn an_empty_table_is_its_header() {
        assert_eq!(Table::new(&["GROUP", "STATE"]).render(), "GROUP  STATE\n");
        // No number at all: text, left-aligned.
        let mut t = Table::new(&["PROTOCOL-TYPE", "N"]);
        t.row(vec!["-".into(), "1".into()]);
        assert_eq!(t.render(), "PROTOCOL-TYPE  N\n-              1\n");
        assert!(Table::new(&["X"]).is_empty());
    }
}
