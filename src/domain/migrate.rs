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
    /// Local indices of the particles that leave, ascending.
    leaving: Vec<u32>,
    /// Local indices of the particles that leave, in send order.
    pub order: Vec<u32>,
    /// Particles sent to each rank (0 to this one).
    pub counts: Vec<usize>,
    /// Particles this rank had before the move.
    before: usize,
}

impl Migration {
    /// The plan that sends particle `i` to rank `dest[i]` (`dest[i] < ranks`), on rank `me`.
    /// Built in parallel from the leaving particles only (usually few).
    pub fn new(dest: &[usize], ranks: usize, me: usize) -> Self {
        let leaving: Vec<u32> = (0..dest.len())
            .into_par_iter()
            .filter(|&i| dest[i] != me)
            .map(|i| i as u32)
            .collect();
        let to: Vec<u32> = leaving.iter().map(|&i| dest[i as usize] as u32).collect();
        Self::from_leaving(leaving, &to, ranks, dest.len())
    }

    /// The plan for a rank of `before` particles whose particles `leaving` (ascending local
    /// indices) go to ranks `dest` (one each, `< ranks`); the others stay.
    pub fn from_leaving(leaving: Vec<u32>, dest: &[u32], ranks: usize, before: usize) -> Self {
        let mut slots: Vec<u32> = (0..leaving.len() as u32).collect();
        // Stable: each destination's group stays in local order.
        slots.par_sort_by_key(|&k| dest[k as usize]);
        let order = slots.par_iter().map(|&k| leaving[k as usize]).collect();
        let mut counts = vec![0usize; ranks];
        for &d in dest {
            counts[d as usize] += 1;
        }
        Self {
            leaving,
            order,
            counts,
            before,
        }
    }

    /// Particles this rank keeps.
    pub fn kept(&self) -> usize {
        self.before - self.leaving.len()
    }

    /// Moves one array of per-particle values (`x[i]` belongs to local particle `i`) to the
    /// particles' owners, in place: the kept values are compacted to the front, each run
    /// between two leaving particles moved down with one block copy (no new allocation: at
    /// 2^24 particles per rank, page faults on fresh arrays cost more than the copy), then the
    /// arrivals are appended. `exchange` sends the leaving values (in send order, `counts`
    /// elements of `T` per rank) and returns what arrived.
    fn shuffle<T: Copy + Send + Sync>(
        &self,
        x: &mut Vec<T>,
        exchange: impl FnOnce(&[T], &[usize]) -> Result<Vec<T>>,
    ) -> Result<()> {
        let send: Vec<T> = self.order.par_iter().map(|&i| x[i as usize]).collect();
        if let Some(&first) = self.leaving.first() {
            let n = x.len();
            let mut to = first as usize;
            for (j, &l) in self.leaving.iter().enumerate() {
                let from = l as usize + 1;
                let end = self.leaving.get(j + 1).map_or(n, |&m| m as usize);
                // Runs only move down, in ascending order: no run overwrites one not yet moved.
                x.copy_within(from..end, to);
                to += end - from;
            }
        }
        x.truncate(self.kept());
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
        assert_eq!(m.kept(), 1);
        // The kept value moves to the front; the others leave in send order.
        let mut x = vec![10.0, 11.0, 12.0, 13.0, 14.0];
        let mut sent = Vec::new();
        m.shuffle(&mut x, |send, counts| {
            sent = send.to_vec();
            assert_eq!(counts, &[2, 0, 2]);
            Ok(vec![20.0])
        })
        .unwrap();
        assert_eq!(sent, vec![11.0, 14.0, 10.0, 12.0]);
        assert_eq!(x, vec![13.0, 20.0]);
    }

    #[test]
    fn kept_runs_are_compacted_in_order() {
        // Leaving particles at the start, in the middle (two in a row) and at the end.
        let dest = [1, 0, 0, 1, 1, 0, 0, 0, 1];
        let m = Migration::new(&dest, 2, 0);
        let mut x: Vec<u64> = (0..9).collect();
        m.shuffle(&mut x, |send, _| {
            assert_eq!(send, &[0, 3, 4, 8]);
            Ok(Vec::new())
        })
        .unwrap();
        assert_eq!(x, vec![1, 2, 5, 6, 7]);
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
        assert_eq!((two.kept(), &two.order[..]), (2, &[0, 2, 4][..]));
        let mut x = vec![0.0, 1.0, 2.0, 3.0, 4.0];
        two.shuffle(&mut x, |_, _| Ok(Vec::new())).unwrap();
        assert_eq!(x, vec![1.0, 3.0]);
    }
}
