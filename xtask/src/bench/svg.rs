//! Drawing one chart as SVG text with plotters (its SVG backend only: text
//! is written as `<text>` elements and laid out by plotters' estimate, so
//! no font library and no C is involved).
//!
//! Each point is a median with its min–max bar over the rounds; a point
//! whose every round failed is a cross on the bottom edge in its series'
//! colour, so a missing figure is seen rather than silently dropped.

use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;

/// One point: its x and, if any round succeeded, (min, median, max).
pub type Point = (f64, Option<(f64, f64, f64)>);

pub struct Series {
    pub label: String,
    pub color: RGBColor,
    pub points: Vec<Point>,
}

pub struct Chart {
    pub title: String,
    /// The line under the plot (how to read it).
    pub note: String,
    pub x_label: String,
    pub y_label: String,
    /// Logarithmic y (latency and bandwidth span decades); else linear from 0.
    pub log_y: bool,
    /// The measured x values; only these get a tick label.
    pub xs: Vec<f64>,
    pub series: Vec<Series>,
}

/// The legend entry of failed points.
pub const FAILED_LABEL: &str = "x on the bottom edge: every round failed (no figure)";

const SIZE: (u32, u32) = (900, 560);

/// The two stacks' colours (distinguishable in greyscale too).
pub const BLUE_ISH: RGBColor = RGBColor(31, 90, 180);
pub const RED_ISH: RGBColor = RGBColor(214, 96, 0);

/// "64", "2K", "128K", "8M": a size or count for a tick label.
pub fn short(v: f64) -> String {
    let v = v.round() as u64;
    match v {
        v if v >= 1 << 20 && v % (1 << 20) == 0 => format!("{}M", v >> 20),
        v if v >= 1 << 10 && v % (1 << 10) == 0 => format!("{}K", v >> 10),
        v => v.to_string(),
    }
}

