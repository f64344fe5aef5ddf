//! Domain decomposition: each rank owns one contiguous slice of the Peano–Hilbert curve.
//!
//! One decomposition (seed 001 Sec. 7.2, with its proposed cost weighting): the global bounding
//! box by allreduce → Peano–Hilbert keys in that box → weighted key samples from every rank
//! (allgatherv) → `P − 1` splitters → each particle sent to the owner of its key (alltoallv).
//! Weights are 1 per particle ([`Balance::Count`]) or the particle's interactions in the last
//! force evaluation ([`Balance::Cost`]), which balances the walk instead of the particle count.

pub mod gpu;
mod migrate;
mod splitters;

pub use migrate::Migration;
pub use splitters::{looked_at, owner, sample_index, sample_keys, shares, splitters, Sample};

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::sfc::GridBox;
use glam::DVec3;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// What the splitters balance between ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Balance {
    /// Equal particle counts (seed 001).
    Count,
    /// Equal cost: each particle weighted by its interactions in the last force evaluation
    /// (falls back to counts before the first evaluation).
    Cost,
}

impl Balance {
    /// The names accepted on the command line and in configs.
    pub const NAMES: [&'static str; 2] = ["count", "cost"];
}

impl fmt::Display for Balance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Balance::Count => "count",
            Balance::Cost => "cost",
        })
    }
}

impl FromStr for Balance {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "count" => Ok(Balance::Count),
            "cost" => Ok(Balance::Cost),
            _ => Err(Error::unknown_name("load balance", s, &Balance::NAMES)),
        }
    }
}

/// Key samples each rank contributes per rank of the job: the splitters then balance the
/// weight to within about 1/`SAMPLES_PER_RANK` of a rank's share.
pub const SAMPLES_PER_RANK: usize = 512;

/// The domains of the last decomposition: the key cube it was made in and the `P − 1`
/// splitters of the Peano–Hilbert curve in that cube (rank r owns the keys from splitter
/// r − 1 up to splitter r). Kept so that a run can tell how many particles have since moved
/// out of their rank's domain ([`Domains::strays`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Domains {
    /// The cube the keys were computed in (length units).
    pub grid: GridBox,
    /// The splitters, ascending.
    pub splitters: Vec<u64>,
}

impl Domains {
    /// How many of rank `me`'s particles lie in another rank's domain: their `keys` (in
    /// [`Domains::grid`], clamped to it as every key is) have another owner under
    /// [`Domains::splitters`].
    pub fn strays(&self, keys: &[u64], me: usize) -> u64 {
        keys.par_iter()
            .filter(|&&key| owner(&self.splitters, key) != me)
            .count() as u64
    }
}

/// The share of its side by which a decomposition's key cube is wider than the particles'
/// cube: the trees are built in the domains' cube while every particle lies in it, so that
/// each domain is a set of whole cells of the trees (the LETs then stop at domain boundaries
/// that are cell boundaries), and the particles have this much room to move before the
/// domains are rebalanced for them ([`Load::outgrown`]). Measured on seed 000's sphere,
/// docs/performance.md ("Strays sent home").
pub const DOMAIN_ROOM: f64 = 1.0 / 64.0;

/// The key cube of a decomposition: the cube around the local bounding boxes `(lo, hi)` of
/// all ranks (allreduce), widened by [`DOMAIN_ROOM`]; a unit cube when there are no
/// particles at all.
pub fn global_box_of(comm: &dyn Comm, (lo, hi): (DVec3, DVec3)) -> GridBox {
    let mut lo = lo.to_array();
    let mut hi = hi.to_array();
    comm.allreduce_min_f64(&mut lo);
    comm.allreduce_max_f64(&mut hi);
    if lo[0] > hi[0] {
        return GridBox::around(DVec3::ZERO, DVec3::ZERO);
    }
    GridBox::around(DVec3::from_array(lo), DVec3::from_array(hi)).widened(DOMAIN_ROOM)
}

/// The `P − 1` splitters of the weighted key samples of every rank (this one's are `local`).
/// Collective.
pub fn global_splitters(comm: &dyn Comm, local: &[Sample]) -> Result<Vec<u64>> {
    let sk: Vec<u64> = local.iter().map(|s| s.0).collect();
    let sw: Vec<f64> = local.iter().map(|s| s.1).collect();
    let all_k = comm.allgatherv_u64(&sk)?;
    let all_w = comm.allgatherv_f64(&sw)?;
    let mut samples: Vec<Sample> = all_k.into_iter().zip(all_w).collect();
    Ok(splitters(&mut samples, comm.size()))
}

