//! The `/Header` group of a snapshot file: GADGET's attributes, written with GADGET-4's types
//! and read from any GADGET version's.

use super::format::Format;
use super::numbers::{read_numbers, Numbers};
use crate::error::{Error, Result};
use crate::particles::PARTICLE_TYPES;
use hdf5::types::VarLenUnicode;
use std::path::Path;

/// Particle types of a GADGET snapshot; every per-type array has this many entries.
pub(super) const TYPES: usize = PARTICLE_TYPES;
/// The most values a header attribute is read with (GADGET's per-type arrays hold one per
/// particle type).
const MAX_VALUES: usize = 64;
/// Type 1, the type every per-type header array must reach (GADGET's collisionless "halo"
/// particles, which every GADGET snapshot has room for).
const HALO: usize = 1;
/// Seconds in a gigayear (Julian years), for `Time_GYR`.
const GYR_IN_S: f64 = 3.15576e16;

/// The cosmological fields of a snapshot's `/Header` (GADGET's names in brackets). hinoki's
/// N-body-unit files hold the values of [`SnapshotCosmology::NONE`]; a file that lacks one of
/// these attributes (GADGET-4 keeps the Ω's and h in `/Parameters` only) is read with the
/// value from `/Parameters`, else the one of `NONE`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapshotCosmology {
    /// Side of the periodic box (`BoxSize`, length units: kpc/h in GADGET's units); 0 for
    /// open boundaries.
    pub box_size: f64,
    /// Redshift z of the snapshot (`Redshift`); `Time` holds a = 1/(1 + z).
    pub redshift: f64,
    /// Ω_m today (`Omega0`).
    pub omega0: f64,
    /// Ω_b today (`OmegaBaryon`).
    pub omega_baryon: f64,
    /// Ω_Λ today (`OmegaLambda`).
    pub omega_lambda: f64,
    /// h, H0 in units of 100 km/s/Mpc (`HubbleParam`).
    pub hubble_param: f64,
}

impl SnapshotCosmology {
    /// What a non-cosmological file holds: no box, z = 0, Ω's 0, h = 1.
    pub const NONE: Self = Self {
        box_size: 0.0,
        redshift: 0.0,
        omega0: 0.0,
        omega_baryon: 0.0,
        omega_lambda: 0.0,
        hubble_param: 1.0,
    };

    /// The fields of the unit tests' cosmological files: a 100 Mpc/h box (kpc/h, GADGET's
    /// units) of flat ΛCDM (Ω_m 0.3, Ω_b 0.045, h 0.7) at z = 49.
    #[cfg(test)]
    pub(crate) const TEST_LCDM: Self = Self {
        box_size: 100_000.0,
        redshift: 49.0,
        omega0: 0.3,
        omega_baryon: 0.045,
        omega_lambda: 0.7,
        hubble_param: 0.7,
    };

    /// Whether a header with these fields describes a cosmological (comoving) snapshot:
    /// `Redshift > 0`, or a periodic box (`BoxSize > 0`) with matter (`Omega0 > 0`). A z = 0
    /// snapshot of a cosmological run has its box and Ω_m; a GADGET run without comoving
    /// integration writes z = 0 and, unless periodic with Ω_m set, no box or Ω_m.
    pub fn is_cosmological(&self) -> bool {
        self.redshift > 0.0 || (self.box_size > 0.0 && self.omega0 > 0.0)
    }

    /// The names and values of the fields, in GADGET's spelling.
    fn named(&self) -> [(&'static str, f64); 6] {
        [
            ("BoxSize", self.box_size),
            ("Redshift", self.redshift),
            ("Omega0", self.omega0),
            ("OmegaBaryon", self.omega_baryon),
            ("OmegaLambda", self.omega_lambda),
            ("HubbleParam", self.hubble_param),
        ]
    }
}

/// The unit system of a snapshot in cgs, as GADGET-4 records it in `/Parameters`
/// (`UnitLength_in_cm`, `UnitMass_in_g`, `UnitVelocity_in_cm_per_s`; hinoki writes them in
/// `/Header` as well). The time unit is length / velocity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapshotUnits {
    /// The length unit in cm.
    pub length_in_cm: f64,
    /// The mass unit in g.
    pub mass_in_g: f64,
    /// The velocity unit in cm/s.
    pub velocity_in_cm_per_s: f64,
}

