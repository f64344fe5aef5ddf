//! The per-particle integrator state and the steps of block kick–drift–kick on it.

use super::timeline::Timeline;
use crate::comm::Comm;
use crate::domain::Migration;
use crate::error::Result;
use crate::particles::Particles;
use crate::walk::ForceResult;
use glam::DVec3;
use rayon::prelude::*;

/// The bins in use, the particles due at a tick, and the particles' summed cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinSummary {
    /// The lowest bin (`u8::MAX` without particles).
    pub lowest: u8,
    /// The highest bin (0 without particles).
    pub highest: u8,
    /// Particles whose step ends at the tick.
    pub due: usize,
    /// Particles.
    pub particles: usize,
    /// The summed cost of the particles: their interactions (p2p + m2p) in their last
    /// evaluation, the weight [`Balance::Cost`](crate::domain::Balance::Cost) balances; a whole
    /// number, so the same however it is summed.
    pub cost: u64,
}

/// A particle whose last evaluation gave it a non-finite acceleration or potential.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NonFinite {
    /// Its id.
    pub id: u64,
    /// Its position (length units).
    pub pos: DVec3,
    /// Its acceleration (length / time²).
    pub acc: DVec3,
    /// Its potential (energy per mass).
    pub pot: f64,
}

/// What the integrator keeps per particle between steps, in the order of the [`Particles`]
/// (plain vectors, so that a domain decomposition can move them with the particles).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntegratorState {
    /// Time-step bin: the particle steps by `dt_top / 2^bin` (see [`Timeline`]).
    pub bin: Vec<u8>,
    /// Acceleration of the last force evaluation on the particle (length / time²): the kicks
    /// use it and the acceleration criterion reads it as the old acceleration.
    pub acc: Vec<DVec3>,
    /// Potential of the last force evaluation on the particle (energy per mass).
    pub pot: Vec<f64>,
    /// Interactions (particle–particle + particle–cell) of the last force evaluation on the
    /// particle: its cost, which the domain decomposition balances with `balance = "cost"`.
    pub cost: Vec<f64>,
}

impl IntegratorState {
    /// The state of `n` particles in bin 0 with the accelerations `acc` and potentials `pot`
    /// (no cost measured yet).
    pub fn new(acc: Vec<DVec3>, pot: Vec<f64>) -> Self {
        Self {
            bin: vec![0; acc.len()],
            cost: vec![0.0; acc.len()],
            acc,
            pot,
        }
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.bin.len()
    }

    /// True without particles.
    pub fn is_empty(&self) -> bool {
        self.bin.is_empty()
    }

    /// Which particles are synchronised at tick `ti` (the end of their step).
    pub fn active_at(&self, timeline: &Timeline, ti: u64) -> Vec<bool> {
        self.bin
            .par_iter()
            .map(|&b| ti % timeline.ticks(b) == 0)
            .collect()
    }

    /// Half kick of the active particles: v ← v + a·k_b with the factor `kick[b]` of the
    /// particle's bin b (one per bin 0 ..= depth): dt_b/2 in time units for Newtonian steps
    /// ([`Timeline::half_steps`]), ∫dt/a over the half step for comoving ones
    /// ([`super::comoving::Expansion::kick_factors`]).
    pub fn half_kick(&self, p: &mut Particles, kick: &[f64], active: &[bool]) {
        p.vel
            .par_iter_mut()
            .zip(&self.acc)
            .zip(&self.bin)
            .zip(active)
            .filter(|(_, &on)| on)
            .for_each(|(((v, a), &b), _)| *v += *a * kick[b as usize]);
    }

    /// Adds `c` x to the acceleration of every active particle at position x (`p`'s): the
    /// background term ½ Ω_m H0² x of a comoving run with vacuum boundaries (c in time⁻²).
    pub fn add_background(&mut self, p: &Particles, c: f64, active: &[bool]) {
        self.acc
            .par_iter_mut()
            .zip(&p.pos)
            .zip(active)
            .filter(|(_, &on)| on)
            .for_each(|((a, x), _)| *a += *x * c);
    }

