//! The run configuration: a TOML file with four tables, every key optional. Units are those
//! of the run: N-body (Hénon) units with G = 1 unless `G` says otherwise.
//! `examples/plummer.toml`, the default problem with every key spelled out, is the reference
//! (a test checks that it lists every key the configuration accepts):
//!
#![doc = concat!("```toml\n", include_str!("../../examples/plummer.toml"), "```")]
//!
//! Unknown tables or keys are errors, as are values of the wrong type or unknown names; the
//! error is one line naming the file, the line and column, and the key or value. Relative paths
//! (`file`, `dir`) are taken relative to the working directory, not to the configuration file.
//! Parsing checks only types and names: call [`RunConfig::validate`] (after any command-line
//! overrides) before a run starts.

use crate::error::{Error, Result};
use crate::forces::params::by_name;
use crate::forces::{ForceParams, Rebuild};
use crate::ics::Model;
use crate::integrate::{Stepping, Timeline};
use crate::io::snapshot::GivenUnits;
use serde::de::{DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A complete run configuration: the tables `[ics]`, `[gravity]`, `[time]` and `[output]`,
/// and `[cosmology]`, whose presence makes the run comoving.
/// The default is hinoki's built-in problem: a Plummer sphere of 65536 particles (seed 1),
/// ε = 0.01, block time steps with η = 0.1 from dt_max = 1/128 down, integrated to t = 2
/// (0.7 crossing times of 2√2 in Hénon units: under a minute on 2 CPU cores). These time steps
/// keep |ΔE/E| ≤ 1e-4 over 20 crossing times (`docs/performance.md`, *Energy error and the
/// default time steps*; `docs/design.md`, *Time steps*).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Where the initial particles come from (`[ics]`).
    pub ics: IcsConfig,
    /// How forces are computed (`[gravity]`).
    pub gravity: GravityConfig,
    /// Time step and end time (`[time]`).
    pub time: TimeConfig,
    /// Where and how often results are written (`[output]`).
    pub output: OutputConfig,
    /// A comoving run's cosmology, end and outputs (`[cosmology]`); `None`: a Newtonian run.
    pub cosmology: Option<CosmologyConfig>,
}

/// The `[cosmology]` table: its presence makes the run comoving (`docs/design.md`, *Comoving
/// integration*). The initial conditions must come from a file whose `Time` is the starting
/// scale factor; the box is periodic with side `BoxSize` when the file's is > 0, vacuum
/// (open boundaries, expansion about the origin) otherwise. `[time] t_end` must not be given
/// (the run ends at `z_end`); `[time] dt_max` and `dt_min` are steps in ln a (`dt_max`
/// defaults to [`COMOVING_DT_MAX`]).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CosmologyConfig {
    /// Ω_m today (`omega_m`); default: the initial conditions' `Omega0`.
    pub omega_m: Option<f64>,
    /// Ω_Λ today (`omega_lambda`); default: the initial conditions' `OmegaLambda`.
    pub omega_lambda: Option<f64>,
    /// h, H0 in 100 km/s/Mpc (`hubble_param`); default: the initial conditions'
    /// `HubbleParam`.
    pub hubble_param: Option<f64>,
    /// The redshift at which the run ends (`z_end`, finite, ≥ 0, below the start's; default 0).
    pub z_end: f64,
    /// Redshifts of the snapshots `OUT/snapshots/snapshot_NNN` (`output_redshifts`, each in
    /// [z_end, z_start]; written at exactly these redshifts, numbered from 0 in order of
    /// decreasing z; default none).
    pub output_redshifts: Vec<f64>,
    /// The largest physical softening (`max_physical_softening`, length units, finite, > 0):
    /// the comoving softening is ε(a) = min(ε, max_physical_softening / a) with ε =
    /// `[gravity] eps`; default: none, ε comoving throughout.
    pub max_physical_softening: Option<f64>,
    /// `periodic = false` runs a file with `BoxSize > 0` with vacuum boundaries (expansion
    /// about the origin); `true` requires `BoxSize > 0`. Default: periodic when
    /// `BoxSize > 0`.
    pub periodic: Option<bool>,
    /// G follows from the initial conditions' units (GADGET's defaults, G = 43007.1 in kpc,
    /// km/s and 10¹⁰ M_sun, where the file names none) rather than from `[gravity] G`. Not a
    /// key: parsing sets it when `[gravity]` gives no `G`; a configuration built in code sets
    /// it as it means (default true).
    #[serde(skip)]
    pub g_from_units: bool,
}

impl Default for CosmologyConfig {
    fn default() -> Self {
        Self {
            omega_m: None,
            omega_lambda: None,
            hubble_param: None,
            z_end: 0.0,
            output_redshifts: Vec::new(),
            max_physical_softening: None,
            periodic: None,
            g_from_units: true,
        }
    }
}

/// The largest step in ln a of a comoving run that does not give `[time] dt_max`: GADGET's
/// `MaxSizeTimestep`.
pub const COMOVING_DT_MAX: f64 = 0.025;

/// The `[ics]` table: the initial particles are either generated or read from a file.
/// With neither `model` nor `file` given, a Plummer model is generated.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "IcsTable")]
pub enum IcsConfig {
    /// Generate particles with [`crate::ics::generate`] (keys `model`, `n`, `seed`).
    Generate {
        /// The density profile (`model`, default `"plummer"`).
        model: Model,
        /// The number of particles (`n`, default 65536).
        n: usize,
        /// The random seed (`seed`, default 1).
        seed: u64,
    },
    /// Read a snapshot with [`crate::io::read_snapshot`]: HDF5 (hinoki's or GADGET's) or
    /// GADGET's binary format (key `file`).
    File {
        /// The file (`file`): one file, any file of a set, its snapdir, or the base name of a
        /// binary set `base.0`, `base.1`, ….
        path: PathBuf,
        /// The units of a comoving run's initial conditions where the file records none
        /// (`unit_length_in_cm`, `unit_mass_in_g`, `unit_velocity_in_cm_per_s`; cgs;
        /// default GADGET's, kpc/h, 10¹⁰ M_sun/h, km/s); a file that records units must
        /// record these ([`crate::io::SnapshotHeader::with_units`]).
        units: GivenUnits,
    },
}