impl SnapshotUnits {
    /// GADGET's defaults: lengths in kpc/h (3.085678e21 cm), masses in 10¹⁰ M_sun/h
    /// (1.989e43 g) and velocities in km/s (1e5 cm/s); the factors of h are implied.
    pub const GADGET: Self = Self {
        length_in_cm: 3.085678e21,
        mass_in_g: 1.989e43,
        velocity_in_cm_per_s: 1e5,
    };

    /// hinoki's N-body units (G = 1) given a physical scale: lengths in kpc (3.085678e21 cm)
    /// and masses in 10¹⁰ M_sun (1.989e43 g), GADGET's values without h, and the velocity that
    /// makes G = 6.67430e-8 cm³ g⁻¹ s⁻² equal to 1, √(G M / L) = 207.417 km/s; the time unit
    /// is then L/V = 4.714 Myr. What a snapshot of a non-cosmological run records
    /// ([`SnapshotMeta::nbody`]): the run's numbers are these units only if its problem was
    /// set up in them, but readers that honour the units (pynbody) get a consistent G = 1.
    pub const NBODY: Self = Self {
        length_in_cm: 3.085678e21,
        mass_in_g: 1.989e43,
        velocity_in_cm_per_s: 20_741_728.790_703_762,
    };

    /// The time unit in seconds: length / velocity.
    pub fn time_in_s(&self) -> f64 {
        self.length_in_cm / self.velocity_in_cm_per_s
    }

    /// The units a file of a run in these units stores its numbers in: kpc, 10¹⁰ M☉ and km/s
    /// (the values of [`SnapshotUnits::GADGET`], which yt assumes of every GADGET file) for a
    /// run that is not comoving in hinoki's N-body units ([`SnapshotUnits::NBODY`]), so that
    /// analysis tools which take GADGET's units for granted read its velocities and times
    /// right; these units themselves for every other run.
    pub(super) fn stored(self, comoving: bool) -> Self {
        match !comoving && self == Self::NBODY {
            true => Self::GADGET,
            false => self,
        }
    }

    /// The names and values of the fields, in GADGET's spelling.
    fn named(&self) -> [(&'static str, f64); 3] {
        [
            ("UnitLength_in_cm", self.length_in_cm),
            ("UnitMass_in_g", self.mass_in_g),
            ("UnitVelocity_in_cm_per_s", self.velocity_in_cm_per_s),
        ]
    }
}

/// The factors that take numbers in one unit system to another ([`Conversion::between`]):
/// a length, mass or velocity x in the first is x times the factor in the second. A factor is
/// exactly 1 where the two units are equal, so numbers in equal units pass unchanged, bit for
/// bit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Conversion {
    /// Lengths.
    pub length: f64,
    /// Masses.
    pub mass: f64,
    /// Velocities.
    pub velocity: f64,
}

impl Conversion {
    /// No conversion.
    pub const NONE: Self = Self {
        length: 1.0,
        mass: 1.0,
        velocity: 1.0,
    };

    /// From numbers in `from` to numbers in `to`.
    pub fn between(from: SnapshotUnits, to: SnapshotUnits) -> Self {
        let ratio = |a: f64, b: f64| if a == b { 1.0 } else { a / b };
        Self {
            length: ratio(from.length_in_cm, to.length_in_cm),
            mass: ratio(from.mass_in_g, to.mass_in_g),
            velocity: ratio(from.velocity_in_cm_per_s, to.velocity_in_cm_per_s),
        }
    }

    /// Times (length / velocity).
    pub fn time(&self) -> f64 {
        self.length / self.velocity
    }

    /// Accelerations (velocity² / length).
    pub fn acceleration(&self) -> f64 {
        self.velocity * self.velocity / self.length
    }

    /// Potentials per unit mass (velocity²).
    pub fn potential(&self) -> f64 {
        self.velocity * self.velocity
    }
}

/// Units that a run's configuration gives its initial conditions (the `[ics]` keys
/// `unit_length_in_cm`, `unit_mass_in_g`, `unit_velocity_in_cm_per_s`, GADGET's parameter
/// names; each in cgs, finite and > 0): for a file that records no units (GADGET's binary
/// files; HDF5 files without unit attributes) each given one replaces GADGET's default
/// ([`SnapshotUnits::GADGET`]); a file that records units must record the given ones
/// ([`SnapshotHeader::with_units`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GivenUnits {
    /// The length unit in cm (`unit_length_in_cm`), if given.
    pub length_in_cm: Option<f64>,
    /// The mass unit in g (`unit_mass_in_g`), if given.
    pub mass_in_g: Option<f64>,
    /// The velocity unit in cm/s (`unit_velocity_in_cm_per_s`), if given.
    pub velocity_in_cm_per_s: Option<f64>,
}

