//! The leapfrog in comoving coordinates (GADGET-2/4): positions x comoving, momenta per unit
//! mass p = a² dx/dt, and the time variable τ = ln(a / a_start) on the integer [`Timeline`].
//!
//! The equations of motion are dx/dt = p/a² and dp/dt = F/a, with F the comoving force per
//! unit mass (the peculiar gravity of the comoving positions with the comoving masses, plus
//! ½ Ω_m H0² x for vacuum boundaries; `docs/design.md`, *Comoving integration*). Over a step
//! the drift is x ← x + p ∫dt/a² and a kick p ← p + F ∫dt/a, the factors of a
//! [`DriftKickTable`] between the scale factors at the ends. A particle of bin b, step T_b in
//! τ, has its closing half kick at tick t over τ ∈ [t − T_b/2, t] and its opening one over
//! [t, t + T_b/2]: its kicks add up to ∫F dt/a over its steps exactly (the factors are
//! differences of one tabulated integral), as the Newtonian leapfrog's add up to ∫F dt.

use super::{IntegratorState, Timeline};
use crate::cosmology::{Cosmology, DriftKickTable};
use crate::error::{Error, Result};
use crate::particles::Particles;
use rayon::prelude::*;

/// Which half of a particle's step a half kick covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalfKick {
    /// The second half of the step that ends at the kick's tick (after the new forces).
    Closing,
    /// The first half of the step that starts at the kick's tick.
    Opening,
}

/// The expansion a comoving run integrates through: the background, the scale factors of
/// the run's start and end, and the drift and kick factors between them. τ = ln(a/a_start)
/// is the timeline's time (the timeline starts at 0 and ends at ln(a_end/a_start)).
#[derive(Clone, Debug)]
pub struct Expansion {
    cosmology: Cosmology,
    table: DriftKickTable,
    a_start: f64,
    a_end: f64,
}

impl Expansion {
    /// The expansion of `cosmology` from `a_start` to `a_end` (scale factors,
    /// 0 < a_start < a_end). Fails with a one-line input error for a bad range or a
    /// universe that stops expanding before `a_end`.
    pub fn new(cosmology: Cosmology, a_start: f64, a_end: f64) -> Result<Self> {
        if !(a_start.is_finite() && a_start > 0.0 && a_end.is_finite() && a_end > a_start) {
            return Err(Error::input(format!(
                "a comoving run needs 0 < a_start < a_end (got a_start = {a_start}, a_end = \
                 {a_end})"
            )));
        }
        Ok(Self {
            table: DriftKickTable::new(&cosmology, a_start, a_end)?,
            cosmology,
            a_start,
            a_end,
        })
    }

    /// The background.
    pub fn cosmology(&self) -> &Cosmology {
        &self.cosmology
    }

    /// The scale factor at the start.
    pub fn a_start(&self) -> f64 {
        self.a_start
    }

    /// The scale factor at the end.
    pub fn a_end(&self) -> f64 {
        self.a_end
    }

    /// The span of the run in τ, ln(a_end/a_start): the end of its timeline.
    pub fn span(&self) -> f64 {
        (self.a_end / self.a_start).ln()
    }

    /// The scale factor at tick `ti` of `tl`: a_start e^τ, exactly a_end at the timeline's
    /// end.
    pub fn a(&self, tl: &Timeline, ti: u64) -> f64 {
        self.a_half(tl, 2 * ti)
    }

    /// The scale factor at `half` half-ticks of `tl` (a half tick is half the deepest bin's
    /// step): the midpoints of the deepest bin's steps are whole numbers of them, and a time
    /// reached from either side is computed from the same integer, so that an opening and a
    /// closing half kick meet at the same a.
    fn a_half(&self, tl: &Timeline, half: u64) -> f64 {
        if half >= 2 * tl.ti_end {
            return self.a_end;
        }
        let tau = half as f64 * (0.5 * tl.span(1));
        (self.a_start * tau.exp()).clamp(self.a_start, self.a_end)
    }

    /// The drift factor ∫dt/a² (internal time units) from tick `from` to tick `to`.
    pub fn drift(&self, tl: &Timeline, from: u64, to: u64) -> f64 {
        self.table.drift(self.a(tl, from), self.a(tl, to))
    }

    /// The kick factors ∫dt/a (internal time units) of `half` at tick `ti`, one per bin
    /// 0 ..= depth: over the last half step of bin b before `ti` (closing) or the first one
    /// after it (opening); 0 where that half step lies outside the run.
    pub fn kick_factors(&self, tl: &Timeline, ti: u64, half: HalfKick) -> Vec<f64> {
        (0..=tl.depth)
            .map(|b| {
                let h = tl.ticks(b); // half of the step, in half ticks
                let (from, to) = match half {
                    HalfKick::Closing => ((2 * ti).saturating_sub(h), 2 * ti),
                    HalfKick::Opening => (2 * ti, 2 * ti + h),
                };
                self.table.kick(self.a_half(tl, from), self.a_half(tl, to))
            })
            .collect()
    }

