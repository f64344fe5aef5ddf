//! Cell-opening criteria (multipole acceptance criteria, MAC).
//!
//! A cell of side `l`, mass `M`, centre of mass at distance `d` from the target (for a group of
//! targets: the smallest distance from the group's bounding box) is *accepted*, i.e. its multipole
//! expansion is used instead of its contents, when
//! - `BarnesHut`:    l / d < θ                       (S_eff = (l/θ)²)
//! - `Modified`:     l / θ + s < d  (seeds 000/004)  (S_eff = (l/θ + s)², s = |centre − centre of mass|)
//! - `Acceleration`: G M l² / d⁴ < α |a_old|         (GADGET, seed 003; needs previous accelerations)
//!
//! Every criterion also opens a cell whose box overlaps the target (group) box, so a cell is never
//! accepted for a particle inside it, whatever θ or α. The one exception is a cell with S_eff < 0:
//! a LET multipole its sending rank has already accepted for every particle of this rank, which a
//! group box spanning several of this rank's target boxes must not reopen (it has no contents).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which opening criterion the walk uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mac {
    /// Classic Barnes–Hut: accept when l/d < θ.
    BarnesHut,
    /// Modified criterion of seeds 000/004: accept when l/θ + s < d (the default).
    Modified,
    /// Relative acceleration criterion (GADGET-2/4, GOTHIC): accept when M l²/d⁴ < α|a_old|.
    Acceleration,
}

impl Mac {
    /// The names accepted on the command line and in configs.
    pub const NAMES: [&'static str; 3] = ["bh", "modified", "accel"];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Mac::BarnesHut => "bh",
            Mac::Modified => "modified",
            Mac::Acceleration => "accel",
        }
    }
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mac {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "bh" | "barnes-hut" => Ok(Mac::BarnesHut),
            "modified" => Ok(Mac::Modified),
            "accel" | "acceleration" => Ok(Mac::Acceleration),
            _ => Err(Error::unknown_name("opening criterion", s, &Mac::NAMES)),
        }
    }
}

/// The effective squared opening radius of a cell for the geometric criteria: the cell is
/// accepted when the squared distance exceeds it. `l` is the cell side, `s` the offset of the
/// centre of mass from the geometric centre (length units).
pub fn s_eff(mac: Mac, theta: f32, l: f32, s: f32) -> f32 {
    match mac {
        Mac::BarnesHut => (l / theta) * (l / theta),
        // The acceleration criterion is evaluated per target; its geometric fallback (used only
        // for the first, bootstrap walk) is the modified criterion.
        Mac::Modified | Mac::Acceleration => (l / theta + s) * (l / theta + s),
    }
}

use super::ewald::MAX_ACCEPTED_HALF;
use crate::tree::Cells;

/// An opening criterion with its parameters, ready to test cells against a target box.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Criterion {
    /// Which criterion. For [`Mac::BarnesHut`] and [`Mac::Modified`] θ is already folded into
    /// the cells' S_eff.
    pub mac: Mac,
    /// Tolerance α of the acceleration criterion.
    pub alpha: f32,
    /// Gravitational constant (the old accelerations include it).
    pub g: f32,
}

impl Criterion {
    /// True when cell `c` may be used as a multipole for every target in the box centred at `bc`
    /// with half-extents `bh` (a single particle: `bh = 0`). `amin` is the smallest previous
    /// acceleration magnitude of the targets (only read by the acceleration criterion).
    #[inline(always)]
    pub fn accepts(&self, cells: &Cells, c: usize, bc: [f32; 3], bh: [f32; 3], amin: f32) -> bool {
        // A LET multipole that its sender already checked against every target box of this
        // rank (see `lets::wire::make_terminal`): accepted whatever this group's box.
        if cells.s_eff[c] < 0.0 {
            return true;
        }
        let [cx, cy, cz, h] = cells.boxes[c];
        self.accepts_box(
            cells,
            c,
            [cx, cy, cz],
            h,
            cells.com_mass[c],
            bc,
            bh,
            amin,
            f32::abs,
        )
    }

