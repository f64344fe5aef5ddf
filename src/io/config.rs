//! The run configuration: a TOML file with four tables, every key optional (defaults below).
//! Units are those of the run: N-body (Hénon) units with G = 1 unless `G` says otherwise.
//! `examples/plummer.toml` is a complete, commented example at the default problem.
//!
//! ```toml
//! [ics]                # where the particles come from: model (with n, seed) or file
//! model = "plummer"    # a name of crate::ics::Model::NAMES (plummer, nfw, cartwheel, ...)
//! n = 65536            # number of particles generated, 1 ..= 2^32 - 1
//! seed = 1             # random seed of the generator
//! # file = "ics.bin"   # a hinoki IC file instead (see crate::io::icfile); excludes model, n, seed
//!
//! [gravity]
//! theta = 0.45         # opening angle θ (dimensionless, > 0)
//! mac = "modified"     # opening criterion: bh | modified | accel
//! alpha = 0.001        # tolerance α of the accel criterion (dimensionless, > 0)
//! multipole = 2        # 1 = monopole, 2 = quadrupole
//! ncrit = 8            # most particles in a tree leaf, 1 ..= 65536
//! group = 64           # particles sharing one walk in the grouped walk, 1 ..= 65536
//! order = "hilbert"    # particle ordering: hilbert | morton | none
//! eps = 0.01           # Plummer softening length (length units, >= 0)
//! G = 1.0              # gravitational constant (> 0)
//! method = "tree"      # tree | direct
//! walk = "grouped"     # grouped | single
//! backend = "auto"     # cpu | gpu | auto
//!
//! [time]
//! dt = 0.03125         # time step (time units, > 0, <= t_end)
//! t_end = 6.0          # end time (time units, > 0)
//!
//! [output]
//! dir = "hinoki-out"   # output directory
//! energy_every = 10    # steps between diagnostics lines (>= 1)
//! ```
//!
//! Unknown tables or keys are errors, as are values of the wrong type or unknown names; the
//! error is one line naming the file, the line and column, and the key or value. Relative paths
//! (`file`, `dir`) are taken relative to the working directory, not to the configuration file.
//! Parsing checks only types and names: call [`RunConfig::validate`] (after any command-line
//! overrides) before a run starts.

use crate::error::{Error, Result};
use crate::forces::{Backend, ForceParams, Method, WalkKind};
use crate::ics::Model;
use crate::sfc::Order;
use crate::walk::gpu::VgChoice;
use crate::walk::mac::Mac;
use serde::{Deserialize, Deserializer};
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A complete run configuration: the tables `[ics]`, `[gravity]`, `[time]` and `[output]`.
/// The default is hinoki's built-in problem: a Plummer sphere of 65536 particles (seed 1),
/// ε = 0.01, dt = 1/32, integrated to t = 6 (about 2 crossing times of 2√2 in Hénon units).
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
}

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
    /// Read a hinoki IC file with [`crate::io::read_ic`] (key `file`).
    File(PathBuf),
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

/// The `[ics]` table as written, before the choice between model and file is made.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IcsTable {
    #[serde(default, deserialize_with = "some_by_name")]
    model: Option<Model>,
    n: Option<usize>,
    seed: Option<u64>,
    file: Option<PathBuf>,
}

impl TryFrom<IcsTable> for IcsConfig {
    type Error = String;

    fn try_from(t: IcsTable) -> std::result::Result<Self, String> {
        match t.file {
            Some(_) if t.model.is_some() || t.n.is_some() || t.seed.is_some() => Err(concat!(
                "[ics] `file` cannot be combined with `model`, `n` or `seed` ",
                "(choose one source of particles)"
            )
            .to_string()),
            Some(file) => Ok(Self::File(file)),
            None => Ok(Self::Generate {
                model: t.model.unwrap_or(Model::Plummer),
                n: t.n.unwrap_or(DEFAULT_N),
                seed: t.seed.unwrap_or(DEFAULT_SEED),
            }),
        }
    }
}

