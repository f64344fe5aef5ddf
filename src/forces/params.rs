//! The parameters of a force evaluation: backend, method, walk, ordering and the numbers that
//! decide accuracy (θ, criterion, multipole order, N_crit, group sizes, ε, G).

use super::LeafSize;
use crate::comm::Exchange;
use crate::domain::Balance;
use crate::error::{Error, Result};
pub use crate::lets::LetWalk;
pub use crate::resources::GpuMemory;
use crate::sfc::Order;
pub use crate::tree::TreeBuild;
use crate::walk::cpu::WalkParams;
use crate::walk::gpu::{VgChoice, WalkKernel};
use crate::walk::mac::{Criterion, Mac};
pub use crate::walk::WalkKind;
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
                    _ => Err(Error::unknown_name($what, s, &[$( $name ),+])),
                }
            }
        }
    };
}

named_enum!(Backend, "backend", Backend::Cpu => "cpu", Backend::Gpu => "gpu", Backend::Auto => "auto");
named_enum!(LetWalk, "LET walk", LetWalk::Auto => "auto", LetWalk::Merged => "merged", LetWalk::Apart => "apart");
named_enum!(Exchange, "exchange", Exchange::Auto => "auto", Exchange::Nccl => "nccl", Exchange::Ipc => "ipc", Exchange::Mpi => "mpi");
named_enum!(GpuMemory, "GPU memory plan", GpuMemory::Auto => "auto", GpuMemory::Keep => "keep", GpuMemory::Release => "release");
named_enum!(Method, "method", Method::Tree => "tree", Method::Direct => "direct");
named_enum!(TreeBuild, "tree build", TreeBuild::Host => "host", TreeBuild::Gpu => "gpu");
named_enum!(WalkKind, "walk", WalkKind::Grouped => "grouped", WalkKind::Single => "single");
named_enum!(Order, "ordering", Order::Hilbert => "hilbert", Order::Morton => "morton", Order::None => "none");

