//! A comoving run's setup (`docs/design.md`, *Comoving integration*): the `[cosmology]` table
//! and the initial conditions' header resolved into the expansion, the box or vacuum
//! boundaries with their background term, the softening law, G and H0 in the file's units, the
//! scale factors of the outputs and the snapshots' header fields; and the conversion between
//! GADGET's snapshot velocities u = v_pec/√a and the momenta p = a² dx/dt = a^{3/2} u the run
//! integrates.

use crate::comm::Comm;
use crate::cosmology::{hubble_for_units, Cosmology};
use crate::error::{Error, Result};
use crate::forces::ForceParams;
use crate::integrate::Expansion;
use crate::io::config::CosmologyConfig;
use crate::io::{SnapshotCosmology, SnapshotHeader, SnapshotMeta, SnapshotUnits};
use crate::particles::Particles;
use glam::DVec3;
use rayon::prelude::*;
use std::path::Path;

/// GADGET-2's gravitational constant in cgs (`GRAVITY` in its `allvars.h`), which GADGET's
/// default units (kpc, km/s, 10¹⁰ M_sun, with or without h) turn into G = 43007.1.
pub const GRAVITY_CGS: f64 = 6.672e-8;
/// One megaparsec in cm (GADGET's `CM_PER_MPC`).
const MPC_IN_CM: f64 = 3.085678e24;
/// One km/s in cm/s.
const KM_S_IN_CM_S: f64 = 1e5;
/// The relative difference below which a value of `[cosmology]` and the file's agree (a GADGET
/// file may hold the Ω's and h in float32).
const AGREE: f64 = 1e-6;

/// What a comoving run integrates with, beyond its timeline (whose time is τ = ln(a/a_start)).
#[derive(Clone, Debug)]
pub struct Comoving {
    /// The background, the run's range of scale factors and the drift and kick factors.
    pub expansion: Expansion,
    /// Side of the periodic box (length units); 0 for vacuum boundaries.
    pub period: f64,
    /// The softening ε of `[gravity] eps` (comoving length units).
    pub eps: f64,
    /// The largest physical softening (length units), if any.
    pub max_physical_softening: Option<f64>,
    /// The scale factors of the outputs, increasing, within the run's range.
    pub outputs: Vec<f64>,
    /// The gravitational constant in the run's units.
    pub g: f64,
    /// The header fields of the run's snapshots (the redshift is each snapshot's own).
    pub header: SnapshotCosmology,
    /// The run's units, for its snapshots.
    pub units: SnapshotUnits,
}

