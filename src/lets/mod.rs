//! Locally Essential Trees (seed 001 Sec. 7.3): what each rank needs of every other rank's tree.
//!
//! Every rank publishes the region its particles occupy ([`Region`]: tight boxes around them
//! and their smallest previous acceleration), by allgatherv. For each other rank it walks its own tree
//! against that region ([`export`], in parallel over destinations with rayon) and packs the
//! result in the walk's node format ([`wire`]); counts and payloads travel by one alltoallv.
//! The received LETs are unpacked into one forest that the ordinary walk (CPU or GPU) runs
//! through after the local tree.

mod export;
mod region;
pub mod wire;

pub use export::export;
pub use region::{Region, TargetBox};

use crate::comm::Comm;
use crate::diag::PhaseTimes;
use crate::error::Result;
use crate::tree::Tree;
use crate::walk::mac::Criterion;
use rayon::prelude::*;
use std::time::Instant;

/// What one LET exchange moved, for this rank.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LetStats {
    /// Bytes of LET data this rank sent to other ranks.
    pub bytes_sent: u64,
    /// Bytes of LET data this rank received.
    pub bytes_received: u64,
    /// Cells received (in the forest).
    pub cells_received: u64,
    /// Particles received (in the forest).
    pub particles_received: u64,
}

/// Exchanges LETs with every other rank: sends each the part of `tree` (`None`: this rank has
/// no particles) its particles need under `crit`, given `mine`, this rank's own region
/// ([`Region::of_tree`]; the default region for no particles), and
/// returns the forest of the LETs received. Collective. Times `let` (export, pack, unpack) and
/// `exchange` (the allgather and the alltoallv) into `times`.
pub fn exchange(
    comm: &dyn Comm,
    tree: Option<&Tree>,
    crit: &Criterion,
    mine: &Region,
    times: &mut PhaseTimes,
) -> Result<(Tree, LetStats)> {
    let t0 = Instant::now();
    let mut lens: Vec<usize> = comm
        .allgather_u64(1 + mine.boxes.len() as u64 * 6)
        .into_iter()
        .map(|n| n as usize)
        .collect();
    let words = comm.allgatherv_f64(&mine.encode())?;
    let regions: Vec<Region> = lens
        .iter_mut()
        .scan(0usize, |at, n| {
            let r = Region::decode(&words[*at..*at + *n]);
            *at += *n;
            Some(r)
        })
        .collect();
    times.add("exchange", t0.elapsed().as_secs_f64());
    let me = comm.rank();
    let t0 = Instant::now();
    let bufs: Vec<Vec<f32>> = regions
        .par_iter()
        .enumerate()
        .map(|(r, region)| match tree {
            Some(t) if r != me => export(t, crit, region),
            _ => Vec::new(),
        })
        .collect();
    let counts: Vec<usize> = bufs.iter().map(Vec::len).collect();
    let send: Vec<f32> = bufs.concat();
    times.add("let", t0.elapsed().as_secs_f64());
    let t0 = Instant::now();
    let got = comm.alltoallv_f32(&send, &counts)?;
    times.add("exchange", t0.elapsed().as_secs_f64());
    let t0 = Instant::now();
    let forest = wire::unpack_forest(&got.data, &got.counts)?;
    times.add("let", t0.elapsed().as_secs_f64());
    let stats = LetStats {
        bytes_sent: 4 * send.len() as u64,
        bytes_received: 4 * got.data.len() as u64,
        cells_received: forest.cells.len() as u64,
        particles_received: forest.particles.len() as u64,
    };
    Ok((forest, stats))
}

#[cfg(test)]
mod tests;