/// Everything that decides how one force evaluation is done: the one definition of the
/// force options of the command line (`--NAME`, `--G` for `g`, `-` for `_`, with these
/// comments as help) and of a run configuration's `[gravity]` table (key `NAME`, `G` for `g`;
/// `crate::io::config` adds `rebuild`), defaults from [`ForceParams::default`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct ForceParams {
    /// Opening angle θ of the geometric criteria (dimensionless, > 0).
    #[arg(long, allow_negative_numbers = true, default_value_t = ForceParams::default().theta,
          value_parser = parse_single)]
    #[serde(deserialize_with = "single")]
    pub theta: f32,
    /// Opening criterion: bh (l/d < θ), modified (l/θ + s < d), accel (GADGET's relative
    /// criterion, G M l²/d⁴ < α |a_old|).
    #[arg(long, default_value_t = ForceParams::default().mac)]
    #[serde(deserialize_with = "by_name")]
    pub mac: Mac,
    /// Tolerance α of the acceleration criterion (dimensionless, > 0).
    #[arg(long, allow_negative_numbers = true, default_value_t = ForceParams::default().alpha,
          value_parser = parse_single)]
    #[serde(deserialize_with = "single")]
    pub alpha: f32,
    /// Multipole order of the cells: 1 (monopole) or 2 (quadrupole).
    #[arg(long, default_value_t = ForceParams::default().multipole)]
    pub multipole: u8,
    /// Largest number of particles in a tree leaf (N_crit, 1 ..= 65536), or auto: 8 when the
    /// CPU walks, 16 when the GPU does.
    #[arg(long, default_value_t = ForceParams::default().ncrit)]
    pub ncrit: LeafSize,
    /// Particles per group in the CPU's grouped walk (1 ..= 65536; the GPU's groups are V·G
    /// targets, see vg).
    #[arg(long, default_value_t = ForceParams::default().group)]
    pub group: usize,
    /// Particle ordering (space-filling curve) of the tree and the walk: hilbert, morton, none.
    #[arg(long, default_value_t = ForceParams::default().order)]
    #[serde(deserialize_with = "by_name")]
    pub order: Order,
    /// Plummer softening length ε (length units, ≥ 0).
    #[arg(long, allow_negative_numbers = true, default_value_t = ForceParams::default().eps)]
    pub eps: f64,
    /// Gravitational constant (> 0; 1 in N-body units).
    #[arg(long = "G", allow_negative_numbers = true, default_value_t = ForceParams::default().g)]
    #[serde(rename = "G")]
    pub g: f64,
    /// Force method: tree, or direct (exact summation: float64 on the CPU, float32 on the GPU
    /// with backend gpu).
    #[arg(long, default_value_t = ForceParams::default().method)]
    #[serde(deserialize_with = "by_name")]
    pub method: Method,
    /// CPU tree walk: grouped, or single (one next/more walk per particle).
    #[arg(long, default_value_t = ForceParams::default().walk)]
    #[serde(deserialize_with = "by_name")]
    pub walk: WalkKind,
    /// Where the walk runs: cpu, gpu, auto (the GPU when one is usable).
    #[arg(long, default_value_t = ForceParams::default().backend)]
    #[serde(deserialize_with = "by_name")]
    pub backend: Backend,
    /// GPU kernel shape "V,G" (V targets per thread, G threads, a power of two ≤ 32, per group
    /// of V·G consecutive targets), "auto" to time a few shapes on the first force evaluation
    /// and keep the fastest, or "default": 2,32 with open boundaries, 1,32 in a periodic box.
    #[arg(long, default_value_t = ForceParams::default().vg)]
    #[serde(deserialize_with = "by_name")]
    pub vg: VgChoice,
    /// GPU walk kernel: vg (seed 001's (V,G) walk) or list (interaction lists per warp, G = 32).
    #[arg(long, default_value_t = ForceParams::default().kernel)]
    #[serde(deserialize_with = "by_name")]
    pub kernel: WalkKernel,
    /// Where the tree is built when the GPU walks: gpu, or host (the CPU cores, always when the
    /// CPU walks).
    #[arg(long, default_value_t = ForceParams::default().tree_build)]
    #[serde(deserialize_with = "by_name")]
    pub tree_build: TreeBuild,
    /// GPU device memory: keep (every array kept from step to step: nothing allocated in a
    /// step), release (each stage's transient arrays released at its end: the peak is the
    /// largest stage, for the most particles a GPU holds), auto (keep where that fits).
    #[arg(long, default_value_t = ForceParams::default().gpu_memory)]
    #[serde(deserialize_with = "by_name")]
    pub gpu_memory: GpuMemory,
    /// Multi-rank load balance: count (equal particles) or cost (equal interactions of the
    /// last evaluation).
    #[arg(long, default_value_t = ForceParams::default().balance)]
    #[serde(deserialize_with = "by_name")]
    pub balance: Balance,
    /// Multi-rank: the load imbalance (max / mean over the ranks of their particles' summed
    /// interactions in the last evaluation; finite, ≥ 1) above which the domains are
    /// rebalanced before an evaluation that rebuilds the tree; the first is always balanced.
    #[arg(long, allow_negative_numbers = true,
          default_value_t = ForceParams::default().rebalance)]
    pub rebalance: f64,
    /// Side of the periodic box (length units; the particles live in [0, box)³): forces of
    /// the nearest images plus the Ewald correction of all others; 0: open boundaries.
    #[arg(long = "box", value_name = "L", allow_negative_numbers = true,
          default_value_t = ForceParams::default().box_size)]
    #[serde(rename = "box")]
    pub box_size: f64,
    /// Multi-rank: boxes per rank describing its particles to the other ranks' LET builders
    /// (1 ..= 4096; 1: the bounding box of seed 001; more: tighter, smaller LETs).
    #[arg(long, default_value_t = ForceParams::default().let_boxes)]
    pub let_boxes: usize,
    /// Multi-rank: how the received LETs are walked: merged (into one tree with the local
    /// one, the cells that the domains' boundaries cut made whole again, walked once after the
    /// LETs arrive; on a GPU with the list kernel where memory is not short), apart (the local
    /// tree walked while the LETs travel, then the forest of LETs), or auto (merged in a
    /// periodic box, whose domains cut the trees' cells at every level; apart in open
    /// boundaries, whose domains are whole cells).
    #[arg(long, default_value_t = ForceParams::default().lets)]
    #[serde(deserialize_with = "by_name")]
    pub lets: LetWalk,
    /// Multi-rank, GPU backend: how the LETs go from GPU to GPU: auto (CUDA IPC where the
    /// ranks share one host, else NCCL where every rank can open it, else MPI), nccl (device to
    /// device; an error where NCCL cannot be had), ipc (device to device between the ranks of
    /// one host, ranks sharing a GPU too; an error elsewhere), mpi (staged through host memory).
    #[arg(long, default_value_t = ForceParams::default().exchange)]
    #[serde(deserialize_with = "by_name")]
    pub exchange: Exchange,
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
            gpu_memory: GpuMemory::Auto,
            balance: Balance::Cost,
            rebalance: 1.05,
            box_size: 0.0,
            let_boxes: 64,
            lets: LetWalk::Auto,
            exchange: Exchange::Auto,
        }
    }
}