impl Comoving {
    /// The comoving run of `[cosmology]` table `c`, force parameters `force` (`eps`, `G`) and
    /// the header `h` of its initial conditions `path`: a_start = `Time`, which must be in
    /// (0, 1]; Ω_m, Ω_Λ and h from the table or, for a cosmological file
    /// ([`SnapshotHeader::is_cosmological`]), from its header (an error when neither gives one,
    /// or both give different values); units from the file (GADGET's where it names none), which
    /// give H0 and, unless `[gravity] G` is given, G; the box from `BoxSize`. One-line input
    /// errors name the table's key and the file's value.
    pub fn resolve(
        c: &CosmologyConfig,
        force: &ForceParams,
        h: &SnapshotHeader,
        path: &Path,
    ) -> Result<Self> {
        let file = path.display();
        let a_start = h.time;
        if !(a_start > 0.0 && a_start <= 1.0) {
            return Err(Error::input(format!(
                "{file}: Time = {a_start} is not a scale factor in (0, 1]; a comoving run \
                 ([cosmology]) starts at the Time = a of its initial conditions"
            )));
        }
        let f = &h.cosmology;
        let cosmological = h.is_cosmological();
        let omega_m = pick(
            "omega_m",
            c.omega_m,
            "Omega0",
            (cosmological && f.omega0 > 0.0).then_some(f.omega0),
            path,
        )?;
        let omega_lambda = pick(
            "omega_lambda",
            c.omega_lambda,
            "OmegaLambda",
            cosmological.then_some(f.omega_lambda),
            path,
        )?;
        let hubble_param = pick(
            "hubble_param",
            c.hubble_param,
            "HubbleParam",
            cosmological.then_some(f.hubble_param),
            path,
        )?;
        let units = h.units.unwrap_or(SnapshotUnits::GADGET);
        // GADGET's units carry h implicitly (kpc/h, 10¹⁰ M_sun/h): H0 = 100 km/s/Mpc in them.
        let hubble = hubble_for_units(
            1.0,
            units.length_in_cm / MPC_IN_CM,
            units.velocity_in_cm_per_s / KM_S_IN_CM_S,
        );
        let cosmology = Cosmology::new(omega_m, omega_lambda, hubble_param, hubble)?;
        let a_end = 1.0 / (1.0 + c.z_end);
        if a_end <= a_start {
            return Err(Error::input(format!(
                "[cosmology] z_end = {} must be below the redshift z = {} of the initial \
                 conditions ({file}: Time = a = {a_start})",
                c.z_end,
                1.0 / a_start - 1.0
            )));
        }
        let expansion = Expansion::new(cosmology, a_start, a_end)?;
        let period = match (c.periodic, f.box_size > 0.0) {
            (Some(true), false) => {
                return Err(Error::input(format!(
                    "[cosmology] periodic = true needs a box, but {file} has BoxSize = {}",
                    f.box_size
                )))
            }
            (Some(true), true) | (None, true) => f.box_size,
            (Some(false), _) | (None, false) => 0.0,
        };
        let mut outputs = Vec::with_capacity(c.output_redshifts.len());
        for &z in &c.output_redshifts {
            let a = 1.0 / (1.0 + z);
            // Tolerate the rounding of z_start = 1/a_start - 1 and back.
            if a < a_start * (1.0 - 1e-12) {
                return Err(Error::input(format!(
                    "[cosmology] output_redshifts must lie in [z_end, z_start] = [{}, {}] \
                     (got {z})",
                    c.z_end,
                    1.0 / a_start - 1.0
                )));
            }
            outputs.push(a.clamp(a_start, a_end));
        }
        outputs.sort_by(f64::total_cmp);
        let g = match c.g_from_units {
            true => {
                GRAVITY_CGS * units.mass_in_g
                    / (units.length_in_cm * units.velocity_in_cm_per_s * units.velocity_in_cm_per_s)
            }
            false => force.g,
        };
        Ok(Self {
            expansion,
            period,
            eps: force.eps,
            max_physical_softening: c.max_physical_softening,
            outputs,
            g,
            header: SnapshotCosmology {
                box_size: period,
                redshift: 1.0 / a_start - 1.0,
                omega0: omega_m,
                omega_baryon: f.omega_baryon,
                omega_lambda,
                hubble_param,
            },
            units,
        })
    }

    /// The comoving softening at scale factor `a` (length units): min(ε, ε_phys,max / a).
    pub fn softening(&self, a: f64) -> f64 {
        self.max_physical_softening
            .map_or(self.eps, |m| self.eps.min(m / a))
    }

    /// The coefficient of the background term ½ Ω_m H0² x that vacuum boundaries add to the
    /// force per unit mass (time⁻²); 0 in a periodic box, whose forces subtract the mean
    /// density themselves.
    pub fn background(&self) -> f64 {
        match self.period > 0.0 {
            true => 0.0,
            false => {
                let c = self.expansion.cosmology();
                0.5 * c.omega_m() * c.hubble() * c.hubble()
            }
        }
    }

    /// The force parameters of the run from the configured `base`: G in the run's units, the
    /// softening at the start and the periodic box (nearest images and the Ewald correction),
    /// which `[gravity] box` may repeat but not contradict.
    pub fn force_params(&self, base: &ForceParams) -> Result<ForceParams> {
        if base.box_size > 0.0 && base.box_size != self.period {
            return Err(Error::input(format!(
                "[gravity] box = {} disagrees with the comoving run's box {} (the initial \
                 conditions' BoxSize, or 0 with vacuum boundaries)",
                base.box_size, self.period
            )));
        }
        Ok(ForceParams {
            g: self.g,
            eps: self.softening(self.expansion.a_start()),
            box_size: self.period,
            ..base.clone()
        })
    }

    /// The particles `p` (at scale factor `a`) as a snapshot holds them, in place: their
    /// momenta turned into GADGET's velocities u = p / a^{3/2}; returns the snapshot's `Time`
    /// = a, cosmology and units.
    pub fn as_snapshot(&self, p: &mut Particles, a: f64) -> SnapshotMeta {
        let f = a.powf(-1.5);
        p.vel.par_iter_mut().for_each(|v| *v *= f);
        SnapshotMeta::comoving(a, self.header, self.units)
    }
}