/// The relative difference below which a unit given in `[ics]` and a file's agree.
const UNITS_AGREE: f64 = 1e-6;

impl GivenUnits {
    /// Whether no unit is given.
    pub fn is_empty(&self) -> bool {
        self.named().iter().all(|(_, _, v)| v.is_none())
    }

    /// The `[ics]` key, the snapshot attribute and the value of each unit.
    pub fn named(&self) -> [(&'static str, &'static str, Option<f64>); 3] {
        [
            ("unit_length_in_cm", "UnitLength_in_cm", self.length_in_cm),
            ("unit_mass_in_g", "UnitMass_in_g", self.mass_in_g),
            (
                "unit_velocity_in_cm_per_s",
                "UnitVelocity_in_cm_per_s",
                self.velocity_in_cm_per_s,
            ),
        ]
    }
}

/// What a snapshot records besides its particles: the time, whether the run integrates
/// comoving coordinates, the cosmology and the units ([`crate::io::write_snapshot`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapshotMeta {
    /// `Time`: the simulation time (time units), or the scale factor a of a comoving run.
    pub time: f64,
    /// Whether the particles are in a comoving run's coordinates (GADGET's
    /// `ComovingIntegrationOn`): comoving positions, velocities u = v/√a, `Time` = a. It also
    /// sets the datasets' `a_scaling` and `h_scaling` attributes (zero when false).
    pub comoving: bool,
    /// `BoxSize`, `Redshift`, the Ω's and h.
    pub cosmology: SnapshotCosmology,
    /// The units the particles are in.
    pub units: SnapshotUnits,
}

impl SnapshotMeta {
    /// A non-cosmological snapshot at time `time` (time units): no box, z = 0, Ω's 0, h = 1
    /// ([`SnapshotCosmology::NONE`]), hinoki's N-body units ([`SnapshotUnits::NBODY`]).
    pub fn nbody(time: f64) -> Self {
        Self {
            time,
            comoving: false,
            cosmology: SnapshotCosmology::NONE,
            units: SnapshotUnits::NBODY,
        }
    }

    /// A comoving run's snapshot at scale factor `a`: `cosmology` with its redshift set to
    /// 1/a − 1, in `units` (GADGET's are [`SnapshotUnits::GADGET`]).
    pub fn comoving(a: f64, cosmology: SnapshotCosmology, units: SnapshotUnits) -> Self {
        Self {
            time: a,
            comoving: true,
            cosmology: SnapshotCosmology {
                redshift: 1.0 / a - 1.0,
                ..cosmology
            },
            units,
        }
    }

    /// Rejects what no snapshot can record: a time that is not finite, a comoving snapshot
    /// whose scale factor is not > 0, a box that is negative or not finite, a unit that is not
    /// finite and > 0, or another field that is not finite. The error says what (the caller
    /// names the file).
    pub(super) fn check(&self) -> std::result::Result<(), String> {
        if !self.time.is_finite() || (self.comoving && self.time <= 0.0) {
            return Err(format!(
                "cannot write Time = {} (must be finite{})",
                self.time,
                if self.comoving {
                    ", and a scale factor a > 0 in a comoving run"
                } else {
                    ""
                }
            ));
        }
        let c = &self.cosmology;
        if !(c.box_size.is_finite() && c.box_size >= 0.0) {
            return Err(format!(
                "cannot write BoxSize = {} (must be finite and >= 0)",
                c.box_size
            ));
        }
        if let Some((name, v)) = c.named().into_iter().find(|(_, v)| !v.is_finite()) {
            return Err(format!("cannot write {name} = {v} (must be finite)"));
        }
        if let Some((name, v)) = self
            .units
            .named()
            .into_iter()
            .find(|(_, v)| !(v.is_finite() && *v > 0.0))
        {
            return Err(format!("cannot write {name} = {v} (a unit must be > 0)"));
        }
        Ok(())
    }
}

