//! The grouped CPU walk in a periodic box (`WalkParams::periodic`): the nearest image of every
//! source plus the Ewald correction of all the others ([`super::ewald`]), by the rules both
//! backends follow (frame units, period 1; `bc`, `bh` the centre and half-extents of a group's
//! targets' box; s ∈ ℤ³ a shift by whole periods, `round` half away from zero):
//!
//! - every cell tested against a group is taken at its image nearest the group, its centre of
//!   mass at cm − s with s = round(cm − bc), and opened or accepted as that image
//!   ([`Criterion::accepts_image`]: a cell of half side above
//!   [`MAX_ACCEPTED_HALF`](super::ewald::MAX_ACCEPTED_HALF) is always opened);
//! - an accepted cell adds its multipole from cm − s and one Ewald monopole, its mass at
//!   D = bc − (cm − s), and the isotropic second-order term of its spread to the potential,
//!   [`SPREAD_POTENTIAL`] · T (T = Σ m |y|², the cell's trace);
//! - an opened leaf of half side at most [`MAX_LEAF_MONOPOLE_HALF`] adds its particles moved by
//!   the leaf's s and one Ewald monopole of its mass at its cm's D (and its spread's term, as a
//!   cell's); a larger one adds each of its particles j at x_j − s_j, s_j = round(x_j − bc),
//!   with its own monopole at D = bc − (x_j − s_j);
//! - the monopoles' sums C = Σ M f(D), J = Σ M J(D), Ψ = Σ M ψ(D) + Σ [`SPREAD_POTENTIAL`] · T
//!   (float64, summed after the walk by [`EwaldTable::sum`]) reach each target at x to first
//!   order, a += C + J δ, φ += Ψ − C·δ with δ = x − bc (the target's own term included: its
//!   ψ(0) is the self-energy of its images).
//!
//! The interaction list of a group is one list per shift; a list of shift s is evaluated by the
//! open walk's list evaluation with the targets moved by +s (x + s against sources y is x
//! against y − s). Groups must be small ([`MAX_GROUP_HALF`](super::ewald::MAX_GROUP_HALF),
//! [`super::groups::within_half`]): the correction's first-order carry errs as bh².

use super::cpu::{evaluate, for_each_group, group_box, List, Own, WalkOutput, WalkParams};
use super::ewald::{table, Correction, EwaldTable, MAX_LEAF_MONOPOLE_HALF, SPREAD_POTENTIAL};
use super::groups::Group;
use super::mac::Criterion;
use crate::tree::{Cells, Tree};
use glam::DVec3;

/// One group's interaction lists, one per image shift, and its Ewald monopoles.
#[derive(Default)]
struct Images {
    /// Shifts s (whole periods per axis) and their lists: sources taken at their position − s.
    /// Kept between groups (emptied), so that their storage is reused.
    lists: Vec<([f32; 3], List)>,
    /// The group's Ewald monopoles: separation D (x, y, z) and mass.
    monopoles: Vec<[f32; 4]>,
    /// Σ T over the monopoles that stand for several particles (accepted cells, small opened
    /// leaves), T = Σ m |y|² about their centres of mass: their spread's potential term is
    /// [`SPREAD_POTENTIAL`] times it.
    spread: f64,
}

impl Images {
    fn clear(&mut self) {
        for (_, list) in &mut self.lists {
            list.clear();
        }
        self.monopoles.clear();
        self.spread = 0.0;
    }

    /// The list of shift `s`.
    #[inline]
    fn list(&mut self, s: [f32; 3]) -> &mut List {
        let at = match self.lists.iter().position(|(t, _)| *t == s) {
            Some(at) => at,
            None => {
                self.lists.push((s, List::default()));
                self.lists.len() - 1
            }
        };
        &mut self.lists[at].1
    }

    /// Adds the Ewald monopole of mass `m` at separation `d` (target minus source, the nearest
    /// image).
    #[inline]
    fn correct(&mut self, m: f32, d: [f32; 3]) {
        self.monopoles.push([d[0], d[1], d[2], m]);
    }

    /// Adds the Ewald monopole of cell `c` of `cells` taken as one mass `m` at separation `d`,
    /// and its spread (its trace).
    #[inline]
    fn correct_cell(&mut self, cells: &Cells, c: usize, m: f32, d: [f32; 3]) {
        self.correct(m, d);
        self.spread += cells.trace[c] as f64;
    }

    /// The sums of the group's Ewald terms: the monopoles' by `table`, the potential's with
    /// the spread's term.
    fn sum(&self, table: &EwaldTable) -> Correction {
        let mut c = table.sum(&self.monopoles);
        c.pot += SPREAD_POTENTIAL * self.spread;
        c
    }

    /// Particle–particle and particle–cell interactions per target of the lists.
    fn counts(&self) -> (u32, u32) {
        self.lists.iter().fold((0, 0), |(np, nm), (_, l)| {
            (np + l.p2p(), nm + l.cells.len() as u32)
        })
    }
}

/// What one thread keeps between its groups.
#[derive(Default)]
struct Scratch {
    images: Images,
    /// A group's targets moved by a shift, their results from one list, and their sums over
    /// the lists.
    moved: Vec<[f32; 4]>,
    part: Vec<[f32; 4]>,
    sums: Vec<[f64; 4]>,
}