impl ForceParams {
    /// Whether the evaluation is in a periodic box (`box_size` > 0) rather than open.
    pub fn periodic(&self) -> bool {
        self.box_size > 0.0
    }

    /// What the walks need of these parameters (θ is already in the tree's S_eff) in the frame
    /// of a tree whose cube has side `side` (length units): ε² in units of side².
    pub fn walk_params(&self, side: f64) -> WalkParams {
        let eps = self.eps / side;
        WalkParams {
            criterion: Criterion {
                mac: self.mac,
                alpha: self.alpha,
                g: self.g as f32,
            },
            eps2: (eps * eps) as f32,
            quadrupole: self.multipole >= 2,
            periodic: self.periodic(),
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
        if !(self.rebalance.is_finite() && self.rebalance >= 1.0) {
            return Err(Error::input(format!(
                "rebalance (the load imbalance that rebalances the domains) must be finite and \
                 >= 1 (got {})",
                self.rebalance
            )));
        }
        if !(self.box_size.is_finite() && self.box_size >= 0.0) {
            return Err(Error::input(format!(
                "the periodic box must be finite and >= 0 (0: open boundaries; got {})",
                self.box_size
            )));
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

/// `x` as a float32 value, or an error when float32 cannot hold it: a finite `x` beyond
/// ±`f32::MAX` (it would become infinite) or a non-zero one that rounds to zero. NaN and
/// infinities pass unchanged (they are what the user wrote; validation names them).
pub fn single_precision(x: f64) -> Result<f32> {
    let y = x as f32;
    if x.is_finite() && y.is_infinite() {
        return Err(Error::input(format!(
            "{x:e} is beyond the range of a 32-bit float (at most {:.3e})",
            f32::MAX
        )));
    }
    if x != 0.0 && y == 0.0 {
        return Err(Error::input(format!(
            "{x:e} is too small for a 32-bit float (it would be 0)"
        )));
    }
    Ok(y)
}

/// Parses a number for a float32 option through [`single_precision`], refusing values float32
/// cannot hold instead of turning them into infinity or zero.
fn parse_single(s: &str) -> std::result::Result<f32, String> {
    let x: f64 = s.trim().parse().map_err(|e| format!("{e}"))?;
    single_precision(x).map_err(|e| e.message)
}

/// Deserializes a number into a float32 field through [`single_precision`].
fn single<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f32, D::Error> {
    single_precision(f64::deserialize(d)?).map_err(|e| serde::de::Error::custom(e.message))
}

/// Deserializes a string through `T`'s [`FromStr`], whose error lists the accepted names (the
/// command line's parser, so that configurations and options share names and messages).
pub(crate) fn by_name<'de, D, T>(d: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    let name = String::deserialize(d)?;
    name.parse().map_err(serde::de::Error::custom)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::walk::gpu::GpuLayout;
    use clap::Parser;

    /// A command line holding only the force options.
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        params: ForceParams,
    }

    fn parse(args: &[&str]) -> std::result::Result<ForceParams, clap::Error> {
        Cli::try_parse_from(std::iter::once("hinoki").chain(args.iter().copied())).map(|c| c.params)
    }

    #[test]
    fn the_command_line_has_the_defaults_and_every_flag() {
        assert_eq!(parse(&[]).unwrap(), ForceParams::default());
        let p = parse(&[
            "--theta",
            "0.5",
            "--mac",
            "accel",
            "--alpha",
            "0.002",
            "--multipole",
            "1",
            "--ncrit",
            "16",
            "--group",
            "32",
            "--order",
            "morton",
            "--eps",
            "0.02",
            "--G",
            "2",
            "--method",
            "direct",
            "--walk",
            "single",
            "--backend",
            "cpu",
            "--vg",
            "4,16",
            "--kernel",
            "vg",
            "--tree-build",
            "host",
            "--gpu-memory",
            "release",
            "--balance",
            "count",
            "--rebalance",
            "1.2",
            "--let-boxes",
            "8",
            "--lets",
            "apart",
            "--exchange",
            "mpi",
        ])
        .unwrap();
        let want = ForceParams {
            theta: 0.5,
            mac: Mac::Acceleration,
            alpha: 0.002,
            multipole: 1,
            ncrit: LeafSize::Fixed(16),
            group: 32,
            order: Order::Morton,
            eps: 0.02,
            g: 2.0,
            method: Method::Direct,
            walk: WalkKind::Single,
            backend: Backend::Cpu,
            vg: VgChoice::Fixed(GpuLayout { v: 4, g: 16 }),
            kernel: WalkKernel::Vg,
            tree_build: TreeBuild::Host,
            gpu_memory: GpuMemory::Release,
            balance: Balance::Count,
            rebalance: 1.2,
            box_size: 0.0,
            let_boxes: 8,
            lets: LetWalk::Apart,
            exchange: Exchange::Mpi,
        };
        assert_eq!(p, want);
        // Negative numbers reach validate(), which names them.
        let e = parse(&["--theta", "-1"]).unwrap().validate().unwrap_err();
        assert!(e.message.starts_with("theta must be"), "{}", e.message);
        for bad in ["0.99", "-1", "nan", "inf"] {
            let e = parse(&["--rebalance", bad])
                .unwrap()
                .validate()
                .unwrap_err();
            assert!(
                e.message.starts_with("rebalance (the load"),
                "{}",
                e.message
            );
            assert!(!e.message.contains('\n'), "{}", e.message);
        }
        let e = parse(&["--mac", "barnes"]).expect_err("an unknown name");
        assert!(e.to_string().contains("bh, modified, accel"), "{e}");
    }

    #[test]
    fn the_help_is_the_field_documentation() {
        use clap::CommandFactory;
        let cmd = Cli::command();
        let help = |long: &str| {
            let arg = cmd.get_arguments().find(|a| a.get_long() == Some(long));
            arg.and_then(|a| a.get_help()).map(|h| h.to_string())
        };
        assert_eq!(
            help("eps").as_deref(),
            Some("Plummer softening length ε (length units, ≥ 0)")
        );
        assert!(help("G").unwrap().starts_with("Gravitational constant"));
        assert!(help("tree-build").unwrap().contains("gpu, or host"));
    }
}
