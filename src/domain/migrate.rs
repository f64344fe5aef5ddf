//! Moving particles (and any per-particle data) to the ranks that own them, by all-to-all.

use crate::comm::Comm;
use crate::error::Result;
use crate::particles::Particles;
use glam::DVec3;

/// Where each local particle goes: the send order (local indices grouped by destination rank,
/// in rank order, each group in local order) and the count per destination. The same plan
/// moves the particles and every array that travels with them, so they stay aligned.
#[derive(Clone, Debug, PartialEq)]
pub struct Migration {
    /// Local particle indices in send order.
    pub order: Vec<u32>,
    /// Particles sent to each rank.
    pub counts: Vec<usize>,
}

impl Migration {
    /// The plan that sends particle `i` to rank `dest[i]` (`dest[i] < ranks`).
    pub fn new(dest: &[usize], ranks: usize) -> Self {
        let mut counts = vec![0usize; ranks];
        for &d in dest {
            counts[d] += 1;
        }
        let mut start: Vec<usize> = counts
            .iter()
            .scan(0, |s, &c| {
                let here = *s;
                *s += c;
                Some(here)
            })
            .collect();
        let mut order = vec![0u32; dest.len()];
        for (i, &d) in dest.iter().enumerate() {
            order[start[d]] = i as u32;
            start[d] += 1;
        }
        Self { order, counts }
    }

    /// Particles this rank keeps (sent to itself).
    pub fn kept(&self, rank: usize) -> usize {
        self.counts[rank]
    }

    /// Sends `width` float64 values per particle (`x.len() = width · n`) to their owners;
    /// returns the values of the particles this rank receives, in arrival order.
    pub fn move_f64(&self, comm: &dyn Comm, x: &[f64], width: usize) -> Result<Vec<f64>> {
        let send: Vec<f64> = self
            .order
            .iter()
            .flat_map(|&i| &x[i as usize * width..(i as usize + 1) * width])
            .copied()
            .collect();
        let counts: Vec<usize> = self.counts.iter().map(|c| c * width).collect();
        Ok(comm.alltoallv_f64(&send, &counts)?.data)
    }

    /// [`Migration::move_f64`] for one 64-bit integer per particle.
    pub fn move_u64(&self, comm: &dyn Comm, x: &[u64]) -> Result<Vec<u64>> {
        let send: Vec<u64> = self.order.iter().map(|&i| x[i as usize]).collect();
        Ok(comm.alltoallv_u64(&send, &self.counts)?.data)
    }

    /// [`Migration::move_f64`] for one vector per particle.
    pub fn move_dvec3(&self, comm: &dyn Comm, x: &[DVec3]) -> Result<Vec<DVec3>> {
        let flat: Vec<f64> = x.iter().flat_map(|v| v.to_array()).collect();
        let got = self.move_f64(comm, &flat, 3)?;
        Ok(got.chunks_exact(3).map(DVec3::from_slice).collect())
    }

    /// Moves positions, velocities, masses and ids of `p` to their owners; `p` then holds the
    /// particles this rank owns, in arrival order (by source rank).
    pub fn move_particles(&self, comm: &dyn Comm, p: &mut Particles) -> Result<()> {
        let n = p.len();
        let mut packed = Vec::with_capacity(7 * n);
        for i in 0..n {
            let (x, v) = (p.pos[i], p.vel[i]);
            packed.extend_from_slice(&[x.x, x.y, x.z, v.x, v.y, v.z, p.mass[i]]);
        }
        let got = self.move_f64(comm, &packed, 7)?;
        let id = self.move_u64(comm, &p.id)?;
        let mut out = Particles::with_capacity(id.len());
        for (r, &i) in got.chunks_exact(7).zip(&id) {
            out.push(
                DVec3::new(r[0], r[1], r[2]),
                DVec3::new(r[3], r[4], r[5]),
                r[6],
                i,
            );
        }
        *p = out;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::SingleProcess;

    #[test]
    fn plan_groups_by_destination_in_local_order() {
        let m = Migration::new(&[2, 0, 2, 1, 0], 3);
        assert_eq!(m.counts, vec![2, 1, 2]);
        assert_eq!(m.order, vec![1, 4, 3, 0, 2]);
        assert_eq!(m.kept(1), 1);
    }

    #[test]
    fn one_rank_moves_everything_to_itself() {
        let mut p = Particles::default();
        for i in 0..5 {
            let f = i as f64;
            p.push(DVec3::splat(f), DVec3::splat(-f), f + 1.0, 10 + i);
        }
        let before = p.clone();
        let m = Migration::new(&[0; 5], 1);
        m.move_particles(&SingleProcess, &mut p).unwrap();
        assert_eq!(p, before);
        let extra = m
            .move_f64(&SingleProcess, &[1.0, 2.0, 3.0, 4.0, 5.0], 1)
            .unwrap();
        assert_eq!(extra, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
    }
}
