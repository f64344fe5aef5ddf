//! `hinoki render`: a picture of a snapshot's projected surface density Σ, on a log scale in
//! the viridis colour map, with axes in length units, a colour bar of log₁₀ Σ and a scale bar.

use super::density::{mass_radius, surface_density, Axis, View};
use super::font::text;
use super::picture::{check_range, drawing_error, write_png, Format};
use super::select;
use crate::comm::{Comm, SingleProcess};
use crate::error::{Error, Result};
use crate::io::snapshot::read_periodic_snapshot;
use crate::io::{read_snapshot, read_snapshot_header};
use crate::particles::Particles;
use glam::DVec3;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::borrow::Cow;
use std::path::Path;

/// Decades of Σ the colour scale spans below the densest pixel.
const DECADES: f64 = 4.0;
/// Fraction of the mass the default view encloses.
const VIEW_MASS_FRACTION: f64 = 0.99;

/// What `hinoki render` draws and how large.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderOptions {
    /// The line of sight.
    pub axis: Axis,
    /// Width of the picture in pixels (the map is square, with axes and colour bar around it).
    pub width: u32,
    /// Half-width of the view (length units); default: half the periodic box, or with open
    /// boundaries the radius around the centre that encloses 99% of the mass shown.
    pub extent: Option<f64>,
    /// Centre of the view (length units); default: the centre of the periodic box, or with
    /// open boundaries the centre of mass of the particles of `types`.
    pub center: Option<DVec3>,
    /// The particle types drawn (0 … 5, [`crate::particles::particle_type`]); `None`: all.
    pub types: Option<Vec<u8>>,
    /// Thickness of the slab drawn (length units): only the particles within half of it of
    /// the plane through the centre across the line of sight; `None`: all depths.
    pub slab: Option<f64>,
    /// Side of the periodic box the particles are in (length units; the snapshot's
    /// `BoxSize`), 0 for open boundaries. In a box each particle is drawn at its image
    /// nearest the centre, so any centre shows a full box around it.
    pub box_size: f64,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            axis: Axis::Z,
            width: 800,
            extent: None,
            center: None,
            types: None,
            slab: None,
            box_size: 0.0,
        }
    }
}

/// Draws the snapshot at `path` (one file, any file of a set, or its snapdir) as
/// [`render`] does, read on this one process, in its periodic box when its `BoxSize` is > 0
/// (`opts.box_size` is taken from the file). Returns the number of particles drawn.
pub fn render_snapshot(path: &Path, opts: &RenderOptions, out: &Path) -> Result<usize> {
    let box_size = read_snapshot_header(path)?.cosmology.box_size;
    let (p, time) = if box_size > 0.0 {
        read_periodic_snapshot(path)?
    } else {
        read_snapshot(&SingleProcess, path)?
    };
    let opts = RenderOptions {
        box_size,
        ..opts.clone()
    };
    render(&SingleProcess, &p, time, &opts, out)
}

