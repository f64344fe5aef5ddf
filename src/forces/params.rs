//! The parameters of a force evaluation: backend, method, walk, ordering and the numbers that
//! decide accuracy (θ, criterion, multipole order, N_crit, group sizes, ε, G).

use super::LeafSize;
use crate::domain::Balance;
use crate::error::{Error, Result};
use crate::sfc::Order;
use crate::walk::cpu::WalkParams;
use crate::walk::gpu::{VgChoice, WalkKernel};
use crate::walk::mac::{Criterion, Mac};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where the force walk runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// The rayon walk on the CPU cores.
    Cpu,
    /// The CUDA walk on this rank's GPU; an error where no usable GPU exists.
    Gpu,
    /// The GPU when one is usable, else the CPU.
    Auto,
}

/// How forces are computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Barnes–Hut tree walk.
    Tree,
    /// Exact O(N²) summation: float64 on the CPU; float32 on the GPU with `--backend gpu`.
    Direct,
}

/// Where the tree (keys, sort, topology, moments) is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TreeBuild {
    /// On the host's cores (rayon).
    Host,
    /// On the rank's GPU (`cuda/build.cu`) whenever the GPU walks, the same tree bit for bit
    /// on the float32 particles (the default: 2x faster evaluations at 2^24 on an H100,
    /// docs/performance.md); on the host when the CPU walks.
    Gpu,
}

/// Which CPU tree walk is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WalkKind {
    /// Groups of consecutive particles share one opening decision and one interaction list
    /// (the CPU analogue of the (V,G) kernel of seed 001).
    Grouped,
    /// One iterative next/more walk per particle (seed 004, Fig. 6).
    Single,
}

macro_rules! named_enum {
    ($t:ty, $what:literal, $( $v:path => $name:literal ),+ ) => {
        impl $t {
            /// The name used on the command line and in configs.
            pub fn name(self) -> &'static str {
                match self { $( $v => $name ),+ }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $( $name => Ok($v), )+
                    _ => Err(Error::input(format!(
                        concat!("unknown ", $what, " '{}' (expected one of: {})"),
                        s,
                        [$( $name ),+].join(", ")
                    ))),
                }
            }
        }
    };
}

named_enum!(Backend, "backend", Backend::Cpu => "cpu", Backend::Gpu => "gpu", Backend::Auto => "auto");
named_enum!(Method, "method", Method::Tree => "tree", Method::Direct => "direct");
named_enum!(TreeBuild, "tree build", TreeBuild::Host => "host", TreeBuild::Gpu => "gpu");
named_enum!(WalkKind, "walk", WalkKind::Grouped => "grouped", WalkKind::Single => "single");
named_enum!(Order, "ordering", Order::Hilbert => "hilbert", Order::Morton => "morton", Order::None => "none");

/// Everything that decides how one force evaluation is done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForceParams {
    /// Opening angle θ of the geometric criteria (dimensionless, > 0).
    pub theta: f32,
    /// Opening criterion.
    pub mac: Mac,
    /// Tolerance α of the acceleration criterion (dimensionless, > 0).
    pub alpha: f32,
    /// Multipole order of cell expansions: 1 = monopole, 2 = quadrupole.
    pub multipole: u8,
    /// Largest number of particles in a tree leaf (N_crit), or `auto` for the backend's best.
    pub ncrit: LeafSize,
    /// Number of consecutive particles that share one walk in the grouped walk.
    pub group: usize,
    /// Particle ordering (space-filling curve) used for the tree and the walk order.
    pub order: Order,
    /// Plummer softening length ε (length units, ≥ 0).
    pub eps: f64,
    /// Gravitational constant (1 in N-body units).
    pub g: f64,
    /// Tree walk or direct summation.
    pub method: Method,
    /// Which CPU walk.
    pub walk: WalkKind,
    /// Where the walk runs.
    pub backend: Backend,
    /// Shape of the GPU walk kernel: V targets per thread, G threads per group (the GPU's group
    /// of consecutive targets is V·G; `group` applies to the CPU walk only).
    pub vg: VgChoice,
    /// Which GPU walk kernel: seed 001's (V,G) walk or the interaction-list walk.
    pub kernel: WalkKernel,
    /// Where the tree is built when the GPU walks.
    pub tree_build: TreeBuild,
    /// Multi-rank runs: what the domain decomposition balances (particle counts or the
    /// interactions of the last evaluation).
    pub balance: Balance,
    /// Multi-rank runs: boxes per rank describing where its particles are when the other
    /// ranks build its LETs (1: the bounding box of seed 001; more: tighter, smaller LETs).
    pub let_boxes: usize,
}