/// A time (time units) alone is a non-cosmological snapshot ([`SnapshotMeta::nbody`]).
impl From<f64> for SnapshotMeta {
    fn from(time: f64) -> Self {
        Self::nbody(time)
    }
}

/// What [`crate::io::read_snapshot_header`] tells of a snapshot without reading its particles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SnapshotHeader {
    /// Particles of all types in the whole snapshot (the sum of `NumPart_Total`).
    pub particles: u64,
    /// Particles of each type (0 … 5) in the whole snapshot (`NumPart_Total`).
    pub per_type: [u64; TYPES],
    /// `Time`: the simulation time (time units), or the scale factor a of a cosmological
    /// snapshot.
    pub time: f64,
    /// Files in the snapshot (`NumFilesPerSnapshot`).
    pub files: usize,
    /// The cosmological fields.
    pub cosmology: SnapshotCosmology,
    /// The unit system, when the file records one (`/Parameters`, or `/Header` as some
    /// writers put it).
    pub units: Option<SnapshotUnits>,
    /// `ComovingIntegrationOn` of `/Parameters` (or `/Header`), when the file records it
    /// (GADGET-4 and hinoki do).
    pub comoving: Option<bool>,
}

impl SnapshotHeader {
    /// Whether the snapshot is a comoving run's: as its `ComovingIntegrationOn` says, else by
    /// [`SnapshotCosmology::is_cosmological`] (files that do not record it).
    pub fn is_cosmological(&self) -> bool {
        self.comoving
            .unwrap_or_else(|| self.cosmology.is_cosmological())
    }

    /// This header with the units `given` by the configuration of a run from the file `path`:
    /// where the file records no units, GADGET's defaults with each given unit in place of
    /// the default; where it records units, these, which must agree with every given one (to
    /// 1e-6; the error names the key, the attribute and both values).
    pub fn with_units(self, given: &GivenUnits, path: &Path) -> Result<Self> {
        if given.is_empty() {
            return Ok(self);
        }
        let Some(recorded) = self.units else {
            let d = SnapshotUnits::GADGET;
            let units = SnapshotUnits {
                length_in_cm: given.length_in_cm.unwrap_or(d.length_in_cm),
                mass_in_g: given.mass_in_g.unwrap_or(d.mass_in_g),
                velocity_in_cm_per_s: given.velocity_in_cm_per_s.unwrap_or(d.velocity_in_cm_per_s),
            };
            return Ok(Self {
                units: Some(units),
                ..self
            });
        };
        let in_file = recorded.named();
        for ((key, attr, value), (_, file)) in given.named().into_iter().zip(in_file) {
            if let Some(v) =
                value.filter(|v| (v - file).abs() > UNITS_AGREE * v.abs().max(file.abs()))
            {
                return Err(Error::input(format!(
                    "[ics] {key} = {v} disagrees with {attr} = {file} of {} (the [ics] units are \
                     for files that record none, such as GADGET's binary files)",
                    path.display()
                )));
            }
        }
        Ok(self)
    }

    /// The box, redshift, scale factor and Ω_m, in a few words: "BoxSize 100000, z = 49,
    /// a = 0.02, Omega0 = 0.3".
    pub fn summary(&self) -> String {
        let c = &self.cosmology;
        format!(
            "BoxSize {}, z = {}, a = {}, Omega0 = {}",
            c.box_size, c.redshift, self.time, c.omega0
        )
    }

    /// What a snapshot of these particles would record to say the same ([`SnapshotMeta`]):
    /// the time, [`SnapshotHeader::is_cosmological`], the cosmology, and the units, GADGET's
    /// defaults ([`SnapshotUnits::GADGET`], what GADGET assumes and yt takes) when the file
    /// records none.
    pub fn meta(&self) -> SnapshotMeta {
        SnapshotMeta {
            time: self.time,
            comoving: self.is_cosmological(),
            cosmology: self.cosmology,
            units: self.units.unwrap_or(SnapshotUnits::GADGET),
        }
    }
}