/// The load imbalance of the ranks whose summed costs (interactions, see
/// [`Balance::Cost`]) are at most `max` and add up to `total` over `ranks` ranks: max / mean,
/// 1 when nothing was counted. Of whole numbers, so the same on every rank and after a
/// restart; a run rebalances when it exceeds `[gravity] rebalance`.
pub fn imbalance(max: u64, total: u64, ranks: usize) -> f64 {
    match total {
        0 => 1.0,
        _ => max as f64 * ranks as f64 / total as f64,
    }
}

/// The load imbalance ([`imbalance`]) of this rank's summed cost `mine` and every other
/// rank's. Collective (one allgather).
pub fn measured_imbalance(comm: &dyn Comm, mine: u64) -> f64 {
    let all = comm.allgather_u64(&[mine]);
    let max = all.iter().copied().max().unwrap_or(0);
    imbalance(max, all.iter().sum(), comm.size())
}

/// What decides whether the domains are rebalanced, as every rank measures it at the end of
/// a step: the load imbalance ([`imbalance`]) and whether the particles have left the
/// domains' key cube. Of whole numbers and positions, so the same on every rank and after a
/// restart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// max / mean over the ranks of their particles' summed interactions; 1 on one rank.
    pub imbalance: f64,
    /// Some particle lies outside the key cube of the last decomposition
    /// ([`Domains::grid`]): the trees are then built in a cube of their own, whose cells no
    /// longer nest in the domains, until the domains are rebalanced in a new cube. Measured
    /// where the next evaluation rebuilds the trees; false elsewhere, on one rank, in a
    /// periodic box and before a decomposition.
    pub outgrown: bool,
}

/// This rank's share of a particle set that every rank holds whole (generated or read): a
/// contiguous `1/size` in input order, the starting point of the first decomposition.
pub fn initial_share(mut all: crate::Particles, comm: &dyn Comm) -> crate::Particles {
    let (rank, size) = (comm.rank(), comm.size());
    if size == 1 {
        return all;
    }
    let n = all.len();
    let (a, b) = (n * rank / size, n * (rank + 1) / size);
    let order: Vec<u32> = (a as u32..b as u32).collect();
    all.permute(&order);
    all
}

/// Positions and masses of every particle of the job (in rank order) and the range of this
/// rank's own particles among them. Collective; on one rank `p`'s own, not a copy.
#[allow(clippy::type_complexity)]
pub fn gather_all<'p>(
    comm: &dyn Comm,
    p: &'p crate::Particles,
) -> Result<(Cow<'p, [DVec3]>, Cow<'p, [f64]>, std::ops::Range<usize>)> {
    if comm.size() == 1 {
        return Ok((Cow::Borrowed(&p.pos), Cow::Borrowed(&p.mass), 0..p.len()));
    }
    let flat: Vec<f64> = p.pos.iter().flat_map(|x| x.to_array()).collect();
    let pos: Vec<DVec3> = comm
        .allgatherv_f64(&flat)?
        .chunks_exact(3)
        .map(DVec3::from_slice)
        .collect();
    let mass = comm.allgatherv_f64(&p.mass)?;
    let before: u64 = comm.allgather_u64(&[p.len() as u64])[..comm.rank()]
        .iter()
        .sum();
    let start = before as usize;
    Ok((pos.into(), mass.into(), start..start + p.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ics::{generate, Model};
    use crate::sfc::{keys, Order};

    /// A rank's own particles are no strays; those in another rank's slice of the curve are
    /// counted.
    #[test]
    fn strays_are_the_particles_past_their_domain() {
        let p = generate(Model::Plummer, 4000, 2).unwrap();
        let grid = GridBox::of_points(&p.pos);
        let k = keys(Order::Hilbert, &grid, &p.pos);
        let mut samples = sample_keys(&k, None, 2000);
        let domains = Domains {
            grid,
            splitters: splitters(&mut samples, 2),
        };
        let (mine, theirs): (Vec<usize>, Vec<usize>) =
            (0..p.len()).partition(|&i| owner(&domains.splitters, k[i]) == 0);
        assert!(mine.len() > 1500 && mine.len() < 2500, "{}", mine.len());
        let at = |which: &[usize]| -> Vec<u64> { which.iter().map(|&i| k[i]).collect() };
        assert_eq!(domains.strays(&at(&mine), 0), 0);
        assert_eq!(domains.strays(&at(&mine), 1), mine.len() as u64);
        // Rank 0 holding every tenth of rank 1's particles besides its own.
        let mixed: Vec<usize> = mine
            .iter()
            .chain(theirs.iter().step_by(10))
            .copied()
            .collect();
        let strays = theirs.len().div_ceil(10) as u64;
        assert_eq!(domains.strays(&at(&mixed), 0), strays);
    }
}