/// The particles `opts` shows of `p` (its types, at their nearest images in a periodic box,
/// within the slab), on every rank of `comm` its own, and the view of all of them, with the
/// defaults filled in from them. Fails (on every rank alike) when a type is not one, no
/// particle has the types, the box is not finite and ≥ 0, the slab or the extent is not a
/// positive length, the centre is not finite, or the view's ranges cannot be drawn (see
/// `picture::check_range`: e.g. particles beyond ±1e154, whose 99 % mass radius overflows, or
/// a view too narrow for its distance from the origin). Collective.
pub fn view_of<'a>(
    comm: &dyn Comm,
    p: &'a Particles,
    opts: &RenderOptions,
) -> Result<(Cow<'a, Particles>, View)> {
    let box_size = opts.box_size;
    if !(box_size.is_finite() && box_size >= 0.0) {
        return Err(Error::input(format!(
            "the periodic box {box_size} must be finite and >= 0 (0: open boundaries)"
        )));
    }
    let mut shown = select::of_types(comm, p, opts.types.as_deref())?;
    let periodic = box_size > 0.0;
    let center = opts.center.unwrap_or_else(|| match periodic {
        true => DVec3::splat(box_size / 2.0),
        false => centre_of_mass(comm, &shown),
    });
    if !center.is_finite() {
        return Err(Error::input(format!("--center {center} is not finite")));
    }
    if periodic {
        select::nearest_images(shown.to_mut(), center, box_size);
    }
    if let Some(thickness) = opts.slab {
        shown = Cow::Owned(select::slab(&shown, center, opts.axis, thickness)?);
    }
    let half_width = match opts.extent {
        Some(l) if l.is_finite() && l > 0.0 => l,
        Some(l) => {
            return Err(Error::input(format!(
                "--extent must be a positive length, got {l}"
            )))
        }
        None if periodic => box_size / 2.0,
        None => {
            let r = mass_radius(comm, &shown, center, VIEW_MASS_FRACTION);
            if r > 0.0 {
                r
            } else {
                // All the mass at one point, or none: any small view shows it.
                1.0
            }
        }
    };
    let view = View {
        center,
        half_width,
        axis: opts.axis,
    };
    let ((x0, x1), (y0, y1)) = view.ranges();
    let (h, v) = opts.axis.plane_names();
    for (name, lo, hi) in [(h, x0, x1), (v, y0, y1)] {
        check_range(&format!("the view's {name} range"), lo, hi).map_err(|e| {
            Error::input(format!("{e} (choose the view with --center and --extent)"))
        })?;
    }
    Ok((shown, view))
}

/// The mass-weighted centre of the particles `p` of every rank of `comm` (length units); the
/// origin for a massless set. Collective.
fn centre_of_mass(comm: &dyn Comm, p: &Particles) -> DVec3 {
    let moment = p.mass_moment();
    let mut sums = [moment.x, moment.y, moment.z, p.total_mass()];
    comm.allreduce_sum_f64(&mut sums);
    match sums[3] > 0.0 {
        true => DVec3::new(sums[0], sums[1], sums[2]) / sums[3],
        false => DVec3::ZERO,
    }
}

/// Draws the surface density of the particles that `opts` shows of every rank's `p` (on each
/// rank of `comm` its own), at time `time` (time units), as the PNG `out` (written atomically
/// by rank 0); returns how many it drew, of all ranks. No rank holds more than its own
/// particles: the view and the map are sums over the ranks. Fails with a one-line error for a
/// width outside 200 ..= 8000 pixels, a file name that does not end in `.png`, an invalid
/// choice of particles or view (see [`view_of`]), or masses whose surface density overflows
/// float64, on every rank alike (the PNG's writing only on rank 0). Collective.
pub fn render(
    comm: &dyn Comm,
    p: &Particles,
    time: f64,
    opts: &RenderOptions,
    out: &Path,
) -> Result<usize> {
    if Format::of(out).ok() != Some(Format::Png) {
        return Err(Error::input(format!(
            "{}: render writes PNG only (name the file *.png)",
            out.display()
        )));
    }
    if !(200..=8000).contains(&opts.width) {
        return Err(Error::input(format!(
            "--width must be 200 ..= 8000 pixels, got {}",
            opts.width
        )));
    }
    let (shown, view) = view_of(comm, p, opts)?;
    let layout = Layout::new(opts.width);
    let mut totals = [shown.total_mass(), shown.len() as f64];
    comm.allreduce_sum_f64(&mut totals);
    let (mass, drawn) = (totals[0], totals[1] as usize);
    // The map's surface densities, up to all the mass in one of its pixels (narrower than the
    // picture's width), must be float64 numbers.
    let pixel = 2.0 * view.half_width / f64::from(layout.width);
    if !(mass / (pixel * pixel)).is_finite() {
        return Err(Error::input(format!(
            "the particles' surface density overflows float64 (mass {mass:e} in pixels of \
             side {pixel:e}): the picture cannot be drawn"
        )));
    }
    let mut rgb = vec![0u8; 3 * (layout.width * layout.height) as usize];
    {
        let root =
            BitMapBackend::with_buffer(&mut rgb, (layout.width, layout.height)).into_drawing_area();
        let title = title(time, drawn, opts);
        draw(&root, comm, &shown, &title, &view, &layout).map_err(|e| drawing_error(out, e))?;
        root.present().map_err(|e| drawing_error(out, e))?;
    }
    if comm.rank() == 0 {
        write_png(out, &rgb, layout.width, layout.height)?;
    }
    Ok(drawn)
}