/// What hinoki uses of a snapshot file's header.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Header {
    /// Particles of each type in this file.
    pub this_file: [u64; TYPES],
    /// Particles of each type in the whole snapshot.
    pub total: [u64; TYPES],
    /// Mass of every particle of a type (mass units); 0 where masses are per particle.
    pub mass_table: [f64; TYPES],
    /// Simulation time of the snapshot (time units), or the scale factor.
    pub time: f64,
    /// Files in the snapshot.
    pub files: usize,
    /// `BoxSize`, `Redshift`, the Ω's and h.
    pub cosmology: SnapshotCosmology,
    /// The unit system of the file's numbers; every file hinoki writes has one.
    pub units: Option<SnapshotUnits>,
    /// The units of the run that wrote the file, where they are not the file's (`/Config`
    /// `RunUnitLength_in_cm`, `RunUnitMass_in_g`, `RunUnitVelocity_in_cm_per_s`): its numbers
    /// were converted to `units` on writing ([`SnapshotUnits::stored`]) and are converted back
    /// on reading, so that a run from the file continues in the units it was written in.
    pub run_units: Option<SnapshotUnits>,
    /// `ComovingIntegrationOn`, when recorded; every file hinoki writes has it.
    pub comoving: Option<bool>,
    /// `TimeBegin` of `/Parameters` (the time a run from this file starts at): written for
    /// single files (initial conditions), not for a run's outputs.
    pub time_begin: Option<f64>,
    /// The format of the file the header is from (how messages name its fields).
    pub format: Format,
}

impl Header {
    /// The header of a file hinoki writes: `this_file` and `total` particles of each type,
    /// the `mass_table`, in a snapshot of `files` files, with what `meta` records.
    pub fn written(
        meta: &SnapshotMeta,
        this_file: [u64; TYPES],
        total: [u64; TYPES],
        mass_table: [f64; TYPES],
        files: usize,
    ) -> Self {
        let stored = meta.units.stored(meta.comoving);
        let c = Conversion::between(meta.units, stored);
        Self {
            this_file,
            total,
            mass_table: mass_table.map(|m| m * c.mass),
            time: meta.time * c.time(),
            files,
            cosmology: meta.cosmology,
            units: Some(stored),
            run_units: (stored != meta.units).then_some(meta.units),
            comoving: Some(meta.comoving),
            time_begin: None,
            format: Format::Hdf5,
        }
    }

    /// The conversion of the file's numbers to the units of the run that wrote it
    /// ([`Header::run_units`]; none where the file records no other).
    pub fn file_to_run(&self) -> Conversion {
        match (self.units, self.run_units) {
            (Some(file), Some(run)) => Conversion::between(file, run),
            _ => Conversion::NONE,
        }
    }

    /// The conversion of the run's numbers to the file's units (the inverse of
    /// [`Header::file_to_run`]).
    pub fn run_to_file(&self) -> Conversion {
        match (self.units, self.run_units) {
            (Some(file), Some(run)) => Conversion::between(run, file),
            _ => Conversion::NONE,
        }
    }

    /// What [`crate::io::read_snapshot_header`] returns of this header: in the units of the
    /// run that wrote it.
    pub fn public(&self) -> SnapshotHeader {
        SnapshotHeader {
            particles: self.total.iter().fold(0u64, |s, &n| s.saturating_add(n)),
            per_type: self.total,
            time: self.time * self.file_to_run().time(),
            files: self.files,
            cosmology: self.cosmology,
            units: self.run_units.or(self.units),
            comoving: self.comoving,
        }
    }

    /// Writes the header attributes into `group`, with GADGET-4's types: GADGET-4's own
    /// (`NumPart_ThisFile`, `NumPart_Total`, `MassTable`, `Time`, `Redshift`, `BoxSize`,
    /// `NumFilesPerSnapshot`), GADGET-2's (`NumPart_Total_HighWord`, `Omega0`, `OmegaLambda`,
    /// `HubbleParam`) and `OmegaBaryon`, and the units (where yt's Arepo reader and some
    /// scripts look).
    pub fn write(&self, group: &hdf5::Group) -> hdf5::Result<()> {
        group
            .new_attr::<u64>()
            .shape(TYPES)
            .create("NumPart_ThisFile")?
            .write_raw(&self.this_file)?;
        group
            .new_attr::<u64>()
            .shape(TYPES)
            .create("NumPart_Total")?
            .write_raw(&self.total)?;
        group
            .new_attr::<u32>()
            .shape(TYPES)
            .create("NumPart_Total_HighWord")?
            .write_raw(&[0u32; TYPES])?;
        group
            .new_attr::<f64>()
            .shape(TYPES)
            .create("MassTable")?
            .write_raw(&self.mass_table)?;
        let files = i32::try_from(self.files).unwrap_or(i32::MAX);
        group
            .new_attr::<i32>()
            .create("NumFilesPerSnapshot")?
            .write_scalar(&files)?;
        group
            .new_attr::<f64>()
            .create("Time")?
            .write_scalar(&self.time)?;
        let units = self.units.iter().flat_map(SnapshotUnits::named);
        for (name, value) in self.cosmology.named().into_iter().chain(units) {
            group.new_attr::<f64>().create(name)?.write_scalar(&value)?;
        }
        Ok(())
    }