/// The chart as an SVG document.
pub fn render(c: &Chart) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (plot, foot) = root.split_vertically(SIZE.1 - 26);
        foot.draw(&Text::new(
            c.note.clone(),
            (60, 4),
            ("sans-serif", 14).into_font().color(&BLACK.mix(0.7)),
        ))
        .map_err(|e| e.to_string())?;
        let (lo, hi) = y_bounds(c);
        if c.log_y {
            draw(&plot, c, (lo..hi).log_scale())?;
        } else {
            draw(&plot, c, lo..hi)?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// The y axis' range: decades around the data on a log axis (so that
/// there is always a labelled tick), 0 to 1.4 × the top on a linear one
/// (room for the legend); a fixed range when nothing succeeded.
fn y_bounds(c: &Chart) -> (f64, f64) {
    let vals = c
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter_map(|p| p.1)
        .flat_map(|(a, _, b)| [a, b])
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = vals.fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    if hi <= 0.0 {
        return (if c.log_y { 1.0 } else { 0.0 }, 10.0);
    }
    if c.log_y {
        // At least 3x above the highest bar: room for the legend.
        let lo = 10f64.powf(lo.log10().floor());
        let hi = 10f64.powf((hi * 3.0).log10().ceil());
        (lo, hi)
    } else {
        (0.0, hi * 1.4)
    }
}

/// Draws axes, series and legend on `area` with y coordinates `y`.
fn draw<Y>(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    c: &Chart,
    y: Y,
) -> Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<std::io::Error>| e.to_string();
    let (x0, x1) =
        c.xs.iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), v| (l.min(*v), h.max(*v)));
    let (x0, x1) = if x1 > 0.0 {
        (x0 / 1.6, x1 * 1.6)
    } else {
        (1.0, 2.0)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&c.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(78)
        .build_cartesian_2d((x0..x1).log_scale().base(2.0), y)
        .map_err(e)?;
    let y_bottom = chart.y_range().start;
    let xs = c.xs.clone();
    let x_fmt = move |v: &f64| {
        if xs.iter().any(|x| (x - v).abs() < 0.01 * x) {
            short(*v)
        } else {
            String::new()
        }
    };
    // Powers of ten come out of `powf` a hair off: 10, not 10.0 or 9.99.
    let y_fmt = |v: &f64| {
        if *v >= 100.0 || (v - v.round()).abs() < 1e-6 * v.max(1.0) {
            format!("{v:.0}")
        } else if *v >= 1.0 {
            format!("{v:.1}")
        } else {
            let s = format!("{v:.3}");
            s.trim_end_matches('0').to_string()
        }
    };
    chart
        .configure_mesh()
        .x_labels(40)
        // A light line between every power of two is noise, not help.
        .x_max_light_lines(0)
        .y_labels(12)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .axis_desc_style(("sans-serif", 15))
        .label_style(("sans-serif", 13))
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.15))
        .draw()
        .map_err(e)?;
    let n = c.series.len().max(1) as f64;
    let mut any_failed = false;
    for (i, s) in c.series.iter().enumerate() {
        // Side by side around each x, so the bars of two series do not
        // hide each other.
        let dodge = 2f64.powf((i as f64 - (n - 1.0) / 2.0) * 0.12);
        let ok: Vec<(f64, (f64, f64, f64))> = s
            .points
            .iter()
            .filter_map(|(x, r)| r.map(|r| (x * dodge, r)))
            .collect();
        let color = s.color;
        chart
            .draw_series(LineSeries::new(
                ok.iter().map(|(x, r)| (*x, r.1)),
                color.stroke_width(2),
            ))
            .map_err(e)?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                ok.iter().map(|(x, r)| {
                    ErrorBar::new_vertical(*x, r.0, r.1, r.2, color.stroke_width(1), 8)
                }),
            )
            .map_err(e)?;
        chart
            .draw_series(
                ok.iter()
                    .map(|(x, r)| Circle::new((*x, r.1), 3, color.filled())),
            )
            .map_err(e)?;
        let failed: Vec<f64> = s
            .points
            .iter()
            .filter(|p| p.1.is_none())
            .map(|p| p.0 * dodge)
            .collect();
        any_failed |= !failed.is_empty();
        chart
            .draw_series(
                failed
                    .iter()
                    .map(|x| Cross::new((*x, y_bottom), 7, color.stroke_width(3))),
            )
            .map_err(e)?;
    }
    if any_failed {
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(e)?
            .label(FAILED_LABEL)
            .legend(|(x, y)| Cross::new((x + 12, y), 5, BLACK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(log_y: bool) -> Chart {
        Chart {
            title: "Bandwidth vs size".into(),
            note: "median of 3 rounds".into(),
            x_label: "message size (bytes)".into(),
            y_label: "BW average (MB/s)".into(),
            log_y,
            xs: vec![2.0, 8.0, 32.0],
            series: vec![
                Series {
                    label: "perftest ib_write_bw".into(),
                    color: BLUE,
                    points: vec![
                        (2.0, Some((0.05, 0.07, 0.08))),
                        (8.0, Some((0.2, 0.3, 0.4))),
                        (32.0, Some((1.0, 1.2, 1.5))),
                    ],
                },
                Series {
                    label: "rverbs perf write-bw".into(),
                    color: RED,
                    points: vec![(2.0, Some((0.06, 0.08, 0.1))), (8.0, None), (32.0, None)],
                },
            ],
        }
    }

    #[test]
    fn svg_has_title_axes_series_and_failed_points() {
        for log_y in [true, false] {
            let svg = render(&chart(log_y)).unwrap();
            assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
            for text in [
                "Bandwidth vs size",
                "message size (bytes)",
                "BW average (MB/s)",
                "perftest ib_write_bw",
                "rverbs perf write-bw",
                FAILED_LABEL,
                "median of 3 rounds",
                "\n32\n",
            ] {
                assert!(svg.contains(text), "no {text:?} in the SVG");
            }
            // A tick label only where something was measured.
            assert!(!svg.contains("\n4\n"));
        }
        // Nothing failed: no failed entry in the legend.
        let mut c = chart(true);
        c.series.pop();
        assert!(!render(&c).unwrap().contains(FAILED_LABEL));
    }

    #[test]
    fn every_point_failed_still_draws() {
        let mut c = chart(true);
        for s in &mut c.series {
            for p in &mut s.points {
                p.1 = None;
            }
        }
        let svg = render(&c).unwrap();
        assert!(svg.contains(FAILED_LABEL));
        assert_eq!(y_bounds(&c), (1.0, 10.0));
    }

    #[test]
    fn log_bounds_are_whole_decades_and_labels_short() {
        let c = chart(true);
        let (lo, hi) = y_bounds(&c);
        assert!(
            (lo - 0.01).abs() < 1e-12 && (hi - 10.0).abs() < 1e-9,
            "{lo} {hi}"
        );
        assert_eq!(short(131072.0), "128K");
        assert_eq!(short(8388608.0), "8M");
        assert_eq!(short(64.0), "64");
    }
}