impl Default for ForceParams {
    fn default() -> Self {
        Self {
            theta: 0.45,
            mac: Mac::Modified,
            alpha: 0.001,
            multipole: 2,
            ncrit: LeafSize::Auto,
            group: 64,
            order: Order::Hilbert,
            eps: 0.01,
            g: 1.0,
            method: Method::Tree,
            walk: WalkKind::Grouped,
            backend: Backend::Auto,
            vg: VgChoice::default(),
            kernel: WalkKernel::default(),
            tree_build: TreeBuild::Gpu,
            balance: Balance::Cost,
            let_boxes: 64,
        }
    }
}

impl ForceParams {
    /// What the walks need of these parameters (θ is already in the tree's S_eff).
    pub fn walk_params(&self) -> WalkParams {
        WalkParams {
            criterion: Criterion {
                mac: self.mac,
                alpha: self.alpha,
                g: self.g as f32,
            },
            eps2: (self.eps * self.eps) as f32,
            quadrupole: self.multipole >= 2,
        }
    }

    /// Checks every value; the error names the parameter and the rule it breaks.
    pub fn validate(&self) -> Result<()> {
        if !(self.theta.is_finite() && self.theta > 0.0) {
            return Err(Error::input(format!(
                "theta must be finite and > 0 (got {})",
                self.theta
            )));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(Error::input(format!(
                "alpha (acceleration criterion tolerance) must be finite and > 0 (got {})",
                self.alpha
            )));
        }
        if !(self.multipole == 1 || self.multipole == 2) {
            return Err(Error::input(format!(
                "multipole must be 1 (monopole) or 2 (quadrupole) (got {})",
                self.multipole
            )));
        }
        self.ncrit.validate()?;
        if !(1..=1 << 16).contains(&self.group) {
            return Err(Error::input(format!(
                "group size must be between 1 and 65536 (got {})",
                self.group
            )));
        }
        if !(1..=4096).contains(&self.let_boxes) {
            return Err(Error::input(format!(
                "let_boxes must be between 1 and 4096 (got {})",
                self.let_boxes
            )));
        }
        if let VgChoice::Fixed(l) = self.vg {
            l.validate_for(self.kernel)?;
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return Err(Error::input(format!(
                "softening eps must be finite and >= 0 (got {})",
                self.eps
            )));
        }
        if !(self.g.is_finite() && self.g > 0.0) {
            return Err(Error::input(format!(
                "gravitational constant G must be finite and > 0 (got {})",
                self.g
            )));
        }
        Ok(())
    }
}

/// Deserializes a value written either as an integer or as a string (e.g. `ncrit = 16` or
/// `ncrit = "auto"`) through its [`FromStr`], the integer by its decimal form, so that the
/// configuration file and the command line share one parser and its error messages.
/// `expecting` names the key and what it takes, for values of another type.
pub(crate) fn number_or_name<'de, D, T>(
    d: D,
    expecting: &'static str,
) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: FromStr<Err = Error>,
{
    use serde::de::{self, Visitor};
    struct V<T>(&'static str, std::marker::PhantomData<T>);
    impl<T: FromStr<Err = Error>> Visitor<'_> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<T, E> {
            self.visit_str(&v.to_string())
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<T, E> {
            self.visit_str(&v.to_string())
        }
        fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<T, E> {
            v.parse().map_err(|e: Error| E::custom(e.message))
        }
    }
    d.deserialize_any(V(expecting, std::marker::PhantomData))
}