/// The `[gravity]` table: the fields of [`ForceParams`] under their configuration names, with
/// the defaults of [`ForceParams::default`]. Enumerations are given by their command-line names.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GravityConfig {
    /// Opening angle θ (`theta`, dimensionless, > 0).
    pub theta: f32,
    /// Opening criterion (`mac`: `"bh"`, `"modified"` or `"accel"`).
    #[serde(deserialize_with = "by_name")]
    pub mac: Mac,
    /// Tolerance α of the acceleration criterion (`alpha`, dimensionless, > 0).
    pub alpha: f32,
    /// Multipole order (`multipole`: 1 = monopole, 2 = quadrupole).
    pub multipole: u8,
    /// Most particles in a tree leaf (`ncrit`, 1 ..= 65536).
    pub ncrit: usize,
    /// Particles that share one walk in the grouped walk (`group`, 1 ..= 65536).
    pub group: usize,
    /// Particle ordering (`order`: `"hilbert"`, `"morton"` or `"none"`).
    #[serde(deserialize_with = "by_name")]
    pub order: Order,
    /// Plummer softening length ε (`eps`, length units, ≥ 0).
    pub eps: f64,
    /// Gravitational constant (`G`, > 0; 1 in N-body units).
    #[serde(rename = "G")]
    pub g: f64,
    /// Tree walk or direct summation (`method`: `"tree"` or `"direct"`).
    #[serde(deserialize_with = "by_name")]
    pub method: Method,
    /// Which CPU walk (`walk`: `"grouped"` or `"single"`).
    #[serde(deserialize_with = "by_name")]
    pub walk: WalkKind,
    /// Where the walk runs (`backend`: `"cpu"`, `"gpu"` or `"auto"`).
    #[serde(deserialize_with = "by_name")]
    pub backend: Backend,
    /// Shape of the GPU walk kernel (`vg`: `"V,G"`, V targets per thread, G threads per group,
    /// or `"auto"`: the fastest of a few, timed on the first force evaluation).
    #[serde(deserialize_with = "by_name")]
    pub vg: VgChoice,
}

impl Default for GravityConfig {
    fn default() -> Self {
        let f = ForceParams::default();
        Self {
            theta: f.theta,
            mac: f.mac,
            alpha: f.alpha,
            multipole: f.multipole,
            ncrit: f.ncrit,
            group: f.group,
            order: f.order,
            eps: f.eps,
            g: f.g,
            method: f.method,
            walk: f.walk,
            backend: f.backend,
            vg: f.vg,
        }
    }
}

/// The `[time]` table.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeConfig {
    /// The time step (`dt`, time units, finite, > 0, ≤ `t_end`; default 1/32).
    pub dt: f64,
    /// The end time; the run starts at t = 0 (`t_end`, time units, finite, > 0; default 10).
    pub t_end: f64,
}

impl Default for TimeConfig {
    fn default() -> Self {
        Self {
            dt: 0.03125,
            t_end: 6.0,
        }
    }
}

/// The `[output]` table.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// The directory that receives the run's files (`dir`, default `"hinoki-out"`).
    pub dir: PathBuf,
    /// Steps between two diagnostics lines (`energy_every`, ≥ 1, default 10).
    pub energy_every: u64,
}

impl Default for OutputConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("hinoki-out"),
            energy_every: 10,
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
        toml::from_str(s).map_err(|e: toml::de::Error| {
            let at = e.span().map_or(String::new(), |span| {
                let before = &s[..span.start.min(s.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |k| k + 1) + 1;
                format!("{line}:{column}:")
            });
            // toml puts details on further lines ("invalid table header\nexpected `.`, `]`").
            let message: Vec<&str> = e
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            Error::input(format!("{origin}:{at} {}", message.join(": ")))
        })
    }

    /// The `[gravity]` table as the parameters of a force evaluation.
    pub fn force_params(&self) -> ForceParams {
        let g = &self.gravity;
        ForceParams {
            theta: g.theta,
            mac: g.mac,
            alpha: g.alpha,
            multipole: g.multipole,
            ncrit: g.ncrit,
            group: g.group,
            order: g.order,
            eps: g.eps,
            g: g.g,
            method: g.method,
            walk: g.walk,
            backend: g.backend,
            vg: g.vg,
        }
    }

    /// Checks every value before a run starts; the error names the table and key, the rule and
    /// the offending value, e.g. `[time] dt must be finite and > 0 (got -1)`.
    pub fn validate(&self) -> Result<()> {
        if let IcsConfig::Generate { n, .. } = self.ics {
            if !(1..=u32::MAX as usize).contains(&n) {
                return Err(Error::input(format!(
                    "[ics] n must be between 1 and {} (got {n})",
                    u32::MAX
                )));
            }
        }
        self.force_params()
            .validate()
            .map_err(|e| Error::input(format!("[gravity] {e}")))?;
        let TimeConfig { dt, t_end } = self.time;
        if !(dt.is_finite() && dt > 0.0) {
            return Err(Error::input(format!(
                "[time] dt must be finite and > 0 (got {dt})"
            )));
        }
        if !(t_end.is_finite() && t_end > 0.0) {
            return Err(Error::input(format!(
                "[time] t_end must be finite and > 0 (got {t_end})"
            )));
        }
        if dt > t_end {
            return Err(Error::input(format!(
                "[time] dt must not exceed t_end (got dt = {dt}, t_end = {t_end})"
            )));
        }
        if self.output.dir.as_os_str().is_empty() {
            return Err(Error::input("[output] dir must not be empty"));
        }
        if self.output.energy_every < 1 {
            return Err(Error::input(format!(
                "[output] energy_every must be >= 1 (got {})",
                self.output.energy_every
            )));
        }
        Ok(())
    }
}