    /// Writes `/Parameters` as GADGET-4 does, with the parameters that describe the file: the
    /// units, the Ω's, h, `BoxSize`, `ComovingIntegrationOn`, and `TimeBegin` where the file
    /// starts a run. A non-comoving file adds `Time_GYR`, its time in Gyr (pynbody's time of
    /// a snapshot; without it pynbody takes the age of the universe of the header's Ω's).
    pub fn write_parameters(&self, file: &hdf5::File) -> hdf5::Result<()> {
        let (Some(units), Some(comoving)) = (self.units, self.comoving) else {
            return Ok(());
        };
        let group = file.create_group("Parameters")?;
        let gyr = (!comoving).then(|| ("Time_GYR", self.time * units.time_in_s() / GYR_IN_S));
        let values = units
            .named()
            .into_iter()
            .chain(
                self.cosmology
                    .named()
                    .into_iter()
                    .filter(|(n, _)| *n != "Redshift"),
            )
            .chain(self.time_begin.map(|t| ("TimeBegin", t)))
            .chain(gyr);
        for (name, value) in values {
            group.new_attr::<f64>().create(name)?.write_scalar(&value)?;
        }
        group
            .new_attr::<i32>()
            .create("ComovingIntegrationOn")?
            .write_scalar(&i32::from(comoving))?;
        Ok(())
    }