/// The value of key `name` of `[cosmology]`: the table's `given` or the file's `in_file`
/// (attribute `attr` of `path`), which must agree where both exist; one must.
fn pick(
    name: &str,
    given: Option<f64>,
    attr: &str,
    in_file: Option<f64>,
    path: &Path,
) -> Result<f64> {
    match (given, in_file) {
        (Some(g), Some(f)) if (g - f).abs() > AGREE * g.abs().max(f.abs()) => {
            Err(Error::input(format!(
                "[cosmology] {name} = {g} disagrees with {attr} = {f} of {}",
                path.display()
            )))
        }
        (Some(v), _) | (None, Some(v)) => Ok(v),
        (None, None) => Err(Error::input(format!(
            "[cosmology] needs {name}: {} gives no {attr} (not a cosmological snapshot)",
            path.display()
        ))),
    }
}

/// GADGET's snapshot velocities u = v_pec/√a of the particles `p` at scale factor `a` turned
/// into the momenta p = a² dx/dt = a^{3/2} u, in place.
pub fn to_momenta(p: &mut Particles, a: f64) {
    let f = a.powf(1.5);
    p.vel.par_iter_mut().for_each(|v| *v *= f);
}

/// Logs a warning (rank 0) when the particles of a vacuum comoving run are not centred on the
/// origin, about which the background term ½ Ω_m H0² x expands them: when their centre of mass
/// lies farther from it than a tenth of their rms distance from that centre. Collective.
pub fn warn_if_off_centre(p: &Particles, comm: &dyn Comm) {
    let m: f64 = p.mass.par_iter().sum();
    let mx: DVec3 = p.pos.par_iter().zip(&p.mass).map(|(x, m)| *x * *m).sum();
    let mxx: f64 = p
        .pos
        .par_iter()
        .zip(&p.mass)
        .map(|(x, m)| x.length_squared() * m)
        .sum();
    let mut s = [m, mx.x, mx.y, mx.z, mxx];
    comm.allreduce_sum_f64(&mut s);
    if comm.rank() != 0 || s[0] <= 0.0 {
        return;
    }
    let centre = DVec3::new(s[1], s[2], s[3]) / s[0];
    let rms = (s[4] / s[0] - centre.length_squared()).max(0.0).sqrt();
    if centre.length() > 0.1 * rms {
        tracing::warn!(
            "a comoving run with vacuum boundaries expands about the origin, but the \
             particles' centre of mass is at {:?} (rms distance from it {rms:.4e}): centre \
             the initial conditions on the origin",
            centre.to_array()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn header(time: f64, cosmology: SnapshotCosmology) -> SnapshotHeader {
        SnapshotHeader {
            particles: 8,
            time,
            files: 1,
            cosmology,
            units: None,
            per_type: [0, 8, 0, 0, 0, 0],
            comoving: None,
        }
    }

    const LCDM: SnapshotCosmology = SnapshotCosmology::TEST_LCDM;

    fn vacuum() -> SnapshotCosmology {
        SnapshotCosmology {
            box_size: 0.0,
            ..LCDM
        }
    }

    fn err(r: Result<Comoving>) -> String {
        let e = r.expect_err("accepted");
        assert_eq!(e.kind, ErrorKind::Input);
        assert!(!e.message.contains('\n'), "{}", e.message);
        e.message
    }

    #[test]
    fn gadget_units_give_g_and_h0() {
        let c = CosmologyConfig::default();
        let r = Comoving::resolve(
            &c,
            &ForceParams::default(),
            &header(0.02, vacuum()),
            Path::new("ics.hdf5"),
        )
        .unwrap();
        assert!((r.g - 43007.1).abs() < 0.05, "G = {}", r.g);
        assert!((r.expansion.cosmology().hubble() - 0.1).abs() < 1e-15);
        assert_eq!(r.expansion.cosmology().omega_m(), 0.3);
        assert_eq!((r.expansion.a_start(), r.expansion.a_end()), (0.02, 1.0));
        assert_eq!(r.period, 0.0);
        // ½ Ω_m H0² = 0.5 · 0.3 · 0.01.
        assert!((r.background() - 1.5e-3).abs() < 1e-18);
        // [gravity] G given: kept.
        let given = CosmologyConfig {
            g_from_units: false,
            ..c
        };
        let force = ForceParams {
            g: 2.5,
            ..ForceParams::default()
        };
        let h = header(0.02, vacuum());
        let r = Comoving::resolve(&given, &force, &h, Path::new("x")).unwrap();
        assert_eq!(r.g, 2.5);
    }

    #[test]
    fn the_table_and_the_file_must_agree_and_one_must_say() {
        let path = Path::new("ics.hdf5");
        let f = ForceParams::default();
        let plain = header(0.1, SnapshotCosmology::NONE);
        let m = err(Comoving::resolve(
            &CosmologyConfig::default(),
            &f,
            &plain,
            path,
        ));
        assert!(
            m.contains("[cosmology] needs omega_m") && m.contains("Omega0"),
            "{m}"
        );
        let c = CosmologyConfig {
            omega_m: Some(0.31),
            ..CosmologyConfig::default()
        };
        let m = err(Comoving::resolve(&c, &f, &header(0.02, LCDM), path));
        assert!(
            m.contains("omega_m = 0.31") && m.contains("Omega0 = 0.3 of ics.hdf5"),
            "{m}"
        );
        let eds = CosmologyConfig {
            omega_m: Some(1.0),
            omega_lambda: Some(0.0),
            hubble_param: Some(0.7),
            ..CosmologyConfig::default()
        };
        assert!(Comoving::resolve(&eds, &f, &plain, path).is_ok());
        // A float32 copy of the file's value agrees.
        let close = CosmologyConfig {
            omega_m: Some(0.3f32 as f64),
            ..CosmologyConfig::default()
        };
        assert!(Comoving::resolve(&close, &f, &header(0.02, LCDM), path).is_ok());
        for (time, needle) in [(0.0, "Time = 0 is not"), (1.5, "Time = 1.5 is not")] {
            let m = err(Comoving::resolve(&eds, &f, &header(time, LCDM), path));
            assert!(m.contains(needle), "{m}");
        }
        let late = CosmologyConfig {
            z_end: 60.0,
            ..eds.clone()
        };
        let plain = header(0.02, SnapshotCosmology::NONE);
        let m = err(Comoving::resolve(&late, &f, &plain, path));
        assert!(m.contains("z_end = 60 must be below"), "{m}");
        let early = CosmologyConfig {
            output_redshifts: vec![2.0, 55.0],
            ..eds.clone()
        };
        let m = err(Comoving::resolve(&early, &f, &plain, path));
        assert!(
            m.contains("output_redshifts") && m.contains("(got 55)"),
            "{m}"
        );
        let boxless = CosmologyConfig {
            periodic: Some(true),
            ..eds.clone()
        };
        let m = err(Comoving::resolve(&boxless, &f, &plain, path));
        assert!(m.contains("periodic = true needs a box"), "{m}");
    }

    #[test]
    fn outputs_are_scale_factors_in_order_and_softening_caps_physically() {
        let c = CosmologyConfig {
            output_redshifts: vec![0.0, 8.9, 49.0, 2.5],
            max_physical_softening: Some(2.8),
            ..CosmologyConfig::default()
        };
        let f = ForceParams {
            eps: 8.4,
            ..ForceParams::default()
        };
        let r = Comoving::resolve(&c, &f, &header(0.02, vacuum()), Path::new("x")).unwrap();
        let want = [0.02, 1.0 / 9.9, 1.0 / 3.5, 1.0];
        assert_eq!(r.outputs.len(), 4);
        for (a, w) in r.outputs.iter().zip(want) {
            assert!((a - w).abs() < 1e-15, "{a} vs {w}");
        }
        assert_eq!(r.softening(0.1), 8.4);
        assert!((r.softening(1.0) - 2.8).abs() < 1e-15);
        assert!((r.softening(0.5) - 5.6).abs() < 1e-15);
        assert_eq!(r.force_params(&f).unwrap().eps, 8.4);
        // A periodic box is the force evaluation's, which [gravity] box may repeat only.
        let boxed = Comoving::resolve(&c, &f, &header(0.02, LCDM), Path::new("x")).unwrap();
        assert_eq!(boxed.period, 100_000.0);
        assert_eq!(boxed.background(), 0.0);
        assert_eq!(boxed.force_params(&f).unwrap().box_size, 100_000.0);
        let other = ForceParams {
            box_size: 50_000.0,
            ..f.clone()
        };
        assert!(boxed.force_params(&other).is_err());
    }

    #[test]
    fn momenta_are_a_to_the_three_halves_times_gadget_velocities() {
        let mut p = Particles::default();
        p.push(DVec3::ZERO, DVec3::new(1.0, -2.0, 4.0), 1.0, 1);
        to_momenta(&mut p, 0.25);
        assert_eq!(p.vel[0], DVec3::new(0.125, -0.25, 0.5));
    }
}