    /// New bins for the active particles at their synchronisation point `ti`: the bin of
    /// dt_i = η √(ε / |a_i|), within what [`Timeline::allowed_bin`] permits.
    pub fn assign_bins(
        &mut self,
        timeline: &Timeline,
        eta: f64,
        eps: f64,
        active: &[bool],
        ti: u64,
    ) {
        self.bin
            .par_iter_mut()
            .zip(&self.acc)
            .zip(active)
            .filter(|(_, &on)| on)
            .for_each(|((b, a), _)| {
                let want = timeline.bin_for(eta * (eps / a.length()).sqrt());
                *b = timeline.allowed_bin(want, *b, ti);
            });
    }

    /// Takes the forces of the active particles from a force evaluation `f` (in particle
    /// order; other entries are ignored), with their interaction counts as their cost.
    pub fn update_forces(&mut self, f: &ForceResult, active: &[bool]) {
        self.acc
            .par_iter_mut()
            .zip(&mut self.pot)
            .zip(&mut self.cost)
            .zip(f.acc.par_iter().zip(&f.pot))
            .zip(f.p2p.par_iter().zip(&f.m2p))
            .zip(active)
            .filter(|(_, &on)| on)
            .for_each(|(((((a, p), c), (na, np)), (&pp, &pc)), _)| {
                (*a, *p, *c) = (*na, *np, (pp + pc) as f64)
            });
    }

    /// [`IntegratorState::update_forces`] for a result `f` of every particle (all `active`),
    /// without copying: its accelerations and potentials are swapped in. Returns `f`, which then
    /// holds the replaced vectors.
    /// With some particles inactive it copies, as `update_forces` does.
    pub fn take_forces(&mut self, mut f: ForceResult, active: &[bool]) -> ForceResult {
        let all = f.acc.len() == self.acc.len() && active.iter().all(|&a| a);
        if !all {
            self.update_forces(&f, active);
            return f;
        }
        std::mem::swap(&mut self.acc, &mut f.acc);
        std::mem::swap(&mut self.pot, &mut f.pot);
        self.cost
            .par_iter_mut()
            .zip(f.p2p.par_iter().zip(&f.m2p))
            .for_each(|(c, (&pp, &pc))| *c = (pp + pc) as f64);
        f
    }

    /// Moves the state of every particle to the rank `plan` sends it to, as
    /// [`Migration::move_particles`] does with the particles themselves. Collective.
    pub fn migrate(&mut self, plan: &Migration, comm: &dyn Comm) -> Result<()> {
        plan.move_u8(comm, &mut self.bin)?;
        plan.move_dvec3(comm, &mut self.acc)?;
        plan.move_f64(comm, &mut self.pot)?;
        plan.move_f64(comm, &mut self.cost)
    }

    /// The smallest and largest bin in use (`(u8::MAX, 0)` without particles).
    pub fn bin_range(&self) -> (u8, u8) {
        self.bin
            .iter()
            .fold((u8::MAX, 0), |(lo, hi), &b| (lo.min(b), hi.max(b)))
    }

    /// The first particle of `p` (this state's) with a non-finite acceleration or potential.
    pub fn first_non_finite(&self, p: &Particles) -> Option<NonFinite> {
        let i = self
            .acc
            .par_iter()
            .zip(&self.pot)
            .position_first(|(a, u)| !a.is_finite() || !u.is_finite())?;
        Some(NonFinite {
            id: p.id[i],
            pos: p.pos[i],
            acc: self.acc[i],
            pot: self.pot[i],
        })
    }

