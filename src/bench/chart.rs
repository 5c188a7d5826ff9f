//! chart.svg: the latency percentile spectrum (as HdrHistogram plots it: x = 1/(1-p) on a log
//! scale) above the throughput per second.

use hdrhistogram::Histogram;
use plotters::prelude::*;

/// (x = log10(1/(1-p)), latency in ms) points of the spectrum, up to p = 99.999 %.
pub fn spectrum_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut points = Vec::new();
    let mut x = 0.0;
    while x <= 5.0 + 1e-9 {
        let q = 1.0 - 10f64.powf(-x);
        points.push((x, h.value_at_quantile(q) as f64 / 1000.0));
        x += 0.05;
    }
    points
}

fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-x));
    let digits = (x.round() as usize).saturating_sub(2);
    format!("{p:.digits$}%")
}

/// Draws the chart; `throughput` is records per second, `title` goes on top.
pub fn render(
    title: &str,
    metric: &str,
    latency: &Histogram<u64>,
    throughput: &[(f64, f64)],
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 800)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (top, bottom) = root.split_vertically(420);

        let points = spectrum_points(latency);
        let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(0.001) * 1.1;
        let mut chart = ChartBuilder::on(&top)
            .caption(
                format!("{title}: {metric} latency by percentile"),
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..5f64, 0f64..y_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_labels(6)
            .x_label_formatter(&|x| percentile_label(*x))
            .x_desc("percentile")
            .y_desc("latency (ms)")
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(LineSeries::new(points, BLUE.stroke_width(2)))
            .map_err(|e| e.to_string())?;

        let x_max = throughput.iter().map(|p| p.0).fold(1.0, f64::max);
        let r_max = throughput.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.1;
        let mut chart = ChartBuilder::on(&bottom)
            .caption("throughput per second", ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x_max, 0f64..r_max)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("seconds since start")
            .y_desc("records/s")
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(LineSeries::new(
                throughput.iter().copied(),
                RED.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::new_histogram;

    #[test]
    fn renders_an_svg_with_both_panels() {
        let mut h = new_histogram(3);
        for v in 1..1000u64 {
            h.record(v * 10).unwrap();
        }
        let points = spectrum_points(&h);
        assert!(points.windows(2).all(|w| w[0].1 <= w[1].1));
        let svg = render("produce", "produce_ack", &h, &[(0.0, 10.0), (1.0, 20.0)]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        assert!(svg.contains("throughput per second"));
        assert_eq!(percentile_label(2.0), "99%");
        assert_eq!(percentile_label(3.0), "99.9%");
        // An empty run still draws.
        assert!(render("e2e", "end_to_end", &new_histogram(3), &[]).is_ok());
    }
}
