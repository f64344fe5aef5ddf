//! The shape of the GPU walk: which kernel walks, and its (V, G) layout.

use crate::error::{Error, Result};

/// Which GPU tree-walk kernel runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WalkKernel {
    /// Seed 001's (V,G) walk (`cuda/walk.cu`): G threads take one opening decision at a time
    /// and apply each accepted source as soon as it is found.
    Vg,
    /// The interaction-list walk (`cuda/walk_list.cu`, Bonsai's and Ryoanji's design): a warp
    /// tests 32 cells at once and applies the accepted ones in batches from shared memory.
    /// Faster at equal accuracy on an H100 (docs/performance.md), hence the default.
    #[default]
    List,
}

impl std::fmt::Display for WalkKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Vg => "vg",
            Self::List => "list",
        })
    }
}

impl std::str::FromStr for WalkKernel {
    type Err = Error;
    /// Parses "vg" or "list".
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "vg" => Ok(Self::Vg),
            "list" => Ok(Self::List),
            _ => Err(Error::input(format!(
                "GPU kernel must be vg or list, got '{s}'"
            ))),
        }
    }
}

/// The (V, G) shape of the walk kernel: V targets per thread, G threads per group sharing one
/// walk (G a power of two ≤ 32). A group serves V·G consecutive targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuLayout {
    /// Targets per thread.
    pub v: u32,
    /// Threads per group.
    pub g: u32,
}

impl GpuLayout {
    /// Checks V ∈ 1..=16 and G a power of two in 1..=32.
    pub fn validate(&self) -> Result<()> {
        if !(1..=16).contains(&self.v) || !self.g.is_power_of_two() || self.g > 32 {
            return Err(Error::input(format!(
                "GPU layout V,G = {},{} is not supported (V in 1..=16, G a power of two <= 32)",
                self.v, self.g
            )));
        }
        Ok(())
    }

    /// Targets per group, V·G.
    pub fn group(&self) -> usize {
        (self.v * self.g) as usize
    }
}

impl GpuLayout {
    /// Checks the layout and that `kernel` can run it: the list kernel walks one group per
    /// warp, so its G is 32.
    pub fn validate_for(&self, kernel: WalkKernel) -> Result<()> {
        self.validate()?;
        if kernel == WalkKernel::List && self.g != 32 {
            return Err(Error::input(format!(
                "the list kernel walks one group per warp: G must be 32 (got V,G = {self}; use --kernel vg for G < 32)"
            )));
        }
        Ok(())
    }

    /// The layouts `--vg auto` times for `kernel`: the fastest of the seed-001-style sweep on
    /// an H100 (docs/performance.md) and their neighbours.
    pub fn candidates(kernel: WalkKernel) -> &'static [GpuLayout] {
        const V2: GpuLayout = GpuLayout { v: 2, g: 32 };
        const V4: GpuLayout = GpuLayout { v: 4, g: 32 };
        const V8: GpuLayout = GpuLayout { v: 8, g: 32 };
        match kernel {
            WalkKernel::Vg => &[V2, V4, V8, GpuLayout { v: 4, g: 16 }],
            WalkKernel::List => &[V2, V4, V8],
        }
    }
}

impl Default for GpuLayout {
    fn default() -> Self {
        // Fastest at equal accuracy with the list kernel on an H100 (docs/performance.md); the
        // (V,G) kernel is fastest at 4,32.
        Self { v: 2, g: 32 }
    }
}

impl std::fmt::Display for GpuLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.v, self.g)
    }
}

impl std::str::FromStr for GpuLayout {
    type Err = Error;
    /// Parses "V,G", e.g. "2,16".
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::input(format!(
                "GPU layout must be written V,G (e.g. 2,16), got '{s}'"
            ))
        };
        let (v, g) = s.split_once(',').ok_or_else(bad)?;
        let layout = Self {
            v: v.trim().parse().map_err(|_| bad())?,
            g: g.trim().parse().map_err(|_| bad())?,
        };
        layout.validate()?;
        Ok(layout)
    }
}

/// How the (V, G) layout is chosen: fixed, or by timing [`GpuLayout::CANDIDATES`] on the first
/// force evaluation (`--vg auto`; seed 001 finds the best pair depends on the distribution).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum VgChoice {
    /// Time the candidates once, keep the fastest.
    Auto,
    /// Always this layout.
    Fixed(GpuLayout),
}

impl Default for VgChoice {
    fn default() -> Self {
        Self::Fixed(GpuLayout::default())
    }
}

impl VgChoice {
    /// The layout to compile first.
    pub fn initial(self) -> GpuLayout {
        match self {
            Self::Auto => GpuLayout::default(),
            Self::Fixed(l) => l,
        }
    }
}

impl std::fmt::Display for VgChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Fixed(l) => l.fmt(f),
        }
    }
}

impl std::str::FromStr for VgChoice {
    type Err = Error;
    /// Parses "auto" or "V,G".
    fn from_str(s: &str) -> Result<Self> {
        if s == "auto" {
            Ok(Self::Auto)
        } else {
            s.parse().map(Self::Fixed)
        }
    }
}
