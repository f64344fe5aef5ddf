//! Writing a finished picture: an RGB buffer as PNG, or SVG text, atomically.

use crate::error::{Error, Result};
use crate::io::write_atomic;
use std::io::{self, Write};
use std::path::Path;

/// The picture formats hinoki writes, chosen by the output file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// Portable Network Graphics (`.png`), 8-bit RGB.
    Png,
    /// Scalable Vector Graphics (`.svg`).
    Svg,
}

impl Format {
    /// The format `path`'s extension names (case-insensitive), or an error naming the file.
    pub(crate) fn of(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match ext.as_deref() {
            Some("png") => Ok(Self::Png),
            Some("svg") => Ok(Self::Svg),
            _ => Err(Error::input(format!(
                "{}: unknown picture format (the file name must end in .png or .svg)",
                path.display()
            ))),
        }
    }
}

/// Writes `rgb` (row by row from the top, 3 bytes per pixel) as a `width` × `height` PNG.
pub(crate) fn write_png(path: &Path, rgb: &[u8], width: u32, height: u32) -> Result<()> {
    write_atomic(path, |w| {
        let mut encoder = png::Encoder::new(w, width, height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(io::Error::other)?;
        writer.write_image_data(rgb).map_err(io::Error::other)?;
        writer.finish().map_err(io::Error::other)
    })
}

/// Writes SVG text.
pub(crate) fn write_svg(path: &Path, svg: &str) -> Result<()> {
    write_atomic(path, |w| w.write_all(svg.as_bytes()))
}

/// The narrowest axis range hinoki draws, relative to the larger magnitude of its ends: a
/// narrower one is not resolved by float64 pixel coordinates, and plotters' search for tick
/// marks does not end on it (nor on infinite ends or widths).
const MIN_RELATIVE_WIDTH: f64 = 1e-9;

/// Checks that the linear axis range `lo..hi` (in the axis' units) can be drawn: finite ends,
/// a finite width `hi - lo` > 0 and at least [`MIN_RELATIVE_WIDTH`] of the larger of `|lo|`
/// and `|hi|`. The error names the range as `what` and gives its ends.
pub(crate) fn check_range(what: &str, lo: f64, hi: f64) -> Result<()> {
    let width = hi - lo;
    let finite = lo.is_finite() && hi.is_finite() && width.is_finite();
    if finite && width > 0.0 && width >= MIN_RELATIVE_WIDTH * lo.abs().max(hi.abs()) {
        return Ok(());
    }
    Err(Error::input(format!(
        "{what} [{lo:e}, {hi:e}] cannot be drawn: its ends and width must be finite, and the \
         width at least {MIN_RELATIVE_WIDTH:e} of the larger end"
    )))
}

/// A plotters drawing error as a hinoki error naming the picture being drawn.
pub(crate) fn drawing_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::io(path, format!("cannot draw the picture: {e}"))
}
