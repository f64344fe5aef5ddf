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

    /// Moves one array of per-particle values (`x[i]` belongs to local particle `i`) to the
    /// particles' owners, in place: the kept values are compacted to the front (no new
    /// allocation: at 2^24 particles per rank, page faults on fresh arrays cost more than the
    /// copy), then the arrivals are appended. `exchange` sends the leaving values (in send
    /// order, `counts` elements of `T` per rank) and returns what arrived.
    fn shuffle<T: Copy + Send + Sync>(
        &self,
        x: &mut Vec<T>,
        exchange: impl FnOnce(&[T], &[usize]) -> Result<Vec<T>>,
    ) -> Result<()> {
        let send: Vec<T> = self.order.par_iter().map(|&i| x[i as usize]).collect();
        // `keep` is increasing, so each kept value moves down or stays: safe in place.
        for (k, &i) in self.keep.iter().enumerate() {
            x[k] = x[i as usize];
        }
        x.truncate(self.keep.len());
        x.extend(exchange(&send, &self.counts)?);
        Ok(())
    }

    /// Moves one float64 per particle to the owners (kept values first, then arrivals).
    pub fn move_f64(&self, comm: &dyn Comm, x: &mut Vec<f64>) -> Result<()> {
        self.shuffle(x, |send, counts| Ok(comm.alltoallv_f64(send, counts)?.data))
    }

    /// Moves one 64-bit integer per particle to the owners.
    pub fn move_u64(&self, comm: &dyn Comm, x: &mut Vec<u64>) -> Result<()> {
        self.shuffle(x, |send, counts| Ok(comm.alltoallv_u64(send, counts)?.data))
    }

    /// Moves one byte per particle to the owners.
    pub fn move_u8(&self, comm: &dyn Comm, x: &mut Vec<u8>) -> Result<()> {
        self.shuffle(x, |send, counts| {
            let wide: Vec<u64> = send.iter().map(|&b| b as u64).collect();
            let got = comm.alltoallv_u64(&wide, counts)?.data;
            Ok(got.into_iter().map(|b| b as u8).collect())
        })
    }

    /// Moves one vector per particle to the owners.
    pub fn move_dvec3(&self, comm: &dyn Comm, x: &mut Vec<DVec3>) -> Result<()> {
        self.shuffle(x, |send, counts| {
            let flat: &[f64] = bytemuck::cast_slice(send);
            let counts: Vec<usize> = counts.iter().map(|c| 3 * c).collect();
            let got = comm.alltoallv_f64(flat, &counts)?.data;
            Ok(got.chunks_exact(3).map(DVec3::from_slice).collect())
        })
    }

    /// Moves positions, velocities, masses and ids of `p` to their owners; `p` then holds the
    /// particles this rank owns (kept, then arrived).
    pub fn move_particles(&self, comm: &dyn Comm, p: &mut Particles) -> Result<()> {
        self.move_dvec3(comm, &mut p.pos)?;
        self.move_dvec3(comm, &mut p.vel)?;
        self.move_f64(comm, &mut p.mass)?;
        self.move_u64(comm, &mut p.id)
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
        let mut extra = vec![1.0, 2.0, 3.0, 4.0, 5.0];
        m.move_f64(&SingleProcess, &mut extra).unwrap();
        assert_eq!(extra, vec![1.0, 2.0, 3.0, 4.0, 5.0]);
        // On rank 1 of 2 keeping particles 1 and 3: they move to the front, in order.
        let two = Migration::new(&[0, 1, 0, 1, 0], 2, 1);
        assert_eq!(
            (&two.keep[..], &two.order[..]),
            (&[1, 3][..], &[0, 2, 4][..])
        );
    }
}