impl IcsConfig {
    /// Initial conditions from the snapshot `path`, in the units it records (GADGET's where
    /// it records none).
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self::File {
            path: path.into(),
            units: GivenUnits::default(),
        }
    }
}

impl Default for IcsConfig {
    fn default() -> Self {
        Self::Generate {
            model: Model::Plummer,
            n: DEFAULT_N,
            seed: DEFAULT_SEED,
        }
    }
}

/// Particles generated when `[ics]` does not give `n`.
const DEFAULT_N: usize = 65536;
/// Random seed used when `[ics]` does not give `seed`.
const DEFAULT_SEED: u64 = 1;

/// Most top steps a run may take (t_end / dt_max), so that the tick counter of the deepest
/// block hierarchy fits in 64 bits.
const MAX_TOP_STEPS: f64 = (1u64 << 32) as f64;

/// The `[ics]` table as written, before the choice between model and file is made.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IcsTable {
    #[serde(default, deserialize_with = "some_by_name")]
    model: Option<Model>,
    n: Option<usize>,
    seed: Option<u64>,
    file: Option<PathBuf>,
    unit_length_in_cm: Option<f64>,
    unit_mass_in_g: Option<f64>,
    unit_velocity_in_cm_per_s: Option<f64>,
}

impl TryFrom<IcsTable> for IcsConfig {
    type Error = String;

    fn try_from(t: IcsTable) -> std::result::Result<Self, String> {
        let units = GivenUnits {
            length_in_cm: t.unit_length_in_cm,
            mass_in_g: t.unit_mass_in_g,
            velocity_in_cm_per_s: t.unit_velocity_in_cm_per_s,
        };
        match t.file {
            Some(_) if t.model.is_some() || t.n.is_some() || t.seed.is_some() => Err(concat!(
                "[ics] `file` cannot be combined with `model`, `n` or `seed` ",
                "(choose one source of particles)"
            )
            .to_string()),
            Some(path) => Ok(Self::File { path, units }),
            None if !units.is_empty() => Err(concat!(
                "[ics] `unit_length_in_cm`, `unit_mass_in_g` and `unit_velocity_in_cm_per_s` ",
                "are the units of a `file` (a generated model is in N-body units)"
            )
            .to_string()),
            None => Ok(Self::Generate {
                model: t.model.unwrap_or(Model::Plummer),
                n: t.n.unwrap_or(DEFAULT_N),
                seed: t.seed.unwrap_or(DEFAULT_SEED),
            }),
        }
    }
}

/// The `[gravity]` table: the force parameters (every key of [`ForceParams`], under its
/// name, with its default; enumerations by their command-line names) and the tree-rebuild
/// interval of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GravityConfig {
    /// How each force evaluation is done (every key but `rebuild`).
    pub force: ForceParams,
    /// Tree-rebuild interval (`rebuild`: an integer N ≥ 1, rebuild on every N-th force
    /// evaluation and refit the tree between; or `"auto"`, rebuild when the walk has slowed
    /// by more than a rebuild costs; default 1). See [`crate::forces::rebuild`].
    pub rebuild: Rebuild,
}

impl<'de> Deserialize<'de> for GravityConfig {
    /// [`ForceParams`]' own deserializer over the table with the key `rebuild` taken aside,
    /// so that both report an unknown key or a bad value at its line and column.
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut rebuild = None;
        let force = ForceParams::deserialize(RebuildAside {
            inner: d,
            fields: &[],
            rebuild: &mut rebuild,
        })?;
        Ok(Self {
            force,
            rebuild: rebuild.unwrap_or_default(),
        })
    }
}

/// The `[gravity]` table's extra key, beside those of [`ForceParams`].
const REBUILD: &str = "rebuild";