    /// Reads the header of the file `path` (open as `file`). Per-type arrays may be shorter
    /// than six entries (the missing types have no particles) but must reach type 1; counts of
    /// any integer type are accepted; `NumPart_Total` is completed by `NumPart_Total_HighWord`
    /// where a GADGET-2 file split it into 32-bit words.
    pub fn read(file: &hdf5::File, path: &Path) -> Result<Self> {
        let group = file
            .group("Header")
            .map_err(|_| Error::io(path, "not a GADGET snapshot: no /Header group"))?;
        let attr = |name: &str| {
            let a = group
                .attr(name)
                .map_err(|_| Error::io(path, format!("missing /Header attribute {name}")))?;
            // A damaged file may claim any size: the values are read only when few.
            let shape = a.shape();
            let values = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            match values {
                Some(n) if n <= MAX_VALUES => Ok(a),
                _ => Err(Error::io(
                    path,
                    format!(
                        "/Header attribute {name} has shape {shape:?} (at most {MAX_VALUES} \
                         values expected)"
                    ),
                )),
            }
        };
        let bad = |name: &str, e: &dyn std::fmt::Display| {
            Error::io(path, format!("cannot read /Header attribute {name}: {e}"))
        };
        let floats = |name: &str| -> Result<Vec<f64>> {
            let v = read_numbers(&attr(name)?).map_err(|e| bad(name, &e))?;
            Ok(v.into_f64())
        };
        let integers = |name: &str| -> Result<Vec<u64>> {
            let v = read_numbers(&attr(name)?).map_err(|e| bad(name, &e))?;
            v.into_integers().map_err(|e| bad(name, &e))
        };
        let per_type_u64 = |name: &str| per_type(path, name, &integers(name)?);
        let scalar_f64 = |name: &str| one(path, name, &floats(name)?);

        let this_file = per_type_u64("NumPart_ThisFile")?;
        let mut total = per_type_u64("NumPart_Total")?;
        if group.attr("NumPart_Total_HighWord").is_ok() {
            let high = per_type_u64("NumPart_Total_HighWord")?;
            for (t, h) in total.iter_mut().zip(high) {
                if *t < 1 << 32 {
                    *t += h << 32;
                }
            }
        }
        let mass_table = per_type(path, "MassTable", &floats("MassTable")?)?;
        let time = scalar_f64("Time")?;
        let files = {
            let v = read_numbers(&attr("NumFilesPerSnapshot")?)
                .and_then(Numbers::into_integers::<i64>)
                .map_err(|e| bad("NumFilesPerSnapshot", &e))?;
            let k = one(path, "NumFilesPerSnapshot", &v)?;
            usize::try_from(k).ok().filter(|&k| k >= 1).ok_or_else(|| {
                Error::io(
                    path,
                    format!("/Header NumFilesPerSnapshot = {k} (must be at least 1)"),
                )
            })?
        };
        let parameters = file.group("Parameters").ok();
        // A scalar f64 attribute of /Header, else of /Parameters, if either has it.
        let optional = |name: &str| -> Result<Option<f64>> {
            let place = [
                ("Header", Some(&group)),
                ("Parameters", parameters.as_ref()),
            ]
            .into_iter()
            .find_map(|(where_, g)| g.and_then(|g| g.attr(name).ok()).map(|a| (where_, a)));
            let Some((where_, a)) = place else {
                return Ok(None);
            };
            let shape = a.shape();
            if shape.iter().product::<usize>() != 1 {
                return Err(Error::io(
                    path,
                    format!("/{where_} attribute {name} has shape {shape:?} (expected one value)"),
                ));
            }
            let v = read_numbers(&a).map(Numbers::into_f64).map_err(|e| {
                Error::io(path, format!("cannot read /{where_} attribute {name}: {e}"))
            })?;
            if !v[0].is_finite() {
                return Err(Error::io(
                    path,
                    format!("/{where_} {name} = {} is not finite", v[0]),
                ));
            }
            Ok(Some(v[0]))
        };
        let none = SnapshotCosmology::NONE;
        let cosmology = SnapshotCosmology {
            box_size: optional("BoxSize")?.unwrap_or(none.box_size),
            redshift: optional("Redshift")?.unwrap_or(none.redshift),
            omega0: optional("Omega0")?.unwrap_or(none.omega0),
            omega_baryon: optional("OmegaBaryon")?.unwrap_or(none.omega_baryon),
            omega_lambda: optional("OmegaLambda")?.unwrap_or(none.omega_lambda),
            hubble_param: optional("HubbleParam")?.unwrap_or(none.hubble_param),
        };
        let units = match (
            optional("UnitLength_in_cm")?,
            optional("UnitMass_in_g")?,
            optional("UnitVelocity_in_cm_per_s")?,
        ) {
            (Some(length_in_cm), Some(mass_in_g), Some(velocity_in_cm_per_s)) => {
                Some(SnapshotUnits {
                    length_in_cm,
                    mass_in_g,
                    velocity_in_cm_per_s,
                })
            }
            _ => None,
        };
        let header = Self {
            this_file,
            total,
            mass_table,
            time,
            files,
            cosmology,
            units,
            run_units: match units {
                Some(_) => read_run_units(file, path)?,
                None => None,
            },
            comoving: optional("ComovingIntegrationOn")?.map(|flag| flag != 0.0),
            time_begin: None,
            format: Format::Hdf5,
        };
        header.check(path)?;
        Ok(header)
    }

    /// Rejects values no snapshot can have: a time or cosmological field that is not finite, a
    /// negative or non-finite table mass, more particles in the file than in the snapshot, a
    /// negative box, units that are not > 0. The error names the file and the field.
    pub(super) fn check(&self, path: &Path) -> Result<()> {
        let field = |name: &str| self.format.field(name);
        if let Some((name, v)) = self
            .cosmology
            .named()
            .into_iter()
            .chain([("Time", self.time)])
            .find(|(_, v)| !v.is_finite())
        {
            return Err(Error::io(
                path,
                format!("{} = {v} is not finite", field(name)),
            ));
        }
        let run_time = self.public().time;
        if !run_time.is_finite() {
            return Err(Error::io(
                path,
                format!(
                    "{} = {} is {run_time} in the units of the run that wrote the file (/Config)",
                    field("Time"),
                    self.time
                ),
            ));
        }
        if self.cosmology.box_size < 0.0 {
            return Err(Error::io(
                path,
                format!(
                    "{} = {} is negative (0 means no box)",
                    field("BoxSize"),
                    self.cosmology.box_size
                ),
            ));
        }
        if let Some((name, v)) = self
            .units
            .iter()
            .flat_map(|u| u.named())
            .find(|(_, v)| *v <= 0.0)
        {
            return Err(Error::io(
                path,
                format!("unit attribute {name} = {v} (a unit must be > 0)"),
            ));
        }
        if let Some(m) = self.mass_table.iter().find(|m| !m.is_finite() || **m < 0.0) {
            return Err(Error::io(
                path,
                format!(
                    "{} holds {m} (masses must be finite and >= 0)",
                    field("MassTable")
                ),
            ));
        }
        let types = self.this_file.iter().zip(&self.total).enumerate();
        if let Some((t, (n, total))) = types.into_iter().find(|(_, (n, t))| n > t && **t > 0) {
            return Err(Error::io(
                path,
                format!(
                    "{}[{t}] = {n} exceeds {}[{t}] = {total}",
                    field("NumPart_ThisFile"),
                    field("NumPart_Total")
                ),
            ));
        }
        Ok(())
    }
}

