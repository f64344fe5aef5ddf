//! `hinoki plot power`: the matter power spectrum of a periodic cosmological snapshot
//! ([`crate::cosmology::measure`]) against linear theory and the Halofit nonlinear spectrum
//! ([`Halofit`], Takahashi et al. 2012) at its redshift, log-log, and the same numbers per
//! shell as JSON.
//!
//! Units: k in h/Mpc, P in (Mpc/h)³. The snapshot's lengths are converted with its recorded
//! unit (`UnitLength_in_cm`, lengths taken per h as GADGET's are), or taken as kpc/h (GADGET's
//! default, hinoki's `ics cosmology`) with a warning when the file records none. Linear theory
//! is D(a)² P(k) with the Eisenstein & Hu spectrum of the header's Ω_m, Ω_Λ, Ω_b (0.045 with a
//! warning when the header has none) and h, and σ8 and n_s from the options (the header does
//! not carry them); a is the header's `Time`. Halofit takes the same linear spectrum; where it
//! does not apply (a closed universe, Ω_Λ < 0) it is left out with a warning, and where the
//! snapshot has no nonlinear scale (σ < 1 on every scale the fit covers: high redshift) it
//! equals linear theory and is not drawn.

use super::font::{draw_legend, text};
use super::map::short;
use super::picture::{drawing_error, write_png, write_svg, Format};
use crate::cosmology::field::MAX_GRID;
use crate::cosmology::measure::{default_grid, measured_power, PowerBin, ShotNoise};
use crate::cosmology::{Cosmology, Halofit, PowerSpectrum, MIN_RADIUS};
use crate::error::{Error, Result};
use crate::io::snapshot::read_periodic_snapshot;
use crate::io::{read_snapshot_header, SnapshotUnits};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

/// One Mpc in cm.
const MPC_IN_CM: f64 = 3.085678e24;
/// Ω_b taken when the header has none.
pub const DEFAULT_OMEGA_B: f64 = 0.045;

/// What `hinoki plot power` takes besides the snapshot and the picture.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerOptions {
    /// σ8 of the linear spectrum today.
    pub sigma8: f64,
    /// The primordial spectral index n_s.
    pub n_s: f64,
    /// The grid side (a power of two), or [`default_grid`] of the particle number.
    pub grid: Option<usize>,
    /// Whether the Poisson shot noise is subtracted.
    pub shot_noise: ShotNoise,
    /// Width of the picture in pixels (the height is 3/4 of it).
    pub width: u32,
}

/// The measured spectrum, the linear and Halofit ones and what the picture says about them.
struct Spectra {
    measured: Vec<PowerBin>,
    linear: Vec<(f64, f64)>,
    /// The Halofit curve, when it applies and differs from linear theory.
    halofit: Option<Vec<(f64, f64)>>,
    shot: f64,
    k_range: (f64, f64),
    p_range: (f64, f64),
    redshift: f64,
}