/// Forces on `targets` (x, y, z, |a_old|, frame units) from `tree` in a periodic box of
/// period 1, by the grouped walk over `groups` (consecutive ranges covering all targets in
/// order, each within [`MAX_GROUP_HALF`](super::ewald::MAX_GROUP_HALF) unless of one target);
/// `own` says which of the tree's particles the targets are. Accelerations and potentials
/// with G = 1, as [`super::cpu::grouped_walk`]; the Ewald terms are not counted as
/// interactions.
pub(super) fn grouped_walk(
    tree: &Tree,
    targets: &[[f32; 4]],
    own: Own,
    groups: &[Group],
    p: &WalkParams,
) -> WalkOutput {
    let table = table();
    for_each_group(targets, own, groups, |sc: &mut Scratch, tg, own, acc| {
        let bc = collect(tree, tg, &p.criterion, &mut sc.images);
        let ewald = sc.images.sum(table);
        let counts = sc.images.counts();
        evaluate_images(tree, tg, own, (bc, &ewald), p, sc, acc);
        counts
    })
}

/// The shift of a source at `x` for a group centred at `bc`: whole periods per axis that take
/// it to its image nearest the group, round(x − bc) half away from zero.
#[inline(always)]
fn shift(x: [f32; 4], bc: [f32; 3]) -> [f32; 3] {
    [0, 1, 2].map(|k| round(x[k] - bc[k]))
}

/// `x` rounded to a whole number, half away from zero, as `f32::round` (without its library
/// call on x86-64's baseline), for |x| < 2³¹ (a zero comes out +0).
#[inline(always)]
fn round(x: f32) -> f32 {
    let whole = x as i32 as f32;
    let rest = x - whole;
    whole + ((rest >= 0.5) as i32 - (rest <= -0.5) as i32) as f32
}

/// The separation of the group's centre `bc` from a source at `x` moved by −`s` (target minus
/// source, frame units).
#[inline(always)]
fn separation(bc: [f32; 3], x: [f32; 4], s: [f32; 3]) -> [f32; 3] {
    [0, 1, 2].map(|k| bc[k] - (x[k] - s[k]))
}

/// Walks the tree once for the group `tg`, filling `im` with its lists per shift and its Ewald
/// monopoles; returns the group's centre.
fn collect(tree: &Tree, tg: &[[f32; 4]], crit: &Criterion, im: &mut Images) -> [f32; 3] {
    im.clear();
    let (bc, bh, amin) = group_box(tg);
    let cells = &tree.cells;
    let nc = cells.len();
    let mut c = 0;
    while c < nc {
        let cm = cells.com_mass[c];
        let s = shift(cm, bc);
        if crit.accepts_image(cells, c, s, bc, bh, amin) {
            im.list(s).cells.push(c as u32);
            im.correct_cell(cells, c, cm[3], separation(bc, cm, s));
            c += cells.subtree[c] as usize;
            continue;
        }
        if cells.is_leaf(c) {
            let a = cells.first[c];
            let b = a + cells.count[c];
            if cells.boxes[c][3] <= MAX_LEAF_MONOPOLE_HALF {
                im.list(s).push_range(a, b);
                im.correct_cell(cells, c, cm[3], separation(bc, cm, s));
            } else {
                for j in a..b {
                    let x = tree.particles[j as usize];
                    let sj = shift(x, bc);
                    im.list(sj).push_range(j, j + 1);
                    im.correct(x[3], separation(bc, x, sj));
                }
            }
        }
        c += 1;
    }
    bc
}

/// Evaluates the lists of `sc.images` for every target of the group `tg` (`own`: which of the
/// tree's particles they are), each list with the targets moved by its shift, and adds the
/// group's Ewald sums (`bc`, `ewald`: the group's centre and C, J, Ψ there) carried to each
/// target; writes `acc`.
fn evaluate_images(
    tree: &Tree,
    tg: &[[f32; 4]],
    own: Own,
    (bc, ewald): ([f32; 3], &Correction),
    p: &WalkParams,
    sc: &mut Scratch,
    acc: &mut [[f32; 4]],
) {
    let Scratch {
        images,
        moved,
        part,
        sums,
    } = sc;
    sums.clear();
    sums.resize(tg.len(), [0.0; 4]);
    part.resize(tg.len(), [0.0; 4]);
    for (s, list) in images.lists.iter() {
        if list.ranges.is_empty() && list.cells.is_empty() {
            continue;
        }
        moved.clear();
        moved.extend(
            tg.iter()
                .map(|t| [t[0] + s[0], t[1] + s[1], t[2] + s[2], t[3]]),
        );
        evaluate(tree, moved, own, list, p, part);
        for (a, b) in sums.iter_mut().zip(part.iter()) {
            for k in 0..4 {
                a[k] += b[k] as f64;
            }
        }
    }
    let centre = DVec3::new(bc[0] as f64, bc[1] as f64, bc[2] as f64);
    for ((out, a), t) in acc.iter_mut().zip(sums.iter()).zip(tg) {
        let x = DVec3::new(t[0] as f64, t[1] as f64, t[2] as f64);
        let (f, psi) = ewald.at_offset(x - centre);
        *out = [
            (a[0] + f.x) as f32,
            (a[1] + f.y) as f32,
            (a[2] + f.z) as f32,
            (a[3] + psi) as f32,
        ];
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod rounding {
    /// [`super::round`] is `f32::round` (up to the sign of zero) on halves, near-halves and
    /// the range of shifts.
    #[test]
    fn round_is_half_away_from_zero() {
        let mut xs = vec![
            0.5f32, -0.5, 1.5, -1.5, 2.5, -2.5, 0.0, -0.0, 1e-30, 7.0, -7.0,
        ];
        for h in [0.5f32, 1.5, 2.5] {
            for x in [h.next_down(), h.next_up(), -h.next_down(), -h.next_up()] {
                xs.push(x);
            }
        }
        xs.extend((0..20_000).map(|i| (i as f32 - 10_000.0) * 3.1e-4));
        for x in xs {
            assert_eq!(super::round(x), x.round(), "{x}");
        }
    }
}
