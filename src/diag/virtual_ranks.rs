//! The distributed design at cluster scale, in one process: the domain decomposition and the
//! LET construction of P virtual ranks (P up to 4096), reporting what each rank would hold,
//! send and receive. Nothing is walked; the numbers predict the memory and exchange volume of a
//! real P-rank run (compared with real 1–4 rank runs in `docs/performance.md`).

use crate::diag::ranks::Spread;
use crate::domain::{owner, sample_keys, splitters};
use crate::error::{Error, Result};
use crate::forces::ForceParams;
use crate::lets::{export, Region};
use crate::particles::Particles;
use crate::sfc::{keys, GridBox, Order};
use crate::tree::key::key_cells;
use crate::tree::{Tree, TreeParams};
use rayon::prelude::*;
use serde::Serialize;

/// What P virtual ranks would do with one particle set.
#[derive(Clone, Debug, Serialize)]
pub struct VirtualRanks {
    /// Number of virtual ranks.
    pub ranks: usize,
    /// Boxes per rank describing its particles to the LET builders.
    pub let_boxes: usize,
    /// Particles per rank.
    pub particles: Spread,
    /// Weight (cost) per rank, when weights were given; else equal to `particles`.
    pub weight: Spread,
    /// LET bytes each rank receives (the sum over all senders).
    pub let_bytes_received: Spread,
    /// LET bytes each rank sends (the sum over all destinations).
    pub let_bytes_sent: Spread,
    /// LET bytes received per rank relative to the bytes of its own particles (16 bytes each).
    pub let_to_local: Spread,
    /// All LET bytes of the job.
    pub let_bytes_total: f64,
    /// Seconds this study took.
    pub seconds: f64,
}

/// Decomposes `p` over `ranks` virtual ranks (splitters from `weights`, one per particle, or
/// equal weights), builds each rank's tree and its LETs for every other rank, and reports the
/// volumes. `params` gives θ, the criterion, N_crit and the LET boxes per rank.
pub fn study(
    p: &Particles,
    weights: Option<&[f64]>,
    ranks: usize,
    params: &ForceParams,
) -> Result<VirtualRanks> {
    if ranks == 0 || ranks > 1 << 16 {
        return Err(Error::input(format!(
            "virtual ranks must be between 1 and 65536 (got {ranks})"
        )));
    }
    let t0 = std::time::Instant::now();
    let grid = GridBox::of_points(&p.pos);
    let k = keys(Order::Hilbert, &grid, &p.pos);
    // Exact splitters: every particle is a sample.
    let mut samples = sample_keys(&k, weights, p.len());
    let cuts = splitters(&mut samples, ranks);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); ranks];
    let mut order: Vec<u32> = (0..p.len() as u32).collect();
    order.par_sort_unstable_by_key(|&i| k[i as usize]);
    for &i in &order {
        members[owner(&cuts, k[i as usize])].push(i);
    }
    let weight_of = |m: &Vec<u32>| -> f64 {
        m.iter()
            .map(|&i| weights.map_or(1.0, |w| w[i as usize]))
            .sum()
    };
    let tp = TreeParams {
        order: Order::Hilbert,
        ncrit: params
            .ncrit
            .resolve(params.backend == crate::forces::Backend::Gpu),
        mac: params.mac,
        theta: params.theta,
    };
    // Every rank's tree, in the frame of all particles as a job builds them, and the region
    // it publishes.
    let frame = crate::sfc::Frame::of_points(&p.pos);
    let wp = params.walk_params(frame.side());
    let trees: Vec<Option<Tree>> = members
        .par_iter()
        .map(|m| {
            (!m.is_empty()).then(|| {
                let pos: Vec<_> = m.iter().map(|&i| p.pos[i as usize]).collect();
                let mass: Vec<_> = m.iter().map(|&i| p.mass[i as usize]).collect();
                Tree::build_in(&frame, &pos, &mass, &tp, &mut Default::default())
            })
        })
        .collect();
    let regions: Vec<Region> = trees
        .par_iter()
        .map(|t| {
            t.as_ref().map_or_else(Region::default, |t| {
                Region::of_tree(t, 0.0, params.let_boxes)
            })
        })
        .collect();
    // Each sender's LET for every destination, senders in parallel.
    let sent: Vec<Vec<u64>> = trees
        .par_iter()
        .enumerate()
        .map(|(s, tree)| {
            let mut to = vec![0u64; ranks];
            if let Some(tree) = tree {
                let keys = key_cells(&tree.cells.boxes, &tree.cells.level);
                for (r, region) in regions.iter().enumerate() {
                    if r != s {
                        let words = export(tree, &keys, &wp.criterion, wp.periodic, region);
                        to[r] = 4 * words.len() as u64;
                    }
                }
            }
            to
        })
        .collect();
    let per_rank = |f: &dyn Fn(usize) -> f64| -> Spread {
        let v: Vec<f64> = (0..ranks).map(f).collect();
        let sum: f64 = v.iter().sum();
        Spread {
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            mean: sum / ranks as f64,
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    };
    let received = |r: usize| sent.iter().map(|row| row[r] as f64).sum::<f64>();
    Ok(VirtualRanks {
        ranks,
        let_boxes: params.let_boxes,
        particles: per_rank(&|r| members[r].len() as f64),
        weight: per_rank(&|r| weight_of(&members[r])),
        let_bytes_received: per_rank(&received),
        let_bytes_sent: per_rank(&|s| sent[s].iter().sum::<u64>() as f64),
        let_to_local: per_rank(&|r| received(r) / (16.0 * members[r].len().max(1) as f64)),
        let_bytes_total: sent.iter().flatten().map(|&b| b as f64).sum(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ics::{generate, Model};

    #[test]
    fn one_rank_sends_nothing_and_more_boxes_send_less() {
        let p = generate(Model::Plummer, 20_000, 2).unwrap();
        let params = ForceParams::default();
        let one = study(&p, None, 1, &params).unwrap();
        assert_eq!(one.let_bytes_total, 0.0);
        assert_eq!(one.particles.max, 20_000.0);
        let coarse = study(
            &p,
            None,
            8,
            &ForceParams {
                let_boxes: 1,
                ..params.clone()
            },
        )
        .unwrap();
        let fine = study(
            &p,
            None,
            8,
            &ForceParams {
                let_boxes: 64,
                ..params
            },
        )
        .unwrap();
        assert!(
            coarse.particles.imbalance() < 1.01,
            "{:?}",
            coarse.particles
        );
        assert!(
            fine.let_bytes_total < coarse.let_bytes_total,
            "{} vs {}",
            fine.let_bytes_total,
            coarse.let_bytes_total
        );
    }
}