/// Reads the snapshot at `input`, measures its power spectrum and draws it with linear theory
/// and Halofit to `out` (`.png` or `.svg`, written atomically). Returns the numbers as one JSON
/// object (`hinoki plot power --json`): `redshift`, `a`, `box_size` (Mpc/h), `grid`,
/// `particles`, `sigma8`, `n_s`, `shot_noise` ((Mpc/h)³) and `shot_noise_subtracted`;
/// `halofit`, null where the fit does not apply, else `k_sigma` (h/Mpc), `n_eff` and `C`,
/// null where there is no nonlinear scale; and `shells`, one per measured shell in order of
/// k: `k` (h/Mpc), `modes`, `power`, `linear`, `halofit` ((Mpc/h)³) and
/// `power_over_halofit` (the last two null where the fit does not apply). Fails with a
/// one-line error for a snapshot that is not periodic and cosmological (BoxSize 0, or no
/// Ω_m), bad options, or a picture that cannot be written.
pub fn plot_power(input: &Path, out: &Path, opts: &PowerOptions) -> Result<Value> {
    let format = Format::of(out)?;
    if !(300..=8000).contains(&opts.width) {
        return Err(Error::input(format!(
            "--width must be 300 ..= 8000 pixels, got {}",
            opts.width
        )));
    }
    if let Some(n) = opts.grid {
        if !(n.is_power_of_two() && (2..=MAX_GRID).contains(&n)) {
            return Err(Error::input(format!(
                "--grid N = {n} must be a power of two from 2 to {MAX_GRID}"
            )));
        }
    }
    let header = read_snapshot_header(input)?;
    let c = header.cosmology;
    if c.box_size.is_nan() || c.box_size <= 0.0 {
        return Err(Error::input(format!(
            "{}: not a periodic cosmological snapshot (BoxSize {}): a power spectrum needs a \
             periodic box",
            input.display(),
            c.box_size
        )));
    }
    let named = |e: Error| Error::input(format!("{}: {}", input.display(), e.message));
    let cosmology =
        Cosmology::new(c.omega0, c.omega_lambda, c.hubble_param, 100.0).map_err(named)?;
    let omega_b = if c.omega_baryon > 0.0 {
        c.omega_baryon
    } else {
        tracing::warn!(
            "{}: no OmegaBaryon in the header, the linear spectrum takes Omega_b = {DEFAULT_OMEGA_B}",
            input.display()
        );
        DEFAULT_OMEGA_B
    };
    let power = PowerSpectrum::new(&cosmology, omega_b, opts.n_s, opts.sigma8).map_err(named)?;
    let a = header.time;
    let growth = cosmology.growth(a).map_err(named)?;
    let growth2 = growth * growth;
    let redshift = 1.0 / a - 1.0;
    let halofit = Halofit::new(&cosmology, &power, a)
        .inspect_err(|e| tracing::warn!("{}: no Halofit spectrum: {}", input.display(), e.message))
        .ok();
    let scale = halofit.as_ref().and_then(Halofit::scale);
    if halofit.is_some() && scale.is_none() {
        tracing::info!(
            "{}: sigma < 1 on every scale R >= {MIN_RADIUS} Mpc/h at z = {}: Halofit is linear \
             theory there and is not drawn",
            input.display(),
            short(redshift)
        );
    }
    let to_mpc = match header.units {
        Some(SnapshotUnits { length_in_cm, .. }) => length_in_cm / MPC_IN_CM,
        None => {
            tracing::warn!(
                "{}: no unit of length recorded, taking kpc/h (GADGET's default)",
                input.display()
            );
            SnapshotUnits::GADGET.length_in_cm / MPC_IN_CM
        }
    };
    let box_size = c.box_size * to_mpc;
    let (p, _) = read_periodic_snapshot(input)?;
    let grid = opts.grid.unwrap_or_else(|| default_grid(p.len()));
    let positions: Vec<_> = p.pos.iter().map(|x| *x * to_mpc).collect();
    let measured =
        measured_power(&positions, &p.mass, box_size, grid, opts.shot_noise).map_err(named)?;
    let total: f64 = p.mass.iter().sum();
    let shot = box_size.powi(3) * p.mass.iter().map(|m| m * m).sum::<f64>() / (total * total);
    let kf = 2.0 * std::f64::consts::PI / box_size;
    let nyquist = kf * grid as f64 / 2.0;
    let k_range = (0.9 * kf, 1.1 * nyquist);
    let steps = 200;
    let curve = |p: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
        (0..=steps)
            .map(|i| {
                let k = k_range.0 * (k_range.1 / k_range.0).powf(i as f64 / steps as f64);
                (k, p(k))
            })
            .collect()
    };
    let linear = curve(&|k| growth2 * power.power(k));
    let nonlinear = halofit
        .as_ref()
        .filter(|_| scale.is_some())
        .map(|h| curve(&|k| h.power(k)));
    let drawn = measured.iter().filter(|b| b.power > 0.0).count();
    if drawn * 2 < measured.len() {
        tracing::warn!(
            "{}: {} of {} shells have P <= 0 after subtracting the shot noise {} (Mpc/h)^3 and \
             are not drawn; a perturbed lattice (initial conditions) carries far less than \
             Poisson noise: --shot-noise keep",
            input.display(),
            measured.len() - drawn,
            measured.len(),
            short(shot)
        );
    }
    let values = measured
        .iter()
        .map(|b| b.power)
        .chain(linear.iter().map(|l| l.1))
        .chain(nonlinear.iter().flatten().map(|l| l.1))
        .chain([shot]);
    let p_range = log_range(values).ok_or_else(|| {
        Error::input(format!(
            "{}: the power spectrum has no positive finite values to draw",
            input.display()
        ))
    })?;
    let shells: Vec<Value> = measured
        .iter()
        .map(|b| {
            let nonlinear = halofit.as_ref().map(|h| h.power(b.k));
            json!({
                "k": b.k,
                "modes": b.modes,
                "power": b.power,
                "linear": growth2 * power.power(b.k),
                "halofit": nonlinear,
                "power_over_halofit": nonlinear.map(|p| b.power / p),
            })
        })
        .collect();
    let report = json!({
        "redshift": redshift,
        "a": a,
        "box_size": box_size,
        "grid": grid,
        "particles": p.len(),
        "sigma8": opts.sigma8,
        "n_s": opts.n_s,
        "shot_noise": shot,
        "shot_noise_subtracted": opts.shot_noise == ShotNoise::Subtract,
        "halofit": halofit.as_ref().map(|_| json!({
            "k_sigma": scale.map(|s| s.k_sigma),
            "n_eff": scale.map(|s| s.n_eff),
            "C": scale.map(|s| s.curvature),
        })),
        "shells": shells,
    });
    let spectra = Spectra {
        measured,
        linear,
        halofit: nonlinear,
        shot,
        k_range,
        p_range,
        redshift,
    };
    let size = (opts.width, opts.width * 3 / 4);
    match format {
        Format::Png => {
            let mut rgb = vec![0u8; 3 * (size.0 * size.1) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
                draw(&root, &spectra, opts).map_err(|e| drawing_error(out, e))?;
                root.present().map_err(|e| drawing_error(out, e))?;
            }
            write_png(out, &rgb, size.0, size.1)?;
        }
        Format::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
                draw(&root, &spectra, opts).map_err(|e| drawing_error(out, e))?;
                root.present().map_err(|e| drawing_error(out, e))?;
            }
            write_svg(out, &svg)?;
        }
    }
    tracing::info!(
        "drew the power spectrum of {} particles ({grid}^3 grid, box {} Mpc/h, z = {}) to {}",
        p.len(),
        short(box_size),
        short(spectra.redshift),
        out.display()
    );
    Ok(report)
}

