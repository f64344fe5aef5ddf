//! Upward pass: cell geometry, mass, centre of mass, traceless quadrupole, and the effective
//! opening radius S_eff of the chosen criterion.
//!
//! Leaves are summed directly from their particles (in parallel); internal cells combine their
//! children with the parallel-axis theorem, visiting cells in reverse preorder so that children
//! are done before parents. Sums run in float64 and are stored in float32.

use super::{Cells, TreeParams};
use crate::sfc::{cell_of_key, GridBox};
use crate::walk::mac::{s_eff, Mac};
use rayon::prelude::*;

/// Mass, centre of mass and quadrupole of one cell in float64.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Moment {
    mass: f64,
    com: [f64; 3],
    quad: [f64; 6],
    /// Σ m |y|² about the centre of mass.
    trace: f64,
}

/// Traceless quadrupole contribution m (3 y yᵀ − |y|² I) of a point mass at offset `y`.
#[inline]
fn point_quad(m: f64, y: [f64; 3]) -> [f64; 6] {
    let r2 = y[0] * y[0] + y[1] * y[1] + y[2] * y[2];
    [
        m * (3.0 * y[0] * y[0] - r2),
        m * (3.0 * y[1] * y[1] - r2),
        m * (3.0 * y[2] * y[2] - r2),
        m * 3.0 * y[0] * y[1],
        m * 3.0 * y[0] * y[2],
        m * 3.0 * y[1] * y[2],
    ]
}

/// Centre of mass of weighted points; the plain mean where all weights are zero (massless cells
/// still need a position for the walk).
fn centre(points: impl Iterator<Item = ([f64; 3], f64)> + Clone) -> (f64, [f64; 3]) {
    let (mut m, mut c, mut n, mut mean) = (0.0, [0.0; 3], 0.0, [0.0; 3]);
    for (p, w) in points {
        m += w;
        n += 1.0;
        for k in 0..3 {
            c[k] += w * p[k];
            mean[k] += p[k];
        }
    }
    if m > 0.0 {
        (m, c.map(|v| v / m))
    } else {
        (0.0, mean.map(|v| v / n))
    }
}

/// The moment of the particles of one leaf.
pub(super) fn leaf_moment(particles: &[[f32; 4]]) -> Moment {
    let pts = particles
        .iter()
        .map(|p| ([p[0] as f64, p[1] as f64, p[2] as f64], p[3] as f64));
    let (mass, com) = centre(pts.clone());
    let mut quad = [0.0; 6];
    let mut trace = 0.0;
    for (p, m) in pts {
        let y = [p[0] - com[0], p[1] - com[1], p[2] - com[2]];
        let q = point_quad(m, y);
        (0..6).for_each(|k| quad[k] += q[k]);
        trace += m * (y[0] * y[0] + y[1] * y[1] + y[2] * y[2]);
    }
    Moment {
        mass,
        com,
        quad,
        trace,
    }
}

impl Moment {
    /// The moment cell `c` of `cells` holds (float32, widened).
    pub(crate) fn of_cell(cells: &Cells, c: usize) -> Self {
        let cm = cells.com_mass[c];
        Moment {
            mass: cm[3] as f64,
            com: [cm[0] as f64, cm[1] as f64, cm[2] as f64],
            quad: cells.quad[c].map(f64::from),
            trace: cells.trace[c] as f64,
        }
    }

    /// Centre of mass and mass as a cell stores them (float32).
    pub(crate) fn com_mass(&self) -> [f32; 4] {
        let c = self.com;
        [c[0] as f32, c[1] as f32, c[2] as f32, self.mass as f32]
    }

    /// The quadrupole as a cell stores it (float32).
    pub(crate) fn quad32(&self) -> [f32; 6] {
        self.quad.map(|v| v as f32)
    }

    /// The trace as a cell stores it (float32).
    pub(crate) fn trace32(&self) -> f32 {
        self.trace as f32
    }
}