/// The `[gravity]` table handed to [`ForceParams`]' deserializer without the key [`REBUILD`],
/// whose value goes to `rebuild`: `inner` is the table's deserializer, then the visitor of
/// [`ForceParams`] (whose keys, `fields`, it names), then the table's entries. A key that is
/// neither [`REBUILD`] nor one of `fields` is an error raised while the key is read, so that
/// it carries the key's position.
struct RebuildAside<'a, T> {
    inner: T,
    fields: &'static [&'static str],
    rebuild: &'a mut Option<Rebuild>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for RebuildAside<'_, D> {
    type Error = D::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> std::result::Result<V::Value, D::Error> {
        let visitor = RebuildAside {
            inner: visitor,
            fields,
            rebuild: self.rebuild,
        };
        self.inner.deserialize_struct(name, fields, visitor)
    }

    /// [`ForceParams`]' derive asks for a struct; anything else is no `[gravity]` table and
    /// goes through as it is.
    fn deserialize_any<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> std::result::Result<V::Value, D::Error> {
        self.inner.deserialize_any(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for RebuildAside<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a [gravity] table")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<V::Value, A::Error> {
        self.inner.visit_map(RebuildAside {
            inner: map,
            fields: self.fields,
            rebuild: self.rebuild,
        })
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for RebuildAside<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> std::result::Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.inner.next_key_seed(KnownKey(self.fields))? {
            if key != REBUILD {
                return seed.deserialize(key.into_deserializer()).map(Some);
            }
            *self.rebuild = Some(self.inner.next_value()?);
        }
        Ok(None)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> std::result::Result<S::Value, A::Error> {
        self.inner.next_value_seed(seed)
    }
}

/// Reads a key of the `[gravity]` table: [`REBUILD`] or one of the given names.
#[derive(Clone, Copy)]
struct KnownKey(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KnownKey {
    type Value = &'static str;

    fn deserialize<D: Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<&'static str, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl Visitor<'_> for KnownKey {
    type Value = &'static str;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a key of the [gravity] table")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> std::result::Result<&'static str, E> {
        let known = self.0.iter().copied().chain([REBUILD]);
        known.clone().find(|k| *k == key).ok_or_else(|| {
            let names: Vec<String> = known.map(|k| format!("`{k}`")).collect();
            E::custom(format!(
                "unknown field `{key}`, expected one of {}",
                names.join(", ")
            ))
        })
    }
}

/// For toml's message of an unknown key or name (serde's "unknown field `thta`, expected one
/// of `theta`, `mac`, …", or "unknown variant …"), the nearest valid one where it is near
/// ([`crate::error::closest`]) as "; did you mean `theta`?".
fn typo_hint(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("unknown variant `"))?;
    let (given, rest) = rest.split_once('`')?;
    let (_, valid) = rest.split_once("expected one of ")?;
    let names = valid.split(", ").map(|n| n.trim_matches('`'));
    crate::error::closest(given, names).map(|n| format!("; did you mean `{n}`?"))
}

/// The `[time]` table.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeConfig {
    /// Shared or block time steps (`stepping`: `"shared"` or `"block"`; default block).
    #[serde(deserialize_with = "by_name")]
    pub stepping: Stepping,
    /// The largest time step (`dt_max`, also accepted as `dt`; time units, finite, > 0,
    /// ≤ `t_end`; default 1/128, lowered for few particles, see
    /// [`TimeConfig::dt_max_from_particles`]): the shared step, or the top of the block
    /// hierarchy. It is shortened to `t_end / ceil(t_end / dt_max)` so that whole steps reach
    /// `t_end`.
    #[serde(alias = "dt")]
    pub dt_max: f64,
    /// Whether `dt_max` is the default, which a Newtonian run lowers to the largest power of
    /// two within [`STEP_FRACTION`](crate::integrate::advice::STEP_FRACTION) of its heaviest
    /// particle's softening time ([`crate::integrate::top_step_within`]): set by
    /// [`RunConfig::from_toml_str`] where the text gives no `dt_max`; a configuration built in
    /// code keeps the `dt_max` it holds.
    #[serde(skip)]
    pub dt_max_from_particles: bool,
    /// The smallest block time step (`dt_min`, time units, ≥ 0, ≤ `dt_max`; default 0:
    /// down to `dt_max / 2^30`); steps the criterion asks below it are raised to it.
    pub dt_min: f64,
    /// Accuracy parameter η of the block step criterion dt_i = η √(ε / |a_i|)
    /// (`eta`, dimensionless, > 0; default 0.1).
    pub eta: f64,
    /// The end time (`t_end`, time units, finite, > 0; default 2): the run starts at t = 0, or
    /// at the `Time` of the snapshot it reads, which must be earlier. A comoving run must not
    /// give it (it ends at `[cosmology] z_end`).
    pub t_end: f64,
}

impl Default for TimeConfig {
    fn default() -> Self {
        Self {
            stepping: Stepping::Block,
            dt_max: 0.0078125,
            dt_max_from_particles: false,
            dt_min: 0.0,
            eta: 0.1,
            t_end: 2.0,
        }
    }
}

impl TimeConfig {
    /// The integer timeline these settings give (see [`Timeline::new`]).
    pub fn timeline(&self) -> Timeline {
        Timeline::new(self.stepping, self.dt_max, self.dt_min, self.t_end)
    }
}

/// The `[output]` table.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// The directory that receives the run's files (`dir`, default `"hinoki-out"`).
    pub dir: PathBuf,
    /// Steps between two diagnostics lines (`energy_every`, ≥ 1, default 10); with block
    /// steps, top steps (diagnostics need every particle synchronised).
    pub energy_every: u64,
    /// Steps between two checkpoints (`checkpoint_steps`, 0 = none; default 0).
    pub checkpoint_steps: u64,
    /// Wall-clock minutes between two checkpoints (`checkpoint_minutes`, finite, ≥ 0,
    /// 0 = none; default 0).
    pub checkpoint_minutes: f64,
    /// Top steps (of `dt_max`) between two snapshots `OUT/snapshots/…_NNN` of the series,
    /// snapshot 0 at t = 0 (`snapshot_every`, 0 = none; default 64).
    pub snapshot_every: u64,
    /// Draw `OUT/final.png` (surface density of the final particles) and
    /// `OUT/diagnostics.png` (energy error and phase times) at the end (`pictures`, default true).
    pub pictures: bool,
    /// The relative energy error |ΔE/E| above which a run (not a comoving one) ends with a
    /// warning that its steps or softening do not resolve it (`energy_limit`, finite, > 0;
    /// default 0.01).
    pub energy_limit: f64,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("hinoki-out"),
            energy_every: 10,
            checkpoint_steps: 0,
            checkpoint_minutes: 0.0,
            snapshot_every: 64,
            pictures: true,
            energy_limit: 0.01,
        }
    }
}