/// A log axis over the positive finite `values`, a factor 2 of room each side; `None` when
/// there is none or the range leaves the normal float64 numbers.
fn log_range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let axis = (lo / 2.0, hi * 2.0);
    (hi > 0.0 && axis.0.is_normal() && axis.1.is_normal()).then_some(axis)
}

/// The chart: measured shells as points, linear theory and Halofit as lines, the shot noise
/// dashed.
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    s: &Spectra,
    opts: &PowerOptions,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let font = (f64::from(opts.width) / 50.0).max(10.0);
    let title = format!("matter power spectrum, z = {}", short(s.redshift));
    let mut chart = ChartBuilder::on(root)
        .caption(title, text(font * 1.1))
        .margin(font as u32)
        .x_label_area_size((font * 2.8) as u32)
        .y_label_area_size((font * 5.0) as u32)
        .build_cartesian_2d(
            (s.k_range.0..s.k_range.1).log_scale(),
            (s.p_range.0..s.p_range.1).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc("k [h/Mpc]")
        .y_desc("P(k) [(Mpc/h)³]")
        .label_style(text(font))
        .axis_desc_style(text(font))
        .x_label_formatter(&|k| short(*k))
        .y_label_formatter(&|y| format!("{y:.0e}"))
        .light_line_style(WHITE)
        .draw()?;
    let blue = RGBColor(31, 119, 180);
    let orange = RGBColor(255, 127, 14);
    let grey = RGBColor(127, 127, 127);
    let line = blue.stroke_width(2);
    chart
        .draw_series(LineSeries::new(s.linear.iter().copied(), line))?
        .label(format!(
            "linear theory (σ8 = {}, n_s = {})",
            short(opts.sigma8),
            short(opts.n_s)
        ))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], line));
    if let Some(halofit) = &s.halofit {
        let green = RGBColor(44, 160, 44).stroke_width(2);
        chart
            .draw_series(LineSeries::new(halofit.iter().copied(), green))?
            .label("Halofit (Takahashi+12)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], green));
    }
    let shot_style = grey.stroke_width(1);
    let (k0, k1) = s.k_range;
    chart
        .draw_series(DashedLineSeries::new(
            [(k0, s.shot), (k1, s.shot)],
            8,
            6,
            shot_style,
        ))?
        .label("shot noise V Σm²/(Σm)²")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], shot_style));
    let radius = (font / 4.0).max(2.0) as i32;
    let label = match opts.shot_noise {
        ShotNoise::Subtract => "measured, shot noise subtracted",
        ShotNoise::Keep => "measured",
    };
    chart
        .draw_series(
            s.measured
                .iter()
                .filter(|b| b.power > 0.0)
                .map(|b| Circle::new((b.k, b.power), radius, orange.filled())),
        )?
        .label(label)
        .legend(move |(x, y)| Circle::new((x + 10, y), radius, orange.filled()));
    draw_legend(&mut chart, font)?;
    Ok(())
}