/// Deserializes a string through `T`'s `FromStr`, whose error lists the accepted names.
fn by_name<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    let name = String::deserialize(d)?;
    name.parse().map_err(serde::de::Error::custom)
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
    use crate::error::ErrorKind;
    use crate::io::testdir::TestDir;
    use crate::walk::gpu::GpuLayout;

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
        assert_eq!(c.force_params(), ForceParams::default());
        assert_eq!(c.force_params().eps, 0.01);
        assert_eq!((c.time.dt, c.time.t_end), (0.03125, 6.0));
        assert_eq!(c.output.dir, PathBuf::from("hinoki-out"));
        assert_eq!(c.output.energy_every, 10);
        assert_eq!(parse("").unwrap(), c);
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
            backend = "cpu"
            vg = "2,16"
            [time]
            dt = 0.001
            t_end = 2.5
            [output]
            dir = "out/a"
            energy_every = 5
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
            c.force_params(),
            ForceParams {
                theta: 0.5,
                mac: Mac::Acceleration,
                alpha: 0.0005,
                multipole: 1,
                ncrit: 8,
                group: 64,
                order: Order::Morton,
                eps: 0.001,
                g: 2.0,
                method: Method::Direct,
                walk: WalkKind::Single,
                backend: Backend::Cpu,
                vg: VgChoice::Fixed(GpuLayout { v: 2, g: 16 }),
            }
        );
        assert_eq!((c.time.dt, c.time.t_end), (0.001, 2.5));
        assert_eq!(c.output.dir, PathBuf::from("out/a"));
        assert_eq!(c.output.energy_every, 5);
    }

    #[test]
    fn ics_source_is_model_or_file() {
        let c = parse("[ics]\nfile = \"ics.bin\"").unwrap();
        assert_eq!(c.ics, IcsConfig::File(PathBuf::from("ics.bin")));
        c.validate().unwrap();
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
        assert!(msg.contains("unknown field `thta`"), "{msg}");
        assert!(msg.contains("`theta`"), "{msg}");
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
        ] {
            let msg = parse_err(s);
            assert!(msg.starts_with("run.toml:2:"), "{msg}");
            assert!(msg.contains(expect), "{msg}");
        }
        let c = parse("[gravity]\nmac = \"bh\"").unwrap();
        assert_eq!(c.gravity.mac, Mac::BarnesHut);
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
            ("[gravity]\nncrit = 0", "[gravity] ncrit"),
            ("[gravity]\ngroup = 100000", "[gravity] group"),
            ("[gravity]\neps = -0.1", "[gravity] softening eps"),
            ("[gravity]\nG = 0", "[gravity] gravitational constant G"),
            (
                "[time]\ndt = -1",
                "[time] dt must be finite and > 0 (got -1)",
            ),
            ("[time]\ndt = nan", "[time] dt must be finite"),
            ("[time]\nt_end = 0", "[time] t_end must be finite and > 0"),
            ("[time]\nt_end = inf", "[time] t_end must be finite"),
            (
                "[time]\ndt = 2\nt_end = 1",
                "[time] dt must not exceed t_end",
            ),
            ("[output]\ndir = \"\"", "[output] dir"),
            (
                "[output]\nenergy_every = 0",
                "[output] energy_every must be >= 1",
            ),
        ] {
            let msg = invalid(s);
            assert!(msg.starts_with(expect), "{s:?}: {msg}");
        }
    }

    #[test]
    fn malformed_toml_is_one_line() {
        let msg = parse_err("[gravity\ntheta = 0.5");
        assert!(msg.starts_with("run.toml:1:"), "{msg}");
        let msg = parse_err("[time]\ndt = = 1");
        assert!(msg.starts_with("run.toml:2:"), "{msg}");
        parse_err("[time]\ndt = 1\ndt = 2");
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
        assert_eq!(RunConfig::load(&path).unwrap().time.dt, 0.5);
        std::fs::write(&path, "[time]\ndtt = 0.5\n").unwrap();
        let err = RunConfig::load(&path).unwrap_err();
        let prefix = format!("{}:2:1: unknown field `dtt`", path.display());
        assert!(err.message.starts_with(&prefix), "{err}");
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