/// The picture's title: time, particles drawn, line of sight, and the types and slab when
/// chosen ("t = 2   N = 1000   seen along z   types 1,4   slab 10").
fn title(time: f64, n: usize, opts: &RenderOptions) -> String {
    let mut title = format!("t = {}   N = {n}   seen along {}", short(time), opts.axis);
    if let Some(types) = &opts.types {
        title += &format!("   types {}", select::list(types));
    }
    if let Some(thickness) = opts.slab {
        title += &format!("   slab {}", short(thickness));
    }
    title
}

/// Sizes in pixels of the parts of the picture, scaled with its width.
struct Layout {
    width: u32,
    height: u32,
    /// Room for the title above the map.
    top: u32,
    /// Room for the y tick labels and axis name.
    left: u32,
    /// Room for the x tick labels and axis name.
    bottom: u32,
    /// Room for the colour bar and its labels.
    bar: u32,
    /// Gap right of the map and right of the colour bar.
    gap: u32,
    /// Text size.
    font: f64,
}

impl Layout {
    fn new(width: u32) -> Self {
        let w = f64::from(width);
        let part = |f: f64| (f * w).round() as u32;
        let (top, left, bottom, bar, gap) =
            (part(0.07), part(0.11), part(0.09), part(0.19), part(0.02));
        // The map is square: what is left of the width after the margins, labels, colour bar.
        let side = width - left - 2 * gap - bar;
        Self {
            width,
            height: top + side + bottom,
            top,
            left,
            bottom,
            bar,
            gap,
            font: (w / 42.0).max(10.0),
        }
    }
}

/// Everything on the picture: map (of the particles `p` of every rank of `comm`), axes, scale
/// bar, `title`, colour bar. Collective.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    comm: &dyn Comm,
    p: &Particles,
    title: &str,
    view: &View,
    layout: &Layout,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let (main, bar_area) = root.split_horizontally(layout.width - layout.bar);
    let ((x0, x1), (y0, y1)) = view.ranges();
    let (hname, vname) = view.axis.plane_names();
    let title_style = text(layout.font * 1.15).pos(Pos::new(HPos::Center, VPos::Center));
    let map_middle = (layout.gap + layout.left + (layout.width - layout.bar)) / 2;
    main.draw_text(
        title,
        &title_style,
        (map_middle as i32, layout.top as i32 / 2),
    )?;
    let mut chart = ChartBuilder::on(&main)
        .margin_top(layout.top)
        .margin_left(layout.gap)
        .margin_right(layout.gap)
        .x_label_area_size(layout.bottom)
        .y_label_area_size(layout.left)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let (nx, ny) = chart.plotting_area().dim_in_pixel();
    let map = surface_density(comm, p, view, nx as usize, ny as usize);
    let (lo, hi) = match map.positive_range() {
        Some((min, max)) => (min.log10().max(max.log10() - DECADES), max.log10()),
        None => (-1.0, 0.0),
    };
    let hi = if hi > lo { hi } else { lo + 1.0 };
    let pixels: Vec<u8> = map
        .sigma
        .iter()
        .flat_map(|&s| {
            let level = if s > 0.0 { s.log10() } else { lo };
            let RGBColor(r, g, b) = ViridisRGB.get_color_normalized(level.clamp(lo, hi), lo, hi);
            [r, g, b]
        })
        .collect();
    let image = BitMapElement::with_owned_buffer((x0, y1), (nx, ny), pixels)
        .expect("one RGB triple per pixel");
    chart.draw_series(std::iter::once(image))?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(hname)
        .y_desc(vname)
        .label_style(text(layout.font))
        .axis_desc_style(text(layout.font))
        .x_labels(6)
        .y_labels(6)
        .draw()?;
    draw_scale_bar(&mut chart, view, layout)?;
    // The colour bar runs beside the map, from its bottom to its top.
    let (_, rows) = chart.plotting_area().get_pixel_range();
    let (top, bottom) = (rows.start.max(0) as u32, rows.end.max(0) as u32);
    draw_colour_bar(&bar_area, (top, layout.height - bottom), lo, hi, layout)
}