/// The moment of a cell from its children's (parallel-axis theorem).
pub(crate) fn combine(children: &[Moment]) -> Moment {
    let (mass, com) = centre(children.iter().map(|c| (c.com, c.mass)));
    let mut quad = [0.0; 6];
    let mut trace = 0.0;
    for c in children {
        let d = [c.com[0] - com[0], c.com[1] - com[1], c.com[2] - com[2]];
        let q = point_quad(c.mass, d);
        (0..6).for_each(|k| quad[k] += c.quad[k] + q[k]);
        trace += c.trace + c.mass * (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    }
    Moment {
        mass,
        com,
        quad,
        trace,
    }
}

/// The value of cell `c` (index into `done`, which holds the values of every cell of the slice
/// after `c`, `offset` being the slice's first cell): `leaf(c)` for a leaf, `combine` of its
/// children's values otherwise.
fn cell_value<T: Copy + Default>(
    cells: &Cells,
    c: usize,
    done: &[T],
    offset: usize,
    leaf: &impl Fn(usize) -> T,
    combine: &impl Fn(&[T]) -> T,
) -> T {
    if cells.is_leaf(c) {
        return leaf(c);
    }
    let mut kids = [T::default(); 8];
    let mut k = c + 1;
    for kid in kids.iter_mut().take(cells.nchild[c] as usize) {
        *kid = done[k - offset];
        k += cells.subtree[k] as usize;
    }
    combine(&kids[..cells.nchild[c] as usize])
}

/// A value for every cell, bottom-up: `leaf(c)` for a leaf `c`, `combine` of the children's
/// values for the others. Subtrees of at most a chunk of cells are contiguous in preorder and
/// independent, so each is done bottom-up (reverse preorder) by one rayon task; the few cells
/// above them follow, again in reverse preorder.
pub(super) fn upward<T: Copy + Default + Send + Sync>(
    cells: &Cells,
    leaf: impl Fn(usize) -> T + Sync,
    combine: impl Fn(&[T]) -> T + Sync,
) -> Vec<T> {
    let n = cells.len();
    let chunk = (n / (8 * rayon::current_num_threads())).max(1024);
    let mut roots = Vec::new();
    let mut top = Vec::new();
    let mut c = 0;
    while c < n {
        if cells.subtree[c] as usize <= chunk {
            roots.push(c);
            c += cells.subtree[c] as usize;
        } else {
            top.push(c);
            c += 1;
        }
    }
    // Allocated and touched in parallel: at 2^28 particles this is gigabytes of fresh pages.
    let mut values: Vec<T> = (0..n).into_par_iter().map(|_| T::default()).collect();
    // Disjoint slices, one per task subtree.
    let mut slices = Vec::with_capacity(roots.len());
    let mut rest = &mut values[..];
    let mut at = 0;
    for &r in &roots {
        let (_, tail) = rest.split_at_mut(r - at);
        let (mine, tail) = tail.split_at_mut(cells.subtree[r] as usize);
        slices.push((r, mine));
        rest = tail;
        at = r + cells.subtree[r] as usize;
    }
    slices.into_par_iter().for_each(|(r, mine)| {
        for i in (0..mine.len()).rev() {
            mine[i] = cell_value(cells, r + i, mine, r, &leaf, &combine);
        }
    });
    for &c in top.iter().rev() {
        values[c] = cell_value(cells, c, &values, 0, &leaf, &combine);
    }
    values
}

/// The particles of cell `c` in the sorted particle arrays.
pub(super) fn cell_particles<'a>(
    cells: &Cells,
    particles: &'a [[f32; 4]],
    c: usize,
) -> &'a [[f32; 4]] {
    let a = cells.first[c] as usize;
    &particles[a..a + cells.count[c] as usize]
}

/// Stores the float64 moments `moments` (one per cell) in float32 into `cells`.
pub(super) fn store_moments(cells: &mut Cells, moments: &[Moment]) {
    cells.com_mass = moments.par_iter().map(Moment::com_mass).collect();
    cells.quad = moments.par_iter().map(Moment::quad32).collect();
    cells.trace = moments.par_iter().map(Moment::trace32).collect();
}

/// Fills geometry (`boxes`), moments (`com_mass`, `quad`) and `s_eff` of every cell.
/// `particles` and `keys` are the key-sorted particles (frame positions) and keys the topology
/// was built on, on the curve of `params.order`, in `grid` (the frame's
/// [`crate::sfc::Frame::key_grid`]); `params` also gives the criterion and θ.
pub fn compute_moments(
    cells: &mut Cells,
    particles: &[[f32; 4]],
    keys: &[u64],
    grid: &GridBox,
    params: &TreeParams,
) {
    let n = cells.len();
    // Geometry from the key of each cell's first particle (exactly the grid cell the tree was
    // built on), truncated to the cell's level.
    cells.boxes = (0..n)
        .into_par_iter()
        .map(|c| {
            let level = cells.level[c] as u32;
            let side = grid.cell_side(level);
            let g = cell_of_key(params.order, keys[cells.first[c] as usize]);
            let shift = 21 - level;
            let corner = |k: usize| ((g[k] >> shift) as f64 + 0.5) * side;
            let o = grid.origin;
            [
                (o.x + corner(0)) as f32,
                (o.y + corner(1)) as f32,
                (o.z + corner(2)) as f32,
                (0.5 * side) as f32,
            ]
        })
        .collect();
    let moments = upward(
        cells,
        |c| leaf_moment(cell_particles(cells, particles, c)),
        combine,
    );
    store_moments(cells, &moments);
    update_s_eff(cells, params.mac, params.theta);
}

/// Computes S_eff of every cell for a criterion and opening angle from geometry and moments.
pub(super) fn update_s_eff(cells: &mut Cells, mac: Mac, theta: f32) {
    cells.s_eff = (0..cells.len())
        .into_par_iter()
        .map(|c| box_s_eff(mac, theta, cells.boxes[c], cells.com_mass[c]))
        .collect();
}

/// S_eff (length², frame units) of a cell of box `b` (centre, half side) and centre of mass
/// `cm`, for criterion `mac` and opening angle `theta`, in float32 (`cell_s_eff` of
/// `cuda/build.cu`).
pub(crate) fn box_s_eff(mac: Mac, theta: f32, b: [f32; 4], cm: [f32; 4]) -> f32 {
    let s = ((b[0] - cm[0]).powi(2) + (b[1] - cm[1]).powi(2) + (b[2] - cm[2]).powi(2)).sqrt();
    s_eff(mac, theta, 2.0 * b[3], s)
}