    /// The factor H(a) a^{3/2} (internal time⁻¹) that turns the physical time-step criterion
    /// Δt = η √(ε_phys / |a_phys|), with ε_phys = a ε and a_phys = F/a², into the step in τ:
    /// Δτ = H Δt = η H a^{3/2} √(ε / |F|) for comoving softening ε and force F.
    pub fn step_scale(&self, a: f64) -> f64 {
        self.cosmology.hubble_at(a) * a.powf(1.5)
    }

    /// Moves a copy of the particles `p` with their state `s` at tick `ti` of `tl` (at the
    /// start of a step: positions at `ti`, each momentum at the middle of its particle's
    /// current step, after its opening half kick) to the scale factor `a_out` (at or after
    /// `ti`'s, before the particles' next kicks): x ← x + p ∫dt/a² from a(ti), and
    /// p ← p + F ∫dt/a from the middle of the particle's step, as GADGET predicts its
    /// snapshots. Returns the particles at `a_out` (momenta p, not yet GADGET's velocities).
    pub fn predict(
        &self,
        p: &Particles,
        s: &IntegratorState,
        tl: &Timeline,
        ti: u64,
        a_out: f64,
    ) -> Particles {
        let d = self.table.drift(self.a(tl, ti), a_out);
        let mut q = p.clone();
        q.pos
            .par_iter_mut()
            .zip(q.vel.par_iter_mut())
            .zip(s.acc.par_iter().zip(&s.bin))
            .for_each(|((x, v), (f, &b))| {
                let t = tl.ticks(b);
                let middle = 2 * (ti - ti % t) + t;
                *x += *v * d;
                *v += *f * self.table.kick(self.a_half(tl, middle), a_out);
            });
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrate::{leapfrog, Stepping};
    use glam::DVec3;

    /// Einstein–de Sitter with H0 = 0.1: ∫dt/a² = (2/H0)(a1^{-1/2} − a2^{-1/2}),
    /// ∫dt/a = (2/H0)(√a2 − √a1).
    const H0: f64 = 0.1;

    fn eds(a_start: f64, a_end: f64) -> Expansion {
        Expansion::new(Cosmology::new(1.0, 0.0, 0.7, H0).unwrap(), a_start, a_end).unwrap()
    }

    fn drift_eds(a1: f64, a2: f64) -> f64 {
        2.0 / H0 * (a1.powf(-0.5) - a2.powf(-0.5))
    }

    fn kick_eds(a1: f64, a2: f64) -> f64 {
        2.0 / H0 * (a2.sqrt() - a1.sqrt())
    }

    #[test]
    fn ticks_map_to_scale_factors() {
        let e = eds(0.1, 1.0);
        let tl = Timeline::new(Stepping::Block, 0.5, 0.0, e.span());
        assert_eq!(e.a(&tl, 0), 0.1);
        assert_eq!(e.a(&tl, tl.ti_end), 1.0);
        let mid = tl.ti_end / 2;
        assert!((e.a(&tl, mid) - 0.1f64.sqrt()).abs() < 1e-14);
        // H a^{3/2} = H0 in Einstein–de Sitter.
        for a in [0.1, 0.5, 1.0] {
            assert!((e.step_scale(a) - H0).abs() < 1e-15);
        }
        assert!(Expansion::new(*e.cosmology(), 0.5, 0.5).is_err());
        assert!(Expansion::new(*e.cosmology(), 0.0, 0.5).is_err());
    }

    /// Closing and opening half kicks of every bin against the closed forms, and the kicks of
    /// a particle's steps adding up to ∫dt/a over them.
    #[test]
    fn kick_factors_are_half_steps_in_ln_a() {
        let e = eds(0.02, 1.0);
        let tl = Timeline::new(Stepping::Block, 0.25, 0.01, e.span());
        let step = |b: u8| tl.dt(b);
        let ti = tl.ticks(0) * 3;
        let a = e.a(&tl, ti);
        let closing = e.kick_factors(&tl, ti, HalfKick::Closing);
        let opening = e.kick_factors(&tl, ti, HalfKick::Opening);
        assert_eq!(closing.len(), tl.depth as usize + 1);
        for b in 0..=tl.depth {
            let h = 0.5 * step(b);
            let want_c = kick_eds(a * (-h).exp(), a);
            let want_o = kick_eds(a, a * h.exp());
            let (c, o) = (closing[b as usize], opening[b as usize]);
            assert!((c / want_c - 1.0).abs() < 1e-8, "bin {b}: {c} vs {want_c}");
            assert!((o / want_o - 1.0).abs() < 1e-8, "bin {b}: {o} vs {want_o}");
        }
        // Nothing before the start or after the end.
        assert_eq!(e.kick_factors(&tl, 0, HalfKick::Closing)[0], 0.0);
        assert_eq!(e.kick_factors(&tl, tl.ti_end, HalfKick::Opening)[0], 0.0);
        // A particle of the deepest bin kicked over the whole run: the sum is ∫dt/a.
        let deepest = tl.depth as usize;
        let total: f64 = (0..tl.ti_end)
            .map(|t| {
                e.kick_factors(&tl, t, HalfKick::Opening)[deepest]
                    + e.kick_factors(&tl, t + 1, HalfKick::Closing)[deepest]
            })
            .sum();
        assert!((total / kick_eds(0.02, 1.0) - 1.0).abs() < 1e-9, "{total}");
    }

    /// A free particle (F = 0) keeps its momentum, and its position advances by p ∫dt/a²
    /// over any steps (block steps of several bins, drifts between their ticks).
    #[test]
    fn a_free_particle_drifts_by_the_closed_form() {
        let e = eds(0.1, 1.0);
        let tl = Timeline::new(Stepping::Block, 0.1, 0.0, e.span());
        let mut p = Particles::default();
        let p0 = DVec3::new(3.0, -1.0, 0.5);
        p.push(DVec3::ZERO, p0, 1.0, 0);
        p.push(DVec3::ONE, 2.0 * p0, 1.0, 1);
        let mut s = IntegratorState::new(vec![DVec3::ZERO; 2], vec![0.0; 2]);
        s.bin = vec![0, 3];
        let mut ti = 0;
        while ti < tl.ti_end {
            let next = ti + tl.ticks(3);
            let active = s.active_at(&tl, ti);
            s.half_kick(&mut p, &e.kick_factors(&tl, ti, HalfKick::Opening), &active);
            leapfrog::drift(&mut p, e.drift(&tl, ti, next));
            let active = s.active_at(&tl, next);
            s.half_kick(
                &mut p,
                &e.kick_factors(&tl, next, HalfKick::Closing),
                &active,
            );
            ti = next;
        }
        let d = drift_eds(0.1, 1.0);
        assert_eq!((p.vel[0], p.vel[1]), (p0, 2.0 * p0));
        assert!((p.pos[0] - p0 * d).length() < 1e-9 * (p0 * d).length());
        assert!((p.pos[1] - DVec3::ONE - 2.0 * p0 * d).length() < 1e-9 * (2.0 * p0 * d).length());
    }

    /// The prediction to an output scale factor inside a step: positions drifted from the
    /// tick, momenta kicked from the middle of each particle's step.
    #[test]
    fn prediction_drifts_and_kicks_to_the_output() {
        let e = eds(0.1, 1.0);
        let tl = Timeline::new(Stepping::Block, 0.5, 0.0, e.span());
        let mut p = Particles::default();
        p.push(DVec3::X, DVec3::Y, 1.0, 0);
        p.push(DVec3::Z, DVec3::X, 1.0, 1);
        let f = DVec3::new(0.0, 0.0, 2.0);
        let mut s = IntegratorState::new(vec![f; 2], vec![0.0; 2]);
        s.bin = vec![0, 2];
        let ti = tl.ticks(2) * 5; // bin 2's sixth step starts; bin 0's second is under way
        let (a, a_out) = (e.a(&tl, ti), e.a(&tl, ti) * 1.01);
        let q = e.predict(&p, &s, &tl, ti, a_out);
        let mid0 = e.a(&tl, tl.ticks(0) / 2 + tl.ticks(0));
        let mid2 = a * (0.5 * tl.dt(2)).exp();
        let d = drift_eds(a, a_out);
        assert!((q.pos[0] - (DVec3::X + DVec3::Y * d)).length() < 1e-9);
        assert!((q.pos[1] - (DVec3::Z + DVec3::X * d)).length() < 1e-9);
        let want0 = DVec3::Y + f * kick_eds(mid0, a_out);
        let want1 = DVec3::X + f * kick_eds(mid2, a_out);
        assert!(
            (q.vel[0] - want0).length() < 1e-8,
            "{:?} vs {want0:?}",
            q.vel[0]
        );
        assert!(
            (q.vel[1] - want1).length() < 1e-8,
            "{:?} vs {want1:?}",
            q.vel[1]
        );
        assert_eq!(p.pos[0], DVec3::X, "the particles themselves stay");
    }
}