impl RunConfig {
    /// Reads and parses the configuration file at `path` (see [`RunConfig::from_toml_str`]).
    /// The values are not checked: call [`RunConfig::validate`].
    pub fn load(path: &Path) -> Result<RunConfig> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(path, format!("cannot read: {e}")))?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// Parses a configuration from TOML text; `origin` (a file name) starts every error message,
    /// followed by the line and column of the offending key or value. Missing keys and tables
    /// take their defaults; the values are not checked: call [`RunConfig::validate`].
    pub fn from_toml_str(s: &str, origin: &str) -> Result<RunConfig> {
        let mut cfg = Self::parse_toml(s, origin)?;
        // Which keys the text gives decides some defaults.
        let table: toml::Table = s
            .parse()
            .map_err(|e| Error::input(format!("{origin}: {e}")))?;
        let given = |t: &str, keys: &[&str]| {
            let t = table.get(t).and_then(toml::Value::as_table);
            keys.iter().any(|k| t.is_some_and(|t| t.contains_key(*k)))
        };
        let dt_given = given("time", &["dt_max", "dt"]);
        cfg.time.dt_max_from_particles = !dt_given && cfg.cosmology.is_none();
        if let Some(c) = cfg.cosmology.as_mut() {
            if given("time", &["t_end"]) {
                return Err(Error::input(format!(
                    "{origin}: [time] t_end must not be given in a comoving run ([cosmology] \
                     ends it at z_end)"
                )));
            }
            c.g_from_units = !given("gravity", &["G"]);
            if !dt_given {
                cfg.time.dt_max = COMOVING_DT_MAX;
            }
        }
        Ok(cfg)
    }

    /// [`RunConfig::from_toml_str`] before the defaults that depend on the keys given.
    fn parse_toml(s: &str, origin: &str) -> Result<RunConfig> {
        toml::from_str(s).map_err(|e: toml::de::Error| {
            let at = e.span().map_or(String::new(), |span| {
                let before = &s[..span.start.min(s.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |k| k + 1) + 1;
                format!("{line}:{column}:")
            });
            // toml puts details on further lines ("invalid table header\nexpected `.`, `]`").
            let mut message: Vec<&str> = e
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            // It says nothing where the text ends early (`key =` at the end of the file).
            if message.is_empty() {
                let at_end = e.span().is_some_and(|r| r.start >= s.trim_end().len());
                message.push(if at_end {
                    "the file ends where a value or name is expected"
                } else {
                    "invalid TOML"
                });
            }
            // "unknown field `thta`, expected one of `theta`, …": the nearest, if near.
            let hint = message
                .first()
                .and_then(|m| typo_hint(m))
                .unwrap_or_default();
            Error::input(format!("{origin}:{at} {}{hint}", message.join(": ")))
        })
    }

    /// Checks every value before a run starts; the error names the table and key, the rule and
    /// the offending value, e.g. `[time] dt must be finite and > 0 (got -1)`.
    pub fn validate(&self) -> Result<()> {
        match &self.ics {
            IcsConfig::Generate { n, .. } if !(1..=crate::ics::MAX_N).contains(n) => {
                return Err(Error::input(format!(
                    "[ics] n must be between 1 and {} (got {n})",
                    crate::ics::MAX_N
                )));
            }
            IcsConfig::File { units, .. } => {
                for (key, _, v) in units.named() {
                    match v {
                        Some(v) if !(v.is_finite() && v > 0.0) => {
                            return Err(Error::input(format!(
                                "[ics] {key} must be finite and > 0 (got {v})"
                            )))
                        }
                        Some(_) if self.cosmology.is_none() => {
                            return Err(Error::input(format!(
                                "[ics] {key} sets the units of a comoving run's initial \
                                 conditions ([cosmology]); a Newtonian run is in the units of \
                                 [gravity] G"
                            )))
                        }
                        _ => {}
                    }
                }
            }
            IcsConfig::Generate { .. } => {}
        }
        self.gravity
            .force
            .validate()
            .map_err(|e| Error::input(format!("[gravity] {e}")))?;
        let TimeConfig {
            stepping,
            dt_max,
            dt_min,
            eta,
            t_end,
            dt_max_from_particles: _,
        } = self.time;
        if !(dt_max.is_finite() && dt_max > 0.0) {
            return Err(Error::input(format!(
                "[time] dt_max must be finite and > 0 (got {dt_max})"
            )));
        }
        match &self.cosmology {
            // A comoving run ends at z_end; its span in ln a is known once the initial
            // conditions are read (simulation::comoving).
            Some(c) => c.validate(&self.ics)?,
            None => {
                if !(t_end.is_finite() && t_end > 0.0) {
                    return Err(Error::input(format!(
                        "[time] t_end must be finite and > 0 (got {t_end})"
                    )));
                }
                if dt_max > t_end {
                    return Err(Error::input(format!(
                        "[time] dt_max must not exceed t_end (got dt_max = {dt_max}, t_end = \
                         {t_end})"
                    )));
                }
                check_top_steps(t_end, dt_max)?;
            }
        }
        if !(dt_min.is_finite() && (0.0..=dt_max).contains(&dt_min)) {
            return Err(Error::input(format!(
                "[time] dt_min must be between 0 and dt_max = {dt_max} (got {dt_min})"
            )));
        }
        if !(eta.is_finite() && eta > 0.0) {
            return Err(Error::input(format!(
                "[time] eta must be finite and > 0 (got {eta})"
            )));
        }
        if stepping == Stepping::Block && self.gravity.force.eps <= 0.0 {
            return Err(Error::input(format!(
                "[time] stepping = \"block\" needs a softening [gravity] eps > 0 (got {}): the step criterion is eta * sqrt(eps / |a|)",
                self.gravity.force.eps
            )));
        }
        if self.output.dir.as_os_str().is_empty() {
            return Err(Error::input("[output] dir must not be empty"));
        }
        if !(self.output.energy_limit.is_finite() && self.output.energy_limit > 0.0) {
            return Err(Error::input(format!(
                "[output] energy_limit must be finite and > 0 (got {})",
                self.output.energy_limit
            )));
        }
        if self.output.energy_every < 1 {
            return Err(Error::input(format!(
                "[output] energy_every must be >= 1 (got {})",
                self.output.energy_every
            )));
        }
        let minutes = self.output.checkpoint_minutes;
        if !(minutes.is_finite() && minutes >= 0.0) {
            return Err(Error::input(format!(
                "[output] checkpoint_minutes must be finite and >= 0 (got {minutes})"
            )));
        }
        Ok(())
    }
}

/// Checks that a run over `span` (time units, or ln a) in top steps of `dt_max` takes at most
/// [`MAX_TOP_STEPS`] of them.
pub fn check_top_steps(span: f64, dt_max: f64) -> Result<()> {
    if span / dt_max > MAX_TOP_STEPS {
        return Err(Error::input(format!(
            "[time] t_end / dt_max must be at most {MAX_TOP_STEPS} steps (got {})",
            span / dt_max
        )));
    }
    Ok(())
}

impl CosmologyConfig {
    /// Checks the values that do not need the initial conditions (with `ics`, the run's
    /// source of particles, which must be a file).
    fn validate(&self, ics: &IcsConfig) -> Result<()> {
        if let IcsConfig::Generate { model, .. } = ics {
            return Err(Error::input(format!(
                "[cosmology] needs initial conditions from a file ([ics] file, its Time the \
                 starting scale factor), not the generated model {model}"
            )));
        }
        for (name, v) in [
            ("omega_m", self.omega_m),
            ("omega_lambda", self.omega_lambda),
            ("hubble_param", self.hubble_param),
        ] {
            if let Some(v) = v.filter(|v| !v.is_finite()) {
                return Err(Error::input(format!(
                    "[cosmology] {name} must be finite (got {v})"
                )));
            }
        }
        let z_end = self.z_end;
        if !(z_end.is_finite() && z_end >= 0.0) {
            return Err(Error::input(format!(
                "[cosmology] z_end must be finite and >= 0 (got {z_end})"
            )));
        }
        if let Some(z) = self
            .output_redshifts
            .iter()
            .find(|z| !(z.is_finite() && **z >= z_end))
        {
            return Err(Error::input(format!(
                "[cosmology] output_redshifts must lie in [z_end, z_start] (got {z} with z_end \
                 = {z_end})"
            )));
        }
        if let Some(m) = self
            .max_physical_softening
            .filter(|m| !(m.is_finite() && *m > 0.0))
        {
            return Err(Error::input(format!(
                "[cosmology] max_physical_softening must be finite and > 0 (got {m})"
            )));
        }
        Ok(())
    }
}

