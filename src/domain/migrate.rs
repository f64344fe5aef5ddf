//! Moving particles (and any per-particle data) to the ranks that own them, by all-to-all.

use crate::comm::Comm;
use crate::error::Result;
use crate::particles::Particles;
use glam::DVec3;
use rayon::prelude::*;

/// Where each local particle goes: the particles this rank keeps, and the send order of the
/// others (local indices grouped by destination rank, in rank order, each group in local
/// order) with the count per destination. The same plan moves the particles and every array
/// that travels with them, so they stay aligned. After a move a rank holds its kept particles
/// (in their old order) followed by the arrivals (by source rank).
#[derive(Clone, Debug, PartialEq)]
pub struct Migration {
    /// Local indices of the particles that stay, in local order.
    pub keep: Vec<u32>,
    /// Local indices of the particles that leave, in send order.
    pub order: Vec<u32>,
    /// Particles sent to each rank (0 to this one).
    pub counts: Vec<usize>,
}

impl Migration {
    /// The plan that sends particle `i` to rank `dest[i]` (`dest[i] < ranks`), on rank `me`.
    pub fn new(dest: &[usize], ranks: usize, me: usize) -> Self {
        let mut counts = vec![0usize; ranks];
        for &d in dest {
            counts[d] += 1;
        }
        counts[me] = 0;
        let mut start: Vec<usize> = counts
            .iter()
            .scan(0, |s, &c| {
                let here = *s;
                *s += c;
                Some(here)
            })
            .collect();
        let mut order = vec![0u32; counts.iter().sum()];
        let mut keep = Vec::with_capacity(dest.len() - order.len());
        for (i, &d) in dest.iter().enumerate() {
            if d == me {
                keep.push(i as u32);
            } else {
                order[start[d]] = i as u32;
                start[d] += 1;
            }
        }
        Self {
            keep,
            order,
            counts,
        }
    }

    /// Particles this rank keeps.
    pub fn kept(&self) -> usize {
        self.keep.len()
    }

    /// Sends `width` float64 values per particle (`x.len() = width · n`) to their owners;
    /// returns those of the particles this rank holds afterwards (kept, then arrived).
    pub fn move_f64(&self, comm: &dyn Comm, x: &[f64], width: usize) -> Result<Vec<f64>> {
        let pick = |ix: &[u32]| -> Vec<f64> {
            ix.par_iter()
                .flat_map_iter(|&i| {
                    x[i as usize * width..(i as usize + 1) * width]
                        .iter()
                        .copied()
                })
                .collect()
        };
        let send = pick(&self.order);
        let counts: Vec<usize> = self.counts.iter().map(|c| c * width).collect();
        let mut out = pick(&self.keep);
        out.extend(comm.alltoallv_f64(&send, &counts)?.data);
        Ok(out)
    }

    /// [`Migration::move_f64`] for one 64-bit integer per particle.
    pub fn move_u64(&self, comm: &dyn Comm, x: &[u64]) -> Result<Vec<u64>> {
        let send: Vec<u64> = self.order.par_iter().map(|&i| x[i as usize]).collect();
        let mut out: Vec<u64> = self.keep.par_iter().map(|&i| x[i as usize]).collect();
        out.extend(comm.alltoallv_u64(&send, &self.counts)?.data);
        Ok(out)
    }

    /// [`Migration::move_f64`] for one vector per particle.
    pub fn move_dvec3(&self, comm: &dyn Comm, x: &[DVec3]) -> Result<Vec<DVec3>> {
        let flat: &[f64] = bytemuck::cast_slice(x);
        let got = self.move_f64(comm, flat, 3)?;
        Ok(got.par_chunks_exact(3).map(DVec3::from_slice).collect())
    }

    /// Moves positions, velocities, masses and ids of `p` to their owners; `p` then holds the
    /// particles this rank owns (kept, then arrived).
    pub fn move_particles(&self, comm: &dyn Comm, p: &mut Particles) -> Result<()> {
        let pos = self.move_dvec3(comm, &p.pos)?;
        let vel = self.move_dvec3(comm, &p.vel)?;
        let mass = self.move_f64(comm, &p.mass, 1)?;
        let id = self.move_u64(comm, &p.id)?;
        *p = Particles { pos, vel, mass, id };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleProcess;

    #[test]
    fn plan_groups_by_destination_in_local_order() {
        let m = Migration::new(&[2, 0, 2, 1, 0], 3, 1);
        assert_eq!(m.counts, vec![2, 0, 2]);
        assert_eq!(m.order, vec![1, 4, 0, 2]);
        assert_eq!(m.keep, vec![3]);
        assert_eq!(m.kept(), 1);
    }

    #[test]
    fn one_rank_moves_everything_to_itself() {
        let mut p = Particles::default();
        for i in 0..5 {
            let f = i as f64;
            p.push(DVec3::splat(f), DVec3::splat(-f), f + 1.0, 10 + i);
        }
        let before = p.clone();
        let m = Migration::new(&[0; 5], 1, 0);
        m.move_particles(&SingleProcess, &mut p).unwrap();
        assert_eq!(p, before);
        let extra = m
            .move_f64(&SingleProcess, &[1.0, 2.0, 3.0, 4.0, 5.0], 1)
            .unwrap();
        assert_eq!(extra, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    }
}