/// A white bar of a round length in the lower left of the map, labelled with its length.
fn draw_scale_bar<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    view: &View,
    layout: &Layout,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let ((x0, x1), (y0, _)) = view.ranges();
    let length = round_length(0.2 * (x1 - x0));
    let (start, y) = (x0 + 0.05 * (x1 - x0), y0 + 0.06 * (x1 - x0));
    let line = PathElement::new(
        vec![(start, y), (start + length, y)],
        WHITE.stroke_width((layout.font / 5.0).max(2.0) as u32),
    );
    chart.draw_series(std::iter::once(line))?;
    let label = Text::new(
        short(length),
        (start, y + 0.015 * (x1 - x0)),
        text(layout.font)
            .color(&WHITE)
            .pos(Pos::new(HPos::Left, VPos::Bottom)),
    );
    chart.draw_series(std::iter::once(label))?;
    Ok(())
}

/// The colour bar: log₁₀ Σ from `lo` to `hi` upwards, with ticks and its label, `margins`
/// (top, bottom) pixels from the picture's edges.
fn draw_colour_bar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    margins: (u32, u32),
    lo: f64,
    hi: f64,
    layout: &Layout,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let bar_width = layout.width * 3 / 100;
    let mut bar = ChartBuilder::on(area)
        .margin_top(margins.0)
        .margin_bottom(margins.1)
        .margin_left(layout.gap)
        .margin_right(layout.gap)
        .y_label_area_size(0)
        .right_y_label_area_size(layout.bar - 2 * layout.gap - bar_width)
        .build_cartesian_2d(0.0..1.0, lo..hi)?;
    let (_, rows) = bar.plotting_area().dim_in_pixel();
    let rows = rows.max(1);
    let step = (hi - lo) / f64::from(rows);
    bar.draw_series((0..rows).map(|k| {
        let a = lo + step * f64::from(k);
        let colour = ViridisRGB.get_color_normalized(a + 0.5 * step, lo, hi);
        Rectangle::new([(0.0, a), (1.0, a + step)], colour.filled())
    }))?;
    bar.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_desc("log₁₀ Σ  [mass / length²]")
        .label_style(text(layout.font))
        .axis_desc_style(text(layout.font))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .y_labels(6)
        .draw()?;
    Ok(())
}

/// The largest of 1, 2, 5 × 10^k that is at most `x` (for `x` > 0).
fn round_length(x: f64) -> f64 {
    let decade = 10f64.powf(x.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|f| f * decade)
        .find(|&l| l <= x * (1.0 + 1e-12))
        .unwrap_or(decade)
}

/// A number with about four significant digits, without trailing zeros.
pub(crate) fn short(x: f64) -> String {
    if x != 0.0 && (x.abs() < 1e-3 || x.abs() >= 1e5) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - x.abs().log10().floor().max(0.0) as i32).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_lengths() {
        assert_eq!(round_length(0.37), 0.2);
        assert_eq!(round_length(7.0), 5.0);
        assert_eq!(round_length(1.0), 1.0);
        assert_eq!(round_length(19.9), 10.0);
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(2.0), "2");
        assert_eq!(short(0.5), "0.5");
        assert_eq!(short(1.25), "1.25");
        assert_eq!(short(123.456), "123.5");
        assert_eq!(short(0.0002), "2.000e-4");
    }
}
