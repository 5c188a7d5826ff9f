//! The HdrHistogram "percentile distribution" text format (`.hgrm`), as HdrHistogram's
//! `outputPercentileDistribution` writes it and its plotters read it: a table of
//! `Value Percentile TotalCount 1/(1-Percentile)` rows and three `#[...]` trailer lines.

use std::fmt::Write;

use hdrhistogram::Histogram;

/// The distribution of `h` (recorded in microseconds) with values divided by `scale`
/// (1000.0 → milliseconds), 5 ticks per half distance as HdrHistogram's default.
pub fn percentile_distribution(h: &Histogram<u64>, scale: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if !h.is_empty() {
        let mut total = 0u64;
        for v in h.iter_quantiles(5) {
            total += v.count_since_last_iteration();
            let value = v.value_iterated_to() as f64 / scale;
            let q = v.quantile_iterated_to();
            if q < 1.0 {
                let _ = writeln!(
                    out,
                    "{value:>12.3} {q:>2.12} {total:>10} {:>14.2}",
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value:>12.3} {q:>2.12} {total:>10}");
            }
        }
    }
    let (mean, stdev, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean() / scale, h.stdev() / scale, h.max() as f64 / scale)
    };
    let _ = writeln!(
        out,
        "#[Mean    = {mean:>12.3}, StdDeviation   = {stdev:>12.3}]"
    );
    let _ = writeln!(
        out,
        "#[Max     = {max:>12.3}, Total count    = {:>12}]",
        h.len()
    );
    let sub_buckets = (2.0 * 10f64.powi(i32::from(h.sigfig())))
        .log2()
        .ceil()
        .exp2() as u64;
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        sub_buckets
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::new_histogram;

    #[test]
    fn the_table_is_monotone_and_has_the_trailer() {
        let mut h = new_histogram(3);
        for v in 1..=10_000u64 {
            h.record(v).unwrap();
        }
        let text = percentile_distribution(&h, 1000.0);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
        );
        let rows: Vec<Vec<f64>> = text
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().map(|f| f.parse().unwrap()).collect())
            .collect();
        assert!(rows.len() > 20);
        assert!(rows
            .windows(2)
            .all(|w| w[0][0] <= w[1][0] && w[0][1] <= w[1][1]));
        let last = rows.last().unwrap();
        assert_eq!(last[1], 1.0);
        assert_eq!(last[2], 10_000.0);
        assert!((last[0] - 10.0).abs() < 0.02, "max 10 ms: {last:?}");
        assert!(text.contains("#[Mean    ="));
        assert!(text.contains("Total count    =        10000]"));
        assert!(text.contains("SubBuckets     =         2048]"));
    }
}
