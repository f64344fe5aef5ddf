//! `hinoki plot`: a run's `diagnostics.jsonl` as two panels over simulation time: the relative
//! energy error |ΔE/E| and the seconds each phase of the force evaluation took, both on log
//! scales.

use super::font::{draw_legend, text};
use super::map::short;
use super::picture::{check_range, drawing_error, write_png, write_svg, Format};
use crate::error::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

/// The diagnostics lines that can be plotted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diagnostics {
    /// (time, |ΔE/E|) of every line (time units, dimensionless).
    pub energy_error: Vec<(f64, f64)>,
    /// Per phase, in order of first appearance (alphabetical within a line): its name and
    /// (time, seconds) of every line that reports it.
    pub phases: Vec<(String, Vec<(f64, f64)>)>,
    /// Lines that were not a JSON object with numeric `time` and `energy_error`.
    pub skipped: usize,
}

impl Diagnostics {
    /// Parses JSON lines (one object per line; see the module documentation of
    /// [`crate::simulation`]). Unknown keys are ignored; blank lines are not counted; lines
    /// without numeric `time` and `energy_error` are skipped and counted.
    pub fn parse(jsonl: &str) -> Self {
        let mut d = Self::default();
        for line in jsonl.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                d.skipped += 1;
                continue;
            };
            let (Some(t), Some(e)) = (v["time"].as_f64(), v["energy_error"].as_f64()) else {
                d.skipped += 1;
                continue;
            };
            d.energy_error.push((t, e.abs()));
            let Some(phases) = v["phase_seconds"].as_object() else {
                continue;
            };
            for (name, seconds) in phases {
                let Some(s) = seconds.as_f64() else { continue };
                match d.phases.iter_mut().find(|(n, _)| n == name) {
                    Some((_, points)) => points.push((t, s)),
                    None => d.phases.push((name.clone(), vec![(t, s)])),
                }
            }
        }
        d
    }
}

/// Reads the diagnostics file `input` and draws it to `out` (`.png` or `.svg`, written
/// atomically), `width` pixels wide. Fails with a one-line error when the file cannot be read,
/// holds no usable line, or the picture cannot be written.
pub fn plot_diagnostics(input: &Path, out: &Path, width: u32) -> Result<()> {
    let format = Format::of(out)?;
    if !(300..=8000).contains(&width) {
        return Err(Error::input(format!(
            "--width must be 300 ..= 8000 pixels, got {width}"
        )));
    }
    let jsonl = std::fs::read_to_string(input)
        .map_err(|e| Error::io(input, format!("cannot read: {e}")))?;
    let d = Diagnostics::parse(&jsonl);
    if d.energy_error.is_empty() {
        return Err(Error::input(format!(
            "{}: no usable diagnostics line (JSON objects with numeric \"time\" and \
             \"energy_error\", one per line)",
            input.display()
        )));
    }
    if d.skipped > 0 {
        tracing::warn!(
            "{}: skipped {} lines that are not diagnostics",
            input.display(),
            d.skipped
        );
    }
    let axes = Axes::of(&d).map_err(|e| Error::input(format!("{}: {e}", input.display())))?;
    let size = (width, width * 9 / 10);
    match format {
        Format::Png => {
            let mut rgb = vec![0u8; 3 * (size.0 * size.1) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
                draw(&root, &d, &axes, width).map_err(|e| drawing_error(out, e))?;
                root.present().map_err(|e| drawing_error(out, e))?;
            }
            write_png(out, &rgb, size.0, size.1)
        }
        Format::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
                draw(&root, &d, &axes, width).map_err(|e| drawing_error(out, e))?;
                root.present().map_err(|e| drawing_error(out, e))?;
            }
            write_svg(out, &svg)
        }
    }
}

/// Distinct line colours (Tableau 10), one per phase.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The ranges of the three axes: time (shared by both panels, linear), |ΔE/E| and seconds
/// (log scales).
struct Axes {
    time: (f64, f64),
    energy: (f64, f64),
    seconds: (f64, f64),
}

impl Axes {
    /// The axes of `d`'s panels, or an error naming the range that cannot be drawn.
    fn of(d: &Diagnostics) -> Result<Self> {
        let time = range(d.energy_error.iter().map(|p| p.0));
        check_range("the times", time.0, time.1)?;
        let energy = log_range("energy_error", d.energy_error.iter().map(|p| p.1))?;
        let seconds = log_range(
            "phase_seconds",
            d.phases.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.1)),
        )?;
        Ok(Self {
            time,
            energy,
            seconds,
        })
    }
}

