//! Writing the Prometheus text format: families, samples with escaped labels, summaries.

use std::fmt::Write;

use super::latency::{Latency, QUANTILES};
use super::snapshot::ShardMetrics;

/// A text being written; [`Text::into_text`] ends it.
#[derive(Default)]
pub struct Text {
    text: String,
}

/// A family with one sample per shard: (name, kind, help, value of a shard).
pub type ShardFamily<'a> = (&'a str, &'a str, &'a str, fn(&ShardMetrics) -> f64);

impl Text {
    /// Each family, with one `shard`-labelled sample per shard.
    pub fn per_shard(&mut self, shards: &[ShardMetrics], families: &[ShardFamily<'_>]) {
        for (name, kind, help, value) in families {
            self.family(name, kind, help);
            for s in shards {
                self.sample(name, &[("shard", &s.shard.to_string())], value(s));
            }
        }
    }

    pub fn into_text(self) -> String {
        self.text
    }

    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                self.text.push_str(label);
                self.text.push_str("=\"");
                push_escaped(&mut self.text, v);
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    pub fn summary(&mut self, name: &str, labels: &[(&str, &str)], latency: &Latency) {
        for q in QUANTILES {
            let q_label = q.to_string();
            let mut with_quantile: Vec<(&str, &str)> = labels.to_vec();
            with_quantile.push(("quantile", &q_label));
            self.sample(
                name,
                &with_quantile,
                micros_to_seconds(latency.quantile_micros(q)),
            );
        }
        self.sample(
            &format!("{name}_sum"),
            labels,
            micros_to_seconds(latency.sum_micros()),
        );
        self.sample(&format!("{name}_count"), labels, latency.count() as f64);
    }
}

fn micros_to_seconds(micros: u64) -> f64 {
    micros as f64 / 1e6
}

/// Label values escape backslash, double quote and newline (group ids are arbitrary text).
fn push_escaped(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}