    /// [`Criterion::accepts`] in a periodic walk (frame units, period 1): for the image of cell
    /// `c` moved by −`s` (box centre − s, centre of mass − s; `s` whole box sides per axis, the
    /// walk's shift of the cell). A cell of half side above [`MAX_ACCEPTED_HALF`] is never
    /// accepted, except a LET multipole its sender accepted (S_eff < 0).
    #[inline(always)]
    pub fn accepts_image(
        &self,
        cells: &Cells,
        c: usize,
        s: [f32; 3],
        bc: [f32; 3],
        bh: [f32; 3],
        amin: f32,
    ) -> bool {
        if let Some(verdict) = periodic_verdict(cells, c) {
            return verdict;
        }
        let [cx, cy, cz, h] = cells.boxes[c];
        let [mx, my, mz, m] = cells.com_mass[c];
        let centre = [cx - s[0], cy - s[1], cz - s[2]];
        let cm = [mx - s[0], my - s[1], mz - s[2], m];
        self.accepts_box(cells, c, centre, h, cm, bc, bh, amin, f32::abs)
    }

    /// The opening test of a periodic walk (period 1) for a whole box of targets centred at
    /// `bc` with half-extents `bh` (the LET export's test of a destination's box): the test of
    /// [`Criterion::accepts`] on the separations folded to the nearest image per axis,
    /// |x − round(x)| (the box's extent along an axis is an interval of the circle), so that a
    /// cell accepted for a box is accepted for every target group inside it whatever image the
    /// group takes. The rules of [`Criterion::accepts_image`] hold: a cell of half side above
    /// [`MAX_ACCEPTED_HALF`] is never accepted, a LET multipole its sender accepted always.
    #[inline(always)]
    pub fn accepts_periodic(
        &self,
        cells: &Cells,
        c: usize,
        bc: [f32; 3],
        bh: [f32; 3],
        amin: f32,
    ) -> bool {
        if let Some(verdict) = periodic_verdict(cells, c) {
            return verdict;
        }
        let [cx, cy, cz, h] = cells.boxes[c];
        let fold = |x: f32| (x - x.round()).abs();
        self.accepts_box(
            cells,
            c,
            [cx, cy, cz],
            h,
            cells.com_mass[c],
            bc,
            bh,
            amin,
            fold,
        )
    }

    /// The test of [`Criterion::accepts`] for cell `c` with its box centre `centre`, half side
    /// `h` and centre of mass and mass `cm` given (those of the cell or of one of its images),
    /// `distance` taking a separation along an axis (cell minus targets' centre) to the
    /// distance that counts: `f32::abs`, or the distance to the nearest image.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn accepts_box(
        &self,
        cells: &Cells,
        c: usize,
        centre: [f32; 3],
        h: f32,
        cm: [f32; 4],
        bc: [f32; 3],
        bh: [f32; 3],
        amin: f32,
        distance: impl Fn(f32) -> f32,
    ) -> bool {
        let overlap = (0..3).all(|k| distance(centre[k] - bc[k]) <= h + bh[k]);
        if overlap {
            return false;
        }
        let mut d2 = 0.0f32;
        for k in 0..3 {
            let d = (distance(cm[k] - bc[k]) - bh[k]).max(0.0);
            d2 += d * d;
        }
        self.accepts_at(cells, c, h, cm[3], d2, amin)
    }

    /// The criterion proper for cell `c` of half side `h` and mass `m` at squared distance
    /// `d2` from the targets' box (whose overlap with the cell is already excluded).
    #[inline(always)]
    pub fn accepts_at(&self, cells: &Cells, c: usize, h: f32, m: f32, d2: f32, amin: f32) -> bool {
        match self.mac {
            Mac::Acceleration => {
                let l2 = 4.0 * h * h;
                self.g * m * l2 < self.alpha * amin * d2 * d2
            }
            Mac::BarnesHut | Mac::Modified => d2 > cells.s_eff[c],
        }
    }
}

/// The periodic walk's verdict on cell `c` before any geometry, when there is one: accepted
/// for a LET multipole its sender accepted (S_eff < 0), opened for a cell of half side above
/// [`MAX_ACCEPTED_HALF`].
#[inline(always)]
fn periodic_verdict(cells: &Cells, c: usize) -> Option<bool> {
    if cells.s_eff[c] < 0.0 {
        Some(true)
    } else if cells.boxes[c][3] > MAX_ACCEPTED_HALF {
        Some(false)
    } else {
        None
    }
}