/// [`by_name`] for an optional key.
fn some_by_name<'de, D, T>(d: D) -> std::result::Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    by_name(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Balance;
    use crate::error::ErrorKind;
    use crate::forces::{Backend, LeafSize, Method, TreeBuild, WalkKind};
    use crate::io::testdir::TestDir;
    use crate::sfc::Order;
    use crate::walk::gpu::GpuLayout;
    use crate::walk::gpu::{VgChoice, WalkKernel};
    use crate::walk::mac::Mac;

    fn parse(s: &str) -> Result<RunConfig> {
        RunConfig::from_toml_str(s, "run.toml")
    }

    fn parse_err(s: &str) -> String {
        let err = parse(s).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Input);
        assert!(err.message.starts_with("run.toml:"), "{err}");
        assert!(!err.message.contains('\n'), "{err}");
        err.message
    }

    fn invalid(s: &str) -> String {
        let err = parse(s).unwrap().validate().unwrap_err();
        assert_eq!(err.kind, ErrorKind::Input);
        err.message
    }

    #[test]
    fn default_is_the_builtin_problem_and_validates() {
        let c = RunConfig::default();
        c.validate().unwrap();
        assert_eq!(
            c.ics,
            IcsConfig::Generate {
                model: Model::Plummer,
                n: 65536,
                seed: 1
            }
        );
        assert_eq!(c.gravity.force, ForceParams::default());
        assert_eq!(c.gravity.force.eps, 0.01);
        assert_eq!(c.time.stepping, Stepping::Block);
        assert_eq!((c.time.dt_max, c.time.dt_min), (1.0 / 128.0, 0.0));
        assert_eq!((c.time.eta, c.time.t_end), (0.1, 2.0));
        assert_eq!(c.output.snapshot_every, 64);
        assert_eq!(c.output.dir, PathBuf::from("hinoki-out"));
        assert_eq!(c.output.energy_every, 10);
        // An empty file is the built-in problem, its dt_max free to follow the particles (for
        // these 65536 it stays 1/128); one built in code keeps the dt_max it holds.
        assert!(!c.time.dt_max_from_particles);
        let time = TimeConfig {
            dt_max_from_particles: true,
            ..c.time.clone()
        };
        assert_eq!(parse("").unwrap(), RunConfig { time, ..c });
        let given = parse("[time]\ndt_max = 0.0078125\n").unwrap();
        assert!(!given.time.dt_max_from_particles);
        let comoving = parse("[cosmology]\n").unwrap();
        assert!(!comoving.time.dt_max_from_particles);
    }

    #[test]
    fn full_config_parses() {
        let c = parse(
            r#"
            [ics]
            model = "uniform-sphere"
            n = 1000
            seed = 42
            [gravity]
            theta = 0.5
            mac = "accel"
            alpha = 0.0005
            multipole = 1
            ncrit = 8
            group = 64
            order = "morton"
            eps = 0.001
            G = 2
            method = "direct"
            walk = "single"
            backend = "gpu"
            vg = "2,16"
            kernel = "vg"
            tree_build = "gpu"
            gpu_memory = "keep"
            balance = "count"
            rebalance = 1.5
            let_boxes = 3
            lets = "apart"
            rebuild = 4
            [time]
            stepping = "block"
            dt_max = 0.001
            dt_min = 1e-5
            eta = 0.1
            t_end = 2.5
            [output]
            dir = "out/a"
            energy_every = 5
            checkpoint_steps = 100
            checkpoint_minutes = 30
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.ics,
            IcsConfig::Generate {
                model: Model::UniformSphere,
                n: 1000,
                seed: 42
            }
        );
        assert_eq!(
            c.gravity.force,
            ForceParams {
                theta: 0.5,
                mac: Mac::Acceleration,
                alpha: 0.0005,
                multipole: 1,
                ncrit: LeafSize::Fixed(8),
                group: 64,
                order: Order::Morton,
                eps: 0.001,
                g: 2.0,
                method: Method::Direct,
                walk: WalkKind::Single,
                backend: Backend::Gpu,
                vg: VgChoice::Fixed(GpuLayout { v: 2, g: 16 }),
                kernel: WalkKernel::Vg,
                tree_build: TreeBuild::Gpu,
                gpu_memory: crate::resources::GpuMemory::Keep,
                balance: Balance::Count,
                rebalance: 1.5,
                box_size: 0.0,
                let_boxes: 3,
                lets: crate::lets::LetWalk::Apart,
                exchange: crate::comm::Exchange::Auto,
            }
        );
        assert_eq!(c.gravity.rebuild.to_string(), "4");
        assert_eq!((c.time.dt_max, c.time.t_end), (0.001, 2.5));
        assert_eq!(c.time.stepping, Stepping::Block);
        assert_eq!((c.time.dt_min, c.time.eta), (1e-5, 0.1));
        assert_eq!(c.output.dir, PathBuf::from("out/a"));
        assert_eq!(c.output.energy_every, 5);
        assert_eq!(c.output.checkpoint_steps, 100);
        assert_eq!(c.output.checkpoint_minutes, 30.0);
    }

    #[test]
    fn ics_source_is_model_or_file() {
        let c = parse("[ics]\nfile = \"ics.bin\"").unwrap();
        assert_eq!(c.ics, IcsConfig::file("ics.bin"));
        c.validate().unwrap();
        // Units for a file without its own, in a comoving run only.
        let comoving = "[cosmology]\n[gravity]\nG = 1";
        let c = parse(&format!(
            "[ics]\nfile = \"ics.bin\"\nunit_length_in_cm = 3.085678e24\n\
             unit_velocity_in_cm_per_s = 1e5\n{comoving}"
        ))
        .unwrap();
        let units = GivenUnits {
            length_in_cm: Some(3.085678e24),
            mass_in_g: None,
            velocity_in_cm_per_s: Some(1e5),
        };
        assert_eq!(
            c.ics,
            IcsConfig::File {
                path: PathBuf::from("ics.bin"),
                units
            }
        );
        c.validate().unwrap();
        for (extra, says) in [
            (
                "unit_mass_in_g = 0",
                "[ics] unit_mass_in_g must be finite and > 0 (got 0)",
            ),
            (
                "unit_length_in_cm = -1e21",
                "[ics] unit_length_in_cm must be finite and > 0 (got -1000000000000000000000)",
            ),
            (
                "unit_velocity_in_cm_per_s = nan",
                "must be finite and > 0 (got NaN)",
            ),
        ] {
            let c = parse(&format!("[ics]\nfile = \"f\"\n{extra}\n{comoving}")).unwrap();
            let msg = c.validate().unwrap_err().message;
            assert!(msg.contains(says), "{msg}");
        }
        let c = parse("[ics]\nfile = \"f\"\nunit_mass_in_g = 1e43").unwrap();
        let msg = c.validate().unwrap_err().message;
        assert!(
            msg.contains("[ics] unit_mass_in_g sets the units of a comoving run's"),
            "{msg}"
        );
        let msg = parse_err("[ics]\nn = 10\nunit_length_in_cm = 1e21");
        assert!(msg.contains("are the units of a `file`"), "{msg}");
        let c = parse("[ics]\nn = 100").unwrap();
        assert_eq!(
            c.ics,
            IcsConfig::Generate {
                model: Model::Plummer,
                n: 100,
                seed: 1
            }
        );
        for extra in ["model = \"nfw\"", "n = 10", "seed = 3"] {
            let msg = parse_err(&format!("[ics]\nfile = \"ics.bin\"\n{extra}"));
            assert!(msg.contains("[ics] `file` cannot be combined"), "{msg}");
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let msg = parse_err("[gravity]\ntheta = 0.5\nthta = 0.7\n");
        assert!(msg.starts_with("run.toml:3:1:"), "{msg}");
        assert!(msg.ends_with("; did you mean `theta`?"), "{msg}");
        for (s, near) in [
            ("[time]\ntend = 1", "; did you mean `t_end`?"),
            ("[ics]\nmodle = \"nfw\"", "; did you mean `model`?"),
            ("[output]\nevery = 1", ""),
        ] {
            let msg = parse_err(s);
            assert!(msg.ends_with(near), "{msg}");
            assert_eq!(msg.contains("did you mean"), !near.is_empty(), "{msg}");
        }
        assert!(msg.contains("unknown field `thta`"), "{msg}");
        assert!(
            msg.contains("`theta`") && msg.contains("`rebuild`"),
            "{msg}"
        );
        // After `rebuild`, which the [gravity] table takes aside, keys are still placed.
        let msg = parse_err("[gravity]\nrebuild = 2\nthta = 0.7\n");
        assert!(
            msg.starts_with("run.toml:3:1: unknown field `thta`"),
            "{msg}"
        );
        let msg = parse_err("gravity = 3");
        assert!(msg.contains("expected a [gravity] table"), "{msg}");
        for (s, key) in [
            ("[gravty]\ntheta = 0.5", "`gravty`"),
            ("[ics]\nmodle = \"nfw\"", "`modle`"),
            ("[time]\ntend = 1", "`tend`"),
            ("[output]\nevery = 1", "`every`"),
            ("[gravity]\ng = 1", "`g`"),
            ("steps = 3", "`steps`"),
        ] {
            let msg = parse_err(s);
            assert!(msg.contains(&format!("unknown field {key}")), "{msg}");
        }
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        for (s, expect) in [
            ("[ics]\nmodel = \"king\"", "plummer"),
            ("[gravity]\nmac = \"barnes\"", "bh, modified, accel"),
            ("[gravity]\norder = \"peano\"", "hilbert, morton, none"),
            ("[gravity]\nmethod = \"fmm\"", "tree, direct"),
            ("[gravity]\nwalk = \"dual\"", "grouped, single"),
            ("[gravity]\nbackend = \"tpu\"", "cpu, gpu, auto"),
            ("[time]\nstepping = \"adaptive\"", "shared, block"),
        ] {
            let msg = parse_err(s);
            assert!(msg.starts_with("run.toml:2:"), "{msg}");
            assert!(msg.contains(expect), "{msg}");
        }
        let c = parse("[gravity]\nmac = \"bh\"").unwrap();
        assert_eq!(c.gravity.force.mac, Mac::BarnesHut);
    }

    #[test]
    fn wrong_types_are_errors() {
        for s in [
            "[ics]\nn = -5",
            "[ics]\nn = 1.5",
            "[gravity]\nmultipole = 300",
            "[gravity]\nmac = 1",
            "[time]\ndt = \"fast\"",
            "[output]\nenergy_every = -1",
            "time = 3",
        ] {
            parse_err(s);
        }
    }

    #[test]
    fn invalid_values_are_named() {
        for (s, expect) in [
            ("[ics]\nn = 0", "[ics] n must be between 1 and"),
            ("[gravity]\ntheta = 0", "[gravity] theta"),
            ("[gravity]\nalpha = -1", "[gravity] alpha"),
            ("[gravity]\nmultipole = 3", "[gravity] multipole"),
            ("[gravity]\ngroup = 100000", "[gravity] group"),
            ("[gravity]\neps = -0.1", "[gravity] softening eps"),
            ("[gravity]\nG = 0", "[gravity] gravitational constant G"),
            (
                "[gravity]\nrebalance = 0.9",
                "[gravity] rebalance (the load imbalance",
            ),
            (
                "[gravity]\nrebalance = nan",
                "[gravity] rebalance (the load imbalance",
            ),
            (
                "[gravity]\nrebalance = inf",
                "[gravity] rebalance (the load imbalance",
            ),
            (
                "[output]\nenergy_limit = 0",
                "[output] energy_limit must be finite",
            ),
            (
                "[output]\nenergy_limit = inf",
                "[output] energy_limit must be finite",
            ),
            (
                "[time]\ndt = -1",
                "[time] dt_max must be finite and > 0 (got -1)",
            ),
            ("[time]\ndt = nan", "[time] dt_max must be finite"),
            ("[time]\nt_end = 0", "[time] t_end must be finite and > 0"),
            ("[time]\nt_end = inf", "[time] t_end must be finite"),
            (
                "[time]\ndt = 2\nt_end = 1",
                "[time] dt_max must not exceed t_end",
            ),
            ("[time]\ndt_min = -1", "[time] dt_min must be between 0"),
            (
                "[time]\ndt_max = 0.1\ndt_min = 0.2",
                "[time] dt_min must be between 0 and dt_max",
            ),
            ("[time]\neta = 0", "[time] eta must be finite and > 0"),
            ("[time]\nt_end = 1e12\ndt = 1e-3", "[time] t_end / dt_max"),
            (
                "[time]\nstepping = \"block\"\n[gravity]\neps = 0",
                "[time] stepping = \"block\" needs a softening",
            ),
            ("[output]\ndir = \"\"", "[output] dir"),
            (
                "[output]\nenergy_every = 0",
                "[output] energy_every must be >= 1",
            ),
            (
                "[output]\ncheckpoint_minutes = -1",
                "[output] checkpoint_minutes must be finite and >= 0",
            ),
        ] {
            let msg = invalid(s);
            assert!(msg.starts_with(expect), "{s:?}: {msg}");
        }
    }

    #[test]
    fn a_cosmology_table_makes_a_comoving_run() {
        let c = parse("[ics]\nfile = \"ics.hdf5\"\n[cosmology]\n").unwrap();
        c.validate().unwrap();
        let cosmo = c.cosmology.as_ref().unwrap();
        assert_eq!(cosmo, &CosmologyConfig::default());
        // dt_max in ln a defaults to GADGET's; G follows the units unless given.
        assert_eq!(c.time.dt_max, COMOVING_DT_MAX);
        assert!(cosmo.g_from_units);
        let c = parse(
            "[ics]\nfile = \"f\"\n[gravity]\nG = 1\n[time]\ndt = 0.01\n[cosmology]\n\
             omega_m = 0.3\nomega_lambda = 0.7\nhubble_param = 0.7\nz_end = 1\n\
             output_redshifts = [3, 1.5, 1]\nmax_physical_softening = 2.8\nperiodic = false\n",
        )
        .unwrap();
        c.validate().unwrap();
        let cosmo = c.cosmology.unwrap();
        assert!(!cosmo.g_from_units);
        assert_eq!(c.time.dt_max, 0.01);
        assert_eq!(cosmo.output_redshifts, [3.0, 1.5, 1.0]);
        assert_eq!(
            (cosmo.omega_m, cosmo.z_end, cosmo.periodic),
            (Some(0.3), 1.0, Some(false))
        );
        // Without the table nothing changes.
        assert_eq!(parse("[time]\ndt = 0.5").unwrap().time.dt_max, 0.5);
        assert_eq!(parse("").unwrap().cosmology, None);
    }

    #[test]
    fn comoving_configuration_errors_are_one_line() {
        let msg = parse_err("[ics]\nfile = \"f\"\n[time]\nt_end = 1\n[cosmology]\n");
        assert!(
            msg.contains("[time] t_end must not be given in a comoving run"),
            "{msg}"
        );
        let msg = parse_err("[ics]\nfile = \"f\"\n[cosmology]\nomega = 0.3\n");
        assert!(msg.contains("unknown field `omega`"), "{msg}");
        for (s, expect) in [
            (
                "[cosmology]\n",
                "[cosmology] needs initial conditions from a file ([ics] file, its Time the \
                 starting scale factor), not the generated model plummer",
            ),
            (
                "[ics]\nfile = \"f\"\n[cosmology]\nz_end = -1",
                "[cosmology] z_end must be finite and >= 0 (got -1)",
            ),
            (
                "[ics]\nfile = \"f\"\n[cosmology]\nz_end = 1\noutput_redshifts = [2, 0.5]",
                "[cosmology] output_redshifts must lie in [z_end, z_start] (got 0.5 with z_end = 1)",
            ),
            (
                "[ics]\nfile = \"f\"\n[cosmology]\noutput_redshifts = [nan]",
                "[cosmology] output_redshifts must lie in",
            ),
            (
                "[ics]\nfile = \"f\"\n[cosmology]\nomega_m = inf",
                "[cosmology] omega_m must be finite (got inf)",
            ),
            (
                "[ics]\nfile = \"f\"\n[cosmology]\nmax_physical_softening = 0",
                "[cosmology] max_physical_softening must be finite and > 0 (got 0)",
            ),
            (
                "[ics]\nfile = \"f\"\n[time]\ndt = 0\n[cosmology]\n",
                "[time] dt_max must be finite and > 0 (got 0)",
            ),
        ] {
            let msg = invalid(s);
            assert!(msg.starts_with(expect), "{s:?}: {msg}");
            assert!(!msg.contains('\n'));
        }
    }

    #[test]
    fn rebuild_is_an_interval_or_auto() {
        assert_eq!(parse("").unwrap().gravity.rebuild, Rebuild::default());
        let c = parse("[gravity]\nrebuild = \"auto\"").unwrap();
        assert_eq!(c.gravity.rebuild, Rebuild::Auto);
        // Between other keys, which still reach the force parameters.
        let c = parse("[gravity]\ntheta = 0.5\nrebuild = 3\neps = 0.2").unwrap();
        assert_eq!(c.gravity.rebuild.to_string(), "3");
        assert_eq!((c.gravity.force.theta, c.gravity.force.eps), (0.5, 0.2));
        c.validate().unwrap();
        for bad in ["0", "-3", "\"sometimes\"", "2.5", "true", "\"\""] {
            let msg = parse_err(&format!("[gravity]\nrebuild = {bad}"));
            assert!(msg.starts_with("run.toml:2:"), "{bad}: {msg}");
            assert!(msg.contains("rebuild"), "{bad}: {msg}");
        }
    }

    #[test]
    fn ncrit_is_a_number_or_auto() {
        assert_eq!(parse("").unwrap().gravity.force.ncrit, LeafSize::Auto);
        let c = parse("[gravity]\nncrit = 16").unwrap();
        assert_eq!(c.gravity.force.ncrit, LeafSize::Fixed(16));
        for bad in ["0", "-3", "70000", "\"many\"", "2.5", "true"] {
            let msg = parse_err(&format!("[gravity]\nncrit = {bad}"));
            assert!(msg.starts_with("run.toml:2:"), "{bad}: {msg}");
            assert!(msg.contains("ncrit"), "{bad}: {msg}");
        }
    }

    #[test]
    fn malformed_toml_is_one_line() {
        let msg = parse_err("[gravity\ntheta = 0.5");
        assert!(msg.starts_with("run.toml:1:"), "{msg}");
        let msg = parse_err("[time]\ndt = = 1");
        assert!(msg.starts_with("run.toml:2:"), "{msg}");
        parse_err("[time]\ndt = 1\ndt = 2");
        // toml's own message is empty there (found by tests/fuzz.rs).
        for cut in ["[ics]\nmodel =", "[ics]\nmodel = "] {
            let msg = parse_err(cut);
            assert!(
                msg.ends_with(": the file ends where a value or name is expected"),
                "{msg}"
            );
        }
        // `dt` is another name of `dt_max`, not a second key.
        let msg = parse_err("[time]\ndt = 1\ndt_max = 2");
        assert!(msg.contains("dt_max"), "{msg}");
    }

    #[test]
    fn load_reads_and_names_the_file() {
        let dir = TestDir::new("config-load");
        let path = dir.path().join("run.toml");
        let err = RunConfig::load(&path).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Io);
        assert!(
            err.message.starts_with(&path.display().to_string()),
            "{err}"
        );
        std::fs::write(&path, "[time]\ndt = 0.5\n").unwrap();
        assert_eq!(RunConfig::load(&path).unwrap().time.dt_max, 0.5);
        std::fs::write(&path, "[time]\ndtt = 0.5\n").unwrap();
        let err = RunConfig::load(&path).unwrap_err();
        let prefix = format!("{}:2:1: unknown field `dtt`", path.display());
        assert!(err.message.starts_with(&prefix), "{err}");
    }

    #[test]
    fn float32_values_out_of_its_range_are_named() {
        for (s, expect) in [
            (
                "[gravity]\ntheta = 1e300",
                "run.toml:2:9: 1e300 is beyond the range",
            ),
            (
                "[gravity]\nalpha = -1e39",
                "run.toml:2:9: -1e39 is beyond the range",
            ),
            (
                "[gravity]\ntheta = 1e-50",
                "run.toml:2:9: 1e-50 is too small",
            ),
        ] {
            let msg = parse_err(s);
            assert!(msg.starts_with(expect), "{s:?}: {msg}");
        }
        let c = parse("[gravity]\ntheta = 1\nalpha = 3e38").unwrap();
        assert_eq!((c.gravity.force.theta, c.gravity.force.alpha), (1.0, 3e38));
        assert!(crate::forces::params::single_precision(f64::NAN)
            .unwrap()
            .is_nan());
        assert_eq!(
            crate::forces::params::single_precision(f64::INFINITY),
            Ok(f32::INFINITY)
        );
    }

    /// The keys (names and aliases) that deserializing a `T` accepts, as serde's derive lists
    /// them: a deserializer that records the field list it is handed and stops there.
    fn keys_of<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
        use serde::de::value::Error as E;
        use serde::de::{Error as _, Visitor};
        struct Fields(Vec<&'static str>);
        impl<'de> Deserializer<'de> for &mut Fields {
            type Error = E;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> std::result::Result<V::Value, E> {
                Err(E::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> std::result::Result<V::Value, E> {
                self.0 = fields.to_vec();
                Err(E::custom("recorded"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
                identifier ignored_any
            }
        }
        let mut f = Fields(Vec::new());
        assert!(T::deserialize(&mut f).is_err());
        f.0
    }

    /// The keys an example file lists, by table: `key = …` or `# key = …` (a key shown but not
    /// set) at the start of a line (the comment above the first table is prose).
    fn listed_keys(example: &str) -> Vec<(String, String)> {
        let mut listed: Vec<(String, String)> = Vec::new();
        let mut table = String::new();
        for line in example.lines() {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                table = name.to_string();
                continue;
            }
            let line = line.strip_prefix("# ").unwrap_or(line);
            let key: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !table.is_empty()
                && !key.is_empty()
                && line[key.len()..].trim_start().starts_with('=')
            {
                listed.push((table.clone(), key));
            }
        }
        listed
    }

    #[test]
    fn example_config_lists_every_key() {
        assert_eq!(
            keys_of::<RunConfig>(),
            ["ics", "gravity", "time", "output", "cosmology"]
        );
        // examples/plummer.toml lists the Newtonian tables, examples/cosmology-sphere.toml the
        // [cosmology] table (its presence makes a run comoving).
        let examples = [
            (
                "plummer.toml",
                include_str!("../../examples/plummer.toml"),
                vec![
                    ("ics", keys_of::<IcsConfig>()),
                    // [gravity] is the force parameters' keys and `rebuild` (GravityConfig).
                    (
                        "gravity",
                        [keys_of::<ForceParams>(), vec!["rebuild"]].concat(),
                    ),
                    ("time", keys_of::<TimeConfig>()),
                    ("output", keys_of::<OutputConfig>()),
                ],
            ),
            (
                "cosmology-sphere.toml",
                include_str!("../../examples/cosmology-sphere.toml"),
                vec![("cosmology", keys_of::<CosmologyConfig>())],
            ),
        ];
        for (name, text, accepted) in examples {
            let listed = listed_keys(text);
            for (table, keys) in &accepted {
                assert!(!keys.is_empty(), "[{table}]");
                for key in keys {
                    assert!(
                        listed.contains(&(table.to_string(), key.to_string())),
                        "examples/{name} does not list [{table}] {key}"
                    );
                }
            }
            for (table, key) in listed
                .iter()
                .filter(|(t, _)| name == "plummer.toml" || t == "cosmology")
            {
                assert!(
                    accepted
                        .iter()
                        .any(|(t, keys)| t == table && keys.contains(&key.as_str())),
                    "examples/{name} lists [{table}] {key}, which the configuration rejects"
                );
            }
        }
    }

    #[test]
    fn example_config_is_the_default_problem() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/plummer.toml"
        ));
        let c = RunConfig::load(path).unwrap();
        c.validate().unwrap();
        assert_eq!(c, RunConfig::default());
    }
}