    /// The bins in use, the particles whose step ends at tick `ti` of `timeline`, and their
    /// summed cost.
    pub fn bins(&self, timeline: &Timeline, ti: u64) -> BinSummary {
        let (lowest, highest) = self.bin_range();
        let due = self
            .bin
            .par_iter()
            .filter(|&&b| ti % timeline.ticks(b) == 0)
            .count();
        BinSummary {
            lowest,
            highest,
            due,
            particles: self.len(),
            cost: self.cost.par_iter().map(|&c| c as u64).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrate::timeline::Stepping;

    #[test]
    fn taking_forces_equals_copying_them() {
        let result = |k: f64| ForceResult {
            acc: (0..5).map(|i| DVec3::splat(k * i as f64)).collect(),
            pot: (0..5).map(|i| -k * i as f64).collect(),
            p2p: (0..5).map(|i| 10 + i).collect(),
            m2p: (0..5).map(|i| 20 * i).collect(),
            ..Default::default()
        };
        for active in [vec![true; 5], vec![true, false, true, false, true]] {
            let mut copied = IntegratorState::new(vec![DVec3::ONE; 5], vec![1.0; 5]);
            let mut taken = copied.clone();
            copied.update_forces(&result(2.0), &active);
            let spent = taken.take_forces(result(2.0), &active);
            assert_eq!(
                (&taken.acc, &taken.pot, &taken.cost),
                (&copied.acc, &copied.pot, &copied.cost)
            );
            // Swapped: the result now holds the replaced vectors; copied: it is unchanged.
            let expected = if active.iter().all(|&a| a) {
                DVec3::ONE
            } else {
                DVec3::splat(4.0)
            };
            assert_eq!(spent.acc[2], expected);
        }
    }

    /// A particle in the harmonic potential a = −x with block steps: the bin follows
    /// η √(ε/|a|), only the particles due are kicked, and the orbit closes after one period.
    #[test]
    fn block_steps_follow_the_criterion_and_integrate_an_orbit() {
        let period = 2.0 * std::f64::consts::PI;
        let t = Timeline::new(Stepping::Block, period / 64.0, period / 1024.0, period);
        let mut p = Particles::default();
        p.push(DVec3::X, DVec3::ZERO, 1.0, 0);
        p.push(DVec3::X * 0.01, DVec3::ZERO, 1.0, 1);
        let acc = |p: &Particles| p.pos.iter().map(|x| -*x).collect::<Vec<_>>();
        let mut s = IntegratorState::new(acc(&p), vec![0.0; 2]);
        let all = [true, true];
        let (eta, eps) = (0.1, 1.0);
        s.assign_bins(&t, eta, eps, &all, 0);
        // |a| = 1: dt = 0.1 ≥ 2π/64 = 0.098, bin 0; |a| = 0.01: larger still, bin 0.
        assert_eq!(s.bin, [0, 0]);
        s.assign_bins(&t, 0.02, eps, &all, 0);
        // dt = 0.02: 2π/64/2^k ≤ 0.02 first at k = 3; dt = 0.2 for the inner one: bin 0.
        assert_eq!(s.bin, [3, 0]);
        s.half_kick(&mut p, &t.half_steps(), &all);
        let mut ti = 0;
        let mut kicks = [0u32; 2];
        while ti < t.ti_end {
            let next = ti + t.ticks(s.bin_range().1);
            let dt = t.time(next) - t.time(ti);
            p.pos
                .iter_mut()
                .zip(&p.vel)
                .for_each(|(x, v)| *x += *v * dt);
            let active = s.active_at(&t, next);
            let f = ForceResult {
                acc: acc(&p),
                pot: vec![0.0; 2],
                p2p: vec![1; 2],
                m2p: vec![0; 2],
                ..Default::default()
            };
            s.update_forces(&f, &active);
            s.half_kick(&mut p, &t.half_steps(), &active);
            for (k, &on) in kicks.iter_mut().zip(&active) {
                *k += on as u32;
            }
            if next < t.ti_end {
                s.assign_bins(&t, 0.02, eps, &active, next);
                s.half_kick(&mut p, &t.half_steps(), &active);
            }
            ti = next;
        }
        // The inner particle (|a| ≤ 0.01) stays in bin 0: 64 steps. The outer one steps 8 times
        // as often where |a| is near 1, less often near x = 0 where |a| is small.
        assert_eq!(kicks[1], 64);
        assert!(kicks[0] > 4 * 64 && kicks[0] < 8 * 64, "{kicks:?}");
        assert!((p.pos[0] - DVec3::X).length() < 1e-3, "{:?}", p.pos[0]);
        assert!(
            (p.pos[1] - DVec3::X * 0.01).length() < 1e-3 * 0.01 * 10.0,
            "{:?}",
            p.pos[1]
        );
    }
}