/// The log-axis range of the positive values among `values`: a factor of 2 of room each side,
/// or an empty decade when none is positive (an exact run, or no phases). Fails, naming the
/// values as `what`, when that range leaves the normal positive float64 numbers (a log axis
/// of plotters does not end its ticks there).
fn log_range(what: &str, values: impl Iterator<Item = f64>) -> Result<(f64, f64)> {
    let (lo, hi) = values
        .filter(|&v| v > 0.0)
        .fold((f64::INFINITY, 0.0_f64), |(a, b), v| (a.min(v), b.max(v)));
    if hi == 0.0 {
        return Ok((1e-16, 1e-15));
    }
    let axis = (lo / 2.0, hi * 2.0);
    if axis.0.is_normal() && axis.1.is_normal() {
        Ok(axis)
    } else {
        Err(Error::input(format!(
            "{what} values from {lo:e} to {hi:e} cannot be drawn on a log axis (they must lie \
             within {:.2e} ..= {:.2e})",
            2.0 * f64::MIN_POSITIVE,
            f64::MAX / 2.0
        )))
    }
}

/// Both panels.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    d: &Diagnostics,
    axes: &Axes,
    width: u32,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let font = (f64::from(width) / 50.0).max(10.0);
    let (top, bottom) = root.split_vertically(root.dim_in_pixel().1 / 2);
    let energy: Vec<(f64, f64)> = d
        .energy_error
        .iter()
        .copied()
        .filter(|p| p.1 > 0.0)
        .collect();
    panel(
        &top,
        font,
        ("relative energy error", "|ΔE/E|"),
        (axes.time, axes.energy),
        &[("|ΔE/E|".to_string(), energy)],
        false,
    )?;
    let phases: Vec<(String, Vec<(f64, f64)>)> = d
        .phases
        .iter()
        .map(|(n, pts)| {
            (
                n.clone(),
                pts.iter().copied().filter(|p| p.1 > 0.0).collect(),
            )
        })
        .collect();
    panel(
        &bottom,
        font,
        ("time per force evaluation, by phase", "seconds"),
        (axes.time, axes.seconds),
        &phases,
        true,
    )
}

/// One panel (its title and y-axis name in `names`): lines of positive values on a log scale
/// over time, on the axis ranges `(t_range, (lo, hi))`, with a legend when asked.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    font: f64,
    (title, y_name): (&str, &str),
    (t_range, (lo, hi)): ((f64, f64), (f64, f64)),
    lines: &[(String, Vec<(f64, f64)>)],
    legend: bool,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, text(font * 1.1))
        .margin(font as u32)
        .x_label_area_size((font * 2.8) as u32)
        .y_label_area_size((font * 5.0) as u32)
        .build_cartesian_2d(t_range.0..t_range.1, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("time")
        .y_desc(y_name)
        .label_style(text(font))
        .axis_desc_style(text(font))
        .x_label_formatter(&|t| short(*t))
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .light_line_style(WHITE)
        .draw()?;
    for (k, (name, points)) in lines.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let style = colour.stroke_width(2);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    if legend {
        draw_legend(&mut chart, font)?;
    }
    Ok(())
}

/// The smallest and largest of `values`, widened to a non-empty range; (0, 1) for none.
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        (0.0, 1.0)
    } else if lo == hi {
        (lo - 0.5 * lo.abs().max(1.0), hi + 0.5 * hi.abs().max(1.0))
    } else {
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_ignores_unknown_keys_and_counts_bad_ones() {
        let text = r#"{"time": 0, "step": 0, "energy_error": 0, "phase_seconds": {"walk": 0.5, "sort": 0.01}, "new_key": [1]}
not json
{"time": 0.5, "energy_error": -2e-6, "phase_seconds": {"walk": 0.4, "build": 0.1}}

{"time": "late", "energy_error": 1}
{"step": 3}
"#;
        let d = Diagnostics::parse(text);
        assert_eq!(d.energy_error, vec![(0.0, 0.0), (0.5, 2e-6)]);
        assert_eq!(d.skipped, 3);
        let names: Vec<&str> = d.phases.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["sort", "walk", "build"]);
        assert_eq!(d.phases[1].1, vec![(0.0, 0.5), (0.5, 0.4)]);
    }

    #[test]
    fn ranges_are_never_empty() {
        assert_eq!(range([3.0, 1.0, 2.0].into_iter()), (1.0, 3.0));
        assert_eq!(range(std::iter::empty()), (0.0, 1.0));
        assert_eq!(range([0.0].into_iter()), (-0.5, 0.5));
        assert_eq!(range([f64::NAN, 4.0].into_iter()), (2.0, 6.0));
    }
}
