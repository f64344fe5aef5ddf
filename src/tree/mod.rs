//! The octree: built from particles sorted along a space-filling curve, with multipole moments
//! and the stackless next/more threading of seeds 000/004.
//!
//! Cells are stored in depth-first preorder with the root at index 0, so a cell's first child is
//! the next cell and the cell after its whole subtree is `c + subtree[c]`; these two facts are the
//! `more` and `next` pointers of the walk. Particles are stored sorted by key, so every cell owns
//! one contiguous range of them.

pub mod build;
pub mod build_gpu;
pub mod cells;
pub mod close;
pub mod key;
pub mod moments;
mod refit;
pub mod threading;
mod topology;

pub use build::build_topology;
pub use cells::{CellArrays, Cells, DeviceCells};
pub use close::ClosePair;
pub use moments::compute_moments;
pub(crate) use refit::bounding_cube;
pub use threading::FlatTree;
pub use topology::TreeTopology;

use crate::sfc::Frame;

/// Where the tree (keys, sort, topology, moments) is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TreeBuild {
    /// On the host's cores (rayon).
    Host,
    /// On the rank's GPU (`cuda/build.cu`) whenever the GPU walks, the same tree bit for bit
    /// on the float32 particles (the default: 2x faster evaluations at 2^24 on an H100,
    /// docs/performance.md); on the host when the CPU walks.
    Gpu,
}

/// Deepest tree level: 21 bits per axis. Cells at this level are leaves whatever their count,
/// which keeps coincident particles in one leaf instead of recursing forever.
pub const MAX_LEVEL: u8 = 21;

/// A complete tree over one set of particles.
#[derive(Clone, Debug)]
pub struct Tree {
    /// The frame the tree was built in (its cube and centre); its float32 values are in it
    /// (see [`Frame::to_frame`]: lengths in units of the cube's side, positions from the
    /// frame's centre).
    pub frame: Frame,
    /// Sorted particles: frame position and mass (mass units), float32.
    pub particles: Vec<[f32; 4]>,
    /// For each sorted particle, its index in the input arrays.
    pub index: Vec<u32>,
    /// The cells, in the frame.
    pub cells: Cells,
}

use crate::diag::PhaseTimes;
use crate::sfc::{keys_by, Order};
use crate::walk::mac::Mac;
use glam::DVec3;
use rayon::prelude::*;

/// How to build a tree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TreeParams {
    /// Space-filling curve of the keys (Morton for [`Order::None`]).
    pub order: Order,
    /// Largest leaf (N_crit).
    pub ncrit: usize,
    /// Criterion whose S_eff the cells carry.
    pub mac: Mac,
    /// Opening angle θ.
    pub theta: f32,
}

impl Tree {
    /// The tree's own particles as walk targets, in its order: frame position and a previous
    /// |a| of 0 (for criteria that do not read it).
    pub fn targets(&self) -> Vec<[f32; 4]> {
        self.particles
            .iter()
            .map(|q| [q[0], q[1], q[2], 0.0])
            .collect()
    }

    /// Builds the tree over particles at `pos` (length units) with masses `mass` in the frame
    /// of the points ([`Frame::of_points`]): [`Tree::build_in`] that frame.
    pub fn build(pos: &[DVec3], mass: &[f64], p: &TreeParams, times: &mut PhaseTimes) -> Self {
        Self::build_in(&Frame::of_points(pos), pos, mass, p, times)
    }

    /// Builds the tree over particles at `pos` (length units) with masses `mass` in `frame`,
    /// whose cube must hold them (every rank of a job builds in the frame of the cube around
    /// all ranks' particles, so that their trees' cells are cells of one global octree and
    /// their float32 values are in one frame). The positions are taken to the float32 frame
    /// first ([`Frame::to_frame`]) and the masses rounded to float32; keys (in the frame's
    /// [`Frame::key_grid`]), cells and moments come from those values, as the GPU builds it:
    /// both give the same tree for the same particles. Times the phases `sort` (keys, sort,
    /// gather), `build` (topology) and `moments`. `pos` must be non-empty and finite.
    pub fn build_in(
        frame: &Frame,
        pos: &[DVec3],
        mass: &[f64],
        p: &TreeParams,
        times: &mut PhaseTimes,
    ) -> Self {
        let (frame, keys_in) = (*frame, frame.key_grid());
        let (index, particles) = times.time("sort", || {
            let at = |i: usize| DVec3::from_array(frame.to_frame(pos[i]).map(f64::from));
            let k = keys_by(p.order, &keys_in, pos.len(), at);
            let mut pairs: Vec<(u64, u32)> = k
                .into_par_iter()
                .enumerate()
                .map(|(i, key)| (key, i as u32))
                .collect();
            pairs.par_sort_unstable();
            // Order, particles and keys in one pass over the sorted pairs.
            let ((index, particles), sorted): ((Vec<u32>, Vec<_>), Vec<_>) = pairs
                .par_iter()
                .map(|&(k, i)| {
                    let [x, y, z] = frame.to_frame(pos[i as usize]);
                    ((i, [x, y, z, mass[i as usize] as f32]), k)
                })
                .unzip();
            (index, (particles, sorted))
        });
        let (particles, sorted_keys) = particles;
        let mut cells = times.time("build", || build_topology(&sorted_keys, p.ncrit));
        times.time("moments", || {
            compute_moments(&mut cells, &particles, &sorted_keys, &keys_in, p)
        });
        Tree {
            frame,
            particles,
            index,
            cells,
        }
    }
}

#[cfg(test)]
mod tests;