/// Writes `/Config` with the code's name and version, where GADGET-4 records how it was built,
/// and the units of the run that wrote the file where they are not the file's ([`RUN_UNITS`],
/// [`Header::run_units`]).
pub(super) fn write_config(
    file: &hdf5::File,
    run_units: Option<SnapshotUnits>,
) -> hdf5::Result<()> {
    let group = file.create_group("Config")?;
    for (name, value) in [("Code", "hinoki"), ("Version", env!("CARGO_PKG_VERSION"))] {
        let value: VarLenUnicode = value.parse().expect("no NUL in the code's name or version");
        group
            .new_attr::<VarLenUnicode>()
            .create(name)?
            .write_scalar(&value)?;
    }
    for (name, (_, value)) in RUN_UNITS
        .iter()
        .zip(run_units.iter().flat_map(SnapshotUnits::named))
    {
        group
            .new_attr::<f64>()
            .create(*name)?
            .write_scalar(&value)?;
    }
    Ok(())
}

/// The `/Config` attributes of [`Header::run_units`], in the order of [`SnapshotUnits::named`].
const RUN_UNITS: [&str; 3] = [
    "RunUnitLength_in_cm",
    "RunUnitMass_in_g",
    "RunUnitVelocity_in_cm_per_s",
];

/// The units of the run that wrote `file` ([`Header::run_units`]): `None` without them; all
/// three must be there, finite and > 0 (the error names the file and the attribute).
fn read_run_units(file: &hdf5::File, path: &Path) -> Result<Option<SnapshotUnits>> {
    let Ok(config) = file.group("Config") else {
        return Ok(None);
    };
    let mut v = [0.0; 3];
    let mut found = 0;
    for (name, out) in RUN_UNITS.iter().zip(&mut v) {
        let Ok(a) = config.attr(name) else { continue };
        let x = read_numbers(&a)
            .map(Numbers::into_f64)
            .map_err(|e| Error::io(path, format!("cannot read /Config attribute {name}: {e}")))?;
        match x.as_slice() {
            [x] if x.is_finite() && *x > 0.0 => *out = *x,
            _ => {
                return Err(Error::io(
                    path,
                    format!("/Config {name} = {x:?} (a unit must be one finite value > 0)"),
                ))
            }
        }
        found += 1;
    }
    match found {
        0 => Ok(None),
        3 => Ok(Some(SnapshotUnits {
            length_in_cm: v[0],
            mass_in_g: v[1],
            velocity_in_cm_per_s: v[2],
        })),
        _ => Err(Error::io(
            path,
            format!(
                "/Config has only some of {} (all three or none)",
                RUN_UNITS.join(", ")
            ),
        )),
    }
}

/// A per-type array padded with zeros to six entries; it must reach type 1 and have at most six.
fn per_type<T: Copy + Default>(path: &Path, name: &str, v: &[T]) -> Result<[T; TYPES]> {
    if v.len() <= HALO || v.len() > TYPES {
        return Err(Error::io(
            path,
            format!(
                "/Header {name} has {} entries (expected {TYPES}, one per particle type)",
                v.len()
            ),
        ));
    }
    let mut out = [T::default(); TYPES];
    out[..v.len()].copy_from_slice(v);
    Ok(out)
}

/// The value of a scalar (or one-element) attribute.
fn one<T: Copy>(path: &Path, name: &str, v: &[T]) -> Result<T> {
    match v {
        [x] => Ok(*x),
        _ => Err(Error::io(
            path,
            format!("/Header {name} has {} values (expected one)", v.len()),
        )),
    }
}
