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
    /// an H100 (docs/performance.md) and their neighbours; for the list kernel groups of 32
    /// too, the fastest in a periodic box ([`GpuLayout::default_for`]).
    pub fn candidates(kernel: WalkKernel) -> &'static [GpuLayout] {
        const V2: GpuLayout = GpuLayout { v: 2, g: 32 };
        const V4: GpuLayout = GpuLayout { v: 4, g: 32 };
        const V8: GpuLayout = GpuLayout { v: 8, g: 32 };
        match kernel {
            WalkKernel::Vg => &[V2, V4, V8, GpuLayout { v: 4, g: 16 }],
            WalkKernel::List => &[PERIODIC_LAYOUT, V2, V4, V8],
        }
    }

    /// The layout of a walk whose `--vg` is `default`: [`GpuLayout::default`] (2,32) in open
    /// boundaries, [`PERIODIC_LAYOUT`] (1,32) in a periodic box.
    pub fn default_for(periodic: bool) -> Self {
        match periodic {
            true => PERIODIC_LAYOUT,
            false => Self::default(),
        }
    }
}

/// The layout of a periodic walk unless told otherwise: groups of 32, a target per lane. With
/// the Ewald corrections, the list kernel walked the 128³ box's z = 0 and z = 1 particles 15
/// and 17 % faster than in groups of 64 (2,32) at the same θ, with 3 % fewer
/// interactions; whole runs of the box took 20 % less on one H200 and 19 % on two
/// (docs/performance.md, "Groups of 32 in a periodic box").
pub const PERIODIC_LAYOUT: GpuLayout = GpuLayout { v: 1, g: 32 };

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

/// How the (V, G) layout is chosen: by the boundaries, fixed, or by timing
/// [`GpuLayout::candidates`] on the first force evaluation (`--vg auto`; seed 001 finds the
/// best pair depends on the distribution).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum VgChoice {
    /// [`GpuLayout::default_for`] the walk's boundaries.
    #[default]
    ByBoundaries,
    /// Time the candidates once, keep the fastest.
    Auto,
    /// Always this layout.
    Fixed(GpuLayout),
}

impl VgChoice {
    /// The layout to compile first, for a walk in a periodic box where `periodic`.
    pub fn initial(self, periodic: bool) -> GpuLayout {
        match self {
            Self::ByBoundaries | Self::Auto => GpuLayout::default_for(periodic),
            Self::Fixed(l) => l,
        }
    }
}

impl std::fmt::Display for VgChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ByBoundaries => f.write_str("default"),
            Self::Auto => f.write_str("auto"),
            Self::Fixed(l) => l.fmt(f),
        }
    }
}

impl std::str::FromStr for VgChoice {
    type Err = Error;
    /// Parses "default", "auto" or "V,G".
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "default" => Ok(Self::ByBoundaries),
            "auto" => Ok(Self::Auto),
            _ => s.parse().map(Self::Fixed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_layout_follows_the_boundaries() {
        let choice = VgChoice::default();
        assert_eq!(choice.to_string(), "default");
        assert_eq!("default".parse::<VgChoice>().unwrap(), choice);
        assert_eq!(choice.initial(false), GpuLayout { v: 2, g: 32 });
        assert_eq!(choice.initial(true), GpuLayout { v: 1, g: 32 });
        // A layout asked for is taken in either boundaries.
        let fixed: VgChoice = "4,32".parse().unwrap();
        for periodic in [false, true] {
            assert_eq!(fixed.initial(periodic), GpuLayout { v: 4, g: 32 });
        }
        assert_eq!("auto".parse::<VgChoice>().unwrap(), VgChoice::Auto);
        // Every default is among auto's candidates for the list kernel, and valid for it.
        for periodic in [false, true] {
            let l = choice.initial(periodic);
            assert!(GpuLayout::candidates(WalkKernel::List).contains(&l));
            l.validate_for(WalkKernel::List).unwrap();
        }
        let e = "1;32".parse::<VgChoice>().unwrap_err();
        assert!(e.message.contains("V,G"), "{e}");
    }
}
