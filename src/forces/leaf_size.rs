//! The largest tree leaf, N_crit: a number of particles, or `auto`, the measured best of the
//! backend that walks. The CPU walk is fastest with leaves of 8 (fewer particle–particle
//! interactions for the same accuracy); the GPU list kernel with leaves of 16 (particle
//! interactions from shared memory are cheap, and the host builds half as many cells), at
//! unchanged errors (docs/performance.md).

use crate::error::{Error, Result};
use serde::Deserializer;
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Most particles in a tree leaf (N_crit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeafSize {
    /// [`LeafSize::CPU`] when the CPU walks, [`LeafSize::GPU`] when the GPU does.
    #[default]
    Auto,
    /// This many particles, 1 ..= 65536.
    Fixed(usize),
}

impl LeafSize {
    /// `auto` on the CPU.
    pub const CPU: usize = 8;
    /// `auto` on the GPU.
    pub const GPU: usize = 16;
    /// Largest leaf size accepted.
    pub const MAX: usize = 1 << 16;

    /// The leaf size in particles for a walk on the GPU (`gpu`) or on the CPU.
    pub fn resolve(self, gpu: bool) -> usize {
        match (self, gpu) {
            (Self::Fixed(n), _) => n,
            (Self::Auto, true) => Self::GPU,
            (Self::Auto, false) => Self::CPU,
        }
    }

    /// Checks a fixed size is within 1 ..= 65536.
    pub fn validate(self) -> Result<()> {
        match self {
            Self::Fixed(n) if !(1..=Self::MAX).contains(&n) => Err(Error::input(format!(
                "ncrit must be between 1 and 65536 or \"auto\" (got {n})"
            ))),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for LeafSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Fixed(n) => write!(f, "{n}"),
        }
    }
}

impl FromStr for LeafSize {
    type Err = Error;
    /// Parses "auto" or a number of particles in 1 ..= 65536.
    fn from_str(s: &str) -> Result<Self> {
        if s == "auto" {
            return Ok(Self::Auto);
        }
        let n = s.parse::<usize>().map_err(|_| {
            Error::input(format!(
                "ncrit must be between 1 and 65536 or \"auto\" (got '{s}')"
            ))
        })?;
        let size = Self::Fixed(n);
        size.validate()?;
        Ok(size)
    }
}

impl Serialize for LeafSize {
    /// `"auto"` or the number.
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Fixed(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for LeafSize {
    /// An integer in 1 ..= 65536 or the string `"auto"`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        super::params::number_or_name(d, "ncrit: an integer between 1 and 65536 or \"auto\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_resolves_per_backend_and_numbers_are_checked() {
        assert_eq!(LeafSize::Auto.resolve(false), LeafSize::CPU);
        assert_eq!(LeafSize::Auto.resolve(true), LeafSize::GPU);
        assert_eq!("12".parse::<LeafSize>().unwrap().resolve(true), 12);
        assert_eq!("auto".parse::<LeafSize>().unwrap(), LeafSize::Auto);
        for bad in ["0", "65537", "-3", "eight", "2.5"] {
            let e = bad.parse::<LeafSize>().unwrap_err();
            assert!(e.message.contains("ncrit"), "{bad}: {}", e.message);
        }
        assert_eq!(LeafSize::Fixed(16).to_string(), "16");
    }
}
